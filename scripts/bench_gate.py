"""Time of one gate check: incremental vs full reparse vs the compiler check.

Generated Python and C++ files of 100 to 10,000 lines; a completion is inserted in the
middle of the file, either as whole lines (at the start of a line, ending in a newline, as
a FIM model writes the next line) or inside a line. "keystroke" is the cost of following
one typed character in the open document (edit + incremental reparse).

    python scripts/bench_gate.py
    python scripts/bench_gate.py --sizes 2500 --reps 500 --langs python --json

Goal: incremental p50 under 0.5 ms at 2,500 lines.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from server.syntax import SyntaxDocument  # noqa: E402


def python_file(lines: int) -> str:
    out = ["import math", "from dataclasses import dataclass", "", ""]
    i = 0
    while len(out) < lines:
        out += [
            "@dataclass",
            f"class Shape{i}:",
            f'    """Shape number {i}."""',
            "    width: float",
            "    height: float",
            "",
            "    def area(self) -> float:",
            "        return self.width * self.height",
            "",
            "    def scaled(self, k: float) -> 'Shape':",
            "        if k <= 0:",
            f"            raise ValueError('bad factor {i}')",
            "        total = 0.0",
            "        for j in range(3):",
            "            total += math.sqrt(j + k) * self.width",
            f"        return Shape{i}(self.width * k, self.height * k + total)",
            "",
            "",
        ]
        i += 1
    return "\n".join(out[:lines]) + "\n"


def cpp_file(lines: int) -> str:
    out = ["#include <vector>", "#include <cstdio>", "", ""]
    i = 0
    while len(out) < lines:
        out += [
            f"static int work{i}(const std::vector<int>& v, int k) {{",
            "    int total = 0;",
            "    for (std::size_t j = 0; j < v.size(); ++j) {",
            "        if (v[j] % 2 == 0) {",
            "            total += v[j] * k;",
            "        } else {",
            f"            total -= v[j] + {i};",
            "        }",
            "    }",
            "    return total;",
            "}",
            "",
        ]
        i += 1
    out = out[:lines]
    # close an unfinished function so that the file is valid
    depth = sum(line.count("{") - line.count("}") for line in out)
    return "\n".join(out) + "\n" + "}\n" * depth


COMPLETIONS = {
    # (anchor the completion goes after, completion as whole lines, completion inside a line)
    "python": ("        total = 0.0\n", "        total += self.height * 2.0\n", "abs(k) + "),
    "cpp": ("    int total = 0;\n", "    total += k * 2;\n", "k * 2 + "),
}


def _anchor(text: str, anchor: str) -> int:
    mid = len(text) // 2
    i = text.find(anchor, mid)
    if i < 0:
        i = text.rfind(anchor, 0, mid)
    return i + len(anchor)


def _times(call: Callable[[], object], reps: int) -> list[float]:
    call()  # warm up
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        call()
        out.append(time.perf_counter() - t)
    return out


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000.0


def bench(lang: str, n: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Rows of timings for one language and file size."""
    text = python_file(n) if lang == "python" else cpp_file(n)
    doc = SyntaxDocument(text, lang)
    assert doc.tree is not None and not doc.tree.root_node.has_error
    anchor, lines_completion, inline_completion = COMPLETIONS[lang]
    at_line = len(text[: _anchor(text, anchor)].encode())
    at_inline = len(text[: _anchor(text, "total += ")].encode())
    rows: list[dict[str, Any]] = []

    def row(shape: str, kind: str, values: list[float]) -> None:
        rows.append(
            {
                "lang": lang,
                "lines": n,
                "bytes": len(doc.data),
                "completion": shape,
                "check": kind,
                "p50_ms": _p(values, 0.5),
                "p99_ms": _p(values, 0.99),
                "n": len(values),
            }
        )

    for shape, at, comp in (
        ("lines", at_line, lines_completion),
        ("inline", at_inline, inline_completion),
    ):
        assert doc.check(comp, at).status == "valid"
        row(
            shape,
            "incremental",
            _times(lambda c=comp, a=at: doc.check(c, a, budget_s=5), args.reps),
        )
        row(
            shape,
            "full",
            _times(
                lambda c=comp, a=at: doc.check(c, a, budget_s=5, full=True), max(20, args.reps // 5)
            ),
        )
        compiler_ok = lang == "python" or shutil.which("g++") is not None
        if not args.no_compiler and compiler_ok and shape == "lines":
            reps = args.compiler_reps if lang == "cpp" else args.reps // 5
            row(
                shape,
                "compiler",
                _times(lambda c=comp, a=at: doc.check(c, a, mode="compiler", budget_s=60), reps),
            )

    # following one typed character: edit + incremental reparse of the document
    def keystroke() -> None:
        doc.edit_bytes(at_inline, at_inline, "x")
        _ = doc.tree
        doc.edit_bytes(at_inline, at_inline + 1, "")
        _ = doc.tree

    row("-", "keystroke", [t / 2 for t in _times(keystroke, args.reps)])
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="100,1000,2500,10000", help="file sizes in lines")
    ap.add_argument("--langs", default="python,cpp")
    ap.add_argument("--reps", type=int, default=300, help="repetitions of tree-sitter checks")
    ap.add_argument("--compiler-reps", type=int, default=10, help="repetitions of compiler checks")
    ap.add_argument("--no-compiler", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    langs = [x.strip() for x in args.langs.split(",") if x.strip()]
    rows = []
    for lang in langs:
        for n in sizes:
            rows += bench(lang, n, args)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(
        f"{'lang':7} {'lines':>6} {'bytes':>8} {'completion':10} {'check':12} "
        f"{'p50 ms':>9} {'p99 ms':>9} {'n':>5}"
    )
    for r in rows:
        print(
            f"{r['lang']:7} {r['lines']:6d} {r['bytes']:8d} {r['completion']:10} {r['check']:12} "
            f"{r['p50_ms']:9.3f} {r['p99_ms']:9.3f} {r['n']:5d}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
