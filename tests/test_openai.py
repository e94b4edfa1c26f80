"""OpenAIBackend against FakeOpenAI (vLLM's wire protocol over a real socket)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import aclosing

import pytest

from synconfroute.clients import (
    Backend,
    BackendTimeout,
    BackendUnavailable,
    BadCredentials,
    Chunk,
    CompletionRequest,
    ModelNotFound,
    ProtocolError,
    RequestRejected,
)
from synconfroute.clients.openai import DEFAULT_KEY_ENV, OpenAIBackend
from synconfroute.clients.templates import QWEN_CODER, STARCODER2
from synconfroute.server.commands.doctor import probe
from tests.fakes.http import Request, TokenScript, closed_port
from tests.fakes.openai import ErrorStyle, FakeOpenAI

MODEL = "Qwen/Qwen2.5-Coder-32B-Instruct"
KEY = "sk-test-5ecret-d0-not-leak"
KEY_ENV = "SYNCONFROUTE_TEST_REMOTE_KEY"
REQ = CompletionRequest(prefix="def add(a, b):\n    ", suffix="\n\nprint(add(1, 2))\n")


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEFAULT_KEY_ENV, raising=False)
    monkeypatch.delenv(KEY_ENV, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as f:
        yield f


@pytest.fixture
async def backend(fake: FakeOpenAI) -> AsyncIterator[OpenAIBackend]:
    b = OpenAIBackend(fake.base_url, MODEL, timeout=5.0)
    yield b
    await b.aclose()


def closed_url() -> str:
    """A base URL on a port nobody listens on (connection refused)."""
    return f"http://127.0.0.1:{closed_port()}/v1"


def last(fake: FakeOpenAI) -> Request:
    return fake.received("/v1/completions")[-1]


async def drain(it: AsyncGenerator[Chunk, None]) -> list[Chunk]:
    async with aclosing(it) as chunks:
        return [c async for c in chunks]


# -- happy paths ---------------------------------------------------------------
async def test_stream_happy_path(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    fake.script(TokenScript(tokens=[("return", -0.01), (" a", -0.2), (" +", -0.3), (" b", -0.05)]))
    chunks = await drain(backend.stream(REQ))

    assert isinstance(backend, Backend)
    assert "".join(c.text for c in chunks) == "return a + b"
    toks = [t for c in chunks for t in c.tokens]
    assert [(t.text, t.logprob) for t in toks] == [
        ("return", -0.01),
        (" a", -0.2),
        (" +", -0.3),
        (" b", -0.05),
    ]
    assert all(c.logprobs for c in chunks)
    assert chunks[-1].finish_reason == "stop"
    assert len(chunks) >= 4  # really streamed, one token per chunk

    body = last(fake).json()
    assert "suffix" not in body
    assert body["prompt"] == QWEN_CODER.render(REQ.prefix, REQ.suffix)
    assert body["model"] == MODEL
    assert body["max_tokens"] == REQ.max_tokens
    assert body["temperature"] == 0.0
    assert body["logprobs"] == 1
    assert body["stream"] is True
    assert body["skip_special_tokens"] is False
    assert body["stop"] == list(QWEN_CODER.stop)
    assert "authorization" not in last(fake).headers  # no key configured


async def test_complete_non_streaming(fake: FakeOpenAI) -> None:
    fake.script(TokenScript.of("return", " a", " +", " b", logprob=-0.25))
    b = OpenAIBackend(fake.base_url, MODEL, stream=False, timeout=5.0)
    try:
        done = await b.complete(REQ)
    finally:
        await b.aclose()
    assert done.text == "return a + b"
    assert [t.logprob for t in done.tokens] == [-0.25] * 4
    assert done.logprobs and done.finish_reason == "stop"
    assert (done.backend, done.model) == ("openai", MODEL)
    assert done.first_token_s is not None and done.total_s >= done.first_token_s
    req = last(fake)
    assert req.json()["stream"] is False
    assert done.bytes_sent == len(req.body)


async def test_request_stop_strings_are_separate_entries(
    fake: FakeOpenAI, backend: OpenAIBackend
) -> None:
    await backend.complete(CompletionRequest(prefix="x = ", stop=("\n\n", "\nclass ")))
    stop = last(fake).json()["stop"]
    assert stop == [*QWEN_CODER.stop, "\n\n", "\nclass "]


async def test_prefix_only_without_template() -> None:
    with FakeOpenAI(models=["my-general-llm"]) as fake:
        b = OpenAIBackend(fake.base_url, "my-general-llm", timeout=5.0)
        try:
            assert b.template is None
            done = await b.complete(REQ)
        finally:
            await b.aclose()
        body = last(fake).json()
    assert done.text == "return a + b"
    assert body["prompt"] == REQ.prefix
    assert "suffix" not in body and "skip_special_tokens" not in body
    assert body["stop"] == []


async def test_template_override(fake: FakeOpenAI) -> None:
    b = OpenAIBackend(fake.base_url, MODEL, template="starcoder2", timeout=5.0)
    try:
        await b.complete(REQ)
    finally:
        await b.aclose()
    body = last(fake).json()
    assert body["prompt"] == STARCODER2.render(REQ.prefix, REQ.suffix)
    assert body["stop"] == list(STARCODER2.stop)
    with pytest.raises(ValueError, match="unknown FIM template"):
        OpenAIBackend(fake.base_url, MODEL, template="nope")


async def test_template_off_sends_the_prefix_alone(fake: FakeOpenAI) -> None:
    b = OpenAIBackend(fake.base_url, MODEL, template="off", timeout=5.0)
    try:
        assert b.template is None
        await b.complete(REQ)
        report = await b.discover()
    finally:
        await b.aclose()
    body = last(fake).json()
    assert body["prompt"] == REQ.prefix and body["stop"] == []
    assert "skip_special_tokens" not in body
    assert report.prompt_mode == "prefix-only" and report.problems == ()


async def test_max_tokens_cuts_with_length(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    fake.script(TokenScript.of(*[f" t{i}" for i in range(10)]))
    done = await backend.complete(CompletionRequest(prefix="x", max_tokens=3))
    assert done.text == " t0 t1 t2"
    assert len(done.tokens) == 3
    assert done.finish_reason == "length"


async def test_minus_infinity_is_clamped(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    fake.script(TokenScript(tokens=[("a", float("-inf")), ("b", -1.5)]))
    done = await backend.complete(REQ)
    assert [t.logprob for t in done.tokens] == [-9999.0, -1.5]


async def test_missing_logprobs_are_reported(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    fake.script(TokenScript.of("a", "b", logprobs=False))
    done = await backend.complete(REQ)
    assert done.text == "ab"
    assert done.logprobs is False and done.tokens == ()


# -- auth ----------------------------------------------------------------------
async def test_bearer_key_sent_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeOpenAI(api_key=KEY) as fake:
        b = OpenAIBackend(fake.base_url, MODEL, api_key_env=KEY_ENV, timeout=5.0)
        try:
            done = await b.complete(REQ)
            assert done.text == "return a + b"
            assert last(fake).headers["authorization"] == f"Bearer {KEY}"
            assert b.has_key
            assert KEY not in repr(b) and KEY not in str(b)
            assert KEY_ENV in repr(b)
            # A server that echoes the key in an error: we scrub it.
            fake.script(TokenScript(status=400, body={"error": f"bad request for key {KEY}"}))
            with pytest.raises(RequestRejected) as info:
                await b.complete(REQ)
            assert KEY not in str(info.value) and "***" in str(info.value)
        finally:
            await b.aclose()


async def test_wrong_key_is_bad_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-wrong-key")
    with FakeOpenAI(api_key=KEY) as fake:
        b = OpenAIBackend(fake.base_url, MODEL, api_key_env=KEY_ENV, timeout=5.0)
        try:
            with pytest.raises(BadCredentials) as info:
                await b.complete(REQ)
        finally:
            await b.aclose()
    msg = str(info.value)
    assert "bad or missing API key" in msg and KEY_ENV in msg
    assert "sk-wrong-key" not in msg and KEY not in msg
    assert info.value.backend == "openai"


async def test_missing_key_says_which_variable_to_set() -> None:
    with FakeOpenAI(api_key=KEY) as fake:
        b = OpenAIBackend(fake.base_url, MODEL, timeout=5.0)
        try:
            with pytest.raises(BadCredentials) as info:
                await b.complete(REQ)
        finally:
            await b.aclose()
    assert f"set {DEFAULT_KEY_ENV}" in info.value.hint


# -- errors --------------------------------------------------------------------
@pytest.mark.parametrize("style", ["nested", "flat"])
async def test_unknown_model(style: ErrorStyle) -> None:
    with FakeOpenAI(models=["Qwen/Qwen2.5-Coder-7B", "other"], error_style=style) as fake:
        b = OpenAIBackend(fake.base_url, MODEL, timeout=5.0)
        try:
            with pytest.raises(ModelNotFound) as info:
                await b.complete(REQ)
        finally:
            await b.aclose()
    msg = str(info.value)
    assert f"The model `{MODEL}` does not exist." in msg
    assert "Qwen/Qwen2.5-Coder-7B, other" in info.value.hint


@pytest.mark.parametrize("style", ["nested", "flat"])
async def test_rejected_request_carries_server_message(style: ErrorStyle) -> None:
    with FakeOpenAI(max_model_len=100, error_style=style) as fake:
        b = OpenAIBackend(fake.base_url, MODEL, timeout=5.0)
        try:
            with pytest.raises(RequestRejected) as info:
                await b.complete(CompletionRequest(prefix="x" * 400, max_tokens=64))
            fake.script(TokenScript(status=422, error_message="temperature must be >= 0"))
            with pytest.raises(RequestRejected, match="temperature must be >= 0"):
                await b.complete(REQ)
        finally:
            await b.aclose()
    assert "maximum context length is 100 tokens" in str(info.value)
    assert "HTTP 400" in str(info.value)


@pytest.mark.parametrize("status", [500, 503])
async def test_server_error_is_unavailable(
    fake: FakeOpenAI, backend: OpenAIBackend, status: int
) -> None:
    fake.script(TokenScript(status=status, error_message="engine dead"))
    with pytest.raises(BackendUnavailable) as info:
        await backend.complete(REQ)
    assert f"{fake.base_url}: HTTP {status}: engine dead" in str(info.value)


async def test_wrong_base_url_is_explained(fake: FakeOpenAI) -> None:
    b = OpenAIBackend(fake.url, MODEL, timeout=5.0)  # forgot the /v1
    try:
        with pytest.raises(RequestRejected) as info:
            await b.complete(REQ)
    finally:
        await b.aclose()
    assert "ending in /v1" in info.value.hint


@pytest.mark.parametrize("stream", [True, False])
async def test_garbage_is_a_protocol_error(fake: FakeOpenAI, stream: bool) -> None:
    fake.script(TokenScript.of("a", "b", garbage=True))
    b = OpenAIBackend(fake.base_url, MODEL, stream=stream, timeout=5.0)
    try:
        with pytest.raises(ProtocolError, match="not JSON"):
            await b.complete(REQ)
    finally:
        await b.aclose()


async def test_wrong_shape_is_a_protocol_error(fake: FakeOpenAI) -> None:
    fake.script(TokenScript(status=200, body={"object": "text_completion", "result": "x"}))
    b = OpenAIBackend(fake.base_url, MODEL, stream=False, timeout=5.0)
    try:
        with pytest.raises(ProtocolError, match="without `choices`"):
            await b.complete(REQ)
    finally:
        await b.aclose()


async def test_mid_stream_error_after_tokens(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    fake.script(TokenScript.of("a", "b", "c", "d", error_after=2, error_message="CUDA error"))
    got: list[str] = []
    with pytest.raises(BackendUnavailable) as info:
        async with aclosing(backend.stream(REQ)) as chunks:
            async for c in chunks:
                got.append(c.text)
    assert "".join(got) == "ab"
    assert "CUDA error" in str(info.value)
    assert "middle of a completion" in str(info.value)


async def test_mid_stream_error_before_any_token_fails_over() -> None:
    with FakeOpenAI() as bad, FakeOpenAI() as good:
        bad.script(TokenScript.of("a", error_after=0, error_message="engine died"))
        b = OpenAIBackend([bad.base_url, good.base_url], MODEL, timeout=5.0)
        try:
            done = await b.complete(REQ)
        finally:
            await b.aclose()
    assert done.text == "return a + b"
    assert len(bad.received("/v1/completions")) == 1


async def test_connection_refused() -> None:
    url = closed_url()
    b = OpenAIBackend(url, MODEL, timeout=5.0)
    try:
        with pytest.raises(BackendUnavailable) as info:
            await b.complete(REQ)
    finally:
        await b.aclose()
    assert f"{url}: cannot connect (connection refused)" in str(info.value)
    assert info.value.hint


# -- failover ------------------------------------------------------------------
async def test_failover_and_order_remembered() -> None:
    down = closed_url()
    with FakeOpenAI() as broken, FakeOpenAI() as healthy:
        broken.script(TokenScript(status=500))
        b = OpenAIBackend([down, broken.base_url, healthy.base_url], MODEL, timeout=5.0)
        try:
            first = await b.complete(REQ)
            second = await b.complete(REQ)
        finally:
            await b.aclose()
        assert first.text == second.text == "return a + b"
        assert len(broken.received("/v1/completions")) == 1  # not asked the second time
        assert len(healthy.received("/v1/completions")) == 2
        # Bytes count only the attempts that left: the broken one and the healthy one.
        body = len(healthy.received("/v1/completions")[0].body)
        assert first.bytes_sent == 2 * body
        assert second.bytes_sent == body


async def test_all_urls_failing_lists_each() -> None:
    down = closed_url()
    with FakeOpenAI() as broken:
        broken.script(TokenScript(status=502, body=b"<html>bad gateway</html>"))
        b = OpenAIBackend([down, broken.base_url], MODEL, timeout=5.0)
        try:
            with pytest.raises(BackendUnavailable) as info:
                await b.complete(REQ)
        finally:
            await b.aclose()
    msg = str(info.value)
    assert f"{down}: cannot connect" in msg
    assert f"{broken.base_url}: HTTP 502: <html>bad gateway</html>" in msg


# -- stop strings ----------------------------------------------------------------
async def test_client_cuts_stop_string_split_across_chunks() -> None:
    tail = [(f" junk{i}", -0.1) for i in range(40)]
    with FakeOpenAI(honour_stop=False) as fake:
        fake.script(
            TokenScript(tokens=[("x = 1", -0.1), ("\n", -0.2), ("\n", -0.3), *tail], delay=0.02)
        )
        b = OpenAIBackend(fake.base_url, MODEL, timeout=5.0)
        try:
            done = await b.complete(CompletionRequest(prefix="", stop=("\n\n",)))
        finally:
            await b.aclose()
        req = last(fake)
        assert fake.wait_for(lambda: req.disconnected)  # we hung up once cut
        assert req.tokens_sent < 10
    assert done.text == "x = 1"
    assert [t.text for t in done.tokens] == ["x = 1"]
    assert done.finish_reason == "stop"


async def test_client_cuts_special_token_spelled_over_several_tokens() -> None:
    # A server that ignores stops, and a sentinel arriving as plain text in pieces.
    with FakeOpenAI(honour_stop=False) as fake:
        fake.script(TokenScript.of("a = 2", "<|file", "_sep|>", "other.py"))
        b = OpenAIBackend(fake.base_url, MODEL, timeout=5.0)
        try:
            chunks = await drain(b.stream(REQ))
        finally:
            await b.aclose()
    assert "".join(c.text for c in chunks) == "a = 2"
    assert [t.text for c in chunks for t in c.tokens] == ["a = 2"]


async def test_server_side_stop_with_held_tokens(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    # The server holds back "\n" (maybe a stop) and sends its token with empty text,
    # like llama.cpp: only tokens that make up the text may count.
    fake.script(TokenScript.of("x", "\n", "\n", "y"))
    done = await backend.complete(CompletionRequest(prefix="", stop=("\n\n",)))
    assert done.text == "x"
    assert [t.text for t in done.tokens] == ["x"]
    assert done.finish_reason == "stop"


async def test_special_token_stop_fires_because_we_keep_special_tokens(
    fake: FakeOpenAI, backend: OpenAIBackend
) -> None:
    fake.script(TokenScript.of("pass", "<|endoftext|>", "junk"))
    done = await backend.complete(REQ)
    assert done.text == "pass"
    assert last(fake).json()["skip_special_tokens"] is False


# -- deadlines, timeouts and cancellation ------------------------------------------
async def test_deadline_between_tokens(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    fake.script(TokenScript.of("a", "b", "c", delay=2.0, first_delay=0.0))
    started = time.monotonic()
    with pytest.raises(BackendTimeout):
        await backend.complete(CompletionRequest(prefix="x", deadline=time.monotonic() + 0.3))
    assert time.monotonic() - started < 1.5
    req = last(fake)
    assert fake.wait_for(lambda: req.disconnected)
    assert req.tokens_sent == 1


async def test_deadline_before_headers(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    fake.script(TokenScript(hang=True))
    with pytest.raises(BackendTimeout, match="before the deadline"):
        await backend.complete(CompletionRequest(prefix="x", deadline=time.monotonic() + 0.3))
    req = last(fake)
    assert fake.wait_for(lambda: req.disconnected)


async def test_deadline_already_past_sends_nothing(
    fake: FakeOpenAI, backend: OpenAIBackend
) -> None:
    with pytest.raises(BackendTimeout, match="before the request was sent"):
        await backend.complete(CompletionRequest(prefix="x", deadline=time.monotonic() - 1))
    assert fake.received("/v1/completions") == []


async def test_read_timeout(fake: FakeOpenAI) -> None:
    fake.script(TokenScript(hang=True))
    b = OpenAIBackend(fake.base_url, MODEL, timeout=0.3)
    try:
        with pytest.raises(BackendTimeout, match=r"within 0\.3s"):
            await b.complete(REQ)
    finally:
        await b.aclose()


async def test_aclose_hangs_up(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    fake.script(TokenScript.of(*[f" t{i}" for i in range(100)], delay=0.02))
    it = backend.stream(CompletionRequest(prefix="x", max_tokens=100))
    got = [await anext(it) for _ in range(3)]
    await it.aclose()
    assert [c.text for c in got] == [" t0", " t1", " t2"]
    req = last(fake)
    assert fake.wait_for(lambda: req.disconnected)
    assert req.tokens_sent < 20


async def test_task_cancellation_hangs_up(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    fake.script(TokenScript.of(*[f" t{i}" for i in range(100)], delay=0.02))
    got: list[str] = []
    three = asyncio.Event()

    async def consume() -> None:
        async for c in backend.stream(CompletionRequest(prefix="x", max_tokens=100)):
            got.append(c.text)
            if len(got) == 3:
                three.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(three.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    req = last(fake)
    assert fake.wait_for(lambda: req.disconnected)
    assert req.tokens_sent < 20
    # The backend still works afterwards.
    fake.script(TokenScript.of("ok"))
    assert (await backend.complete(REQ)).text == "ok"


# -- models and probe ----------------------------------------------------------
async def test_context_length_cached(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    assert await backend.context_length() == 32768
    assert await backend.context_length() == 32768
    assert len(fake.received("/v1/models")) == 1


async def test_probe_healthy(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    report = await probe(backend)
    assert report.reachable and report.usable
    assert report.version == "0.11.0"
    assert report.model_present is True
    assert (report.prompt_mode, report.template) == ("fim-template", "qwen2.5-coder")
    assert report.logprobs is True
    assert report.sample == "return a + b"
    assert report.first_token_s is not None and report.total_s is not None
    assert report.problems == ()
    assert report.target == fake.base_url


async def test_probe_down() -> None:
    url = closed_url()
    b = OpenAIBackend(url, MODEL, timeout=2.0)
    try:
        report = await probe(b)
    finally:
        await b.aclose()
    assert not report.reachable and not report.usable
    assert report.problems[0].severity == "error"
    assert url in report.problems[0].message and report.problems[0].fix


async def test_probe_reports_unreachable_failover_url(fake: FakeOpenAI) -> None:
    down = closed_url()
    b = OpenAIBackend([fake.base_url, down], MODEL, timeout=2.0)
    try:
        report = await probe(b)
    finally:
        await b.aclose()
    assert report.usable and report.target == fake.base_url
    assert [p.severity for p in report.problems] == ["warning"]
    assert down in report.problems[0].message


@pytest.mark.parametrize("key", [None, "sk-wrong-key"])
async def test_probe_bad_or_missing_key(monkeypatch: pytest.MonkeyPatch, key: str | None) -> None:
    if key is not None:
        monkeypatch.setenv(KEY_ENV, key)
    with FakeOpenAI(api_key=KEY) as fake:
        b = OpenAIBackend(fake.base_url, MODEL, api_key_env=KEY_ENV, timeout=5.0)
        try:
            report = await probe(b)
        finally:
            await b.aclose()
    assert report.reachable and not report.usable
    assert report.version == "0.11.0"  # /version needs no key
    (problem,) = report.problems
    assert problem.severity == "error" and KEY_ENV in problem.message + problem.fix
    assert ("not set" in problem.message) == (key is None)
    assert "sk-wrong-key" not in repr(report) and KEY not in repr(report)


async def test_probe_missing_model() -> None:
    with FakeOpenAI(models=["Qwen/Qwen2.5-Coder-7B"]) as fake:
        b = OpenAIBackend(fake.base_url, MODEL, timeout=5.0)
        try:
            report = await probe(b)
        finally:
            await b.aclose()
        assert fake.received("/v1/completions") == []  # no generation attempted
    assert report.model_present is False and not report.usable
    assert "Qwen/Qwen2.5-Coder-7B" in report.problems[0].message


async def test_probe_warns_without_template_or_logprobs() -> None:
    with FakeOpenAI(models=["my-general-llm"]) as fake:
        fake.script(TokenScript.of("x", logprobs=False))
        b = OpenAIBackend(fake.base_url, "my-general-llm", timeout=5.0)
        try:
            report = await probe(b)
        finally:
            await b.aclose()
    assert report.usable  # warnings only
    assert report.prompt_mode == "prefix-only" and report.template is None
    assert report.logprobs is False
    messages = " | ".join(p.message for p in report.problems)
    assert "no FIM template" in messages and "no log-probs" in messages
    assert all(p.severity == "warning" for p in report.problems)


async def test_probe_generation_failure_is_a_problem(
    fake: FakeOpenAI, backend: OpenAIBackend
) -> None:
    fake.script(TokenScript(status=500, error_message="out of memory"))
    report = await probe(backend)
    assert report.reachable and not report.usable
    assert "out of memory" in report.problems[0].message
    json.dumps([p.message for p in report.problems])  # plain strings, ready to print


# -- single line and priority on the wire (the real server: tests/test_vllm.py) ----------
async def test_single_line_asks_the_server_to_end_the_line(
    fake: FakeOpenAI, backend: OpenAIBackend
) -> None:
    await backend.complete(CompletionRequest(prefix="x = ", single_line=True))
    body = last(fake).json()
    assert body["stop"] == [*QWEN_CODER.stop, "\n"]
    assert body["min_tokens"] == 1  # vLLM: the line stop fires after the first token
    await backend.complete(CompletionRequest(prefix="x = "))
    body = last(fake).json()
    assert "\n" not in body["stop"] and "min_tokens" not in body


async def test_priority_is_sent_only_when_set(fake: FakeOpenAI, backend: OpenAIBackend) -> None:
    await backend.complete(CompletionRequest(prefix="x = ", priority=-3))
    assert last(fake).json()["priority"] == -3
    await backend.complete(REQ)
    assert "priority" not in last(fake).json()
