"""How busy the cluster is, and how much that raises the bar for escalating.

Pure and clock-free (every call takes `now`, in seconds), so the server, the tests and the
organisation simulator (studies/orgsim) drive the same code.

The routing rule stays SynConfRoute: escalate when confidence < threshold or the syntax is
invalid. Under load the confidence bar moves down by `lift` (log-prob units, at most
`max_lift`), so fewer unsure-but-valid local answers go out; an invalid one still escalates
unless the cluster said "not now" (429/503 with Retry-After) or is unreachable. The lift
rises additively on every congestion signal (time to first token over the target, 429,
503, connection failure) and halves every `recover_s` seconds without one, so the bar
comes back down when the cluster recovers even though fewer requests probe it.

The escalation budget is separate: at most `share` of the completions of the last
`window_s` seconds escalate; near the cap, only the candidates most likely to help go out
(syntax-invalid, or confidence among the lowest `share` of recent ones).
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import Literal

import attrs

State = Literal["ok", "slow", "shedding", "down"]


@attrs.frozen(kw_only=True)
class Limits:
    """The user's bounds (routing.* settings)."""

    ttft_target_s: float = 0.5  # a first token slower than this is a congestion signal
    max_lift: float = 1.5  # the confidence bar moves down at most this far
    step: float = 0.25  # lift added per congestion signal
    recover_s: float = 10.0  # lift halves after this long without a signal
    ewma: float = 0.3  # weight of the newest first-token time in the moving figure
    default_retry_s: float = 5.0  # a 429/503 without Retry-After holds this long


@attrs.frozen(kw_only=True)
class Pressure:
    """What the router needs now, and why (hover card, `status`, ledger)."""

    state: State
    lift: float  # subtract from the threshold
    hold_until: float  # no escalation before this instant (Retry-After, connection loss)
    why: str
    ttft_s: float | None  # the moving first-token time

    def can_escalate(self, now: float) -> bool:
        return now >= self.hold_until


class Backpressure:
    """Per remote tier: the moving first-token time and the lift it implies."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._lift = 0.0
        self._last_signal = -1e18
        self._decayed_at = 0.0
        self._hold_until = -1e18
        self._ttft: float | None = None
        self._why = "cluster answering in time"
        self._state: State = "ok"

    def _decay(self, now: float) -> None:
        lim = self.limits
        if self._lift <= 0:
            self._decayed_at = now
            return
        start = max(self._decayed_at, self._last_signal)
        if now > start:
            self._lift *= 0.5 ** ((now - start) / lim.recover_s)
            if self._lift < lim.step / 8:
                self._lift = 0.0
            self._decayed_at = now

    def _signal(self, now: float, state: State, why: str) -> None:
        self._decay(now)
        self._lift = min(self.limits.max_lift, self._lift + self.limits.step)
        self._last_signal = self._decayed_at = now
        self._state, self._why = state, why

    def answered(self, now: float, ttft_s: float) -> None:
        """A remote answer started after `ttft_s` seconds."""
        a = self.limits.ewma
        self._ttft = ttft_s if self._ttft is None else (1 - a) * self._ttft + a * ttft_s
        if self._ttft > self.limits.ttft_target_s:
            self._signal(
                now,
                "slow",
                f"cluster slow: first token {1000 * self._ttft:.0f} ms "
                f"> target {1000 * self.limits.ttft_target_s:.0f} ms",
            )
        else:
            self._decay(now)

    def refused(self, now: float, status: int, retry_after_s: float | None) -> None:
        """The cluster shed the request (429 or 503), perhaps saying when to come back."""
        wait = self.limits.default_retry_s if retry_after_s is None else max(0.0, retry_after_s)
        self._hold_until = max(self._hold_until, now + wait)
        self._signal(now, "shedding", f"cluster shedding load ({status}), retry in {wait:.0f} s")

    def unreachable(self, now: float) -> None:
        """A connection failure or timeout before any token."""
        self._hold_until = max(self._hold_until, now + self.limits.default_retry_s)
        self._signal(now, "down", "cluster unreachable")

    def pressure(self, now: float) -> Pressure:
        self._decay(now)
        if self._lift == 0.0 and now >= self._hold_until:
            self._state, self._why = "ok", "cluster answering in time"
        return Pressure(
            state=self._state,
            lift=round(self._lift, 4),
            hold_until=self._hold_until,
            why=self._why,
            ttft_s=self._ttft,
        )


class EscalationBudget:
    """At most `share` of the last `window_s` seconds' completions escalate."""

    def __init__(self, share: float, window_s: float = 300.0) -> None:
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"escalation budget must be within 0..1, got {share}")
        self.share = share
        self.window_s = window_s
        self._seen: deque[tuple[float, bool]] = deque()  # (time, escalated)
        self._escalated = 0
        self._conf: deque[tuple[float, float]] = deque()  # recent local confidences
        self._sorted: list[float] = []

    def _trim(self, now: float) -> None:
        edge = now - self.window_s
        while self._seen and self._seen[0][0] < edge:
            _, esc = self._seen.popleft()
            self._escalated -= esc
        while self._conf and self._conf[0][0] < edge:
            _, c = self._conf.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, c)]

    def used(self, now: float) -> float:
        self._trim(now)
        return self._escalated / len(self._seen) if self._seen else 0.0

    def allow(self, now: float, confidence: float | None, syntax_invalid: bool) -> bool:
        """May this escalation candidate go out? Call `record` with the outcome after.

        The cap holds over the window (one escalation of slack, so the first completion
        of a quiet window may escalate). A fifth of it is kept for the candidates most
        likely to help: syntax-invalid, no confidence, or confidence among the lowest
        `share` of recent ones.
        """
        self._trim(now)
        if self.share >= 1.0:
            return True
        n = len(self._seen) + 1
        if self._escalated > self.share * n:
            return False
        likely = syntax_invalid or confidence is None
        if not likely and self._sorted:
            cut = self._sorted[max(0, int(self.share * len(self._sorted)) - 1)]
            likely = confidence is not None and confidence <= cut
        return likely or self._escalated + 1 <= 0.8 * self.share * n + 1

    def record(self, now: float, confidence: float | None, escalated: bool) -> None:
        self._trim(now)
        self._seen.append((now, escalated))
        self._escalated += escalated
        if confidence is not None:
            self._conf.append((now, confidence))
            bisect.insort(self._sorted, confidence)
