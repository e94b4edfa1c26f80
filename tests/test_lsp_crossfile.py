"""Cross-file context through the real server over stdio, against the recording fakes
(issue 11, privacy): a secret file open in the editor and a `never_send` file that
defines the symbol at the cursor feed the local tier only; no remote request body ever
holds their content, whichever way the request escalates."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsprotocol import types as t

from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import capabilities, inline_request, open_doc, start, stop, write_config

pytestmark = pytest.mark.timeout(120)

KEYS = (
    "import hmac\n\n"
    "def sign_request(req, key):\n"
    "    '''PRIVATE-SALT-7f3a: sign with the house salt.'''\n"
    "    return hmac.new(key, req.body).hexdigest()\n"
)
UTIL = "def public_helper(req):\n    '''PUBLIC-MARKER-91c2'''\n    return req\n"
ENV = "API_TOKEN=hunter2-e2e-secret\nsign_request public_helper req key\n"
MAIN = (
    "from app.keys import sign_request\n"
    "from app.util import public_helper\n\n"
    "def send(req, key):\n"
    "    req = public_helper(req)\n"
    "    return sign_request(\n"
)
CURSOR = t.Position(5, 24)
CURSOR2 = t.Position(4, 28)  # another place: not a cache hit
LATE = "def sign_request(req, key, salt):\n    return 'LATE-MARKER'\n"
SECRETS = ("PRIVATE-SALT-7f3a", "hunter2-e2e-secret")
LOW = TokenScript.of(" req", ",", " key", logprob=-3.0)  # unconfident
INVALID = TokenScript.of("req, key))", logprob=-0.01)  # confident, one ')' too many
REMOTE = TokenScript.of("req, key)", logprob=-0.01)


def prompts(fake: FakeOllama | FakeOpenAI, path: str) -> list[str]:
    return [str(json.loads(r.body).get("prompt", "")) for r in fake.received(path)]


async def test_private_files_never_reach_a_remote_prompt(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "app").mkdir(parents=True)
    (ws / "app" / "keys.py").write_text(KEYS, encoding="utf-8")
    (ws / "app" / "util.py").write_text(UTIL, encoding="utf-8")
    (ws / ".env").write_text(ENV, encoding="utf-8")
    main = ws / "app" / "main.py"
    main.write_text(MAIN, encoding="utf-8")
    with FakeOllama() as local, FakeOpenAI() as remote:
        remote.script(REMOTE, always=True)
        cfg = write_config(
            tmp_path,
            local_url=local.url,
            remote_url=remote.base_url,
            extra='[completion]\ncontext = "workspace"\n[privacy]\nnever_send = ["app/keys.py"]',
            remote_extra="send_context = true",
            # The configured total, not one sized from the fake's timings (issue 26).
            local_extra="first_token_target_ms = 0",
        )
        client, _ = await start(cfg, capabilities("visual-studio-code", inline=True), root=ws)
        try:
            open_doc(client, (ws / ".env").as_uri(), ENV, language="dotenv")
            open_doc(client, main.as_uri(), MAIN)
            # The index builds in the background: ask until the local prompt has it.
            for _ in range(50):
                local.script(LOW)
                await client.text_document_inline_completion_async(
                    inline_request(main.as_uri(), CURSOR)
                )
                if any("PRIVATE-SALT-7f3a" in p for p in prompts(local, "/api/generate")):
                    break
                await asyncio.sleep(0.1)
            # Escalation paths: low confidence (early), then syntax-invalid.
            local.script(INVALID)
            await client.text_document_inline_completion_async(
                inline_request(main.as_uri(), CURSOR2)
            )
            hover = await client.text_document_hover_async(
                t.HoverParams(t.TextDocumentIdentifier(main.as_uri()), CURSOR2)
            )
            # Watched files: a file written on disk joins the index once the client says so.
            regs = client.registrations  # type: ignore[attr-defined]
            assert [r.method for r in regs] == [t.WORKSPACE_DID_CHANGE_WATCHED_FILES]
            (ws / "app" / "late.py").write_text(LATE, encoding="utf-8")
            client.workspace_did_change_watched_files(
                t.DidChangeWatchedFilesParams(
                    [t.FileEvent((ws / "app" / "late.py").as_uri(), t.FileChangeType.Created)]
                )
            )
            for _ in range(50):
                local.script(LOW)
                await client.text_document_inline_completion_async(
                    inline_request(main.as_uri(), CURSOR)
                )
                if "LATE-MARKER" in prompts(local, "/api/generate")[-1]:
                    break
                await asyncio.sleep(0.1)
            late_prompt = prompts(local, "/api/generate")[-1]
        finally:
            await stop(client)
        local_prompts = prompts(local, "/api/generate")
        remote_prompts = prompts(remote, "/v1/completions")
    assert "LATE-MARKER" in late_prompt
    # The local tier may use both private files.
    assert any(all(s in p for s in SECRETS) for p in local_prompts)
    # Both escalations went out, with context: the public definition is there...
    assert len(remote_prompts) >= 2
    assert all("PUBLIC-MARKER-91c2" in p for p in remote_prompts[-2:])
    assert all("<|file_sep|>app/util.py\n" in p for p in remote_prompts[-2:])
    # ...and nothing of the private files, in any remote body.
    for body in remote.received("/v1/completions"):
        raw = body.body.decode("utf-8", "replace")
        for secret in SECRETS:
            assert secret not in raw
        assert "app/keys.py" not in raw and ".env" not in raw
    # The card says which files fed which tier.
    assert hover is not None and isinstance(hover.contents, t.MarkupContent)
    card = hover.contents.value
    assert "context from other files" in card and "`syntax-invalid`" in card
    assert "`app/keys.py`" in card and "`app/util.py`" in card
    line = next(ln for ln in card.split("\n") if "context from other files" in ln)
    keys_part = line.split("`app/keys.py`", 1)[1].split(",", 1)[0]
    assert "(local)" in keys_part and "remote" not in keys_part
