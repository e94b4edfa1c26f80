"""The completion cache's entry written after the response (`put(after_response=True)`): the
user does not wait for it, and nothing can tell it was late: a lookup before then finds
it, a clear drops it, and a request's entry is in once its response is written."""

from __future__ import annotations

import asyncio
import contextvars

from synconfroute.server.learning import later
from synconfroute.server.routing.cache import CompletionCache, digests

PRE, SUF = "def f(x):\n    return ", "\n"


async def test_a_request_entry_is_put_when_its_response_is_written() -> None:
    c = CompletionCache()
    pending: list[later.Later] = []

    def handle() -> None:  # as the transport handles a request: a Later, in its context
        pending.append(later.for_request())
        c.put("m", PRE, SUF, "x * 2", "local", ("confident-and-valid",), after_response=True)

    contextvars.copy_context().run(handle)
    assert c._entries.get(("m", *_digests())) is None, "put before the response"
    pending[0].run()  # the response is written
    assert c._entries.get(("m", *_digests())) is not None
    hit = c.get("m", PRE + "x", SUF)  # typing through it
    assert hit is not None and hit.completion == " * 2"


async def test_a_lookup_before_the_response_finds_the_entry() -> None:
    # Two completions in a row with no turn of the event loop between them (a test, an
    # evaluation): the second one must hit, as it did when the put was immediate.
    c = CompletionCache()
    c.put("m", PRE, SUF, "x * 2", "local", (), after_response=True)
    hit = c.get("m", PRE, SUF)
    assert hit is not None and hit.completion == "x * 2"
    await asyncio.sleep(0.01)  # the scheduled put finds nothing left to do
    assert len(c._entries) == 1


async def test_clear_drops_an_entry_not_yet_put() -> None:
    c = CompletionCache()
    c.put("m", PRE, SUF, "x * 2", "local", (), after_response=True)
    c.clear()
    await later.settle()
    await asyncio.sleep(0.01)
    assert c.get("m", PRE, SUF) is None and len(c._entries) == 0


def _digests() -> tuple[bytes, bytes]:
    return digests(PRE, SUF)
