"""One round of bench.lsp's plain-client measurement (shared by bench.lsp, bench.lsp_stages
and bench.lsp_floor): a new two-line document opened, the backend asked directly, then the
same completion asked through the server (distinct documents: no cache hits)."""

from __future__ import annotations

import time
from typing import Any

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.types import CompletionRequest

WARMUP = 3  # rounds left out: connection set-up, the first /api/show


async def plain_round(server: Any, backend: OllamaBackend, i: int) -> tuple[float, float, int]:
    """(backend direct ms, through the server ms, perf_counter_ns when the request was
    written) for round `i`; `server` is a bench.fault_suite.LspServer."""
    text = f"def g{i}(x):\n    return \n"
    uri = f"file:///bench/raw{i}.py"
    doc = {"uri": uri, "languageId": "python", "version": 1, "text": text}
    server.notify("textDocument/didOpen", {"textDocument": doc})
    t0 = time.perf_counter()
    await backend.complete(CompletionRequest(prefix=text[:25], suffix="\n"))
    t1 = time.perf_counter()
    params = {
        "textDocument": {"uri": uri},
        "position": {"line": 1, "character": 11},
        "context": {"triggerKind": 1},
    }
    sent = time.perf_counter_ns()
    got = await server.request("textDocument/inlineCompletion", params, wait_s=10)
    t2 = time.perf_counter()
    assert got.get("result"), got  # a completion came back: the server worked
    return (t1 - t0) * 1000, (t2 - t1) * 1000, sent


async def plain_rounds(server: Any, backend: OllamaBackend, rounds: int) -> tuple[list[float], ...]:
    """(backend direct ms, through the server ms) of `rounds` rounds after the warm-up."""
    direct: list[float] = []
    via: list[float] = []
    for i in range(rounds + WARMUP):
        d, v, _ = await plain_round(server, backend, i)
        if i >= WARMUP:
            direct.append(d)
            via.append(v)
    return direct, via
