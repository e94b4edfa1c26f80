"""Write server/syntax/_cxxlibrary.py: the names the C and C++ standard headers declare.

The names gate (server/syntax/_cscope.py) calls a C/C++ name undeclared only when no header
the file may include declares it. This lists them: every C++ standard header (through
libstdc++'s <bits/stdc++.h>, at the newest standard g++ knows) and every C standard header,
preprocessed by g++ and gcc; from that text, the names declared outside function bodies,
parameter lists and class bodies (what a user's code can name unqualified), and every
macro. A parse error keeps all the names in it: more names only make the gate pass more.
Names reserved to the implementation (`__x`, `_X`) are left out: the gate passes them all.

    python studies/cxx_library_names.py          # needs g++, gcc, tree-sitter-cpp

Run it again when a new compiler or standard adds names; commit the file it writes.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import tree_sitter
import tree_sitter_cpp

OUT = Path(__file__).resolve().parent.parent / "server" / "syntax" / "_cxxlibrary.py"

_C_HEADERS_TEXT = """
assert.h complex.h ctype.h errno.h fenv.h float.h inttypes.h iso646.h limits.h locale.h math.h
setjmp.h signal.h stdalign.h stdarg.h stdatomic.h stdbool.h stddef.h stdint.h stdio.h stdlib.h
stdnoreturn.h string.h tgmath.h threads.h time.h uchar.h wchar.h wctype.h
"""
C_HEADERS = _C_HEADERS_TEXT.split()
# Parts of a translation unit whose names user code cannot name unqualified.
_SKIP = frozenset(
    {
        "compound_statement",
        "parameter_list",
        "field_declaration_list",
        "template_argument_list",
        "template_parameter_list",
        "requires_clause",
        "requires_expression",
        "lambda_expression",
        "initializer_list",
        "argument_list",
        "comment",
        "string_literal",
        "raw_string_literal",
        "operator_name",  # `operator""y`: a literal's suffix, no name code can use
    }
)
_NAME_NODES = frozenset(
    {"identifier", "type_identifier", "field_identifier", "namespace_identifier"}
)
_RESERVED = re.compile(r"__|_[A-Z]")


def _stdcxx_headers(gxx: str) -> list[str]:
    """The headers <bits/stdc++.h> includes, by asking g++ where it is."""
    probe = subprocess.run(
        [gxx, "-std=gnu++23", "-x", "c++", "-E", "-H", "-"],
        input="#include <bits/stdc++.h>\n",
        capture_output=True,
        text=True,
        check=True,
    )
    first = next(ln for ln in probe.stderr.splitlines() if ln.startswith(". "))
    text = Path(first[2:].strip()).read_text()
    return re.findall(r"#\s*include\s*<([^>]+)>", text)


def _preprocess(compiler: list[str], source: str) -> tuple[str, str]:
    """(the preprocessed text, its macro definitions)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "all.src"
        path.write_text(source)
        text = subprocess.run(
            [*compiler, "-E", "-P", str(path)], capture_output=True, text=True, check=True
        ).stdout
        macros = subprocess.run(
            [*compiler, "-E", "-dM", str(path)], capture_output=True, text=True, check=True
        ).stdout
    return text, macros


def _declared(text: str) -> set[str]:
    data = text.encode()
    tree = tree_sitter.Parser(tree_sitter.Language(tree_sitter_cpp.language())).parse(data)
    names: set[str] = set()
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in _SKIP:
            continue
        if node.type in _NAME_NODES:
            names.add(data[node.start_byte : node.end_byte].decode())
            continue
        stack.extend(node.children)
    return names


def _block(words: list[str]) -> str:
    """A triple-quoted string of `words`, lines under 92 characters."""
    lines, line = [], ""
    for w in words:
        if line and len(line) + len(w) + 1 > 92:
            lines.append(line)
            line = ""
        line = f"{line} {w}" if line else w
    lines.append(line)
    return '"""\n' + "\n".join(lines) + '\n"""'


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.parse_args(argv)
    names: set[str] = set()
    cxx = _stdcxx_headers("g++")
    cxx_source = "".join(f"#include <{h}>\n" for h in ["bits/stdc++.h", *C_HEADERS])
    c_source = "".join(f"#include <{h}>\n" for h in C_HEADERS)
    for compiler, source in (
        (["g++", "-std=gnu++23", "-x", "c++"], cxx_source),
        (["gcc", "-std=gnu2x", "-x", "c"], c_source),
    ):
        text, macros = _preprocess(compiler, source)
        names |= _declared(text)
        names |= set(re.findall(r"^#define (\w+)", macros, re.M))
    names = {n for n in names if not _RESERVED.match(n)}
    version = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout
    words = sorted(names)
    headers = sorted({*cxx, "bits/stdc++.h", *C_HEADERS})
    OUT.write_text(
        '"""The names the C and C++ standard headers declare (written by\n'
        f"studies/cxx_library_names.py from {version.splitlines()[0]}; do not edit).\n\n"
        "HEADERS: the headers they come from (a file that includes any other may see more).\n"
        'NAMES: declared outside function, parameter and class bodies, and macros."""\n\n'
        f"_HEADERS_TEXT = {_block(headers)}\n_NAMES_TEXT = {_block(words)}\n\n"
        "HEADERS = frozenset(_HEADERS_TEXT.split())\nNAMES = frozenset(_NAMES_TEXT.split())\n"
    )
    print(f"{len(words)} names from {len(headers)} headers -> {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
