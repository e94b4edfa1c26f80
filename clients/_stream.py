"""Helpers shared by the backends: deadlines, client-side stop strings, collecting."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from typing import TypeVar

from .errors import BackendTimeout
from .types import Chunk, Completion, TokenLogprob, line_end

T = TypeVar("T")


async def next_before(
    it: AsyncIterator[T], deadline: float | None, backend: str, *, hint: str = ""
) -> T:
    """`anext(it)`, but raise BackendTimeout (with `hint`) once `deadline` (monotonic) passes."""
    if deadline is None:
        return await anext(it)
    left = deadline - time.monotonic()
    if left <= 0:
        raise BackendTimeout("deadline passed before the next token", backend=backend, hint=hint)
    try:
        async with asyncio.timeout(left):
            return await anext(it)
    except TimeoutError as exc:
        raise BackendTimeout(
            f"no token within the deadline ({left:.2f}s left)", backend=backend, hint=hint
        ) from exc


class StopCutter:
    """Cuts a streamed text at the first stop string, across chunk boundaries.

    Servers match stop strings themselves, but not always (vLLM never fires on a
    special token decoded away; a token may span the stop string), so we cut
    again on our side. Text that might be the start of a stop string is held
    back until the next piece decides it.
    """

    def __init__(self, stops: Iterable[str]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        """Text that is safe to emit now; sets `stopped` once a stop string appears."""
        if self.stopped:
            return ""
        buf = self._held + text
        cut = min((i for i in (buf.find(s) for s in self._stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            self._held = ""
            return buf[:cut]
        keep = 0
        for s in self._stops:
            for k in range(min(len(s) - 1, len(buf)), 0, -1):
                if buf.endswith(s[:k]):
                    keep = max(keep, k)
                    break
        self._held = buf[len(buf) - keep :]
        return buf[: len(buf) - keep]

    def flush(self) -> str:
        """The held-back text, once the stream has ended without a stop string."""
        out, self._held = ("" if self.stopped else self._held), ""
        return out


def trim_tokens(tokens: tuple[TokenLogprob, ...], text: str) -> tuple[TokenLogprob, ...]:
    """The leading tokens whose text makes up `text` (a stop cut may drop the tail)."""
    out: list[TokenLogprob] = []
    used = 0
    for tok in tokens:
        if used >= len(text):
            break
        out.append(tok)
        used += len(tok.text)
    return tuple(out)


async def collect(
    chunks: AsyncIterator[Chunk],
    *,
    backend: str,
    model: str,
    started: float,
    bytes_sent: int = 0,
    single_line: bool = False,
) -> Completion:
    """Drain a chunk stream into one Completion (times relative to `started`).

    `single_line`: stop at the end of the first line (`line_end`) with finish reason
    "stop"; the caller's `aclosing` then closes the stream, which ends the generation.
    """
    text: list[str] = []
    tokens: list[TokenLogprob] = []
    logprobs = True
    finish: str | None = None
    first: float | None = None
    async for chunk in chunks:
        if chunk.text and first is None:
            first = time.monotonic() - started
        text.append(chunk.text)
        tokens.extend(chunk.tokens)
        logprobs = logprobs and chunk.logprobs
        finish = chunk.finish_reason or finish
        if single_line and (end := line_end(joined := "".join(text))) >= 0:
            text, finish = [joined[:end]], "stop"
            tokens = list(trim_tokens(tuple(tokens), joined[: end + 1]))  # with the newline's
            break
    return Completion(
        text="".join(text),
        tokens=tuple(tokens),
        logprobs=logprobs,
        finish_reason=finish,
        backend=backend,
        model=model,
        first_token_s=first,
        total_s=time.monotonic() - started,
        bytes_sent=bytes_sent,
    )
