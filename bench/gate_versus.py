"""Gate check time of this checkout against another one, side by side in one run.

Two worker processes, one importing each checkout's `synconfroute`, time the same checks
on the same generated files (bench/gate.py's), in alternating rounds, so that both see the
same machine load; the ratio is what to read on a busy machine.

    git archive main | tar -x -C /tmp/gate_base
    python -m bench.gate_versus --base /tmp/gate_base
    python -m bench.gate_versus --base /tmp/gate_base --lines 2500 --rounds 20 --reps 50
    python -m bench.gate_versus --base /tmp/gate_base --names   # with the names gate

Cases: a clean file with a completion as whole lines and inside a line (bench/gate.py's),
and the same Python and C++ files with the block header above the completion deleted
(broken at the cursor: the path where the window judges run), there with the header as the
completion (kept) and, in C++, with a cut of it (rejected: the window, then the
differential for where to show the error).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent


def _java_file(lines: int) -> str:
    """bench/gate.py's C++ file as Java methods in one class."""
    out = ["class Work {", ""]
    i = 0
    while len(out) < lines - 1:
        out += [
            f"    static int work{i}(int[] v, int k) {{",
            "        int total = 0;",
            "        for (int j = 0; j < v.length; ++j) {",
            "            if (v[j] % 2 == 0) {",
            "                total += v[j] * k;",
            "            } else {",
            f"                total -= v[j] + {i};",
            "            }",
            "        }",
            "        return total;",
            "    }",
            "",
        ]
        i += 1
    out = out[: lines - 1]
    depth = sum(line.count("{") - line.count("}") for line in out)
    return "\n".join(out) + "\n" + "}\n" * depth


def _cases(lines: int) -> dict[str, tuple[str, str, int, str]]:
    """name -> (language, text, byte offset, completion)."""
    from bench.gate import COMPLETIONS, _anchor, cpp_file, python_file

    out: dict[str, tuple[str, str, int, str]] = {}
    for lang in ("python", "cpp"):
        text = python_file(lines) if lang == "python" else cpp_file(lines)
        anchor, whole, inline = COMPLETIONS[lang]
        at_line = len(text[: _anchor(text, anchor)].encode())
        at_inline = len(text[: _anchor(text, "total += ")].encode())
        out[f"{lang} lines"] = (lang, text, at_line, whole)
        out[f"{lang} inline"] = (lang, text, at_inline, inline)
    # a block over several lines in a clean file (Python: where its window's second opinion
    # runs, after tree-sitter's)
    text = python_file(lines)
    at_block = len(text[: _anchor(text, COMPLETIONS["python"][0])].encode())
    block = "        for m in range(2):\n            total += self.height * m\n"
    out["python block"] = ("python", text, at_block, block)
    # broken at the cursor: the block header above the body deleted (Python: the body's
    # indentation; C++ and Java: a `}` too many), the header as the completion (kept) and,
    # in C++ and Java, a cut of it (rejected)
    for lang, text, header, cut in (
        ("python", python_file(lines), "        for j in range(3):\n", 0),
        ("cpp", cpp_file(lines), "        if (v[j] % 2 == 0) {\n", 22),
        ("java", _java_file(lines), "            if (v[j] % 2 == 0) {\n", 26),
    ):
        i = text.find(header, len(text) // 2)
        broken = text[:i] + text[i + len(header) :]
        at = len(broken[:i].encode())
        out[f"{lang} broken-at-cursor"] = (lang, broken, at, header)
        if cut:
            out[f"{lang} broken, cut header"] = (lang, broken, at, header[:cut])
    return out


def worker(lines: int, names: bool) -> int:
    """Answer 'case reps' lines on stdin with a JSON list of seconds per check (`names`: with
    the names gate after a valid verdict, as the server runs by default)."""
    from synconfroute.server.syntax import SyntaxDocument

    cases = _cases(lines)
    docs = {name: SyntaxDocument(text, lang) for name, (lang, text, _, _) in cases.items()}
    print(json.dumps({"ready": sorted(cases)}), flush=True)
    for line in sys.stdin:
        name, reps = line.rsplit(" ", 1)
        _, _, at, comp = cases[name]
        doc = docs[name]
        doc.check(comp, at, budget_s=5, names=names)  # warm
        times = []
        for _ in range(int(reps)):
            t = time.perf_counter()
            doc.check(comp, at, budget_s=5, names=names)
            times.append(time.perf_counter() - t)
        print(json.dumps(times), flush=True)
    return 0


def _spawn(root: Path, lines: int, names: bool) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=f"{root}{os.pathsep}{HERE}")
    flags = ["--worker", "--lines", str(lines), *(["--names"] if names else [])]
    p = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), *flags],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(root),
    )
    assert p.stdout is not None
    json.loads(p.stdout.readline())
    return p


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--base", help="the other checkout (a folder with synconfroute/ and server/)")
    ap.add_argument("--lines", type=int, default=2500)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--reps", type=int, default=50, help="checks per round and case")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--names",
        action="store_true",
        help="check with the names gate too (routing.semantic = names, the default)",
    )
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.lines, args.names)
    if not args.base:
        ap.error("--base is required")
    procs = {
        "base": _spawn(Path(args.base).resolve(), args.lines, args.names),
        "this": _spawn(HERE, args.lines, args.names),
    }
    names = sorted(_cases(args.lines))
    times: dict[tuple[str, str], list[float]] = {(w, n): [] for w in procs for n in names}
    for r in range(args.rounds):
        order = list(procs) if r % 2 == 0 else list(procs)[::-1]
        for name in names:
            for w in order:
                p = procs[w]
                assert p.stdin is not None and p.stdout is not None
                p.stdin.write(f"{name} {args.reps}\n")
                p.stdin.flush()
                times[(w, name)] += json.loads(p.stdout.readline())
    for p in procs.values():
        assert p.stdin is not None
        p.stdin.close()
        p.wait()
    rows: list[dict[str, Any]] = []
    for name in names:
        b, t = times[("base", name)], times[("this", name)]
        rows.append(
            {
                "case": name,
                "lines": args.lines,
                "base_p50_ms": _p(b, 0.5),
                "this_p50_ms": _p(t, 0.5),
                "ratio_p50": _p(t, 0.5) / _p(b, 0.5),
                "base_p99_ms": _p(b, 0.99),
                "this_p99_ms": _p(t, 0.99),
                "n": len(t),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"gate check, {args.lines} lines, {args.rounds} alternating rounds of {args.reps}")
    print(
        f"{'case':26} {'base p50':>9} {'this p50':>9} {'ratio':>6} {'base p99':>9} {'this p99':>9}"
    )
    for r in rows:
        print(
            f"{r['case']:26} {r['base_p50_ms']:9.3f} {r['this_p50_ms']:9.3f} {r['ratio_p50']:6.2f} "
            f"{r['base_p99_ms']:9.3f} {r['this_p99_ms']:9.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
