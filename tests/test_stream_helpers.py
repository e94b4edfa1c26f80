"""Client-side stop strings, deadlines and collecting a stream."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from clients._stream import StopCutter, collect, next_before, trim_tokens
from clients.errors import BackendTimeout
from clients.types import Chunk, TokenLogprob


def cut_all(stops: list[str], pieces: list[str]) -> tuple[str, bool]:
    c = StopCutter(stops)
    out = "".join(c.feed(p) for p in pieces)
    return out + c.flush(), c.stopped


def test_stop_inside_one_piece() -> None:
    assert cut_all(["<|endoftext|>"], ["abc<|endoftext|>def"]) == ("abc", True)


def test_stop_split_across_pieces() -> None:
    assert cut_all(["<|endoftext|>"], ["ab", "c<|endo", "ftext|>", "zzz"]) == ("abc", True)


def test_held_back_prefix_released_when_not_a_stop() -> None:
    c = StopCutter(["\n\n"])
    assert c.feed("x = 1\n") == "x = 1"  # "\n" might start "\n\n": held back
    assert c.feed("y") == "\ny"
    assert c.flush() == ""
    assert not c.stopped


def test_earliest_stop_wins_and_no_stops_passes_through() -> None:
    assert cut_all(["B", "A"], ["xxAyyB"]) == ("xx", True)
    assert cut_all([], ["a", "b"]) == ("ab", False)
    assert cut_all([""], ["a"]) == ("a", False)


def test_flush_returns_partial_stop_at_end() -> None:
    assert cut_all(["<EOT>"], ["x<EO"]) == ("x<EO", False)


def test_trim_tokens_keeps_tokens_covering_text() -> None:
    toks = (TokenLogprob("ab", -0.1), TokenLogprob("cd", -0.2), TokenLogprob("<x>", -0.3))
    assert trim_tokens(toks, "abc") == toks[:2]
    assert trim_tokens(toks, "") == ()


async def _slow(n: int, delay: float) -> AsyncIterator[int]:
    for i in range(n):
        await asyncio.sleep(delay)
        yield i


async def test_next_before_times_out() -> None:
    it = _slow(3, 0.5)
    with pytest.raises(BackendTimeout, match="deadline"):
        await next_before(it, time.monotonic() + 0.05, "test")


async def test_next_before_passes_and_rejects_past_deadline() -> None:
    it = _slow(3, 0.0)
    assert await next_before(it, None, "t") == 0
    assert await next_before(it, time.monotonic() + 5, "t") == 1
    with pytest.raises(BackendTimeout):
        await next_before(it, time.monotonic() - 1, "t")


async def test_collect_sums_chunks() -> None:
    async def chunks() -> AsyncIterator[Chunk]:
        yield Chunk(text="a", tokens=(TokenLogprob("a", -0.5),))
        yield Chunk(text="b", tokens=(), logprobs=False)
        yield Chunk(text="", finish_reason="stop")

    start = time.monotonic()
    c = await collect(chunks(), backend="x", model="m", started=start, bytes_sent=7)
    assert c.text == "ab" and c.finish_reason == "stop" and not c.logprobs
    assert c.tokens == (TokenLogprob("a", -0.5),) and c.bytes_sent == 7
    assert c.first_token_s is not None and 0 <= c.first_token_s <= c.total_s
