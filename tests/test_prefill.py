"""Prefill, preemption, the KV prefix kept on cancel and timeout, the time cap and the
measured rates, with the real SmolLM2-135M through llama.cpp in its worker process."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from synconfroute.clients.embedded import EmbeddedBackend, bundled_model_path
from synconfroute.clients.errors import BackendTimeout, RequestCancelled
from synconfroute.clients.types import CompletionRequest

pytestmark = pytest.mark.embedded

if importlib.util.find_spec("llama_cpp") is None or bundled_model_path() is None:
    pytest.skip("llama-cpp-python or the SmolLM2 GGUF is not installed", allow_module_level=True)

# Real code, long enough (~1,300 tokens) that its evaluation takes seconds on 2 cores.
import argparse  # noqa: E402

SOURCE = Path(argparse.__file__).read_text()
LONG = SOURCE[2000:7500]
LIST = "numbers = [\n    1,\n    2,\n    3,\n"  # greedy decoding continues it for long


@pytest.fixture(scope="module")
def backend() -> Iterator[EmbeddedBackend]:
    b = EmbeddedBackend()
    asyncio.run(b.load())
    yield b
    b.close()


async def test_calibration_measures_both_rates(backend: EmbeddedBackend) -> None:
    rates = await backend.calibrate()
    assert rates.prompt_tps is not None and rates.prompt_tps > 1
    assert rates.decode_tps is not None and rates.decode_tps > 1


async def test_a_prefilled_prompt_is_reused_by_the_request(backend: EmbeddedBackend) -> None:
    text = SOURCE[9000:11000]
    stats = await backend.prefill(CompletionRequest(prefix=text, max_tokens=8))
    assert stats["outcome"] == "done"
    assert stats["evaluated_tokens"] + stats["cached_tokens"] >= stats["prompt_tokens"] - 1
    # The user types two more characters: only they (and the last token) are evaluated.
    await backend.complete(CompletionRequest(prefix=text + "  ", max_tokens=4))
    gen = backend.last_generation
    assert gen is not None and gen.finished.wait(30)
    assert gen.cached_tokens >= stats["prompt_tokens"] - 2
    assert len(gen.prompt_ids) - gen.cached_tokens <= 4


async def test_a_request_preempts_a_running_prefill(backend: EmbeddedBackend) -> None:
    prefill = asyncio.ensure_future(backend.prefill(CompletionRequest(prefix=LONG, max_tokens=8)))
    await asyncio.sleep(0.3)  # the prefill is evaluating its first chunks
    c = await backend.complete(CompletionRequest(prefix="def add(a, b):\n    return", max_tokens=4))
    stats = await prefill
    assert c.text  # the request was answered
    assert stats["outcome"] == "preempted"
    assert stats["evaluated_tokens"] < stats["prompt_tokens"] - 1  # it stopped early


async def test_a_newer_prefill_supersedes_an_older_one(backend: EmbeddedBackend) -> None:
    first = asyncio.ensure_future(backend.prefill(CompletionRequest(prefix=LONG, max_tokens=8)))
    await asyncio.sleep(0.3)
    second = await backend.prefill(CompletionRequest(prefix=SOURCE[:300], max_tokens=8))
    assert (await first)["outcome"] == "superseded"
    assert second["outcome"] == "done"


async def test_a_cancelled_request_keeps_what_it_evaluated(backend: EmbeddedBackend) -> None:
    """The next key cancels the request mid-prompt: the tokens evaluated so far stay in
    the KV cache and the next request (one more character) starts from them."""
    text = SOURCE[12000:17000]
    stream = backend.stream(CompletionRequest(prefix=text, max_tokens=8))
    task = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(1.0)  # some chunks evaluated, not all (~1,200 tokens)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, RequestCancelled):
        await task
    await stream.aclose()
    first = backend.last_generation
    assert first is not None and first.finished.wait(30)
    assert first.finish_reason == "cancelled"
    assert 0 < first.evaluated_tokens < len(first.prompt_ids) - 1
    await backend.complete(CompletionRequest(prefix=text + "x", max_tokens=2))
    second = backend.last_generation
    assert second is not None and second.finished.wait(60)
    assert second.cached_tokens >= first.cached_tokens + first.evaluated_tokens


async def test_a_timed_out_request_keeps_what_it_evaluated(backend: EmbeddedBackend) -> None:
    text = SOURCE[18000:23000]
    with pytest.raises(BackendTimeout):
        await backend.complete(
            CompletionRequest(prefix=text, max_tokens=8, deadline=time.monotonic() + 0.8)
        )
    first = backend.last_generation
    assert first is not None and first.finished.wait(30)
    assert first.evaluated_tokens > 0
    await backend.complete(CompletionRequest(prefix=text, max_tokens=2))
    second = backend.last_generation
    assert second is not None and second.finished.wait(60)
    assert second.cached_tokens >= first.cached_tokens + first.evaluated_tokens


async def test_the_prediction_stops_at_its_time_cap(backend: EmbeddedBackend) -> None:
    c = await backend.complete(CompletionRequest(prefix=LIST, max_tokens=200, max_predict_s=0.2))
    gen = backend.last_generation
    assert gen is not None and gen.finished.wait(30)
    assert c.finish_reason == "length"
    # Greedy decoding would go on for 200 tokens; the cap ended it after a few.
    assert 1 <= gen.tokens_generated < 100
    uncapped = await backend.complete(CompletionRequest(prefix=LIST, max_tokens=40))
    assert len(uncapped.text) > len(c.text)


async def test_a_prefill_sharing_only_the_start_of_a_warm_prompt_does_not_cut_it(
    backend: EmbeddedBackend,
) -> None:
    """A larger window often starts like the warm one (the same context file first) and
    then differs: growing it in the warm prompt's cache would cut that prompt short
    while the user may type on in it. It goes to the other cache."""
    warm = SOURCE[30000:31600]
    first = await backend.prefill(CompletionRequest(prefix=warm, max_tokens=8))
    grown = await backend.prefill(
        CompletionRequest(prefix=warm[:400] + SOURCE[40000:42000], max_tokens=8)
    )
    assert first["outcome"] == grown["outcome"] == "done"
    assert grown["cached_tokens"] == 0 and grown["slot"] != first["slot"]
    await backend.complete(CompletionRequest(prefix=warm + "  ", max_tokens=2))
    gen = backend.last_generation
    assert gen is not None and gen.finished.wait(60)
    assert gen.slot == first["slot"] and len(gen.prompt_ids) - gen.cached_tokens <= 4
