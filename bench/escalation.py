"""Time to the escalation decision: early escalation vs waiting for the whole local completion.

    .venv/bin/python -m bench.escalation [--tokens 64] [--token-ms 10] [--rounds 10]

A fake Ollama streams an unconfident completion (`--tokens` tokens, `--token-ms`
apart); a fake vLLM answers at once. We measure, in one run, interleaved, the time
from the request to the moment the remote request reaches the fake vLLM (the
decision to escalate, as the cluster sees it) and the total request time, with
routing.early_escalation on and off, and print the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.settings.config import CompletionSettings, RoutingSettings, Settings
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript


async def one(local: FakeOllama, remote: FakeOpenAI, early: bool, i: int) -> tuple[float, float]:
    s = Settings(
        routing=RoutingSettings(early_escalation=early),
        completion=CompletionSettings(max_tokens=256),
    )
    p = Pipeline(
        s,
        OllamaBackend(local.url, "qwen2.5-coder:3b"),
        OpenAIBackend([remote.base_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None),
        make_gate(s.routing),
    )
    ctx = CompletionContext(prefix=f"def f{i}(x):\n    return ", suffix="\n", language="python")
    n_before = len(remote.received("/v1/completions"))
    t0 = time.monotonic()
    rec = await p.complete(ctx)
    total = time.monotonic() - t0
    assert rec.route == "remote", rec.reasons
    arrived = remote.received("/v1/completions")[n_before]
    decision = arrived.arrived_at - t0
    for b in (p.local, p.remote):
        if b is not None:
            await b.aclose()
    return decision * 1000, total * 1000


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--token-ms", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    script = TokenScript.of(
        *[f" t{i}" for i in range(args.tokens)], logprob=-2.5, delay=args.token_ms / 1000
    )
    res: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    with FakeOllama(default=script) as local, FakeOpenAI() as remote:
        for i in range(args.rounds):
            for early in (True, False):
                res[early].append(await one(local, remote, early, i))
    print(
        f"escalation decision, {args.tokens}-token unconfident local completion, "
        f"{args.token_ms:.0f} ms per token, {args.rounds} rounds interleaved"
    )
    med = {}
    for early in (True, False):
        d = statistics.median(x[0] for x in res[early])
        tot = statistics.median(x[1] for x in res[early])
        med[early] = (d, tot)
        name = "early escalation " if early else "wait for the end "
        print(f"  {name} decision p50 {d:8.1f} ms   request total p50 {tot:8.1f} ms")
    print(
        f"  ratio (early / wait): decision {med[True][0] / med[False][0]:.3f}, "
        f"total {med[True][1] / med[False][1]:.3f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
