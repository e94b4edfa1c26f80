"""Prefill where the cursor rests, through the real server over stdio, with the real
SmolLM2 in its worker: the first completion at a position the editor reported finds
its prompt already in the KV cache."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as t

from synconfroute.clients.embedded import bundled_model_path
from tests.lsp_harness import capabilities, inline_request, open_doc, start, stop, write_config

pytestmark = pytest.mark.embedded

if importlib.util.find_spec("llama_cpp") is None or bundled_model_path() is None:
    pytest.skip("llama-cpp-python or the SmolLM2 GGUF is not installed", allow_module_level=True)

import argparse  # noqa: E402

SOURCE = Path(argparse.__file__).read_text().split("\n")


def doc(first: int, last: int) -> str:
    return "\n".join(SOURCE[first:last]) + "\n"


async def status(client: Any) -> dict[str, Any]:
    found = await client.workspace_execute_command_async(
        t.ExecuteCommandParams("synconfroute.status", [])
    )
    worker: dict[str, Any] = found["local_worker"] or {}
    return worker


async def until(client: Any, key: str, value: int, wait_s: float = 120) -> dict[str, Any]:
    for _ in range(int(wait_s / 0.25)):
        worker = await status(client)
        if worker.get(key, 0) >= value:
            return worker
        await asyncio.sleep(0.25)
    raise AssertionError(f"status {key} never reached {value}")


def end_of(text: str, line: int) -> t.Position:
    return t.Position(line, len(text.split("\n")[line]))


async def test_a_prefill_at_the_resting_cursor_warms_the_first_completion(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, local_backend="embedded")
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    try:
        await until(client, "pid", 1)
        # Control: a document asked at once, nothing prefilled.
        cold_uri, cold = "file:///work/project/cold.py", doc(300, 420)
        open_doc(client, cold_uri, cold)
        before = await status(client)
        await client.text_document_inline_completion_async(
            inline_request(cold_uri, end_of(cold, 60))
        )
        # The worker's final figures may come after the answer (a single line is
        # answered as soon as its line ends).
        after = await until(client, "prompt_tokens", before["prompt_tokens"] + 1)
        cold_share = (after["cached_tokens"] - before["cached_tokens"]) / max(
            1, after["prompt_tokens"] - before["prompt_tokens"]
        )
        # The editor reports where the cursor rests in another document; the server
        # prefills there; then the user asks.
        uri, text = "file:///work/project/warm.py", doc(900, 1020)
        open_doc(client, uri, text)
        pos = end_of(text, 60)
        client.protocol.notify(
            "synconfroute/cursor",
            {
                "textDocument": {"uri": uri},
                "position": {"line": pos.line, "character": pos.character},
            },
        )
        await until(client, "prefills", after.get("prefills", 0) + 1)
        before = await status(client)
        await client.text_document_inline_completion_async(inline_request(uri, pos))
        after = await until(client, "prompt_tokens", before["prompt_tokens"] + 1)
        warm_share = (after["cached_tokens"] - before["cached_tokens"]) / max(
            1, after["prompt_tokens"] - before["prompt_tokens"]
        )
        assert cold_share < 0.5, cold_share
        assert warm_share > 0.9, warm_share
    finally:
        await stop(client)


async def test_a_malformed_cursor_notification_is_ignored(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, local_backend="embedded")
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    try:
        client.protocol.notify("synconfroute/cursor", {"position": "nowhere"})
        client.protocol.notify(
            "synconfroute/cursor",
            {
                "textDocument": {"uri": "file:///not/open.py"},
                "position": {"line": 1, "character": 0},
            },
        )
        uri = "file:///work/project/add.py"
        open_doc(client, uri, "def add(a, b):\n    return\n")
        done = await client.text_document_inline_completion_async(
            inline_request(uri, t.Position(1, 10))
        )
        assert done is not None  # the server still answers
    finally:
        await stop(client)


def change(client: Any, uri: str, version: int, at: t.Position, text: str) -> None:
    """A didChange as an editor sends it while typing: `text` inserted at `at`."""
    client.text_document_did_change(
        t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[t.TextDocumentContentChangePartial(range=t.Range(at, at), text=text)],
        )
    )


async def asked(client: Any, uri: str, pos: t.Position) -> float:
    """Share of the completion's prompt tokens that the KV cache already held."""
    before = await status(client)
    await client.text_document_completion_async(
        t.CompletionParams(text_document=t.TextDocumentIdentifier(uri), position=pos)
    )
    after = await until(client, "prompt_tokens", before["prompt_tokens"] + 1)
    cached = after["cached_tokens"] - before["cached_tokens"]
    return cached / max(1, after["prompt_tokens"] - before["prompt_tokens"])


async def test_an_editor_without_a_plugin_gets_a_prefill_where_its_last_edit_ended(
    tmp_path: Path,
) -> None:
    """Helix, JetBrains/LSP4IJ, plain eglot: no `synconfroute/cursor`, classic completion.
    After a didChange the cursor is at the end of the edit: the server prefills there
    once the typing rests, so the completion asked there starts warm; a request that
    comes at once cancels the waiting prefill and starts cold. Once a client reports its
    cursor itself, edits no longer move the prefill."""
    cfg = write_config(tmp_path, local_backend="embedded")
    client, _ = await start(cfg, capabilities("emacs", inline=False))
    try:
        await until(client, "pid", 1)
        # Control: typed, then asked at once.
        cold_uri, cold = "file:///work/project/cold.py", doc(300, 420)
        open_doc(client, cold_uri, cold)
        end = end_of(cold, 60)
        change(client, cold_uri, 2, end, "\n        ")
        prefills = (await status(client)).get("prefills", 0)
        cold_share = await asked(client, cold_uri, t.Position(end.line + 1, 8))
        await asyncio.sleep(0.5)
        assert (await status(client)).get("prefills", 0) == prefills  # cancelled, not run
        # Typed, the typing rests, then asked where the typing ended.
        uri, text = "file:///work/project/warm.py", doc(900, 1020)
        open_doc(client, uri, text)
        end = end_of(text, 60)
        change(client, uri, 2, end, "\n        ")
        await until(client, "prefills", prefills + 1)
        warm_share = await asked(client, uri, t.Position(end.line + 1, 8))
        assert cold_share < 0.5, cold_share
        assert warm_share > 0.9, warm_share
        # A client that reports its cursor is believed: edits alone prefill nothing.
        pos = end_of(text, 10)
        client.protocol.notify(
            "synconfroute/cursor",
            {
                "textDocument": {"uri": uri},
                "position": {"line": pos.line, "character": pos.character},
            },
        )
        await until(client, "prefills", prefills + 2)
        change(client, uri, 3, end_of(text, 30), "  # noted")
        await asyncio.sleep(1.0)
        assert (await status(client)).get("prefills", 0) == prefills + 2
    finally:
        await stop(client)


async def test_prefill_off_prefills_nothing(tmp_path: Path) -> None:
    cfg = write_config(tmp_path, local_backend="embedded", local_extra="prefill = false")
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    try:
        await until(client, "pid", 1)
        uri, text = "file:///work/project/off.py", doc(900, 1020)
        open_doc(client, uri, text)
        change(client, uri, 2, end_of(text, 60), "\n        ")
        pos = end_of(text, 10)
        client.protocol.notify(
            "synconfroute/cursor",
            {
                "textDocument": {"uri": uri},
                "position": {"line": pos.line, "character": pos.character},
            },
        )
        await asyncio.sleep(1.0)
        assert (await status(client)).get("prefills") == 0
    finally:
        await stop(client)
