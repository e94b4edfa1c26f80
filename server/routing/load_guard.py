"""What the cluster's load lets through, for as long as one pipeline lives: the
backpressure controller (`routing.backpressure`: this client's answers, and the cluster's
own metrics where it has them) and this machine's share of escalations
(`routing.escalation_budget`). Every sequence (completions, next edits) asks the same
guard, so a second kind of request cannot escalate around it.
"""

from __future__ import annotations

from collections.abc import Callable

from synconfroute.clients.errors import BackendTimeout

from ..settings.config import Settings
from . import affinity
from .backpressure import Backpressure, EscalationBudget, Limits, Pressure, load_hold
from .gated import GatedRemote
from .request import CompletionContext
from .router import LocalEvidence, Reason, Ruling
from .steps import RemoteStep


class LoadGuard:
    """Holds an escalation home while the cluster is busy or the budget is spent."""

    def __init__(
        self,
        settings: Callable[[], Settings],
        remote: GatedRemote | None,
        clock: Callable[[], float],
    ) -> None:
        self._settings = settings
        self._remote = remote
        self._clock = clock
        r = settings().routing
        self.load = Backpressure(Limits(max_lift=r.max_lift, ttft_target_s=r.ttft_target_ms / 1000))
        self.budget = EscalationBudget(r.escalation_budget, r.budget_window_s)
        self._load_read = -float("inf")  # when the last cluster reading fed was taken

    def pressure(self) -> Pressure | None:
        """The cluster's state now, or None with backpressure off or no remote tier."""
        if not self._settings().routing.backpressure or self._remote is None:
            return None
        return self.load.pressure(self._clock())

    def status(self) -> dict[str, object] | None:
        """The cluster's load for `synconfroute.status` (None: no remote tier)."""
        if self._remote is None:
            return None
        p = self.pressure()
        return {
            "state": p.state if p else "not watched (routing.backpressure is off)",
            "why": p.why if p else "",
            "lift": p.lift if p else 0.0,
            "first_token_ms": None if p is None or p.ttft_s is None else round(1000 * p.ttft_s),
            "moved_by": p.source if p else "",
            "escalated_share": round(self.budget.used(self._clock()), 3),
            "escalation_budget": self.budget.share,
        }

    def observe(self, remote: RemoteStep, started: float, deadline: float | None) -> None:
        """What the remote's answer (or failure) says about the cluster's load."""
        now = self._clock()
        if remote.ok and remote.first_token_ms is not None:
            self.load.answered(now, remote.first_token_ms / 1000)
            return
        err = remote.problem.error if remote.problem is not None else None
        if err is None or err.sent_nothing:
            return  # held by the client's own backoff: nothing new was learnt
        if err.status in (429, 503):
            self.load.refused(now, err.status, err.retry_after_s)
        elif isinstance(err, BackendTimeout):
            given = None if deadline is None else deadline - started
            self.load.unreachable(now, now - started, given_s=given)
        elif err.status is None:
            self.load.unreachable(now)  # a connection failure

    def escalated(self, confidence: float | None, sent: bool) -> None:
        self.budget.record(self._clock(), confidence, sent)

    def _read_cluster(self, ctx: CompletionContext) -> None:
        """Feed the cluster's own load signal, only while escalating: the remote client's
        latest reading of its metrics (it refreshes them in the background, never
        waited for) for the replica this workspace escalates to."""
        read = getattr(self._remote, "cluster_load", None)
        if read is None or not self._settings().routing.backpressure:
            return
        now = self._clock()
        load = read(now, affinity.workspace_key(ctx.path, ctx.roots))
        if load is not None and load.at > self._load_read:
            self._load_read = load.at
            self.load.cluster(now, load.waiting, load.running, load.kv_usage, load.url)

    def held(
        self,
        ctx: CompletionContext,
        deadline: float,
        threshold: float,
        verdict: Ruling,
        ev: LocalEvidence,
    ) -> Reason | None:
        """Why this escalation stays home under load; None: it goes out."""
        self._read_cluster(ctx)
        now = self._clock()
        invalid = ev.syntax == "invalid"
        return load_hold(
            reasons=verdict.reasons,
            confidence=verdict.confidence,
            threshold=threshold,
            pressure=self.pressure(),
            budget_ok=self.budget.allow(now, verdict.confidence, invalid),
            now=now,
            deadline=deadline,
        )

    def text(self, held: Reason) -> str:
        """Why, in words, for the route card."""
        if held == Reason.ESCALATION_BUDGET:
            used = self.budget.used(self._clock())
            return (
                f"{100 * used:.0f}% of the last {self.budget.window_s:.0f} s of completions "
                f"escalated (budget {100 * self.budget.share:.0f}%)"
            )
        p = self.pressure()
        if p is None:
            return ""
        return f"{p.why}; escalation bar {p.lift:.2f} below the threshold (moved by {p.source})"

    def may_escalate_broken(self, deadline: float) -> bool:
        """A broken local answer may still go out: the cluster can answer before `deadline`."""
        p = self.pressure()
        now = self._clock()
        return (p is None or p.can_escalate(now, deadline)) and now < deadline


__all__ = ["LoadGuard"]
