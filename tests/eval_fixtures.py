"""HumanEval multi-line and random-span tasks, built from the single-line release.

../shared/data holds only HumanEval single-line infilling. Every single-line task of a
problem is the same program (prompt + canonical_solution + suffix) with one body line
masked, so the masked lines of a problem give its solution's body lines. From them we
build tasks in the same format as the human-eval-infilling release's other benchmarks:
- multi-line: two or three consecutive body lines masked, whole lines with their newlines
  (as `MultiLineInfilling/HumanEval/N/Li_Lj`);
- random-span: a span from one random character to another inside the body, which may
  start and end in the middle of a line (as `RandomSpanInfilling/HumanEval/N/k`).
The tests and entry points are the problem's own; nothing is invented but the mask.
"""

from __future__ import annotations

import gzip
import json
import os
import random
from pathlib import Path
from typing import Any

from synconfroute.server.evaluation.datasets import DATA_ENV

# The test-only data setting: $SYNCONFROUTE_DATA, else ../shared/data next to the
# repository (our development machines). Tests that run `eval` set the variable to it, so
# the command reads these files instead of downloading them.
DATA = Path(
    os.environ.get(DATA_ENV) or Path(__file__).resolve().parents[1].parent / "shared" / "data"
)


def single_line_rows(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def problems(rows: list[dict[str, Any]]) -> dict[str, tuple[dict[str, Any], list[tuple[int, int]]]]:
    """problem -> (one of its rows, the (start, end) offsets of its masked lines, sorted).

    The rows of a problem are not always the same program to the byte (some have one more
    blank line after the docstring): the most common program is kept, with its rows."""
    by_problem: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for r in rows:
        name = "/".join(r["task_id"].split("/")[1:3])  # HumanEval/N
        whole = r["prompt"] + r["canonical_solution"] + r["suffix"]
        by_problem.setdefault(name, {}).setdefault(whole, []).append(r)
    out: dict[str, tuple[dict[str, Any], list[tuple[int, int]]]] = {}
    for name, variants in by_problem.items():
        same = max(variants.values(), key=len)
        spans = sorted(
            (len(r["prompt"]), len(r["prompt"]) + len(r["canonical_solution"])) for r in same
        )
        out[name] = (same[0], spans)
    return out


def _row(base: dict[str, Any], task_id: str, start: int, end: int) -> dict[str, Any]:
    whole = base["prompt"] + base["canonical_solution"] + base["suffix"]
    return {
        "task_id": task_id,
        "entry_point": base["entry_point"],
        "prompt": whole[:start],
        "suffix": whole[end:],
        "canonical_solution": whole[start:end],
        "test": base["test"],
    }


def multiline_rows(rows: list[dict[str, Any]], n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for name, (base, spans) in sorted(problems(rows).items()):
        runs = [
            (i, j)
            for i in range(len(spans))
            for j in (i + 1, i + 2)
            if j < len(spans) and all(spans[k][1] == spans[k + 1][0] for k in range(i, j))
        ]
        if not runs:
            continue
        i, j = rng.choice(runs)
        out.append(_row(base, f"MultiLineInfilling/{name}/L{i}_L{j}", spans[i][0], spans[j][1]))
    return rng.sample(out, min(n, len(out)))


def random_span_rows(rows: list[dict[str, Any]], n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for name, (base, spans) in sorted(problems(rows).items()):
        lo, hi = spans[0][0], spans[-1][1]
        if hi - lo < 2:
            continue
        start = rng.randrange(lo, hi - 1)
        end = rng.randrange(start + 1, hi)
        out.append(_row(base, f"RandomSpanInfilling/{name}/0", start, end))
    return rng.sample(out, min(n, len(out)))


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return path
