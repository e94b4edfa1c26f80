"""The embedded worker's protocol pipe under garbage (issue 20, item 1).

Real SmolLM2 in the real worker process; the garbage is written into the worker's real
protocol pipe (its write end, opened through /proc), as anything sharing that pipe could.
Every malformed message is counted and skipped; a flood of them restarts the worker; the
reader thread never dies silently; a worker killed for ignoring a cancel is replaced
even while someone else holds its pipe open.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from synconfroute.clients import embedded
from synconfroute.clients.embedded import EmbeddedBackend, bundled_model_path
from synconfroute.clients.errors import BackendUnavailable
from synconfroute.clients.types import CompletionRequest

pytestmark = [pytest.mark.embedded, pytest.mark.timeout(240)]

if importlib.util.find_spec("llama_cpp") is None or bundled_model_path() is None:
    pytest.skip("extra 'embedded' not installed", allow_module_level=True)

ADD = "def add(a, b):\n    return"
LONG = "numbers = [\n    1,\n    2,\n    3,\n"
GARBAGE = [
    b"[1]\n",
    b"null\n",
    b'"text"\n',
    b"42\n",
    b'{"id": "1", "text": "x"}\n',
    b'{"id": true, "done": {}}\n',
    b'{"id": 1}\n',
    b'{"id": 1, "chunk": 5}\n',
    b'{"id": 1, "chunk": {"text": 1, "tokens": "x", "finish": 3}}\n',
    b'{"id": 1, "done": {"decode_s": "slow"}}\n',
    b'{"id": 1, "error": "boom"}\n',
    b"not json at all\n",
    b'{"id": 1, "chu',  # a partial line: completed by the next line into garbage
    b"\n",
]


@contextlib.contextmanager
def pipe_writer(b: EmbeddedBackend) -> Iterator[int]:
    """A write end of the worker's protocol pipe (the same pipe, not a copy)."""
    worker = b._worker
    assert worker is not None and worker.proc.stdout is not None
    inode = os.fstat(worker.proc.stdout.fileno()).st_ino
    fds = Path(f"/proc/{worker.pid}/fd")
    found = [p for p in fds.iterdir() if os.readlink(p) == f"pipe:[{inode}]"]
    assert found, "the worker's protocol pipe was not found"
    fd = os.open(found[0], os.O_WRONLY)
    try:
        yield fd
    finally:
        os.close(fd)


async def _complete(b: EmbeddedBackend, within_s: float = 60.0) -> str:
    req = CompletionRequest(prefix=ADD, max_tokens=4)
    done = await asyncio.wait_for(b.complete(req), within_s)
    assert done.tokens
    return done.text


async def test_malformed_messages_are_counted_and_skipped() -> None:
    b = EmbeddedBackend()
    try:
        first = await _complete(b)
        pid = b.worker_pid
        with pipe_writer(b) as fd:
            for line in GARBAGE:
                os.write(fd, line)
        await asyncio.sleep(0.3)
        # The same worker answers as before, at once: the reader thread is alive.
        assert await _complete(b, within_s=10) == first
        assert b.worker_pid == pid and b.restarts == 0
        assert b.protocol_errors >= len(GARBAGE) - 2  # the partial line joins the next
    finally:
        await b.aclose()


async def test_a_flood_of_garbage_restarts_the_worker() -> None:
    b = EmbeddedBackend()
    try:
        first = await _complete(b)
        pid = b.worker_pid
        with pipe_writer(b) as fd:
            os.write(fd, b"[1]\n" * 500)
        for _ in range(100):
            if b.worker_pid != pid:
                break
            await asyncio.sleep(0.05)
        assert b.worker_pid != pid, "the worker that broke its protocol still runs"
        assert await _complete(b) == first
        assert b.restarts == 1 and b.worker_pid not in (None, pid)
    finally:
        await b.aclose()


async def test_a_reader_that_fails_means_a_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever goes wrong in the reader thread, the worker is replaced: the requests in
    flight fail at once instead of waiting for their deadline."""
    b = EmbeddedBackend()
    try:
        first = await _complete(b)
        pid = b.worker_pid

        def broken(self: object, event: object) -> bool:
            raise RuntimeError("a bug in the reader")

        monkeypatch.setattr(embedded._Call, "ends_with", broken)
        with pytest.raises(BackendUnavailable):
            await _complete(b, within_s=30)
        monkeypatch.undo()
        assert await _complete(b) == first
        assert b.worker_pid not in (None, pid)
    finally:
        await b.aclose()


async def test_a_stuck_worker_is_replaced_while_its_pipe_is_held_open() -> None:
    """The stop timeout kills a worker that ignores a cancel; the restart must not wait
    for the end of its pipe, which another process may keep open."""
    b = EmbeddedBackend(stop_timeout_s=1.0)
    try:
        await _complete(b)
        pid = b.worker_pid
        assert pid is not None
        with pipe_writer(b):
            stream = b.stream(CompletionRequest(prefix=LONG, max_tokens=400))
            await anext(stream)
            os.kill(pid, signal.SIGSTOP)  # a hung decode: it reads no cancel
            await stream.aclose()
            gen = b.last_generation
            assert gen is not None
            assert await asyncio.to_thread(gen.finished.wait, 15), "not killed"
            await _complete(b, within_s=60)
            assert b.worker_pid not in (None, pid)
    finally:
        await b.aclose()
