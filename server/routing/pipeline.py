"""One completion request end to end, as a short sequence of named steps over frozen
values: plan (`planner`), local (`local_run`), gate (`gating`), decide (`router`),
remote (`remote_call`, through the egress gate the remote is wrapped in: `gated`), and
record (`steps.decision`). Each step is a function of frozen inputs that can be run
alone; `Pipeline` holds what lives longer than one request (backends, cache, load,
lifetime, remote calls in flight) and runs the sequence.

The decision itself is the pure `router`. It never imports pygls: the LSP layer and
the CLI call `complete()`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

import attrs

from synconfroute.clients.plan import FolderRules
from synconfroute.clients.types import Backend

from ..settings.config import PrivacySettings, Settings
from ..vocab.record import Problem, RouteDecision
from ..workspace import egress, prompt_split
from . import router, sequence
from .backends import Tiers
from .backpressure import Pressure
from .cache import CompletionCache, digests
from .gate import SyntaxGate, make_gate
from .gated import GatedRemote, gated
from .gating import Gating, check_ahead, gate_local, prepare_ahead
from .load_guard import LoadGuard
from .local_run import LocalLimits, prefill, run_local
from .planner import (
    Planning,
    TierRequest,
    display_path,
    plan_tier,
    sized_budget,
)
from .remote_call import InFlight, call_remote
from .request import CompletionContext, Gate
from .router import LocalEvidence, Reason, RemoteAccess, Rules
from .rules import resolve_rules
from .sequence import Req
from .steps import (
    Gated,
    LocalStep,
    Outcome,
    RemoteStep,
    cached_decision,
    decision,
)
from .text_rules import shown_text
from .time_budget import TierBudget

log = logging.getLogger(__name__)


def remote_access(
    settings: Settings,
    remote: Backend | None,
    path: str,
    roots: tuple[str, ...] = (),
    folders: Sequence[FolderRules] = (),
) -> RemoteAccess:
    if remote is None:
        return "not-configured"
    if settings.privacy.local_only:
        return "local-only"
    if egress.check_path(path, roots, settings.privacy, folders=folders) is not None:
        return "privacy-blocked"
    return "ok"


def _cache_key(ctx: CompletionContext, models: tuple[str | None, str | None], rules: Rules) -> str:
    key = f"{models[0]}|{models[1]}|{rules.policy}"
    if ctx.crossfile or ctx.recent_edits:  # other context, other prompt
        edits = tuple((c.path, c.text) for c in ctx.recent_edits)
        key += f"|{hash((ctx.crossfile, edits))}"
    return key


def build_pipeline(settings: Settings, tiers: Tiers) -> Pipeline:
    """A pipeline for `settings` over its tiers, with the gate the settings ask for."""
    return Pipeline(settings, tiers.local, tiers.remote, make_gate(settings.routing))


class Pipeline:
    """Runs completions for one (settings, local, remote, gate) combination."""

    def __init__(
        self,
        settings: Settings,
        local: Backend | None,
        remote: Backend | None,
        gate: Gate | None = None,
        *,
        cache: CompletionCache | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings  # privacy changes come through update_privacy
        self.local = local
        # Every remote send passes the egress gate, under the settings of its moment:
        # whatever remote it is given, the pipeline holds it only wrapped in the gate.
        self.remote: GatedRemote | None = gated(remote, lambda: self.settings)
        self.gate = gate
        self.cache = cache if cache is not None else CompletionCache()
        self._clock = clock
        # Lifetime: the session holds the pipeline for each request it runs, and closes
        # the backends of a replaced pipeline only once it is idle.
        self._users = 0
        self._idle = asyncio.Event()
        self._idle.set()
        # Remote calls in flight with their planned requests, so a privacy change can
        # stop them.
        self._inflight = InFlight()
        self.remote_revoked = False  # the settings no longer name this remote
        # The context each (document, tier) got last: kept while the ranking agrees.
        self._sticky = prompt_split.Sticky()
        # How busy the cluster is (routing.backpressure) and this machine's share of
        # escalations (routing.escalation_budget): they live as long as this pipeline.
        self.guard = LoadGuard(lambda: self.settings, self.remote, clock)

    def pressure(self) -> Pressure | None:
        """The cluster's state now, or None with backpressure off or no remote tier."""
        return self.guard.pressure()

    def load_status(self) -> dict[str, object] | None:
        """The cluster's load for `synconfroute.status` (None: no remote tier)."""
        return self.guard.status()

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def inflight(self) -> InFlight:
        """The remote calls in flight (a second sequence's calls join them, so a privacy
        change stops those too)."""
        return self._inflight

    @property
    def gate_blocks(self) -> bool:
        """Its syntax gate's checks run in a thread (compiler modes): a request's text
        is copied for them, as edits may arrive meanwhile."""
        return isinstance(self.gate, SyntaxGate) and self.gate.blocking

    @property
    def local_model(self) -> str:
        """The model the local tier runs (its per-model threshold applies)."""
        return self.local.model if self.local else ""

    # -- lifetime and live privacy -------------------------------------------
    def hold(self) -> None:
        self._users += 1
        self._idle.clear()

    def release(self) -> None:
        self._users -= 1
        if self._users <= 0:
            self._users = 0
            self._idle.set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def access(self, ctx: CompletionContext) -> RemoteAccess:
        """May `ctx` go to the remote tier, under the privacy settings of right now?"""
        if self.remote_revoked:
            return "not-configured"
        return remote_access(self.settings, self.remote, ctx.path, ctx.roots, ctx.folders)

    def update_privacy(self, privacy: PrivacySettings, *, remote_revoked: bool = False) -> None:
        """New privacy settings, for the requests in flight too: each is checked again
        before it escalates, and a remote call they no longer allow is cancelled."""
        self._settings = attrs.evolve(self._settings, privacy=privacy)
        self.remote_revoked = self.remote_revoked or remote_revoked

        def refused(ctx: CompletionContext, planned: TierRequest) -> bool:
            plan = planned.plan
            now_private = plan is not None and any(
                egress.private_reason(c, plan, privacy) for c in plan.context
            )
            return self.access(ctx) != "ok" or now_private

        self._inflight.revoke(refused)

    def rules(self) -> Rules:
        """The rules without adaptive mode (the command line, the evaluation): a session
        passes its own to `complete`."""
        return resolve_rules(self._settings, self.local_model)

    # -- plan ----------------------------------------------------------------
    def planning(self, ctx: CompletionContext | None = None) -> Planning:
        """What a plan reads now: the settings of this moment (for `ctx`, its file's
        own, which its folders may have tightened), the local backend, the context kept
        per (document, tier)."""
        s = self.settings
        if ctx is not None and ctx.settings is not None:
            # The privacy of this moment: a change reaches plans made after it (the
            # folders' own privacy keys are the plan's `FolderRules`, judged at the gate).
            # (Settings are never mutated: the same privacy object is the same privacy.)
            same = ctx.settings.privacy is s.privacy
            s = ctx.settings if same else attrs.evolve(ctx.settings, privacy=s.privacy)
        return Planning(s, self.local, self._sticky)

    def local_budget(self, ctx: CompletionContext | None = None) -> TierBudget:
        """The local tier's total prompt and prediction budget, from its measured speed;
        at `ctx`, the prompt as large as the KV cache allows (`kv_window`)."""
        return sized_budget(ctx, self.planning(ctx))

    async def prefill(self, ctx: CompletionContext) -> dict[str, object] | None:
        """Evaluate the prompt a local request at `ctx` would send, ahead of it, at low
        priority (the backend's `prefill`: any request preempts it); None when the local
        backend cannot prefill."""
        fill = getattr(self.local, "prefill", None)
        if fill is None:
            return None
        return await prefill(fill, ctx, self.planning(ctx))

    # -- the sequence ----------------------------------------------------------
    async def complete(self, ctx: CompletionContext, rules: Rules | None = None) -> RouteDecision:
        """One request under `rules` (resolved once for it by the caller; by default
        the configured ones for this local model): plan, local, gate, decide, then
        remote or not, and the record, built once at the end."""
        t0 = self._clock()
        rules = self.rules() if rules is None else rules
        access = self.access(ctx)
        models = (
            self.local.model if self.local else None,
            self.remote.model if self.remote and access == "ok" else None,
        )
        cache_key = _cache_key(ctx, models, rules)
        made = digests(ctx.prefix, ctx.suffix)
        hit = self.cache.get(cache_key, ctx.prefix, ctx.suffix, made)
        if hit is not None:
            total_ms = (self._clock() - t0) * 1000
            sharing = prompt_split.sharing(self.settings)
            return cached_decision(
                hit, ctx, rules, models, total_ms=total_ms, context_sharing=sharing
            )
        req = sequence.plan(ctx, rules, models, t0, self.planning(ctx))
        rec, cacheable = await sequence.run(self, req, access)
        if cacheable and rec.route != "none" and rec.completion:
            self.cache.put(
                cache_key,
                ctx.prefix,
                ctx.suffix,
                rec.completion,
                rec.route,
                rec.reasons,
                rec,
                made,
                after_response=True,
            )
        return rec

    async def local_step(self, req: Req, access: RemoteAccess) -> LocalStep:
        """Local: the planned request streamed, and its text as judged and shown."""
        lim = LocalLimits(
            settings=self.settings.local,
            deadline=req.deadline,
            rules=req.rules,
            access=access,
            multiline=req.multiline,
            early_escalation=self.settings.routing.early_escalation,
            clock=self._clock,
        )
        ahead = prepare_ahead(self.gate, req.ctx)  # the gate's head start
        # the gate's check of the text so far whenever the stream goes quiet: the gate
        # step reuses it when the stream ends with that text
        early = check_ahead(self.gate, req.ctx, req.multiline, self._clock)
        quiet = None if early is None else early.quiet
        try:
            run = await run_local(self.local, req.local, lim, quiet)
        finally:
            if ahead is not None:
                ahead.cancel()
        text, cut = shown_text(run.text, run.finish_reason, req.ctx.suffix, multiline=req.multiline)
        return LocalStep(run, text, cut, None if early is None else early.found)

    def now(self) -> float:
        return self._clock()

    def escalated(self, confidence: float | None, sent: bool) -> None:
        self.guard.escalated(confidence, sent)

    def _gating(self, req: Req) -> Gating:
        return Gating(self.gate, req.deadline, self._clock)

    async def gate_step(self, req: Req, local: LocalStep, ev: LocalEvidence) -> Gated:
        """Gate: the local text judged (and trimmed to whole lines the gate accepts)."""
        return await gate_local(self._gating(req), req.ctx, local, ev, req.multiline)

    def held_by_load(self, req: Req, verdict: router.Ruling, ev: LocalEvidence) -> Reason | None:
        return self.guard.held(req.ctx, req.deadline, req.rules.threshold, verdict, ev)

    def load_text(self, held: Reason) -> str:
        return self.guard.text(held)

    def may_escalate_broken(self, req: Req) -> bool:
        return self.guard.may_escalate_broken(req.deadline)

    async def remote_step(self, req: Req, draft: str = "") -> RemoteStep:
        """Remote: planned once typing has settled, sent through the egress gate."""
        assert self.remote is not None
        started = self._clock()
        ctx = req.ctx
        if ctx.settled is not None and not await asyncio.shield(ctx.settled):
            raise asyncio.CancelledError  # typing went on: a newer request replaces this one
        env, single = self.planning(ctx), not req.multiline
        planned = plan_tier(ctx, "remote", None, env, deadline=req.deadline, single_line=single)
        planned = attrs.evolve(planned, request=attrs.evolve(planned.request, draft=draft))
        remote = await call_remote(
            self.remote, planned, ctx, self._inflight, self._gating(req), req.multiline
        )
        self.guard.observe(remote, started, req.deadline)
        return remote

    def record(
        self,
        req: Req,
        outcome: Outcome,
        local: tuple[LocalStep, LocalStep, Gated | None],  # first run, last run, its gate
        remote: RemoteStep | None,
        problems: Sequence[Problem],
        rerun_ms: float | None = None,
        *,
        tokens_of_last: bool = False,
        models: tuple[str | None, str | None] | None = None,
    ) -> RouteDecision:
        """Record: the decision, built once from the steps' frozen results."""
        first, last, gated_ = local
        return decision(
            req.ctx,
            req.rules,
            req.models if models is None else models,
            outcome,
            first=first,
            last=last,
            gated=gated_,
            remote=remote,
            rerun_ms=rerun_ms,
            local_tokens=len((last if tokens_of_last else first).run.logprobs),
            local_context=req.local.notes if req.local is not None else (),
            problems=problems,
            total_ms=(self._clock() - req.t0) * 1000,
            context_sharing=prompt_split.sharing(self.settings),
        )


__all__ = ["Pipeline", "build_pipeline", "display_path", "remote_access"]
