"""The completion sequence: named steps over frozen values.

    plan -> local -> gate -> decide -> (remote -> decide again) -> record

`run` and its branches (`escalate`, `after_remote`, `blocked_late`) only order the
steps and pass their frozen results on; the steps themselves are `Services`, which the
`Pipeline` provides (its backends, gate, cache, load and lifetime) and a test or a
second sequence (next-edit suggestions) can provide as well: each step is a function
of the request's constants (`Req`, with the local tier's planned `TierRequest`) and of
earlier steps' results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs

from ..vocab.record import Problem, RouteDecision
from . import router
from .planner import Planning, TierRequest, plan_local
from .request import CompletionContext
from .router import LocalEvidence, Reason, RemoteAccess, Rules
from .steps import Gated, LocalStep, Outcome, RemoteStep, local_outcome


@attrs.frozen(kw_only=True)
class Req:
    """One request's constants, fixed when it starts (the plan step's result)."""

    ctx: CompletionContext
    rules: Rules
    models: tuple[str | None, str | None]  # (local, remote) as the request saw them
    t0: float
    deadline: float
    local: TierRequest | None  # the local tier's request, planned once (None: no local tier)
    multiline: bool
    verify_draft: bool = False  # remote.verify_draft: an escalation sends the local draft


class Services(Protocol):
    """The steps a sequence runs, over one pipeline's backends and state."""

    def now(self) -> float: ...

    def access(self, ctx: CompletionContext) -> RemoteAccess:
        """May `ctx` go to the remote tier, under the privacy settings of right now?"""
        ...

    async def local_step(self, req: Req, access: RemoteAccess) -> LocalStep: ...

    async def gate_step(self, req: Req, local: LocalStep, ev: LocalEvidence) -> Gated: ...

    async def remote_step(self, req: Req, draft: str = "") -> RemoteStep: ...

    def record(
        self,
        req: Req,
        outcome: Outcome,
        local: tuple[LocalStep, LocalStep, Gated | None],
        remote: RemoteStep | None,
        problems: Sequence[Problem],
        rerun_ms: float | None = None,
        *,
        tokens_of_last: bool = False,
        models: tuple[str | None, str | None] | None = None,
    ) -> RouteDecision: ...

    def escalated(self, confidence: float | None, sent: bool) -> None:
        """Count an escalation decided (sent, or held home) in the escalation budget."""
        ...

    # The cluster's load (routing.backpressure, routing.escalation_budget): `LoadGuard`.
    def held_by_load(self, req: Req, verdict: router.Ruling, ev: LocalEvidence) -> Reason | None:
        """Why this escalation stays home under load; None: it goes out."""
        ...

    def load_text(self, held: Reason) -> str: ...

    def may_escalate_broken(self, req: Req) -> bool: ...


def plan(
    ctx: CompletionContext,
    rules: Rules,
    models: tuple[str | None, str | None],
    t0: float,
    env: Planning,
) -> Req:
    """Plan: the request's constants, with the local tier's request planned once (its
    KV-aware size, and whether several lines are asked for); no local tier, no plan."""
    deadline = t0 + env.settings.completion.deadline_ms / 1000
    local = None if env.local is None else plan_local(ctx, env, deadline=deadline)
    return Req(
        ctx=ctx,
        rules=rules,
        models=models,
        t0=t0,
        deadline=deadline,
        local=local,
        multiline=local is not None and not local.request.single_line,
        verify_draft=env.settings.remote.verify_draft,
    )


async def run(s: Services, req: Req, access: RemoteAccess) -> tuple[RouteDecision, bool]:
    """Local, cut short as soon as k tokens say "escalate" (or, single-line, as soon as
    the line ends); the gate only when the verdict depends on it; decide; then the
    remote tier or not, and the record. The decision, and whether it may be cached."""
    first = await s.local_step(req, access)
    problems = [] if first.run.error is None else [Problem.of("local", first.run.error)]
    ev, gated_ = first.evidence(), None
    if router.needs_syntax(ev, req.rules, access) and not first.run.cut:
        gated_ = await s.gate_step(req, first, ev)
        ev = gated_.evidence
    verdict = router.decide(ev, req.rules, access)
    if verdict.action == "escalate":
        return await escalate(s, req, verdict, (first, gated_, ev), problems)
    outcome = local_outcome(verdict, gated_.text if gated_ else first.text)
    return s.record(req, outcome, (first, first, gated_), None, problems), True


def draft_of(req: Req, first: LocalStep, gated: Gated | None) -> str:
    """The local answer the remote may verify instead of starting over
    (remote.verify_draft); "" for a plain escalation."""
    if not req.verify_draft:
        return ""
    return gated.text if gated is not None else first.text


async def escalate(
    s: Services,
    req: Req,
    verdict: router.Ruling,
    local: tuple[LocalStep, Gated | None, LocalEvidence],  # the run, its gate, evidence
    problems: list[Problem],
) -> tuple[RouteDecision, bool]:
    """Remote, if privacy still allows it at this moment: local-only may have been
    switched on (or the settings changed) while the local tier ran. The decision,
    and whether it may be cached."""
    first, gated_, ev = local
    access = s.access(req.ctx)
    remote = None
    held: Reason | None = None
    if access == "ok":
        held = s.held_by_load(req, verdict, ev)
        if held is None:
            remote = await s.remote_step(req, draft_of(req, first, gated_))
        else:
            remote = RemoteStep("failed")  # not asked: the local answer stays
    if remote is not None and remote.problem is not None:
        problems.append(remote.problem)
    if remote is None or remote.outcome == "revoked":
        # Not cached: the key names the remote model, which this answer never saw.
        return await blocked_late(s, req, local, remote, problems), False
    last, rerun_ms = first, None
    if not remote.ok and first.run.cut and s.now() < req.deadline:
        # We cut the local stream for an escalation that failed: finish the
        # local completion after all, so the user may still get something.
        last = await s.local_step(req, "not-configured")
        rerun_ms = last.run.total_s * 1000
        ev = attrs.evolve(
            ev, available=last.run.available, text=last.text, timed_out=last.run.timed_out
        )
    if not remote.ok and ev.syntax is None and ev.available and last.text:
        # Could we still keep the local completion? Only if it passes the gate.
        gated_ = await s.gate_step(req, last, ev)
        ev = gated_.evidence
    if held is not None and ev.syntax == "invalid" and s.may_escalate_broken(req):
        # Held for the raised bar, but the code is broken: the rule still escalates it.
        held, remote = None, await s.remote_step(req, draft_of(req, first, gated_))
        if remote.problem is not None:
            problems.append(remote.problem)
    steps = (first, last, gated_)
    return after_remote(s, req, verdict, steps, ev, remote, held, problems, rerun_ms), True


def after_remote(
    s: Services,
    req: Req,
    verdict: router.Ruling,
    local: tuple[LocalStep, LocalStep, Gated | None],
    ev: LocalEvidence,
    remote: RemoteStep,
    held: Reason | None,
    problems: list[Problem],
    rerun_ms: float | None,
) -> RouteDecision:
    """Decide again with the remote's answer (or failure), and record."""
    _, last, gated_ = local
    local_text = gated_.text if gated_ else last.text
    final = router.after_remote(
        verdict, ev, remote_ok=remote.ok, remote_text=remote.text, held=held,
        verified=remote.verified,
    )  # fmt: skip
    s.escalated(verdict.confidence, held is None)
    outcome = Outcome(
        route=final.route,
        reasons=final.reasons,
        completion={"remote": remote.text, "local": local_text}.get(final.route, ""),
        confidence=verdict.confidence,
    )
    rec = s.record(req, outcome, local, remote, problems, rerun_ms)
    if held is not None:
        rec = attrs.evolve(rec, load=s.load_text(held))
    return rec


async def blocked_late(
    s: Services,
    req: Req,
    local: tuple[LocalStep, Gated | None, LocalEvidence],
    remote: RemoteStep | None,
    problems: list[Problem],
) -> RouteDecision:
    """The request wanted to escalate, but privacy forbids it now: decide as if it
    had been forbidden from the start (finishing a local stream we cut)."""
    first, gated_, ev = local
    access = s.access(req.ctx)
    if access == "ok":  # pragma: no cover - only called once access changed
        access = "local-only"
    sent = remote is not None and remote.bytes_sent > 0
    models = req.models if sent else (req.models[0], None)
    last, rerun_ms = first, None
    if first.run.cut and s.now() >= req.deadline:
        ev = attrs.evolve(ev, text=first.text)
    elif first.run.cut:
        last = await s.local_step(req, access)
        rerun_ms = last.run.total_s * 1000
        if last.run.error is not None:
            problems.append(Problem.of("local", last.run.error))
        ev, gated_ = last.evidence(), None
    if router.needs_syntax(ev, req.rules, access) and ev.syntax is None:
        gated_ = await s.gate_step(req, last, ev)
        ev = gated_.evidence
    verdict = router.decide(ev, req.rules, access)
    outcome = local_outcome(verdict, gated_.text if gated_ else last.text)
    return s.record(
        req, outcome, (first, last, gated_), remote, problems, rerun_ms,
        tokens_of_last=True, models=models,
    )  # fmt: skip


__all__ = ["Req", "Services", "after_remote", "blocked_late", "escalate", "plan", "run"]
