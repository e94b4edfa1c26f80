"""The names gate on the benchmark data: false rejects on ground truths, speed, catch rate.

1. False rejects: every Python ground truth (HumanEval single-line, SAFIM block and API)
   spliced into its file, checked by the gate as the server runs it (`SyntaxDocument.check`
   with names=True), must introduce no undefined name. The bar is zero.
2. Speed: on a 2,500-line file, p50 and p90 of the names check alone (on the tree the
   syntax check built), and of the whole gate check with and without it; the same gate
   figures on a 2,500-line C++ file (tests/test_names_data.py checks the C++ ground truths).
3. Catch rate (with --records DIR of a `synconfroute eval` run): of the local completions
   that parse but fail their tests, how many the names gate flags, against the same count
   on the passing ones (its false rejects), per dataset.

    .venv/bin/python -m studies.names_accuracy
    .venv/bin/python -m studies.names_accuracy --records .eval/smollm2
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from studies.gate_accuracy import data_dir, load_items
from synconfroute.server.syntax import SyntaxDocument
from synconfroute.server.syntax.languages import parser_for
from synconfroute.server.syntax.names import undefined_names


def flagged(prefix: str, completion: str, suffix: str) -> list[str]:
    """The gate's names verdict, as the server checks an open document (incremental)."""
    doc = SyntaxDocument(prefix + suffix, "python")
    v = doc.check(completion, len(prefix.encode()), names=True, budget_s=5.0)
    if v.status != "valid":
        print(f"  (syntax gate: {v.status} {v.message})")
    return list(v.undefined)


def false_rejects() -> int:
    items = load_items(data_dir(), ("python",), None)
    per: dict[str, list[int]] = {}
    examples: list[str] = []
    for ds, _lang, task, prefix, truth, suffix in items:
        bad = flagged(prefix, truth, suffix)
        per.setdefault(ds, [0, 0])
        per[ds][0] += 1
        if bad:
            per[ds][1] += 1
            examples.append(f"  {task}: {', '.join(bad)}")
    print("false rejects on ground truths (undefined name introduced by the truth):")
    for ds, (n, bad_n) in per.items():
        print(f"  {ds:<12} {bad_n} of {n}")
    print("\n".join(examples[:20]))
    return sum(b for _, b in per.values())


def speed() -> None:
    body = "".join(
        f"def func_{i}(a, b):\n    total = a + b * {i}\n    return total\n\n" for i in range(600)
    )
    prefix = body + "def main(values):\n    result = "
    suffix = "\n    return result\n" + body[:2000]
    completion = "func_3(values[0], len(values))"
    data_old = (prefix + suffix).encode()
    parser = parser_for("python")
    tree = parser.parse(data_old)
    lo = len(prefix.encode())
    data = (prefix + completion + suffix).encode()
    hi = lo + len(completion.encode())
    lines = data.count(b"\n")
    parse_ms: list[float] = []
    names_ms: list[float] = []
    for _ in range(200):
        t = tree.copy()
        t.edit(lo, lo, hi, _point(data, lo), _point(data, lo), _point(data, hi))
        t0 = time.perf_counter()
        new = parser.parse(data, t)
        t1 = time.perf_counter()
        assert undefined_names("python", new, data, lo, hi) == []
        t2 = time.perf_counter()
        parse_ms.append((t1 - t0) * 1000)
        names_ms.append((t2 - t1) * 1000)
    q = statistics.quantiles
    print(f"speed on a {lines}-line file (200 checks):")
    print(
        f"  incremental parse  p50 {statistics.median(parse_ms):.3f} ms  "
        f"p90 {q(parse_ms, n=10)[8]:.3f} ms"
    )
    print(
        f"  names check        p50 {statistics.median(names_ms):.3f} ms  "
        f"p90 {q(names_ms, n=10)[8]:.3f} ms"
    )
    _time_gate(SyntaxDocument(prefix + suffix, "python"), completion, lo, "", 100)


def _time_gate(doc: SyntaxDocument, completion: str, at: int, label: str, reps: int) -> None:
    """p50 and p90 of the whole gate check with and without the names stage, interleaved
    (a busy machine hits both)."""
    for names in (False, True, False, True):
        ms = []
        for _ in range(reps):
            t0 = time.perf_counter()
            v = doc.check(completion, at, names=names, budget_s=1.0)
            ms.append((time.perf_counter() - t0) * 1000)
            assert v.valid and not v.undefined
        p90 = statistics.quantiles(ms, n=10)[8]
        what = "gate with names   " if names else "gate without names"
        print(f"  {label}{what} p50 {statistics.median(ms):.3f} ms  p90 {p90:.3f} ms")


def speed_cpp() -> None:
    """C++: the names check needs the completion's function parsed anew (the syntax gate
    often decides without a tree of the completed text); p50 of the whole gate check with
    and without it on a 2,500-line file, interleaved."""
    body = "".join(
        f"long long func_{i}(long long a, long long b) {{\n    long long total = a + b * {i};"
        f"\n    for (int j = 0; j < 3; j++) total += j;\n    return total;\n}}\n\n"
        for i in range(420)
    )
    prefix = "#include <bits/stdc++.h>\nusing namespace std;\n" + body
    prefix += "int main() {\n    long long n = 5, s = 0;\n"
    suffix = "\n    cout << s << endl;\n    return 0;\n}\n"
    lo = len(prefix.encode())
    print(f"C++, a {(prefix + suffix).count(chr(10))}-line file:")
    clean = SyntaxDocument(prefix + suffix, "cpp")
    # broken at the cursor (a block's header deleted: its `}` is one too many): the brace
    # window decides without a tree of the completed text
    hole = SyntaxDocument(prefix + "        s += n;\n    }" + suffix, "cpp")
    for label, doc, completion in (
        ("one line        ", clean, "    s += func_3(n, 2);"),
        ("a block         ", clean, "    for (int i = 0; i < n; i++) {\n        s += i;\n    }"),
        ("a block, broken ", hole, "    for (int i = 0; i < n; i++) {\n        s += i;\n"),
    ):
        _time_gate(doc, completion, lo, label, 200)


def _point(data: bytes, offset: int) -> tuple[int, int]:
    row = data.count(b"\n", 0, offset)
    return row, offset - (data.rfind(b"\n", 0, offset) + 1)


def catch_rate(folder: Path) -> None:
    from synconfroute.server.evaluation.records import RunFolder
    from synconfroute.server.evaluation.scoring import outcomes
    from synconfroute.server.routing.rules import resolve_rules
    from synconfroute.server.settings.config import Settings

    rules = resolve_rules(Settings(), "")  # k = 3, missing log-probs escalate
    tasks, incomplete = outcomes(RunFolder(folder), rules=rules, gate_mode="tree-sitter")
    print(f"catch rate on {folder} ({incomplete} records without execution results left out):")
    per: dict[str, dict[str, list[int]]] = {}
    for o in tasks:
        if o.language != "python" or o.evidence.syntax != "valid":
            continue
        for group in (o.dataset, "all"):
            c = per.setdefault(group, {"wrong": [0, 0], "right": [0, 0]})
            key = "right" if o.local_pass else "wrong"
            c[key][0] += 1
            c[key][1] += bool(o.evidence.undefined)
    for group, c in per.items():
        (wn, wh), (rn, rh) = c["wrong"], c["right"]
        share = f"{wh / wn:.1%}" if wn else "-"
        print(
            f"  {group:<12} valid but wrong: {wh} of {wn} flagged ({share}); "
            f"valid and correct: {rh} of {rn} flagged"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=Path, help="folder of a `synconfroute eval` run")
    args = ap.parse_args()
    bad = false_rejects()
    speed()
    speed_cpp()
    if args.records:
        catch_rate(args.records)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
