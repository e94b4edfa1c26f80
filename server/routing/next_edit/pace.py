"""Whether the local model answers next edits in time (`next_edit.only_in_time`).

A next edit is a rewrite of the whole editable region, ten times a completion's tokens.
A local model too slow for it would time out on every request and escalate each one:
every keystroke's region would go to the cluster, which is what routing exists to
avoid. So next edits are on only while the local model keeps up, judged two ways:

- before asking: its measured rates (`clients._speed`) put the prompt's evaluation and
  the region's rewrite over its budget (`next_edit.local_ms` when the request may
  escalate, else `next_edit.deadline_ms`; only when the next-edit model is the
  completion model, whose rates these are);
- after asking: its last `WINDOW` rewrites all ran out of time. Then one request in
  `RETRY_S` is still let through, so a machine that got less busy gets them back.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable

from synconfroute.clients._speed import Rates

from ..time_budget import CHARS_PER_TOKEN

WINDOW = 3  # late rewrites in a row that turn next edits off
RETRY_S = 60.0  # while off, one request in this long measures again
MARKER_TOKENS = 16  # the region's markers and the answer's end, beyond its code


def rewrite_s(rates: Rates | None, prompt_chars: int, region_chars: int) -> float | None:
    """Seconds to evaluate the prompt and write the region anew at `rates`; None while
    the rates are unmeasured (the embedded backend's assumed ones included)."""
    if rates is None or not rates.samples or not rates.prompt_tps or not rates.decode_tps:
        return None
    prompt = prompt_chars / CHARS_PER_TOKEN / rates.prompt_tps
    return prompt + (region_chars / CHARS_PER_TOKEN + MARKER_TOKENS) / rates.decode_tps


class Pace:
    """One session's view of the local model's pace on next edits."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._late: collections.deque[bool] = collections.deque(maxlen=WINDOW)
        self._tried = float("-inf")  # when a request last went to the local model

    def too_slow(
        self,
        rates: Rates | None,
        prompt_chars: int,
        region_chars: int,
        budget_ms: float,
        budget: str = "next_edit.local_ms",
    ) -> str | None:
        """Why the local model cannot answer this request within `budget_ms` (the
        setting named `budget`); None: ask it."""
        need = rewrite_s(rates, prompt_chars, region_chars)
        if need is not None and need * 1000 > budget_ms:
            assert rates is not None
            return (
                f"the local model needs about {need:.1f} s to rewrite a region "
                f"(prompt {rates.prompt_tps:.0f} tok/s, decode {rates.decode_tps:.0f} tok/s), "
                f"over {budget} = {budget_ms:.0f} ms"
            )
        late = len(self._late) == WINDOW and all(self._late)
        if late and self._clock() - self._tried < RETRY_S:
            return (
                f"the local model's last {WINDOW} rewrites ran out of time "
                f"({budget} = {budget_ms:.0f} ms); trying again within {RETRY_S:.0f} s"
            )
        return None

    def observed(self, late: bool) -> None:
        """A local rewrite ended: in time, or cut by its time budget."""
        self._tried = self._clock()
        self._late.append(late)


__all__ = ["RETRY_S", "WINDOW", "Pace", "rewrite_s"]
