"""Generate each task's local and remote completion once, through the server's own parts.

The request is what the server would send: the context cut by `make_context` to
`completion.context_lines`, `completion.max_tokens` (unless overridden), the pipeline's
stop strings, temperature 0, and in single-line mode (the mode `wants_multiline` picks,
single-line for HumanEval single-line tasks) the stop at the end of the line; the answer
becomes what the server would insert (`treat`: the stop strings, the line end, then
`server.routing.text_rules.shown_text`, which trims a generation the token budget cut to whole
lines, and in multi-line mode to the lines the gate accepts) and the local one is
checked by the server's syntax gate.

The records keep the raw generation beside that text, so when the pipeline's
post-processing changes, `refresh_all` derives the text again without generating anew
(a model stopped by a stop string writes exactly the text before it).
Unlike the server, both tiers always run to the end (no early escalation), so every
policy and threshold can be replayed from the record later.

A configuration problem (no server, unknown model, bad key) stops the run with the
backend's message; re-running the same command resumes after the last recorded task.
A per-task failure (timeout, rejected request) is recorded as that generation's error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Literal

import attrs

from synconfroute.clients import trim_tokens
from synconfroute.clients._speed import Rates
from synconfroute.clients.errors import (
    BackendError,
    BackendUnavailable,
    BadCredentials,
    FimUnsupported,
    ModelNotFound,
)
from synconfroute.clients.plan import dataset_plan
from synconfroute.clients.types import Backend, CompletionRequest, TokenLogprob, line_end

from ..routing.context import make_context
from ..routing.gate import SyntaxGate, make_gate
from ..routing.request import CompletionContext
from ..routing.text_rules import (
    REQUEST_STOPS,
    gate_trimmed,
    request_stops,
    shown_text,
    wants_multiline,
)
from ..routing.time_budget import anchored_window, local_budget
from ..settings.config import Settings
from ..vocab.kinds import GateMode
from ..vocab.verdict import Verdict
from .datasets import Task
from .progress import Progress
from .records import Generation, Record, RunFolder

RemoteKind = Literal["config", "oracle", "none"]
ORACLE_BACKEND = "oracle"
ORACLE_MODEL = "ground-truth (upper bound)"
_FATAL = (BadCredentials, ModelNotFound, FimUnsupported)
_RETRIES = (2.0, 5.0, 15.0)  # seconds to wait before retrying an unavailable server


_EXT = {"python": "py", "java": "java", "cpp": "cpp"}  # the task file's name in headers


class GenerationStopped(Exception):
    """Generation cannot go on (a backend is misconfigured or down); worded for the user."""


def context_for(task: Task, settings: Settings) -> CompletionContext:
    return make_context(
        task.prefix + task.suffix,
        len(task.prefix),
        context_lines=settings.completion.context_lines,
        language=task.language,
    )


def multiline_for(task: Task, settings: Settings) -> bool:
    """The server's single-line or multi-line decision at the task's cursor; a task may
    ask for one line whatever the cursor (HumanEval single-line: the editor's single-line
    mode, as the benchmark intends)."""
    ctx = context_for(task, settings)
    return task.multiline and wants_multiline(ctx.prefix, settings.completion.multiline)


def treat(
    task: Task,
    gen: Generation,
    settings: Settings,
    gate: SyntaxGate | None = None,
    *,
    tier: Literal["local", "remote"] = "local",
) -> Generation:
    """`gen` with `text` = what the server would insert for its `raw` generation, and the
    tokens cut to match (the confidence reads only tokens the model would have written).

    As in the pipeline: a multi-line generation the token budget cut is trimmed to the
    lines `gate` accepts; when it accepts none, the local text stays (and is rejected),
    the remote one becomes empty."""
    if not gen.ok:
        return gen
    ctx = context_for(task, settings)
    multiline = multiline_for(task, settings)
    raw, finish = gen.raw, gen.finish_reason
    # Records made before single-line requests stopped at the line end were generated
    # with the stop strings: cutting at them again changes nothing shown.
    cut = min((i for s in REQUEST_STOPS if (i := raw.find(s)) >= 0), default=len(raw))
    if cut < len(raw):
        raw, finish = raw[:cut], "stop"
    written = raw  # what the model wrote before it stopped (or was stopped)
    if not multiline and (end := line_end(raw)) >= 0:
        raw, finish, written = raw[:end], "stop", raw[: end + 1]
    text, _ = shown_text(raw, finish, ctx.suffix, multiline=multiline)
    if multiline and finish == "length" and gate is not None and text.strip():
        whole = CompletionContext(prefix=task.prefix, suffix=task.suffix, language=task.language)
        cut_in = task.language if tier == "remote" else None  # as the pipeline trims it
        found = gate_trimmed(text, lambda t: gate.check(whole, t), task.suffix, cut_in=cut_in)
        text = found[0] if found else (text if tier == "local" else "")
    kept = trim_tokens(tuple(TokenLogprob(t, lp) for t, lp in gen.tokens), written)
    return attrs.evolve(gen, text=text, tokens=tuple((t.text, t.logprob) for t in kept))


def refresh_all(folder: RunFolder, settings: Settings) -> int:
    """Derive every record's texts again with the current pipeline (in memory; the files
    are append-only). A changed local text loses its cached gate verdicts. Returns how
    many records changed."""
    changed = 0
    checker = make_gate(settings.routing)
    for key, rec in list(folder.records.items()):
        loc = treat(rec.task, rec.local, settings, checker)
        rem = (
            treat(rec.task, rec.remote, settings, checker, tier="remote")
            if rec.remote is not None
            else None
        )
        same_local = loc.text == rec.local.text and loc.tokens == rec.local.tokens
        same_remote = rem is None or rec.remote is None or rem.text == rec.remote.text
        if same_local and same_remote:
            continue
        changed += 1
        gate = rec.gate if loc.text == rec.local.text else {}
        folder.records[key] = Record(task=rec.task, local=loc, remote=rem, gate=gate)
    return changed


async def _complete(
    backend: Backend, request: CompletionRequest, tier: str, timeout_s: float
) -> Generation | BackendError:
    for attempt, wait in enumerate((*_RETRIES, None)):
        req = attrs.evolve(request, temperature=0.0, deadline=time.monotonic() + timeout_s)
        try:
            done = await backend.complete(req)
        except _FATAL as exc:
            raise GenerationStopped(f"{tier} tier ({backend.name}): {exc}") from exc
        except BackendUnavailable as exc:
            if wait is None:
                raise GenerationStopped(
                    f"{tier} tier ({backend.name}) unavailable after {attempt + 1} tries: {exc}"
                ) from exc
            await asyncio.sleep(wait)
            continue
        except BackendError as exc:
            return exc
        return Generation(
            backend=done.backend,
            model=done.model,
            raw=done.text,
            text=done.text,
            tokens=tuple((t.text, t.logprob) for t in done.tokens),
            logprobs=done.logprobs,
            finish_reason=done.finish_reason,
            first_token_s=done.first_token_s,
            total_s=done.total_s,
            bytes_sent=done.bytes_sent,
            context_bytes=sum(
                len(t.encode("utf-8", "surrogatepass")) for _, t in req.context_files
            ),
        )
    raise AssertionError("unreachable")  # pragma: no cover


def local_request(
    request: CompletionRequest, settings: Settings, local: Backend
) -> CompletionRequest:
    """The local tier's request as the pipeline sizes it (`routing.time_budget`): the
    window its measured speed allows, anchored on the line grid; a multi-line
    prediction capped in time and tokens, or a single line when several cannot arrive
    in time. So the evaluation measures the quality of what the server would show."""
    rates = getattr(local, "rates", None)
    budget = local_budget(
        settings.local, settings.completion, rates if isinstance(rates, Rates) else None
    )
    prefix, suffix = anchored_window(
        request.prefix,
        request.suffix,
        budget.prompt_chars,
        prefix_only=getattr(local, "prompt_mode", None) == "prefix-only",
    )
    out = attrs.evolve(request, prefix=prefix, suffix=suffix)
    if request.single_line:
        return out
    if not budget.multiline:
        return attrs.evolve(out, single_line=True, stop=request_stops(single_line=True))
    return attrs.evolve(
        out,
        max_tokens=min(request.max_tokens, budget.max_tokens),
        max_predict_s=budget.max_predict_s,
    )


async def generate_record(
    task: Task,
    settings: Settings,
    local: Backend,
    remote: Backend | None,
    remote_kind: RemoteKind,
    gate: SyntaxGate,
    *,
    max_tokens: int,
    timeout_s: float = 120.0,
) -> Record:
    ctx = context_for(task, settings)
    single_line = not multiline_for(task, settings)
    request = CompletionRequest(
        prefix=ctx.prefix,
        suffix=ctx.suffix,
        language=task.language,
        max_tokens=max_tokens,
        stop=request_stops(single_line=single_line),
        single_line=single_line,
        priority=settings.remote.request_priority(background=True),  # local tiers ignore it
        context_files=task.context_files,
        repo_path=f"{task.task_id}.{_EXT.get(task.language, 'txt')}" if task.context_files else "",
        plan=dataset_plan(f"task {task.task_id}", len(ctx.prefix) + len(ctx.suffix)),
    )

    def finish(
        gen: Generation | BackendError, backend: Backend, tier: Literal["local", "remote"]
    ) -> Generation:
        if isinstance(gen, BackendError):
            return Generation(
                backend=backend.name, model=backend.model, raw="", text="", error=str(gen)
            )
        return treat(task, gen, settings, gate, tier=tier)

    loc = finish(
        await _complete(local, local_request(request, settings, local), "local", timeout_s),
        local,
        "local",
    )
    rem: Generation | None = None
    if remote_kind == "config":
        assert remote is not None
        rem = finish(await _complete(remote, request, "remote", timeout_s), remote, "remote")
    elif remote_kind == "oracle":
        if task.truth is None:
            rem = Generation(
                backend=ORACLE_BACKEND,
                model=ORACLE_MODEL,
                raw="",
                text="",
                error="the task has no ground truth",
                oracle=True,
            )
        else:
            truth = Generation(
                backend=ORACLE_BACKEND, model=ORACLE_MODEL, raw=task.truth, text="", oracle=True
            )
            rem = treat(task, truth, settings)
    gates: dict[GateMode, Verdict] = {}
    if loc.ok and loc.text:
        # The whole file, as the server's gate sees an open document.
        whole = CompletionContext(prefix=task.prefix, suffix=task.suffix, language=task.language)
        t0 = time.perf_counter()
        verdict = gate.check(whole, loc.text)
        gates[gate.mode] = verdict.with_elapsed(round(time.perf_counter() - t0, 6))
    return Record(task=task, local=loc, remote=rem, gate=gates)


async def generate_all(
    tasks: Sequence[Task],
    folder: RunFolder,
    settings: Settings,
    local: Backend,
    remote: Backend | None,
    remote_kind: RemoteKind,
    gate: SyntaxGate,
    *,
    max_tokens: int,
    timeout_s: float = 120.0,
    progress: Progress | None = None,
) -> int:
    """Generate the tasks not yet in `folder`; returns how many were added."""
    todo = [t for t in tasks if t.key not in folder.records]
    added = 0
    for task in todo:
        rec = await generate_record(
            task,
            settings,
            local,
            remote,
            remote_kind,
            gate,
            max_tokens=max_tokens,
            timeout_s=timeout_s,
        )
        folder.add_record(rec)
        added += 1
        if progress is not None:
            progress.advance()
    return added
