"""The local window sized by what the model's KV cache already holds.

`time_budget.local_budget` sizes a prompt that is evaluated COLD within
`local.first_token_target_ms`. Most requests are not cold: typing appends to an
anchored window, and a background prefill evaluates a prompt before it is asked for.
What the cache holds costs nothing before the first token, so only the part it does
not hold has to be evaluated: the window may be as large as the backend holds without
trimming (and `local.max_prompt_chars`) when the rest is already evaluated. A larger
window is taken only when its uncached part is no more than the cold-sized window's
(plus a few tokens): it never makes a request slower than the window it replaces.

The sizes tried are `time_budget.PROMPT_STEPS`, largest first: the window a prefill
grew into, and the one typed in since, is found again at every key (its anchored
start does not move until the cursor is a grid step further), so the size stays put
and typing only appends. A prefill first warms the prompt the next request would
send, then a window twice as large (`grow_size`) into a spare cache: rest after rest
the warm window doubles up to the cap.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from .time_budget import PROMPT_STEPS, TierBudget


def larger_sizes(cold_chars: int, cap_chars: int) -> list[int]:
    """The window sizes above the cold budget, up to `cap_chars`, largest first."""
    return sorted((s for s in PROMPT_STEPS if cold_chars < s <= cap_chars), reverse=True)


# What a larger window may cost on top of the cold-sized one, as a share of the cold
# budget: a few tokens (the last line typed), never a prompt evaluation the user waits for.
SLACK = 1 / 8


def sized(budget: TierBudget, cap_chars: int, uncached: Callable[[int], int]) -> TierBudget:
    """`budget` with the largest prompt whose part not in the KV cache (`uncached(size)`,
    in characters) is no more than the cold-sized window's would be now, plus a little
    (SLACK): never slower than the cold-sized prompt, so the window only grows where a
    prefill (or typing) has already evaluated it. Unchanged when no larger one fits (or
    the cold budget is already the cap)."""
    cold = budget.prompt_chars
    sizes = larger_sizes(cold, cap_chars)
    if not sizes:
        return budget
    allowed = min(cold, uncached(cold) + int(cold * SLACK))
    for size in sizes:
        left = uncached(size)
        if left <= allowed:
            why = f"{budget.why}; {size} chars, {size - left} of them cached"
            return attrs.evolve(budget, prompt_chars=size, why=why)
    return budget


# A prefill grows the window to at least this many times the one warm now: in steps,
# so that a short rest already brings a larger window (each step is evaluated from its
# own start, in the other cache), up to the cap over a few rests.
GROWTH = 2


def grow_size(budget: TierBudget, cap_chars: int) -> int | None:
    """The window a background prefill grows the cache to once the next request's
    prompt (`budget`, as the cache sized it) is warm: the first size at least GROWTH
    times larger, at most the cap; None when there is none."""
    sizes = larger_sizes(budget.prompt_chars, cap_chars)
    if not sizes:
        return None
    return min((s for s in sizes if s >= GROWTH * budget.prompt_chars), default=sizes[0])


__all__ = ["GROWTH", "SLACK", "grow_size", "larger_sizes", "sized"]
