"""Check the evaluation harness against the benchmarks' own answers.

Every ground truth is spliced in and really run in the sandbox (no exact-match shortcut);
a correct harness passes (nearly) all of them. Prints pass counts per dataset and
language, the failures, and the time per program. Same task selection as
`synconfroute eval` (--limit, --seed, --langs).

    .venv/bin/python -m studies.eval_check_truth --limit safim-block=100
    .venv/bin/python -m studies.eval_check_truth --datasets safim-block --limit 20 --json
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from synconfroute.server.evaluation import datasets, download
from synconfroute.server.evaluation.execute import Toolchains, execute
from synconfroute.server.evaluation.progress import Progress
from synconfroute.server.evaluation.sandbox import Sandbox


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--datasets", default="humaneval,safim-block", help="comma-separated")
    p.add_argument("--langs", default="python,java,cpp")
    p.add_argument("--limit", action="append", default=[], metavar="[DATASET=]N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()

    limits: dict[str, int] = {}
    default = None
    for item in args.limit:
        name, _, n = item.rpartition("=")
        if name:
            limits[name] = int(n)
        else:
            default = int(n)
    tasks = []
    for name in args.datasets.split(","):
        tasks += download.load_builtin(name.strip())
    langs = [x.strip() for x in args.langs.split(",")]
    chosen = [
        t
        for t in datasets.select(
            tasks, langs=langs, limits=limits, default_limit=default, seed=args.seed
        )
        if t.truth is not None and t.match == "exec"
    ]
    box = Sandbox(workers=args.workers)
    tools = Toolchains.find()
    cache = Path(__file__).resolve().parent.parent / ".eval" / "cache"
    for lang in sorted({t.language for t in chosen}):
        tools.check(lang, box, cache)
    print(f"sandbox: {box.isolation.describe()}; {box.workers} workers", file=sys.stderr)
    progress = Progress("truth", len(chosen))
    started = time.monotonic()

    def one(t: datasets.Task) -> tuple[datasets.Task, bool, str, str, float]:
        assert t.truth is not None
        r = execute(t, t.truth, box, tools, timeout_s=args.timeout, exact_shortcut=False)
        progress.advance()
        return t, r.passed, r.outcome, r.detail, r.elapsed_s

    with ThreadPoolExecutor(max_workers=box.workers) as pool:
        results = list(pool.map(one, chosen))
    progress.finish()
    wall = time.monotonic() - started
    groups: dict[str, list[tuple[bool, float]]] = collections.defaultdict(list)
    failures = []
    for t, ok, outcome, detail, elapsed in results:
        groups[f"{t.dataset}/{t.language}"].append((ok, elapsed))
        if not ok:
            failures.append({"task": t.key, "outcome": outcome, "detail": detail[:200]})
    table = {
        g: {
            "tasks": len(v),
            "passed": sum(ok for ok, _ in v),
            "mean_s": round(sum(e for _, e in v) / len(v), 3),
        }
        for g, v in sorted(groups.items())
    }
    if args.json:
        print(
            json.dumps({"groups": table, "failures": failures, "wall_s": round(wall, 1)}, indent=1)
        )
        return 0
    print("| dataset/language | ground truths | passed | mean time per program |")
    print("|---|---:|---:|---:|")
    for g, row in table.items():
        print(f"| {g} | {row['tasks']} | {row['passed']} | {row['mean_s']:.3f} s |")
    for f in failures:
        print(f"failed: {f['task']}: {f['outcome']} {f['detail']}")
    print(f"wall time {wall:.0f} s, {box.workers} workers; sandbox: {box.isolation.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
