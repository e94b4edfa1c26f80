"""One completion request end to end: local stream, gate, decision, escalation.

The pipeline owns timing and failure handling; the decision itself is the pure
`router`. It never imports pygls: the LSP layer and the CLI call `complete()`.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import time
from collections.abc import Callable
from typing import Protocol

import attrs

from clients.errors import BackendError
from clients.types import Backend, CompletionRequest

from . import router
from .cache import CompletionCache
from .config import Settings
from .record import RouteDecision, SyntaxInfo
from .router import LocalEvidence, Reason, RemoteAccess, Rules, SyntaxStatus

log = logging.getLogger(__name__)

# Where post_process would cut anyway: let the model stop there (saves tokens).
REQUEST_STOPS = ("\n```", "\n\n\n")

_STATUSES: dict[str, SyntaxStatus] = {
    s: s for s in ("valid", "invalid", "timeout", "unsupported-language", "error", "skipped")
}


@attrs.frozen(kw_only=True)
class CompletionContext:
    """The text around the cursor, already cut to the context window."""

    prefix: str
    suffix: str
    language: str = ""
    path: str = ""
    document: object | None = None  # the gate's per-document state (incremental parse)


class Gate(Protocol):
    """The syntax gate as the pipeline sees it."""

    def check(self, ctx: CompletionContext, completion: str) -> SyntaxInfo: ...

    @property
    def blocking(self) -> bool:
        """True when a check may take long (compilers): run it off the event loop."""
        ...


def wants_multiline(prefix: str, setting: bool) -> bool:
    """Multi-line completions only where a block may start.

    With code before the cursor on its line ("return |", "x = f(a, |"), the user is
    finishing that line: small models otherwise run on into unrelated code. After a
    block opener (":", "{", "(", "[") or on a blank line, several lines are allowed.
    """
    if not setting:
        return False
    line = prefix.rsplit("\n", 1)[-1].rstrip()
    return not line.strip() or line.endswith((":", "{", "(", "["))


def post_process(text: str, suffix: str, *, multiline: bool) -> str:
    """Cut a raw completion to what should be inserted.

    - single-line mode keeps the first line (after a leading newline, if any);
    - a Markdown fence or two blank lines end the completion;
    - a completion that starts re-typing the code after the cursor (the first
      non-blank line of the suffix) is cut before that line: small FIM models
      often continue past the hole.
    """
    if not multiline:
        lead = len(text) - len(text.lstrip("\n"))
        end = text.find("\n", lead)
        text = text if end < 0 else text[:end]
    # Chat-tuned small models close code with a Markdown fence and then explain it;
    # two blank lines in a row end a block in every language we serve.
    for marker in ("\n```", "\n\n\n"):
        cut = text.find(marker)
        if cut >= 0:
            text = text[:cut]
    anchor = next((ln.strip() for ln in suffix.split("\n") if ln.strip()), "")
    if len(anchor) >= 3:
        lines = text.split("\n")
        for i in range(1, len(lines)):
            if lines[i].strip() == anchor:
                text = "\n".join(lines[:i])
                break
    return text.rstrip() if text.strip() == "" else text


def remote_access(settings: Settings, remote: Backend | None, path: str) -> RemoteAccess:
    if remote is None:
        return "not-configured"
    if settings.privacy.local_only:
        return "local-only"
    if path and any(_glob(path, pat) for pat in settings.privacy.never_send):
        return "privacy-blocked"
    return "ok"


def _glob(path: str, pattern: str) -> bool:
    # "**/x/**" style patterns: fnmatch's "*" already crosses "/"; also try the
    # basename so "*.env" matches anywhere.
    base = path.rsplit("/", 1)[-1]
    return fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(base, pattern)


@attrs.define
class _LocalRun:
    text: str = ""
    logprobs: list[float] = attrs.field(factory=list)
    has_logprobs: bool = True
    cancelled_early: bool = False
    error: BackendError | None = None
    first_token_s: float | None = None
    total_s: float = 0.0

    @property
    def available(self) -> bool:
        return self.error is None


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
        self.settings = settings
        self.local = local
        self.remote = remote
        self.gate = gate
        self.cache = cache if cache is not None else CompletionCache()
        self._clock = clock

    def rules(self) -> Rules:
        r = self.settings.routing
        model = self.local.model if self.local else ""
        return Rules(
            policy=r.policy,
            threshold=r.threshold_for(model),
            k=r.confidence_tokens,
            missing_logprobs=r.missing_logprobs,
        )

    def _request(self, ctx: CompletionContext, deadline: float) -> CompletionRequest:
        c = self.settings.completion
        return CompletionRequest(
            prefix=ctx.prefix,
            suffix=ctx.suffix,
            language=ctx.language,
            path=ctx.path,
            max_tokens=c.max_tokens,
            stop=REQUEST_STOPS,
            temperature=0.0,
            deadline=deadline,
        )

    async def complete(self, ctx: CompletionContext) -> RouteDecision:
        t0 = self._clock()
        deadline = t0 + self.settings.completion.deadline_ms / 1000
        rules = self.rules()
        access = remote_access(self.settings, self.remote, ctx.path)
        rec = RouteDecision(
            completion="",
            route="none",
            reasons=[],
            policy=rules.policy,
            confidence=None,
            threshold=rules.threshold,
            syntax=None,
            local_model=self.local.model if self.local else None,
            remote_model=self.remote.model if self.remote and access == "ok" else None,
            language=ctx.language,
            path=ctx.path,
        )

        cache_key = f"{rec.local_model}|{rec.remote_model}|{rules.policy}"
        hit = self.cache.get(cache_key, ctx.prefix, ctx.suffix)
        if hit is not None:
            rec.completion = hit.completion
            rec.route = hit.entry.route  # type: ignore[assignment]
            rec.reasons = [Reason.CACHE_HIT, *hit.entry.reasons]
            rec.cache_hit = True
            if isinstance(origin := hit.entry.origin, RouteDecision):
                # What the original decision knew, so the card still explains the route.
                rec.confidence, rec.syntax = origin.confidence, origin.syntax
                rec.local_completion = origin.local_completion
            rec.latency_ms["total"] = (self._clock() - t0) * 1000
            return rec

        # 1. Local tier, cut short as soon as k tokens say "escalate".
        run = await self._run_local(ctx, deadline, rules, access)
        rec.latency_ms["local_total"] = run.total_s * 1000
        if run.first_token_s is not None:
            rec.latency_ms["local_first_token"] = run.first_token_s * 1000
        if run.error is not None:
            rec.errors.append(f"local: {run.error}")
            rec.error_kinds.append(f"local:{type(run.error).__name__}")
        multiline = wants_multiline(ctx.prefix, self.settings.completion.multiline)
        local_text = post_process(run.text, ctx.suffix, multiline=multiline)
        rec.local_completion = local_text
        rec.local_tokens = len(run.logprobs)
        rec.local_cancelled_early = run.cancelled_early
        ev = LocalEvidence(
            available=run.available,
            # Cut early, the text is partial: it only needs to show there was output.
            text=run.text if run.cancelled_early else local_text,
            logprobs=run.logprobs,
            has_logprobs=run.has_logprobs,
        )

        # 2. Gate, only when the verdict depends on it.
        if router.needs_syntax(ev, rules, access) and not run.cancelled_early:
            ev = await self._gate(ctx, local_text, ev, rec)

        verdict = router.decide(ev, rules, access)
        rec.confidence = verdict.confidence
        if verdict.action != "escalate":
            rec.route = "local" if verdict.action == "keep-local" else "none"
            rec.reasons = [str(r) for r in verdict.reasons]
            rec.completion = local_text if rec.route == "local" else ""
            return self._finish(rec, t0, cache_key, ctx)

        # 3. Remote tier.
        assert self.remote is not None
        remote_text, remote_ok = "", False
        t_remote = self._clock()
        try:
            result = await self.remote.complete(self._request(ctx, deadline))
            remote_text = post_process(result.text, ctx.suffix, multiline=multiline)
            remote_ok = True
            rec.bytes_sent += result.bytes_sent
            if result.first_token_s is not None:
                rec.latency_ms["remote_first_token"] = result.first_token_s * 1000
        except BackendError as exc:
            rec.errors.append(f"remote: {exc}")
            rec.error_kinds.append(f"remote:{type(exc).__name__}")
            # We may have sent the request before it failed: count it, to be safe.
            rec.bytes_sent += len((ctx.prefix + ctx.suffix).encode())
        rec.latency_ms["remote_total"] = (self._clock() - t_remote) * 1000

        if not remote_ok and run.cancelled_early and self._clock() < deadline:
            # We cut the local stream for an escalation that failed: finish the
            # local completion after all, so the user may still get something.
            run = await self._run_local(ctx, deadline, rules, "not-configured")
            rec.latency_ms["local_rerun"] = run.total_s * 1000
            local_text = post_process(run.text, ctx.suffix, multiline=multiline)
            rec.local_completion = local_text
            ev = attrs.evolve(ev, available=run.available, text=local_text)
        if not remote_ok and ev.syntax is None and ev.available and local_text:
            # Could we still keep the local completion? Only if it passes the gate.
            ev = await self._gate(ctx, local_text, ev, rec)
        final = router.after_remote(verdict, ev, remote_ok=remote_ok, remote_text=remote_text)
        rec.route = final.route
        rec.reasons = [str(r) for r in final.reasons]
        rec.completion = {"remote": remote_text, "local": local_text}.get(final.route, "")
        return self._finish(rec, t0, cache_key, ctx)

    def _finish(
        self, rec: RouteDecision, t0: float, cache_key: str, ctx: CompletionContext
    ) -> RouteDecision:
        rec.latency_ms["total"] = (self._clock() - t0) * 1000
        if rec.route != "none" and rec.completion:
            reasons = tuple(rec.reasons)
            self.cache.put(
                cache_key, ctx.prefix, ctx.suffix, rec.completion, rec.route, reasons, rec
            )
        return rec

    async def _run_local(
        self, ctx: CompletionContext, deadline: float, rules: Rules, access: RemoteAccess
    ) -> _LocalRun:
        run = _LocalRun()
        if self.local is None:
            run.error = BackendError("no local backend configured", backend="local")
            return run
        started = self._clock()
        stream = self.local.stream(self._request(ctx, deadline))
        try:
            async for chunk in stream:
                if chunk.text and run.first_token_s is None:
                    run.first_token_s = self._clock() - started
                run.text += chunk.text
                run.logprobs.extend(t.logprob for t in chunk.tokens)
                run.has_logprobs = run.has_logprobs and chunk.logprobs
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
        return run

    async def _gate(
        self, ctx: CompletionContext, text: str, ev: LocalEvidence, rec: RouteDecision
    ) -> LocalEvidence:
        if self.gate is None:
            return attrs.evolve(ev, syntax="unsupported-language")
        t = self._clock()
        if self.gate.blocking:
            info = await asyncio.to_thread(self.gate.check, ctx, text)
        else:
            info = self.gate.check(ctx, text)
        rec.latency_ms["gate"] = (self._clock() - t) * 1000
        rec.syntax = info
        return attrs.evolve(ev, syntax=_STATUSES.get(info.status, "error"))
