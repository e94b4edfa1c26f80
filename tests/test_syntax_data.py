"""The gate on real benchmark data (a slice; studies/gate_accuracy.py runs all of it).

The data folder comes from SYNCONFROUTE_DATA, default ../shared/data next to the repository;
the tests skip when it is absent.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from synconfroute.server.syntax import SyntaxDocument, _compilers

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("SYNCONFROUTE_DATA") or ROOT.parent / "shared" / "data")
PER_LANG = 60

pytestmark = pytest.mark.skipif(
    not (DATA / "safim-block.jsonl.gz").exists(),
    reason=f"benchmark data not found in {DATA} (set SYNCONFROUTE_DATA)",
)


def _items() -> list[tuple[str, str, str, str, str]]:
    """(task, lang, prefix, truth, suffix): HumanEval and SAFIM block, PER_LANG per language."""
    out = []
    with gzip.open(DATA / "humaneval-single-line-infilling.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in list(fh)[:PER_LANG]:
            r = json.loads(line)
            out.append((r["task_id"], "python", r["prompt"], r["canonical_solution"], r["suffix"]))
    counts: dict[str, int] = {}
    with gzip.open(DATA / "safim-block.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            lang = r["lang"]
            if lang not in ("python", "java", "cpp") or counts.get(lang, 0) >= PER_LANG:
                continue
            counts[lang] = counts.get(lang, 0) + 1
            pre, suf = r["eval_prompt"].split("{{completion}}")
            out.append((r["task_id"], lang, pre, r["ground_truth"], suf))
    return out


ITEMS = _items() if (DATA / "safim-block.jsonl.gz").exists() else []


@pytest.mark.parametrize("mode", ["tree-sitter", "confirm"])
def test_ground_truths_are_valid(mode: str) -> None:
    rejected = []
    for task, lang, pre, truth, suf in ITEMS:
        doc = SyntaxDocument(pre + suf, lang)
        v = doc.check(truth, len(pre.encode()), mode=mode, budget_s=10)  # type: ignore[arg-type]
        if v.status != "valid":
            rejected.append((task, lang, v))
    assert len(ITEMS) == 4 * PER_LANG
    assert rejected == []


def test_dropped_closers_are_caught() -> None:
    """Drop the last closing bracket of each ground truth; where Python's ast or javalang
    rejects the result, the tree-sitter gate must too (C++ needs g++: see the script)."""
    counted = missed = 0
    for task, lang, pre, truth, suf in ITEMS:
        if lang == "cpp":
            continue
        i = max(truth.rfind(c) for c in ")]}")
        if i < 0:
            continue
        broken = truth[:i] + truth[i + 1 :]
        checker = "python-ast" if lang == "python" else "javalang"
        if _compilers.run_checker(checker, pre + broken + suf, None).ok:
            continue
        counted += 1
        v = SyntaxDocument(pre + suf, lang).check(broken, len(pre.encode()), budget_s=10)
        if v.status != "invalid":
            missed += 1
            print("missed", task, lang)
    assert counted > 100
    assert missed == 0
