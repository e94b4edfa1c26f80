"""The next-edit sequence: the completion sequence's steps (`routing.sequence.run`)
over next-edit requests, on the same pipeline (its backends, egress gate, load and
record).

    plan (`plan_edit`) -> local -> gate -> decide -> (remote -> decide again) -> record

What differs is only what a tier's answer means: the region rewritten. Its text is the
step's text (so the decision, the card and the ledger see what would replace the
region), its confidence the mean log-prob of the tokens that changed it, and the gate
checks the whole file with the region replaced (no new syntax error; in Python no
undefined name). The edit shown is the one range covering every change.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs

from synconfroute.clients._speed import Rates
from synconfroute.clients.errors import BackendTimeout
from synconfroute.clients.types import Completion

from ...settings.config import NextEditSettings
from ...vocab.record import Problem, RouteDecision, Truncation
from .. import router, sequence
from ..gating import Gating, gate_local
from ..local_run import LocalLimits, run_local
from ..pipeline import Pipeline
from ..planner import TierRequest
from ..remote_call import call_remote
from ..request import CompletionContext
from ..router import LocalEvidence, Reason, RemoteAccess
from ..sequence import Req
from ..steps import Gated, LocalRun, LocalStep, Outcome, RemoteStep
from . import answer
from .pace import Pace
from .plan import EditRequest, model_for, plan_edit
from .prompt import Region

log = logging.getLogger(__name__)

ALL_TOKENS = 1 << 30  # the confidence is the mean over every changed token, not the first k


@attrs.frozen
class FileEdit:
    """The edit shown: `text` replaces the document's `start:end` (offsets)."""

    start: int
    end: int
    text: str


@attrs.frozen
class NextEdit:
    decision: RouteDecision
    edit: FileEdit | None  # None: nothing to suggest


def rewritten(text: str, finish_reason: str | None) -> answer.Rewrite | None:
    """The region out of an answer, if the answer is whole: its end marker came, or
    the model stopped by itself (a length cut is half a region)."""
    rw = answer.parse(text)
    if rw is None or not (answer.complete(text) or finish_reason == "stop"):
        return None
    return rw


class EditSteps:
    """`sequence.Services` for one next-edit request, over a pipeline."""

    def __init__(self, pipeline: Pipeline, ereq: EditRequest, region: Region) -> None:
        self.p = pipeline
        self.ereq = ereq
        self.region = region
        self.old = ereq.text[region.start : region.end]
        # The whole answer's confidence when it rewrote the region unchanged (None: it
        # changed something, or did not answer): most requests have no next edit.
        self.unchanged: float | None = None
        self._first: LocalStep | None = None  # a local step taken ahead of the sequence

    # -- the steps ------------------------------------------------------------------
    async def local_step(self, req: Req, access: RemoteAccess) -> LocalStep:
        """Local: the rewrite streamed whole (no line end, no early cut: the copied
        tokens come first and say nothing), then made one edit."""
        s = self.p.settings
        lim = LocalLimits(
            # A rewrite's own time limit (`next_edit.local_ms`), not a completion's.
            settings=attrs.evolve(s.local, total_ms=s.next_edit.local_ms),
            deadline=req.deadline,
            rules=req.rules,
            access=access,
            multiline=True,
            early_escalation=False,
            clock=self.p.now,
        )
        if self._first is not None:
            first, self._first = self._first, None
            return first
        run = await run_local(self.p.local, req.local, lim)
        rw = None if run.cut or run.error else rewritten(run.text, run.finish_reason)
        edit = None if rw is None else answer.one_edit(self.old, rw.text)
        if rw is not None and edit is None and run.has_logprobs:
            self.unchanged = answer.mean(run.logprobs)
        if rw is None or edit is None:
            return LocalStep(attrs.evolve(run, logprobs=()), "", None)
        tokens = list(zip(run.tokens, run.logprobs, strict=False))
        changed = answer.changed_logprobs(tokens, run.text, rw, self.old)
        return LocalStep(attrs.evolve(run, logprobs=changed), rw.text, None)

    def _gating(self, req: Req) -> Gating:
        return Gating(self.p.gate, req.deadline, self.p.now)

    def _edited(self) -> CompletionContext:
        """The whole file around the region: the gate checks the region's rewrite in it."""
        r, text = self.region, self.ereq.text
        return attrs.evolve(
            self.ereq.ctx, prefix=text[: r.start], suffix=text[r.end :], document=None
        )

    async def gate_step(self, req: Req, local: LocalStep, ev: LocalEvidence) -> Gated:
        return await gate_local(self._gating(req), self._edited(), local, ev, False)

    async def remote_step(self, req: Req, draft: str = "") -> RemoteStep:
        """Remote: planned now (privacy of this moment), through the egress gate. A region
        rewrite is sent without a draft to verify (`remote.verify_draft` scores single
        completions; a rewrite copies most of its region, so it would confirm nothing)."""
        remote = self.p.remote
        assert remote is not None
        started = self.p.now()
        planned = plan_edit(
            self.ereq, "remote", self.p.planning(self.ereq.ctx), deadline=req.deadline
        )

        async def judge(result: Completion) -> tuple[str, Truncation | None, float | None]:
            rw = rewritten(result.text, result.finish_reason)
            if rw is None or answer.one_edit(self.old, rw.text) is None:
                return "", None, None
            return rw.text, None, None

        step = await call_remote(
            remote, planned, req.ctx, self.p.inflight, self._gating(req), True, judge
        )
        self.p.guard.observe(step, started, req.deadline)
        return step

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
    ) -> RouteDecision:
        return self.p.record(
            req, outcome, local, remote, problems, rerun_ms,
            tokens_of_last=tokens_of_last, models=models,
        )  # fmt: skip

    # -- the pipeline's, as they are ---------------------------------------------------
    def now(self) -> float:
        return self.p.now()

    def access(self, ctx: CompletionContext) -> RemoteAccess:
        return self.p.access(ctx)

    def escalated(self, confidence: float | None, sent: bool) -> None:
        self.p.escalated(confidence, sent)

    def held_by_load(self, req: Req, verdict: router.Ruling, ev: LocalEvidence) -> Reason | None:
        return self.p.held_by_load(req, verdict, ev)

    def load_text(self, held: Reason) -> str:
        return self.p.load_text(held)

    def may_escalate_broken(self, req: Req) -> bool:
        return self.p.may_escalate_broken(req)


def _too_slow(
    pace: Pace | None,
    pipeline: Pipeline,
    local: TierRequest,
    region: Region,
    ne: NextEditSettings,
    access: RemoteAccess,
) -> str | None:
    """Why the local model cannot answer this request in time (`next_edit.only_in_time`);
    None: ask it. In time is within the local tier's budget of this request: its own
    when it may escalate, else the whole deadline. The measured rates are the completion
    model's: they judge only it."""
    if pace is None or not ne.only_in_time:
        return None
    own = getattr(pipeline.local, "model", None)
    rates = getattr(pipeline.local, "rates", None) if ne.local_model in ("", own) else None
    rates = rates if isinstance(rates, Rates) else None
    may_escalate = access == "ok"
    name = "next_edit.local_ms" if may_escalate else "next_edit.deadline_ms"
    ms = ne.local_ms if may_escalate else ne.deadline_ms
    return pace.too_slow(rates, len(local.request.prefix), region.end - region.start, ms, name)


async def suggest(
    pipeline: Pipeline, ereq: EditRequest, rules: router.Rules, pace: Pace | None = None
) -> NextEdit:
    """The edit after this one at `ereq`'s cursor: the completion sequence's steps over
    next-edit requests, then the chosen rewrite made the one edit shown. With `pace`
    (the session's), only while the local model answers in time."""
    t0 = pipeline.now()
    env = pipeline.planning(ereq.ctx)
    ne = ereq.settings(env)
    rules = attrs.evolve(rules, threshold=ne.threshold, k=ALL_TOKENS)
    access = pipeline.access(ereq.ctx)
    models = (
        (model_for(ne, "local") or pipeline.local.model) if pipeline.local else None,
        (model_for(ne, "remote") or pipeline.remote.model)
        if pipeline.remote and access == "ok"
        else None,
    )
    deadline = t0 + ne.deadline_ms / 1000
    steps = EditSteps(pipeline, ereq, ereq.region(env))
    local = None
    if pipeline.local is not None:
        local = plan_edit(ereq, "local", env, deadline=deadline)
    req = Req(
        ctx=ereq.ctx,
        rules=rules,
        models=models,
        t0=t0,
        deadline=deadline,
        local=local,
        multiline=True,
    )
    paced = rules.policy != "remote" and local is not None
    why = _too_slow(pace, pipeline, local, steps.region, ne, access) if paced and local else None
    if why is not None:
        # Off for now: asking would only time out and send the region to the cluster.
        log.info("next edit: none (%s)", why)
        off = Outcome(
            route="none", reasons=(Reason.LOCAL_TOO_SLOW,), completion="", confidence=None
        )
        idle = LocalStep(LocalRun(), "", None)
        return NextEdit(steps.record(req, off, (idle, idle, None), None, ()), None)
    first = await steps.local_step(req, access)
    if paced and pace is not None:
        run = first.run  # late: cut by its budget, or no token before the deadline
        pace.observed(run.timed_out or isinstance(run.error, BackendTimeout))
    sure = steps.unchanged is not None and steps.unchanged >= rules.threshold
    if sure and rules.policy != "remote":
        # Nothing to change, and the model is sure of it: no edit, nothing escalated.
        none = Outcome(
            route="none", reasons=(Reason.NO_EDIT,), completion="", confidence=steps.unchanged
        )
        rec = steps.record(req, none, (first, first, None), None, ())
        return NextEdit(rec, None)
    steps._first = first  # the sequence starts from it: not asked twice
    rec, _ = await sequence.run(steps, req, access)
    edit = None
    if rec.route in ("local", "remote") and rec.completion:
        e = answer.one_edit(steps.old, rec.completion)
        if e is not None:
            start = steps.region.start
            edit = FileEdit(start + e.start, start + e.end, e.text)
    return NextEdit(rec, edit)


__all__ = ["ALL_TOKENS", "EditSteps", "FileEdit", "NextEdit", "rewritten", "suggest"]
