"""The `synconfroute/route` notification: the route of each completion as data.

Editors' status lines (VS Code, Neovim, Emacs) read the route from it instead of parsing
the item's command title; its `id` is the argument of synconfroute.accept.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

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

URI = workspace_file("project/calc.py").as_uri()  # inside the workspace folder
TEXT = "def add(a, b):\n    return \n\n\nprint(add(1, 2))\n"
CURSOR = t.Position(1, 11)

pytestmark = pytest.mark.timeout(120)


def _plain(value: Any) -> Any:
    """pygls hands an unknown method's params over as namedtuples: back to JSON shapes."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "completion"])
async def test_route_notification_follows_each_completion(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI], inline: bool
) -> None:
    local, remote = fakes
    local.script(TokenScript.of(" a", " +", " (b", logprob=-0.05))  # invalid: escalates
    remote.script(TokenScript.of(" a", " + ", "b", logprob=-0.01))
    cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
    profile = "visual-studio-code" if inline else "neovim"
    client, _ = await start(cfg, capabilities(profile, inline=inline))
    seen: list[dict[str, Any]] = []

    @client.feature("synconfroute/route")
    def on_route(params: Any) -> None:
        seen.append(_plain(params))

    try:
        open_doc(client, URI, TEXT)
        if inline:
            result = await client.text_document_inline_completion_async(inline_request(URI, CURSOR))
            assert result is not None
            items = result.items if isinstance(result, t.InlineCompletionList) else result
            command = items[0].command
        else:
            completion = await client.text_document_completion_async(
                t.CompletionParams(text_document=t.TextDocumentIdentifier(URI), position=CURSOR)
            )
            assert isinstance(completion, t.CompletionList)
            command = completion.items[0].command
        assert command is not None and command.arguments is not None
        for _ in range(600):  # right after the response; a paused machine may take a while
            if seen:
                break
            await asyncio.sleep(0.05)
        assert len(seen) == 1, seen
        note = seen[0]
        assert note["uri"] == URI and note["id"] == command.arguments[0]
        assert note["route"] == "remote" and "syntax-invalid" in note["reasons"]
        assert note["summary"] == command.title
        assert note["summary"].startswith("synconfroute: remote (")
        assert isinstance(note["confidence"], float) and note["cacheHit"] is False
        card = note["card"]
        text = card if isinstance(card, str) else card["value"]
        assert "escalated to the remote model" in text
        assert note["range"]["start"] == {"line": 1, "character": 11}
    finally:
        await stop(client)
