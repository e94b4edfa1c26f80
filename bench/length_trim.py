"""Length-cut completions trimmed to whole lines, on SAFIM block ground truths.

Each ground truth longer than the token budget (SmolLM2's tokenizer, read from the
bundled GGUF with `llama_cpp.Llama(vocab_only=True)`) is cut at `--max-tokens` tokens,
as a model that wrote the right code but hit max_tokens would hand it over (finish
reason "length"). Then, in the mode the server picks for the cursor (`wants_multiline`):
- today: the cut text (after `post_process`) goes to the gate; "invalid" escalates
  (`syntax-invalid`), assuming a confident model;
- now: `shown_text` trims it to its last complete line and, multi-line, `gate_trimmed`
  to the longest run of whole lines the gate accepts (the pipeline's rule); it
  escalates when nothing is left (`empty-local`) or the gate accepts no run.
Must hold: every trimmed text the gate accepts is a prefix of the ground truth (the
script counts the exceptions and prints the first ones).

    .venv/bin/python -m bench.length_trim                 # all 8,781 tasks
    .venv/bin/python -m bench.length_trim --langs python,java --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from typing import Any

from synconfroute.clients.embedded import bundled_model_path, import_llama_cpp
from synconfroute.server.evaluation import datasets, download
from synconfroute.server.evaluation.generate import multiline_for
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import CompletionContext
from synconfroute.server.routing.text_rules import gate_trimmed, post_process, shown_text
from synconfroute.server.settings.config import Settings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--langs", default="", help="comma-separated (default: all)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    llama_cpp = import_llama_cpp()
    model = bundled_model_path()
    if model is None:
        sys.exit("the bundled SmolLM2 GGUF is not installed (extra 'embedded')")
    vocab = llama_cpp.Llama(model_path=str(model), vocab_only=True, verbose=False)
    settings = Settings()
    gate = make_gate(settings.routing)
    langs = [x for x in args.langs.split(",") if x] or None
    tasks = datasets.select(download.load_builtin("safim-block"), langs=langs)

    stats: dict[str, Counter[str]] = defaultdict(Counter)
    bad: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for task in tasks:
        s = stats[task.language]
        s["tasks"] += 1
        truth = task.truth or ""
        ids = vocab.tokenize(truth.encode(), add_bos=False, special=False)
        if len(ids) <= args.max_tokens:
            continue
        s["longer"] += 1
        cut = vocab.detokenize(ids[: args.max_tokens]).decode("utf-8", "ignore")
        if not truth.startswith(cut):  # a tokenizer that does not round-trip: say so
            s["no_roundtrip"] += 1
            continue
        multiline = multiline_for(task, settings)
        s["multiline"] += multiline
        whole = CompletionContext(prefix=task.prefix, suffix=task.suffix, language=task.language)

        def check(text: str, whole: CompletionContext = whole) -> str:
            return gate.check(whole, text).status

        today = post_process(cut, task.suffix, multiline=multiline)
        today_escalates = not today.strip() or check(today) in ("invalid", "timeout")
        s["today_escalates"] += today_escalates

        text, _ = shown_text(cut, "length", task.suffix, multiline=multiline)
        status = check(text) if text.strip() else "empty"
        if multiline and status == "invalid":
            found = gate_trimmed(text, lambda t, w=whole: gate.check(w, t))
            if found is not None:
                text, status = found[0], found[1].status
        now_escalates = status in ("empty", "invalid", "timeout")
        s["now_escalates"] += now_escalates
        s["removed"] += today_escalates and not now_escalates
        s["added"] += now_escalates and not today_escalates
        s["empty"] += status == "empty"
        if not now_escalates:
            s["accepted"] += 1
            s["kept_chars"] += len(text)
            s["truth_chars"] += len(truth)
            if truth.startswith(text):
                s["accepted_prefix"] += 1
            elif len(bad) < 5:
                bad.append({"task": task.key, "text": text[-120:], "truth": truth[:200]})
    elapsed = time.perf_counter() - t0

    total: Counter[str] = Counter()
    for c in stats.values():
        total.update(c)
    rows = {**{k: dict(v) for k, v in sorted(stats.items())}, "all": dict(total)}
    if args.json:
        print(json.dumps({"max_tokens": args.max_tokens, "rows": rows, "not_prefix": bad}))
        return
    print(
        f"SAFIM block, ground truths cut at {args.max_tokens} SmolLM2 tokens "
        f"({len(tasks)} tasks, {elapsed:.0f} s)"
    )
    head = (
        f"{'lang':8} {'tasks':>6} {'longer':>7} {'multi':>6} {'esc today':>10} {'esc now':>8} "
        f"{'removed':>8} {'added':>6} {'accepted':>9} {'prefix':>7} {'kept':>6}"
    )
    print(head)
    for lang, r in rows.items():
        kept = r.get("kept_chars", 0) / max(1, r.get("truth_chars", 0))
        print(
            f"{lang:8} {r.get('tasks', 0):>6} {r.get('longer', 0):>7} {r.get('multiline', 0):>6} "
            f"{r.get('today_escalates', 0):>10} {r.get('now_escalates', 0):>8} "
            f"{r.get('removed', 0):>8} {r.get('added', 0):>6} {r.get('accepted', 0):>9} "
            f"{r.get('accepted_prefix', 0):>7} {kept:>6.0%}"
        )
    print(
        "longer: ground truths over the budget; esc: escalations (syntax-invalid today; "
        "invalid or nothing left now); accepted: trimmed texts the gate accepts; prefix: "
        "of those, prefixes of the ground truth; kept: their share of the truth's characters"
    )
    for b in bad:
        print(f"NOT A PREFIX {b['task']}: ...{b['text']!r}")


if __name__ == "__main__":
    main()
