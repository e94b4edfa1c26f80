"""Issue 34, per-folder settings beyond privacy: each workspace folder's own tighten-only
keys (its workspace configuration, asked with the folder as scopeUri) shape the requests
for the files inside it. Through the real server over stdio, with two folders: `strict`
answers a tighter routing policy, a lower threshold, or completions off in comments;
`plain` answers nothing. A request in `strict` follows its folder; one in `plain` does
not (the control: it escalates, or asks the local model).

Before this change only a folder's privacy keys applied per folder: the window's answer
decided routing and where completions fire, so every `strict` request below escalated
(or asked the local model) like the `plain` ones.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as t

from tests import privacy_workspace as pw
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import capabilities, inline_request, open_doc, start, stop

pytestmark = pytest.mark.timeout(240)

REMOTE = TokenScript.of(" value", " + 1", logprob=-0.01)
INVALID = TokenScript.of(" a", " +", " (b", logprob=-0.05)  # confident, syntax-invalid
UNSURE = TokenScript.of(" value", logprob=-1.0)  # syntax-valid, below the -0.5 default
TEXT = "def f(value):\n    x = 1  # note\n    return \n"
RETURN = (2, 11)  # after "return "
COMMENT = (1, 17)  # at the end of "# note"
_version = itertools.count(2)


def sent(remote: FakeOpenAI) -> int:
    return len(remote.received("/v1/completions"))


def asked(local: FakeOllama) -> int:
    return len(local.received("/api/generate"))


async def ask(client: Any, uri: str, pos: tuple[int, int]) -> None:
    """One invoked completion; the text below the cursor's line changes first, so no
    answer comes from a cache."""
    n = next(_version)
    end = t.Position(3, 0)
    client.text_document_did_change(
        t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(version=n, uri=uri),
            content_changes=[
                t.TextDocumentContentChangePartial(range=t.Range(end, end), text=f"# request {n}\n")
            ],
        )
    )
    await client.text_document_inline_completion_async(inline_request(uri, t.Position(*pos)))


async def eventually(
    step: Callable[[], Any], done: Callable[[], bool], what: str, deadline_s: float = 90.0
) -> None:
    """Repeat `step` until `done` holds (the server has read its configuration: until
    then nothing escalates); generous for a paused CI machine."""
    end = time.monotonic() + deadline_s
    while not done():
        assert time.monotonic() < end, f"never happened: {what}"
        await step()
        await asyncio.sleep(0.2)


async def two_folders(
    tmp_path: Path,
    fakes: tuple[FakeOllama, FakeOpenAI],
    strict: dict[str, Any],
    text: str = TEXT,
) -> tuple[Any, str, str]:
    """The server with folders `plain` and `strict` (`strict` answers `strict` for its
    scopeUri); both open `TEXT` as app.py; (client, plain's URI, strict's URI)."""
    local, remote = fakes
    plain_dir, strict_dir = tmp_path / "plain", tmp_path / "strict"
    for d in (plain_dir, strict_dir):
        d.mkdir()
        (d / "app.py").write_text(text, encoding="utf-8")
    cfg = pw.write_settings(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(
        cfg,
        capabilities("visual-studio-code", inline=True),
        root=plain_dir,
        folders=[plain_dir, strict_dir],
        configuration={"synconfroute": {}},
        scoped_configuration={strict_dir.as_uri(): {"synconfroute": strict}},
        env={"XDG_STATE_HOME": str(tmp_path / "state")},
    )
    plain, strict_uri = (plain_dir / "app.py").as_uri(), (strict_dir / "app.py").as_uri()
    open_doc(client, plain, text)
    open_doc(client, strict_uri, text)
    return client, plain, strict_uri


@pytest.mark.parametrize(
    ("strict", "script"),
    [
        ({"routing": {"policy": "confidence"}}, INVALID),  # escalates less than synconf
        ({"routing": {"threshold": -2.0}}, UNSURE),  # -1.0 is confident enough there
    ],
    ids=["policy", "threshold"],
)
async def test_a_folders_routing_applies_to_its_files_only(
    tmp_path: Path,
    fakes: tuple[FakeOllama, FakeOpenAI],
    strict: dict[str, Any],
    script: TokenScript,
) -> None:
    local, remote = fakes
    local.script(script, always=True)
    remote.script(REMOTE, always=True)
    client, plain, strict_uri = await two_folders(tmp_path, fakes, strict)
    try:
        # Control, and the sign that every folder's configuration has been applied (the
        # window's and the folders' answers are applied together): plain escalates.
        await eventually(
            lambda: ask(client, plain, RETURN), lambda: sent(remote) > 0, "plain escalates"
        )
        before_local, before = asked(local), sent(remote)
        for _ in range(3):
            await ask(client, strict_uri, RETURN)
        strict_local, strict_sent = asked(local) - before_local, sent(remote) - before
        await ask(client, plain, RETURN)  # and plain still escalates
        plain_sent = sent(remote) - before - strict_sent
    finally:
        await stop(client)
    assert strict_local == 3, f"strict's requests did not reach the local tier: {strict_local}"
    assert strict_sent == 0, f"strict's folder settings were ignored: {strict_sent} escalated"
    assert plain_sent == 1, f"plain took strict's settings: {plain_sent} escalated"


async def test_a_folders_disabled_in_applies_to_its_files_only(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.script(INVALID, always=True)
    remote.script(REMOTE, always=True)
    client, plain, strict_uri = await two_folders(
        tmp_path, fakes, {"completion": {"disabled_in": ["comment"]}}
    )
    try:
        await eventually(
            lambda: ask(client, plain, RETURN), lambda: sent(remote) > 0, "plain escalates"
        )
        before = asked(local)
        for _ in range(3):
            await ask(client, strict_uri, COMMENT)
        in_strict = asked(local) - before
        await ask(client, plain, COMMENT)  # plain completes in a comment
        in_plain = asked(local) - before - in_strict
        await ask(client, strict_uri, RETURN)  # strict completes outside comments
        strict_code = asked(local) - before - in_strict - in_plain
    finally:
        await stop(client)
    assert in_strict == 0, (
        f"strict's disabled_in was ignored: the local model was asked {in_strict}x"
    )
    assert in_plain == 1, f"plain took strict's disabled_in: asked {in_plain}x"
    assert strict_code == 1, f"strict's code outside comments got no completion: {strict_code}"


async def test_a_folders_prompt_budget_applies_to_its_files_only(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    """`remote.max_prompt_chars` (tighten-only: how much of a file leaves) from the folder
    that holds the file: strict's escalations carry at most its 256 characters of code,
    plain's the window's default. Before, the pipeline's (window) settings sized every
    plan, and strict sent as much as plain."""
    local, remote = fakes
    local.script(INVALID, always=True)
    remote.script(REMOTE, always=True)
    long_text = TEXT + "".join(f"value_{i} = {i}  # filler below the cursor\n" for i in range(200))
    client, plain, strict_uri = await two_folders(
        tmp_path, fakes, {"remote": {"max_prompt_chars": 256}}, long_text
    )

    def prompts() -> list[str]:
        return [r.json()["prompt"] for r in remote.received("/v1/completions")]

    try:
        await eventually(
            lambda: ask(client, plain, RETURN), lambda: sent(remote) > 0, "plain escalates"
        )
        before = sent(remote)
        await ask(client, strict_uri, RETURN)
        await ask(client, plain, RETURN)
        strict_prompt, plain_prompt = prompts()[before : before + 2]
    finally:
        await stop(client)
    # The prompt holds the code and the FIM template's few markers.
    assert len(strict_prompt) <= 256 + 100, (len(strict_prompt), strict_prompt)
    assert len(plain_prompt) > 2000, len(plain_prompt)
