"""Never a traceback to the client (issue 20): bad numbers pushed by the editor are
refused by name, and an unexpected error in a handler is logged in full on our side but
answered with a message only (no `data.traceback`, no traceback in window/logMessage)."""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as t
from pygls.exceptions import JsonRpcInternalError
from pygls.io_ import StdoutWriter

from synconfroute.server.protocol.lsp import create_server
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
