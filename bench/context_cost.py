"""What cross-file context costs the embedded tier on this CPU (issue 21).

The real session and pipeline drive the real embedded backend (SmolLM2-135M in its
llama.cpp worker process); two sessions side by side, one with context (the defaults:
the workspace index and recent edits) and one without (`completion.context = "file"`,
`completion.recent_edits = false`), each with its own worker (its own KV cache), the
requests interleaved so the machine's noise hits both alike.

Tasks: masked calls of click (see bench/context_prompt.py; files of 200+ lines, where
the window is full). For each task:
- cold: the first request at the cursor (a file the KV cache has not seen);
- typing: the masked line typed back one character at a time, a request after each
  (as an editor sends them), up to --keys characters.

Prints p50 first-token time (cold and typing) with and without context, their ratio,
the KV-cache reuse rate while typing (prompt tokens reused from the previous request /
prompt tokens), how often the context changed between two keystrokes, and whether the
callee's header is in the tokens the model saw (decoded from the worker's prompt ids).

The total is fixed (--prompt-chars, default 4,500: what fits SmolLM2's window) so both
sides get the same budget; --measured-budget lets the tier's measured speed set it
instead (local.first_token_target_ms, issue 26), as the server does.

    .venv/bin/python -m bench.context_cost [--tasks 10] [--keys 16] [--measured-budget]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.context_prompt import REPOS, hit, tasks_for
from synconfroute.clients.embedded import EmbeddedBackend
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.session.session import Edit, Session
from synconfroute.server.settings import config
from synconfroute.server.syntax.languages import detect_language


def _session(root: str, with_context: bool, args: argparse.Namespace) -> Session:
    changes: dict[str, dict[str, Any]] = {
        "editor": {"debounce_ms": 0},
        "completion": {"deadline_ms": 60000},  # measure, do not cut
        "local": {"max_prompt_chars": args.prompt_chars},
    }
    if not args.measured_budget:  # the same total for both sides, whatever the speed
        changes["local"]["first_token_target_ms"] = 0
    if not with_context:
        changes["completion"] |= {"context": "file", "recent_edits": False}
    s = config.with_values(config.Settings(), changes)

    def make(st: config.Settings) -> Pipeline:
        return Pipeline(st, EmbeddedBackend(None, n_ctx=args.n_ctx), None, make_gate(st.routing))

    loaded = config.Loaded(s, (), config.default_config_path(), False)
    return Session(loaded, make_pipeline=make, roots=lambda: [Path(root).as_uri()])


async def _one(
    session: Session, uri: str, line: int, col: int, out: dict[str, list[float]], kind: str
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    done = await session.complete(uri, line, col, invoked=True)
    pipeline = await session.pipeline()
    gen = getattr(pipeline.local, "last_generation", None)
    if done is None or gen is None:
        return (), ()
    ms = done.decision.latency_ms.get("local_first_token")
    if ms is not None:
        out[f"{kind}_first_token_ms"].append(ms)
    out[f"{kind}_total_ms"].append(done.decision.latency_ms.get("local_total", 0.0))
    if gen.prompt_ids:
        out[f"{kind}_prompt_tokens"].append(len(gen.prompt_ids))
        if kind == "typing":
            out["kv_reuse"].append(gen.cached_tokens / len(gen.prompt_ids))
    files = tuple(f"{p}:{n}" for p, n, _ in done.decision.context_files)
    return tuple(gen.prompt_ids), files


async def run(root: str, tasks: list[dict[str, Any]], args: argparse.Namespace) -> None:
    sessions = {True: _session(root, True, args), False: _session(root, False, args)}
    for s in sessions.values():
        index = s.start_index()
        for _ in range(1200):
            if index is None or index.ready:
                break
            await asyncio.sleep(0.05)
        p = await s.pipeline()
        assert isinstance(p.local, EmbeddedBackend)
        await p.local.load()
    stats: dict[bool, dict[str, list[float]]] = {
        k: {
            "cold_first_token_ms": [],
            "cold_total_ms": [],
            "cold_prompt_tokens": [],
            "typing_first_token_ms": [],
            "typing_total_ms": [],
            "typing_prompt_tokens": [],
            "kv_reuse": [],
            "context_changed": [],
            "callee_seen": [],
        }
        for k in sessions
    }
    for n, task in enumerate(tasks):
        typed = task["typed"][: args.keys]
        for with_context in (n % 2 == 0, n % 2 != 0):  # alternate who goes first
            session, out = sessions[with_context], stats[with_context]
            uri = Path(task["path"]).as_uri()
            session.open(uri, task["text"], detect_language(None, task["path"]))
            line, col = task["line"], task["col"]
            ids, files = await _one(session, uri, line, col, out, "cold")
            if ids:
                p = await session.pipeline()
                seen = await p.local.detokenize(list(ids))  # type: ignore[union-attr]
                out["callee_seen"].append(float(hit(seen, task)))
            for ch in typed:
                session.change(uri, [Edit(ch, (line, col), (line, col))])
                col += 1
                _, now = await _one(session, uri, line, col, out, "typing")
                out["context_changed"].append(float(now != files))
                files = now
            session.close(uri)
        print(f"task {n + 1}/{len(tasks)} done", file=sys.stderr, flush=True)
    for s in sessions.values():
        await s.shutdown()

    def p50(v: list[float]) -> str:
        return f"{statistics.median(v):.0f}" if v else "-"

    def mean(v: list[float]) -> str:
        return f"{statistics.fmean(v):.2f}" if v else "-"

    on, off = stats[True], stats[False]
    total = "measured budget" if args.measured_budget else f"prompt {args.prompt_chars} ch"
    print(f"\n{len(tasks)} tasks, up to {args.keys} keystrokes each; {total}")
    print(f"{'':34}{'with context':>14}{'without':>10}{'ratio':>8}")
    for key, label in (
        ("cold_first_token_ms", "first token, cold (p50 ms)"),
        ("typing_first_token_ms", "first token, typing (p50 ms)"),
        ("cold_total_ms", "completion, cold (p50 ms)"),
        ("typing_total_ms", "completion, typing (p50 ms)"),
        ("cold_prompt_tokens", "prompt tokens, cold (p50)"),
    ):
        a, b = on[key], off[key]
        ratio = statistics.median(a) / statistics.median(b) if a and b else float("nan")
        print(f"{label:34}{p50(a):>14}{p50(b):>10}{ratio:>8.2f}")
    kv = "KV-cache reuse while typing (mean)"
    print(f"{kv:34}{mean(on['kv_reuse']):>14}{mean(off['kv_reuse']):>10}")
    print(f"{'context changed between keys':34}{mean(on['context_changed']):>14}")
    seen = "callee header in model tokens"
    print(f"{seen:34}{mean(on['callee_seen']):>14}{mean(off['callee_seen']):>10}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--keys", type=int, default=16)
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument(
        "--prompt-chars",
        type=int,
        default=4500,
        help="local.max_prompt_chars: what fits SmolLM2's 2,048-token window (the worker "
        "trims the START of a longer prompt, context first)",
    )
    ap.add_argument(
        "--measured-budget",
        action="store_true",
        help="let the tier's measured speed shrink the prompt (local.first_token_target_ms, "
        "issue 26) instead of the fixed --prompt-chars",
    )
    args = ap.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(next(REPOS.glob("click*.tar.gz"))) as tf:
            tf.extractall(f"{tmp}/click", filter="data")
        root = str(next(p for p in Path(f"{tmp}/click").iterdir() if p.is_dir()))
        tasks = [t for t in tasks_for(root, 40, random.Random(11)) if t["lines"] >= 200]
        random.Random(5).shuffle(tasks)
        tasks = tasks[: args.tasks]
        for t in tasks:
            original = Path(t["path"]).read_text(encoding="utf-8").split("\n")[t["line"]]
            t["typed"] = original[t["col"] :]
        asyncio.run(run(root, tasks, args))
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
