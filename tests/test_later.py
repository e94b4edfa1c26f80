"""Work left for after the response (`learning.later`): after the request task's done
callback (where pygls writes the response), in order, never raising, and settled on
shutdown; the ledger's lines and a finished stream's close go that way."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest

from synconfroute.server.learning import later
from synconfroute.server.learning.ledger import Ledger


async def _handler_then_response(work: list[str]) -> None:
    """A request handler that leaves work for later and returns; its done callback
    stands for pygls writing the response."""

    async def handler() -> str:
        await asyncio.sleep(0)  # a handler that awaited something first
        later.after_response(lambda: work.append("deferred"))
        work.append("handler returns")
        return "result"

    task = asyncio.get_running_loop().create_task(handler())
    task.add_done_callback(lambda _: work.append("response written"))
    await task
    for _ in range(3):
        await asyncio.sleep(0)


async def test_deferred_work_runs_after_the_response_is_written() -> None:
    work: list[str] = []
    await _handler_then_response(work)
    assert work == ["handler returns", "response written", "deferred"]


async def test_call_soon_would_have_run_before_the_response() -> None:
    """Why `after_response` uses call_later: the obvious call_soon runs first."""
    work: list[str] = []

    async def handler() -> None:
        asyncio.get_running_loop().call_soon(lambda: work.append("deferred"))

    task = asyncio.get_running_loop().create_task(handler())
    task.add_done_callback(lambda _: work.append("response written"))
    await task
    await asyncio.sleep(0)
    assert work == ["deferred", "response written"]


def test_without_an_event_loop_it_runs_at_once() -> None:
    work: list[str] = []
    later.after_response(lambda: work.append("now"))
    assert work == ["now"]


async def test_failing_work_is_logged_and_the_rest_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    work: list[str] = []

    def broken() -> None:
        raise ValueError("boom")

    later.after_response(broken)
    later.after_response(lambda: work.append("next"))
    with caplog.at_level(logging.ERROR):
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    assert work == ["next"]
    assert "deferred work failed" in caplog.text


async def test_settle_runs_what_waits_in_order_and_closes_streams() -> None:
    work: list[str] = []
    closed = asyncio.Event()

    async def stream() -> AsyncGenerator[str, None]:
        try:
            yield "last chunk"
            yield "never asked for"
        finally:
            closed.set()

    gen = stream()
    assert await anext(gen) == "last chunk"
    later.after_response(lambda: work.append("a"))
    later.close_after_response(gen)
    later.after_response(lambda: work.append("b"))
    assert work == [] and not closed.is_set()
    await later.settle()
    assert work == ["a", "b"] and closed.is_set()


async def test_ledger_lines_wait_for_the_response_then_go_in_order(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    led = Ledger(path)
    led.event("shown", "c1")
    led.event("accepted", "c1")
    assert not path.exists()  # the response goes first
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [next(k for k in ("shown", "accepted") if k in e) for e in lines] == [
        "shown",
        "accepted",
    ]
    led.event("dismissed", "c2")
    led.flush()  # a reader in the same process (the adaptive threshold's resume)
    assert "dismissed" in path.read_text(encoding="utf-8")


async def test_a_requests_work_waits_for_its_response_across_turns_and_tasks() -> None:
    """As the transport does: a `Later` per request, set in the request's context (the
    pipeline's inner task inherits it), run when the response is written."""
    work: list[str] = []
    loop = asyncio.get_running_loop()

    async def inner() -> None:  # the pipeline, in a task of its own
        later.after_response(lambda: work.append("stream closed"))
        await asyncio.sleep(0)

    async def handler() -> str:
        await loop.create_task(inner())
        await asyncio.sleep(0)  # more turns of the loop: the work still waits
        later.after_response(lambda: work.append("ledger written"))
        return "result"

    def respond(task: asyncio.Task[str]) -> None:
        work.append("response written")
        request.run()

    ctx = contextvars.copy_context()
    request = ctx.run(later.for_request)
    task = loop.create_task(handler(), context=ctx)
    task.add_done_callback(respond)
    await task
    await asyncio.sleep(0)
    assert work == ["response written", "stream closed", "ledger written"]
    later.after_response(lambda: work.append("after"))  # once run: the next turn, as usual
    assert work[-1] == "ledger written"


async def test_a_request_that_never_answers_runs_its_work_at_the_latest() -> None:
    work: list[str] = []
    ctx = contextvars.copy_context()
    ctx.run(later.for_request)
    ctx.run(later.after_response, lambda: work.append("ran"))
    assert work == []  # waiting for a response that does not come
    await asyncio.sleep(later.LATEST_S * 2)
    assert work == ["ran"]
