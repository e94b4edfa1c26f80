"""Figures for learning from the user (issue 15): calibration on generated ledgers whose
best threshold is known, adaptive convergence, and the cost of retention tracking.

    python -m bench.learning
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from synconfroute.server.evaluation.calibrate import CalibrationError
from synconfroute.server.evaluation.from_ledger import choose
from synconfroute.server.learning.adaptive import Adaptive
from synconfroute.server.learning.ledger import load
from synconfroute.server.learning.retention import Region, retained_ratio
from tests.test_learning import simulate, synthetic_ledger


def calibration() -> None:
    print("calibrate --from-ledger on generated ledgers (best threshold by construction -1.0)")
    folder = Path(tempfile.mkdtemp())
    for n in (120, 400, 4000, 20000):
        path = folder / f"l{n}.jsonl"
        synthetic_ledger(path, n=n)
        t0 = time.perf_counter()
        decisions, _, _ = load(path)
        t1 = time.perf_counter()
        try:
            c = choose(decisions, best=True)
        except CalibrationError as exc:
            print(f"  n={n:>6}: refused: {exc}")
            continue
        t2 = time.perf_counter()
        b = choose(decisions, budget=0.3)
        print(
            f"  n={n:>6}: best {c.threshold:+.4f} (escalates {c.point.escalation:.1%}, "
            f"CI [{c.ci[0]:.1%}, {c.ci[1]:.1%}]); budget 30%: {b.threshold:+.4f} "
            f"({b.point.escalation:.1%}); read {1000 * (t1 - t0):.0f} ms, "
            f"choose {1000 * (t2 - t1):.0f} ms"
        )


def adaptive() -> None:
    print("adaptive: local acceptance 0.6 + 0.8 (c + 0.8), remote 0.6: optimum -0.80")
    for start, lo, hi in ((-0.2, -1.8, -0.1), (-1.5, -1.8, -0.1), (-0.3, -0.6, -0.2)):
        a = Adaptive(start, lo, hi, step=0.05, every=50)
        trace = simulate(a, star=-0.8, n=30_000)
        first = next((i for i, x in enumerate(trace) if abs(x + 0.8) <= 0.1), None)
        tail = trace[-10_000:]
        print(
            f"  start {start:+.2f} bounds [{lo}, {hi}]: {len(a.moves)} moves, within 0.1 of "
            f"the optimum after {first} decisions, last 10k mean {sum(tail) / len(tail):+.3f} "
            f"(range {min(tail):+.2f}..{max(tail):+.2f}), overall range "
            f"{min(trace):+.2f}..{max(trace):+.2f}"
        )


def retention() -> None:
    print("retention: cost of one check (edit distance) and of following one edit")
    rnd = random.Random(0)
    for n in (20, 100, 300):
        text = "".join(rnd.choice("abcdefgh (),.=") for _ in range(n))
        edited = text[: n // 2] + "XYZ" + text[n // 2 + 3 :]
        t0 = time.perf_counter()
        for _ in range(20):
            retained_ratio(text, edited)
        dt = (time.perf_counter() - t0) / 20
        print(f"  {n:>4} characters: {1000 * dt:.2f} ms per check")
    r = Region(1000, 1100)
    t0 = time.perf_counter()
    for i in range(100_000):
        r.edit(i % 2000, i % 2000 + 1, 1)
    print(f"  region update: {1e9 * (time.perf_counter() - t0) / 100_000:.0f} ns per edit")


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    calibration()
    adaptive()
    retention()


if __name__ == "__main__":
    main()
