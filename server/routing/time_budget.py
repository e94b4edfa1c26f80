"""The local tier's budget in time: how much prompt and prediction fit a latency target.

Two measured rates decide it (`clients._speed`): prompt evaluation (tokens/s read
before the first token) and decode (tokens/s written after it). From them:

- the prompt gets what can be evaluated cold within `local.first_token_target_ms`
  (never more than `local.max_prompt_chars`): a cold request, the first after opening a
  file or a jump, then still shows something in time;
- the prediction is capped at `local.max_predict_ms` from the first token, and a
  multi-line completion is only asked for when a few lines can arrive within that cap
  (a first line shown fast beats five lines shown late; the next request extends it).

The total is this module's; how it is split between prefix, suffix and other files'
context is the caller's (`Pipeline._request`, `crossfile.fit`).

The window's start is anchored (`anchored_window`): it sits on a line whose number is
a multiple of a coarse grid, so typing only appends to the prompt and the model's KV
cache keeps the whole window until the cursor has moved a grid step further.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import re

import attrs

from synconfroute.clients._speed import Rates

from ..settings.config import CompletionSettings, LocalSettings
from ..vocab.positions import cap_window

# Characters per token of code for the small models we run (SmolLM2 reads click's
# core.py at ~3.9, argparse.py at ~4.2): a little below, so the prompt fits its time.
CHARS_PER_TOKEN = 3.5
# Never less prompt than this, however slow the machine: a few lines of code, below
# which a completion is a guess.
MIN_PROMPT_CHARS = 384
# The prompt sizes a budget takes, coarse steps: the measured rates move all the time,
# and a window that changed size at every request would move its start and lose the KV
# cache. Between two steps the smaller is taken.
PROMPT_STEPS = (384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
# Tokens a multi-line completion needs to be worth asking for: two short lines.
MULTILINE_MIN_TOKENS = 12
# Grid steps of the window's start, in lines, coarse first: the start moves only when
# the cursor has gone a whole step further, and the prompt before the cursor stays the
# same (appended to) meanwhile. A finer step only when the coarse one leaves too little.
GRID_STEPS = (32, 8, 1)


@attrs.frozen
class TierBudget:
    """What one local request may spend, in prompt and in prediction."""

    prompt_chars: int  # prefix + suffix + context, the total the split shares
    # A multi-line request's prediction: most tokens, and its time from the first token
    # (None = no time cap). A single line ends at its end (`completion.max_tokens`).
    max_tokens: int
    max_predict_s: float | None
    multiline: bool  # whether several lines can arrive within max_predict_s
    why: str  # one line for the log and the record


# The last budget, with what it was computed from: settings are never mutated and a
# backend's `Rates` is a new value with each measurement, so the same three objects
# give the same budget (asked once per request, and between measurements unchanged).
_last: tuple[LocalSettings, CompletionSettings, Rates | None, TierBudget] | None = None


def local_budget(
    local: LocalSettings, completion: CompletionSettings, rates: Rates | None
) -> TierBudget:
    """The local tier's budget from the settings and the measured rates (None or
    unmeasured: the settings' character and token caps alone; the embedded backend
    reports assumed rates until it has measured its own)."""
    global _last
    last = _last
    if last is not None and last[0] is local and last[1] is completion and last[2] is rates:
        return last[3]
    budget = _budget(local, completion, rates)
    _last = (local, completion, rates, budget)
    return budget


def _budget(
    local: LocalSettings, completion: CompletionSettings, rates: Rates | None
) -> TierBudget:
    chars = local.max_prompt_chars
    max_tokens = completion.max_tokens
    predict_s = local.max_predict_ms / 1000 if local.max_predict_ms > 0 else None
    multiline = True
    why: list[str] = []
    p = rates.prompt_tps if rates is not None else None
    d = rates.decode_tps if rates is not None else None
    if p and local.first_token_target_ms > 0:
        # One decode step (the first token) comes out of the same target.
        step_s = 1 / d if d else 0.0
        tokens = p * max(0.0, local.first_token_target_ms / 1000 - step_s)
        fit = max(MIN_PROMPT_CHARS, int(tokens * CHARS_PER_TOKEN))
        fit = max(s for s in PROMPT_STEPS if s <= fit) if fit < PROMPT_STEPS[-1] else fit
        chars = min(chars, fit)
        why.append(f"prompt {p:.0f} tok/s: {chars} chars")
    if d and predict_s is not None:
        fit_tokens = int(d * predict_s)
        max_tokens = max(1, min(max_tokens, fit_tokens + 1))
        multiline = fit_tokens >= MULTILINE_MIN_TOKENS
        why.append(f"decode {d:.0f} tok/s: {max_tokens} tokens{'' if multiline else ', one line'}")
    return TierBudget(
        prompt_chars=chars,
        max_tokens=max_tokens,
        max_predict_s=predict_s,
        multiline=multiline,
        why="; ".join(why) or "not measured yet: character and token caps",
    )


def anchor_line(line: int, context_lines: int) -> int:
    """The first line of a window that reaches `context_lines` back from `line`, moved
    forward to the coarsest grid step that keeps half of them (so it stays put while
    the cursor moves within a step); never past `line`."""
    first = line - context_lines
    if first <= 0:
        return 0
    # The coarsest step that keeps at least half the lines asked for (a short
    # `context_lines` is not rounded away).
    step = next((g for g in GRID_STEPS if 2 * g <= context_lines), 1)
    return min(line, -(-first // step) * step)


def anchored_window(
    prefix: str, suffix: str, limit: int, *, prefix_only: bool = False
) -> tuple[str, str]:
    """At most `limit` characters of prefix + suffix, the prefix starting at a grid line
    (counted from the prefix's own start, which `anchor_line` put on the grid).

    The suffix keeps `cap_window`'s share (a quarter, more if the prefix is short) and
    none at all for a model that only sees the prefix. The prefix then starts at the
    first line on the coarsest grid step whose rest fits, so typing appends to the
    same prompt until the cursor is a whole step further; a finer step only when no
    coarse line keeps half the room (a huge line falls back to `cap_window`'s cut)."""
    if prefix_only:
        suffix = ""
    if limit <= 0 or len(prefix) + len(suffix) <= limit:
        return prefix, suffix
    room_suffix = min(len(suffix), max(limit // 4, limit - len(prefix)))
    suffix = cap_window("", suffix, room_suffix)[1] if room_suffix < len(suffix) else suffix
    room = limit - len(suffix)
    if len(prefix) <= room:
        return prefix, suffix
    starts = _line_starts(prefix)
    lowest = len(prefix) - room  # a line starting here or later fits
    for step in GRID_STEPS:
        # The first line on this step whose rest fits; taken if it keeps at least half
        # the room (else a finer step keeps more, at the price of moving more often).
        # Line starts ascend: a bisection finds it, not a test of every line above.
        grid = starts[::step]
        k = bisect.bisect_left(grid, lowest)
        start = grid[k] if k < len(grid) else len(prefix)
        if len(prefix) - start >= room // 2:
            return prefix[start:], suffix
    return cap_window(prefix, "", room)[0], suffix


_LINE_END = re.compile(r"\r\n?|\n")


# The last prefix's line starts: the KV-aware sizing cuts one request's window at
# several sizes (`planner.plan_local`), each from the same prefix string.
_starts_of: tuple[str, list[int]] = ("", [0])


def _line_starts(text: str) -> list[int]:
    """Offsets where the lines of `text` start (LSP's rule: \\n, \\r\\n, \\r). In C
    loops (a split, or a regex where a \\r may end a line), not a loop per character."""
    global _starts_of
    last, known = _starts_of
    if text is last:  # the same string object (strings are immutable): the same answer
        return known
    if "\r" in text:
        starts = [0, *(m.end() for m in _LINE_END.finditer(text))]
    else:
        # Line k starts after the k lines above and their k breaks: all in C.
        lengths = itertools.accumulate(map(len, text.split("\n")), initial=0)
        starts = list(map(operator.add, lengths, itertools.count()))
        starts.pop()  # past the end: the last line has no end
    _starts_of = (text, starts)
    return starts


__all__ = [
    "GRID_STEPS",
    "TierBudget",
    "anchor_line",
    "anchored_window",
    "local_budget",
]
