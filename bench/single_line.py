"""Single-line completions that stop at the end of the line, against the old behaviour
(generate up to max_tokens, keep the first line), on HumanEval single-line infilling with
the embedded SmolLM2, in one process, the two arms alternating per task.

Per task and arm: tokens the model generated (llama.cpp's count, including a token
sampled before a cancel took effect) and the local latency (the request until its
answer is in; the generation's stop is not waited for). Both arms see the prompt warm:
a one-token request primes the KV cache first, so the order does not favour either.
Arms:
- `before`: the request the pipeline sent until now (the pipeline's stop strings, no
  line stop), read to the end, then `post_process` keeps the first line;
- `after`: the request the pipeline sends now in single-line mode (`single_line`, no
  stop strings), through `complete()` (what the remote tier and `eval` use);
- `pipeline` (with --pipeline): the same through `Pipeline.complete` (the local tier's
  stream path; single-line forced with completion.multiline = false, as HumanEval
  single-line tasks are), no remote: latency is the record's `local_total`.
The shown text should be the same in every arm, except where the line did not end within
max_tokens ("trimmed": the pipeline no longer shows a line the budget cut); the script
counts the other differences and prints the first ones (llama.cpp's greedy choice may
depend on how much of the prompt came from its KV cache).

    .venv/bin/python -m bench.single_line --tasks 150
    .venv/bin/python -m bench.single_line --tasks 40 --pipeline --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

import attrs

from synconfroute.clients.embedded import EmbeddedBackend
from synconfroute.clients.types import CompletionRequest
from synconfroute.server.evaluation import datasets, download
from synconfroute.server.evaluation.generate import context_for
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.text_rules import (
    REQUEST_STOPS,
    post_process,
    request_stops,
    shown_text,
)
from synconfroute.server.settings.config import Settings


def request(ctx: Any, single_line: bool, max_tokens: int) -> CompletionRequest:
    return CompletionRequest(
        prefix=ctx.prefix,
        suffix=ctx.suffix,
        language=ctx.language,
        max_tokens=max_tokens,
        stop=request_stops(single_line=True) if single_line else REQUEST_STOPS,
        single_line=single_line,
    )


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


async def tokens_of(backend: EmbeddedBackend) -> int:
    gen = backend.last_generation
    assert gen is not None
    await asyncio.to_thread(gen.finished.wait, 30)  # counts are final once it stopped
    return gen.tokens_generated


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=150, help="HumanEval tasks (of 1,033)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pipeline", action="store_true", help="also run the Pipeline arm")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    settings = Settings()
    tasks = datasets.select(
        download.load_builtin("humaneval"), limits={"humaneval": args.tasks}, seed=args.seed
    )
    backend = EmbeddedBackend()
    load_s = await backend.load()
    pipe_settings = attrs.evolve(
        settings, completion=attrs.evolve(settings.completion, multiline=False)
    )
    pipe = Pipeline(pipe_settings, backend, None, make_gate(settings.routing))
    arms = ["before", "after"] + (["pipeline"] if args.pipeline else [])
    tok: dict[str, list[float]] = {a: [] for a in arms}
    lat: dict[str, list[float]] = {a: [] for a in arms}
    differ = {a: 0 for a in arms}  # for another reason than the budget trim
    trimmed = {a: 0 for a in arms}  # a line the budget cut, no longer shown (section 2)
    examples: list[dict[str, str]] = []
    max_tokens = settings.completion.max_tokens
    t_start = time.perf_counter()
    for i, task in enumerate(tasks):
        ctx = context_for(task, settings)

        await backend.complete(request(ctx, False, 1))  # prime the KV cache
        await tokens_of(backend)
        texts: dict[str, str] = {}
        cut: dict[str, bool] = {}
        order = arms if i % 2 == 0 else arms[::-1]
        for arm in order:
            if arm == "pipeline":
                pipe.cache.clear()
                rec = await pipe.complete(ctx)
                lat[arm].append(rec.latency_ms["local_total"])
                texts[arm], cut[arm] = rec.local_completion, "local" in rec.truncated
            else:
                t0 = time.perf_counter()
                done = await backend.complete(request(ctx, arm == "after", max_tokens))
                lat[arm].append((time.perf_counter() - t0) * 1000)
                if arm == "before":  # what the pipeline showed until now
                    texts[arm] = post_process(done.text, ctx.suffix, multiline=False)
                else:
                    shown, trunc = shown_text(
                        done.text, done.finish_reason, ctx.suffix, multiline=False
                    )
                    texts[arm], cut[arm] = shown, trunc is not None
            tok[arm].append(await tokens_of(backend))
        for arm in arms:
            if texts[arm] == texts["before"]:
                continue
            trimmed[arm] += cut.get(arm, False)
            differ[arm] += not cut.get(arm, False)
            if not cut.get(arm, False) and len(examples) < 8:
                examples.append(
                    {
                        "task": task.key,
                        "arm": arm,
                        "text": texts[arm][:80],
                        "before": texts["before"][:80],
                    }
                )
    elapsed = time.perf_counter() - t_start
    await backend.aclose()

    out: dict[str, Any] = {
        "tasks": len(tasks),
        "of": 1033,
        "model": backend.model,
        "max_tokens": settings.completion.max_tokens,
        "load_s": round(load_s, 2),
        "elapsed_s": round(elapsed, 1),
        "differences": examples,
        "arms": {
            a: {
                "tokens_mean": round(statistics.fmean(tok[a]), 2),
                "tokens_p50": pct(tok[a], 0.5),
                "tokens_p90": pct(tok[a], 0.9),
                "latency_ms_p50": round(pct(lat[a], 0.5), 1),
                "latency_ms_p90": round(pct(lat[a], 0.9), 1),
                "text_differs_from_before": differ[a],
                "line_cut_by_budget_not_shown": trimmed[a],
            }
            for a in arms
        },
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"HumanEval single-line, {out['tasks']} of 1,033 tasks (seed {args.seed}), "
        f"{out['model']} embedded, max_tokens {out['max_tokens']}, {elapsed:.0f} s"
    )
    print(
        f"{'arm':10} {'tokens mean':>11} {'p50':>5} {'p90':>5} {'lat p50 ms':>11} "
        f"{'lat p90 ms':>11} {'trimmed':>8} {'differs':>8}"
    )
    for a, r in out["arms"].items():
        print(
            f"{a:10} {r['tokens_mean']:>11} {r['tokens_p50']:>5} {r['tokens_p90']:>5} "
            f"{r['latency_ms_p50']:>11} {r['latency_ms_p90']:>11} "
            f"{r['line_cut_by_budget_not_shown']:>8} {r['text_differs_from_before']:>8}"
        )
    for e in examples:
        print(f"differs: {e['task']} {e['arm']}: {e['text']!r} (before: {e['before']!r})")


if __name__ == "__main__":
    asyncio.run(main())
