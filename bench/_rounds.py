"""One round of bench.lsp's plain-client measurement (shared by bench.lsp, bench.lsp_stages
and bench.lsp_floor): a new two-line document opened, the backend asked directly, then the
same completion asked through the server (distinct documents: no cache hits)."""

from __future__ import annotations

import time
from typing import Any

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.types import CompletionRequest

WARMUP = 3  # rounds left out: connection set-up, the first /api/show


def round_text(i: int, source: str | None) -> tuple[str, int, int]:
    """(text, line, character) of round `i`: a two-line function, or `source` (a real
    file) with `    value_{i} = ` typed before the `return` nearest its middle."""
    if source is None:
        return f"def g{i}(x):\n    return \n", 1, 11
    lines = source.split("\n")
    returns = [n for n, line in enumerate(lines) if line.startswith("        return ")]
    at = min(returns, key=lambda n: abs(n - len(lines) // 2)) if returns else len(lines) // 2
    typed = f"        value_{i} = "
    return "\n".join([*lines[:at], typed, *lines[at:]]), at, len(typed)


async def plain_round(
    server: Any, backend: OllamaBackend, i: int, source: str | None = None
) -> tuple[float, float, int]:
    """(backend direct ms, through the server ms, perf_counter_ns when the request was
    written) for round `i`; `server` is a bench.fault_suite.LspServer. With `source`, the
    direct call sends the 6,000 characters before the cursor and 2,000 after it."""
    text, line, character = round_text(i, source)
    uri = f"file:///bench/raw{i}.py"
    doc = {"uri": uri, "languageId": "python", "version": 1, "text": text}
    server.notify("textDocument/didOpen", {"textDocument": doc})
    offset = sum(len(x) + 1 for x in text.split("\n")[:line]) + character
    prefix, suffix = text[max(0, offset - 6000) : offset], text[offset : offset + 2000]
    t0 = time.perf_counter()
    await backend.complete(CompletionRequest(prefix=prefix, suffix=suffix))
    t1 = time.perf_counter()
    params = {
        "textDocument": {"uri": uri},
        "position": {"line": line, "character": character},
        "context": {"triggerKind": 1},
    }
    sent = time.perf_counter_ns()
    got = await server.request("textDocument/inlineCompletion", params, wait_s=10)
    t2 = time.perf_counter()
    assert got.get("result"), got  # a completion came back: the server worked
    return (t1 - t0) * 1000, (t2 - t1) * 1000, sent


async def plain_rounds(
    server: Any, backend: OllamaBackend, rounds: int, source: str | None = None
) -> tuple[list[float], ...]:
    """(backend direct ms, through the server ms) of `rounds` rounds after the warm-up."""
    direct: list[float] = []
    via: list[float] = []
    for i in range(rounds + WARMUP):
        d, v, _ = await plain_round(server, backend, i, source)
        if i >= WARMUP:
            direct.append(d)
            via.append(v)
    return direct, via
