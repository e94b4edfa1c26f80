"""The pipeline's ceiling: what the server's own rules cost a perfect answer.

Each task's ground truth goes through exactly what the server does to a model's answer
(`generate.treat`: the stop strings, then `post_process` in the single-line or multi-line
mode the server picks at that cursor) and is then run against the task's tests; the gate
is asked about it too. The share of ground truths that still pass is the best pass@1 any
model can reach through this pipeline: the oracle rows are bounded by it. It is a product
figure: it says what the editor's rules cost on the user's own tasks.

The token budget is replayed too: a ground truth longer than the run's `max_tokens`
tokens of the local model is cut there, then trimmed as the server trims a length-cut
answer (to whole lines; multi-line, to the lines the gate accepts). Only the embedded
model's tokenizer is at hand (Ollama and vLLM expose none to us here): with another local
backend the budget is not replayed, and `budget_heads` says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

import attrs

from synconfroute.clients.errors import BackendError

from ..routing.gate import SyntaxGate, make_gate
from ..routing.request import CompletionContext
from ..routing.text_rules import REQUEST_STOPS
from ..settings.config import Settings
from .datasets import Task
from .execute import ExecResult, exec_key
from .generate import context_for, multiline_for, treat
from .records import Generation

# Why a ground truth did not come through intact (the first rule that changed it).
WHITESPACE = "whitespace only (the server inserts nothing)"
STOP = "cut by a stop string"
SINGLE_MID = "cut by single-line mode at a mid-line cursor"
SINGLE_START = "cut by single-line mode at a line start"
SINGLE_SETTING = "cut by single-line mode (completion.multiline = false)"
POST = "cut by post-processing (suffix echo, fence, blank lines)"
BUDGET = "cut by the token budget (max_tokens), then trimmed to whole lines"
AS_WRITTEN = "fails its tests as written (data or harness)"
WARN_BELOW = 0.99


@attrs.frozen(kw_only=True)
class TruthFate:
    """What the server would insert for a task's ground truth, and why it changed."""

    text: str
    intact: bool
    cause: str | None  # None when intact


Heads = Mapping[str, str]  # task key -> its ground truth cut at the token budget


def fate(task: Task, settings: Settings, heads: Heads | None = None) -> TruthFate | None:
    """None for a task without a ground truth. `heads`: the truths longer than the token
    budget, cut there (`budget_heads`)."""
    truth = task.truth
    if truth is None:
        return None
    head = heads.get(task.key) if heads else None
    if head is None:
        gen = Generation(backend="ceiling", model="ground truth", raw=truth, text="")
        text = treat(task, gen, settings).text
    else:
        gen = Generation(
            backend="ceiling", model="ground truth", raw=head, text="", finish_reason="length"
        )
        text = treat(task, gen, settings, make_gate(settings.routing)).text
    if text == truth:
        return TruthFate(text=text, intact=True, cause=None)
    if head is not None:
        cause = BUDGET
    elif not truth.strip():
        cause = WHITESPACE
    elif any(s in truth for s in REQUEST_STOPS):
        cause = STOP
    elif not multiline_for(task, settings) and "\n" in truth.lstrip("\n"):
        line = context_for(task, settings).prefix.rsplit("\n", 1)[-1]
        if not settings.completion.multiline and task.multiline:
            cause = SINGLE_SETTING
        else:
            cause = SINGLE_MID if line.strip() else SINGLE_START
    else:
        cause = POST
    return TruthFate(text=text, intact=False, cause=cause)


async def budget_heads(
    tasks: Iterable[Task], settings: Settings, max_tokens: int, err: TextIO
) -> dict[str, str]:
    """The ground truths longer than `max_tokens` tokens of the local model, cut there,
    by task key; empty (and a note on `err`) when the local model's tokenizer is not at
    hand: only the embedded model's is."""
    from synconfroute.clients.embedded import EmbeddedBackend

    from ..routing.backends import choose_local, make_local

    choice = await choose_local(settings.local)
    if choice.kind != "embedded":
        print(
            f"note: the ceiling does not replay the token budget: no tokenizer for the "
            f"{choice.kind} local tier here",
            file=err,
        )
        return {}
    backend = make_local(settings.local, "embedded")
    assert isinstance(backend, EmbeddedBackend)
    heads: dict[str, str] = {}
    try:
        for task in tasks:
            if task.truth and (head := await backend.head(task.truth, max_tokens)) is not None:
                heads[task.key] = head
    except BackendError as exc:
        print(f"note: the ceiling does not replay the token budget: {exc}", file=err)
        return {}
    finally:
        await backend.aclose()
    return heads


def jobs(
    tasks: Iterable[Task], settings: Settings, heads: Heads | None = None
) -> dict[str, tuple[Task, str]]:
    """The (task, text) runs the ceiling needs, by execution key."""
    out: dict[str, tuple[Task, str]] = {}
    for task in tasks:
        f = fate(task, settings, heads)
        if f is not None:
            out.setdefault(exec_key(task, f.text), (task, f.text))
    return out


def summarize(
    tasks: Iterable[Task],
    settings: Settings,
    execs: Mapping[str, ExecResult],
    gate: SyntaxGate | None = None,
    heads: Heads | None = None,
) -> dict[str, dict[str, Any]]:
    """Per dataset/language: tasks, intact, passed, the ceiling (passed / tasks), gate
    rejects of passing truths, and the causes of the losses, most common first. Tasks
    without a ground truth or without its execution result are left out."""
    groups: dict[str, dict[str, Any]] = {}
    for task in tasks:
        f = fate(task, settings, heads)
        res = execs.get(exec_key(task, f.text)) if f is not None else None
        if f is None or res is None:
            continue
        g = groups.setdefault(
            f"{task.dataset}/{task.language}",
            {"n": 0, "intact": 0, "passed": 0, "gate_rejects": 0, "causes": Counter()},
        )
        g["n"] += 1
        g["intact"] += f.intact
        if res.passed:
            g["passed"] += 1
            if gate is not None and f.text:
                whole = CompletionContext(
                    prefix=task.prefix, suffix=task.suffix, language=task.language
                )
                g["gate_rejects"] += gate.check(whole, f.text).status == "invalid"
        else:
            g["causes"][f.cause or AS_WRITTEN] += 1
    out: dict[str, dict[str, Any]] = {}
    for name, g in sorted(groups.items()):
        n = g["n"]
        out[name] = {
            "n": n,
            "intact": g["intact"],
            "passed": g["passed"],
            "ceiling": round(g["passed"] / n, 6),
            "gate_rejects": g["gate_rejects"] if gate is not None else None,
            "causes": dict(g["causes"].most_common()),
        }
    return out


def warnings(ceiling: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per group whose ceiling is below 99 %, with its three main causes."""
    lines = []
    for name, g in ceiling.items():
        if g["ceiling"] >= WARN_BELOW:
            continue
        lost = g["n"] - g["passed"]
        causes = ", ".join(
            f"{cause}: {100 * count / lost:.0f} %" for cause, count in list(g["causes"].items())[:3]
        )
        lines.append(
            f"warning: {name}: the pipeline's ceiling is {100 * g['ceiling']:.1f} % "
            f"({g['passed']}/{g['n']} ground truths pass once the server's rules are "
            f"applied); of the {lost} lost: {causes}"
        )
    return lines
