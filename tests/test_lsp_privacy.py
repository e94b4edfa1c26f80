"""Privacy and settings lifetime through the real server over stdio (pytest-lsp + fakes).

- workspace-scope settings may only tighten what leaves the machine (issue 14, item 3);
- local-only switched on mid-request stops that request's escalation (item 4);
- a settings change mid-request does not fail it (item 9);
- never_send patterns are relative to the workspace folder, gitignore-style (item 13).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from lsprotocol import types as t

from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import (
    capabilities,
    inline_request,
    open_doc,
    start,
    stop,
    workspace_file,
    write_config,
)

TEXT = "def add(a, b):\n    return \n\n\nprint(add(1, 2))\n"
CURSOR = t.Position(1, 11)
URI = workspace_file("src/calc.py").as_uri()
INVALID = TokenScript.of(" a", " +", " (b", logprob=-0.05)
REMOTE = TokenScript.of(" a", " + ", "b", logprob=-0.01)

pytestmark = pytest.mark.timeout(120)


def calls(fake: FakeOpenAI) -> int:
    return len(fake.received("/v1/completions"))


async def until(predicate: Callable[[], bool], within_s: float = 10.0) -> bool:
    end = asyncio.get_running_loop().time() + within_s
    while not predicate():
        if asyncio.get_running_loop().time() > end:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_workspace_settings_cannot_lift_local_only_or_redirect_the_code(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.script(INVALID, always=True)
    with FakeOpenAI() as other:
        widening = {
            "synconfroute": {
                "privacy": {"local_only": False},
                "remote": {"url": other.base_url, "api_key_env": "ANY_ENV_VAR"},
                "routing": {"policy": "remote"},
            }
        }
        cfg = write_config(
            tmp_path,
            local_url=local.url,
            remote_url=remote.base_url,
            extra="[privacy]\nlocal_only = true",
        )
        client, _ = await start(
            cfg,
            capabilities("visual-studio-code", inline=True),
            env={"ANY_ENV_VAR": "s3cret-value"},
            configuration=widening,
        )
        try:
            open_doc(client, URI, TEXT)
            for _ in range(3):
                await client.text_document_inline_completion_async(inline_request(URI, CURSOR))
            # Pushed the same way (didChangeConfiguration is workspace scope too).
            client.workspace_did_change_configuration(
                t.DidChangeConfigurationParams(settings=widening)
            )
            await client.text_document_inline_completion_async(
                inline_request(URI, t.Position(0, 0))
            )
            assert calls(other) == 0 and calls(remote) == 0
            status = await client.workspace_execute_command_async(
                t.ExecuteCommandParams("synconfroute.status", [])
            )
            assert status["local_only"] is True and status["policy"] == "synconf"
            assert await until(lambda: any("refused" in m.message for m in client.messages))
            refused = [m for m in client.messages if "refused" in m.message]
            assert len(refused) == 1, [m.message for m in refused]  # one warning, not per pull
            text = refused[0].message
            assert refused[0].type == t.MessageType.Warning
            for key in ("privacy.local_only", "remote.url", "remote.api_key_env", "routing.policy"):
                assert key in text
            assert "s3cret-value" not in text and other.base_url not in text
        finally:
            await stop(client)


async def test_workspace_settings_may_tighten(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.script(INVALID, always=True)
    remote.script(REMOTE, always=True)
    cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(
        cfg,
        capabilities("visual-studio-code", inline=True),
        configuration={"synconfroute": {"privacy": {"local_only": True}}},
    )
    try:
        open_doc(client, URI, TEXT)
        await client.text_document_inline_completion_async(inline_request(URI, CURSOR))
        assert calls(remote) == 0
        client.workspace_did_change_configuration(
            t.DidChangeConfigurationParams(settings={"synconfroute": {}})
        )
        await asyncio.sleep(0.2)
        await client.text_document_inline_completion_async(inline_request(URI, CURSOR))
        assert calls(remote) == 1  # the workspace no longer asks: the file's settings apply
        assert not any("refused" in m.message for m in client.messages)
    finally:
        await stop(client)


async def test_local_only_switched_on_mid_request_stops_its_escalation(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    # Syntax-invalid (it will want to escalate), and slow: ~0.9 s.
    local.script(TokenScript.of(" a", " +", " (b", logprob=-0.05, delay=0.3))
    cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    try:
        open_doc(client, URI, TEXT)
        pending = asyncio.ensure_future(
            client.text_document_inline_completion_async(inline_request(URI, CURSOR))
        )
        assert await asyncio.to_thread(local.wait_for, lambda: local.received("/api/generate"))
        on = await client.workspace_execute_command_async(
            t.ExecuteCommandParams("synconfroute.toggleLocalOnly", [])
        )
        assert on is True
        result = await pending
        assert isinstance(result, t.InlineCompletionList) and not result.items
        assert calls(remote) == 0
        hover = await client.text_document_hover_async(
            t.HoverParams(t.TextDocumentIdentifier(URI), CURSOR)
        )
        assert hover is not None and "local-only" in str(hover.contents)
    finally:
        await stop(client)


async def test_local_only_switched_on_during_the_remote_call_cancels_it(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.script(INVALID)
    remote.script(TokenScript(hang=True))
    cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    try:
        open_doc(client, URI, TEXT)
        pending = asyncio.ensure_future(
            client.text_document_inline_completion_async(inline_request(URI, CURSOR))
        )
        assert await asyncio.to_thread(remote.wait_for, lambda: calls(remote) == 1)
        await client.workspace_execute_command_async(
            t.ExecuteCommandParams("synconfroute.toggleLocalOnly", [])
        )
        result = await asyncio.wait_for(pending, 2.0)  # not the 4 s deadline
        assert isinstance(result, t.InlineCompletionList) and not result.items
        call = remote.received("/v1/completions")[0]
        assert await asyncio.to_thread(remote.wait_for, lambda: call.disconnected)
    finally:
        await stop(client)


async def test_settings_change_mid_request_does_not_fail_it(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    slow = TokenScript.of(" a", " +", " b", logprob=-0.05, delay=0.3)
    local.script(slow, slow)
    cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    try:
        open_doc(client, URI, TEXT)
        pending = asyncio.ensure_future(
            client.text_document_inline_completion_async(inline_request(URI, CURSOR))
        )
        assert await asyncio.to_thread(local.wait_for, lambda: local.received("/api/generate"))
        # A new setting (one a workspace may set: it sends less): the tiers are rebuilt
        # while the request still streams.
        client.workspace_did_change_configuration(
            t.DidChangeConfigurationParams(
                settings={"synconfroute": {"completion": {"context_lines": 1}}}
            )
        )
        result = await pending  # before the fix: -32603 "the client has been closed"
        assert isinstance(result, t.InlineCompletionList)
        assert result.items and result.items[0].insert_text == " a + b"
        gen = local.received("/api/generate")[0]
        # (The fake marks the answer finished from its own thread, after the last write
        # the client may already have read: asked again until it holds.)
        await asyncio.to_thread(local.wait_for, lambda: gen.finished or gen.disconnected, 60)
        assert gen.finished and not gen.disconnected, (gen.finished, gen.disconnected)
        # The next request runs on the new tiers.
        again = await client.text_document_inline_completion_async(inline_request(URI, CURSOR))
        assert isinstance(again, t.InlineCompletionList) and again.items
        assert "print(add" not in local.received("/api/generate")[-1].body.decode()
    finally:
        await stop(client)


async def test_never_send_patterns_are_relative_to_the_workspace_folder(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.script(INVALID, always=True)
    remote.script(REMOTE, always=True)
    cfg = write_config(
        tmp_path,
        local_url=local.url,
        remote_url=remote.base_url,
        extra='[privacy]\nnever_send = ["secrets/**", "**/keys/**"]',
    )
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))  # root: WORKSPACE
    try:
        for rel in ("secrets/key.py", "secrets/deep/key.py", "src/keys/k.py"):
            uri = workspace_file(rel).as_uri()
            open_doc(client, uri, TEXT)
            await client.text_document_inline_completion_async(inline_request(uri, CURSOR))
        assert calls(remote) == 0
        open_doc(client, URI, TEXT)  # src/calc.py: not covered
        await client.text_document_inline_completion_async(inline_request(URI, CURSOR))
        assert calls(remote) == 1
    finally:
        await stop(client)
