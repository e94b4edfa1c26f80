"""What each step of one request produced, frozen: the local stream, its text as judged
and shown, the gate's pass over it, the remote call. The pipeline runs the steps; the
decision record is built once from their results (`decision`), at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import attrs

from synconfroute.clients.errors import BackendError

from ..vocab.kinds import Reason, Route
from ..vocab.record import Latency, Problem, RouteDecision, Truncation
from ..vocab.verdict import Verdict
from .cache import Hit
from .request import CompletionContext
from .router import LocalEvidence, Rules, Ruling

# A file that fed a tier's prompt: (workspace-relative path, bytes, tier).
ContextNote = tuple[str, int, str]


@attrs.frozen
class LocalRun:
    """The local stream as it ended."""

    text: str = ""
    logprobs: tuple[float, ...] = ()
    has_logprobs: bool = True
    cancelled_early: bool = False
    error: BackendError | None = None
    first_token_s: float | None = None
    total_s: float = 0.0
    timed_out: bool = False  # cut by the local budget (local.first_token_ms / total_ms)
    finish_reason: str | None = None  # the tier's, "stop" when we stopped at a line end
    # Each log-prob's token text, where the tier gave them (a next-edit answer is judged
    # on the tokens that changed the region, found by where they lie in the text).
    tokens: tuple[str, ...] = ()

    @property
    def cut(self) -> bool:
        """We stopped the stream ourselves: the text is partial."""
        return self.cancelled_early or self.timed_out

    @property
    def available(self) -> bool:
        return self.error is None


@attrs.frozen
class Ahead:
    """The gate's verdict on a local text, checked while the stream was quiet before it
    ended (`gating.AheadCheck`), and the state of the document it was checked against."""

    text: str
    state: object
    verdict: Verdict


@attrs.frozen
class LocalStep:
    """A local run and its text as judged and shown."""

    run: LocalRun
    text: str
    truncated: Truncation | None  # what a length cut dropped
    # The gate's verdict on the text before the stream ended, if the stream went quiet
    # with this text (None: none, or on another text): the gate step reuses it.
    ahead: Ahead | None = None

    def evidence(self) -> LocalEvidence:
        return LocalEvidence(
            available=self.run.available,
            # Cut early, the text is partial: it only needs to show there was output.
            text=self.run.text if self.run.cut else self.text,
            logprobs=self.run.logprobs,
            has_logprobs=self.run.has_logprobs,
            timed_out=self.run.timed_out,
        )


@attrs.frozen
class Gated:
    """The gate's pass over a local text: the text kept (trimmed to whole lines the gate
    accepts, where a length cut left a block open) and the evidence with its verdict."""

    text: str
    evidence: LocalEvidence
    verdict: Verdict | None  # None: no gate (the evidence says unsupported-language)
    ms: float | None
    truncated: Truncation | None


@attrs.frozen
class RemoteStep:
    """The remote call: answered, failed, or cancelled by a privacy change in flight."""

    outcome: Literal["ok", "failed", "revoked"]
    text: str = ""
    truncated: Truncation | None = None
    bytes_sent: int = 0
    context_bytes: int = 0
    context: tuple[ContextNote, ...] = ()
    problem: Problem | None = None
    total_ms: float = 0.0
    first_token_ms: float | None = None
    gate_ms: float | None = None
    # The egress gate's verdict on the planned request: "passed", "refused: <why>", or
    # "revoked in flight" (a privacy change cancelled it after it passed).
    egress: str = ""
    # The local draft's tokens the remote scored (0: not verified) and kept.
    draft_tokens: int = 0
    draft_kept: int = 0

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @property
    def verified(self) -> bool:
        """The remote confirmed the whole local draft as its own answer."""
        return self.ok and self.draft_tokens > 0 and self.draft_kept == self.draft_tokens


@attrs.frozen(kw_only=True)
class Outcome:
    """How the request ended: the route, why, and what is shown."""

    route: Route
    reasons: tuple[Reason, ...]
    completion: str
    confidence: float | None


def local_outcome(ruling: Ruling, text: str) -> Outcome:
    """A ruling that keeps the request on this machine: `text` shown, or nothing."""
    kept = ruling.action == "keep-local"
    return Outcome(
        route="local" if kept else "none",
        reasons=ruling.reasons,
        completion=text if kept else "",
        confidence=ruling.confidence,
    )


def decision(
    ctx: CompletionContext,
    rules: Rules,
    models: tuple[str | None, str | None],  # (local, remote) as the request saw them
    outcome: Outcome,
    *,
    first: LocalStep,
    last: LocalStep,
    gated: Gated | None,
    remote: RemoteStep | None,
    rerun_ms: float | None,
    local_tokens: int,
    local_context: Sequence[ContextNote],
    problems: Sequence[Problem],
    total_ms: float,
    context_sharing: str = "",
) -> RouteDecision:
    """The record of a request the tiers answered, built once from its steps. `first` is
    the local run the decision started from, `last` the one whose text was judged (a
    rerun after a failed escalation finishes a stream that was cut)."""
    truncated: dict[str, Truncation] = {}
    local_cut = gated.truncated if gated is not None else last.truncated
    if local_cut is not None:
        truncated["local"] = local_cut
    if remote is not None and remote.truncated is not None:
        truncated["remote"] = remote.truncated
    run = first.run
    return RouteDecision(
        completion=outcome.completion,
        route=outcome.route,
        reasons=outcome.reasons,
        policy=rules.policy,
        confidence=outcome.confidence,
        threshold=rules.threshold,
        syntax=gated.verdict if gated is not None else None,
        local_model=models[0],
        remote_model=models[1],
        local_completion=gated.text if gated is not None else last.text,
        local_tokens=local_tokens,
        local_cancelled_early=run.cancelled_early,
        truncated=truncated,
        latency=Latency(
            local_first_token=None if run.first_token_s is None else run.first_token_s * 1000,
            local_total=run.total_s * 1000,
            local_rerun=rerun_ms,
            gate=gated.ms if gated is not None else None,
            remote_first_token=remote.first_token_ms if remote else None,
            remote_total=remote.total_ms if remote else None,
            remote_gate=remote.gate_ms if remote else None,
            total=total_ms,
        ),
        context_files=(*local_context, *(remote.context if remote else ())),
        context_sharing=context_sharing,
        **_sent(remote),
        language=ctx.language,
        path=ctx.path,
        problems=tuple(problems),
    )


def _sent(remote: RemoteStep | None) -> dict[str, Any]:
    """What the record says of the remote call: what left the machine, the egress gate's
    verdict, the local draft's tokens it verified."""
    r = remote if remote is not None else RemoteStep("failed")
    return {
        "bytes_sent": r.bytes_sent,
        "context_bytes_sent": r.context_bytes,
        "egress": r.egress,
        "draft_tokens": r.draft_tokens,
        "draft_kept": r.draft_kept,
    }


def cached_decision(
    hit: Hit,
    ctx: CompletionContext,
    rules: Rules,
    models: tuple[str | None, str | None],
    *,
    total_ms: float,
    context_sharing: str,
) -> RouteDecision:
    """The record of a request the cache answered: what the original decision knew, so
    the card still explains the route."""
    origin = hit.entry.origin if isinstance(hit.entry.origin, RouteDecision) else None
    return RouteDecision(
        completion=hit.completion,
        route=hit.entry.route,  # type: ignore[arg-type]
        reasons=(Reason.CACHE_HIT, *hit.entry.reasons),
        policy=rules.policy,
        confidence=origin.confidence if origin else None,
        threshold=rules.threshold,
        syntax=origin.syntax if origin else None,
        local_model=models[0],
        remote_model=models[1],
        local_completion=origin.local_completion if origin else "",
        cache_hit=True,
        latency=Latency(total=total_ms),
        language=ctx.language,
        path=ctx.path,
        context_sharing=context_sharing,
    )
