"""The local window sized by what the KV cache holds (issue 26): what is already
evaluated costs nothing before the first token, so after a prefill the request's
prompt may be larger than the cold budget at no more prompt evaluation.

The unit tests pin the sizing rule; the others run the real SmolLM2 through llama.cpp
in its worker process, and compare token counts (what the model evaluated before its
first token), not wall-clock times."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable
from typing import Any

import pytest

from synconfroute.clients._speed import common_prefix_len
from synconfroute.clients.embedded import EmbeddedBackend, KvIndex, bundled_model_path
from synconfroute.server.routing import kv_window
from synconfroute.server.routing.context import make_context
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.routing.time_budget import TierBudget
from synconfroute.server.settings.config import Settings, with_values

from .test_time_budget import real_python_file


def _budget(chars: int) -> TierBudget:
    return TierBudget(
        prompt_chars=chars, max_tokens=64, max_predict_s=None, multiline=True, why="cold"
    )


def test_a_larger_window_is_taken_only_when_it_costs_no_more_than_the_cold_one() -> None:
    asked: list[int] = []

    def cache(**left: int) -> Callable[[int], int]:
        """Uncached characters per window size (`s512=0`: the 512 window is warm)."""

        def f(size: int) -> int:
            asked.append(size)
            return left.get(f"s{size}", size)

        return f

    # The cold-sized window is warm; 2,048 was prefilled but for the 2 keys typed since.
    b = kv_window.sized(_budget(512), 4000, cache(s512=0, s2048=2))
    assert b.prompt_chars == 2048 and "cached" in b.why
    assert asked == [512, 3072, 2048]  # the cold one, then largest first
    # 2,048 half prefilled (a rest cut short): the warm 512 is faster, it stays.
    assert kv_window.sized(_budget(512), 4000, cache(s512=0, s2048=1024)).prompt_chars == 512
    # Nothing warm at 512 (a jump): a larger window no dearer than it is fine.
    assert kv_window.sized(_budget(512), 4000, cache(s2048=400)).prompt_chars == 2048
    # Nothing cached at all: the cold budget stands.
    assert kv_window.sized(_budget(512), 4000, cache()).prompt_chars == 512
    # The cap (the setting, the backend's window) bounds it.
    assert kv_window.sized(_budget(512), 1100, cache(s512=0, s1024=0)).prompt_chars == 1024
    # No time budget (the cold budget is already the cap): nothing to size or grow.
    assert kv_window.sized(_budget(10000), 6144, cache()).prompt_chars == 10000
    assert kv_window.grow_size(_budget(10000), 6144) is None
    # A prefill grows the warm window twice as large, rest after rest, up to the cap.
    assert kv_window.grow_size(_budget(768), 6144) == 1536
    assert kv_window.grow_size(_budget(4096), 6144) == 6144
    assert kv_window.grow_size(_budget(3072), 3100) is None


def test_the_index_counts_only_what_a_slot_holds_of_the_prompt() -> None:
    kv = KvIndex()
    assert kv.uncached("abc") == 3
    kv.held(0, "x" * 100, 50, 50)  # all of it
    assert kv.uncached("x" * 100 + "yy") == 2
    kv.held(1, "z" * 1000, 25, 100)  # a prefill cut after a quarter of its tokens
    assert kv.uncached("z" * 1000) == 750
    assert kv.uncached("x" * 100 + "yy") == 2  # the other slot still counts
    kv.forget()
    assert kv.uncached("z" * 1000) == 1000
    for a, b in [("", "x"), ("abc", "abd"), ("same", "same"), ("a" * 999 + "b", "a" * 1000)]:
        n = common_prefix_len(a, b)
        assert a[:n] == b[:n] and (n == min(len(a), len(b)) or a[n] != b[n])


# -- with the real model ------------------------------------------------------------

needs_model = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or bundled_model_path() is None,
    reason="llama-cpp-python or the SmolLM2 GGUF is not installed",
)

TEXT = real_python_file()


def _at(line: int, typed: str = "") -> CompletionContext:
    """The cursor at the end of `line` (0-based) of the real file, `typed` after it."""
    lines = TEXT.split("\n")
    doc = "\n".join(lines[: line + 1]) + typed
    return make_context(doc, len(doc), context_lines=200)


def _settings() -> Settings:
    return with_values(
        Settings(),
        {
            "completion": {"context": "file", "max_tokens": 4},
            # A small cap keeps the grown window's prefill a few seconds on 2 busy cores.
            "local": {"max_prompt_chars": 2048, "max_predict_ms": 0},
        },
    )


async def _gen(backend: EmbeddedBackend) -> Any:
    gen = backend.last_generation
    assert gen is not None and await asyncio.to_thread(gen.finished.wait, 120)
    return gen


@needs_model
async def test_after_a_prefill_the_window_grows_at_no_extra_prompt_evaluation() -> None:
    s = _settings()
    backend = EmbeddedBackend()
    pipeline = Pipeline(s, backend, None, make_gate(s.routing))
    try:
        await backend.calibrate()
        # Cold: a position nothing was evaluated at.
        cold_budget = pipeline.local_budget().prompt_chars
        assert cold_budget < 2048  # the time budget, not the cap, rules cold
        await pipeline.complete(_at(1400))
        cold = await _gen(backend)
        cold_new = len(cold.prompt_ids) - cold.cached_tokens
        # The cursor rests elsewhere: prefill (the next request's window, then grown).
        stats = await pipeline.prefill(_at(2000))
        assert stats is not None and stats["outcome"] == "done"
        # The user types two characters there: the grown window, already evaluated.
        sized = pipeline.local_budget(_at(2000, "  "))
        assert sized.prompt_chars > pipeline.local_budget().prompt_chars
        await pipeline.complete(_at(2000, "  "))
        warm = await _gen(backend)
        warm_new = len(warm.prompt_ids) - warm.cached_tokens
        assert warm.slot == stats["slot"]
        assert len(warm.prompt_ids) > 1.5 * len(cold.prompt_ids)  # a larger prompt
        assert warm_new <= cold_new  # and no more to evaluate before the first token
        assert warm_new <= 8
        # Typing on keeps that window: it only appends.
        await pipeline.complete(_at(2000, "  x"))
        more = await _gen(backend)
        assert len(more.prompt_ids) >= len(warm.prompt_ids)
        assert len(more.prompt_ids) - more.cached_tokens <= 8
    finally:
        await backend.aclose()


@needs_model
async def test_a_growing_prefill_cut_short_leaves_the_warm_window_intact() -> None:
    """The next key preempts the prefill of the larger window: it was growing in the
    spare cache, so the window the user types in is still evaluated."""
    s = _settings()
    backend = EmbeddedBackend()
    pipeline = Pipeline(s, backend, None, make_gate(s.routing))
    calls: list[dict[str, Any]] = []
    second = asyncio.Event()
    fill = backend.prefill

    async def counted(request: Any) -> dict[str, Any]:
        calls.append({})
        if len(calls) == 2:
            second.set()
        stats = await fill(request)
        calls[-1] = stats
        return stats

    backend.prefill = counted  # type: ignore[method-assign]
    try:
        await backend.calibrate()
        task = asyncio.ensure_future(pipeline.prefill(_at(2600)))
        await asyncio.wait_for(second.wait(), 120)  # the next window is warm; growing
        await asyncio.sleep(0.3)
        await pipeline.complete(_at(2600, " "))
        gen = await _gen(backend)
        grown = await task
        assert calls[0]["outcome"] == "done"
        assert grown is not None and grown["outcome"] == "preempted"
        assert grown["slot"] != calls[0]["slot"]  # grown into the spare
        assert gen.slot == calls[0]["slot"]
        assert len(gen.prompt_ids) - gen.cached_tokens <= 8  # the warm window survived
    finally:
        await backend.aclose()
