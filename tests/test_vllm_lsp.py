"""Our language server escalating to a real vLLM: `$/cancelRequest` from the editor
ends the generation on the server (vLLM logs the abort; `vllm:num_requests_running` is
back to 0 on /metrics).

The local tier is the fake Ollama (Ollama cannot run here), scripted unconfident so that
every completion escalates; the remote tier is the session's real vLLM.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as t
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from tests.fakes import FakeOllama, TokenScript
from tests.lsp_harness import capabilities, inline_request, open_doc, start, stop
from tests.vllm_server import VllmServer, until

pytestmark = pytest.mark.slow

KEY_ENV = "SYNCONFROUTE_TEST_VLLM_KEY"
# SmolLM2 goes on repeating along the line for hundreds of tokens (a single-line
# completion). A repetition, not a count: a count's end depends on the CPU's arithmetic,
# and on CI's machine it ended before the test saw it generating.
LINE = "ones = [" + "1, " * 60
TEXT = LINE + "\n"
CURSOR = t.Position(0, len(LINE))


@pytest_asyncio.fixture
async def editor(
    tmp_path: Path, vllm: VllmServer, local_fake: FakeOllama
) -> AsyncIterator[LanguageClient]:
    config = tmp_path / "config.toml"
    config.write_text(
        "\n".join(
            [
                "[local]",
                'backend = "ollama"',
                f'url = "{local_fake.url}"',
                'model = "qwen2.5-coder:3b"',
                "[remote]",
                f'url = "{vllm.base_url}"',
                f'model = "{vllm.model}"',
                f'api_key_env = "{KEY_ENV}"',
                "timeout = 300",  # longer than any stall of the machine
                "[completion]",
                "max_tokens = 4096",  # the most it takes: minutes, longer than a stall
                "deadline_ms = 120000",
                "[editor]",
                "debounce_ms = 0",
                "adaptive_debounce = false",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    # A real file in the workspace: the egress gate refuses code it cannot place.
    (tmp_path / "numbers.py").write_text(TEXT, encoding="utf-8")
    client, _ = await start(
        config,
        capabilities("visual_studio_code", inline=True),
        env={KEY_ENV: vllm.api_key},
        root=tmp_path,
    )
    client.uri = (tmp_path / "numbers.py").as_uri()  # type: ignore[attr-defined]
    try:
        yield client
    finally:
        await stop(client)


async def test_cancel_request_stops_the_generation_on_vllm(
    editor: LanguageClient, vllm: VllmServer, local_fake: FakeOllama
) -> None:
    local_fake.default = TokenScript.of("x", " =", " 1", logprob=-4.0)  # unconfident
    offset = vllm.log_offset()
    uri: str = editor.uri  # type: ignore[attr-defined]
    open_doc(editor, uri, TEXT)
    fut = editor.protocol.send_request(
        "textDocument/inlineCompletion", inline_request(uri, CURSOR), msg_id="v-1"
    )
    # The escalation reaches the engine (its log says so) and is still generating a
    # second later (4,096 tokens: minutes here, so a stall of the test process cannot let
    # it end first), so the answer is still pending.
    assert await until(lambda: vllm.added_since(offset) == 1, 60.0), vllm.log_tail()
    await asyncio.sleep(1.0)
    assert not fut.done(), (fut.result(), vllm.log_tail())
    editor.protocol.notify("$/cancelRequest", t.CancelParams(id="v-1"))
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wrap_future(fut)
    assert info.value.code == -32800
    # The server hung up and vLLM aborted the generation within 5 s (its log line).
    assert await until(lambda: vllm.aborted_since(offset) == 1, 5.0), vllm.log_tail()
    assert await until(lambda: vllm.running() == 0, 10.0)
