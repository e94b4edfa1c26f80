"""The real `synconfroute serve` over raw stdio bytes: framing faults and lifecycle rules.

Each case hand-writes frames to the server's stdin and reads its stdout, with a
timeout on every wait, so a deaf or hung server fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from synconfroute.server.protocol.frames import MAX_BODY_BYTES, Body, FrameParser, Skipped

from .lsp_harness import ROOT, write_config

WAIT = 10.0  # seconds for one answer: generous on a loaded 2-core machine
FOLLOW_UPS = 5
NOT_OPEN = "file:///nowhere/never_opened.py"


def frame(
    payload: dict[str, Any] | bytes, *, length: int | None = None, name: str = "Content-Length"
) -> bytes:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    n = len(body) if length is None else length
    return f"{name}: {n}\r\n\r\n".encode() + body


def request(msg_id: int, method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def hover(msg_id: int) -> dict[str, Any]:
    """A cheap request the server always answers (null: the document is not open)."""
    pos = {"line": 0, "character": 0}
    return request(
        msg_id, "textDocument/hover", {"textDocument": {"uri": NOT_OPEN}, "position": pos}
    )


INITIALIZE = request(1, "initialize", {"processId": None, "rootUri": None, "capabilities": {}})


class RawServer:
    """`python -m synconfroute serve` with pipes; a thread splits stdout into messages."""

    def __init__(self, folder: Path) -> None:
        env = dict(os.environ)
        env.update({"SYNCONFROUTE_CONFIG": str(write_config(folder)), "PYTHONPATH": str(ROOT)})
        self.stderr_path = folder / "stderr.txt"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "synconfroute",
                "serve",
                "--ledger",
                str(folder / "ledger.jsonl"),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._pending: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        try:
            while True:
                length = None
                while True:
                    line = out.readline()
                    if not line:
                        return
                    if not line.strip():
                        break
                    name, _, value = line.decode("ascii").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                assert length is not None, "server sent a frame without Content-Length"
                self.messages.put(json.loads(out.read(length)))
        finally:
            self.messages.put(None)

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def next_response(self, timeout: float = WAIT) -> dict[str, Any]:
        """The next response (notifications from the server are skipped)."""
        while True:
            try:
                msg = self.messages.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no answer within {timeout} s\n{self.stderr()}") from None
            if msg is None:
                raise AssertionError(f"server closed stdout\n{self.stderr()}")
            if "method" not in msg:
                return msg

    def response(self, msg_id: int | None, timeout: float = WAIT) -> dict[str, Any]:
        """The response to msg_id (None: an error response with id null)."""
        for i, msg in enumerate(self._pending):
            if msg.get("id") == msg_id:
                return self._pending.pop(i)
        while True:
            msg = self.next_response(timeout)
            if msg.get("id") == msg_id:
                return msg
            self._pending.append(msg)

    def call(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.send(frame(payload))
        return self.response(payload["id"])

    def initialize(self) -> None:
        assert "result" in self.call(INITIALIZE)

    def assert_answers(self, first_id: int = 100) -> None:
        """FOLLOW_UPS valid requests, each sent after the previous one was answered."""
        for msg_id in range(first_id, first_id + FOLLOW_UPS):
            answer = self.call(hover(msg_id))
            assert "result" in answer, answer

    def wait_exit(self, timeout: float = WAIT) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"server still running {timeout} s after exit") from None

    def stderr(self) -> str:
        self._stderr.flush()
        return "stderr:\n" + self.stderr_path.read_text(errors="replace")[-4000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(WAIT)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        self._stderr.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RawServer]:
    srv = RawServer(tmp_path)
    try:
        yield srv
    finally:
        srv.close()


def assert_error(answer: dict[str, Any], code: int) -> None:
    assert "error" in answer, answer
    assert answer["error"]["code"] == code, answer


# --- framing faults: the server answers what it can and hears the next frames ---


def test_content_length_too_small_then_answers(server: RawServer) -> None:
    server.initialize()
    body = json.dumps(hover(50)).encode()
    server.send(frame(body, length=len(body) - 10))
    assert_error(server.response(None), -32700)  # the cut body is not JSON
    server.assert_answers()


def test_content_length_too_large_then_answers(server: RawServer) -> None:
    server.initialize()
    body = json.dumps(hover(50)).encode()
    # 4 KB more than sent: the server waits for the rest, and the next frame comes instead
    server.send(frame(body, length=len(body) + 4096))
    server.assert_answers()  # each sent only after the previous one was answered
    assert "result" in server.response(50)  # its body ended where the next header began


def test_content_length_too_large_by_little_then_answers(server: RawServer) -> None:
    """Fewer extra bytes than one header: the next frame completes the bad body at once."""
    server.initialize()
    body = json.dumps(hover(50)).encode()
    server.send(frame(body, length=len(body) + 3) + frame(hover(51)))
    assert "result" in server.response(50)
    assert "result" in server.response(51)
    server.assert_answers()


def test_header_names_are_case_insensitive(server: RawServer) -> None:
    server.initialize()
    server.send(frame(hover(50), name="content-length"))
    assert "result" in server.response(50)
    server.send(frame(hover(51), name="CONTENT-LENGTH"))
    assert "result" in server.response(51)
    body = json.dumps(hover(52)).encode()
    server.send(
        b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
        + f"Content-Length:{len(body)}\r\n\r\n".encode()
        + body
    )
    assert "result" in server.response(52)
    server.assert_answers()


def test_garbage_between_frames_is_skipped(server: RawServer) -> None:
    server.initialize()
    server.send(b"hello\r\nnot a header at all\r\n\r\n" + frame(hover(50)))
    assert "result" in server.response(50)
    server.send(b"X" * 100_000 + frame(hover(51)))  # a long line without a newline
    assert "result" in server.response(51)
    server.assert_answers()


def test_huge_content_length_is_refused_not_allocated(server: RawServer) -> None:
    server.initialize()
    server.send(b"Content-Length: 1000000000000\r\n\r\n" + json.dumps(hover(50)).encode())
    answer = server.response(None)
    assert_error(answer, -32600)
    assert "64 MB" in answer["error"]["message"]
    server.assert_answers()
    assert server.proc.poll() is None


def test_body_above_the_limit_is_skipped(server: RawServer) -> None:
    """A body over the limit is refused and its bytes skipped, however many arrive."""
    server.initialize()
    n = MAX_BODY_BYTES + 1
    server.send(f"Content-Length: {n}\r\n\r\n".encode())
    assert_error(server.response(None), -32600)
    chunk = b'{"jsonrpc": "2.0", "id": 50, "method": "x", "params": {"text": "' + b"a" * (1 << 20)
    for _ in range(n // len(chunk) + 1):
        server.send(chunk)
    server.assert_answers()


# --- malformed messages get the JSON-RPC error the spec names, with id null ---


def test_malformed_json_gets_parse_error(server: RawServer) -> None:
    server.initialize()
    server.send(frame(b'{"jsonrpc": "2.0", "id": 50, "method": '))
    answer = server.response(None)
    assert_error(answer, -32700)
    assert answer["id"] is None
    server.send(frame(b'{"jsonrpc": "2.0", "id": 51, "method": "\xff\xfe"}'))  # not UTF-8
    assert_error(server.response(None), -32700)
    server.send(frame(b"[" * 100_000))  # nesting deep enough to exhaust the recursion limit
    assert_error(server.response(None), -32700)
    server.assert_answers()


def test_not_a_request_object_gets_invalid_request(server: RawServer) -> None:
    server.initialize()
    server.send(frame(b"42"))
    assert_error(server.response(None), -32600)
    server.send(frame({"id": 51, "method": "textDocument/hover"}))  # no "jsonrpc"
    assert_error(server.response(51), -32600)
    server.assert_answers()


# --- lifecycle: initialize, shutdown, exit as the LSP specification says ---


def test_request_before_initialize_gets_server_not_initialized(server: RawServer) -> None:
    assert_error(server.call(hover(2)), -32002)
    # a notification before initialize is dropped, not crashed on
    open_params = {
        "textDocument": {"uri": NOT_OPEN, "languageId": "python", "version": 1, "text": ""}
    }
    server.send(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": open_params}))
    server.initialize()
    server.assert_answers()


def test_request_after_shutdown_gets_invalid_request_then_exit_0(server: RawServer) -> None:
    server.initialize()
    assert server.call(request(2, "shutdown")).get("result", "missing") is None
    assert_error(server.call(hover(3)), -32600)
    server.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    assert server.wait_exit() == 0


def test_exit_without_shutdown_exits_1(server: RawServer) -> None:
    server.initialize()
    server.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    assert server.wait_exit() == 1


def test_exit_before_initialize_exits_1(server: RawServer) -> None:
    server.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    assert server.wait_exit() == 1


def test_end_of_input_ends_the_server(server: RawServer) -> None:
    server.initialize()
    assert server.proc.stdin is not None
    server.proc.stdin.close()
    server.wait_exit()


def test_tcp_mode_has_the_same_transport(tmp_path: Path) -> None:
    """`serve --tcp` (debugging) reads with the same parser and keeps the lifecycle rules."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ)
    env.update({"SYNCONFROUTE_CONFIG": str(write_config(tmp_path)), "PYTHONPATH": str(ROOT)})
    command = [sys.executable, "-m", "synconfroute", "serve", "--tcp", f"127.0.0.1:{port}"]
    ledger = ["--ledger", str(tmp_path / "ledger.jsonl")]
    proc = subprocess.Popen(command + ledger, env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
                break
            except OSError:
                assert time.monotonic() < deadline, "the server never listened"
                time.sleep(0.1)
        with conn:
            conn.sendall(frame(hover(2), name="content-length"))
            reply = b""
            while b"-32002" not in reply:
                data = conn.recv(65536)
                assert data, f"connection closed; got {reply!r}"
                reply += data
            conn.sendall(frame({"jsonrpc": "2.0", "method": "exit"}))
            assert proc.wait(WAIT) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(WAIT)


# --- the frame parser alone: every split of a stream gives the same messages ---


def test_parser_is_independent_of_chunking() -> None:
    one, two = json.dumps(hover(1)).encode(), json.dumps(hover(2)).encode()
    stream = (
        frame(one, length=len(one) - 4)  # too small
        + b"junk\r\n"
        + frame(two, name="content-length")
        + frame(one, length=len(one) + 7)  # too large
        + frame(two)
    )

    def parse(chunks: list[bytes]) -> list[Any]:
        p = FrameParser()
        return [e for c in chunks for e in p.feed(c)]

    whole = parse([stream])
    for size in (1, 2, 3, 7, 64):
        assert parse([stream[i : i + size] for i in range(0, len(stream), size)]) == whole
    assert [e.body for e in whole if isinstance(e, Body)] == [one[:-4], two, one, two]
    assert sum(e.nbytes for e in whole if isinstance(e, Skipped)) == 4 + len(b"junk\r\n")


# --- robustness round 3 (issue 20) ---


def test_a_length_that_runs_into_the_next_header_loses_no_request(server: RawServer) -> None:
    """A body without a closing brace whose Content-Length reaches into the next frame's
    header: the next valid request is still answered (it was lost)."""
    server.initialize()
    server.send(b'Content-Length: 12\r\n\r\n{"a":' + frame(hover(50)))
    assert "result" in server.response(50)
    assert_error(server.response(None), -32700)
    server.assert_answers()


def test_parser_resyncs_on_a_header_cut_by_the_declared_length() -> None:
    good = json.dumps(hover(2)).encode()
    for bad in (b'{"a":', b"", b"xyz", b'{"a": [1, 2'):
        for cut in range(1, 20):  # the declared length ends anywhere in the next header
            stream = frame(bad, length=len(bad) + cut) + frame(good)
            events = FrameParser().feed(stream)
            bodies = [e.body for e in events if isinstance(e, Body)]
            assert bodies[-1] == good, (bad, cut, events)


@pytest.mark.parametrize(
    "envelope",
    [
        {"jsonrpc": "2.0", "id": {"x": 1}, "method": "textDocument/hover"},
        {"jsonrpc": "2.0", "id": [1], "method": "textDocument/hover"},
        {"jsonrpc": "2.0", "id": 50, "method": 7},
        {"jsonrpc": "2.0", "id": 50, "method": None},
        {"jsonrpc": "1.0", "id": 50, "method": "textDocument/hover"},
        {"jsonrpc": 2, "id": 50, "method": "textDocument/hover"},
    ],
)
def test_an_invalid_request_object_gets_invalid_request(
    server: RawServer, envelope: dict[str, Any]
) -> None:
    server.initialize()
    server.send(frame(envelope))
    msg_id = envelope["id"] if isinstance(envelope["id"], int) else None
    assert_error(server.response(msg_id), -32600)
    server.assert_answers()


def test_a_second_initialize_is_refused(server: RawServer) -> None:
    server.initialize()
    again = dict(INITIALIZE, id=2)
    assert_error(server.call(again), -32600)
    server.assert_answers()
