"""Arguments and handlers of `synconfroute eval` and `synconfroute calibrate`.

Imported when the parser is built: keep module-level imports light.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..settings.config import Loaded, default_config_path

DEFAULT_OUT = Path(".eval") / "run"
ALL_DATASETS = "humaneval,safim-block,safim-api"


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _limit(value: str) -> tuple[str | None, int]:
    name, _, num = value.rpartition("=")
    try:
        n = int(num)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or DATASET=N, got {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"a limit must be at least 1, got {n}")
    return (name or None), n


def _rate(value: str) -> float:
    try:
        x = float(value.rstrip("%")) / (100 if value.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a share like 0.4 or 40%, got {value!r}"
        ) from None
    if not 0.0 <= x <= 1.0:
        raise argparse.ArgumentTypeError(f"a share of requests is between 0 and 1, got {value!r}")
    return x


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--task",
        choices=("completion", "next-edit"),
        default="completion",
        help="completion (default): the datasets below; next-edit: tasks built from the "
        "commit history given with --history (docs/next-edit.md)",
    )
    p.add_argument(
        "--history",
        type=Path,
        default=None,
        metavar="REPO",
        help="--task next-edit: a git repository, or a bundle (cloned into a temporary "
        "folder), whose commits the tasks are built from",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"run folder: records, results, summary.json, plots (default {DEFAULT_OUT}); "
        "an interrupted run resumes from it",
    )
    p.add_argument(
        "--datasets",
        type=_csv,
        default=None,
        metavar="LIST",
        help=f"built-in datasets, comma-separated (default {ALL_DATASETS}, or none "
        "when --file is given)",
    )
    p.add_argument(
        "--file",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="a task file: HumanEval-infilling or SAFIM format, or our own JSONL "
        "(docs/evaluation.md); repeatable",
    )
    p.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder holding the built-in datasets' files, for machines without internet "
        "access (default: download them once from their public releases into the user "
        "cache, checked against pinned sha256)",
    )
    p.add_argument(
        "--langs",
        type=_csv,
        default=None,
        metavar="LIST",
        help="languages to keep, e.g. python,java,cpp (default all runnable)",
    )
    p.add_argument(
        "--limit",
        type=_limit,
        action="append",
        default=[],
        metavar="[DATASET=]N",
        help="at most N tasks per dataset and language, sampled with --seed; "
        "DATASET=N for one dataset; repeatable",
    )
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument(
        "--remote",
        choices=("config", "oracle", "none"),
        default="config",
        help="config: the remote tier from the settings; oracle: the ground truth "
        "(an upper bound, for machines without a large model); none: local only",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="parallel test runs (default: the number of cores)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="wall-clock limit of one program run (default 10)",
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="tokens per generation (default completion.max_tokens)",
    )
    p.add_argument(
        "--gate-mode",
        choices=("tree-sitter", "compiler", "confirm"),
        default=None,
        help="syntax gate mode (default routing.syntax)",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="threshold of the table's confidence-only and SynConfRoute rows "
        "(default: the server's for the run's local model, routing.thresholds or "
        "routing.threshold); the curves sweep all thresholds",
    )
    p.add_argument(
        "--run-exact",
        action="store_true",
        help="also run completions equal to the ground truth (SAFIM counts them "
        "as passed without running them)",
    )
    p.add_argument(
        "--no-isolation",
        action="store_true",
        help="no namespaces (file system, network, PID) for test programs; limits still apply",
    )
    p.add_argument(
        "--python",
        default=None,
        metavar="PATH",
        help="interpreter for Python test programs (default python3 on the system PATH)",
    )
    p.add_argument(
        "--score-only",
        action="store_true",
        help="generate nothing: score (and execute) what --out already holds",
    )
    p.add_argument(
        "--regate",
        action="store_true",
        help="recompute the syntax gate's verdicts while scoring (after a gate change) "
        "instead of using the recorded ones",
    )
    p.add_argument(
        "--ceiling-only",
        action="store_true",
        help="no model: run each task's ground truth as the server would insert it and "
        "print the pipeline's ceiling (the best pass@1 any model can reach)",
    )
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plots")


def add_calibrate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "records",
        type=Path,
        nargs="?",
        metavar="RECORDS",
        help="an eval run folder (--out of `synconfroute eval`) or its records.jsonl",
    )
    p.add_argument(
        "--from-ledger",
        nargs="?",
        const="",
        metavar="LEDGER",
        help="calibrate on your own decisions instead: the ledger the server keeps "
        "(default: the platform state dir); the threshold with the most completions "
        "accepted and retained within the budget",
    )
    p.add_argument(
        "--min-decisions",
        type=int,
        default=None,
        metavar="N",
        help="with --from-ledger: refuse below this many usable decisions (default 200)",
    )
    goal = p.add_mutually_exclusive_group(required=True)
    goal.add_argument(
        "--budget",
        type=_rate,
        metavar="RATE",
        help="target escalation rate, e.g. 0.4 or 40%%: the threshold escalating "
        "the most requests without exceeding it",
    )
    goal.add_argument(
        "--best",
        action="store_true",
        help="the threshold with the best pass@1 (needs a real remote's results)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the choice, write nothing")


def run_eval_command(args: argparse.Namespace, loaded: Loaded) -> int:
    from .run import EvalOptions, run_eval

    for issue in loaded.issues:
        print(f"warning: {issue}", file=sys.stderr)
    limits: dict[str, int] = {}
    default: int | None = None
    for name, n in args.limit:
        if name is None:
            default = n
        else:
            limits[name] = n
    if args.task == "next-edit":
        from .next_edit_eval import run_next_edit_command

        return run_next_edit_command(args.history, loaded.settings, default)
    files = tuple(args.file)
    names = args.datasets if args.datasets is not None else (() if files else _csv(ALL_DATASETS))
    opts = EvalOptions(
        out=args.out,
        datasets=names,
        files=files,
        data=args.data,
        langs=args.langs,
        limits=limits,
        limit=default,
        seed=args.seed,
        remote=args.remote,
        workers=args.workers,
        timeout_s=args.timeout,
        max_tokens=args.max_tokens,
        gate_mode=args.gate_mode,
        threshold=args.threshold,
        exact_shortcut=not args.run_exact,
        isolate=not args.no_isolation,
        python=args.python,
        generate=not args.score_only,
        regate=args.regate,
        ceiling_only=args.ceiling_only,
        plot=not args.no_plot,
    )
    run_eval(opts, loaded.settings)  # an EvalError reaches cli.main's one handler
    return 0


def run_calibrate_command(args: argparse.Namespace, loaded: Loaded) -> int:
    from .calibrate import choose, describe, write_threshold
    from .records import RunFolder

    for issue in loaded.issues:
        print(f"warning: {issue}", file=sys.stderr)
    if args.from_ledger is not None:
        if args.records is not None:
            print(
                "synconfroute calibrate: give RECORDS or --from-ledger, not both", file=sys.stderr
            )
            return 2
        return _calibrate_from_ledger(args, loaded)
    if args.records is None:
        print(
            "synconfroute calibrate: give RECORDS (an eval run) or --from-ledger", file=sys.stderr
        )
        return 2
    try:
        folder = RunFolder.locate(args.records)
    except FileNotFoundError as exc:
        print(f"synconfroute calibrate: {exc}", file=sys.stderr)
        return 2
    try:  # a CalibrationError reaches cli.main's one handler
        choice = choose(folder, loaded.settings, budget=args.budget, best=args.best)
        print(describe(choice))
        if args.dry_run:
            print("dry run: nothing written")
            return 0
        path = loaded.config_path or default_config_path()
        written = write_threshold(path, choice.threshold, choice.model)
    finally:
        folder.close()
    verb = "created" if written.created else "updated"
    print(f"{verb} {written.path}: [routing] threshold = {written.value:.4f}")
    for w in written.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0


def _calibrate_from_ledger(args: argparse.Namespace, loaded: Loaded) -> int:
    from ..learning import ledger
    from .calibrate import CalibrationError, write_threshold
    from .from_ledger import MIN_SAMPLE, choose, describe

    path = Path(args.from_ledger) if args.from_ledger else ledger.default_path()
    if not path.is_file():
        print(f"synconfroute calibrate: no ledger at {path}", file=sys.stderr)
        return 2
    decisions, _, bad = ledger.load(path)
    if bad:
        print(f"warning: skipped {bad} unreadable lines in {path}", file=sys.stderr)
    try:
        choice = choose(
            decisions,
            budget=args.budget,
            best=args.best,
            min_sample=MIN_SAMPLE if args.min_decisions is None else args.min_decisions,
        )
        print(describe(choice))
        if args.dry_run:
            print("dry run: nothing written")
            return 0
        out = loaded.config_path or default_config_path()
        written = write_threshold(out, choice.threshold, choice.model)
    except CalibrationError as exc:
        print(f"synconfroute calibrate: {exc}", file=sys.stderr)
        return 1
    verb = "created" if written.created else "updated"
    print(f"{verb} {written.path}: [routing] threshold = {written.value:.4f}")
    for w in written.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if loaded.settings.routing.adaptive:
        print(
            "note: routing.adaptive is on: the server starts from this value and moves it",
            file=sys.stderr,
        )
    return 0
