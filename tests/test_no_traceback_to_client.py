"""Never a traceback to the client (issue 20): bad numbers pushed by the editor are
refused by name, and an unexpected error in a handler is logged in full on our side but
answered with a message only (no `data.traceback`, no traceback in window/logMessage)."""

from __future__ import annotations

import io
import json
import logging
import queue
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as t
from pygls.exceptions import JsonRpcInternalError
from pygls.io_ import StdoutWriter

from synconfroute.server.protocol.lsp import create_server
from synconfroute.server.protocol.transport import TransportProtocol
from synconfroute.server.settings import config
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import capabilities, inline_request, open_doc, start, stop, write_config

URI = "file:///work/project/calc.py"
TEXT = "def add(a, b):\n    return \n"
CURSOR = t.Position(1, 11)
VALID = TokenScript.of(" a", " +", " b", logprob=-0.05)
NAN = float("nan")

pytestmark = pytest.mark.timeout(120)


def _frames(raw: bytes) -> list[dict[str, Any]]:
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        (n,) = [int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.startswith(b"Content-L")]
        out.append(json.loads(rest[:n]))
        raw = rest[n:]
    return out


def _has_traceback(text: str) -> bool:
    return "Traceback" in text or 'File "' in text


async def test_nan_settings_from_the_editor_are_refused_and_completions_work(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.script(VALID, always=True)
    cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(
        cfg,
        capabilities("visual-studio-code", inline=True),
        init_options={"local": {"timeout": NAN}, "completion": {"deadline_ms": NAN}},
    )
    try:
        pushed = {"synconfroute": {"local": {"timeout": NAN, "total_ms": float("inf")}}}
        client.workspace_did_change_configuration(t.DidChangeConfigurationParams(pushed))
        open_doc(client, URI, TEXT)
        for _ in range(3):
            result = await client.text_document_inline_completion_async(inline_request(URI, CURSOR))
            assert isinstance(result, t.InlineCompletionList) and result.items
            assert result.items[0].insert_text.startswith(" a + b")
        shown = " ".join(m.message for m in client.messages)
        for key in ("local.timeout", "completion.deadline_ms", "local.total_ms"):
            assert key in shown, shown
        logs = [m.message for m in client.log_messages] + [m.message for m in client.messages]
        assert not any(_has_traceback(m) for m in logs), logs
    finally:
        await stop(client)


def test_an_internal_error_is_answered_without_its_traceback() -> None:
    server = create_server(config.load(Path("/nonexistent.toml"), environ={}))
    out = io.BytesIO()
    server.protocol.set_writer(StdoutWriter(out))
    try:
        float("nan").as_integer_ratio()
    except ValueError:
        error = JsonRpcInternalError.of(sys.exc_info()).to_response_error()
    server.protocol._send_response(7, error=error)  # what pygls does for a handler's crash
    (answer,) = _frames(out.getvalue())
    assert answer["id"] == 7 and answer["error"]["code"] == -32603
    assert "cannot convert" in answer["error"]["message"]
    assert not answer["error"].get("data"), answer
    assert not _has_traceback(json.dumps(answer))


def test_errors_logged_with_a_traceback_reach_the_client_without_it() -> None:
    server = create_server(config.load(Path("/nonexistent.toml"), environ={}))
    out = io.BytesIO()
    server.protocol.set_writer(StdoutWriter(out))
    log = logging.getLogger("synconfroute.test")
    try:
        {}["missing"]
    except KeyError:
        log.exception("a handler failed")
    log.error('pygls style\nTraceback (most recent call last):\n  File "x.py", line 1\n')
    frames = _frames(out.getvalue())
    messages = [f["params"]["message"] for f in frames if f.get("method") == "window/logMessage"]
    assert any("a handler failed" in m for m in messages), messages
    assert any("pygls style" in m for m in messages), messages
    assert not any(_has_traceback(m) for m in messages), messages


# -- every kind of bad request, every message the editor receives (issue 36 item 4) ------

DOC_URI = "file:///w/bad_requests.py"
DOC_TEXT = "def f(a):\n    s = '\ud800'\n    return a\n"
# Anything that looks like a traceback, in any field of any message.
TRACEBACK_LIKE = ("Traceback", 'File \\"', "Exception Group", "most recent call last")


def _position(line: Any, character: Any) -> dict[str, Any]:
    return {"textDocument": {"uri": DOC_URI}, "position": {"line": line, "character": character}}


def _inline(line: Any, character: Any) -> dict[str, Any]:
    return {**_position(line, character), "context": {"triggerKind": 1}}


BAD_REQUESTS: list[tuple[str, str, Any]] = [
    ("negative line", "textDocument/inlineCompletion", _inline(-1, 0)),
    ("negative character", "textDocument/inlineCompletion", _inline(0, -5)),
    ("character 2**31", "textDocument/inlineCompletion", _inline(0, 2**31)),
    ("line 2**31", "textDocument/inlineCompletion", _inline(2**31, 0)),
    ("character 2**63", "textDocument/inlineCompletion", _inline(0, 2**63)),
    ("line past the end", "textDocument/inlineCompletion", _inline(99, 0)),
    ("inside a character", "textDocument/inlineCompletion", _inline(1, 99)),
    ("float position", "textDocument/inlineCompletion", _inline(0.5, 1)),
    ("string position", "textDocument/inlineCompletion", _inline("1", "2")),
    ("null position", "textDocument/inlineCompletion", {**_inline(0, 0), "position": None}),
    ("no position", "textDocument/inlineCompletion", {"textDocument": {"uri": DOC_URI}}),
    ("params a list", "textDocument/inlineCompletion", [1, 2]),
    ("params a string", "textDocument/inlineCompletion", "x"),
    ("no params", "textDocument/inlineCompletion", None),
    ("bad uri", "textDocument/inlineCompletion", {**_inline(0, 0), "textDocument": {"uri": "%"}}),
    ("uri not a string", "textDocument/inlineCompletion", {**_inline(0, 0), "textDocument": 7}),
    (
        "uri with a lone surrogate",
        "textDocument/inlineCompletion",
        {**_inline(0, 0), "textDocument": {"uri": "file:///w/\ud800.py"}},
    ),
    (
        "not open",
        "textDocument/inlineCompletion",
        {**_inline(0, 0), "textDocument": {"uri": "file:///x.py"}},
    ),
    (
        "bad trigger kind",
        "textDocument/inlineCompletion",
        {**_inline(0, 0), "context": {"triggerKind": 9}},
    ),
    ("hover negative line", "textDocument/hover", _position(-1, 0)),
    ("hover line 2**31", "textDocument/hover", _position(2**31, 2**31)),
    ("hover malformed", "textDocument/hover", {"textDocument": None}),
    ("unknown method", "synconfroute/nothing", {}),
    ("unknown LSP method", "textDocument/copilotInlineEdit", _position(0, 0)),
    (
        "next edit beyond the end",
        "textDocument/copilotInlineEdit",
        {"textDocument": {"uri": DOC_URI, "version": 1}, "position": {"line": 99, "character": 0}},
    ),
    ("unknown command", "workspace/executeCommand", {"command": "nope", "arguments": []}),
    (
        "accept with an object",
        "workspace/executeCommand",
        {"command": "synconfroute.accept", "arguments": [{"a": 1}]},
    ),
    ("command not a string", "workspace/executeCommand", {"command": 5}),
    (
        "status with arguments",
        "workspace/executeCommand",
        {"command": "synconfroute.status", "arguments": [None, -1]},
    ),
]
BAD_NOTIFICATIONS: list[tuple[str, Any]] = [
    (
        "textDocument/didChange",
        {
            "textDocument": {"uri": DOC_URI, "version": 2},
            "contentChanges": [
                {
                    "range": {
                        "start": {"line": -1, "character": 2**31},
                        "end": {"line": 2**31, "character": -1},
                    },
                    "text": "x",
                }
            ],
        },
    ),
    ("textDocument/didChange", {"textDocument": {"uri": DOC_URI}, "contentChanges": "no"}),
    ("textDocument/didOpen", {"textDocument": {"uri": 5}}),
    ("textDocument/didClose", []),
    ("synconfroute/cursor", _position(-1, 2**31)),
    ("synconfroute/cursor", [1]),
    (
        "workspace/didChangeWatchedFiles",
        {"changes": [{"uri": "file:///w/\ud800\x00.py", "type": 2}]},
    ),
    ("workspace/didChangeConfiguration", {"settings": {"synconfroute": {"local": "x"}}}),
    ("$/cancelRequest", {"id": {"x": 1}}),
    ("$/nothing", {"a": 1}),
]


def test_every_kind_of_bad_request_gets_one_answer_and_no_message_holds_a_traceback(
    tmp_path: Path,
) -> None:
    from tests.test_transport import RawServer, frame, request

    seen: list[dict[str, Any]] = []  # every message the server wrote, in order

    class Recording(queue.Queue[dict[str, Any] | None]):
        def put(self, item: dict[str, Any] | None, *a: Any, **kw: Any) -> None:
            if item is not None:
                seen.append(item)
            super().put(item, *a, **kw)

    server = RawServer(tmp_path)
    server.messages = Recording()  # before initialize: the server has written nothing yet
    try:
        server.initialize()
        server.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        doc = {"uri": DOC_URI, "languageId": "python", "version": 1, "text": DOC_TEXT}
        server.send(
            frame(
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didOpen",
                    "params": {"textDocument": doc},
                }
            )
        )
        answers: dict[str, dict[str, Any]] = {}
        for n, (what, method, params) in enumerate(BAD_REQUESTS, start=10):
            server.send(frame(request(n, method, params)))
            answers[what] = server.response(n)
        for method, params in BAD_NOTIFICATIONS:
            server.send(frame({"jsonrpc": "2.0", "method": method, "params": params}))
        server.assert_answers(first_id=500)  # all heard, still answering
        assert server.call(request(600, "shutdown")).get("result", "missing") is None
        server.send(frame({"jsonrpc": "2.0", "method": "exit"}))
        assert server.wait_exit() == 0
        while server.messages.get(timeout=10) is not None:  # the rest, to the end
            pass
    finally:
        server.close()
    by_code = {what: a.get("error", {}).get("code") for what, a in answers.items()}
    for what in ("negative line", "character 2**31", "line 2**31", "params a list", "no params"):
        assert by_code[what] == -32602, (what, answers[what])
    assert by_code["unknown method"] == -32601, answers["unknown method"]
    for what, answer in answers.items():
        assert "result" in answer or answer["error"]["message"].strip(), (what, answer)
    bad = [m for m in seen if any(s in json.dumps(m) for s in TRACEBACK_LIKE)]
    assert not bad, bad
    unknown = [m for m in seen if "Unknown message" in json.dumps(m)]
    assert not unknown, unknown
    # The server's own log: a client's bad request is one line, not an error with a
    # traceback (pygls logs -32602 as an exception, and fails on an object id to cancel).
    log = (tmp_path / "stderr.txt").read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log and "ERROR" not in log, log[-4000:]
    assert "unhashable" not in log, log[-4000:]


def test_exception_groups_and_chained_tracebacks_reach_the_client_without_them() -> None:
    import traceback

    server = create_server(config.load(Path("/nonexistent.toml"), environ={}))
    out = io.BytesIO()
    server.protocol.set_writer(StdoutWriter(out))
    log = logging.getLogger("synconfroute.test")
    try:
        raise ExceptionGroup("structuring failed", [ValueError("line -1"), KeyError("x")])
    except ExceptionGroup:
        group = traceback.format_exc()
        log.error("Unable to deserialize message\n%s", group)  # as pygls logs it
        log.exception("a handler failed")
    try:
        try:
            int("k")
        except ValueError as exc:
            raise RuntimeError("while handling") from exc
    except RuntimeError:
        log.error("chained:\n%s", traceback.format_exc().split("Traceback", 1)[1])
    server.window_show_message(t.ShowMessageParams(t.MessageType.Error, "show " + group))
    protocol = server.protocol
    assert isinstance(protocol, TransportProtocol)
    protocol.send_error(3, -32603, "error " + group)
    error = {"code": -32603, "message": "with data", "data": {"trace": group.splitlines()}}
    protocol._send_data({"jsonrpc": "2.0", "id": 4, "error": error})
    frames = _frames(out.getvalue())
    text = json.dumps(frames)
    assert "Exception Group" in group and len(frames) == 6, frames
    assert frames[-1]["error"] == {"code": -32603, "message": "with data"}, frames[-1]
    for needle in (
        "Traceback",
        "Exception Group",
        'File \\"',
        "most recent call",
        "above exception",
    ):
        assert needle not in text, (needle, frames)
    messages = [f.get("params", {}).get("message") or f["error"]["message"] for f in frames]
    assert messages[0] == "Unable to deserialize message (the server log has the details)"
    assert messages[-2] == "error (the server log has the details)", messages
