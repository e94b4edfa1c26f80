"""Measure the embedded backend on this machine: llama.cpp in its worker process
against llama.cpp in the same process (the engine alone), side by side.

For each mode, prints: model load time, time to first token (p50 over N requests
with a realistic 30-line Python prefix; "cold" = a prompt the KV cache has never
seen, "typing" = the previous prefix plus one more character, as while typing),
decode and prompt tokens/second, and resident memory of the process that hosts the
backend (the language server) and of the worker. Each mode runs in a fresh child
process, alternating over --rounds rounds, so the machine's noise hits both alike;
the table gives medians over rounds and the ratio worker / in-process.

    .venv/bin/python -m bench.embedded                 # bundled SmolLM2
    .venv/bin/python -m bench.embedded --rounds 5 --json
    # another llama.cpp build (e.g. a native one in another venv), same engine code:
    .venv/bin/python -m bench.embedded --compare-python /tmp/native/bin/python
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from synconfroute.clients._llama import LlamaRunner
from synconfroute.clients.embedded import EmbeddedBackend, GenerationStats, import_llama_cpp
from synconfroute.clients.errors import BackendError
from synconfroute.clients.types import CompletionRequest

ROOT = Path(__file__).resolve().parent.parent

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


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


async def run_one(
    b: EmbeddedBackend | LlamaRunner, prefix: str, max_tokens: int
) -> tuple[float, GenerationStats]:
    request = CompletionRequest(prefix=prefix, suffix=SUFFIX, max_tokens=max_tokens)
    done = await b.complete(request)
    gen = b.last_generation
    assert gen is not None
    if done.first_token_s is None:  # the model ended at once: count the end token's time
        return done.total_s, gen
    return done.first_token_s, gen


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    b: EmbeddedBackend | LlamaRunner
    if args.mode == "worker":
        import_s = 0.0  # the worker imports llama_cpp: part of its load
        b = EmbeddedBackend(args.model, n_ctx=args.n_ctx, n_threads=args.n_threads)
    else:
        started = time.monotonic()
        import_llama_cpp()  # timed apart from the model load
        import_s = time.monotonic() - started
        b = LlamaRunner(args.model, n_ctx=args.n_ctx, n_threads=args.n_threads)
    try:
        started = time.monotonic()
        load_s = await b.load()
        start_s = time.monotonic() - started  # worker: process start + import + load
        await run_one(b, "x = 1\n", 4)  # warm-up: first decode allocates buffers

        cold: list[float] = []
        cold_gens: list[GenerationStats] = []
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
        worker_pid = b.worker_pid if isinstance(b, EmbeddedBackend) else None
        return {
            "mode": args.mode,
            "llama_cpp_python": _llama_version(),
            "server_rss_mb": rss_mb(os.getpid()),
            "worker_rss_mb": rss_mb(worker_pid) if worker_pid else None,
            "start_s": start_s,
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


def _llama_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("llama_cpp_python")
    except metadata.PackageNotFoundError:
        return None


def child(args: argparse.Namespace) -> int:
    try:
        r = asyncio.run(bench(args))
    except BackendError as exc:
        print(f"bench_embedded: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(r))
    return 0


def run_child(python: str, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    argv = [python, __file__, "--mode", mode, "--requests", str(args.requests)]
    argv += ["--max-tokens", str(args.max_tokens), "--n-ctx", str(args.n_ctx)]
    if args.model:
        argv += ["--model", args.model]
    if args.n_threads:
        argv += ["--n-threads", str(args.n_threads)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"bench_embedded: {mode} with {python} failed: {out.stderr[-1500:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


FIELDS = [
    ("start_s", "start (process, import, load)", 1000, "ms"),
    ("load_s", "model load", 1000, "ms"),
    ("ttft_cold_p50_s", "first token, new prompt p50", 1000, "ms"),
    ("ttft_typing_p50_s", "first token, typing p50", 1000, "ms"),
    ("ttft_typing_p90_s", "first token, typing p90", 1000, "ms"),
    ("decode_tokens_per_s", "decode", 1, "tok/s"),
    ("prompt_tokens_per_s", "prompt eval", 1, "tok/s"),
    ("server_rss_mb", "RSS, server process", 1, "MB"),
    ("worker_rss_mb", "RSS, worker process", 1, "MB"),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="GGUF file (default: bundled SmolLM2)")
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--n-threads", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per mode")
    parser.add_argument(
        "--compare-python",
        metavar="PYTHON",
        help="also run the in-process engine with this interpreter (another llama.cpp build)",
    )
    parser.add_argument("--mode", choices=["worker", "inprocess"], help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.mode:
        return child(args)

    runs: list[tuple[str, str, str]] = [
        ("in-process", sys.executable, "inprocess"),
        ("worker", sys.executable, "worker"),
    ]
    if args.compare_python:
        runs.append(("other build", args.compare_python, "inprocess"))
    results: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in runs}
    for round_ in range(args.rounds):
        for label, python, mode in runs:
            print(f"round {round_ + 1}/{args.rounds}: {label}", file=sys.stderr)
            results[label].append(run_child(python, mode, args))

    def med(label: str, key: str) -> float | None:
        values = [r[key] for r in results[label] if r.get(key) is not None]
        return statistics.median(values) if values else None

    table = {label: {k: med(label, k) for k, *_ in FIELDS} for label in results}
    if args.json:
        print(json.dumps({"medians": table, "runs": results}, indent=2))
        return 0
    first = results["in-process"][0]
    print(
        f"model   {first['model']} ({first['prompt_mode']}), n_ctx {first['n_ctx']}, "
        f"{first['prompt_tokens']}-token prompt, {args.requests} requests x {args.rounds} rounds"
    )
    print(
        f"machine {first['cpus']} CPUs {first['machine']}; llama-cpp-python "
        f"{first['llama_cpp_python']}"
    )
    labels = list(results)
    print(f"{'':32}" + "".join(f"{lab:>14}" for lab in labels) + f"{'worker/in-proc':>16}")
    for key, name, scale, unit in FIELDS:
        row = f"{name + ' (' + unit + ')':32}"
        for lab in labels:
            v = table[lab][key]
            row += f"{'-' if v is None else f'{v * scale:.1f}':>14}"
        a, b = table["in-process"][key], table["worker"][key]
        row += f"{(b / a):>16.2f}" if a and b else f"{'-':>16}"
        print(row)
    if args.compare_python:
        a = table["in-process"]["decode_tokens_per_s"]
        b = table["other build"]["decode_tokens_per_s"]
        if a and b:
            print(f"decode tokens/s, this build / other build: {a / b:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
