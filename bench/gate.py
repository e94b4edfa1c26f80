"""Time of one gate check: incremental vs full reparse vs the compiler check.

Generated Python and C++ files of 100 to 10,000 lines; a completion is inserted in the
middle of the file, either as whole lines (at the start of a line, ending in a newline, as
a FIM model writes the next line) or inside a line. "keystroke" is the cost of following
one typed character in the open document (edit + incremental reparse).

    python -m bench.gate
    python -m bench.gate --sizes 2500 --reps 500 --langs python --json
    python -m bench.gate --large 10   # a 10 MB file: gate and memory, limit off/on
    python -m bench.gate --retain 300  # memory kept by 300 checks (leak check)

Goal: incremental p50 under 0.5 ms at 2,500 lines.

`--large MB` follows one file of that size as the server does (a lazy document, the gate
of `server/routing/gate.py` with the default 50 ms budget), once without a size limit
(`routing.syntax_max_bytes = 0`, as before the limit existed) and once with the default
limit, each in a fresh process: resident memory, the first completion's gate, the cost of
one keystroke (the edit the server makes on didChange) and of a check after keystrokes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from synconfroute.server.syntax import SyntaxDocument


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


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


def large_one(mb: float, limit: int, checks: int, keys: int) -> dict[str, Any]:
    """One large-file run; call it in a process of its own so the RSS figures are its own."""
    from synconfroute.server.routing.gate import make_gate
    from synconfroute.server.routing.request import Anchor, CompletionContext
    from synconfroute.server.settings import config

    lines = int(mb * 1e6 / 24)  # python_file averages about 24 bytes a line
    text = python_file(lines)
    doc = SyntaxDocument(text, "python", lazy=True)  # as Session.open makes it
    routing = config.RoutingSettings(syntax_max_bytes=limit)
    gate = make_gate(routing)
    line = lines // 2
    while not text.split("\n", line + 1)[line].startswith("        total = 0.0"):
        line += 1
    line += 1  # the completion is a whole line after "total = 0.0"
    del text
    rss_open = _rss_mb()

    def check() -> tuple[float, str]:
        ctx = CompletionContext(prefix="", suffix="", document=Anchor(doc, (line, 0)))
        t = time.perf_counter()
        status = gate.check(ctx, "        total += self.height * 2.0\n").status
        return time.perf_counter() - t, status

    first_s, first_status = check()
    rss_first = _rss_mb()
    key_s: list[float] = []
    check_s: list[float] = []
    statuses: dict[str, int] = {}
    for i in range(checks):
        for _ in range(keys):  # type a character, then delete it
            t = time.perf_counter()
            doc.edit((line - 1, 8), (line - 1, 8), "x")
            doc.edit((line - 1, 8), (line - 1, 9), "")
            key_s.append((time.perf_counter() - t) / 2)
        dt, status = check()
        check_s.append(dt)
        statuses[status] = statuses.get(status, 0) + 1
        del i
    return {
        "bytes": len(doc.data),
        "limit": limit,
        "rss_open_mb": rss_open,
        "rss_first_mb": rss_first,
        "rss_end_mb": _rss_mb(),
        "first_check_ms": first_s * 1000,
        "first_status": first_status,
        "keystroke_p50_ms": _p(key_s, 0.5),
        "check_p50_ms": _p(check_s, 0.5),
        "statuses": statuses,
        "tree_kept": doc.has_tree,
    }


def retain(n: int) -> int:
    """Memory still held after `n` checks of a 200 KB file (each check under a deadline)."""
    import gc
    import tracemalloc

    text = python_file(8000)
    doc = SyntaxDocument(text, "python")
    lines = text.count("\n")
    doc.check("x = 1\n", (lines // 2, 0))  # warm up
    gc.collect()
    rss0 = _rss_mb()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for i in range(n):
        doc.check("        total += 1\n", ((i * 37) % lines, 0), budget_s=5)
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    views = sum(1 for o in gc.get_objects() if isinstance(o, memoryview))
    print(
        f"{n} checks of a {len(doc.data):,}-byte file: {kept / 1e6:.2f} MB still allocated "
        f"(tracemalloc), RSS +{_rss_mb() - rss0:.1f} MB, {views} memoryviews alive"
    )
    return 0


def large(mb: float, args: argparse.Namespace) -> int:
    from synconfroute.server.settings import config

    default = config.RoutingSettings().syntax_max_bytes
    rows = []
    for limit in (0, default):
        spec = json.dumps([mb, limit, args.large_checks, args.large_keys])
        out = subprocess.run(
            [sys.executable, __file__, "--large-one", spec],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rows.append(json.loads(out))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(
        f"{'bytes':>10} {'limit':>9} {'RSS open':>9} {'+ 1st chk':>9} {'end':>7} "
        f"{'1st check':>10} {'keystroke':>10} {'check':>8}  statuses, tree kept"
    )
    for r in rows:
        print(
            f"{r['bytes']:10d} {r['limit'] or 'none':>9} {r['rss_open_mb']:7.0f}MB "
            f"{r['rss_first_mb']:7.0f}MB {r['rss_end_mb']:5.0f}MB "
            f"{r['first_check_ms']:8.0f}ms {r['keystroke_p50_ms']:8.2f}ms "
            f"{r['check_p50_ms']:6.2f}ms  {r['first_status']} then {r['statuses']}, "
            f"{r['tree_kept']}"
        )
    return 0


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
    ap.add_argument("--large", type=float, metavar="MB", help="one file of MB megabytes")
    ap.add_argument("--large-checks", type=int, default=10, help="checks in --large")
    ap.add_argument("--large-keys", type=int, default=5, help="keystrokes before each check")
    ap.add_argument("--large-one", help=argparse.SUPPRESS)
    ap.add_argument("--retain", type=int, metavar="N", help="memory kept by N checks")
    args = ap.parse_args(argv)
    if args.large_one:
        print(json.dumps(large_one(*json.loads(args.large_one))))
        return 0
    if args.large:
        return large(args.large, args)
    if args.retain:
        return retain(args.retain)
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
