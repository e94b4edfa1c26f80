"""The model's answer, made an edit: the rewritten region out of the answer, the one
range that covers every change, and the confidence of the tokens that changed.

Pure: strings and numbers in, frozen values out.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence

import attrs

from ...learning.retention import minimal_edit
from .prompt import CURSOR, END, START


@attrs.frozen
class Rewrite:
    """The region as the model rewrote it, with where each of its characters came
    from in the answer (the cursor marker, if echoed, dropped)."""

    text: str
    at: tuple[int, ...]  # answer offset of each character of `text`
    end: int  # answer offset where the region ends (for an edit at its very end)


@attrs.frozen
class RegionEdit:
    """One edit of the region: `old[start:end]` becomes `text` (offsets in the old
    region); `new_start:new_end` is where `text` lies in the rewrite."""

    start: int
    end: int
    text: str
    new_start: int
    new_end: int


def parse(answer: str) -> Rewrite | None:
    """The rewritten region between the markers; None when the answer has no start
    marker (not an answer to this prompt). A missing end marker means the answer was
    cut: the region runs to its end only if the stream ended on its own, which the
    caller knows, so it is returned as is and judged there."""
    i = answer.find(START)
    if i < 0:
        return None
    begin = i + len(START)
    if answer.startswith("\n", begin):
        begin += 1
    stop = answer.find(END, begin)
    if stop < 0:
        stop = len(answer)
    elif stop > begin and answer[stop - 1] == "\n":
        stop -= 1  # the line break the prompt put before the end marker
    chars: list[str] = []
    at: list[int] = []
    j = begin
    while j < stop:
        if answer.startswith(CURSOR, j):
            j += len(CURSOR)
            continue
        chars.append(answer[j])
        at.append(j)
        j += 1
    return Rewrite("".join(chars), tuple(at), stop)


def complete(answer: str) -> bool:
    """Whether the answer closed the region (its end marker came)."""
    i = answer.find(START)
    return i >= 0 and answer.find(END, i) >= 0


def one_edit(old: str, new: str) -> RegionEdit | None:
    """The smallest single range of `old` whose replacement gives `new` (the common
    head and tail kept); None when nothing changed."""
    if old == new:
        return None
    start, end, text = minimal_edit(old, new)
    return RegionEdit(start, end, text, start, start + len(text))


def changed_spans(old: str, new: str) -> list[tuple[int, int]]:
    """Where `new` differs from `old`, as spans of `new` (a deletion: an empty span at
    its seam). Finer than the one edit: the text copied between two changes is not in
    any span."""
    sm = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    return [(b0, b1) for tag, _a0, _a1, b0, b1 in sm.get_opcodes() if tag != "equal"]


def changed_logprobs(
    tokens: Sequence[tuple[str, float]], answer: str, rewrite: Rewrite, old: str
) -> tuple[float, ...]:
    """The log-probs of the answer's tokens that produced a change (those overlapping a
    changed span; a deletion: the token at its seam), not the copied ones. When the
    tokens do not spell the answer (a server that reports them otherwise), all count."""
    if "".join(t for t, _ in tokens) != answer:
        return tuple(lp for _, lp in tokens)
    spans = []  # in answer offsets, half-open
    for b0, b1 in changed_spans(old, rewrite.text):
        if b1 > b0:
            spans.append((rewrite.at[b0], rewrite.at[b1 - 1] + 1))
        else:
            seam = rewrite.at[b0] if b0 < len(rewrite.at) else rewrite.end
            spans.append((seam, seam + 1))
    out = []
    pos = 0
    for text, lp in tokens:
        t_lo, t_hi = pos, pos + len(text)
        pos = t_hi
        if any(t_lo < hi and t_hi > lo for lo, hi in spans):
            out.append(lp)
    return tuple(out)


def mean(logprobs: Sequence[float]) -> float | None:
    """Mean log-prob (vLLM's -inf clamp, -9999, for any non-finite value)."""
    vals = [lp if math.isfinite(lp) else -9999.0 for lp in logprobs]
    return sum(vals) / len(vals) if vals else None


__all__ = [
    "RegionEdit",
    "Rewrite",
    "changed_logprobs",
    "changed_spans",
    "complete",
    "mean",
    "one_edit",
    "parse",
]
