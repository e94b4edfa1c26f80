"""How a coroutine handler is run: the feature called with the server directly (not
through pygls' wrapper coroutine), its outcome handed on from its own task, and the
task's done-callback (the answer for a task cancelled before it ran) taken off once
the request is answered.

The real server's protocol, in an event loop, with features of this test's own
registered on it, requests fed as frame bodies, responses caught as written.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from synconfroute.server.protocol import lsp
from synconfroute.server.protocol.frames import Body
from synconfroute.server.protocol.transport import TransportProtocol
from synconfroute.server.settings import config
from tests.captures import Capture


class RecordingTask(asyncio.Task[Any]):
    """A task that keeps the done-callbacks added to it and taken off it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.added: list[Any] = []
        self.removed: list[Any] = []

    def add_done_callback(self, fn: Any, *, context: Any = None) -> None:
        self.added.append(fn)
        super().add_done_callback(fn, context=context)

    def remove_done_callback(self, fn: Any) -> int:
        self.removed.append(fn)
        return super().remove_done_callback(fn)


def send(protocol: TransportProtocol, msg: dict[str, Any]) -> None:
    body = json.dumps({"jsonrpc": "2.0", **msg}).encode()
    protocol.receive(Body(body, len(body)))


async def until(predicate: Any, seen: Any) -> None:
    for _ in range(2000):  # the loop's turns, not a time: nothing here waits on the clock
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"not reached; seen: {seen()}")


@pytest.fixture
def served(tmp_path: Path) -> Any:
    server = lsp.create_server(config.load(tmp_path / "none.toml", environ={}), tmp_path / "l")
    protocol = server.protocol
    assert isinstance(protocol, TransportProtocol)
    capture = Capture()
    protocol.set_writer(capture)
    gate: dict[str, asyncio.Event] = {}
    seen: list[Any] = []

    @server.feature("test/wait")
    async def wait(ls: Any, params: Any) -> Any:
        seen.append(ls)
        await gate["open"].wait()
        return {"answered": params.n}

    @server.feature("test/fail")
    async def fail(ls: Any, params: Any) -> Any:
        await asyncio.sleep(0)
        raise RuntimeError("the handler failed")

    init = {"processId": None, "rootUri": None, "capabilities": {}}
    send(protocol, {"id": 0, "method": "initialize", "params": init})
    return server, protocol, capture, gate, seen


async def test_a_feature_runs_with_the_server_and_its_answered_task_keeps_no_callback(
    served: Any,
) -> None:
    server, protocol, capture, gate, seen = served
    loop = asyncio.get_running_loop()
    loop.set_task_factory(lambda loop, coro, **kw: RecordingTask(coro, loop=loop, **kw))
    try:
        gate["open"] = asyncio.Event()
        send(protocol, {"id": 7, "method": "test/wait", "params": {"n": 7}})
        task = protocol._request_futures[7]
        assert isinstance(task, RecordingTask)
        await until(lambda: seen, lambda: seen)
        # pygls' wrapper coroutine is not in the task's stack: the feature is called
        # with the server directly (before: wrap_with_server's `wrapped` awaited it).
        chain, coro = [], task.get_coro()
        while hasattr(coro, "cr_code"):  # the coroutines awaiting one another
            chain.append(coro.cr_code.co_name)
            coro = coro.cr_await
        assert chain[:2] == ["run", "wait"], chain
        assert seen == [server]
        gate["open"].set()
        await until(lambda: task.done(), capture.messages)
        answers = [m for m in capture.messages() if m.get("id") == 7]
        assert answers == [{"jsonrpc": "2.0", "id": 7, "result": {"answered": 7}}]
        # The done-callback (for a task that never ran) is off once it answered: no turn
        # of the loop after the response for it. (Before: it stayed, and ran.)
        assert task.added and task.removed == task.added, (task.added, task.removed)
    finally:
        loop.set_task_factory(None)


async def test_a_request_cancelled_before_its_task_ran_is_still_answered(served: Any) -> None:
    _, protocol, capture, gate, seen = served
    gate["open"] = asyncio.Event()
    send(protocol, {"id": 8, "method": "test/wait", "params": {"n": 8}})
    send(protocol, {"method": "$/cancelRequest", "params": {"id": 8}})  # same turn
    await until(lambda: any(m.get("id") == 8 for m in capture.messages()), capture.messages)
    (answer,) = [m for m in capture.messages() if m.get("id") == 8]
    assert answer["error"]["code"] == -32800, answer
    assert seen == []  # the handler never ran


async def test_a_running_request_cancelled_and_a_failing_one_are_answered(served: Any) -> None:
    _, protocol, capture, gate, seen = served
    gate["open"] = asyncio.Event()
    send(protocol, {"id": 9, "method": "test/wait", "params": {"n": 9}})
    await until(lambda: seen, lambda: seen)
    send(protocol, {"method": "$/cancelRequest", "params": {"id": 9}})
    send(protocol, {"id": 10, "method": "test/fail", "params": {}})

    def answers() -> dict[Any, Any]:
        return {m["id"]: m for m in capture.messages() if m.get("id") in (9, 10)}

    await until(lambda: len(answers()) == 2, capture.messages)
    assert answers()[9]["error"]["code"] == -32800
    failed = answers()[10]["error"]
    assert failed["code"] == -32603 and "Traceback" not in json.dumps(failed), failed
