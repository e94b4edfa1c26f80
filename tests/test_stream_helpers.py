"""Client-side stop strings, deadlines and collecting a stream."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator

import pytest

from synconfroute.clients._stream import (
    StopCutter,
    TokenStops,
    collect,
    next_before,
    trim_tokens,
    within,
)
from synconfroute.clients.errors import BackendTimeout
from synconfroute.clients.types import Chunk, TokenLogprob


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


# -- TokenStops: the one stop-cut token alignment of every backend ----------------------


def stops_all(stops: list[str], pieces: list[tuple[str, list[str]]]) -> tuple[str, list[str], bool]:
    """Feed (text, token texts) pieces; the text and token texts handed out."""
    ts = TokenStops(stops)
    text, toks = "", []
    for piece, tok_texts in pieces:
        out, got = ts.feed(piece, [TokenLogprob(t, -0.1) for t in tok_texts])
        text += out
        toks += [t.text for t in got]
        if ts.stopped:
            break
    else:
        out, got = ts.flush()
        text += out
        toks += [t.text for t in got]
    return text, toks, ts.stopped


def test_token_cut_by_a_stop_keeps_its_head() -> None:
    # " +\n" is one token and "\n\n" the stop: the token keeps " +" and its log-prob.
    got = stops_all(["\n\n"], [("a", ["a"]), (" +\n", [" +\n"]), ("\nx", ["\nx"])])
    assert got == ("a +", ["a", " +"], True)


def test_token_ahead_of_its_text_goes_out_with_it() -> None:
    # llama.cpp's server sends the token of a held-back "\n" with empty text.
    got = stops_all(["\n\n"], [("x", ["x"]), ("", ["\n"]), ("\ny", ["y"])])
    assert got == ("x\ny", ["x", "\n", "y"], False)


def test_text_behind_its_tokens_keeps_them_aligned() -> None:
    # vLLM streams the text len(stop)-1 characters behind the tokens (it holds back what
    # may start a stop string) and reports the token holding the stop, whose text it cuts.
    pieces = [(" ", [" a"]), ("a ", [" +"]), ("+", [" b"])]
    assert stops_all([" b"], pieces) == (" a +", [" a", " +"], False)
    assert stops_all([], pieces) == (" a +", [" a", " +"], False)


def test_tokens_whose_text_never_comes_are_dropped() -> None:
    got = stops_all(["\n\n"], [("x", ["x"]), ("", ["\n"]), ("", ["\n"])])
    assert got == ("x", ["x"], False)


def test_empty_token_inside_the_text_is_kept() -> None:
    # A token of half a UTF-8 character decodes to "" (the next one carries it).
    got = stops_all([], [("", [""]), ("é", ["é"]), ("b", ["b"])])
    assert got == ("éb", ["", "é", "b"], False)


@pytest.mark.parametrize("seed", range(200))
def test_token_texts_always_spell_the_text(seed: int) -> None:
    """Random tokens, pieces and stop strings: the tokens handed out spell exactly the
    text handed out, which is the text before the first stop string."""
    rng = random.Random(seed)
    alphabet = "ab\n<|>"
    tokens = ["".join(rng.choices(alphabet, k=rng.randint(1, 4))) for _ in range(12)]
    stop = "".join(rng.choices(alphabet, k=rng.randint(1, 3)))
    pieces: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(tokens):
        n = rng.randint(1, 3)
        group = tokens[i : i + n]
        pieces.append(("".join(group), group))
        i += n
    full = "".join(tokens)
    cut = full.find(stop)
    text, toks, stopped = stops_all([stop], pieces)
    assert text == (full if cut < 0 else full[:cut])
    assert stopped == (cut >= 0)
    assert "".join(toks) == text


def _held_reference(buf: str, stops: list[str]) -> int:
    """The longest end of `buf` that is a proper start of a stop string, by brute force."""
    return max((k for s in stops for k in range(1, len(s)) if buf.endswith(s[:k])), default=0)


@pytest.mark.parametrize("seed", range(100))
def test_several_stops_hold_back_exactly_the_longest_possible_start(seed: int) -> None:
    """Several stop strings sharing first characters (as a template's sentinels do):
    after every piece, what went out is the text up to the earliest stop string, or all
    but the longest end that could still start one."""
    rng = random.Random(seed)
    alphabet = "ab<|>"
    stops = ["".join(rng.choices(alphabet, k=rng.randint(1, 5))) for _ in range(rng.randint(1, 5))]
    pieces = ["".join(rng.choices(alphabet, k=rng.randint(0, 4))) for _ in range(8)]
    c, out, seen = StopCutter(stops), "", ""
    for p in pieces:
        out += c.feed(p)
        seen += p
        cuts = [i for i in (seen.find(s) for s in stops) if i >= 0]
        if cuts:
            assert (out, c.stopped) == (seen[: min(cuts)], True), (stops, pieces)
            return
        assert out == seen[: len(seen) - _held_reference(seen, stops)], (stops, pieces)
    assert out + c.flush() == seen


# -- within: the one deadline wrapper --------------------------------------------------


async def test_within_a_past_deadline_starts_nothing() -> None:
    started: list[bool] = []

    async def send() -> int:
        started.append(True)
        return 1

    with pytest.raises(BackendTimeout, match="deadline passed before the request was sent"):
        await within(time.monotonic() - 1, send, "t", before="the request was sent", late="x")
    assert started == []
    assert await within(None, send, "t", before="-", late="-") == 1


async def test_within_raises_late_with_the_hint() -> None:
    with pytest.raises(BackendTimeout, match="no answer in time") as caught:
        await within(
            time.monotonic() + 0.05,
            lambda: asyncio.sleep(5),
            "t",
            before="-",
            late="no answer in time",
            hint="raise the budget",
        )
    assert caught.value.hint == "raise the budget"


async def test_next_before_reads_a_queue() -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    queue.put_nowait(7)
    assert await next_before(queue, time.monotonic() + 5, "t") == 7
    with pytest.raises(BackendTimeout, match="no token within the deadline"):
        await next_before(queue, time.monotonic() + 0.05, "t")
