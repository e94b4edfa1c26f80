"""Measure the embedded backend (llama.cpp in process) on this machine.

Prints: model load time, time to first token (p50 over N requests with a
realistic 30-line Python prefix; "cold" = a prompt the KV cache has never seen,
"typing" = the previous prefix plus one more character, as while typing),
decode tokens/second and prompt tokens/second.

    .venv/bin/python scripts/bench_embedded.py            # bundled SmolLM2
    .venv/bin/python scripts/bench_embedded.py --json --model path/to/model.gguf
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clients.embedded import EmbeddedBackend, Generation, import_llama_cpp
from clients.errors import BackendError
from clients.types import CompletionRequest

# 30 lines of ordinary Python, cut in the middle of a statement.
PREFIX = '''\
"""Inventory bookkeeping for the warehouse service."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from pathlib import Path


@dataclasses.dataclass
class Item:
    sku: str
    name: str
    quantity: int
    price: float

    def total_value(self) -> float:
        return self.quantity * self.price


def load_items(path: Path) -> list[Item]:
    with path.open() as f:
        rows = json.load(f)
    return [Item(**row) for row in rows]


def value_by_prefix(items: list[Item]) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for item in items:
        totals[item.sku[:3]] += '''

SUFFIX = "\n    return dict(totals)\n"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


async def run_one(b: EmbeddedBackend, prefix: str, max_tokens: int) -> tuple[float, Generation]:
    request = CompletionRequest(prefix=prefix, suffix=SUFFIX, max_tokens=max_tokens)
    done = await b.complete(request)
    gen = b.last_generation
    assert gen is not None
    if done.first_token_s is None:  # the model ended at once: count the end token's time
        return done.total_s, gen
    return done.first_token_s, gen


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    import_llama_cpp()  # timed apart from the model load
    import_s = time.monotonic() - started
    b = EmbeddedBackend(args.model, n_ctx=args.n_ctx, n_threads=args.n_threads)
    try:
        load_s = await b.load()
        await run_one(b, "x = 1\n", 4)  # warm-up: first decode allocates buffers

        cold: list[float] = []
        cold_gens: list[Generation] = []
        for i in range(args.requests):
            # A different first line: nothing of the prompt is in the KV cache.
            ttft, gen = await run_one(b, f"# request {i}\n{PREFIX}", args.max_tokens)
            cold.append(ttft)
            cold_gens.append(gen)

        typing: list[float] = []
        typed = PREFIX
        await run_one(b, typed, args.max_tokens)  # the cache now holds this prefix
        for i in range(args.requests):
            typed += "item.total_value()"[i % 18]
            ttft, _ = await run_one(b, typed, args.max_tokens)
            typing.append(ttft)

        decode_tokens = sum(max(0, g.tokens_generated - 1) for g in cold_gens)
        decode_s = sum(g.decode_s for g in cold_gens)
        prompt_tokens = sum(len(g.prompt_ids) - g.cached_tokens for g in cold_gens)
        prompt_s = sum(g.prompt_s or 0.0 for g in cold_gens)
        return {
            "model": b.model,
            "model_path": str(b.model_path),
            "prompt_mode": b.prompt_mode,
            "n_ctx": args.n_ctx,
            "n_threads": args.n_threads,
            "cpus": os.cpu_count(),
            "machine": platform.machine(),
            "requests": args.requests,
            "max_tokens": args.max_tokens,
            "prompt_tokens": len(cold_gens[0].prompt_ids) if cold_gens else 0,
            "import_s": import_s,
            "load_s": load_s,
            "ttft_cold_p50_s": statistics.median(cold),
            "ttft_cold_p90_s": percentile(cold, 0.9),
            "ttft_typing_p50_s": statistics.median(typing),
            "ttft_typing_p90_s": percentile(typing, 0.9),
            "decode_tokens_per_s": decode_tokens / decode_s if decode_s else None,
            "prompt_tokens_per_s": prompt_tokens / prompt_s if prompt_s else None,
            "decoded_tokens": decode_tokens,
        }
    finally:
        await b.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="GGUF file (default: bundled SmolLM2)")
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--n-threads", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    try:
        r = asyncio.run(bench(args))
    except BackendError as exc:
        print(f"bench_embedded: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(r, indent=2))
        return 0

    def ms(s: float) -> str:
        return f"{s * 1000:.1f} ms"

    print(f"model           {r['model']} ({r['prompt_mode']}), n_ctx {r['n_ctx']}")
    print(f"machine         {r['cpus']} CPUs {r['machine']}, n_threads {r['n_threads'] or 'auto'}")
    print(f"import llama_cpp {ms(r['import_s'])}")
    print(f"model load      {ms(r['load_s'])}")
    print(f"prompt          {r['prompt_tokens']} tokens (30-line Python prefix)")
    print(
        f"first token     cold p50 {ms(r['ttft_cold_p50_s'])} (p90 {ms(r['ttft_cold_p90_s'])}), "
        f"typing p50 {ms(r['ttft_typing_p50_s'])} (p90 {ms(r['ttft_typing_p90_s'])}) "
        f"over {r['requests']} requests"
    )
    print(f"decode          {r['decode_tokens_per_s']:.1f} tokens/s ({r['decoded_tokens']} tokens)")
    print(f"prompt eval     {r['prompt_tokens_per_s']:.1f} tokens/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
