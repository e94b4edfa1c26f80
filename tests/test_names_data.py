"""The names gate on every Python and C++ ground truth of the benchmark data: zero false
rejects.

The data folder comes from SYNCONFROUTE_DATA, default ../shared/data next to the repository;
the test skips when it is absent. studies/names_accuracy.py prints the same counts.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from synconfroute.server.syntax import SyntaxDocument

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("SYNCONFROUTE_DATA") or ROOT.parent / "shared" / "data")
FILES = ("humaneval-single-line-infilling.jsonl.gz", "safim-block.jsonl.gz", "safim-api.jsonl.gz")

pytestmark = pytest.mark.skipif(
    not all((DATA / f).exists() for f in FILES),
    reason=f"benchmark data not found in {DATA} (set SYNCONFROUTE_DATA)",
)


def _python_truths() -> dict[str, list[tuple[str, str, str, str]]]:
    """dataset -> (task, prefix, truth, suffix), every Python task."""
    out: dict[str, list[tuple[str, str, str, str]]] = {}
    with gzip.open(DATA / FILES[0], "rt", encoding="utf-8") as fh:
        out["humaneval"] = [
            (r["task_id"], r["prompt"], r["canonical_solution"], r["suffix"])
            for r in map(json.loads, fh)
        ]
    for ds, name in (("safim-block", FILES[1]), ("safim-api", FILES[2])):
        with gzip.open(DATA / name, "rt", encoding="utf-8") as fh:
            rows = [r for r in map(json.loads, fh) if r["lang"] == "python"]
        out[ds] = []
        for r in rows:
            parts = r["eval_prompt"].split("{{completion}}")
            if len(parts) == 2:
                out[ds].append((r["task_id"], parts[0], r["ground_truth"], parts[1]))
    return out


@pytest.mark.parametrize("dataset", ["humaneval", "safim-block", "safim-api"])
def test_no_ground_truth_uses_an_undefined_name(dataset: str) -> None:
    items = _python_truths()[dataset]
    assert len(items) == {"humaneval": 1033, "safim-block": 805, "safim-api": 181}[dataset]
    flagged = []
    for task, prefix, truth, suffix in items:
        doc = SyntaxDocument(prefix + suffix, "python")
        v = doc.check(truth, len(prefix.encode()), names=True, budget_s=10)
        assert v.status == "valid", (task, v)
        if v.undefined:
            flagged.append((task, v.undefined))
    assert flagged == []


def _cpp_truths() -> list[tuple[str, str, str, str]]:
    """(task, prefix, truth, suffix): every C++ task of SAFIM block and API."""
    out = []
    for name in FILES[1:]:
        with gzip.open(DATA / name, "rt", encoding="utf-8") as fh:
            for r in map(json.loads, fh):
                parts = r["eval_prompt"].split("{{completion}}")
                if r["lang"] == "cpp" and len(parts) == 2:
                    out.append((r["task_id"], parts[0], r["ground_truth"], parts[1]))
    return out


def test_no_cpp_ground_truth_uses_a_name_out_of_scope() -> None:
    # C++ looks names up by scope and against the standard headers' names (_cscope): every
    # SAFIM C++ ground truth, completed as the server checks it, flags none.
    items = _cpp_truths()
    assert len(items) == 5020
    flagged = []
    for task, prefix, truth, suffix in items:
        doc = SyntaxDocument(prefix + suffix, "cpp")
        v = doc.check(truth, len(prefix.encode()), names=True, budget_s=10)
        if v.undefined:
            flagged.append((task, v.undefined))
    assert flagged == []
