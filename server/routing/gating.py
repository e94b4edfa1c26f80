"""The gate step: a tier's text judged by the syntax gate, trimmed where a length cut
left a block open. The checks run in the gate's thread when they block (compilers)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import attrs

from synconfroute.clients.types import Completion

from ..vocab.record import Truncation
from ..vocab.verdict import Verdict
from .request import CompletionContext, Gate
from .router import LocalEvidence
from .steps import Gated, LocalStep
from .text_rules import gate_trimmed, post_process, shown_text, truncation

log = logging.getLogger(__name__)

# How long after the local request starts the gate prepares its check: by then the
# request must be on its way, or the preparation (a full parse: ~17 ms for a 3,800-line
# file) holds it up. At 2 ms it did, on click's core.py: the first chunk came ~16 ms
# later and the server added +30 ms; at 10 ms, +12.6 ms (bench.lsp_stages --file). A
# local tier that answers sooner leaves the whole check to the gate step. (A guess
# still: a signal from the backend once the request is written would be exact.)
PREPARE_DELAY_S = 0.010


@attrs.frozen
class Gating:
    """A request's gate, deadline and clock (the gate None: no gate for the language)."""

    gate: Gate | None
    deadline: float
    clock: Callable[[], float]


def _prepare(gate: Gate, ctx: CompletionContext) -> None:
    try:
        gate.prepare(ctx)
    except Exception:  # a head start only: the check does the work (and reports) itself
        log.exception("preparing the syntax check failed; the check will do it all")


def prepare_ahead(
    gate: Gate | None, ctx: CompletionContext, delay_s: float = PREPARE_DELAY_S
) -> asyncio.TimerHandle | None:
    """Have the gate prepare the check at `ctx`'s cursor `delay_s` from now, while the
    local tier generates (the server is idle then); the caller cancels the handle once
    the local answer is in. None when there is nothing to prepare (no gate, or one whose
    checks run in a thread)."""
    if gate is None or gate.blocking:
        return None
    return asyncio.get_running_loop().call_later(delay_s, _prepare, gate, ctx)


async def check(gate: Gate, ctx: CompletionContext, text: str) -> Verdict:
    if gate.blocking:
        return await asyncio.to_thread(gate.check, ctx, text)
    return gate.check(ctx, text)


async def trimmed(
    g: Gating, ctx: CompletionContext, text: str, *, skip: int = 0, cut_in: str | None = None
) -> tuple[str, Verdict | None] | None:
    """`gate_trimmed` with this request's gate and deadline (in the gate's thread
    when its checks block)."""
    gate = g.gate
    assert gate is not None

    def trim() -> tuple[str, Verdict | None] | None:
        return gate_trimmed(
            text,
            lambda run: gate.check(ctx, run),
            ctx.suffix,
            skip=skip,
            out_of_time=lambda: g.clock() >= g.deadline,
            cut_in=cut_in,
        )

    return await asyncio.to_thread(trim) if gate.blocking else trim()


async def gate_local(
    g: Gating, ctx: CompletionContext, local: LocalStep, ev: LocalEvidence, multiline: bool
) -> Gated:
    """Gate the local text; a multi-line text the token budget cut that the gate
    rejects is trimmed to the longest run of whole lines it accepts, if any (else, or
    once the deadline passed, it stays as it is, rejected, and escalates as
    syntax-invalid)."""
    text = local.text
    if g.gate is None:
        no_gate = attrs.evolve(ev, syntax="unsupported-language")
        return Gated(text, no_gate, None, None, local.truncated)
    t = g.clock()
    gate = g.gate
    # (on the loop, no coroutine of `check`'s: the user waits for this one)
    verdict = await check(gate, ctx, text) if gate.blocking else gate.check(ctx, text)
    ms = (g.clock() - t) * 1000
    ev = attrs.evolve(ev, syntax=verdict.status, undefined=verdict.undefined)
    if verdict.status != "invalid" or not multiline or local.truncated is None:
        return Gated(text, ev, verdict, ms, local.truncated)
    t = g.clock()
    found = await trimmed(g, ctx, text, skip=1)
    ms += (g.clock() - t) * 1000
    run, info = found if found is not None else (text, None)
    if info is None:  # every run rejected, or out of time
        return Gated(text, ev, verdict, ms, local.truncated)
    more = truncation(text, run)
    cut = Truncation(
        chars=local.truncated.chars + more.chars, lines=local.truncated.lines + more.lines
    )
    kept = attrs.evolve(ev, text=run, syntax=info.status, undefined=info.undefined)
    return Gated(run, kept, info, ms, cut)


async def remote_text(
    g: Gating, ctx: CompletionContext, result: Completion, multiline: bool
) -> tuple[str, Truncation | None, float | None]:
    """The remote's text as shown, what a length cut dropped, and the gate's time
    (None: not run)."""
    text, cut = shown_text(result.text, result.finish_reason, ctx.suffix, multiline=multiline)
    if result.finish_reason != "length" or not multiline or g.gate is None or not text:
        return text, cut, None
    # Whole lines may still leave a block open: keep those the gate accepts (none
    # accepted: nothing from the remote is shown, rather than broken code).
    t = g.clock()
    found = await trimmed(g, ctx, text, cut_in=ctx.language)
    kept = found[0] if found is not None else ""
    gate_ms = (g.clock() - t) * 1000
    if kept != text:
        cut = truncation(post_process(result.text, ctx.suffix, multiline=multiline), kept)
        cut = attrs.evolve(cut, kept="gate" if kept else "nothing")
    return kept, cut, gate_ms


__all__ = [
    "PREPARE_DELAY_S",
    "Gating",
    "check",
    "gate_local",
    "prepare_ahead",
    "remote_text",
    "trimmed",
]
