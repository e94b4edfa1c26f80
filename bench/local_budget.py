"""A hung or slow local tier with a healthy remote: how many requests still get a completion.

    .venv/bin/python -m bench.local_budget [--rounds 20] [--mode hung|slow]

A fake Ollama accepts each request and never answers (`hung`) or streams one token per
second (`slow`); a fake vLLM answers at once. For each request, the pipeline runs with the
default settings (deadline 4 s, local.first_token_ms / local.total_ms at their defaults).
Prints the routes, the latency percentiles and the bytes the decisions claim were sent,
against the bytes the fake vLLM actually received.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.settings.config import Settings
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript


async def run(rounds: int, mode: str) -> None:
    script = (
        TokenScript(hang=True)
        if mode == "hung"
        else TokenScript.of(*[f" t{i}" for i in range(20)], logprob=-0.01, delay=1.0)
    )
    with FakeOllama(default=script) as local, FakeOpenAI() as remote:
        s = Settings()
        p = Pipeline(
            s,
            OllamaBackend(local.url, "qwen2.5-coder:3b"),
            OpenAIBackend([remote.base_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None),
            make_gate(s.routing),
        )
        routes: Counter[str] = Counter()
        took: list[float] = []
        claimed = 0
        for i in range(rounds):
            ctx = CompletionContext(prefix=f"def f{i}(x):\n    return ", suffix="\n")
            t0 = time.monotonic()
            rec = await p.complete(ctx)
            took.append((time.monotonic() - t0) * 1000)
            routes[rec.route] += 1
            claimed += rec.bytes_sent
        received = sum(len(r.body) for r in remote.received("/v1/completions"))
        await p.local.aclose() if p.local else None
        await p.remote.aclose() if p.remote else None
    q = statistics.quantiles(took, n=20, method="inclusive")
    print(f"mode {mode}: {rounds} requests, routes {dict(routes)}")
    print(f"latency ms: p50 {statistics.median(took):.0f}  p95 {q[-1]:.0f}  max {max(took):.0f}")
    print(f"bytes_sent claimed {claimed}, received by the remote {received}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--mode", choices=["hung", "slow"], default="hung")
    args = ap.parse_args()
    asyncio.run(run(args.rounds, args.mode))


if __name__ == "__main__":
    main()
