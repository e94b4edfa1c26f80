"""Helpers shared by the backends: deadlines, client-side stop strings, collecting."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from typing import TypeVar

from .errors import BackendTimeout
from .types import Chunk, Completion, TokenLogprob

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


class TokenCap:
    """Counts streamed tokens against the request's max_tokens, on our side.

    A server that ignores `num_predict` / `max_tokens` would stream on past the
    deadline; the backend stops reading (and hangs up) once `reached`. A piece
    without log-probs counts as one token per non-empty piece.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.count = 0
        self.cut = False  # a piece was shortened (or dropped) to stay under the cap

    @property
    def reached(self) -> bool:
        return self.count >= self.limit

    def take(
        self, text: str, tokens: tuple[TokenLogprob, ...]
    ) -> tuple[str, tuple[TokenLogprob, ...]]:
        """The part of a piece that fits under the cap (all of it, mostly)."""
        room = self.limit - self.count
        if room <= 0:
            self.cut = self.cut or bool(text or tokens)
            return "", ()
        if not tokens:
            self.count += 1 if text else 0
            return text, tokens
        if len(tokens) <= room:
            self.count += len(tokens)
            return text, tokens
        kept = tokens[:room]
        self.count = self.limit
        self.cut = True
        if "".join(t.text for t in tokens) == text:  # cut the text with the tokens
            text = "".join(t.text for t in kept)
        return text, kept


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
) -> Completion:
    """Drain a chunk stream into one Completion (times relative to `started`)."""
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
