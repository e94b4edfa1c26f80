"""Helpers shared by the backends: deadlines, client-side stop strings, collecting."""

from __future__ import annotations

import asyncio
import functools
import re
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from contextlib import aclosing
from typing import TypeVar

import attrs

from .errors import BackendError, BackendTimeout
from .types import Chunk, Completion, CompletionRequest, TokenLogprob, line_end

T = TypeVar("T")


async def within(
    deadline: float | None,
    start: Callable[[], Awaitable[T]],
    backend: str,
    *,
    before: str,
    late: str,
    hint: str = "",
) -> T:
    """`await start()`, but raise BackendTimeout (with `hint`) once `deadline` (monotonic)
    passes: the one deadline wrapper of every backend.

    A deadline already past raises "the deadline passed before {before}" without calling
    `start` (so nothing is sent); one that passes while waiting raises `late`.
    """
    if deadline is None:
        return await start()
    left = deadline - time.monotonic()
    if left <= 0:
        raise BackendTimeout(f"the deadline passed before {before}", backend=backend, hint=hint)
    try:
        async with asyncio.timeout(left):
            return await start()
    except TimeoutError as exc:
        raise BackendTimeout(f"{late} ({left:.2f}s left)", backend=backend, hint=hint) from exc


async def next_before(
    source: AsyncIterator[T] | asyncio.Queue[T],
    deadline: float | None,
    backend: str,
    *,
    hint: str = "",
) -> T:
    """The next item of a stream (`anext`) or a queue (`get`) within `deadline`."""
    return await within(
        deadline,
        source.get if isinstance(source, asyncio.Queue) else lambda: anext(source),
        backend,
        before="the next token",
        late="no token within the deadline",
        hint=hint,
    )


@functools.lru_cache(maxsize=64)  # a few stop lists per server: one per template
def _stop_search(
    stops: tuple[str, ...],
) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None, frozenset[str], int]:
    """For `StopCutter`, one scan of C code per piece, not a slice and `endswith` per stop
    and length (nine sentinels of up to 14 characters: ~100 per token otherwise): any
    stop string; the first character of one; every proper start of one; the longest."""
    if not stops:
        return None, None, frozenset(), 0
    firsts = "".join(sorted({s[0] for s in stops if len(s) > 1}))
    return (
        re.compile("|".join(map(re.escape, stops))),
        re.compile(f"[{re.escape(firsts)}]") if firsts else None,
        frozenset(s[:k] for s in stops for k in range(1, len(s))),
        max(map(len, stops)),
    )


class StopCutter:
    """Cuts a streamed text at the first stop string, across chunk boundaries.

    Servers match stop strings themselves, but not always (vLLM never fires on a
    special token decoded away; a token may span the stop string), so we cut
    again on our side. Text that might be the start of a stop string is held
    back until the next piece decides it.
    """

    def __init__(self, stops: Iterable[str]) -> None:
        self._stops = tuple(dict.fromkeys(s for s in stops if s))
        self._any, self._first, self._starts, self._longest = _stop_search(self._stops)
        self._held = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        """Text that is safe to emit now; sets `stopped` once a stop string appears."""
        if self.stopped:
            return ""
        buf = self._held + text
        m = self._any.search(buf) if self._any is not None else None
        if m is not None:  # the earliest stop string
            self.stopped = True
            self._held = ""
            return buf[: m.start()]
        keep = self._partial_tail(buf)
        self._held = buf[len(buf) - keep :]
        return buf[: len(buf) - keep]

    def _partial_tail(self, buf: str) -> int:
        """The length of the longest end of `buf` that starts a stop string (held back
        until the next piece decides it)."""
        if self._first is None:
            return 0
        m = self._first.search(buf, max(0, len(buf) - self._longest + 1))
        while m is not None:  # each place a stop string's first character stands
            if buf[m.start() :] in self._starts:
                return len(buf) - m.start()
            m = self._first.search(buf, m.start() + 1)
        return 0

    def flush(self) -> str:
        """The held-back text, once the stream has ended without a stop string."""
        out, self._held = ("" if self.stopped else self._held), ""
        return out


class TokenStops:
    """Cuts streamed text at the first stop string (a `StopCutter`) and hands out, with
    each piece of text, the tokens that produced it: the one rule of every backend.

    A token goes out once all of its text is out (a token with empty text, once the
    text before it is). Where the text ends (a stop string, or the end of the stream)
    inside a token, the token keeps its log-prob and the part of its text before that
    point; tokens whose text never goes out (cut by a stop string, or held back by the
    server and never sent) are dropped. So the tokens always spell the text handed out,
    and the confidence reads only tokens of the answer.

    A server may send a token ahead of its text (llama.cpp holds back a possible stop
    string) or its text behind its tokens (vLLM holds back len(stop) - 1 characters): a
    token is placed where its predecessors' texts end, but never beyond the end of the
    text received with it.
    """

    def __init__(self, stops: Iterable[str]) -> None:
        self._cutter = StopCutter(stops)
        self._queued: deque[tuple[int, TokenLogprob]] = deque()  # (start offset, token)
        self._received = 0  # characters of text received
        self._placed = 0  # where the last queued token's text ends
        self._emitted = 0  # characters of text handed out

    @property
    def stopped(self) -> bool:
        return self._cutter.stopped

    def feed(
        self, text: str, tokens: Iterable[TokenLogprob] = ()
    ) -> tuple[str, tuple[TokenLogprob, ...]]:
        """The text safe to emit now and its tokens; `stopped` once a stop string appears."""
        if self.stopped:
            return "", ()
        end = self._received + len(text)
        for tok in tokens:
            start = min(self._placed, end)
            self._queued.append((start, tok))
            self._placed = start + len(tok.text)
        self._received = end
        out = self._cutter.feed(text)
        return out, self._release(len(out), ended=self.stopped)

    def flush(self) -> tuple[str, tuple[TokenLogprob, ...]]:
        """The held-back text and its tokens, once the stream has ended."""
        out = self._cutter.flush()
        return out, self._release(len(out), ended=True)

    def _release(self, more: int, *, ended: bool) -> tuple[TokenLogprob, ...]:
        self._emitted += more
        ready: list[TokenLogprob] = []
        while self._queued:
            start, tok = self._queued[0]
            if start + len(tok.text) <= self._emitted:
                ready.append(tok)
            elif ended and start < self._emitted:  # the text ends inside this token
                ready.append(TokenLogprob(tok.text[: self._emitted - start], tok.logprob))
            else:
                break
            self._queued.popleft()
        if ended:
            self._queued.clear()
        return tuple(ready)


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


@attrs.define
class Sent:
    """Request body bytes that left the process, summed over attempts (retries, other
    URLs): what a completion reports as sent, a failed one too."""

    n: int = 0


async def complete_streamed(
    generate: Callable[[CompletionRequest, Sent], AsyncGenerator[Chunk, None]],
    request: CompletionRequest,
    *,
    backend: str,
    model: str,
) -> Completion:
    """The one `Backend.complete`: drain `generate(request, sent)` into a Completion that
    carries the bytes sent; a failure carries them too (`BackendError.bytes_sent`)."""
    started = time.monotonic()
    sent = Sent()
    try:
        async with aclosing(generate(request, sent)) as chunks:
            done = await collect(
                chunks,
                backend=backend,
                model=model,
                started=started,
                single_line=request.single_line,
            )
    except BackendError as exc:
        exc.bytes_sent = max(exc.bytes_sent, sent.n)
        raise
    return attrs.evolve(done, bytes_sent=sent.n)
