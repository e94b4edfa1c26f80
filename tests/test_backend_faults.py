"""Faults of issue 14 in the HTTP backends, against the fakes over real sockets.

- item 6: a server that ignores num_predict / max_tokens is cut on our side;
- item 12: 401/403, 429/503 (Retry-After) and connection failures back off per
  tier, said once, with no request while backing off (counted at the fake);
- item 14: an API key echoed in an error body reaches no error text, no
  `doctor` output and no route card.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import time
from collections.abc import AsyncGenerator
from contextlib import aclosing
from pathlib import Path

import pytest

from synconfroute.clients import (
    BackendError,
    BackendUnavailable,
    BadCredentials,
    Chunk,
    CompletionRequest,
)
from synconfroute.clients._backoff import retry_after
from synconfroute.clients.errors import ProtocolError
from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import DEFAULT_KEY_ENV, OpenAIBackend
from synconfroute.server.commands.cli import main
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.settings.config import Settings, merge
from synconfroute.server.vocab.card import route_card
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript, closed_port
from tests.files import existing

MODEL = "Qwen/Qwen2.5-Coder-32B-Instruct"
LOCAL = "qwen2.5-coder:3b"
KEY = "sk-faults-7c1e9a0b44d2f6e8-do-not-leak"
KEY_ENV = "SYNCONFROUTE_TEST_FAULTS_KEY"
REQ = CompletionRequest(prefix="def add(a, b):\n    ", suffix="\n\nprint(add(1, 2))\n")
MANY = [(f" t{i}", -0.1) for i in range(200)]


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEFAULT_KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)


async def drain(it: AsyncGenerator[Chunk, None]) -> list[Chunk]:
    async with aclosing(it) as chunks:
        return [c async for c in chunks]


def backing_off(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "backing off" in r.getMessage()]


# -- item 6: our own token cap --------------------------------------------------------
async def test_ollama_ignoring_num_predict_is_cut_at_max_tokens() -> None:
    with FakeOllama(default=TokenScript(tokens=MANY, delay=0.01)) as fake:
        fake.honour_num_predict = False
        b = OllamaBackend(fake.url, LOCAL, timeout=5)
        try:
            t0 = time.monotonic()
            done = await b.complete(
                CompletionRequest(prefix="x = ", suffix="\n", max_tokens=5, deadline=t0 + 10)
            )
            took = time.monotonic() - t0
        finally:
            await b.aclose()
        assert done.text == " t0 t1 t2 t3 t4" and len(done.tokens) == 5
        assert done.finish_reason == "length"
        gen = fake.received("/api/generate")[-1]
        # We hung up: the server stopped generating long before its 200 tokens.
        assert fake.wait_for(lambda: gen.disconnected)
        assert gen.tokens_sent < 20, gen.tokens_sent
        assert took < 1.0, took


async def test_ollama_honouring_num_predict_still_ends_with_length() -> None:
    with FakeOllama(default=TokenScript(tokens=MANY[:10])) as fake:
        b = OllamaBackend(fake.url, LOCAL, timeout=5)
        try:
            done = await b.complete(CompletionRequest(prefix="x = ", suffix="\n", max_tokens=3))
        finally:
            await b.aclose()
    assert done.text == " t0 t1 t2" and done.finish_reason == "length"


@pytest.mark.parametrize("stream", [True, False])
async def test_openai_ignoring_max_tokens_is_cut_at_max_tokens(stream: bool) -> None:
    script = TokenScript(tokens=MANY, delay=0.01 if stream else 0.0)
    with FakeOpenAI(honour_max_tokens=False, default=script) as fake:
        b = OpenAIBackend(fake.base_url, MODEL, api_key_env=None, stream=stream, timeout=5)
        try:
            t0 = time.monotonic()
            done = await b.complete(CompletionRequest(prefix="x", max_tokens=5, deadline=t0 + 10))
            took = time.monotonic() - t0
        finally:
            await b.aclose()
        assert done.text == " t0 t1 t2 t3 t4" and len(done.tokens) == 5
        assert done.finish_reason == "length"
        if stream:
            gen = fake.received("/v1/completions")[-1]
            assert fake.wait_for(lambda: gen.disconnected)
            assert gen.tokens_sent < 20, gen.tokens_sent
            assert took < 1.0, took


async def test_openai_cap_keeps_held_stop_prefix_out_of_nothing() -> None:
    """At the cap, text held back as a possible stop string start is released."""
    script = TokenScript.of("a", "b", "\n", "c", "d")
    with FakeOpenAI(honour_max_tokens=False, honour_stop=False, default=script) as fake:
        b = OpenAIBackend(fake.base_url, MODEL, api_key_env=None, timeout=5)
        try:
            done = await b.complete(CompletionRequest(prefix="x", max_tokens=3, stop=("\n\n",)))
        finally:
            await b.aclose()
    assert done.text == "ab\n" and done.finish_reason == "length"


# -- item 12: backoff -------------------------------------------------------------------
def test_retry_after_forms() -> None:
    assert retry_after("30") == 30
    assert retry_after(" 0 ") == 0
    assert retry_after(None) is None and retry_after("soon") is None
    now = time.time()
    date = email.utils.formatdate(now + 45, usegmt=True)
    got = retry_after(date, now=now)
    assert got is not None and 44 <= got <= 46
    assert retry_after(email.utils.formatdate(now - 60, usegmt=True), now=now) == 0
    assert retry_after("99999999") == 3600  # a bogus value does not stop us for years


@pytest.mark.parametrize("status", [429, 503])
async def test_openai_rate_limit_backs_off_for_retry_after(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with FakeOpenAI() as fake:
        fake.script(TokenScript(status=status, retry_after="30"), always=True)
        b = OpenAIBackend(fake.base_url, MODEL, api_key_env=None, timeout=5)
        try:
            errors: list[BackendError] = []
            for _ in range(20):
                with pytest.raises(BackendUnavailable) as info:
                    await b.complete(REQ)
                errors.append(info.value)
        finally:
            await b.aclose()
        assert len(fake.received("/v1/completions")) == 1
    assert not errors[0].sent_nothing
    assert all(e.sent_nothing and "backing off for 30 s more" in str(e) for e in errors[1:])
    assert f"HTTP {status}" in str(errors[-1])
    assert len(backing_off(caplog)) == 1
    assert not any("next URL" in r.getMessage() for r in caplog.records)


async def test_openai_retry_after_http_date_and_end_of_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with FakeOpenAI() as fake:
        fake.script(TokenScript(status=429, retry_after=email.utils.formatdate(time.time() + 2)))
        b = OpenAIBackend(fake.base_url, MODEL, api_key_env=None, timeout=5)
        try:
            with pytest.raises(BackendUnavailable):
                await b.complete(REQ)
            with pytest.raises(BackendUnavailable, match="backing off"):
                await b.complete(REQ)
            assert len(fake.received("/v1/completions")) == 1
            await asyncio.sleep(2.1)
            done = await b.complete(REQ)  # the hold is over: asked again, and it answers
            await b.complete(REQ)
        finally:
            await b.aclose()
        assert done.text == "return a + b"
        assert len(fake.received("/v1/completions")) == 3
    assert len(backing_off(caplog)) == 1
    assert len([r for r in caplog.records if "backoff over" in r.getMessage()]) == 1


async def test_openai_bad_key_backs_off_until_the_settings_change(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-wrong-key-0000")
    with FakeOpenAI(api_key=KEY) as fake:
        b = OpenAIBackend(fake.base_url, MODEL, api_key_env=KEY_ENV, timeout=5)
        try:
            for _ in range(10):
                with pytest.raises(BadCredentials) as info:
                    await b.complete(REQ)
        finally:
            await b.aclose()
        assert len(fake.received("/v1/completions")) == 1
        assert "until the settings change" in str(info.value) and info.value.sent_nothing
        assert len(backing_off(caplog)) == 1
        # New settings build a new backend: it asks again (and now gets in).
        monkeypatch.setenv(KEY_ENV, KEY)
        b = OpenAIBackend(fake.base_url, MODEL, api_key_env=KEY_ENV, timeout=5)
        try:
            done = await b.complete(REQ)
        finally:
            await b.aclose()
        assert done.text == "return a + b"
        assert len(fake.received("/v1/completions")) == 2


async def test_openai_connection_refused_backs_off_briefly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    b = OpenAIBackend(url, MODEL, api_key_env=None, timeout=5)
    try:
        with pytest.raises(BackendUnavailable) as first:
            await b.complete(REQ)
        with pytest.raises(BackendUnavailable) as second:
            await b.complete(REQ)
        await asyncio.sleep(0.6)
        with pytest.raises(BackendUnavailable) as third:
            await b.complete(REQ)
    finally:
        await b.aclose()
    assert "cannot connect" in str(first.value) and "backing off" not in str(first.value)
    assert "no request sent" in str(second.value) and second.value.sent_nothing
    assert "backing off" not in str(third.value)  # the short hold ended: tried again
    assert first.value.sent_nothing  # refused: nothing left the machine
    assert len(backing_off(caplog)) == 1
    assert not any("next URL" in r.getMessage() for r in caplog.records)


async def test_openai_failover_skips_a_url_that_backs_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with FakeOpenAI() as limited, FakeOpenAI() as healthy:
        limited.script(TokenScript(status=429, retry_after="30"), always=True)
        b = OpenAIBackend([limited.base_url, healthy.base_url], MODEL, api_key_env=None)
        try:
            for _ in range(5):
                done = await b.complete(REQ)
                assert done.text == "return a + b"
        finally:
            await b.aclose()
        assert len(limited.received("/v1/completions")) == 1
        assert len(healthy.received("/v1/completions")) == 5


@pytest.mark.parametrize("status", [429, 503])
async def test_ollama_busy_backs_off_for_retry_after(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeOllama() as fake:
        fake.script(TokenScript(status=status, retry_after="30"), always=True)
        b = OllamaBackend(fake.url, LOCAL, timeout=5)
        try:
            for _ in range(10):
                with pytest.raises(BackendUnavailable) as info:
                    await b.complete(REQ)
        finally:
            await b.aclose()
        assert len(fake.received("/api/generate")) == 1
    assert info.value.sent_nothing and "backing off for 30 s more" in str(info.value)
    assert len(backing_off(caplog)) == 1


async def test_ollama_refused_by_a_proxy_backs_off(caplog: pytest.LogCaptureFixture) -> None:
    with FakeOllama() as fake:
        fake.script(TokenScript(status=401, body={"error": "unauthorized"}), always=True)
        b = OllamaBackend(fake.url, LOCAL, timeout=5)
        try:
            for _ in range(10):
                with pytest.raises(BadCredentials):
                    await b.complete(REQ)
        finally:
            await b.aclose()
        assert len(fake.received("/api/generate")) == 1
    assert len(backing_off(caplog)) == 1


async def test_ollama_down_backs_off_briefly(caplog: pytest.LogCaptureFixture) -> None:
    b = OllamaBackend(f"http://127.0.0.1:{closed_port()}", LOCAL, timeout=5)
    try:
        with pytest.raises(BackendUnavailable) as first:
            await b.complete(REQ)
        with pytest.raises(BackendUnavailable) as second:
            await b.complete(REQ)
    finally:
        await b.aclose()
    assert "cannot reach Ollama" in str(first.value)
    assert second.value.sent_nothing and "no request sent" in str(second.value)
    assert len(backing_off(caplog)) == 1


def ctx() -> CompletionContext:
    return CompletionContext(
        prefix="def add(a, b):\n    return ",
        suffix="\n\n\nprint(add(1, 2))\n",
        language="python",
        path=existing("/repo/app/calc.py"),
    )


@pytest.mark.parametrize("backpressure", [False, True])
async def test_pipeline_while_remote_backs_off_counts_nothing_sent(backpressure: bool) -> None:
    """After a 429 with Retry-After, nothing is sent: the client's own backoff fails the
    request at once, or (routing.backpressure, the default) the router does not even ask."""
    with FakeOllama() as local, FakeOpenAI() as remote:
        local.script(TokenScript.of(" a", " +", " (b", logprob=-0.05), always=True)  # invalid
        remote.script(TokenScript(status=429, retry_after="30"), always=True)
        s, _ = merge(Settings(), {"routing": {"backpressure": backpressure}})
        p = Pipeline(
            s,
            OllamaBackend(local.url, LOCAL, timeout=5),
            OpenAIBackend(remote.base_url, MODEL, api_key_env=None, timeout=5),
            make_gate(s.routing),
        )
        try:
            first = await p.complete(ctx())
            other = CompletionContext(
                prefix="def sub(a, b):\n    return ", suffix="\n", language="python"
            )
            second = await p.complete(other)
        finally:
            for backend in (p.local, p.remote):
                assert backend is not None
                await backend.aclose()
        assert len(remote.received("/v1/completions")) == 1
    assert first.bytes_sent > 0  # the 429'd request did leave
    assert second.bytes_sent == 0 and second.route == "none"
    if backpressure:
        assert second.reasons == ("syntax-invalid", "cluster-busy")
        assert "shedding load (429)" in second.load
    else:
        assert any("backing off" in e for e in second.errors)


# -- item 14: the key never shows ---------------------------------------------------------
@pytest.mark.parametrize(
    ("script", "kind"),
    [
        (TokenScript(status=500, echo_headers=True), BackendUnavailable),
        (TokenScript(status=401, echo_headers=True), BadCredentials),
        (TokenScript(status=400, echo_headers=True), BackendError),
        (TokenScript(status=200, echo_headers=True), ProtocolError),  # a proxy's 200 page
        # The key straddles the 200-character cut of a plain-text body.
        (TokenScript(status=500, body=("y" * 190 + KEY).encode()), BackendUnavailable),
    ],
)
async def test_echoed_key_is_scrubbed_from_errors(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    script: TokenScript,
    kind: type[BackendError],
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeOpenAI() as fake:
        fake.script(script)
        b = OpenAIBackend(fake.base_url, MODEL, api_key_env=KEY_ENV, stream=False, timeout=5)
        try:
            with pytest.raises(kind) as info:
                await b.complete(REQ)
        finally:
            await b.aclose()
        assert fake.received("/v1/completions")[-1].headers["authorization"] == f"Bearer {KEY}"
    exc = info.value
    texts = [str(exc), exc.message, exc.hint, repr(exc.args), caplog.text]
    for text in texts:
        assert KEY[:10] not in text, text


def test_scrub_catches_authorization_values_it_was_never_told() -> None:
    from synconfroute.clients.errors import scrub

    text = 'upstream: {"Authorization": "Bearer abcdefgh12345678", "proxy-authorization": "x"}'
    out = scrub(text)
    assert "abcdefgh12345678" not in out and '"x"' not in out
    assert scrub("a basic bearer of news") == "a basic bearer of news"  # prose is kept


def test_doctor_does_not_show_an_echoed_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeOllama() as local, FakeOpenAI(api_key=KEY) as remote:
        # A proxy answering 200 with a plain-text page that echoes our headers.
        remote.script(TokenScript(status=200, echo_headers=True), always=True)
        cfg = tmp_path / "config.toml"
        cfg.write_text(
            f'[local]\nbackend = "ollama"\nurl = "{local.url}"\n'
            f'[remote]\nurl = "{remote.base_url}"\nmodel = "{MODEL}"\napi_key_env = "{KEY_ENV}"\n',
            encoding="utf-8",
        )
        for extra in ([], ["--json"]):
            code = main(["--config", str(cfg), "doctor", *extra])
            out = capsys.readouterr().out
            assert code == 1, out
            assert "test completion failed" in out
            assert KEY[:10] not in out, out
        assert remote.received("/v1/completions")  # the echo did come back


async def test_route_card_does_not_show_an_echoed_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeOllama() as local, FakeOpenAI() as remote:
        local.script(TokenScript.of(" a", " +", " (b", logprob=-0.05))  # invalid: escalate
        remote.script(TokenScript(status=200, echo_headers=True))
        s = Settings()
        p = Pipeline(
            s,
            OllamaBackend(local.url, LOCAL, timeout=5),
            OpenAIBackend(remote.base_url, MODEL, api_key_env=KEY_ENV, timeout=5),
            make_gate(s.routing),
        )
        try:
            rec = await p.complete(ctx())
        finally:
            for backend in (p.local, p.remote):
                assert backend is not None
                await backend.aclose()
    card = route_card(rec)
    assert "problem: remote" in card
    assert KEY[:10] not in card and all(KEY[:10] not in e for e in rec.errors)


def test_connection_backoff_comes_back_to_a_loopback_server_sooner() -> None:
    import logging

    from synconfroute.clients._backoff import LOOPBACK_MAX_S, MAX_S, Backoff
    from synconfroute.clients.errors import BackendUnavailable

    now = [0.0]
    b = Backoff("test", logging.getLogger("test"), clock=lambda: now[0])
    err = BackendUnavailable("down")
    for target in ("http://127.0.0.1:11434", "http://gpu-cluster:8000/v1"):
        for _ in range(10):  # a long streak of failures
            b.failed(target, err, "connect")
            now[0] += 100
            b.held(target)  # expired: the next failure grows the hold
    b.failed("http://127.0.0.1:11434", err, "connect")
    b.failed("http://gpu-cluster:8000/v1", err, "connect")
    now[0] += LOOPBACK_MAX_S + 0.01
    assert b.held("http://127.0.0.1:11434") is None
    assert b.held("http://gpu-cluster:8000/v1") is not None
    now[0] += MAX_S
    assert b.held("http://gpu-cluster:8000/v1") is None
