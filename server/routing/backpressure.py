"""How busy the cluster is, and how much that raises the bar for escalating.

Pure and clock-free (every call takes `now`, in seconds), so the server, the tests and the
organisation simulator (studies/org_load.py, its model in studies/_orgmodel.py) drive the
same code.

The routing rule stays SynConfRoute: escalate when confidence < threshold or the syntax is
invalid. Under load the confidence bar moves down by `lift` (log-prob units, at most
`max_lift`), so fewer unsure-but-valid local answers go out; an invalid one still escalates
unless the cluster said "not now" (429/503 with Retry-After), is unreachable, or cannot
start the answer in time (then the request answers empty at once instead of waiting). The lift
rises by `step` on every congestion signal (a first token slower than the target, 429,
503, a connection failure) and falls by `step` on every answer in time. One client sees
only its own escalations, a few a minute, so the lift also halves every `recover_s`
seconds without a signal: the bar comes back down after a busy spell even when the
raised bar leaves few requests to probe the cluster. A request that would wait longer
for its first token than its deadline allows (by the moving figure) keeps its valid
local answer instead of queueing.

The cluster's own signal (`cluster`, a reading of vLLM's /metrics, polled while
escalating) moves the same lift without waiting for this client's answers: a queue on
the cluster (or a full KV cache) raises it at once, by more steps the deeper the queue
is against the running batch; an idle cluster takes it off at once, and the moving
first-token time back to the target, instead of a half-life. `Pressure.source` says
which signal moved the bar last (hover card, `status`).

The escalation budget is separate: at most `share` of the completions of the last
`window_s` seconds escalate; near the cap, only the candidates most likely to help go out
(syntax-invalid, or confidence among the lowest `share` of recent ones).
"""

from __future__ import annotations

import bisect
from collections import deque
from typing import Literal

import attrs

from ..vocab.kinds import Reason

State = Literal["ok", "slow", "queued", "shedding", "down"]
Source = Literal["answers", "cluster metrics"]  # which signal moved the bar last


@attrs.frozen(kw_only=True)
class Limits:
    """The user's bounds (routing.* settings)."""

    ttft_target_s: float = 0.5  # a first token slower than this is a congestion signal
    max_lift: float = 1.5  # the confidence bar moves down at most this far
    step: float = 0.5  # lift added per congestion signal
    recover_s: float = 600.0  # lift halves after this long without a signal
    ewma: float = 0.3  # weight of the newest first-token time in the moving figure
    default_retry_s: float = 5.0  # a 429/503 without Retry-After holds this long, at first
    max_hold_s: float = 120.0  # consecutive failures double the hold up to this
    relief: float = 1.0  # an answer in time takes this share of a step off the lift
    queue_busy: float = 3.0  # requests waiting on the cluster that count as a queue
    kv_busy: float = 0.95  # KV-cache usage at which the cluster counts as full
    kv_idle: float = 0.8  # below it (and no queue) the cluster counts as idle
    max_queue_steps: float = 3.0  # steps a single reading of a deep queue adds at most


@attrs.frozen(kw_only=True)
class Pressure:
    """What the router needs now, and why (hover card, `status`, ledger)."""

    state: State
    lift: float  # subtract from the threshold
    hold_until: float  # no escalation before this instant (Retry-After, connection loss)
    why: str
    ttft_s: float | None  # the moving first-token time
    source: Source = "answers"  # which signal moved the bar last

    def can_escalate(self, now: float, deadline: float | None = None) -> bool:
        """False while the cluster said "not now", or when the moving first-token time
        says the answer would start too late to be written by `deadline` (an instant)."""
        if now < self.hold_until:
            return False
        # The answer must start early enough to be written too: half the time left.
        return deadline is None or self.ttft_s is None or self.ttft_s < 0.5 * (deadline - now)


class Backpressure:
    """Per remote tier: the moving first-token time and the lift it implies."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._lift = 0.0
        self._last_signal = -1e18
        self._decayed_at = 0.0
        self._hold_until = -1e18
        self._ttft: float | None = None
        self._ttft_at = 0.0  # when the moving first-token time last took a sample
        self._why = "cluster answering in time"
        self._state: State = "ok"
        self._failures = 0  # in a row, without an answer between them
        # The cluster's own signal (its /metrics), apart from the answers' lift.
        self._clift = 0.0
        self._clift_at = 0.0
        self._cwhy = ""
        self._explained = False  # the last congestion sign came while a queue showed

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
        # A congestion sign while the cluster reports a queue: the queue explains it.
        self._explained = self._cluster_now(now) > 0

    def _cluster_now(self, now: float) -> float:
        """The cluster signal's lift, halving every `recover_s` since its last reading
        (readings come only while this client escalates)."""
        lift = self._clift * float(0.5 ** (max(0.0, now - self._clift_at) / self.limits.recover_s))
        return 0.0 if lift < self.limits.step / 8 else lift

    def cluster(
        self, now: float, waiting: float, running: float, kv_usage: float | None, where: str
    ) -> None:
        """A reading of the cluster's own load (`where`: the metrics URL it came from).
        Its lift is kept apart from the answers' and the larger of the two applies: both
        see the same congestion, so they do not add up."""
        lim = self.limits
        kv = "" if kv_usage is None else f", KV cache {100 * kv_usage:.0f}% used"
        seen = f"{waiting:.0f} waiting, {running:.0f} running{kv} ({where})"
        if waiting >= lim.queue_busy or (kv_usage is not None and kv_usage >= lim.kv_busy):
            # A request joining a queue as deep as the running batch waits about one
            # whole answer for a slot: that is the deadline gone, so raise the bar by
            # several steps at once rather than one a poll.
            steps = min(lim.max_queue_steps, 1.0 + waiting / max(1.0, running))
            self._clift = min(lim.max_lift, self._cluster_now(now) + steps * lim.step)
            self._cwhy = f"cluster queue: {seen}"
        elif waiting == 0 and (kv_usage is None or kv_usage < lim.kv_idle):
            # Idle: the cluster's lift goes at once (no half-life to wait for), and so do
            # the slow answers its queue explained. Slow answers from a cluster without
            # a queue (a slow network, a long prefill) stay the answers' own business.
            was = self._cluster_now(now) > 0 or self._explained
            self._clift = 0.0
            if self._explained:
                self._lift, self._explained = 0.0, False
                if self._ttft is not None and self._ttft > lim.ttft_target_s:
                    self._ttft, self._ttft_at = lim.ttft_target_s, now
            self._cwhy = f"cluster idle: {seen}" if was or self._cwhy else ""
        self._clift_at = now

    def answered(self, now: float, ttft_s: float) -> None:
        """A remote answer started after `ttft_s` seconds."""
        self._failures = 0
        a = self.limits.ewma
        self._ttft = ttft_s if self._ttft is None else (1 - a) * self._ttft + a * ttft_s
        self._ttft_at = now
        if ttft_s > self.limits.ttft_target_s:
            self._signal(
                now,
                "slow",
                f"cluster slow: first token {1000 * self._ttft:.0f} ms "
                f"> target {1000 * self.limits.ttft_target_s:.0f} ms",
            )
        else:
            self._decay(now)
            self._lift = max(0.0, self._lift - self.limits.step * self.limits.relief)
            if self._lift < self.limits.step / 8:
                self._lift = 0.0

    def refused(self, now: float, status: int, retry_after_s: float | None) -> None:
        """The cluster shed the request (429 or 503), perhaps saying when to come back."""
        wait = self._backoff() if retry_after_s is None else max(0.0, retry_after_s)
        self._hold_until = max(self._hold_until, now + wait)
        self._signal(now, "shedding", f"cluster shedding load ({status}), retry in {wait:.0f} s")

    def unreachable(
        self, now: float, waited_s: float | None = None, given_s: float | None = None
    ) -> None:
        """A connection failure, or no first token after `waited_s` (the request's deadline
        passed): the wait counts in the moving first-token time as a lower bound. A request
        `given_s` less than the target (a hung local tier ate the deadline) says nothing
        about the cluster."""
        if given_s is not None and given_s < self.limits.ttft_target_s:
            return
        if waited_s is not None:
            a = self.limits.ewma
            self._ttft = waited_s if self._ttft is None else (1 - a) * self._ttft + a * waited_s
            self._ttft_at = now
        wait = self._backoff()
        self._hold_until = max(self._hold_until, now + wait)
        self._signal(now, "down", f"cluster unreachable or too slow, retry in {wait:.0f} s")

    def _ttft_now(self, now: float) -> float | None:
        """The moving first-token time, drifting back to the target without samples: a
        client that stopped escalating because the cluster was slow tries again later
        (one request then measures the cluster anew)."""
        if self._ttft is None:
            return None
        target = self.limits.ttft_target_s
        if self._ttft <= target:
            return self._ttft
        age = max(0.0, now - self._ttft_at)
        return target + (self._ttft - target) * float(0.5 ** (age / self.limits.recover_s))

    def _backoff(self) -> float:
        self._failures += 1
        lim = self.limits
        return float(min(lim.max_hold_s, lim.default_retry_s * 2 ** (self._failures - 1)))

    def pressure(self, now: float) -> Pressure:
        self._decay(now)
        if self._lift == 0.0 and now >= self._hold_until:
            self._state, self._why = "ok", "cluster answering in time"
        state, why, lift = self._state, self._why, self._lift
        source: Source = "answers"
        clift = self._cluster_now(now)
        if now >= self._hold_until and (clift > lift or (self._cwhy and lift == 0.0)):
            # The cluster's own word moved the bar last (up, or down when idle).
            why, source = self._cwhy, "cluster metrics"
            state = "queued" if clift > 0 else "ok"
        lift = max(lift, clift)
        return Pressure(
            state=state,
            lift=round(lift, 4),
            hold_until=self._hold_until,
            why=why,
            ttft_s=self._ttft_now(now),
            source=source,
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


def load_hold(
    *,
    reasons: tuple[Reason, ...],
    confidence: float | None,
    threshold: float,
    pressure: Pressure | None,
    budget_ok: bool,
    now: float,
    deadline: float,
) -> Reason | None:
    """Why an escalation the SynConfRoute rule asks for stays home under load (None: it
    goes out). `pressure` is None with backpressure off.

    - The cluster said "not now", or cannot start the answer in time: `cluster-busy`.
    - Unsure only (no syntax problem known) but above the raised bar: `cluster-busy`; the
      caller still escalates it if the gate then finds it invalid.
    - Over the escalation budget: `escalation-budget`.
    """
    if pressure is not None:
        if not pressure.can_escalate(now, deadline):
            return Reason.CLUSTER_BUSY
        unsure_only = set(reasons) <= {Reason.LOW_CONFIDENCE}
        if unsure_only and confidence is not None and confidence >= threshold - pressure.lift:
            return Reason.CLUSTER_BUSY
    return None if budget_ok else Reason.ESCALATION_BUDGET
