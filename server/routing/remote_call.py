"""The remote step: one planned remote request through the egress gate, as a frozen
`RemoteStep` (answered, failed, refused by the gate, or revoked by a privacy change
while in flight), with the gate's verdict."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from synconfroute.clients.errors import BackendError, EgressRefused
from synconfroute.clients.types import Completion

from ..vocab.record import Problem, Truncation
from .gated import GatedRemote
from .gating import Gating, remote_text
from .planner import TierRequest
from .request import CompletionContext
from .steps import RemoteStep

log = logging.getLogger(__name__)

PASSED = "passed"

# How a remote answer becomes the text shown: (text, what a cut dropped, gate ms).
Judge = Callable[[Completion], Awaitable[tuple[str, Truncation | None, float | None]]]


class InFlight:
    """The remote calls in flight, each with its planned request, so that a privacy
    change can stop those it no longer allows."""

    def __init__(self) -> None:
        self._calls: dict[asyncio.Future[Completion], tuple[CompletionContext, TierRequest]] = {}
        self._revoked: set[asyncio.Future[Completion]] = set()

    def add(self, call: asyncio.Future[Completion], ctx: CompletionContext, t: TierRequest) -> None:
        self._calls[call] = (ctx, t)

    def done(self, call: asyncio.Future[Completion]) -> None:
        self._calls.pop(call, None)
        self._revoked.discard(call)

    def revoked(self, call: asyncio.Future[Completion]) -> bool:
        return call in self._revoked

    def revoke(self, refused: Callable[[CompletionContext, TierRequest], bool]) -> None:
        """Cancel each call still running that `refused(ctx, planned)` says may not go."""
        for call, (ctx, planned) in self._calls.items():
            if not call.done() and refused(ctx, planned):
                log.info("privacy settings changed: cancelling a remote request in flight")
                self._revoked.add(call)
                call.cancel()


def _revoked(ctx: CompletionContext, treq: TierRequest, ms: float) -> RemoteStep:
    """A call a privacy change cancelled: it may already be on the wire, so it is counted
    as sent, to be safe."""
    return RemoteStep(
        "revoked",
        bytes_sent=len((ctx.prefix + ctx.suffix).encode()) + treq.context_bytes,
        context_bytes=treq.context_bytes,
        context=treq.notes,
        problem=Problem("remote", "cancelled: privacy settings changed during the request"),
        total_ms=ms,
        egress="revoked in flight",
    )


async def call_remote(
    remote: GatedRemote,
    treq: TierRequest,
    ctx: CompletionContext,
    inflight: InFlight,
    g: Gating,
    multiline: bool,
    judge: Judge | None = None,
) -> RemoteStep:
    """Send `treq` (the gate first) and judge the answer (by default as a completion at
    the cursor: `remote_text`); never raises a backend error."""
    t_remote = g.clock()
    call = asyncio.ensure_future(remote.send(treq))
    notes, ctx_bytes = treq.notes, treq.context_bytes
    inflight.add(call, ctx, treq)

    def ms() -> float:
        return (g.clock() - t_remote) * 1000

    try:
        result = await call
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if not inflight.revoked(call) or (task is not None and task.cancelling()):
            raise
        return _revoked(ctx, treq, ms())
    except BackendError as exc:
        verdict = f"refused: {exc.reason}" if isinstance(exc, EgressRefused) else PASSED
        return RemoteStep(
            "failed",
            bytes_sent=exc.bytes_sent,  # what went out before it failed (often 0)
            context_bytes=ctx_bytes if exc.bytes_sent else 0,
            context=notes,
            problem=Problem.of("remote", exc),
            total_ms=ms(),
            egress=verdict,
        )
    finally:
        inflight.done(call)
    total_ms = ms()
    if judge is None:
        text, cut, gate_ms = await remote_text(g, ctx, result, multiline)
    else:
        text, cut, gate_ms = await judge(result)
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
        egress=PASSED,
        draft_tokens=result.draft_tokens,
        draft_kept=result.draft_kept,
    )


__all__ = ["PASSED", "InFlight", "Judge", "call_remote"]
