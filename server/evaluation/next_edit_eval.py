"""`synconfroute eval --task next-edit`: next-edit tasks from a commit history
(`next_edit_tasks`), each asked through the next-edit sequence on the configured tiers,
scored by exact match of the file with the suggested edit applied.

Reported as for completions: the local tier alone (its edit, whatever the route), the
remote tier alone (every task escalated: an upper bound, the "oracle remote"), routed
(what the user would see), the share escalated, and the gate's false rejects (a local
edit that was exactly right, escalated because the gate judged it broken).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from ..routing.backends import build_tiers
from ..routing.next_edit import answer
from ..routing.next_edit.plan import EditRequest
from ..routing.next_edit.prompt import region_at
from ..routing.next_edit.sequence import suggest
from ..routing.pipeline import Pipeline, build_pipeline
from ..routing.request import CompletionContext
from ..routing.router import Rules
from ..settings.config import Settings
from ..vocab.kinds import Reason
from ..workspace.recent_edits import EditChunk
from .next_edit_tasks import Built, EditTask, build

_GATE = {Reason.SYNTAX_INVALID, Reason.UNDEFINED_NAME}


@attrs.frozen
class Scored:
    task: EditTask
    local_exact: bool
    routed_exact: bool
    remote_exact: bool | None  # None: no remote tier
    route: str
    escalated: bool
    false_reject: bool  # the local edit was right, the gate sent it away


def edit_request(task: EditTask, root: Path, settings: Settings) -> EditRequest:
    path = str(root / task.path)
    ctx = CompletionContext(
        prefix=task.text[: task.cursor], suffix=task.text[task.cursor :], language="python",
        path=path, roots=(str(root),),
    )  # fmt: skip
    chunk = EditChunk(path, task.first_line, task.after, time.monotonic(), task.before)
    return EditRequest(ctx=ctx, text=task.text, cursor=task.cursor, recent=(chunk,))


def _applied(task: EditTask, settings: Settings, region_text: str) -> str:
    """The task's file with `region_text` as the editable region (no answer: unchanged)."""
    ne = settings.next_edit
    r = region_at(task.text, task.cursor, region_lines=ne.region_lines, context_lines=0)
    old = task.text[r.start : r.end]
    e = answer.one_edit(old, region_text) if region_text else None
    if e is None:
        return task.text
    return task.text[: r.start + e.start] + e.text + task.text[r.start + e.end :]


def say(i: int, n: int, row: Scored, seconds: float) -> None:
    """One task's line of progress (stderr: the table goes to stdout)."""
    mark = {True: "exact", False: "wrong", None: "-"}
    print(
        f"  [{i}/{n}] {row.task.path}: local {mark[row.local_exact]}, "
        f"remote {mark[row.remote_exact]}, routed {mark[row.routed_exact]} "
        f"({row.route}, {seconds:.1f} s)",
        file=sys.stderr,
        flush=True,
    )


async def score(
    tasks: Sequence[EditTask],
    pipeline: Pipeline,
    rules: Rules,
    root: Path,
    progress: Callable[[int, int, Scored, float], None] | None = None,
) -> list[Scored]:
    s = pipeline.settings
    out = []
    for task in tasks:
        started = time.monotonic()
        req = edit_request(task, root, s)
        got = await suggest(pipeline, req, rules)
        rec = got.decision
        routed = task.text
        if got.edit is not None:
            e = got.edit
            routed = task.text[: e.start] + e.text + task.text[e.end :]
        local_exact = _applied(task, s, rec.local_completion) == task.expected
        remote_exact = None
        if pipeline.remote is not None:
            oracle = await suggest(pipeline, req, attrs.evolve(rules, policy="remote"))
            remote_exact = _applied(task, s, oracle.decision.completion) == task.expected
        escalated = rec.bytes_sent > 0 or rec.route == "remote"
        out.append(
            Scored(
                task=task,
                local_exact=local_exact,
                routed_exact=routed == task.expected,
                remote_exact=remote_exact,
                route=rec.route,
                escalated=escalated,
                false_reject=local_exact
                and rec.route != "local"
                and bool(_GATE & set(rec.reasons)),
            )
        )
        if progress is not None:
            progress(len(out), len(tasks), out[-1], time.monotonic() - started)
    return out


def table(built: Built, rows: Sequence[Scored]) -> str:
    n = len(rows)

    def pct(k: int) -> str:
        return f"{100 * k / n:5.1f}% ({k}/{n})" if n else "-"

    remote = [r for r in rows if r.remote_exact is not None]
    lines = [
        f"next-edit tasks: {len(built.tasks)} built from {built.commits} commits "
        f"({built.pairs} similar pairs of places, {built.out_of_region} beyond the region); "
        f"{n} run",
        f"  local alone    exact {pct(sum(r.local_exact for r in rows))}",
        "  remote alone   exact "
        + (pct(sum(bool(r.remote_exact) for r in remote)) if remote else "- (no remote tier)"),
        f"  routed         exact {pct(sum(r.routed_exact for r in rows))}",
        f"  escalated      {pct(sum(r.escalated for r in rows))}",
        f"  false rejects  {pct(sum(r.false_reject for r in rows))} "
        "(local edit right, gate sent it away)",
    ]
    return "\n".join(lines)


def _checkout(history: Path, into: Path) -> Path:
    """A repository to read: `history` itself, or a clone of a bundle into `into`."""
    if history.is_dir():
        return history
    dest = into / history.stem
    subprocess.run(["git", "clone", "-q", str(history), str(dest)], check=True)
    return dest


async def run_next_edit(
    history: Path, settings: Settings, rules: Rules, *, limit: int | None
) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        repo = _checkout(history, Path(tmp))
        built = build(repo, region_lines=settings.next_edit.region_lines, max_tasks=limit)
        print(
            f"next-edit eval: {len(built.tasks)} tasks from {built.commits} commits; asking "
            "the tiers (each task up to next_edit.deadline_ms, twice with a remote tier)",
            file=sys.stderr,
            flush=True,
        )
        tiers = await build_tiers(settings)
        pipeline = build_pipeline(settings, tiers)
        try:
            rows = await score(built.tasks, pipeline, rules, repo, say)
        finally:
            await tiers.aclose()
        return table(built, rows)


def run_next_edit_command(history: Path | None, settings: Settings, limit: int | None) -> int:
    from ..routing.rules import resolve_rules

    if history is None:
        print("synconfroute eval --task next-edit: give --history REPO_OR_BUNDLE", file=sys.stderr)
        return 2
    if not history.exists():
        print(f"synconfroute eval: {history}: no such repository or bundle", file=sys.stderr)
        return 2
    rules = resolve_rules(settings, settings.local.model)
    print(asyncio.run(run_next_edit(history, settings, rules, limit=limit)))
    return 0


__all__ = ["Scored", "edit_request", "run_next_edit", "run_next_edit_command", "score", "table"]
