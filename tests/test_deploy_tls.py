"""An organisation's network (issue 39): TLS with a private CA made in the test (trustme),
mutual TLS, a proxy that speaks CONNECT over a real socket, and gateway headers, each
through the real server over stdio against the fake vLLM wrapped in TLS.

The unknown-CA case gives a clear error (naming the certificate problem and
remote.ca_file) on the hover card, in status and in the editor's messages, keeps the
local answer, and sends nothing: the fake never reads a request. Before this change
there was no remote.ca_file, client certificate, proxy or headers setting (unknown keys),
and the unknown CA failed as "cannot connect (...)" with the hint to start the server.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trustme
from lsprotocol import types as t

from synconfroute.clients.connection import Connection, proxy_for
from synconfroute.clients.errors import BackendUnavailable
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.clients.plan import dataset_plan
from synconfroute.clients.types import CompletionRequest
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.fakes.proxy import ConnectProxy
from tests.lsp_harness import (
    ROOT,
    capabilities,
    inline_request,
    open_doc,
    start,
    stop,
    workspace_file,
    write_config,
)

pytestmark = pytest.mark.timeout(180)

TEXT = "def add(a, b):\n    return \n"
URI = workspace_file("src/calc.py").as_uri()  # a file that exists: the gate sends no other
CURSOR = t.Position(1, 11)
UNSURE = TokenScript.of(" a", " * 2", logprob=-4.0)  # escalates
REMOTE = TokenScript.of(" a", " + b", logprob=-0.01)
TEAM_KEY = "tk-9d2e71c4b5"


class Pki:
    """A CA, the fake cluster's certificate, and a client certificate, all from the CA."""

    def __init__(self, folder: Path) -> None:
        self.ca = trustme.CA()
        self.server = self.ca.issue_cert("127.0.0.1", "localhost")
        self.client = self.ca.issue_cert("alice@corp.example")
        self.ca_file = folder / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        self.client_cert = folder / "client.pem"
        self.client.cert_chain_pems[0].write_to_path(str(self.client_cert))
        self.client_key = folder / "client.key"
        self.client.private_key_pem.write_to_path(str(self.client_key))

    def server_context(self, *, mutual: bool = False) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.server.configure_cert(ctx)
        if mutual:
            ctx.verify_mode = ssl.CERT_REQUIRED
            self.ca.configure_trust(ctx)
        return ctx


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


def tls_fake(pki: Pki, *, mutual: bool = False) -> FakeOpenAI:
    fake = FakeOpenAI(default=REMOTE)
    fake.ssl_context = pki.server_context(mutual=mutual)
    return fake


@pytest.fixture
def local() -> Iterator[FakeOllama]:
    with FakeOllama() as fake:
        fake.script(UNSURE, always=True)
        yield fake


async def ask(
    tmp_path: Path,
    local: FakeOllama,
    remote: FakeOpenAI,
    remote_extra: str,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One escalating completion through the real server; what the editor saw."""
    await asyncio.to_thread(tmp_path.mkdir, parents=True, exist_ok=True)
    cfg = write_config(
        tmp_path, local_url=local.url, remote_url=remote.base_url, remote_extra=remote_extra
    )
    state = tmp_path / "state"
    client, _ = await start(
        cfg,
        capabilities("visual-studio-code", inline=True),
        env={"XDG_STATE_HOME": str(state), **(env or {})},
    )
    try:
        open_doc(client, URI, TEXT)
        got = await client.text_document_inline_completion_async(inline_request(URI, CURSOR))
        hover = await client.text_document_hover_async(
            t.HoverParams(t.TextDocumentIdentifier(URI), CURSOR)
        )
        status = await client.workspace_execute_command_async(
            t.ExecuteCommandParams("synconfroute.status", [])
        )
        await asyncio.sleep(0.3)
    finally:
        await stop(client)
    logs = "\n".join(f.read_text(errors="replace") for f in state.rglob("*.log*"))
    return {
        "text": got.items[0].insert_text if got is not None and got.items else None,
        "hover": hover.contents.value if hover is not None else "",  # type: ignore[union-attr]
        "status": status,
        "messages": "\n".join(m.message for m in client.messages),
        "logs": logs,
    }


def requests(fake: FakeOpenAI) -> int:
    return len(fake.received("/v1/completions"))


async def test_private_ca_escalates(tmp_path: Path, pki: Pki, local: FakeOllama) -> None:
    with tls_fake(pki) as remote:
        assert remote.base_url.startswith("https://")
        got = await ask(tmp_path, local, remote, f'ca_file = "{pki.ca_file}"')
    assert requests(remote) == 1, got
    assert got["text"] == " a + b", got
    assert got["status"]["remote_problem"] is None, got["status"]


async def test_unknown_ca_gives_a_clear_error_and_sends_nothing(
    tmp_path: Path, pki: Pki, local: FakeOllama
) -> None:
    with tls_fake(pki) as remote:
        got = await ask(tmp_path, local, remote, "")
        # doctor says the same, naming the setting.
        cfg = tmp_path / "config.toml"
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "synconfroute", "--config", str(cfg), "doctor"],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    assert remote.received() == [], "the fake read a request over an untrusted handshake"
    assert got["text"] == " a * 2", got  # the local answer stays
    for where in ("hover", "messages"):
        assert "not trusted" in got[where] and "remote.ca_file" in got[where], (where, got)
    problem = got["status"]["remote_problem"]
    assert problem and "remote.ca_file" in problem and "certificate" in problem, got["status"]
    assert "remote.ca_file" in done.stdout and "not trusted" in done.stdout, done.stdout


async def test_mutual_tls(tmp_path: Path, pki: Pki, local: FakeOllama) -> None:
    with tls_fake(pki, mutual=True) as remote:
        ok = await ask(
            tmp_path,
            local,
            remote,
            f'ca_file = "{pki.ca_file}"\nclient_cert = "{pki.client_cert}"\n'
            f'client_key = "{pki.client_key}"',
        )
        assert requests(remote) == 1 and ok["text"] == " a + b", ok
        no_cert = await ask(tmp_path / "n", local, remote, f'ca_file = "{pki.ca_file}"')
    assert requests(remote) == 1, "a request without a client certificate was read"
    assert no_cert["text"] == " a * 2", no_cert
    assert "remote.client_cert" in no_cert["hover"], no_cert
    assert "remote.client_cert" in (no_cert["status"]["remote_problem"] or ""), no_cert


async def test_proxy_with_connect_and_never_for_the_local_tier(
    tmp_path: Path, pki: Pki, local: FakeOllama
) -> None:
    with tls_fake(pki) as remote, ConnectProxy() as proxy:
        # The environment's proxies too: the local tier must not take them.
        env = {"HTTP_PROXY": proxy.url, "HTTPS_PROXY": proxy.url, "ALL_PROXY": proxy.url}
        got = await ask(
            tmp_path,
            local,
            remote,
            f'ca_file = "{pki.ca_file}"\nproxy = "{proxy.url}"',
            env=env,
        )
    assert got["text"] == " a + b" and requests(remote) == 1, got
    target = f"127.0.0.1:{remote.port}"
    assert proxy.connects() and set(proxy.connects()) == {target}, proxy.lines
    assert proxy.plain() == [], proxy.lines  # no local request went through it
    assert local.received("/api/generate"), "the local tier was not asked directly"


def test_environment_proxy_and_no_proxy(pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where remote.proxy is unset, HTTPS_PROXY carries the request (CONNECT), unless
    NO_PROXY names the host; `none` ignores the environment."""
    request = CompletionRequest(
        prefix="def f():\n    return", suffix="\n", max_tokens=4, plan=dataset_plan("t", 20)
    )

    async def one(conn: Connection, url: str) -> None:
        backend = OpenAIBackend(url, "Qwen/Qwen2.5-Coder-32B-Instruct", connection=conn)
        try:
            done = await backend.complete(attrs.evolve(request, deadline=time.monotonic() + 30))
            assert done.text
        finally:
            await backend.aclose()

    with tls_fake(pki) as remote, ConnectProxy() as proxy:
        conn = Connection(ca_file=str(pki.ca_file))
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        assert proxy_for(remote.base_url, "") == proxy.url
        asyncio.run(one(conn, remote.base_url))
        assert len(proxy.connects()) == 1
        monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
        assert proxy_for(remote.base_url, "") is None
        asyncio.run(one(conn, remote.base_url))
        monkeypatch.delenv("NO_PROXY")
        asyncio.run(one(Connection(ca_file=str(pki.ca_file), proxy="none"), remote.base_url))
        assert len(proxy.connects()) == 1 and requests(remote) == 3, proxy.lines


def test_setup_errors_name_the_setting(tmp_path: Path, pki: Pki) -> None:
    """A CA file that is not there, or a key without its certificate: every request is
    refused before anything is sent, with a message naming the setting."""

    async def refused(conn: Connection) -> str:
        backend = OpenAIBackend("https://127.0.0.1:9/v1", "m", connection=conn)
        try:
            await backend.complete(
                CompletionRequest(prefix="x", suffix="", max_tokens=2, plan=dataset_plan("t", 1))
            )
        except BackendUnavailable as exc:
            assert exc.sent_nothing
            return str(exc)
        finally:
            await backend.aclose()
        raise AssertionError("not refused")

    assert "remote.ca_file" in asyncio.run(refused(Connection(ca_file=str(tmp_path / "no.pem"))))
    assert "remote.client_cert" in asyncio.run(refused(Connection(client_key=str(pki.client_key))))
    assert "remote.client_cert" in asyncio.run(
        refused(Connection(client_cert=str(pki.ca_file), client_key=str(pki.client_key)))
    )
    assert "TEAM_KEY_UNSET" in asyncio.run(
        refused(Connection(headers={"x-api-key": "${TEAM_KEY_UNSET}"}))
    )
    assert "remote.proxy" in asyncio.run(refused(Connection(proxy="socks5://127.0.0.1:1")))


async def test_gateway_headers_sent_and_masked(
    tmp_path: Path, pki: Pki, local: FakeOllama, capfd: pytest.CaptureFixture[str]
) -> None:
    """remote.headers reach the cluster, a `${VAR}` value read from the environment; when
    a gateway echoes them back in an error page, the secret is masked everywhere."""
    with tls_fake(pki) as remote:
        remote.script(REMOTE, TokenScript(status=401, body=None, echo_headers=True))
        extra = (
            f'ca_file = "{pki.ca_file}"\n'
            'headers = { "x-litellm-team" = "ml", "x-api-key" = "${TEAM_KEY}" }'
        )
        cfg = write_config(
            tmp_path, local_url=local.url, remote_url=remote.base_url, remote_extra=extra
        )
        state = tmp_path / "state"
        client, _ = await start(
            cfg,
            capabilities("visual-studio-code", inline=True),
            env={"XDG_STATE_HOME": str(state), "TEAM_KEY": TEAM_KEY},
        )
        try:
            open_doc(client, URI, TEXT)
            await client.text_document_inline_completion_async(inline_request(URI, CURSOR))
            client.text_document_did_change(
                t.DidChangeTextDocumentParams(
                    text_document=t.VersionedTextDocumentIdentifier(version=2, uri=URI),
                    content_changes=[t.TextDocumentContentChangeWholeDocument(text=TEXT + "\n")],
                )
            )
            await client.text_document_inline_completion_async(inline_request(URI, CURSOR))
            hover = await client.text_document_hover_async(
                t.HoverParams(t.TextDocumentIdentifier(URI), CURSOR)
            )
            status = await client.workspace_execute_command_async(
                t.ExecuteCommandParams("synconfroute.status", [])
            )
            await asyncio.sleep(0.3)
        finally:
            await stop(client)
    sent = remote.received("/v1/completions")
    assert len(sent) == 2, sent
    assert sent[0].headers.get("x-api-key") == TEAM_KEY
    assert sent[0].headers.get("x-litellm-team") == "ml"
    shown = "\n".join(
        [
            hover.contents.value if hover is not None else "",  # type: ignore[union-attr]
            str(status),
            "\n".join(m.message for m in client.messages),
            "\n".join(f.read_text(errors="replace") for f in state.rglob("*.log*")),
            capfd.readouterr().err,
        ]
    )
    assert "401" in shown, shown[-3000:]  # the refusal was reported
    assert TEAM_KEY not in shown, shown[-3000:]


def test_doctor_shows_the_proxy_each_cluster_url_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    from synconfroute.server.commands.doctor import connection_lines
    from synconfroute.server.settings.config import RemoteSettings

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    remote = RemoteSettings(
        urls=["https://gpu.example/v1", "https://llm.internal.example/v1"],
        headers={"x-api-key": "${K}"},
    )
    text = "\n".join(connection_lines(remote))
    assert "https://gpu.example/v1: through the proxy http://proxy.corp.example:3128" in text
    assert "(from the environment (HTTPS_PROXY))" in text
    assert "https://llm.internal.example/v1: direct" in text
    assert "extra headers: x-api-key (values not shown)" in text
    remote = attrs.evolve(remote, proxy="none")
    assert "remote.proxy is none" in "\n".join(connection_lines(remote))


def test_settings_never_print_a_credential_header(tmp_path: Path) -> None:
    from synconfroute.server.commands.settings_view import format_text
    from synconfroute.server.settings import config

    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[remote]\nheaders = { "x-api-key" = "literal-7731", "x-team" = "ml", '
        '"x-user-token" = "${TOKEN}" }\n',
        encoding="utf-8",
    )
    text = format_text(config.load(cfg, environ={}))
    assert "literal-7731" not in text, text
    assert 'x-api-key = "***"' in text and 'x-team = "ml"' in text, text
    assert 'x-user-token = "${TOKEN}"' in text, text
