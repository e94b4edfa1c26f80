"""The frame parser against random streams (Hypothesis): good frames mixed with every kind
of bad one the transport resynchronises after, cut into random chunks. No good frame may
be lost, and the chunking must not change what comes out."""

from __future__ import annotations

import itertools
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synconfroute.server.protocol.transport import Body, FrameParser


def _frame(body: bytes, length: int) -> bytes:
    return f"Content-Length: {length}\r\n\r\n".encode() + body


def _good(i: int) -> bytes:
    pos = {"line": i % 7, "character": i % 3}
    msg = {"jsonrpc": "2.0", "id": i, "method": "textDocument/hover", "params": {"position": pos}}
    return json.dumps(msg).encode()


def _clean(data: bytes) -> bool:
    low = data.lower()
    return b"content" not in low and b"length" not in low


noise = st.binary(max_size=80).filter(_clean)
json_body = st.builds(
    lambda n: json.dumps({"a": "x" * n, "b": [1, 2]}).encode(), st.integers(0, 40)
)
open_body = st.sampled_from([b'{"a":', b"", b"xyz", b'{"a": [1, 2', b"{", b'{"k": "v"'])

bad = st.one_of(
    noise.map(lambda g: ("noise", g)),  # bytes between frames
    st.tuples(json_body, st.integers(1, 30)).map(  # length too small
        lambda t: ("small", _frame(t[0], max(0, len(t[0]) - t[1])))
    ),
    st.tuples(st.one_of(json_body, open_body), st.integers(1, 300)).map(  # too large
        lambda t: ("large", _frame(t[0], len(t[0]) + t[1]))
    ),
    noise.map(lambda g: ("not json", _frame(g, len(g)))),  # right length, not JSON
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[bytes], bytes, list[int]]:
    parts: list[bytes] = []
    goods: list[bytes] = []
    for i in range(draw(st.integers(1, 8))):
        for _kind, chunk in draw(st.lists(bad, max_size=3)):
            parts.append(chunk)
        g = _good(i)
        goods.append(g)
        parts.append(_frame(g, len(g)))
    stream = b"".join(parts)
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    return goods, stream, cuts


def _bodies(chunks: list[bytes]) -> list[bytes]:
    p = FrameParser()
    return [e.body for c in chunks for e in p.feed(c) if isinstance(e, Body)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams())
def test_no_good_frame_is_lost_however_the_stream_is_cut(
    case: tuple[list[bytes], bytes, list[int]],
) -> None:
    goods, stream, cuts = case
    whole = _bodies([stream])
    found = iter(whole)
    lost = [g for g in goods if not any(b == g for b in found)]  # in order
    assert not lost, (lost, stream)
    edges = [0, *cuts, len(stream)]
    chunks = [stream[a:b] for a, b in itertools.pairwise(edges)]
    assert _bodies(chunks) == whole
