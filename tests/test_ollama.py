"""OllamaBackend against FakeOllama over a real socket: FIM paths, errors, cancellation, probe."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from synconfroute.clients.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    FimUnsupported,
    ModelNotFound,
    ProtocolError,
    RequestCancelled,
    RequestRejected,
)
from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.templates import QWEN_CODER, STARCODER2
from synconfroute.clients.types import Backend, Chunk, CompletionRequest
from synconfroute.server.commands.doctor import probe
from tests.fakes import FakeOllama, TokenScript
from tests.fakes.http import Request, closed_port

PREFIX = "def add(a, b):\n    return "
SUFFIX = "\n\nprint(add(1, 2))\n"


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama() as server:
        yield server


@pytest.fixture
async def backend(fake: FakeOllama) -> AsyncIterator[OllamaBackend]:
    b = OllamaBackend(fake.url)
    yield b
    await b.aclose()


def generations(fake: FakeOllama) -> list[Request]:
    return fake.received("/api/generate")


def sent(fake: FakeOllama, i: int = -1) -> dict[str, Any]:
    body = generations(fake)[i].json()
    assert isinstance(body, dict)
    return body


async def wait_server(fake: FakeOllama, pred: Any) -> bool:
    return await asyncio.to_thread(fake.wait_for, pred)


# -- the fake speaks Ollama ----------------------------------------------------


async def test_fake_validates_like_ollama(fake: FakeOllama) -> None:
    fake.models["chat:latest"] = FakeOllama._complete_info({"capabilities": ["completion"]})
    async with httpx.AsyncClient(base_url=fake.url) as http:
        r = await http.post("/api/generate", json={"model": "nope", "prompt": "x"})
        assert r.status_code == 404
        assert r.json() == {"error": 'model "nope" not found, try pulling it first'}
        r = await http.post("/api/generate", json={"model": "chat", "prompt": "x", "suffix": "y"})
        assert r.status_code == 400
        assert r.json()["error"] == "registry.ollama.ai/library/chat:latest does not support insert"
        r = await http.post("/api/generate", json={"model": "qwen2.5-coder:3b", "prompt": ""})
        assert r.json()["done_reason"] == "load" and r.json()["response"] == ""
        r = await http.post(
            "/api/generate",
            json={"model": "qwen2.5-coder:3b", "prompt": "x", "stream": False, "logprobs": True},
        )
        body = r.json()
        assert body["response"] == "a + b" and body["done"] is True
        assert [lp["token"] for lp in body["logprobs"]] == ["a", " +", " b"]
        assert (await http.get("/api/version")).json() == {"version": "0.13.0"}
        tags = (await http.get("/api/tags")).json()["models"]
        assert {m["name"] for m in tags} == {"qwen2.5-coder:3b", "chat:latest"}
        show = (await http.post("/api/show", json={"model": "qwen2.5-coder:3b"})).json()
        assert show["capabilities"] == ["completion", "insert"] and ".Suffix" in show["template"]
        assert (await http.post("/api/show", json={"model": "nope"})).status_code == 404
    # The empty-suffix trap: a plain prompt goes through the chat template.
    assert fake.modes == ["load", "chat"]


async def test_fake_streams_ndjson_with_final_figures(fake: FakeOllama) -> None:
    async with (
        httpx.AsyncClient(base_url=fake.url) as http,
        http.stream(
            "POST",
            "/api/generate",
            json={"model": "qwen2.5-coder:3b", "prompt": "x", "suffix": "y", "logprobs": True},
        ) as r,
    ):
        assert r.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(line) async for line in r.aiter_lines() if line]
    assert [x["response"] for x in lines] == ["a", " +", " b", ""]
    assert lines[0]["logprobs"][0] == {
        "token": "a",
        "logprob": -0.1,
        "bytes": [97],
        "top_logprobs": [],
    }
    final = lines[-1]
    assert final["done"] is True and final["done_reason"] == "stop"
    assert final["eval_count"] == 3
    for key in ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration"):
        assert isinstance(final[key], int) and final[key] > 0
    assert fake.modes == ["fim"]


# -- happy path ------------------------------------------------------------------


async def test_streaming_happy_path(fake: FakeOllama, backend: OllamaBackend) -> None:
    assert isinstance(backend, Backend)
    fake.script(TokenScript(tokens=[("a", -0.05), (" +", -0.2), (" b", -0.3)], delay=0.01))
    chunks: list[Chunk] = [c async for c in backend.stream(CompletionRequest(prefix=PREFIX))]
    assert [c.text for c in chunks] == ["a", " +", " b", ""]
    assert [t.logprob for c in chunks for t in c.tokens] == [-0.05, -0.2, -0.3]
    assert all(c.logprobs for c in chunks)
    assert [c.finish_reason for c in chunks] == [None, None, None, "stop"]

    done = await backend.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, max_tokens=16))
    assert done.text == "a + b"
    assert [(t.text, t.logprob) for t in done.tokens] == [("a", -0.1), (" +", -0.1), (" b", -0.1)]
    assert done.logprobs is True and done.finish_reason == "stop"
    assert done.backend == "ollama" and done.model == "qwen2.5-coder:3b"
    assert done.first_token_s is not None and 0 < done.first_token_s <= done.total_s
    assert done.bytes_sent == len(generations(fake)[-1].body)
    assert backend.logprobs_supported is True
    assert backend.last_timings["eval_count"] == 3
    assert backend.last_timings["total_duration"] > 0

    body = sent(fake)
    assert body["model"] == "qwen2.5-coder:3b"
    assert body["prompt"] == PREFIX and body["suffix"] == SUFFIX
    assert "raw" not in body  # never raw together with suffix
    assert body["stream"] is True and body["logprobs"] is True and body["keep_alive"] == "30m"
    assert body["options"] == {
        "temperature": 0.0,
        "num_predict": 16,
        "stop": list(QWEN_CODER.stop),
        "num_ctx": 4096,
    }
    assert fake.modes[-1] == "fim"
    # /api/show is asked once per backend.
    assert len(fake.received("/api/show")) == 1


async def test_options_stay_stable_across_requests(
    fake: FakeOllama, backend: OllamaBackend
) -> None:
    await backend.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, temperature=0.2))
    await backend.complete(CompletionRequest(prefix="x = ", suffix="\n", max_tokens=3))
    first, second = sent(fake, 0)["options"], sent(fake, 1)["options"]
    assert first.keys() == second.keys()
    assert first["num_ctx"] == second["num_ctx"] == 4096
    assert first["temperature"] == 0.2 and second["temperature"] == 0.0


async def test_stop_list_is_separate_strings_and_cuts(
    fake: FakeOllama, backend: OllamaBackend
) -> None:
    fake.script(TokenScript.of("a", " +", "<|endoftext|>", "junk"))
    done = await backend.complete(
        CompletionRequest(prefix=PREFIX, suffix=SUFFIX, stop=("\n\n", "def "))
    )
    stop = sent(fake)["options"]["stop"]
    assert stop == [*QWEN_CODER.stop, "\n\n", "def "]
    assert all(isinstance(s, str) for s in stop)
    # Two sentinels glued into one string would never match.
    assert not any(s.count("<|") > 1 for s in stop)
    assert done.text == "a +" and done.finish_reason == "stop"
    assert [t.text for t in done.tokens] == ["a", " +"]


async def test_num_predict_limit_reports_length(fake: FakeOllama, backend: OllamaBackend) -> None:
    fake.script(TokenScript.of(*"abcdefgh"))
    done = await backend.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, max_tokens=3))
    assert done.text == "abc" and done.finish_reason == "length"


# -- FIM traps --------------------------------------------------------------------


async def test_empty_suffix_uses_raw_template(fake: FakeOllama, backend: OllamaBackend) -> None:
    await backend.complete(CompletionRequest(prefix=PREFIX, suffix=""))
    body = sent(fake)
    assert body["raw"] is True
    assert body["prompt"] == QWEN_CODER.render(PREFIX, "")
    assert body["prompt"] == f"<|fim_prefix|>{PREFIX}<|fim_suffix|><|fim_middle|>"
    assert "suffix" not in body
    assert fake.modes == ["raw"]  # not "chat"


async def test_empty_prefix_uses_raw_template(fake: FakeOllama, backend: OllamaBackend) -> None:
    done = await backend.complete(CompletionRequest(prefix="", suffix=SUFFIX))
    body = sent(fake)
    assert body["raw"] is True
    assert body["prompt"] == QWEN_CODER.render("", SUFFIX)
    assert "suffix" not in body
    assert fake.modes == ["raw"]  # not "load"
    assert done.text == "a + b"


async def test_both_empty_asks_nothing(fake: FakeOllama, backend: OllamaBackend) -> None:
    done = await backend.complete(CompletionRequest(prefix="", suffix=""))
    assert done.text == "" and done.tokens == () and done.bytes_sent == 0
    assert fake.received() == []


async def test_model_without_insert_uses_raw_template() -> None:
    with FakeOllama(models={"starcoder2:3b": {"capabilities": ["completion"]}}) as fake:
        b = OllamaBackend(fake.url, "starcoder2:3b")
        try:
            done = await b.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, stop=("\n",)))
        finally:
            await b.aclose()
    body = sent(fake)
    assert body["raw"] is True and "suffix" not in body
    assert body["prompt"] == f"<fim_prefix>{PREFIX}<fim_suffix>{SUFFIX}<fim_middle>"
    assert body["options"]["stop"] == [*STARCODER2.stop, "\n"]
    assert done.text == "a + b"


async def test_unknown_family_without_insert_continues_prefix() -> None:
    with FakeOllama(models={"llama3.2:1b": {"capabilities": ["completion"]}}) as fake:
        b = OllamaBackend(fake.url, "llama3.2:1b")
        try:
            await b.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, stop=("\n",)))
            empty = await b.complete(CompletionRequest(prefix="", suffix=SUFFIX))
        finally:
            await b.aclose()
    body = sent(fake)
    assert body == {**body, "raw": True, "prompt": PREFIX}
    assert "suffix" not in body
    assert body["options"]["stop"] == ["\n"]
    # Prefix-only with no prefix has nothing to continue: no empty prompt is sent.
    assert empty.text == "" and len(generations(fake)) == 1


async def test_template_setting_overrides_name() -> None:
    with FakeOllama(models={"my-model": {"capabilities": ["completion"]}}) as fake:
        b = OllamaBackend(fake.url, "my-model", template="starcoder2")
        try:
            await b.complete(CompletionRequest(prefix="x", suffix="y"))
        finally:
            await b.aclose()
    assert sent(fake)["prompt"] == "<fim_prefix>x<fim_suffix>y<fim_middle>"
    with pytest.raises(ValueError, match="unknown FIM template"):
        OllamaBackend(template="gpt-17")


async def test_template_detected_from_ollama_template() -> None:
    # A custom name says nothing; the model's Ollama template has Qwen's sentinels.
    with FakeOllama(models={"team-coder": {"capabilities": ["completion", "insert"]}}) as fake:
        b = OllamaBackend(fake.url, "team-coder")
        try:
            await b.complete(CompletionRequest(prefix="x = ", suffix=""))
        finally:
            await b.aclose()
    assert sent(fake)["prompt"] == "<|fim_prefix|>x = <|fim_suffix|><|fim_middle|>"
    assert b.template is QWEN_CODER


async def test_unknown_family_with_insert_keeps_fim_on_empty_suffix() -> None:
    info = {"capabilities": ["completion", "insert"], "template": "{{ .Prompt }}{{ .Suffix }}"}
    with FakeOllama(models={"mystery:7b": info}) as fake:
        b = OllamaBackend(fake.url, "mystery:7b")
        try:
            await b.complete(CompletionRequest(prefix="x = ", suffix=""))
        finally:
            await b.aclose()
    body = sent(fake)
    assert body["prompt"] == "x = " and body["suffix"] == "\n" and "raw" not in body
    assert fake.modes == ["fim"]


async def test_old_server_without_capabilities_key_uses_template() -> None:
    with FakeOllama(models={"qwen2.5-coder:3b": {"capabilities": None}}) as fake:
        fake.models["qwen2.5-coder:3b"]["template"] = "{{ .Prompt }}{{ .Suffix }}"
        b = OllamaBackend(fake.url)
        try:
            await b.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX))
        finally:
            await b.aclose()
    assert sent(fake)["suffix"] == SUFFIX


async def test_insert_refused_switches_to_template_and_retries(
    fake: FakeOllama, backend: OllamaBackend
) -> None:
    refused = {"error": "registry.ollama.ai/library/qwen2.5-coder:3b does not support insert"}
    fake.script(TokenScript(status=400, body=refused))
    done = await backend.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX))
    assert done.text == "a + b"
    first, retry = sent(fake, 0), sent(fake, 1)
    assert first["suffix"] == SUFFIX and "raw" not in first
    assert retry["raw"] is True and "suffix" not in retry
    assert retry["prompt"] == QWEN_CODER.render(PREFIX, SUFFIX)
    assert done.bytes_sent == len(generations(fake)[0].body) + len(generations(fake)[1].body)
    # The switch sticks for this backend.
    await backend.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX))
    assert len(generations(fake)) == 3 and sent(fake)["raw"] is True


# -- errors -----------------------------------------------------------------------


async def expect(backend: OllamaBackend, kind: type[BackendError], **req: Any) -> BackendError:
    request = CompletionRequest(prefix=req.pop("prefix", PREFIX), suffix=SUFFIX, **req)
    with pytest.raises(kind) as info:
        await backend.complete(request)
    err = info.value
    assert err.backend == "ollama" and err.hint and err.hint in str(err)
    return err


async def test_connection_refused() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    b = OllamaBackend(url)
    try:
        err = await expect(b, BackendUnavailable)
    finally:
        await b.aclose()
    assert f"cannot reach Ollama at {url}" in str(err)
    assert "ollama serve" in err.hint and "local.url" in err.hint
    assert isinstance(err.__cause__, httpx.ConnectError)


async def test_unknown_model() -> None:
    with FakeOllama() as fake:
        b = OllamaBackend(fake.url, "qwen2.5-coder:7b")
        try:
            err = await expect(b, ModelNotFound)
        finally:
            await b.aclose()
    assert "ollama pull qwen2.5-coder:7b" in err.hint
    assert isinstance(err.__cause__, httpx.HTTPStatusError)


async def test_model_removed_after_show(fake: FakeOllama, backend: OllamaBackend) -> None:
    await backend.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX))
    fake.models.clear()  # `ollama rm` while we run: /api/generate now says 404
    err = await expect(backend, ModelNotFound)
    assert "ollama pull" in err.hint


@pytest.mark.parametrize(
    ("status", "body", "kind", "words"),
    [
        (503, None, BackendUnavailable, "maximum pending requests exceeded"),
        (500, None, BackendUnavailable, "unexpectedly stopped"),
        (502, b"<html>bad gateway</html>", BackendUnavailable, "bad gateway"),
        (499, None, RequestCancelled, "context canceled"),
        (400, {"error": "invalid options: num_ctx"}, RequestRejected, "invalid options: num_ctx"),
        (404, {"error": "404 page not found"}, ProtocolError, "not an Ollama server"),
    ],
)
async def test_status_errors(
    fake: FakeOllama,
    backend: OllamaBackend,
    status: int,
    body: Any,
    kind: type[BackendError],
    words: str,
) -> None:
    fake.script(TokenScript(status=status, body=body))
    err = await expect(backend, kind)
    assert words in str(err)
    assert isinstance(err.__cause__, httpx.HTTPStatusError)
    assert err.__cause__.response.status_code == status


async def test_insert_refused_twice_is_fim_unsupported(
    fake: FakeOllama, backend: OllamaBackend
) -> None:
    refused = TokenScript(status=400, body={"error": "x does not support insert"})
    fake.script(refused, refused)
    err = await expect(backend, FimUnsupported)
    assert "local.template" in err.hint
    assert len(generations(fake)) == 2


async def test_mid_stream_error_line(fake: FakeOllama, backend: OllamaBackend) -> None:
    fake.script(TokenScript.of("a", " +", " b", error_after=2, error_message="out of memory"))
    stream = backend.stream(CompletionRequest(prefix=PREFIX, suffix=SUFFIX))
    got = [(await anext(stream)).text, (await anext(stream)).text]
    with pytest.raises(BackendUnavailable, match="out of memory") as info:
        await anext(stream)
    assert got == ["a", " +"]
    assert "server log" in info.value.hint


async def test_non_json_lines(fake: FakeOllama, backend: OllamaBackend) -> None:
    fake.script(TokenScript.of("a", " b", garbage=True))
    err = await expect(backend, ProtocolError)
    assert "not JSON" in str(err) and isinstance(err.__cause__, json.JSONDecodeError)


@pytest.mark.parametrize(
    "body",
    [
        [1, 2],
        {"response": 3, "done": False},
        {"response": "a", "done": False, "logprobs": [{"token": "a"}]},
        {"response": "a", "done": False, "logprobs": "none"},
    ],
)
async def test_wrong_shape(fake: FakeOllama, backend: OllamaBackend, body: Any) -> None:
    fake.script(TokenScript(status=200, body=body))
    await expect(backend, ProtocolError)


async def test_stream_without_done_line(fake: FakeOllama, backend: OllamaBackend) -> None:
    line = {"model": "qwen2.5-coder:3b", "response": "a", "done": False}
    fake.script(TokenScript(status=200, body=json.dumps(line).encode() + b"\n"))
    err = await expect(backend, ProtocolError)
    assert "done" in str(err)


async def test_server_timeout(fake: FakeOllama) -> None:
    fake.script(TokenScript(hang=True))
    b = OllamaBackend(fake.url, timeout=0.3)
    try:
        err = await expect(b, BackendTimeout)
    finally:
        await b.aclose()
    assert isinstance(err.__cause__, httpx.TimeoutException)
    assert await wait_server(fake, lambda: generations(fake)[0].disconnected)


async def test_deadline_before_first_token(fake: FakeOllama, backend: OllamaBackend) -> None:
    fake.script(TokenScript(hang=True))
    started = time.monotonic()
    await expect(backend, BackendTimeout, deadline=started + 0.3)
    assert await wait_server(fake, lambda: generations(fake)[0].disconnected)


async def test_deadline_mid_stream(fake: FakeOllama, backend: OllamaBackend) -> None:
    fake.script(TokenScript.of(*["x"] * 20, delay=0.1))
    err = await expect(backend, BackendTimeout, deadline=time.monotonic() + 0.35)
    assert isinstance(err.__cause__, TimeoutError) and "latency budget" in err.hint
    req = generations(fake)[0]
    assert await wait_server(fake, lambda: req.disconnected)
    assert req.tokens_sent < 10


async def test_deadline_already_passed(fake: FakeOllama, backend: OllamaBackend) -> None:
    await expect(backend, BackendTimeout, deadline=time.monotonic() - 1)
    assert fake.received() == []


# -- old servers ---------------------------------------------------------------------


async def test_old_server_without_logprobs() -> None:
    with FakeOllama(version="0.12.3", default=TokenScript.of("a", " + b", logprobs=False)) as fake:
        b = OllamaBackend(fake.url)
        try:
            chunks = [c async for c in b.stream(CompletionRequest(prefix=PREFIX, suffix=SUFFIX))]
            done = await b.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX))
        finally:
            await b.aclose()
    assert sent(fake)["logprobs"] is True  # asked for, silently ignored
    assert [c.logprobs for c in chunks if c.text] == [False, False]
    assert done.text == "a + b" and done.tokens == () and done.logprobs is False
    assert b.logprobs_supported is False


# -- cancellation, asserted from the server's side ----------------------------------


async def test_aclose_disconnects(fake: FakeOllama, backend: OllamaBackend) -> None:
    fake.script(TokenScript.of(*[f"t{i} " for i in range(20)], delay=0.05))
    stream = backend.stream(CompletionRequest(prefix=PREFIX, suffix=SUFFIX))
    first = [(await anext(stream)).text, (await anext(stream)).text]
    await stream.aclose()
    assert first == ["t0 ", "t1 "]
    req = generations(fake)[0]
    assert await wait_server(fake, lambda: req.disconnected)
    assert req.tokens_sent <= 4 and not req.finished


async def test_task_cancel_disconnects(fake: FakeOllama, backend: OllamaBackend) -> None:
    fake.script(TokenScript.of(*[f"t{i} " for i in range(20)], delay=0.05))
    got: list[str] = []
    two = asyncio.Event()

    async def consume() -> None:
        async for chunk in backend.stream(CompletionRequest(prefix=PREFIX, suffix=SUFFIX)):
            got.append(chunk.text)
            if len(got) == 2:
                two.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(two.wait(), 5)
    task.cancel()  # lands while the task awaits the next token
    with pytest.raises(asyncio.CancelledError):
        await task
    req = generations(fake)[0]
    assert await wait_server(fake, lambda: req.disconnected)
    assert req.tokens_sent <= 4 and not req.finished


async def test_stop_cut_closes_the_stream(fake: FakeOllama) -> None:
    # The client cuts at a stop string the server did not honour: the server must stop too.
    fake.honour_stop = False
    fake.script(TokenScript.of("a", "\n", "\n", *["z"] * 20, delay=0.05))
    b = OllamaBackend(fake.url)
    try:
        done = await b.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, stop=("\n\n",)))
    finally:
        await b.aclose()
    assert done.text == "a" and done.finish_reason == "stop"
    assert [t.text for t in done.tokens] == ["a"]
    req = generations(fake)[0]
    assert await wait_server(fake, lambda: req.disconnected)
    assert req.tokens_sent <= 6 and not req.finished


async def test_stop_cut_inside_a_token_keeps_its_head(fake: FakeOllama) -> None:
    # One token " +\n" ends where the stop "\n\n" begins: the shared rule (TokenStops)
    # keeps its log-prob and the text before the cut, so the tokens spell the text.
    fake.honour_stop = False
    fake.script(TokenScript(tokens=[("a", -0.1), (" +\n", -0.2), ("\nb", -0.3), ("z", -0.4)]))
    done = await OllamaBackend(fake.url).complete(
        CompletionRequest(prefix=PREFIX, suffix=SUFFIX, stop=("\n\n",))
    )
    assert done.text == "a +" and done.finish_reason == "stop"
    assert [(t.text, t.logprob) for t in done.tokens] == [("a", -0.1), (" +", -0.2)]


async def test_template_off_is_prefix_only_even_with_native_fim(fake: FakeOllama) -> None:
    # qwen2.5-coder:3b has `insert` and a known template; "off" uses neither.
    b = OllamaBackend(fake.url, template="off")
    try:
        await b.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX))
        report = await b.discover()
    finally:
        await b.aclose()
    body = sent(fake)
    assert body["prompt"] == PREFIX and body["raw"] is True and "suffix" not in body
    assert b.template is None
    assert report.prompt_mode == "prefix-only" and report.template is None
    assert report.problems == ()  # prefix-only was asked for: nothing to warn about


async def test_doctor_flags_log_probs_above_zero() -> None:
    # Ollama passes log-probs on as they come: doctor checks they are finite and <= 0.
    with FakeOllama(default=TokenScript.of("a", " + b", logprob=0.5)) as fake:
        b = OllamaBackend(fake.url)
        try:
            report = await probe(b)
        finally:
            await b.aclose()
    assert report.logprobs is False and report.sample == "a + b"
    (problem,) = report.problems
    assert problem.severity == "warning" and "not finite, or above 0" in problem.message


# -- probe ---------------------------------------------------------------------------------


async def test_probe_healthy(fake: FakeOllama, backend: OllamaBackend) -> None:
    report = await probe(backend)
    assert report.reachable and report.usable and report.problems == ()
    assert report.backend == "ollama" and report.target == fake.url
    assert report.version == "0.13.0" and report.model_present is True
    assert report.prompt_mode == "fim-native" and report.template == "qwen2.5-coder"
    assert report.logprobs is True and report.sample == "a + b"
    assert report.first_token_s is not None and report.total_s is not None
    assert 0 < report.first_token_s <= report.total_s
    # The probe's tiny generation (doctor then measures the speed with a longer prompt).
    bodies = [r.json() for r in fake.received("/api/generate")]
    body = next(b for b in bodies if b["prompt"] == "def add(a, b):\n    return")
    assert body["suffix"] == "\n" and body["options"]["num_predict"] == 8


async def test_probe_server_down() -> None:
    b = OllamaBackend(f"http://127.0.0.1:{closed_port()}")
    try:
        report = await probe(b)
    finally:
        await b.aclose()
    assert not report.reachable and not report.usable
    (problem,) = report.problems
    assert problem.severity == "error" and "cannot reach Ollama" in problem.message
    assert "ollama serve" in problem.fix


async def test_probe_missing_model() -> None:
    with FakeOllama(models={"llama3.2:1b": {}}) as fake:
        b = OllamaBackend(fake.url)
        try:
            report = await probe(b)
        finally:
            await b.aclose()
    assert report.reachable and not report.usable and report.model_present is False
    (problem,) = report.problems
    assert "installed: llama3.2:1b" in problem.message
    assert "ollama pull qwen2.5-coder:3b" in problem.fix
    assert generations(fake) == []


async def test_probe_old_server_without_logprobs() -> None:
    with FakeOllama(version="0.12.3", default=TokenScript.of("a", " + b", logprobs=False)) as fake:
        b = OllamaBackend(fake.url)
        try:
            report = await probe(b)
        finally:
            await b.aclose()
    assert report.reachable and report.logprobs is False and report.sample == "a + b"
    (problem,) = report.problems
    assert problem.severity == "warning"
    assert "returns no log-probs" in problem.message and "0.12.3" in problem.message
    assert problem.fix == "upgrade to 0.12.11 or newer"


async def test_probe_reports_failed_generation(fake: FakeOllama, backend: OllamaBackend) -> None:
    fake.script(TokenScript(status=503))
    report = await probe(backend)
    assert report.reachable and report.model_present and not report.usable
    (problem,) = report.problems
    assert "busy" in problem.message and "OLLAMA_MAX_QUEUE" in problem.fix


async def test_probe_prefix_only_warns() -> None:
    with FakeOllama(models={"llama3.2:1b": {}}) as fake:
        b = OllamaBackend(fake.url, "llama3.2:1b")
        try:
            report = await probe(b)
        finally:
            await b.aclose()
    assert report.prompt_mode == "prefix-only" and report.template is None
    (problem,) = report.problems
    assert problem.severity == "warning" and "local.template" in problem.fix
    assert report.usable
