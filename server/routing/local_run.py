"""The local step: one planned local request streamed, cut where the rules say, frozen.

The stream is cut as soon as it is decided: k unconfident tokens (early escalation,
the remote request starts now), the end of a single line, the local tier's time limits
when the request may escalate (a slow or hung local tier must leave the remote time to
answer), or the prediction's time cap. What came is returned as a frozen `LocalRun`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import attrs

from synconfroute.clients.errors import BackendError, BackendTimeout
from synconfroute.clients.types import Backend, Chunk, CompletionRequest, line_end

from ..learning.later import close_after_response
from ..settings.config import LocalSettings
from . import kv_window, router
from .planner import Planning, TierRequest, kv_cap, plan_local, plan_tier
from .request import CompletionContext
from .router import RemoteAccess, Rules
from .steps import LocalRun

log = logging.getLogger(__name__)

# How late the pipeline cuts a prediction past its time cap (`local.max_predict_ms`):
# the embedded worker ends there by itself; Ollama does not know the cap.
PREDICT_SLACK_S = 0.05
# How long the stream must stay quiet after a text chunk before `run_local` tells its
# `quiet` callback: a local model's chunks come 10-50 ms apart on a CPU, its end one
# decode step after its last text; a gap this long is one of those (a few ms: the check
# it starts must be done before the end comes).
QUIET_S = 0.003


def _earliest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


@attrs.define
class _LocalRun:
    """The local stream while it runs; `run_local` returns it frozen (`LocalRun`)."""

    text: str = ""
    logprobs: list[float] = attrs.field(factory=list)
    has_logprobs: bool = True
    cancelled_early: bool = False
    error: BackendError | None = None
    first_token_s: float | None = None
    total_s: float = 0.0
    timed_out: bool = False
    finish_reason: str | None = None
    tokens: list[str] = attrs.field(factory=list)

    def frozen(self) -> LocalRun:
        return LocalRun(
            text=self.text,
            logprobs=tuple(self.logprobs),
            has_logprobs=self.has_logprobs,
            cancelled_early=self.cancelled_early,
            error=self.error,
            first_token_s=self.first_token_s,
            total_s=self.total_s,
            timed_out=self.timed_out,
            finish_reason=self.finish_reason,
            tokens=tuple(self.tokens),
        )


@attrs.frozen(kw_only=True)
class LocalLimits:
    """When the stream is cut, fixed when the request starts."""

    settings: LocalSettings
    deadline: float
    rules: Rules
    access: RemoteAccess
    multiline: bool
    early_escalation: bool  # routing.early_escalation
    clock: Callable[[], float]


def _timed_out(run: _LocalRun, b: LocalSettings, backend: str) -> None:
    run.timed_out = True
    what = (
        f"no first token within {b.first_token_ms:g} ms (local.first_token_ms)"
        if run.first_token_s is None
        else f"not done within {b.total_ms:g} ms (local.total_ms)"
    )
    run.error = BackendTimeout(f"{what}; escalated", backend=backend)


def _take(run: _LocalRun, chunk: Chunk, lim: LocalLimits) -> bool:
    """Add `chunk` to `run`; True when the stream is to end here."""
    run.text += chunk.text
    for t in chunk.tokens:
        run.logprobs.append(t.logprob)
        run.tokens.append(t.text)
    run.has_logprobs = run.has_logprobs and chunk.logprobs
    run.finish_reason = chunk.finish_reason or run.finish_reason
    if not lim.multiline and line_end(run.text) >= 0:
        # The line is complete and post_process keeps nothing after it:
        # closing the stream (finally) ends the generation.
        run.finish_reason = "stop"
        return True
    # Early escalation: no point waiting for the rest of a completion
    # we are going to throw away; the remote request starts now.
    if (
        lim.access == "ok"
        and lim.early_escalation
        and router.early_escalation(run.logprobs, lim.rules)
    ):
        run.cancelled_early = True
        return True
    return False


async def run_local(
    local: Backend | None,
    treq: TierRequest | None,
    lim: LocalLimits,
    quiet: Callable[[str], None] | None = None,
) -> LocalRun:
    """Stream `treq` from the local tier within `lim`; never raises a backend error.
    `quiet(text)`: called once the stream has been quiet for `QUIET_S` after a text
    chunk, with the text so far (once per gap; never after the stream ended)."""
    run = _LocalRun()
    if local is None or treq is None:
        return LocalRun(error=BackendError("no local backend configured", backend="local"))
    clock = lim.clock
    started = clock()
    first_end: float | None = None
    total_end: float | None = None
    if lim.access == "ok" and lim.rules.policy != "local":
        # The request may escalate: a slow or hung local tier must leave the remote
        # time to answer. Where it cannot escalate, the local tier has the deadline.
        total_end = min(lim.deadline, started + lim.settings.total_ms / 1000)
        first_end = min(total_end, started + lim.settings.first_token_ms / 1000)
    max_predict_s = treq.budget.max_predict_s if treq.budget is not None else None
    stream = local.stream(treq.request)
    predict_end: float | None = None  # the prediction's time cap, once the first token came
    ended = False  # as asked (its last chunk, or the line it was cut at): closed after the response
    at: float | None = None  # the deadline the timer is set to (on `clock`)
    loop = asyncio.get_running_loop()
    heard = 0.0  # time.monotonic() of the latest text chunk
    waiting = False  # the quiet timer is set (one at a time)
    over = False  # the stream ended: a quiet timer still set does nothing

    def still() -> None:
        nonlocal waiting
        if over:
            return
        left = heard + QUIET_S - time.monotonic()
        if left > 0.0002:  # a chunk came meanwhile: wait for the quiet after it
            loop.call_later(left, still)
        else:
            waiting = False
            if quiet is not None:
                quiet(run.text)

    try:
        # One timer for the whole stream, moved when the deadline changes (a timer per
        # chunk cost a timer handle scheduled and cancelled per token).
        async with asyncio.timeout(None) as timer:
            while True:
                end = first_end if run.first_token_s is None else _earliest(total_end, predict_end)
                if end != at:
                    at = end
                    timer.reschedule(None if end is None else loop.time() + end - clock())
                try:
                    chunk = await anext(stream)
                except StopAsyncIteration:
                    break
                if chunk.text and run.first_token_s is None:
                    run.first_token_s = clock() - started
                    if lim.multiline and max_predict_s is not None:
                        # A little slack: a backend that honours the cap ends first.
                        predict_end = clock() + max_predict_s + PREDICT_SLACK_S
                if _take(run, chunk, lim):
                    ended = not run.cancelled_early  # escalating: the local tier stops now
                    break
                if chunk.finish_reason is not None:
                    ended = True  # asking for more would wait for the end of the HTTP body
                    break
                if quiet is not None and chunk.text:
                    heard = time.monotonic()
                    if not waiting:
                        waiting = True
                        loop.call_later(QUIET_S, still)
    except TimeoutError:
        if predict_end is not None and at == predict_end != total_end:
            # The time cap (a backend that does not end there by itself):
            # what came is the completion, cut like a token cap cuts it.
            run.finish_reason = "length"
        else:
            _timed_out(run, lim.settings, local.name)
    except BackendError as exc:
        run.error = exc
        log.info("local backend failed: %s", exc)
    finally:
        over = True  # (not cancelled: the user waits for what runs here)
        run.total_s = clock() - started
        if ended:  # (closing costs a few hundred µs)
            close_after_response(stream)
        else:
            await stream.aclose()
    return run.frozen()


async def prefill(
    fill: Callable[[CompletionRequest], Awaitable[dict[str, object]]],
    ctx: CompletionContext,
    env: Planning,
) -> dict[str, object]:
    """Evaluate the prompt the next local request at `ctx` would send (planned as it
    will be), then, still at low priority while the cursor rests, larger windows into
    the spare cache: the next request takes the largest one that is warm (`kv_window`)."""
    planned = plan_local(ctx, env, deadline=None)
    budget, single_line = planned.budget, planned.request.single_line
    assert budget is not None
    stats = await fill(planned.request)
    while stats.get("outcome") == "done" and (grow := kv_window.grow_size(budget, kv_cap(env))):
        budget = attrs.evolve(budget, prompt_chars=grow)
        grown = plan_tier(ctx, "local", budget, env, deadline=None, single_line=single_line)
        stats = await fill(grown.request)
    return stats


__all__ = ["PREDICT_SLACK_S", "QUIET_S", "LocalLimits", "prefill", "run_local"]
