"""The stdio transport wakes each side as few times as a completion needs.

`serve_stdio` itself (its event loop in a thread here), fed through a real pipe, writing to
a stdout that records each write: stdin is read in the event loop (no thread hands each
message over), and the route notification goes out in the same write as its response.
A third case covers a stdin that cannot be polled (a regular file).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from synconfroute.server.protocol.lsp import ROUTE_NOTIFICATION, create_server
from synconfroute.server.protocol.serve import serve_stdio
from synconfroute.server.settings import config
from tests.fakes import FakeOllama, TokenScript
from tests.lsp_harness import write_config

pytestmark = pytest.mark.timeout(120)

URI = "file:///nowhere/calc.py"
TEXT = "def add(a, b):\n    return \n"


class RecordingStdout:
    """A binary stdout that keeps each write apart (a flush is a no-op)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.lock = threading.Lock()

    def write(self, data: bytes) -> int:
        with self.lock:
            self.writes.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def messages(self) -> list[tuple[int, dict[str, Any]]]:
        """(index of the write that carried it, message) for every message written."""
        out = []
        with self.lock:
            writes = list(self.writes)
        for i, data in enumerate(writes):
            while data:
                head, _, rest = data.partition(b"\r\n\r\n")
                length = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0])
                out.append((i, json.loads(rest[:length])))
                data = rest[length:]
        return out


def frame(msg: dict[str, Any]) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def session_frames() -> list[bytes]:
    init: dict[str, Any] = {"processId": None, "rootUri": None, "capabilities": {}}
    doc = {"uri": URI, "languageId": "python", "version": 1, "text": TEXT}
    at = {"line": 1, "character": 11}
    return [
        frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}),
        frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}),
        frame(
            {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": doc}}
        ),
        frame(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "textDocument/inlineCompletion",
                "params": {
                    "textDocument": {"uri": URI},
                    "position": at,
                    "context": {"triggerKind": 1},
                },
            }
        ),
    ]


def wait_for(predicate: Any, what: str, seen: Any, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, f"no {what} in {timeout:.0f} s; seen: {seen()}"
        time.sleep(0.02)


@pytest.fixture
def serve(tmp_path: Path) -> Any:
    """Run `serve_stdio` over a stdin fd in a thread; yields a starter; ends it after."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    threads: list[threading.Thread] = []

    def start(stdin_fd: int, out: RecordingStdout, local_url: str) -> threading.Thread:
        cfg = write_config(tmp_path, local_url=local_url)
        server = create_server(config.load(cfg, environ={}), tmp_path / "ledger.jsonl")
        code: list[int] = []
        thread = threading.Thread(
            target=lambda: code.append(serve_stdio(server, stdin_fd, out)),  # type: ignore[arg-type]
            name="test-serve",
            daemon=True,
        )
        thread.start()
        threads.append(thread)
        return thread

    try:
        yield start
    finally:
        root.handlers[:] = handlers


def test_stdin_is_read_in_the_event_loop_and_the_route_follows_its_response(
    serve: Any,
) -> None:
    out = RecordingStdout()
    read_fd, write_fd = os.pipe()
    script = TokenScript.of(" a", " +", " b", logprob=-0.01)
    with FakeOllama(default=script) as fake:
        thread = serve(read_fd, out, fake.url)
        try:
            for data in session_frames():
                os.write(write_fd, data)

            def answered() -> bool:  # the response, and the route notification after it
                msgs = out.messages()
                return any(m.get("id") == 2 for _, m in msgs) and any(
                    m.get("method") == ROUTE_NOTIFICATION for _, m in msgs
                )

            wait_for(answered, "inlineCompletion response and its route", out.messages)
            names = [t.name for t in threading.enumerate()]
            # Before: a daemon thread read stdin and handed each chunk to the loop.
            assert "synconfroute-stdin" not in names, names
            msgs = out.messages()
            (route,) = [(i, m) for i, m in msgs if m.get("method") == ROUTE_NOTIFICATION]
            (response,) = [(i, m) for i, m in msgs if m.get("id") == 2]
            assert response[1]["result"]["items"], msgs
            # The response first, in its own write: the user does not wait for the route
            # (before: the notification was held back and went out with the response).
            assert route[0] > response[0], msgs
            os.write(write_fd, frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}))
            os.write(write_fd, frame({"jsonrpc": "2.0", "method": "exit"}))
            thread.join(30)
            assert not thread.is_alive()
        finally:
            os.close(write_fd)
            thread.join(30)
            os.close(read_fd)


def test_a_stdin_that_cannot_be_polled_is_read_by_a_thread(serve: Any, tmp_path: Path) -> None:
    """A regular file as stdin (`synconfroute serve < requests`): epoll refuses it, so a
    thread reads it; the request in it is answered and the end of the file ends the
    server (which cancels what is still running, as at any end of input)."""
    out = RecordingStdout()
    requests = tmp_path / "requests"
    requests.write_bytes(session_frames()[0])  # initialize: answered as it is read
    with FakeOllama() as fake, requests.open("rb") as f:
        thread = serve(f.fileno(), out, fake.url)
        thread.join(60)
        assert not thread.is_alive(), out.messages()
    (answer,) = [m for _, m in out.messages() if m.get("id") == 1]
    assert answer["result"]["capabilities"], answer
