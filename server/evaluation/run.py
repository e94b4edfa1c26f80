"""`synconfroute eval`: generate (resumable), execute (sandboxed, parallel), score, report."""

from __future__ import annotations

import asyncio
import json
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, TextIO

import attrs

from synconfroute.clients.types import Backend

from .. import __version__
from ..routing.backends import build_tiers
from ..routing.gate import SyntaxGate
from ..routing.rules import resolve_rules
from ..settings.config import Settings
from ..syntax.verdict import Mode
from ..vocab.errors import UserError
from . import ceiling, datasets, download, report, scoring
from .datasets import DatasetError, Task
from .execute import ExecResult, Toolchains, exec_key, execute
from .generate import GenerationStopped, RemoteKind, generate_all, refresh_all
from .progress import Progress
from .records import RunFolder
from .sandbox import Sandbox, SandboxError

SUMMARY = "summary.json"


class EvalError(UserError):
    """The run cannot go on; the message says what to do."""


@attrs.frozen(kw_only=True)
class EvalOptions:
    out: Path
    datasets: tuple[str, ...] = ("humaneval", "safim-block", "safim-api")
    files: tuple[Path, ...] = ()
    data: Path | None = None
    langs: tuple[str, ...] | None = None
    limits: dict[str, int] = attrs.field(factory=dict)  # per dataset
    limit: int | None = None  # every (dataset, language) without its own limit
    seed: int = 0
    remote: RemoteKind = "config"
    workers: int | None = None
    timeout_s: float = 10.0  # per program run
    request_timeout_s: float = 120.0  # per generation
    max_tokens: int | None = None  # None: completion.max_tokens
    gate_mode: Mode | None = None  # None: routing.syntax
    threshold: float | None = None  # reference threshold; None: the settings'
    exact_shortcut: bool = True
    isolate: bool = True
    python: str | None = None
    generate: bool = True  # False: score the records already in `out`
    regate: bool = False  # recompute the gate verdicts instead of using the recorded ones
    ceiling_only: bool = False  # no model: only the pipeline's ceiling of the tasks
    plot: bool = True


def load_tasks(opts: EvalOptions) -> list[Task]:
    tasks: list[Task] = []
    # every file located (or downloaded) first: one message names all the missing ones
    for name, path in download.locate(opts.datasets, opts.data).items():
        tasks += datasets.load_path(name, path)
    for path in opts.files:
        tasks += datasets.load_file(path)
    langs = opts.langs or datasets.LANGUAGES
    bad = [lang for lang in langs if lang not in datasets.LANGUAGES]
    if bad:
        raise DatasetError(
            f"cannot run {', '.join(bad)} programs; --langs takes {', '.join(datasets.LANGUAGES)}"
        )
    return datasets.select(
        tasks, langs=langs, limits=opts.limits, default_limit=opts.limit, seed=opts.seed
    )


def _gate(settings: Settings, mode: Mode | None) -> SyntaxGate:
    r = settings.routing
    return SyntaxGate(mode or r.syntax, r.syntax_budget_ms / 1000, r.compiler_budget_ms / 1000)


def _check_same_run(info: dict[str, Any], now: dict[str, Any], out: Path) -> None:
    for key in ("local_backend", "local_model", "remote", "remote_model", "max_tokens"):
        if key in info and info[key] != now[key]:
            raise EvalError(
                f"{out} holds a run with {key} = {info[key]!r}, this one has {now[key]!r}: "
                "use another --out folder (or delete that one) to start a new run"
            )


async def _generate(
    opts: EvalOptions, settings: Settings, tasks: list[Task], folder: RunFolder, err: TextIO
) -> dict[str, Any]:
    tiers = await build_tiers(settings, remote=opts.remote == "config")
    local, remote = tiers.local, tiers.remote
    if opts.remote == "config" and remote is None:
        await local.aclose()
        raise EvalError(
            "no remote tier is configured: set remote.url and remote.model (see "
            "docs/settings.md), or use --remote oracle (ground truth, an upper bound) "
            "or --remote none"
        )
    max_tokens = opts.max_tokens or settings.completion.max_tokens
    info = {
        "version": __version__,
        "local_backend": local.name,
        "local_model": local.model,
        "local_choice": tiers.choice.reason,
        "remote": opts.remote,
        "remote_model": remote.model if remote else opts.remote,
        "max_tokens": max_tokens,
        "context_lines": settings.completion.context_lines,
        "temperature": 0.0,
        "platform": platform.platform(),
    }
    try:
        _check_same_run(folder.info(), info, opts.out)
        todo = [t for t in tasks if t.key not in folder.records]
        if todo:
            prompt_mode = await _probe_local(local, err)
            info["local_prompt_mode"] = prompt_mode
            folder.write_info({**folder.info(), **info, "started": time.time()})
            progress = Progress("generate", len(todo), stream=err)
            try:
                await generate_all(
                    todo,
                    folder,
                    settings,
                    local,
                    remote,
                    opts.remote,
                    _gate(settings, opts.gate_mode),
                    max_tokens=max_tokens,
                    timeout_s=opts.request_timeout_s,
                    progress=progress,
                )
            finally:
                progress.finish()
        elif not folder.info():
            folder.write_info(info)
    finally:
        await local.aclose()
        if remote is not None:
            await remote.aclose()
    return folder.info()


async def _probe_local(local: Backend, err: TextIO) -> str | None:
    """The local prompt mode, and a warning when the model cannot fill in the middle."""
    from synconfroute.clients.embedded import EmbeddedBackend

    if isinstance(local, EmbeddedBackend):
        await local.load()
        await local.calibrate()  # the speed the local budget is sized from, as the server
        mode = local.prompt_mode
    else:
        report_ = await local.discover()
        mode = report_.prompt_mode
        for p in report_.problems:
            print(f"{p.severity}: local: {p.message} ({p.fix})", file=err)
    if mode == "prefix-only":
        print(
            f"warning: {local.model} has no fill-in-the-middle template: it sees only the "
            "code before the hole, so expect a low pass@1",
            file=err,
        )
    return mode


def execute_all(
    opts: EvalOptions,
    folder: RunFolder,
    err: TextIO,
    sandbox: Sandbox | None = None,
    settings: Settings | None = None,
    heads: ceiling.Heads | None = None,
) -> tuple[int, dict[str, Any]]:
    """Run every recorded completion that has no result yet, and with `settings` each
    task's ground truth as the server would insert it (the pipeline's ceiling); returns
    (count, sandbox info)."""
    jobs: dict[str, tuple[Task, str]] = {}
    if settings is not None:
        tasks = [rec.task for rec in folder.records.values()]
        for key, job in ceiling.jobs(tasks, settings, heads).items():
            if key not in folder.execs:
                jobs[key] = job
    for rec in folder.records.values():
        for gen in (rec.local, rec.remote):
            if gen is None or not gen.ok:
                continue
            key = exec_key(rec.task, gen.text)
            if key not in folder.execs:
                jobs.setdefault(key, (rec.task, gen.text))
    return _execute(opts, folder, jobs, err, sandbox)


def _execute(
    opts: EvalOptions,
    folder: RunFolder,
    jobs: dict[str, tuple[Task, str]],
    err: TextIO,
    sandbox: Sandbox | None = None,
) -> tuple[int, dict[str, Any]]:
    sandbox = sandbox or Sandbox(workers=opts.workers, isolate=opts.isolate)
    tools = Toolchains.find(opts.python)
    info = {"sandbox": sandbox.isolation.describe(), "workers": sandbox.workers}
    if not jobs:
        return 0, info
    cache = opts.out / "cache"
    for lang in sorted({task.language for task, _ in jobs.values()}):
        tools.check(lang, sandbox, cache)
    info["toolchain_notes"] = list(tools.notes)
    print(f"sandbox: {info['sandbox']}; {sandbox.workers} workers", file=err)
    progress = Progress("execute", len(jobs), stream=err)
    passed = 0

    def one(key: str, task: Task, text: str) -> tuple[str, Task, ExecResult]:
        return (
            key,
            task,
            execute(
                task,
                text,
                sandbox,
                tools,
                timeout_s=opts.timeout_s,
                exact_shortcut=opts.exact_shortcut,
            ),
        )

    try:
        with ThreadPoolExecutor(max_workers=sandbox.workers) as pool:
            futures = [pool.submit(one, k, t, c) for k, (t, c) in jobs.items()]
            try:
                for fut in as_completed(futures):
                    key, task, res = fut.result()
                    folder.add_exec(key, task.key, res)
                    passed += res.passed
                    progress.extra = f"{passed} passed"
                    progress.advance()
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    finally:
        progress.finish()
    return len(jobs), info


def score(
    folder: RunFolder,
    settings: Settings,
    opts: EvalOptions,
    info: dict[str, Any],
    heads: ceiling.Heads | None = None,
) -> dict[str, Any]:
    # The rules the server would use with the run's local model (its per-model threshold
    # among them), or the threshold given on the command line.
    rules = resolve_rules(settings, str(info.get("local_model", "")), opts.threshold)
    threshold, k = rules.threshold, rules.k
    mode: Mode = opts.gate_mode or settings.routing.syntax
    tasks, incomplete = scoring.outcomes(
        folder,
        rules=rules,
        gate_mode=mode,
        gate=_gate(settings, mode),
        regate=opts.regate,
    )
    if not tasks:
        raise EvalError(
            f"nothing to score in {opts.out}: no task has both its generations and their "
            "execution results (run `synconfroute eval` without --score-only first)"
        )
    remote = info.get("remote", opts.remote)
    records = [rec.task for rec in folder.records.values()]
    return {
        "run": info,
        "remote": remote,
        "upper_bound": remote == "oracle",
        "threshold": threshold,
        "k": k,
        "gate_mode": mode,
        "incomplete": incomplete,
        "ceiling": ceiling.summarize(records, settings, folder.execs, _gate(settings, mode), heads),
        "groups": {
            name: scoring.summarize(items, rules=rules)
            for name, items in scoring.groups(tasks).items()
        },
    }


CEILING = "ceiling.json"


def run_ceiling(opts: EvalOptions, settings: Settings, out: TextIO, err: TextIO) -> dict[str, Any]:
    """`eval --ceiling-only`: the pipeline's ceiling of the selected tasks, no model.
    Results go to --out's exec.jsonl (so a rerun, or a later full run, reuses them)."""
    try:
        tasks = load_tasks(opts)
    except DatasetError as exc:
        raise EvalError(str(exc)) from exc
    if not tasks:
        raise EvalError("no task selected: check --datasets, --file, --langs and --limit")
    print(f"{len(tasks)} tasks; pipeline ceiling only; results in {opts.out}", file=err)
    folder = RunFolder(opts.out)
    try:
        budget = opts.max_tokens or settings.completion.max_tokens
        heads = asyncio.run(ceiling.budget_heads(tasks, settings, budget, err))
        jobs = {
            k: j for k, j in ceiling.jobs(tasks, settings, heads).items() if k not in folder.execs
        }
        try:
            _, info = _execute(opts, folder, jobs, err)
        except SandboxError as exc:
            raise EvalError(f"cannot run the tests: {exc}") from exc
        mode: Mode = opts.gate_mode or settings.routing.syntax
        result = {
            "sandbox": info["sandbox"],
            "gate_mode": mode,
            "ceiling": ceiling.summarize(
                tasks, settings, folder.execs, _gate(settings, mode), heads
            ),
        }
    finally:
        folder.close()
    (opts.out / CEILING).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    out.write(report.ceiling_markdown(result["ceiling"]))
    out.flush()
    for line in ceiling.warnings(result["ceiling"]):
        print(line, file=err)
    print(f"ceiling: {opts.out / CEILING}", file=err)
    return result


def run_eval(
    opts: EvalOptions, settings: Settings, *, out: TextIO | None = None, err: TextIO | None = None
) -> dict[str, Any]:
    """The whole `eval` command; EvalError (or KeyboardInterrupt) stops it."""
    out = out or sys.stdout
    err = err or sys.stderr
    if opts.ceiling_only:
        return run_ceiling(opts, settings, out, err)
    folder = RunFolder(opts.out)
    try:
        if opts.generate:
            try:
                tasks = load_tasks(opts)
            except DatasetError as exc:
                raise EvalError(str(exc)) from exc
            if not tasks:
                raise EvalError("no task selected: check --datasets, --file, --langs and --limit")
            print(f"{len(tasks)} tasks; records in {opts.out}", file=err)
            try:
                info = asyncio.run(_generate(opts, settings, tasks, folder, err))
            except GenerationStopped as exc:
                raise EvalError(
                    f"generation stopped: {exc}. {len(folder.records)} tasks are recorded; fix "
                    "the problem and run the same command again to resume"
                ) from exc
        else:
            info = folder.info()
        changed = refresh_all(folder, settings)
        if changed:
            print(
                f"note: {changed} recorded completions were post-processed again with the "
                "current server pipeline (their raw generations are unchanged)",
                file=err,
            )
        truths = [rec.task for rec in folder.records.values()]
        budget = int(info.get("max_tokens") or opts.max_tokens or settings.completion.max_tokens)
        heads = asyncio.run(ceiling.budget_heads(truths, settings, budget, err))
        try:
            _, exec_info = execute_all(opts, folder, err, settings=settings, heads=heads)
        except SandboxError as exc:
            raise EvalError(f"cannot run the tests: {exc}") from exc
        info = {**info, **exec_info}
        folder.write_info(info)
        summary = score(folder, settings, opts, info, heads)
    finally:
        folder.close()
    (opts.out / SUMMARY).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    out.write(report.markdown(summary))
    out.flush()
    for line in ceiling.warnings(summary["ceiling"]):
        print(line, file=err)
    if opts.plot:
        try:
            for path in report.plot(summary, opts.out):
                print(f"plot: {path}", file=err)
        except ImportError as exc:
            print(f"note: no plot: {exc}", file=err)
    print(f"summary: {opts.out / SUMMARY}", file=err)
    return summary
