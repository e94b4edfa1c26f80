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
from .gate import SyntaxGate
from .request import CompletionContext, Gate
from .router import LocalEvidence
from .steps import Ahead, Gated, LocalStep
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


# The CPU the checks ahead may take, as a share of the stream's time so far (the first
# check excepted): a local model on a 2-core laptop needs those cores to generate. A
# check is ~0.2 ms on a short file, 0.6-16 ms (tree-sitter's incremental reparse) on a
# 3,800-line one, against 10-50 ms per token on a CPU: on a short file every quiet gap
# gets its check, on a long one every few.
AHEAD_SHARE = 0.05


class AheadCheck:
    """The gate's check of the local text while the stream is quiet, in case that text
    is the final one: a local model sends its end one decode step (10-50 ms on a CPU)
    after its last text, and the user waits for the check only after it. At most one
    check per quiet gap (`quiet`, called by `run_local`), none on a text already
    checked, and none while the checks so far took more than `AHEAD_SHARE` of the
    stream's time. `found`: the last check's verdict, kept only when it is the one the
    gate step would reach on that text (a decision within the budget, on an open
    document, whose version the gate step compares)."""

    def __init__(
        self,
        gate: SyntaxGate,
        ctx: CompletionContext,
        shown: Callable[[str], str],
        clock: Callable[[], float],
    ) -> None:
        self._gate = gate
        self._ctx = ctx
        self._shown = shown
        self._clock = clock
        self._started = clock()
        self._spent = 0.0  # seconds the checks took
        self._tried = ""  # the text last checked
        self.checks = 0
        self.found: Ahead | None = None

    def quiet(self, raw: str) -> None:
        """The stream has been quiet since it sent `raw` (the raw text so far)."""
        text = self._shown(raw)
        if not text or text == self._tried:
            return
        t = self._clock()
        if self.checks and self._spent > AHEAD_SHARE * (t - self._started):
            return
        self._tried = text
        gate, ctx = self._gate, self._ctx
        state = gate.state(ctx)
        try:
            verdict = gate.check(ctx, text)
        except Exception:  # ahead only: the gate step checks (and reports) itself
            log.exception("checking the local text ahead failed; the gate step will")
            self.found = None
            return
        finally:
            self.checks += 1
            self._spent += self._clock() - t
        keep = state is not None and gate.timeless(verdict)
        self.found = Ahead(text, state, verdict) if keep else None


def check_ahead(
    gate: Gate | None, ctx: CompletionContext, multiline: bool, clock: Callable[[], float]
) -> AheadCheck | None:
    """An `AheadCheck` of the local text as `shown_text` shows it at the stream's end,
    for the syntax gate on an open document when its checks run on the loop (None:
    none)."""
    if not isinstance(gate, SyntaxGate) or gate.blocking or gate.state(ctx) is None:
        return None
    suffix = ctx.suffix

    def shown(raw: str) -> str:
        return shown_text(raw, "stop", suffix, multiline=multiline)[0]

    return AheadCheck(gate, ctx, shown, clock)


def _checked_ahead(gate: Gate, ctx: CompletionContext, local: LocalStep) -> Verdict | None:
    """The verdict checked ahead on the local text, if it holds now: the same text, the
    document's text unchanged since."""
    ahead = local.ahead
    if ahead is None or ahead.text != local.text or not isinstance(gate, SyntaxGate):
        return None
    return ahead.verdict if ahead.state == gate.state(ctx) else None


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
    verdict = _checked_ahead(gate, ctx, local)
    if verdict is None:
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
    "AHEAD_SHARE",
    "PREPARE_DELAY_S",
    "AheadCheck",
    "Gating",
    "check",
    "check_ahead",
    "gate_local",
    "prepare_ahead",
    "remote_text",
    "trimmed",
]
