"""One gate check as the server runs it: after the model's wait (caches cold), with and
without the head start the pipeline gives the gate while the model generates
(`SyntaxDocument.prepare`).

    python -m bench.gate_cold [--rounds 40] [--idle-ms 50]

Documents: bench.lsp_stages' two-line one (`def g(x):` / `return `, completion ` x + 1`),
and the first 2,000 lines of click's core.py ($SYNCONFROUTE_DATA/repos, default
../shared/data; left out when absent) completed at a `return ` in the middle with the
rest of its line. Each round opens a new document (lazy, as the server's store does),
or, "a keystroke", follows one open document through a keystroke near the cursor; then
idles `--idle-ms` (the model's time: other processes take the caches) and times
`check(..., names=True)`, the server's default. "warm" rows idle 0 ms. Prints medians in
µs. A figures-only script: it asserts nothing, and the figures are this machine's
(quote them with its load). Without `prepare` (an older tree), only "check alone" rows.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

from synconfroute.server.syntax.document import SyntaxDocument
from synconfroute.server.vocab.positions import Text

ROOT = Path(__file__).resolve().parent.parent
Case = tuple[str, tuple[int, int], str]  # text, cursor, completion


def small(i: int) -> Case:
    return f"def g{i}(x):\n    return \n", (1, 11), " x + 1"


def click_core() -> Case | None:
    data = Path(os.environ.get("SYNCONFROUTE_DATA") or ROOT.parent / "shared" / "data")
    try:
        with tarfile.open(data / "repos" / "click-src.tar.gz") as tar:
            f = tar.extractfile("click/src/click/core.py")
            assert f is not None
            lines = io.TextIOWrapper(f, encoding="utf-8").read().split("\n")[:2000]
    except (OSError, KeyError):
        return None
    row = next(i for i in range(1000, 2000) if lines[i].strip().startswith("return "))
    col = lines[row].index("return ") + len("return ")
    text = "\n".join([*lines[:row], lines[row][:col], *lines[row + 1 :]]) + "\n"
    return text, (row, col), lines[row][col:]


def opened(make: Callable[[int], Case], rounds: int, idle_s: float, prepare: bool) -> float:
    out = []
    for i in range(rounds):
        text, at, completion = make(i)
        doc = SyntaxDocument(Text(text, "utf-16"), "python", lazy=True)
        out.append(_timed_check(doc, at, completion, idle_s, prepare))
    return statistics.median(out) / 1000


def keystroke(case: Case, rounds: int, idle_s: float, prepare: bool) -> float:
    text, at, completion = case
    doc = SyntaxDocument(Text(text, "utf-16"), "python")
    row = at[0] - 2
    end = len(text.split("\n")[row])
    out = []
    for i in range(rounds):
        # a trailing space typed, then deleted, two lines above the cursor
        if i % 2 == 0:
            doc.edit((row, end), (row, end), " ")
        else:
            doc.edit((row, end), (row, end + 1), "")
        out.append(_timed_check(doc, at, completion, idle_s, prepare))
    return statistics.median(out) / 1000


def _timed_check(
    doc: SyntaxDocument, at: tuple[int, int], completion: str, idle_s: float, prepare: bool
) -> int:
    """ns of one check after `idle_s` of idling (prepared first, or not)."""
    if prepare:
        doc.prepare(at)
    time.sleep(idle_s)
    t = time.perf_counter_ns()
    doc.check(completion, at, names=True)
    return time.perf_counter_ns() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--idle-ms", type=float, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    ways = [False, True] if hasattr(SyntaxDocument, "prepare") else [False]
    big = click_core()
    res: dict[str, float] = {}
    for idle in (0.0, args.idle_ms / 1000):
        state = f"idle {idle * 1000:g} ms" if idle else "warm"
        for prepare in ways:
            how = "check after prepare" if prepare else "check alone"
            res[f"bench doc, opened, {state}, {how}"] = opened(small, args.rounds, idle, prepare)
            if big is not None:
                res[f"2,000 lines, opened, {state}, {how}"] = opened(
                    lambda _: big, args.rounds, idle, prepare
                )
                res[f"2,000 lines, a keystroke, {state}, {how}"] = keystroke(
                    big, args.rounds, idle, prepare
                )
    if args.json:
        print(json.dumps(res))
        return
    for k, v in res.items():
        print(f"  {k:58s} {v:9.1f} µs")


if __name__ == "__main__":
    main()
