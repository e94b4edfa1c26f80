"""Figures for issue 14 items 6 and 12: the client-side token cap and the backoff.

    .venv/bin/python -m bench.backend_faults [--requests 100] [--token-ms 10]

1. Token cap: a fake Ollama / vLLM that ignores num_predict / max_tokens streams
   400 tokens `--token-ms` apart; each request asks for 64 tokens within a 1 s
   deadline. Prints answers within deadline + 100 ms, latency p50/max, and the
   tokens the fake sent per request (how soon it noticed the hang-up).
2. Backoff: `--requests` completions against 429 (Retry-After: 30), 401 and a
   closed port. Prints the requests the server received, the warnings logged
   and the latency p50 of a request that fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import statistics
import time

from synconfroute.clients import BackendError, CompletionRequest
from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.clients.types import Backend
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript, closed_port

MODEL = "Qwen/Qwen2.5-Coder-32B-Instruct"
DEADLINE_S = 1.0


class Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.n = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.n += 1


def ms(xs: list[float]) -> str:
    return f"p50 {statistics.median(xs) * 1000:.0f} ms, max {max(xs) * 1000:.0f} ms"


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--token-ms", type=float, default=10.0)
    args = ap.parse_args()
    n: int = args.requests
    flood = TokenScript(tokens=[(f" t{i}", -0.1) for i in range(400)], delay=args.token_ms / 1000)
    counter = Count()
    logging.getLogger("clients").addHandler(counter)

    with FakeOllama(default=flood) as ol:
        ol.honour_num_predict = False
        backend = OllamaBackend(ol.url, "qwen2.5-coder:3b")
        await cap_phase("ollama", backend, ol, "/api/generate", n)
    with FakeOpenAI(honour_max_tokens=False, default=flood) as oa:
        backend2 = OpenAIBackend(oa.base_url, MODEL, api_key_env=None)
        await cap_phase("openai", backend2, oa, "/v1/completions", n)
    print(f"warnings logged during the cap phase: {counter.n}")

    cases: list[tuple[str, TokenScript | None]] = [
        ("429", TokenScript(status=429, retry_after="30")),
        ("401", TokenScript(status=401, body={"error": "Unauthorized"})),
        ("down", None),
    ]
    for label, script in cases:
        for kind in ("ollama", "openai"):
            counter.n = 0
            fake: FakeOllama | FakeOpenAI = FakeOllama() if kind == "ollama" else FakeOpenAI()
            with fake:
                if script is not None:
                    fake.script(script, always=True)
                    url = fake.url if kind == "ollama" else f"{fake.url}/v1"
                else:
                    url = f"http://127.0.0.1:{closed_port()}" + ("" if kind == "ollama" else "/v1")
                b: Backend = (
                    OllamaBackend(url, "qwen2.5-coder:3b")
                    if kind == "ollama"
                    else OpenAIBackend(url, MODEL, api_key_env=None)
                )
                took: list[float] = []
                try:
                    for i in range(n):
                        t0 = time.monotonic()
                        with contextlib.suppress(BackendError):
                            await b.complete(CompletionRequest(prefix=f"y{i} = ", suffix="\n"))
                        took.append(time.monotonic() - t0)
                finally:
                    await b.aclose()
                path = "/api/generate" if kind == "ollama" else "/v1/completions"
                got = len(fake.received(path)) if script is not None else "-"
            print(
                f"backoff  {label:<5} {kind:<7} {n} completions: server received {got}, "
                f"warnings logged {counter.n}, {ms(took)}"
            )


async def cap_phase(
    name: str, b: Backend, fake: FakeOllama | FakeOpenAI, path: str, n: int
) -> None:
    took: list[float] = []
    lengths = answered = 0
    try:
        for i in range(n):
            t0 = time.monotonic()
            req = CompletionRequest(prefix=f"x{i} = ", suffix="\n", deadline=t0 + DEADLINE_S)
            try:
                done = await b.complete(req)
                answered += 1
                lengths += done.finish_reason == "length"
            except BackendError:
                pass
            took.append(time.monotonic() - t0)
    finally:
        await b.aclose()
    fake.wait_for(lambda: all(r.finished or r.disconnected for r in fake.received(path)), 2)
    sent = [r.tokens_sent for r in fake.received(path)]
    on_time = sum(t <= DEADLINE_S + 0.1 for t in took)
    print(
        f"cap      {name:<7} answered {answered}/{n}, {on_time}/{n} within deadline+100 ms, "
        f"{ms(took)}, "
        f"finish=length {lengths}/{n}, tokens the server sent p50 {statistics.median(sent):.0f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
