"""One completion request end to end: local stream, gate, decision, escalation.

The pipeline owns timing and failure handling; the decision itself is the pure
`router`. It never imports pygls: the LSP layer and the CLI call `complete()`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

import attrs

from synconfroute.clients._speed import Rates
from synconfroute.clients.errors import BackendError, BackendTimeout
from synconfroute.clients.plan import FolderRules, PromptPlan
from synconfroute.clients.types import Backend, Completion, CompletionRequest, line_end

from ..settings.config import PrivacySettings, Settings
from ..vocab.record import Latency, Problem, RouteDecision, Truncation
from ..vocab.verdict import Verdict
from ..workspace import crossfile, egress, privacy, prompt_split
from . import affinity, kv_window, router, time_budget
from .backends import Tiers
from .backpressure import Backpressure, EscalationBudget, Limits, Pressure, load_hold
from .cache import CompletionCache, Hit
from .gate import SyntaxGate, make_gate
from .request import CompletionContext, Gate
from .router import LocalEvidence, Reason, RemoteAccess, Rules
from .rules import resolve_rules
from .steps import (
    ContextNote,
    Gated,
    LocalRun,
    LocalStep,
    Outcome,
    RemoteStep,
    decision,
    local_outcome,
)
from .text_rules import (
    gate_trimmed,
    post_process,
    request_stops,
    shown_text,
    truncation,
    wants_multiline,
)
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


def display_path(path: str, roots: tuple[str, ...]) -> str:
    """Workspace-relative where possible (prompts and the hover card), else the file name."""
    rel = privacy.relative_paths(path, roots)
    return min(rel, key=len) if rel else path.rsplit("/", 1)[-1]


@attrs.define
class _LocalRun:
    """The local stream while it runs; `_run_local` returns it frozen (`LocalRun`)."""

    text: str = ""
    logprobs: list[float] = attrs.field(factory=list)
    has_logprobs: bool = True
    cancelled_early: bool = False
    error: BackendError | None = None
    first_token_s: float | None = None
    total_s: float = 0.0
    timed_out: bool = False
    finish_reason: str | None = None

    def frozen(self) -> LocalRun:
        return LocalRun(**{**attrs.asdict(self, recurse=False), "logprobs": tuple(self.logprobs)})


@attrs.frozen(kw_only=True)
class _Req:
    """One request's constants, fixed when it starts."""

    ctx: CompletionContext
    rules: Rules
    models: tuple[str | None, str | None]  # (local, remote) as the request saw them
    t0: float
    deadline: float
    budget: TierBudget  # the local tier's
    multiline: bool
    notes: tuple[ContextNote, ...]  # the files that fed the local prompt


def build_pipeline(settings: Settings, tiers: Tiers) -> Pipeline:
    """A pipeline for `settings` over its tiers, with the gate the settings ask for."""
    return Pipeline(settings, tiers.local, tiers.remote, make_gate(settings.routing))


# How late the pipeline cuts a prediction past its time cap (`local.max_predict_ms`):
# the embedded worker ends there by itself; Ollama does not know the cap.
_PREDICT_SLACK_S = 0.05


def _earliest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


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
        self.remote = remote
        self.gate = gate
        self.cache = cache if cache is not None else CompletionCache()
        self._clock = clock
        # Lifetime: the session holds the pipeline for each request it runs, and closes
        # the backends of a replaced pipeline only once it is idle.
        self._users = 0
        self._idle = asyncio.Event()
        self._idle.set()
        # Remote calls in flight, so a privacy change can stop them.
        self._remote_calls: dict[asyncio.Future[Completion], CompletionContext] = {}
        self._revoked: set[asyncio.Future[Completion]] = set()
        # Each remote call's prompt plan: the privacy re-check reads its context files.
        self._remote_plans: dict[asyncio.Future[Completion], PromptPlan | None] = {}
        self.remote_revoked = False  # the settings no longer name this remote
        # Every remote send passes this check, under the settings of its moment.
        self.egress = egress.guard(remote, lambda: self.settings)
        # The context each (document, tier) got last: kept while the ranking agrees.
        self._sticky = prompt_split.Sticky()
        # How busy the cluster is (routing.backpressure) and this machine's share of
        # escalations (routing.escalation_budget): they live as long as this pipeline.
        r = settings.routing
        self.load = Backpressure(Limits(max_lift=r.max_lift, ttft_target_s=r.ttft_target_ms / 1000))
        self.budget = EscalationBudget(r.escalation_budget, r.budget_window_s)
        self._load_read = -float("inf")  # when the last cluster reading fed was taken

    def pressure(self) -> Pressure | None:
        """The cluster's state now, or None with backpressure off or no remote tier."""
        if not self.settings.routing.backpressure or self.remote is None:
            return None
        return self.load.pressure(self._clock())

    def load_status(self) -> dict[str, object] | None:
        """The cluster's load for `synconfroute.status` (None: no remote tier)."""
        if self.remote is None:
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

    def _observe(self, remote: RemoteStep, started: float, deadline: float | None) -> None:
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

    @property
    def settings(self) -> Settings:
        return self._settings

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
        for call, ctx in self._remote_calls.items():
            plan = self._remote_plans.get(call)
            now_private = plan is not None and any(
                egress.private_reason(c, plan, privacy) for c in plan.context
            )
            if not call.done() and (self.access(ctx) != "ok" or now_private):
                log.info("privacy settings changed: cancelling a remote request in flight")
                self._revoked.add(call)
                call.cancel()

    def rules(self) -> Rules:
        """The rules without adaptive mode (the command line, the evaluation): a session
        passes its own to `complete`."""
        return resolve_rules(self._settings, self.local_model)

    def context_allowed(self, ctx: CompletionContext, tier: str) -> Callable[[str], bool]:
        """Which other files may feed `tier`'s prompt, under the settings of this moment:
        any for the local tier; for the remote tier, none unless the user sends context
        there (`remote.send_context`), and never a file privacy keeps on the machine."""
        if tier != "remote":
            return lambda f: True
        if self.settings.privacy.local_only or not self.settings.remote.send_context:
            return lambda f: False
        p = self.settings.privacy
        return lambda f: (
            not egress.check_path(f, ctx.roots, p, "context", window=ctx.path, folders=ctx.folders)
        )

    def tier_prompt(
        self, ctx: CompletionContext, tier: str, total_chars: int
    ) -> prompt_split.TierPrompt:
        """`tier`'s prompt parts within its total budget `total_chars`: other files' code
        and recent edits within their share, the window (cut by `_window`) the rest."""
        t = self.settings.remote if tier == "remote" else self.settings.local
        return prompt_split.assemble(
            prefix=ctx.prefix,
            suffix=ctx.suffix,
            ranked=ctx.crossfile,
            chunks=ctx.recent_edits,
            total_chars=total_chars,
            context_tokens=t.context_tokens,
            allowed=self.context_allowed(ctx, tier),
            sticky=self._sticky,
            key=(ctx.path, f"{tier}@{total_chars}"),  # each window size its own context
            cut_window=lambda _pre, _suf, chars: self._window(ctx, tier, chars),
        )

    def context_files(
        self, ctx: CompletionContext, tier: str, total_chars: int
    ) -> list[crossfile.ContextFile]:
        """Everything from other files that `tier`'s prompt holds, in prompt order."""
        return list(self.tier_prompt(ctx, tier, total_chars).files)

    def _note_context(
        self, ctx: CompletionContext, tier: str, max_chars: int
    ) -> tuple[ContextNote, ...]:
        """Which files fed `tier`'s prompt, and how many bytes of each."""
        files = self.context_files(ctx, tier, max_chars)
        return tuple((display_path(f.path, ctx.roots), f.bytes, tier) for f in files)

    def local_budget(self, ctx: CompletionContext | None = None) -> TierBudget:
        """The local tier's total prompt and prediction budget, from its measured speed;
        at `ctx`, the prompt as large as the KV cache allows (`kv_window`)."""
        rates = getattr(self.local, "rates", None)
        budget = time_budget.local_budget(
            self.settings.local,
            self.settings.completion,
            rates if isinstance(rates, Rates) else None,
        )
        uncached = getattr(self.local, "uncached_chars", None)
        if ctx is None or uncached is None:
            return budget
        return kv_window.sized(
            budget,
            self._kv_cap(),
            lambda size: int(uncached(self._request(ctx, None, size, single_line=True))),
        )

    def _kv_cap(self) -> int:
        """The largest local prompt: the setting, and what the backend holds untrimmed."""
        cap = self.settings.local.max_prompt_chars
        return min(cap, int(getattr(self.local, "prompt_chars_cap", cap)))

    def _window(self, ctx: CompletionContext, tier: str, max_chars: int) -> tuple[str, str]:
        """The prefix and suffix `tier` sees: the window's start on a line grid, so the
        local KV cache and the cluster's prefix cache survive the cursor moving on; no
        suffix for a local model that only sees the prefix."""
        if tier != "local":
            return time_budget.anchored_window(ctx.prefix, ctx.suffix, max_chars)
        prefix_only = getattr(self.local, "prompt_mode", None) == "prefix-only"
        return time_budget.anchored_window(
            ctx.prefix, ctx.suffix, max_chars, prefix_only=prefix_only
        )

    def _request(
        self,
        ctx: CompletionContext,
        deadline: float | None,
        max_chars: int,
        tier: str = "local",
        *,
        single_line: bool,
        budget: TierBudget | None = None,
    ) -> CompletionRequest:
        c = self.settings.completion
        parts = self.tier_prompt(ctx, tier, max_chars)  # per tier
        prefix, suffix, files = parts.prefix, parts.suffix, parts.files
        # The time cap is for several lines: one line ends at its end, and half a line
        # is no completion.
        capped = budget is not None and not single_line
        return CompletionRequest(
            context_files=tuple((display_path(f.path, ctx.roots), f.text) for f in files),
            repo=ctx.repo,
            repo_path=display_path(ctx.path, ctx.roots) if files else "",
            prefix=prefix,
            suffix=suffix,
            language=ctx.language,
            path=ctx.path,
            max_tokens=budget.max_tokens if budget is not None and capped else c.max_tokens,
            stop=request_stops(single_line=single_line),
            temperature=0.0,
            deadline=deadline,
            single_line=single_line,
            max_predict_s=budget.max_predict_s if budget is not None and capped else None,
            priority=(
                self.settings.remote.request_priority(invoked=ctx.invoked)
                if tier == "remote"
                else None
            ),
            affinity=affinity.workspace_key(ctx.path, ctx.roots) if tier == "remote" else "",
            plan=egress.make_plan(
                tier,
                ctx.path,
                ctx.roots,
                window_chars=len(prefix) + len(suffix),
                context=[(f.path, len(f.text)) for f in files],
                folders=ctx.folders,
            ),
        )

    async def prefill(self, ctx: CompletionContext) -> dict[str, object] | None:
        """Evaluate the prompt a local request at `ctx` would send, ahead of it, at low
        priority (the backend's `prefill`: any request preempts it); None when the local
        backend cannot prefill."""
        fill = getattr(self.local, "prefill", None)
        if fill is None:
            return None
        budget = self.local_budget(ctx)
        multiline = wants_multiline(ctx.prefix, self.settings.completion.multiline)
        single_line = not (multiline and budget.multiline)
        request = self._request(
            ctx, None, budget.prompt_chars, single_line=single_line, budget=budget
        )
        stats: dict[str, object] = await fill(request)
        # Then, still at low priority, larger windows into the spare cache while the
        # cursor rests: the next request takes the largest one that is warm (`kv_window`).
        while stats.get("outcome") == "done" and (
            grow := kv_window.grow_size(budget, self._kv_cap())
        ):
            request = self._request(ctx, None, grow, single_line=single_line, budget=budget)
            stats = await fill(request)
            budget = attrs.evolve(budget, prompt_chars=grow)
        return stats

    async def complete(self, ctx: CompletionContext, rules: Rules | None = None) -> RouteDecision:
        """One request under `rules` (resolved once for it by the caller; by default
        the configured ones for this local model). Each step returns a frozen result;
        the decision record is built once, at the end."""
        t0 = self._clock()
        rules = self.rules() if rules is None else rules
        access = self.access(ctx)
        models = (
            self.local.model if self.local else None,
            self.remote.model if self.remote and access == "ok" else None,
        )
        cache_key = f"{models[0]}|{models[1]}|{rules.policy}"
        if ctx.crossfile or ctx.recent_edits:  # other context, other prompt
            edits = tuple((c.path, c.text) for c in ctx.recent_edits)
            cache_key += f"|{hash((ctx.crossfile, edits))}"
        hit = self.cache.get(cache_key, ctx.prefix, ctx.suffix)
        if hit is not None:
            return self._from_cache(hit, ctx, rules, models, t0)
        budget = self.local_budget(ctx)
        local_prompt = budget.prompt_chars
        req = _Req(
            ctx=ctx,
            rules=rules,
            models=models,
            t0=t0,
            deadline=t0 + self.settings.completion.deadline_ms / 1000,
            budget=budget,
            # Several lines only when they can arrive within the prediction's time cap.
            multiline=wants_multiline(ctx.prefix, self.settings.completion.multiline)
            and budget.multiline,
            notes=() if self.local is None else self._note_context(ctx, "local", local_prompt),
        )

        # 1. Local tier, cut short as soon as k tokens say "escalate" (or, single-line,
        # as soon as the line ends).
        first = await self._local_step(req, access, budget)
        problems = [] if first.run.error is None else [Problem.of("local", first.run.error)]
        ev, gated = first.evidence(), None

        # 2. Gate, only when the verdict depends on it.
        if router.needs_syntax(ev, rules, access) and not first.run.cut:
            gated = await self._gate_local(req, first, ev)
            ev = gated.evidence
        verdict = router.decide(ev, rules, access)
        cacheable = True
        if verdict.action == "escalate":
            rec, cacheable = await self._escalate(req, verdict, (first, gated, ev), problems)
        else:
            outcome = local_outcome(verdict, gated.text if gated else first.text)
            rec = self._record(req, outcome, (first, first, gated), None, problems)
        if cacheable and rec.route != "none" and rec.completion:
            self.cache.put(
                cache_key, ctx.prefix, ctx.suffix, rec.completion, rec.route, rec.reasons, rec
            )
        return rec

    async def _escalate(
        self,
        req: _Req,
        verdict: router.Ruling,
        local: tuple[LocalStep, Gated | None, LocalEvidence],  # the run, its gate, evidence
        problems: list[Problem],
    ) -> tuple[RouteDecision, bool]:
        """3. The remote tier, if privacy still allows it at this moment: local-only may
        have been switched on (or the settings changed) while the local tier ran. The
        decision, and whether it may be cached."""
        first, gated, ev = local
        ctx = req.ctx
        access = self.access(ctx)
        remote = None
        held: Reason | None = None
        if access == "ok":
            held = self._hold(req, verdict, ev)
            if held is None:
                remote = await self._remote(req, self._draft(first, gated))
            else:
                remote = RemoteStep("failed")  # not asked: the local answer stays
        if remote is not None and remote.problem is not None:
            problems.append(remote.problem)
        if remote is None or remote.outcome == "revoked":
            # Not cached: the key names the remote model, which this answer never saw.
            return await self._blocked_late(req, local, remote, problems), False
        last, rerun_ms = first, None
        if not remote.ok and first.run.cut and self._clock() < req.deadline:
            # We cut the local stream for an escalation that failed: finish the
            # local completion after all, so the user may still get something.
            last = await self._local_step(req, "not-configured", req.budget)
            rerun_ms = last.run.total_s * 1000
            ev = attrs.evolve(
                ev, available=last.run.available, text=last.text, timed_out=last.run.timed_out
            )
        if not remote.ok and ev.syntax is None and ev.available and last.text:
            # Could we still keep the local completion? Only if it passes the gate.
            gated = await self._gate_local(req, last, ev)
            ev = gated.evidence
        if held is not None and ev.syntax == "invalid" and self._may_escalate_broken(req):
            # Held for the raised bar, but the code is broken: the rule still escalates it.
            held, remote = None, await self._remote(req, self._draft(first, gated))
            if remote.problem is not None:
                problems.append(remote.problem)
        local_text = gated.text if gated else last.text
        final = router.after_remote(
            verdict, ev, remote_ok=remote.ok, remote_text=remote.text, held=held,
            verified=remote.verified,
        )  # fmt: skip
        self.budget.record(self._clock(), verdict.confidence, held is None)
        outcome = Outcome(
            route=final.route,
            reasons=final.reasons,
            completion={"remote": remote.text, "local": local_text}.get(final.route, ""),
            confidence=verdict.confidence,
        )
        rec = self._record(req, outcome, (first, last, gated), remote, problems, rerun_ms)
        if held is not None:
            rec = attrs.evolve(rec, load=self._load_text(held))
        return rec, True

    def _read_cluster(self, ctx: CompletionContext) -> None:
        """Feed the cluster's own load signal, only while escalating: the remote client's
        latest reading of its metrics (it refreshes them in the background, never
        waited for) for the replica this workspace escalates to."""
        read = getattr(self.remote, "cluster_load", None)
        if read is None or not self.settings.routing.backpressure:
            return
        now = self._clock()
        load = read(now, affinity.workspace_key(ctx.path, ctx.roots))
        if load is not None and load.at > self._load_read:
            self._load_read = load.at
            self.load.cluster(now, load.waiting, load.running, load.kv_usage, load.url)

    def _hold(self, req: _Req, verdict: router.Ruling, ev: LocalEvidence) -> Reason | None:
        """Why this escalation stays home under load; None: it goes out."""
        self._read_cluster(req.ctx)
        now = self._clock()
        invalid = ev.syntax == "invalid"
        return load_hold(
            reasons=verdict.reasons,
            confidence=verdict.confidence,
            threshold=req.rules.threshold,
            pressure=self.pressure(),
            budget_ok=self.budget.allow(now, verdict.confidence, invalid),
            now=now,
            deadline=req.deadline,
        )

    def _load_text(self, held: Reason) -> str:
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

    def _may_escalate_broken(self, req: _Req) -> bool:
        p = self.pressure()
        now = self._clock()
        return (p is None or p.can_escalate(now, req.deadline)) and now < req.deadline

    def _draft(self, first: LocalStep, gated: Gated | None) -> str:
        """The local answer the remote may verify instead of starting over
        (remote.verify_draft); "" for a plain escalation."""
        if not self.settings.remote.verify_draft:
            return ""
        return gated.text if gated is not None else first.text

    async def _remote(self, req: _Req, draft: str = "") -> RemoteStep:
        started = self._clock()
        remote = await self._call_remote(req.ctx, req.deadline, req.multiline, draft)
        self._observe(remote, started, req.deadline)
        return remote

    def _record(
        self,
        req: _Req,
        outcome: Outcome,
        local: tuple[LocalStep, LocalStep, Gated | None],  # first run, last run, its gate
        remote: RemoteStep | None,
        problems: Sequence[Problem],
        rerun_ms: float | None = None,
        *,
        tokens_of_last: bool = False,
        models: tuple[str | None, str | None] | None = None,
    ) -> RouteDecision:
        first, last, gated = local
        return decision(
            req.ctx,
            req.rules,
            req.models if models is None else models,
            outcome,
            first=first,
            last=last,
            gated=gated,
            remote=remote,
            rerun_ms=rerun_ms,
            local_tokens=len((last if tokens_of_last else first).run.logprobs),
            local_context=req.notes,
            problems=problems,
            total_ms=(self._clock() - req.t0) * 1000,
            context_sharing=prompt_split.sharing(self.settings),
        )

    def _from_cache(
        self,
        hit: Hit,
        ctx: CompletionContext,
        rules: Rules,
        models: tuple[str | None, str | None],
        t0: float,
    ) -> RouteDecision:
        origin = hit.entry.origin if isinstance(hit.entry.origin, RouteDecision) else None
        return RouteDecision(
            completion=hit.completion,
            route=hit.entry.route,  # type: ignore[arg-type]
            reasons=(Reason.CACHE_HIT, *hit.entry.reasons),
            policy=rules.policy,
            # What the original decision knew, so the card still explains the route.
            confidence=origin.confidence if origin else None,
            threshold=rules.threshold,
            syntax=origin.syntax if origin else None,
            local_model=models[0],
            remote_model=models[1],
            local_completion=origin.local_completion if origin else "",
            cache_hit=True,
            latency=Latency(total=(self._clock() - t0) * 1000),
            language=ctx.language,
            path=ctx.path,
            context_sharing=prompt_split.sharing(self.settings),
        )

    async def _local_step(self, req: _Req, access: RemoteAccess, budget: TierBudget) -> LocalStep:
        """The local run and its text as judged and shown."""
        ctx, multiline = req.ctx, req.multiline
        run = await self._run_local(ctx, req.deadline, req.rules, access, multiline, budget)
        text, cut = shown_text(run.text, run.finish_reason, ctx.suffix, multiline=multiline)
        return LocalStep(run, text, cut)

    async def _call_remote(
        self, ctx: CompletionContext, deadline: float, multiline: bool, draft: str = ""
    ) -> RemoteStep:
        assert self.remote is not None
        if ctx.settled is not None and not await asyncio.shield(ctx.settled):
            raise asyncio.CancelledError  # typing went on: a newer request replaces this one
        t_remote = self._clock()
        max_chars = self.settings.remote.max_prompt_chars
        # The prompt is planned once: the request, the record's context files and the
        # privacy re-check of a call in flight all read this one.
        request = self._request(ctx, deadline, max_chars, "remote", single_line=not multiline)
        request = attrs.evolve(request, draft=draft)  # same prompt, same plan
        call = asyncio.ensure_future(self.remote.complete(request))
        notes = tuple(
            (path, len(text.encode("utf-8", "surrogatepass")), "remote")
            for path, text in request.context_files
        )
        ctx_bytes = sum(n[1] for n in notes)
        self._remote_calls[call] = ctx
        self._remote_plans[call] = request.plan

        def ms() -> float:
            return (self._clock() - t_remote) * 1000

        try:
            result = await call
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if call not in self._revoked or (task is not None and task.cancelling()):
                raise
            # The request may already be on the wire: count it, to be safe.
            return RemoteStep(
                "revoked",
                bytes_sent=len((ctx.prefix + ctx.suffix).encode()) + ctx_bytes,
                context_bytes=ctx_bytes,
                context=notes,
                problem=Problem("remote", "cancelled: privacy settings changed during the request"),
                total_ms=ms(),
            )
        except BackendError as exc:
            return RemoteStep(
                "failed",
                bytes_sent=exc.bytes_sent,  # what went out before it failed (often 0)
                context_bytes=ctx_bytes if exc.bytes_sent else 0,
                context=notes,
                problem=Problem.of("remote", exc),
                total_ms=ms(),
            )
        finally:
            self._remote_calls.pop(call, None)
            self._remote_plans.pop(call, None)
            self._revoked.discard(call)
        total_ms = ms()
        text, cut, gate_ms = await self._remote_text(ctx, result, deadline, multiline)
        return RemoteStep(
            "ok",
            text=text,
            truncated=cut,
            bytes_sent=result.bytes_sent,
            context_bytes=ctx_bytes,
            context=notes,
            total_ms=total_ms,
            first_token_ms=None if result.first_token_s is None else result.first_token_s * 1000,
            gate_ms=gate_ms,
            draft_tokens=result.draft_tokens,
            draft_kept=result.draft_kept,
        )

    async def _remote_text(
        self, ctx: CompletionContext, result: Completion, deadline: float, multiline: bool
    ) -> tuple[str, Truncation | None, float | None]:
        """The remote's text as shown, what a length cut dropped, and the gate's time
        (None: not run)."""
        text, cut = shown_text(result.text, result.finish_reason, ctx.suffix, multiline=multiline)
        if result.finish_reason != "length" or not multiline or self.gate is None or not text:
            return text, cut, None
        # Whole lines may still leave a block open: keep those the gate accepts (none
        # accepted: nothing from the remote is shown, rather than broken code).
        t = self._clock()
        found = await self._trimmed(ctx, text, deadline, cut_in=ctx.language)
        kept = found[0] if found is not None else ""
        gate_ms = (self._clock() - t) * 1000
        if kept != text:
            cut = truncation(post_process(result.text, ctx.suffix, multiline=multiline), kept)
            cut = attrs.evolve(cut, kept="gate" if kept else "nothing")
        return kept, cut, gate_ms

    async def _blocked_late(
        self,
        req: _Req,
        local: tuple[LocalStep, Gated | None, LocalEvidence],
        remote: RemoteStep | None,
        problems: list[Problem],
    ) -> RouteDecision:
        """The request wanted to escalate, but privacy forbids it now: decide as if it
        had been forbidden from the start (finishing a local stream we cut)."""
        first, gated, ev = local
        access = self.access(req.ctx)
        if access == "ok":  # pragma: no cover - only called once access changed
            access = "local-only"
        sent = remote is not None and remote.bytes_sent > 0
        models = req.models if sent else (req.models[0], None)
        last, rerun_ms = first, None
        if first.run.cut and self._clock() >= req.deadline:
            ev = attrs.evolve(ev, text=first.text)
        elif first.run.cut:
            last = await self._local_step(req, access, self.local_budget())
            rerun_ms = last.run.total_s * 1000
            if last.run.error is not None:
                problems.append(Problem.of("local", last.run.error))
            ev, gated = last.evidence(), None
        if router.needs_syntax(ev, req.rules, access) and ev.syntax is None:
            gated = await self._gate_local(req, last, ev)
            ev = gated.evidence
        verdict = router.decide(ev, req.rules, access)
        outcome = local_outcome(verdict, gated.text if gated else last.text)
        return self._record(
            req, outcome, (first, last, gated), remote, problems, rerun_ms,
            tokens_of_last=True, models=models,
        )  # fmt: skip

    async def _run_local(
        self,
        ctx: CompletionContext,
        deadline: float,
        rules: Rules,
        access: RemoteAccess,
        multiline: bool,
        budget: TierBudget,
    ) -> LocalRun:
        run = _LocalRun()
        if self.local is None:
            return LocalRun(error=BackendError("no local backend configured", backend="local"))
        started = self._clock()
        first_end: float | None = None
        total_end: float | None = None
        if access == "ok" and rules.policy != "local":
            # The request may escalate: a slow or hung local tier must leave the remote
            # time to answer. Where it cannot escalate, the local tier has the deadline.
            b = self.settings.local
            total_end = min(deadline, started + b.total_ms / 1000)
            first_end = min(total_end, started + b.first_token_ms / 1000)
        stream = self.local.stream(
            self._request(
                ctx, deadline, budget.prompt_chars, single_line=not multiline, budget=budget
            )
        )
        predict_end: float | None = None  # the prediction's time cap, once the first token came
        try:
            while True:
                end = first_end if run.first_token_s is None else _earliest(total_end, predict_end)
                try:
                    async with asyncio.timeout(
                        None if end is None else max(0.0, end - self._clock())
                    ):
                        chunk = await anext(stream)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    if predict_end is not None and end == predict_end != total_end:
                        # The time cap (a backend that does not end there by itself):
                        # what came is the completion, cut like a token cap cuts it.
                        run.finish_reason = "length"
                        break
                    run.timed_out = True
                    b = self.settings.local
                    what = (
                        f"no first token within {b.first_token_ms:g} ms (local.first_token_ms)"
                        if run.first_token_s is None
                        else f"not done within {b.total_ms:g} ms (local.total_ms)"
                    )
                    run.error = BackendTimeout(f"{what}; escalated", backend=self.local.name)
                    break
                if chunk.text and run.first_token_s is None:
                    run.first_token_s = self._clock() - started
                    if multiline and budget.max_predict_s is not None:
                        # A little slack: a backend that honours the cap ends first.
                        predict_end = self._clock() + budget.max_predict_s + _PREDICT_SLACK_S
                run.text += chunk.text
                run.logprobs.extend(t.logprob for t in chunk.tokens)
                run.has_logprobs = run.has_logprobs and chunk.logprobs
                run.finish_reason = chunk.finish_reason or run.finish_reason
                if not multiline and line_end(run.text) >= 0:
                    # The line is complete and post_process keeps nothing after it:
                    # closing the stream (finally) ends the generation.
                    run.finish_reason = "stop"
                    break
                # Early escalation: no point waiting for the rest of a completion
                # we are going to throw away; the remote request starts now.
                if (
                    access == "ok"
                    and self.settings.routing.early_escalation
                    and router.early_escalation(run.logprobs, rules)
                ):
                    run.cancelled_early = True
                    break
        except BackendError as exc:
            run.error = exc
            log.info("local backend failed: %s", exc)
        finally:
            await stream.aclose()
            run.total_s = self._clock() - started
        return run.frozen()

    async def _check(self, ctx: CompletionContext, text: str) -> Verdict:
        assert self.gate is not None
        if self.gate.blocking:
            return await asyncio.to_thread(self.gate.check, ctx, text)
        return self.gate.check(ctx, text)

    async def _trimmed(
        self,
        ctx: CompletionContext,
        text: str,
        deadline: float,
        *,
        skip: int = 0,
        cut_in: str | None = None,
    ) -> tuple[str, Verdict | None] | None:
        """`gate_trimmed` with this request's gate and deadline (in the gate's thread
        when its checks block)."""
        gate = self.gate
        assert gate is not None

        def trim() -> tuple[str, Verdict | None] | None:
            return gate_trimmed(
                text,
                lambda run: gate.check(ctx, run),
                ctx.suffix,
                skip=skip,
                out_of_time=lambda: self._clock() >= deadline,
                cut_in=cut_in,
            )

        return await asyncio.to_thread(trim) if gate.blocking else trim()

    async def _gate_local(self, req: _Req, local: LocalStep, ev: LocalEvidence) -> Gated:
        """Gate the local text; a multi-line text the token budget cut that the gate
        rejects is trimmed to the longest run of whole lines it accepts, if any (else, or
        once the deadline passed, it stays as it is, rejected, and escalates as
        syntax-invalid)."""
        ctx, text = req.ctx, local.text
        if self.gate is None:
            no_gate = attrs.evolve(ev, syntax="unsupported-language")
            return Gated(text, no_gate, None, None, local.truncated)
        t = self._clock()
        verdict = await self._check(ctx, text)
        ms = (self._clock() - t) * 1000
        ev = attrs.evolve(ev, syntax=verdict.status, undefined=verdict.undefined)
        if verdict.status != "invalid" or not req.multiline or local.truncated is None:
            return Gated(text, ev, verdict, ms, local.truncated)
        t = self._clock()
        found = await self._trimmed(ctx, text, req.deadline, skip=1)
        ms += (self._clock() - t) * 1000
        run, info = found if found is not None else (text, None)
        if info is None:  # every run rejected, or out of time
            return Gated(text, ev, verdict, ms, local.truncated)
        more = truncation(text, run)
        cut = Truncation(
            chars=local.truncated.chars + more.chars, lines=local.truncated.lines + more.lines
        )
        kept = attrs.evolve(ev, text=run, syntax=info.status, undefined=info.undefined)
        return Gated(run, kept, info, ms, cut)
