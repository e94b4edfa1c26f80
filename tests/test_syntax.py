"""Unit tests of the syntax gate (server/syntax): plain function calls, real parsers."""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path

import pytest

from synconfroute.server.syntax import (
    DEFAULT_BUDGET_S,
    CompilerConfig,
    SyntaxDocument,
    Verdict,
    _cmacros,
    _compilers,
    check_completion,
    detect_language,
    prepare_pch,
    supported_languages,
)
from synconfroute.server.syntax._treesitter import Splice
from synconfroute.server.syntax.languages import parser_for

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


def ts(prefix: str, completion: str, suffix: str, lang: str, **kw: object) -> Verdict:
    return check_completion(prefix, completion, suffix, lang, **kw)  # type: ignore[arg-type]


# ------------------------------------------------------------------ language detection


@pytest.mark.parametrize(
    ("language_id", "path", "expected"),
    [
        ("python", None, "python"),
        ("Python", None, "python"),
        ("java", None, "java"),
        ("cpp", None, "cpp"),
        ("c", "x.h", "c"),  # the editor's languageId wins over the extension
        ("typescriptreact", None, "tsx"),
        ("javascriptreact", None, "javascript"),
        ("go", None, "go"),
        ("rust", None, "rust"),
        (None, "/home/u/proj/a.py", "python"),
        (None, "file:///home/u/proj/Main.java", "java"),
        (None, "C:\\src\\x.CPP", "cpp"),
        (None, "a.hpp", "cpp"),
        (None, "a.h", "cpp"),
        (None, "a.c", "c"),
        (None, "a.mjs", "javascript"),
        (None, "a.ts", "typescript"),
        (None, "a.tsx", "tsx"),
        (None, "main.go", "go"),
        (None, "lib.rs", "rust"),
        ("plaintext", "notes.txt", None),
        ("cobol", None, None),
        (None, None, None),
        ("unknown-id", "a.py", "python"),  # unknown languageId: fall back to the file name
    ],
)
def test_detect_language(language_id: str | None, path: str | None, expected: str | None) -> None:
    assert detect_language(language_id, path) == expected


def test_all_grammars_installed() -> None:
    assert supported_languages() == [
        "c",
        "cpp",
        "go",
        "java",
        "javascript",
        "python",
        "rust",
        "tsx",
        "typescript",
    ]


# ------------------------------------------------------------------ per language
# (language, prefix, good completion, suffix, broken completion, (line, column) of the error)

CASES = [
    (
        "python",
        "def f(xs):\n    total = 0\n    for x in xs:\n        ",
        "total += g(x, 2)",
        "\n    return total\n",
        "total += g(x, 2",
        None,
    ),
    (
        "java",
        "class A {\n    int f(int x) {\n        int y = ",
        "g(x, 2) + 1;",
        "\n        return y;\n    }\n}\n",
        "g(x, 2 + 1;",
        (2, 26),
    ),
    (
        "cpp",
        "#include <vector>\nint f(std::vector<int>& v) {\n    int s = 0;\n    ",
        "for (int x : v) s += x;",
        "\n    return s;\n}\n",
        "for (int x : v s += x;",
        None,
    ),
    (
        "c",
        "int f(int *v, int n) {\n    int s = 0;\n    ",
        "for (int i = 0; i < n; i++) s += v[i];",
        "\n    return s;\n}\n",
        "for (int i = 0; i < n; i++ s += v[i];",
        None,
    ),
    (
        "javascript",
        "function f(xs) {\n  let s = 0;\n  ",
        "for (const x of xs) { s += g(x); }",
        "\n  return s;\n}\n",
        "for (const x of xs) { s += g(x; }",
        None,
    ),
    (
        "typescript",
        "function f(xs: number[]): number {\n  let s: number = 0;\n  ",
        "for (const x of xs) { s += x as number; }",
        "\n  return s;\n}\n",
        "for (const x of xs) { s += x as number; ",
        None,
    ),
    (
        "tsx",
        "const A = (p: {n: number}) => {\n  return ",
        "<div className='a'>{p.n}</div>;",
        "\n};\n",
        "<div className='a'>{p.n</div>;",
        None,
    ),
    (
        "go",
        "package main\n\nfunc f(xs []int) int {\n\ts := 0\n\t",
        "for _, x := range xs {\n\t\ts += x\n\t}",
        "\n\treturn s\n}\n",
        "for _, x := range xs {\n\t\ts += (x\n\t}",
        None,
    ),
    (
        "rust",
        "fn f(xs: &[i32]) -> i32 {\n    let mut s = 0;\n    ",
        "for x in xs.iter() { s += *x; }",
        "\n    s\n}\n",
        "for x in xs.iter() { s += *x; ",
        None,
    ),
]


@pytest.mark.parametrize(("lang", "pre", "good", "suf", "bad", "where"), CASES)
def test_valid_insertion(
    lang: str, pre: str, good: str, suf: str, bad: str, where: tuple[int, int] | None
) -> None:
    v = ts(pre, good, suf, lang)
    assert v.status == "valid", v
    assert v.valid and v.decided
    assert v.checker == "tree-sitter"
    assert v.mode == "tree-sitter"
    assert v.language == lang
    assert v.line is None and v.column is None
    assert 0 < v.elapsed_s < 1


@pytest.mark.parametrize(("lang", "pre", "good", "suf", "bad", "where"), CASES)
def test_broken_insertion(
    lang: str, pre: str, good: str, suf: str, bad: str, where: tuple[int, int] | None
) -> None:
    v = ts(pre, bad, suf, lang)
    assert v.status == "invalid", v
    assert not v.valid
    assert v.message
    assert v.line is not None and v.column is not None
    if where is not None:
        assert (v.line, v.column) == where
    # the error lies at or after the line where the completion starts
    assert v.line >= pre.count("\n")


@pytest.mark.parametrize(("lang", "pre", "good", "suf", "bad", "where"), CASES)
def test_buffer_broken_elsewhere(
    lang: str, pre: str, good: str, suf: str, bad: str, where: tuple[int, int] | None
) -> None:
    """A stray token far below the completion: the good completion is still valid, the bad
    one still invalid."""
    broken_suffix = suf + "\n\n@@@ ]] ((\n"
    assert SyntaxDocument(pre + broken_suffix, lang).tree.root_node.has_error  # type: ignore[union-attr]
    assert ts(pre, good, broken_suffix, lang).status == "valid"
    assert ts(pre, bad, broken_suffix, lang).status == "invalid"


# ------------------------------------------------------------------ kinds of breaks (Python)

PY_PRE = 'def f(xs, name):\n    """Sum."""\n    total = 0\n    for x in xs:\n'
PY_SUF = "\n    print(name)\n    return total\n"


@pytest.mark.parametrize(
    ("completion", "message", "where"),
    [
        # The bracket the completion opened and never closed, not where tree-sitter's
        # recovery began ("unexpected 'total'"): what the user must fix.
        ("        total += g(x, ", "'(' is never closed", (4, 18)),  # cut after a comma
        ("        total += g(x, 2", "'(' is never closed", (4, 18)),  # dropped ')'
        ("        total += g(x, 2))", "unexpected ')'", (4, 24)),  # added ')'
        ("        total += [x, 2", "'[' is never closed", (4, 17)),  # dropped ']'
        ("        log('total)", None, (4, 12)),  # string left open
        (
            "        total += 1\n       total += 2",
            "unindent does not match any outer indentation level",
            (5, 7),
        ),
        ("        total += 1\n            total += 2", "unexpected indent", (5, 12)),
        (
            "        if x:\n            total += 1\n         else:\n            pass",
            "'else' is not aligned with its statement",
            (6, 9),
        ),
        ("        if x:", "expected an indented block", (4, 13)),  # a header with no body
    ],
)
def test_python_breaks(completion: str, message: str | None, where: tuple[int, int]) -> None:
    assert ts(PY_PRE, "        total += g(x, 2)", PY_SUF, "python").status == "valid"
    v = ts(PY_PRE, completion, PY_SUF, "python")
    assert v.status == "invalid", (completion, v)
    if message is not None:
        assert v.message == message
    assert (v.line, v.column) == where, v


def test_python_indentation_is_checked_only_near_the_completion() -> None:
    # the buffer already has an inconsistent dedent far away; the completion is fine
    prefix = "def g():\n    a = 1\n   b = 2\n\n\ndef f(xs):\n    total = 0\n"
    assert ts(prefix, "    total += 1\n", "    return total\n", "python").status == "valid"


def test_python_cut_mid_token_can_still_be_valid_syntax() -> None:
    # "retu" is a valid expression statement: syntax cannot tell; the gate says valid
    assert ts(PY_PRE, "        retu", PY_SUF, "python").status == "valid"
    # while a cut inside an operator pair is not
    assert ts(PY_PRE, "        total = total *", PY_SUF, "python").status == "invalid"


def test_hole_in_the_buffer_is_fixed_by_the_completion() -> None:
    """FIM: the buffer without the middle is broken; the completion that fills the hole is
    valid, a broken filling is not."""
    prefix = "def f(x):\n    y = "
    suffix = "\n    return y\n"
    doc = SyntaxDocument(prefix + suffix, "python")
    assert doc.tree is not None and doc.tree.root_node.has_error
    at = len(prefix)
    assert doc.check("-x", at).status == "valid"
    assert doc.check("-(x", at).status == "invalid"
    # tree-sitter accepts a header with no body; the gate does not, next to the completion
    prefix = "def f(x):\n    if x > 0:\n"
    doc = SyntaxDocument(prefix + "\n    return x\n", "python")
    assert doc.check("        x = -x", len(prefix)).status == "valid"
    assert doc.check("", len(prefix)).status == "valid"  # not the completion's doing


def test_java_and_cpp_pre_broken_above() -> None:
    """An unfinished line above the cursor (the user is still typing there) and a completion
    far below it: the completion is not to blame."""
    java_pre = (
        "class A {\n    void g() {\n        foo(\n    }\n\n    int f(int x) {\n"
        "        int y = 0;\n        for (int i = 0; i < x; i++) {\n            "
    )
    java_suf = "\n        }\n        return y;\n    }\n}\n"
    assert ts(java_pre, "y += i * 2;", java_suf, "java").status == "valid"
    assert ts(java_pre, "y += (i * 2;", java_suf, "java").status == "invalid"
    cpp_pre = "int g() {\n    return (1 +\n}\n\nint f(int x) {\n    int y = 0;\n    "
    cpp_suf = "\n    return y;\n}\n"
    assert ts(cpp_pre, "y += x * 2;", cpp_suf, "cpp").status == "valid"
    assert ts(cpp_pre, "y += x * 2", cpp_suf, "cpp").status == "invalid"


# ------------------------------------------------------------------ C/C++ macros

MACRO_PRE = (
    "#include <cstdio>\n"
    "#define FOR(i,a,b) for(int i=a;i<b;i++)\n"
    "#define F(i,n)for(int i=0;i<n;++i)\n"
    "#define w while\n"
    "#define rep(i,n) FOR(i,0,n)\n"
    '#define DBG(x) printf("%d\\n", x);\n'
    "int main() {\n    int n = 5, x = 0;\n    "
)
MACRO_SUF = "\n    return x;\n}\n"


@pytest.mark.parametrize(
    "completion",
    [
        "FOR(i,0,n) x+=i;",
        "FOR(i,0,n)\n        FOR(j,0,i) x += i*j;",
        "F(k,n)F(l,n)if(k<l)x++;",
        "w(x<100) x*=2;",
        "rep(i,n) x+=i;",
        "DBG(x)",
        "int m = 3;\n    FOR(i,0,m) { x += i; }",
    ],
)
def test_cpp_statement_macros_are_valid(completion: str) -> None:
    v = ts(MACRO_PRE, completion, MACRO_SUF, "cpp")
    assert v.status == "valid", v


@pytest.mark.parametrize(
    "completion",
    ["FOR(i,0,n x+=i;", "FOR(i,0,n) x+=(i;", "w(x<100) x*=;", "FOR(i,0,n) { x+=i;"],
)
def test_cpp_broken_code_around_macros_is_invalid(completion: str) -> None:
    assert ts(MACRO_PRE, completion, MACRO_SUF, "cpp").status == "invalid"


def test_statement_macros_classification() -> None:
    src = MACRO_PRE.encode() + b"#define MAX(a,b) ((a)>(b)?(a):(b))\n#define ll long long\n"
    macros = _cmacros.statement_macros(src)
    assert macros == {
        b"FOR": "control",
        b"F": "control",
        b"w": "control",
        b"rep": "control",
        b"DBG": "statement",
    }


def test_neutralize_keeps_offsets_and_lines() -> None:
    src = b"#define FOR(i,a,b) for(int i=a;i<b;i++)\nFOR(i,0,\n n) x+=i;\nFOR(j,0,n x;\n"
    out = _cmacros.neutralize(src, {b"FOR": "control"})
    assert len(out) == len(src)
    assert [i for i, b in enumerate(out) if b == 0x0A] == [
        i for i, b in enumerate(src) if b == 0x0A
    ]
    assert out.splitlines()[0] == src.splitlines()[0]  # the #define line is left alone
    assert out.splitlines()[1].startswith(b"if(0)")
    assert out.splitlines()[3] == b"FOR(j,0,n x;"  # unbalanced: left for tree-sitter to report


# ------------------------------------------------------------------ the document: edits


def _random_edit(rng: random.Random, text: str) -> tuple[int, int, str]:
    pieces = [
        "x",
        "(",
        ")",
        "{",
        "}",
        "\n",
        "    ",
        "foo(a, b)",
        ";",
        "é",
        "😀",
        "if x:\n    y",
        "'s'",
    ]
    a = rng.randrange(len(text) + 1)
    b = min(len(text), a + rng.choice([0, 0, 1, 2, 5, 12]))
    ins = "".join(rng.choice(pieces) for _ in range(rng.choice([0, 1, 1, 2, 3])))
    return a, b, ins


def _sexp(doc: SyntaxDocument) -> str:
    assert doc.tree is not None
    return str(doc.tree.root_node)


def _full(lang: str, text: str) -> str:
    return str(parser_for(lang).parse(text.encode()).root_node)


SOURCES = {
    "python": "import os\n\n\ndef f(a, b):\n    'doc é'\n    if a:\n        return [a, b]\n"
    "    return {a: b}\n\n\nclass C:\n    def g(self):\n        return f(1, 2)\n",
    "java": "class A {\n  int f(int a) {\n    if (a > 0) { return a; }\n    return -a;\n  }\n"
    '  String s = "é😀";\n}\n',
    "cpp": "#include <vector>\nint f(int a) {\n  std::vector<int> v{1, 2};\n  for (int x : v)"
    ' a += x;\n  return a;\n}\nconst char* s = "é😀";\n',
}


@pytest.mark.parametrize("lang", sorted(SOURCES))
@pytest.mark.parametrize("encoding", ["utf-32", "utf-16", "utf-8"])
def test_incremental_edits_match_a_full_parse(lang: str, encoding: str) -> None:
    rng = random.Random(f"{lang}-{encoding}")
    text = SOURCES[lang]
    doc = SyntaxDocument(text, lang, encoding=encoding)  # type: ignore[arg-type]
    for step in range(150):
        a, b, ins = _random_edit(rng, text)
        if step % 2:
            doc.edit(_pos(text, a, encoding), _pos(text, b, encoding), ins)
        else:
            doc.edit_bytes(len(text[:a].encode()), len(text[:b].encode()), ins)
        text = text[:a] + ins + text[b:]
        assert doc.text == text
        if step % 3 == 0:  # several edits may pile up before one reparse
            assert _sexp(doc) == _full(lang, text), f"step {step}"
    assert _sexp(doc) == _full(lang, text)
    assert doc.version == 150


def _pos(text: str, offset: int, encoding: str) -> tuple[int, int]:
    before = text[:offset]
    line = before.count("\n")
    col_text = before[before.rfind("\n") + 1 :]
    if encoding == "utf-8":
        return line, len(col_text.encode())
    if encoding == "utf-16":
        return line, len(col_text.encode("utf-16-le")) // 2
    return line, len(col_text)


def test_positions_roundtrip_with_non_ascii() -> None:
    text = "a = 'é😀'\nb = 2\n"
    for enc, col in (("utf-32", 7), ("utf-16", 8), ("utf-8", 11)):
        doc = SyntaxDocument(text, "python", encoding=enc)  # type: ignore[arg-type]
        off = doc.byte_offset((0, col))
        assert text.encode()[:off].decode() == "a = 'é😀"
        assert doc.position(off) == (0, col)
    doc = SyntaxDocument(text, "python")
    assert doc.byte_offset((0, 99)) == len("a = 'é😀'".encode())  # past the end of the line
    assert doc.byte_offset((99, 0)) == len(text.encode())  # past the last line
    with pytest.raises(ValueError, match="outside the text"):
        doc.edit_bytes(5, 2, "x")


def test_check_does_not_change_the_document() -> None:
    text = SOURCES["python"]
    doc = SyntaxDocument(text, "python")
    before = _sexp(doc)
    for completion in ("x = (", "    return 1\n", "'open"):
        doc.check(completion, (6, 8))
        doc.check(completion, (6, 8), full=True)
    assert doc.text == text
    assert doc.version == 0
    assert _sexp(doc) == before


def test_incremental_and_full_reparse_agree() -> None:
    rng = random.Random(7)
    text = SOURCES["cpp"] * 5
    doc = SyntaxDocument(text, "cpp")
    for _ in range(60):
        at = rng.randrange(len(doc.data) + 1)
        comp = rng.choice(["x += 1;", "f(a, b", "}", "int y = 2;\n", "\n  return 0;\n", ""])
        # A generous budget: this compares the two parses, not their speed (a busy CI
        # machine must not turn one of them into a timeout).
        v1 = doc.check(comp, at, budget_s=5.0)
        v2 = doc.check(comp, at, full=True, budget_s=5.0)
        assert (v1.status, v1.line, v1.column, v1.message) == (
            v2.status,
            v2.line,
            v2.column,
            v2.message,
        )


def test_check_with_a_replacement_range() -> None:
    doc = SyntaxDocument("x = foo(1, 2)\ny = 3\n", "python")
    # replace "foo(1, 2)" by a completion
    assert doc.check("bar(3)", (0, 4), end=(0, 13)).status == "valid"
    assert doc.check("bar(3", (0, 4), end=(0, 13)).status == "invalid"


def test_check_positions_in_the_text_with_the_completion() -> None:
    doc = SyntaxDocument("def f():\n    return 1\n\n\nz = 1\n", "python")
    v = doc.check("\n    y = [1, 2\n", (2, 0))
    assert v.status == "invalid"
    assert v.line is not None and v.line >= 3


def test_empty_completion_is_valid() -> None:
    doc = SyntaxDocument("x = (\n", "python")
    assert doc.check("", 3).status == "valid"


def test_replace_all() -> None:
    doc = SyntaxDocument("x = 1\n", "python")
    doc.replace_all("def f(:\n")
    assert doc.check("\n", len(doc.data)).status == "valid"
    assert _sexp(doc) == _full("python", "def f(:\n")
    assert doc.version == 1


# ------------------------------------------------------------------ budgets and errors


def test_timeout_is_a_verdict() -> None:
    doc = SyntaxDocument("def f():\n    return 1\n" * 3000, "python")
    v = doc.check("x = 1\n", 0, budget_s=0.0)
    assert v.status == "timeout"
    assert not v.valid and not v.decided
    assert v.checker == "tree-sitter"
    assert "time budget" in v.message
    v = doc.check("x = (1\n", len(doc.data) // 2, budget_s=2e-4, full=True)
    assert v.status == "timeout"
    # the parser is reset: the next check is complete and right (an unclosed paren at the
    # top of 6,000 lines takes tree-sitter's error recovery a while: a bigger budget)
    assert doc.check("x = 1\n", 0, budget_s=5).status == "valid"
    assert doc.check("x = (1\n", 0, budget_s=5).status == "invalid"


def test_checks_under_a_deadline_retain_nothing() -> None:
    # py-tree-sitter 0.26 keeps a reference to every chunk its read callback returns: a
    # memoryview slice pinned the whole text, one copy of the document per check.
    import gc
    import tracemalloc

    from synconfroute.server.syntax._treesitter import parse

    text = "def f(x):\n    return x + 1\n\n" * 2000  # about 50 KB
    doc = SyntaxDocument(text, "python")
    parser = parser_for("python")
    data = doc.data

    def views() -> int:
        return sum(1 for o in gc.get_objects() if isinstance(o, memoryview))

    for _ in range(3):  # warm up: caches, the parser's own buffers
        doc.check("y = 2\n", (1000, 0), budget_s=5)
    gc.collect()
    views0 = views()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(100):
            doc.check("y = 2\n", ((i * 37) % 6000, 0), budget_s=5)
            assert parse(parser, data + b"#%d" % i, None, time.monotonic() + 5) is not None
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    # Leaking, 200 parses of a 50 KB text keep about 10 MB; fixed, a few KB of noise.
    assert grown < 1_000_000, f"{grown / 1e6:.1f} MB retained by 200 parses"
    assert views() - views0 < 20


def test_default_budgets() -> None:
    assert DEFAULT_BUDGET_S == {"tree-sitter": 0.05, "compiler": 3.0, "confirm": 3.0}


def test_unsupported_language() -> None:
    for doc in (SyntaxDocument("x", "cobol"), SyntaxDocument.open("x", path="a.txt")):
        assert not doc.supported
        v = doc.check("y", 0)
        assert v.status == "unsupported-language"
        assert not v.valid and not v.decided
        assert v.checker == "none"
    v = SyntaxDocument("x", "cobol").check("y", 0)
    assert "cobol" in v.message and "python" in v.message
    v = SyntaxDocument.open("x", path="a.txt").check("y", 0, mode="compiler")
    assert v.status == "unsupported-language" and v.mode == "compiler"


def test_bad_arguments() -> None:
    doc = SyntaxDocument("x = 1\n", "python")
    with pytest.raises(ValueError, match="unknown gate mode"):
        doc.check("y", 0, mode="magic")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="outside the text"):
        doc.check("y", 100)


# ------------------------------------------------------------------ compiler and confirm modes


def test_python_compiler_mode() -> None:
    v = ts(PY_PRE, "        total += g(x, 2)", PY_SUF, "python", mode="compiler")
    assert (v.status, v.checker, v.mode) == ("valid", "python-ast", "compiler")
    v = ts(PY_PRE, "        total += g(x, 2", PY_SUF, "python", mode="compiler")
    assert (v.status, v.checker) == ("invalid", "python-ast")
    assert v.message == "'(' was never closed"
    assert (v.line, v.column) == (4, 18)
    # without the completion the for loop has no body: ast fails there too, at the hole
    assert v.detail == "the first error is in the completion"
    doc = SyntaxDocument("def f(x):\n    return \n", "python")
    v = doc.check("g(x", (1, 11), mode="compiler")
    assert (v.status, v.checker, v.detail) == (
        "invalid",
        "python-ast",
        "fails only with the completion",
    )


def test_python_compiler_mode_in_a_broken_buffer() -> None:
    pre = "def f(xs):\n    total = 0\n    "
    suf = "\n    return total\n\n\nz = (\n"
    # an unrelated error after the completion: ast stops there, as without the completion;
    # that alone does not clear the completion: tree-sitter decides
    v = ts(pre, "total += 1", suf, "python", mode="compiler")
    assert (v.status, v.checker) == ("valid", "tree-sitter"), v
    assert "the only error seen is the one already there" in v.detail
    # an error in the completion itself
    v = ts(pre, "total += 1 $", suf, "python", mode="compiler")
    assert (v.status, v.checker) == ("invalid", "python-ast"), v
    # an unclosed bracket: ast complains at the next line, a new place: tree-sitter decides
    v = ts(pre, "total += (1", suf, "python", mode="compiler")
    assert (v.status, v.checker) == ("invalid", "tree-sitter"), v
    # an unrelated error BEFORE the completion hides it from ast: tree-sitter decides
    prefix = "z = = 1\n\n\n" + PY_PRE
    v = ts(prefix, "        total += 1", PY_SUF, "python", mode="compiler")
    assert v.checker == "tree-sitter" and "tree-sitter's differential" in v.detail
    assert v.status == "valid"


def test_java_compiler_mode() -> None:
    pre, good, suf, bad = CASES[1][1], CASES[1][2], CASES[1][3], CASES[1][4]
    v = ts(pre, good, suf, "java", mode="compiler")
    assert (v.status, v.checker) == ("valid", "javalang")
    v = ts(pre, bad, suf, "java", mode="compiler")
    # javalang complains at the token after the completion, where the hole's error was
    assert (v.status, v.checker) == ("invalid", "javalang")
    assert v.message == "Expected ')' at 'return'"
    assert v.detail == "the completion changes the error after it"
    assert (v.line, v.column) == (3, 8)
    v = ts(pre, '"open;', suf, "java", mode="compiler")
    assert (v.status, v.checker) == ("invalid", "javalang")
    assert "Unterminated" in v.message and (v.line, v.column) == (2, 16)


def test_javalang_deadline() -> None:
    body = "".join(
        f"    int f{i}(int x) {{ return x * {i} + (x - 1) / 2; }}\n" for i in range(3000)
    )
    text = "class A {\n" + body + "}\n"
    t = time.monotonic()
    res = _compilers.check_java(text, time.monotonic() + 0.05)
    assert res.timed_out
    assert time.monotonic() - t < 1.0
    assert _compilers.check_java(text).ok


def test_compiler_mode_falls_back_for_languages_without_one() -> None:
    pre, suf, bad = CASES[7][1], CASES[7][3], CASES[7][4]
    v = ts(pre, bad, suf, "go", mode="compiler")
    assert (v.status, v.checker, v.mode) == ("invalid", "tree-sitter", "compiler")
    assert "no compiler check for go" in v.detail
    v = ts(pre, bad, suf, "go", mode="confirm")
    assert (v.status, v.checker) == ("invalid", "tree-sitter")


@needs_gxx
def test_cpp_compiler_mode() -> None:
    pre, good, suf, bad = CASES[2][1], CASES[2][2], CASES[2][3], CASES[2][4]
    v = ts(pre, good, suf, "cpp", mode="compiler")
    assert (v.status, v.checker) == ("valid", "g++")
    v = ts(pre, bad, suf, "cpp", mode="compiler")
    assert (v.status, v.checker) == ("invalid", "g++")
    assert v.message == "expected ')' before 's'"
    assert (v.line, v.column) == (3, 18)


@needs_gxx
def test_cpp_compiler_mode_differential() -> None:
    # the buffer already has a semantic error elsewhere (undeclared name)
    pre = "int g() { return undeclared_thing; }\nint f(int n) {\n    int s = 0;\n    "
    suf = "\n    return s;\n}\n"
    v = ts(pre, "for (int i = 0; i < n; i++) s += i;", suf, "cpp", mode="compiler")
    assert (v.status, v.checker) == ("valid", "g++"), v
    assert v.detail == "only errors already there"
    v = ts(pre, "for (int i = 0; i < n; i++) s += j;", suf, "cpp", mode="compiler")
    assert (v.status, v.checker) == ("invalid", "g++"), v
    assert "'j' was not declared" in v.message
    # a missing header blinds g++: tree-sitter decides
    pre2 = '#include "no/such/header.h"\n' + pre
    v = ts(pre2, "for (int i = 0; i < n; i++) s += i;", suf, "cpp", mode="compiler")
    assert (v.status, v.checker) == ("valid", "tree-sitter"), v
    assert "fatal error" in v.detail


@needs_gxx
def test_c_compiler_mode_uses_gcc() -> None:
    pre, good, suf, bad = CASES[3][1], CASES[3][2], CASES[3][3], CASES[3][4]
    assert ts(pre, good, suf, "c", mode="compiler").checker == "gcc"
    v = ts(pre, bad, suf, "c", mode="compiler")
    assert (v.status, v.checker) == ("invalid", "gcc")


@needs_gxx
def test_confirm_mode_overrules_tree_sitter() -> None:
    """tree-sitter cannot expand a macro used as a type; g++ can and accepts the file."""
    pre = "#include <utility>\n#define PAIR(a,b) std::pair<a,b>\nint main() {\n    "
    suf = "\n    return 0;\n}\n"
    assert ts(pre, "PAIR(int,int) p;", suf, "cpp").status == "invalid"
    v = ts(pre, "PAIR(int,int) p;", suf, "cpp", mode="confirm")
    assert (v.status, v.checker, v.mode) == ("valid", "g++", "confirm")
    assert "tree-sitter: unexpected 'PAIR'" in v.detail
    v = ts(pre, "PAIR(int,int) p = (1;", suf, "cpp", mode="confirm")
    assert (v.status, v.checker) == ("invalid", "g++")


def test_confirm_mode_does_not_run_the_compiler_when_tree_sitter_agrees() -> None:
    v = ts(PY_PRE, "        total += 1", PY_SUF, "python", mode="confirm")
    assert (v.status, v.checker, v.mode) == ("valid", "tree-sitter", "confirm")
    v = ts(PY_PRE, "        total += (1", PY_SUF, "python", mode="confirm")
    assert (v.status, v.checker) == ("invalid", "python-ast")
    assert v.detail.startswith("tree-sitter: ")


@needs_gxx
def test_compiler_timeout() -> None:
    pre, good, suf = CASES[2][1], CASES[2][2], CASES[2][3]
    v = ts(pre, good, suf, "cpp", mode="compiler", budget_s=0.001)
    assert (v.status, v.checker) == ("timeout", "g++")


def test_missing_compiler_falls_back_with_a_fix() -> None:
    pre, suf, bad = CASES[2][1], CASES[2][3], CASES[2][4]
    cfg = CompilerConfig(gxx="no-such-g++-here")
    doc = SyntaxDocument(pre + suf, "cpp", compilers=cfg)
    v = doc.check(bad, len(pre), mode="compiler")
    assert (v.status, v.checker) == ("invalid", "tree-sitter")
    assert "no-such-g++-here not found on PATH" in v.detail and "apt-get install g++" in v.detail
    v = doc.check(bad, len(pre), mode="confirm")
    assert (v.status, v.checker) == ("invalid", "tree-sitter")
    assert "tree-sitter's objection stands" in v.detail


@needs_gxx
def test_precompiled_header(tmp_path: Path) -> None:
    cfg = CompilerConfig(pch_dir=tmp_path)
    inc = prepare_pch(cfg)
    if inc is None:
        pytest.skip("this g++ cannot precompile <bits/stdc++.h>")
    assert (inc / "bits" / "stdc++.h.gch").exists()
    assert prepare_pch(cfg) == inc  # built once
    src = "#include <bits/stdc++.h>\nusing namespace std;\nint main() {\n    "
    suf = "\n    return 0;\n}\n"
    v = ts(
        src,
        "vector<int> v{1, 2}; sort(v.begin(), v.end());",
        suf,
        "cpp",
        mode="compiler",
        compilers=cfg,
    )
    assert (v.status, v.checker) == ("valid", "g++")
    v = ts(
        src,
        "vector<int> v{1, 2; sort(v.begin(), v.end());",
        suf,
        "cpp",
        mode="compiler",
        compilers=cfg,
    )
    assert (v.status, v.checker) == ("invalid", "g++")


# ------------------------------------------------------------------ the differential, directly


def _res(
    ok: bool, *diags: tuple[int | None, str], first_only: bool = True, fatal: bool = False
) -> _compilers.CompilerResult:
    return _compilers.CompilerResult(
        checker="x",
        ok=ok,
        diagnostics=tuple(_compilers.Diagnostic(o, m, fatal=fatal) for o, m in diags),
        first_error_only=first_only,
    )


def test_judge_rules() -> None:
    sp = Splice(10, 10, 20)  # 10 characters inserted at 10
    judge = _compilers.judge
    assert judge(None, _res(True), sp).introduced is False
    assert judge(_res(True), _res(False, (5, "e")), sp).introduced is True
    # first-error checkers
    assert judge(_res(False, (12, "e")), _res(False, (15, "x")), sp).introduced is True
    assert judge(_res(False, (30, "e")), _res(False, (40, "e")), sp).introduced is None
    assert judge(_res(False, (30, "e")), _res(False, (40, "f")), sp).introduced is True
    # line references in messages move with the completion: not a new message
    old_msg = _res(False, (30, "expected a block after 'if' on line 3"))
    new_msg = _res(False, (40, "expected a block after 'if' on line 4"))
    assert judge(old_msg, new_msg, sp).introduced is None
    assert judge(_res(False, (30, "e")), _res(False, (45, "f")), sp).introduced is None
    assert judge(_res(False, (3, "e")), _res(False, (3, "e")), sp).introduced is None
    # g++-style: every diagnostic
    before = _res(False, (3, "a"), (30, "b"), (None, "c"), first_only=False)
    same = _res(False, (3, "a"), (40, "b"), (None, "c"), first_only=False)
    new = _res(False, (3, "a"), (40, "b"), (45, "d"), first_only=False)
    assert judge(before, same, sp).introduced is False
    assert judge(before, new, sp).introduced is True
    fatal = _res(False, (0, "no header"), first_only=False, fatal=True)
    assert judge(fatal, fatal, sp).introduced is None


def test_javalang_crash_is_a_syntax_error() -> None:
    # javalang raises TypeError on this unfinished expression instead of a syntax error
    res = _compilers.check_java("class A { void f() { int[] a = new int[3]; int b = a")
    assert not res.ok and not res.timed_out and not res.failure
    assert res.diagnostics[0].message.startswith("unexpected end of code")
