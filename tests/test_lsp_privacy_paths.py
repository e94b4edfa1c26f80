"""Issue 27, items 1, 3, 6 and 7: private code reached by another name, through the real
server over stdio, checked on what the recording fake remote received.

1. cross-file context followed file symlinks (onto never_send, .env, outside files);
3. never_send on the document's own completions matched the raw path string
   (symlinked root, `./`, `..`, a symlinked alias of the file);
6. file-change events outside the workspace were indexed, and fed remote prompts;
7. an open document in a .gitignore'd folder fed remote prompts.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as t

from tests import privacy_workspace as pw
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import capabilities, inline_request, open_doc, start, stop

pytestmark = pytest.mark.timeout(180)

REMOTE = TokenScript.of(" value", " + 1", logprob=-0.01)
# The four ways a completion escalates (the settings give the local tier 400 ms).
ESCALATIONS: dict[str, TokenScript] = {
    "low-confidence": TokenScript.of(" value", " * 2", logprob=-4.0),
    "syntax-invalid": TokenScript.of(" a", " +", " (b", logprob=-0.05),
    "local-failure": TokenScript(status=500, body={"error": "model runner has stopped"}),
    "local-timeout": TokenScript.of(" value", logprob=-0.05, first_delay=1.2),
}


def bodies(remote: FakeOpenAI) -> list[str]:
    return [r.body.decode("utf-8", "replace") for r in remote.received("/v1/completions")]


_asked = itertools.count(2)


async def ask(client: Any, local: FakeOllama, uri: str, pos: tuple[int, int], path: str) -> None:
    """One completion that escalates by `path`; the text after the cursor differs each
    time (a trailing comment), so no answer comes from the cache."""
    n = next(_asked)
    end = t.Position(pos[0] + 400, 0)
    client.text_document_did_change(
        t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(version=n, uri=uri),
            content_changes=[
                t.TextDocumentContentChangePartial(
                    range=t.Range(t.Position(pos[0] + 1, 0), end), text=f"# request {n}\n"
                )
            ],
        )
    )
    local.script(ESCALATIONS[path])
    await client.text_document_inline_completion_async(inline_request(uri, t.Position(*pos)))


async def index_ready(client: Any, local: FakeOllama, remote: FakeOpenAI, uri: str) -> None:
    """Ask until a remote prompt carries the public context file: the index is built."""
    for _ in range(100):
        await ask(client, local, uri, pw.APP_CURSOR, "syntax-invalid")
        if any(pw.PUBLIC_MARKER in b for b in bodies(remote)):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("the public context never reached a remote prompt")


async def test_item1_context_does_not_follow_file_symlinks_to_private_files(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    ws = pw.build(tmp_path / "base")
    cfg = pw.write_settings(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True), root=ws)
    try:
        uri = (ws / "app.py").as_uri()
        open_doc(client, uri, pw.APP)
        await index_ready(client, local, remote, uri)
        for path in ESCALATIONS:
            before = len(bodies(remote))
            await ask(client, local, uri, pw.APP_CURSOR, path)
            assert len(bodies(remote)) == before + 1, path  # it escalated
        sent = "\n".join(bodies(remote))
        assert pw.leaks(sent) == []
        hover = await client.text_document_hover_async(
            t.HoverParams(t.TextDocumentIdentifier(uri), t.Position(*pw.APP_CURSOR))
        )
        card = str(hover.contents) if hover else ""
        for p in pw.PRIVATE:
            assert f"{p.alias} " not in card or "(local)" in card.split(p.alias, 1)[1][:40], card
    finally:
        await stop(client)


def _forms(base: Path, ws: Path) -> dict[str, str]:
    """Names of the never_send file secrets/vault.py that are not its plain path."""
    real = ws / "secrets" / "vault.py"
    return {
        "dot": f"file://{ws}/./secrets/vault.py",
        "dotdot": f"file://{ws}/lib/../secrets/vault.py",
        "symlinked-file": (ws / "vault_alias.py").as_uri(),
        "percent": real.as_uri().replace("/secrets/", "/%73ecrets/"),
        "real": real.as_uri(),
    }


async def test_item3_never_send_holds_for_every_name_of_the_file(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    base = tmp_path / "base"
    ws = pw.build(base)
    cfg = pw.write_settings(
        tmp_path, local_url=local.url, remote_url=remote.base_url, context="file"
    )
    vault = pw.body("vault_key", pw.PRIVATE[0].marker)
    for root in (ws, base / "ws_link"):  # the root as it is, and opened through a symlink
        client, _ = await start(cfg, capabilities("visual-studio-code", inline=True), root=root)
        try:
            for name, uri in _forms(base, ws).items():
                if root != ws:  # documents by the link root's name too
                    uri = uri.replace(f"{ws}/", f"{base / 'ws_link'}/")
                open_doc(client, uri, vault)
                for path in ESCALATIONS:
                    await ask(client, local, uri, pw.PRIVATE_CURSOR, path)
                assert pw.leaks("\n".join(bodies(remote))) == [], (root, name)
            # The control: a public file escalates and is sent.
            uri = (root / "lib" / "helpers.py").as_uri()
            open_doc(client, uri, pw.body("public_helper", pw.PUBLIC_MARKER))
            await ask(client, local, uri, pw.PRIVATE_CURSOR, "syntax-invalid")
            assert pw.PUBLIC_MARKER in bodies(remote)[-1]
        finally:
            await stop(client)


async def test_item6_watched_file_events_outside_the_workspace_are_not_indexed(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    base = tmp_path / "base"
    ws = pw.build(base)
    (ws / "ext_lib.py").unlink()  # the outside file is reachable only by the event
    far = tmp_path / "elsewhere" / "tools.py"
    far.parent.mkdir()
    far.write_text(pw.body("outside_fn", pw.PRIVATE[3].marker), encoding="utf-8")
    cfg = pw.write_settings(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True), root=ws)
    try:
        uri = (ws / "app.py").as_uri()
        open_doc(client, uri, pw.APP)
        await index_ready(client, local, remote, uri)
        client.workspace_did_change_watched_files(
            t.DidChangeWatchedFilesParams(
                changes=[t.FileEvent(uri=far.as_uri(), type=t.FileChangeType.Created)]
            )
        )
        await asyncio.sleep(0.5)
        for path in ESCALATIONS:
            await ask(client, local, uri, pw.APP_CURSOR, path)
        assert pw.PRIVATE[3].marker not in "\n".join(bodies(remote))
    finally:
        await stop(client)


async def test_item7_an_open_gitignored_document_feeds_no_remote_prompt(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    base = tmp_path / "base"
    ws = pw.build(base)
    cfg = pw.write_settings(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True), root=ws)
    try:
        gen = pw.PRIVATE[2]
        (ws / gen.alias).unlink()  # reachable only as an open document
        # Open (and edit) the ignored file: the editor holds it, as a neighbouring tab.
        ignored_uri = (base / gen.rel).as_uri()
        open_doc(client, ignored_uri, pw.body(gen.func, gen.marker) + "\n\ndef run(x):\n")
        uri = (ws / "app.py").as_uri()
        open_doc(client, uri, pw.APP)
        await index_ready(client, local, remote, uri)
        for path in ESCALATIONS:
            await ask(client, local, uri, pw.APP_CURSOR, path)
        # Completing inside the ignored file itself does not send it either.
        for path in ESCALATIONS:
            await ask(client, local, ignored_uri, pw.PRIVATE_CURSOR, path)
        assert gen.marker not in "\n".join(bodies(remote))
    finally:
        await stop(client)


# -- item 2: workspace settings that make every completion escalate ---------------------

WIDENING = {
    "local.model": "nonexistent:1b",
    "local.backend": "openai",
    "local.timeout": 0.1,
    "local.first_token_ms": 10,
    "local.total_ms": 10,
    "local.model_path": "models/evil.gguf",
    "routing.adaptive_step": 1.0,
    "routing.adaptive_every": 5,
}


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        section, name = key.split(".")
        out.setdefault(section, {})[name] = value
    return {"synconfroute": out}


@pytest.mark.parametrize("key", list(WIDENING))
async def test_item2_workspace_settings_cannot_make_completions_escalate(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI], key: str
) -> None:
    local, remote = fakes
    # Confident and valid, after 80 ms: under the user's settings it stays local.
    local.script(TokenScript.of(" value", " + 1", logprob=-0.05, first_delay=0.08), always=True)
    remote.script(REMOTE, always=True)
    ws = pw.build(tmp_path / "base")
    cfg = pw.write_settings(
        tmp_path, local_url=local.url, remote_url=remote.base_url, context="file"
    )
    client, _ = await start(
        cfg,
        capabilities("visual-studio-code", inline=True),
        root=ws,
        configuration=_nested({key: WIDENING[key]}),
    )
    try:
        uri = (ws / "lib" / "calc.py").as_uri()
        open_doc(client, uri, "def f(value):\n    return \n\n\ndef g(value):\n    return \n")
        for line in (1, 5, 1):
            await client.text_document_inline_completion_async(
                inline_request(uri, t.Position(line, 11))
            )
        assert bodies(remote) == [], key
        status = await client.workspace_execute_command_async(
            t.ExecuteCommandParams("synconfroute.status", [])
        )
        assert status["completions"] == 3
        refused = [m.message for m in client.messages if "refused" in m.message]
        assert refused and key in refused[0], client.messages
    finally:
        await stop(client)


# -- item 4: the start-up race; item 5: privacy settings fail closed -------------------


@pytest.mark.parametrize(
    "workspace",
    [{"privacy": {"local_only": True}}, {"privacy": {"never_send": ["lib/**"]}}],
    ids=["local_only", "never_send"],
)
async def test_item4_nothing_escalates_before_the_workspace_configuration(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI], workspace: dict[str, Any]
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    ws = pw.build(tmp_path / "base")
    cfg = pw.write_settings(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(
        cfg,
        capabilities("visual-studio-code", inline=True),
        root=ws,
        configuration={"synconfroute": workspace},
        configuration_delay_s=1.0,
    )
    try:
        uri = (ws / "lib" / "helpers.py").as_uri()
        open_doc(client, uri, pw.body("public_helper", pw.PUBLIC_MARKER))
        await ask(client, local, uri, pw.PRIVATE_CURSOR, "syntax-invalid")  # right away
        await asyncio.sleep(1.2)  # the answer has come: it applies
        await ask(client, local, uri, pw.PRIVATE_CURSOR, "syntax-invalid")
        assert bodies(remote) == []
    finally:
        await stop(client)


BROKEN = {
    "never_send-string": '[privacy]\nnever_send = "lib/**"\n',
    "local_only-string": '[privacy]\nlocal_only = "true"\n',
    "threshold-nan": "[routing]\nthreshold = nan\n",
    "toml-syntax-error": "[routing\nthreshold = -0.5\n",
}


@pytest.mark.parametrize("case", list(BROKEN))
async def test_item5_an_unreadable_privacy_value_fails_closed(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI], case: str
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    ws = pw.build(tmp_path / "base")
    if case == "toml-syntax-error":  # the remote comes from the environment
        cfg = tmp_path / "config.toml"
        cfg.write_text(
            f'[local]\nbackend = "ollama"\nurl = "{local.url}"\n[editor]\ndebounce_ms = 0\n'
            + BROKEN[case],
            encoding="utf-8",
        )
        env = {
            "SYNCONFROUTE_REMOTE_URL": remote.base_url,
            "SYNCONFROUTE_REMOTE_MODEL": "Qwen/Qwen2.5-Coder-32B-Instruct",
            "SYNCONFROUTE_REMOTE_API_KEY_ENV": "",
            "SYNCONFROUTE_LOCAL_URL": local.url,
            "SYNCONFROUTE_LOCAL_BACKEND": "ollama",
            "SYNCONFROUTE_LOCAL_MODEL": "qwen2.5-coder:3b",
        }
    else:
        extra = BROKEN[case] if case == "threshold-nan" else ""
        cfg = pw.write_settings(
            tmp_path, local_url=local.url, remote_url=remote.base_url, extra=extra
        )
        text = cfg.read_text(encoding="utf-8")
        if case == "never_send-string":
            text = re.sub(r"never_send = \[.*\]", 'never_send = "lib/**"', text)
        elif case == "local_only-string":
            text = text.replace("[privacy]\n", '[privacy]\nlocal_only = "true"\n')
        cfg.write_text(text, encoding="utf-8")
        env = {}
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True), root=ws, env=env)
    try:
        uri = (ws / "lib" / "helpers.py").as_uri()
        open_doc(client, uri, pw.body("public_helper", pw.PUBLIC_MARKER))
        for path in ("syntax-invalid", "low-confidence"):
            await ask(client, local, uri, pw.PRIVATE_CURSOR, path)
        assert bodies(remote) == [], case
        on = await client.workspace_execute_command_async(
            t.ExecuteCommandParams("synconfroute.toggleLocalOnly", [])
        )
        assert on is True  # the toggle cannot lift it either
        errors = [m for m in client.messages if m.type == t.MessageType.Error]
        assert len(errors) == 1 and "local-only" in errors[0].message, client.messages
        key = {"toml-syntax-error": "(file)", "threshold-nan": "routing.threshold"}.get(
            case, "privacy." + case.split("-")[0]
        )
        assert key in errors[0].message
    finally:
        await stop(client)
