"""Secrets in URLs (issue 34, item 7): a user name or password in `remote.url(s)` is
refused with an error that says where the key goes (remote.api_key_env), and every URL
we print or log has its userinfo and query secrets masked: status, settings, doctor, the
log, and httpx's own "HTTP Request: POST <url>" line.

Before the fix, `https://user:pass@host/v1` was accepted: httpx sent Basic auth in place
of the Bearer key and logged the URL at INFO, to stderr and the log file; `status`,
`settings` and `doctor` printed it whole.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from lsprotocol import types as t

from synconfroute.clients.errors import scrub
from synconfroute.clients.urls import MaskUrls, has_userinfo, install_log_masking, mask_url
from synconfroute.server.settings import config
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import ROOT, capabilities, inline_request, open_doc, start, stop

PASSWORD = "pw-7f3a9c1e"
QUERY_SECRET = "qs-51d0b2aa"
TEXT = "def add(a, b):\n    return \n"
CURSOR = t.Position(1, 11)
URI = (ROOT / "src" / "calc.py").as_uri()

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        (f"https://alice:{PASSWORD}@gpu:8000/v1", "https://***@gpu:8000/v1"),
        (f"https://{PASSWORD}@gpu/v1", "https://***@gpu/v1"),
        (
            f"https://gpu/v1?api_key={QUERY_SECRET}&region=eu",
            "https://gpu/v1?api_key=***&region=eu",
        ),
        (f"https://gpu/v1?X-Amz-Signature={QUERY_SECRET}", "https://gpu/v1?X-Amz-Signature=***"),
        ("http://gpu-cluster:8000/v1", "http://gpu-cluster:8000/v1"),
    ],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked
    assert PASSWORD not in scrub(f"failed: {url}: refused") and QUERY_SECRET not in scrub(url)


def test_userinfo_is_seen_only_in_the_authority() -> None:
    assert has_userinfo("https://u:p@h/v1") and has_userinfo("http://u@h")
    assert not has_userinfo("https://h/v1/models@latest") and not has_userinfo("https://h/v1?a=@")


@pytest.mark.parametrize("key", ["url", "urls"])
def test_userinfo_in_remote_url_is_refused_naming_api_key_env(tmp_path: Path, key: str) -> None:
    url = f"https://alice:{PASSWORD}@gpu:8000/v1"
    value = f'"{url}"' if key == "url" else f'["http://ok:8000/v1", "{url}"]'
    path = tmp_path / "config.toml"
    path.write_text(f'[remote]\n{key} = {value}\nmodel = "m"\n', encoding="utf-8")
    loaded = config.load(path, environ={})
    assert loaded.settings.remote.all_urls == []  # refused: no remote tier, nothing leaves
    assert not loaded.settings.remote.configured
    (issue,) = [i for i in loaded.issues if i.key == f"remote.{key}"]
    assert "remote.api_key_env" in issue.message, issue
    assert PASSWORD not in str(issue), issue
    # The environment is refused the same way.
    env = config.load(path.with_name("none.toml"), environ={"SYNCONFROUTE_REMOTE_URL": url})
    assert env.settings.remote.url == "" and any("api_key_env" in str(i) for i in env.issues)


def test_settings_and_doctor_mask_query_secrets(tmp_path: Path) -> None:
    """`settings` and `doctor` (the real CLI) never print a URL's query secret."""
    with FakeOpenAI() as remote:
        url = f"{remote.base_url}?api_key={QUERY_SECRET}"
        cfg = tmp_path / "config.toml"
        cfg.write_text(
            f'[local]\nbackend = "ollama"\nurl = "http://127.0.0.1:9"\n'
            f'[remote]\nurl = "{url}"\nmodel = "m"\napi_key_env = ""\ntimeout = 2\n',
            encoding="utf-8",
        )
        for args in (["settings"], ["settings", "--json"], ["doctor"], ["doctor", "--json"]):
            done = subprocess.run(
                [sys.executable, "-m", "synconfroute", "--config", str(cfg), *args],
                capture_output=True,
                text=True,
                timeout=120,
                env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)},
            )
            out = done.stdout + done.stderr
            assert "api_key=***" in out, (args, out[-3000:])
            assert QUERY_SECRET not in out, (args, out[-3000:])


async def test_httpx_request_line_is_masked() -> None:
    """httpx logs "HTTP Request: GET <url> ..." at INFO; with the masking installed (as
    `synconfroute` does at start) the line names the URL without its query secret."""
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(self.format(record))

    handler = Keep(logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        install_log_masking()
        with FakeOpenAI() as remote:
            async with httpx.AsyncClient() as client:
                await client.get(f"{remote.base_url}/models?token={QUERY_SECRET}")
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        for name in ("httpx", "httpcore"):
            logging.getLogger(name).filters = [
                f for f in logging.getLogger(name).filters if not isinstance(f, MaskUrls)
            ]
    lines = [s for s in seen if "HTTP Request" in s]
    assert lines and "token=***" in lines[0], seen
    assert not any(QUERY_SECRET in s for s in seen), seen


async def test_userinfo_url_through_the_real_server(
    tmp_path: Path,
    fakes: tuple[FakeOllama, FakeOpenAI],
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The server over stdio, a remote URL with a password and a local answer that would
    escalate: the user is told to use remote.api_key_env, nothing is sent, and the
    password is in no log, message, status or stderr."""
    local, remote = fakes
    local.script(TokenScript.of(" a", " * 2", logprob=-4.0), always=True)
    state = tmp_path / "state"
    host = remote.base_url.split("://", 1)[1]
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        f'[local]\nbackend = "ollama"\nurl = "{local.url}"\nmodel = "qwen2.5-coder:3b"\n'
        f'[remote]\nurl = "http://alice:{PASSWORD}@{host}"\n'
        'model = "Qwen/Qwen2.5-Coder-32B-Instruct"\napi_key_env = ""\ntimeout = 5\n'
        "[editor]\ndebounce_ms = 0\nadaptive_debounce = false\n",
        encoding="utf-8",
    )
    client, _ = await start(
        cfg,
        capabilities("visual-studio-code", inline=True),
        env={"XDG_STATE_HOME": str(state)},
    )
    try:
        open_doc(client, URI, TEXT)
        for _ in range(3):
            await client.text_document_inline_completion_async(inline_request(URI, CURSOR))
        status = await client.workspace_execute_command_async(
            t.ExecuteCommandParams("synconfroute.status", [])
        )
        await asyncio.sleep(0.2)
    finally:
        await stop(client)
    assert remote.received("/v1/completions") == []
    messages = [m.message for m in client.messages]
    assert any("remote.api_key_env" in m for m in messages), messages
    logs = "\n".join(f.read_text(errors="replace") for f in state.rglob("*.log*"))
    everything = "\n".join([*messages, str(status), logs, capfd.readouterr().err])
    assert PASSWORD not in everything, everything[-3000:]
