"""The organisation-load study's verified-escalation figures (studies/org_load.py): the
draft a verified escalation sends and how much of it the oracle keeps, from eval records."""

from __future__ import annotations

from studies._orgmodel import Outcome
from studies.org_load import drafted, threshold_for_share, verify_savings
from synconfroute.server.evaluation.datasets import Task
from synconfroute.server.evaluation.records import Generation, Record


def record(prefix: str, raw: list[str], text: str, truth: str, *, multiline: bool) -> Record:
    task = Task(
        dataset="hand",
        task_id="t",
        language="python",
        prefix=prefix,
        suffix="\n",
        truth=truth,
        multiline=multiline,
    )
    local = Generation(
        backend="embedded",
        model="m",
        raw="".join(raw),
        text=text,
        tokens=tuple((t, -0.1) for t in raw),
    )
    remote = Generation(backend="oracle", model="truth", raw=truth, text=truth, oracle=True)
    return Record(task=task, local=local, remote=remote)


def test_the_draft_is_the_post_processed_answer_not_every_generated_token() -> None:
    # A block answer cut at its Markdown fence: the fence and the prose after it are
    # never sent to the verifier, so they are not draft tokens.
    raw = ["    x", " =", " 1", "\n", "    y", " =", " 3", "\n", "```", "\n", "This"]
    rec = record(
        "def f():\n", raw, "    x = 1\n    y = 3\n", "    x = 1\n    y = 2\n", multiline=True
    )
    assert drafted(rec) == {"draft_tokens": 8, "draft_kept": 6}


def test_a_single_line_draft_ends_at_its_line_and_a_token_across_the_end_is_kept() -> None:
    # The line break merged into the last token is not part of the draft; the draft's
    # own text equals the truth, so every draft token is kept.
    raw = ["    return", " n", ":\n", "    pass"]
    rec = record("def f(n):\n", raw, "    return n:", "    return n:", multiline=False)
    assert drafted(rec) == {"draft_tokens": 3, "draft_kept": 3}


def test_no_draft_without_the_oracle_or_tokens() -> None:
    rec = record("x = ", ["1"], "1", "1", multiline=False)
    plain = Record(task=rec.task, local=rec.local, remote=None)
    assert drafted(plain) == {"draft_tokens": 0, "draft_kept": 0}


def test_savings_count_the_scoring_token_and_only_escalated_drafts() -> None:
    def o(conf: float, tokens: int, kept: int) -> Outcome:
        return Outcome(
            confidence=conf,
            valid=True,
            local_pass=False,
            remote_pass=True,
            local_s=0.1,
            draft_tokens=tokens,
            draft_kept=kept,
        )

    # Escalated at -1: the first two. 16 output tokens: keeping 10 leaves 6 + the one
    # token of the scoring request (9 saved); keeping none costs that one token (-1).
    line = verify_savings([o(-2.0, 12, 10), o(-3.0, 4, 0), o(0.0, 5, 5)], -1.0, 16)
    assert "all tasks 15 of 21 draft tokens kept" in line
    assert "2 escalated at nominal, 2 with a draft, 10 of 16 draft tokens kept" in line
    assert "decode steps saved per escalation 4.00 of 16" in line


def test_the_threshold_counts_answers_without_a_confidence_as_escalated() -> None:
    def o(conf: float | None, valid: bool = True) -> Outcome:
        return Outcome(
            confidence=conf, valid=valid, local_pass=False, remote_pass=True, local_s=0.1
        )

    # 10 tasks: one invalid, three empty answers (no confidence), six scored. 60% means
    # two of the scored ones, not six (the empty ones escalate at any threshold).
    tasks = [o(-0.1, valid=False)] + [o(None)] * 3 + [o(-x / 10) for x in range(1, 7)]
    t = threshold_for_share(tasks, 0.6)
    escalated = [x for x in tasks if not x.valid or x.confidence is None or x.confidence < t]
    assert len(escalated) == 6, (t, escalated)
