"""The planner: each tier's request of one completion, built once, as a frozen value.

`plan_tier(ctx, tier, budget, env)` is the one function that turns a request's context
into what a tier is sent: the other files' code and recent edits privacy lets that
tier see, the window cut to what they leave (the local window on a line grid, so its
KV cache survives typing), the backend request, and its `PromptPlan` (every source with
its resolved real path, for the egress gate: the remote tier's is resolved while
planning; the local tier's, which no gate reads, only if asked for). `plan_local`
sizes the local prompt as part of planning: the cold, time-sized budget
(`time_budget`), then the largest window whose part not in the KV cache is no slower
(`kv_window`); each size tried is assembled once and the one chosen is the one sent.

A `TierRequest` is frozen: the local run, its rerun, the decision record's context
notes and the privacy re-check of a remote call in flight all read the same one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal

import attrs

from synconfroute.clients._speed import Rates
from synconfroute.clients.plan import PromptPlan
from synconfroute.clients.types import Backend, CompletionRequest

from ..settings.config import Settings
from ..workspace import egress, privacy, prompt_split
from . import affinity, kv_window, time_budget
from .request import CompletionContext
from .steps import ContextNote
from .text_rules import request_stops, wants_multiline
from .time_budget import TierBudget

Tier = Literal["local", "remote"]


@attrs.frozen
class TierRequest:
    """One tier's request, planned once: what is sent, and what it is made of."""

    tier: Tier
    request: CompletionRequest  # carries the PromptPlan to the egress gate (remote tier)
    notes: tuple[ContextNote, ...]  # the other files that fed it: (shown path, bytes, tier)
    prompt_chars: int  # the total budget the prompt was cut to
    budget: TierBudget | None  # the local tier's, as the KV cache sized it; None: remote
    # The local tier's plan, resolved when asked (`plan`): only a remote request passes
    # the egress gate, and resolving real paths was half of planning.
    resolve: Callable[[], PromptPlan] | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def plan(self) -> PromptPlan | None:
        """The prompt's sources, resolved: the remote tier's as planned (the request
        carries it to the gate), the local tier's resolved now."""
        if self.request.plan is None and self.resolve is not None:
            return self.resolve()
        return self.request.plan

    @property
    def context_bytes(self) -> int:
        return sum(n[1] for n in self.notes)


@attrs.frozen
class Planning:
    """What planning reads besides the request: the settings of this moment (privacy
    among them), the local backend's traits, and the context each (document, tier) got
    last (kept while the ranking agrees)."""

    settings: Settings
    local: Backend | None
    sticky: prompt_split.Sticky


@functools.lru_cache(maxsize=1024)  # a pure function of two strings, asked twice a file
def display_path(path: str, roots: tuple[str, ...]) -> str:
    """Workspace-relative where possible (prompts and the hover card), else the file name."""
    rel = privacy.relative_paths(path, roots)
    return min(rel, key=len) if rel else path.rsplit("/", 1)[-1]


def prompt_plan(
    ctx: CompletionContext, tier: str, *, window_chars: int, context: list[tuple[str, int]]
) -> PromptPlan:
    """What `tier`'s prompt at `ctx` is made of, each source resolved now, with the
    workspace folders' own privacy rules: the one plan every kind of request (completion,
    next edit) hands to the egress gate."""
    return egress.make_plan(
        tier, ctx.path, ctx.roots, window_chars=window_chars, context=context, folders=ctx.folders
    )


def remote_affinity(ctx: CompletionContext, tier: str) -> str:
    """The replica key of a remote request (`remote.urls`' rendezvous order); "" locally."""
    return affinity.workspace_key(ctx.path, ctx.roots) if tier == "remote" else ""


def context_allowed(ctx: CompletionContext, tier: str, settings: Settings) -> Callable[[str], bool]:
    """Which other files may feed `tier`'s prompt: any for the local tier; for the remote
    tier, none unless the user sends context there (`remote.send_context`), and never a
    file privacy keeps on the machine."""
    if tier != "remote":
        return _any_file
    if settings.privacy.local_only or not settings.remote.send_context:
        return lambda f: False
    p = settings.privacy
    return lambda f: (
        not egress.check_path(f, ctx.roots, p, "context", window=ctx.path, folders=ctx.folders)
    )


def _any_file(path: str) -> bool:
    return True


def _prompt(
    ctx: CompletionContext, tier: Tier, total_chars: int, env: Planning
) -> prompt_split.TierPrompt:
    remote = tier == "remote"
    t = env.settings.remote if remote else env.settings.local
    # The window's start on a line grid, so the local KV cache and the cluster's prefix
    # cache survive the cursor moving on; no suffix for a local model that only sees
    # the prefix. (A partial: `assemble` cuts `ctx`'s own prefix and suffix.)
    prefix_only = not remote and getattr(env.local, "prompt_mode", None) == "prefix-only"
    return prompt_split.assemble(
        prefix=ctx.prefix,
        suffix=ctx.suffix,
        ranked=ctx.crossfile,
        chunks=ctx.recent_edits,
        total_chars=total_chars,
        context_tokens=t.context_tokens,
        allowed=context_allowed(ctx, tier, env.settings) if remote else _any_file,
        sticky=env.sticky,
        key=(ctx.path, f"{tier}@{total_chars}"),  # each window size its own context
        cut_window=functools.partial(time_budget.anchored_window, prefix_only=prefix_only),
    )


def _request(
    ctx: CompletionContext,
    tier: Tier,
    parts: prompt_split.TierPrompt,
    env: Planning,
    *,
    deadline: float | None,
    single_line: bool,
    budget: TierBudget | None,
) -> tuple[CompletionRequest, Callable[[], PromptPlan]]:
    """The backend request (with its `PromptPlan` for the remote tier only), and how
    to resolve that plan."""
    s = env.settings
    files = parts.files

    def plan() -> PromptPlan:
        return prompt_plan(
            ctx,
            tier,
            window_chars=len(parts.prefix) + len(parts.suffix),
            context=[(f.path, len(f.text)) for f in files],
        )

    # The time cap is for several lines: one line ends at its end, and half a line
    # is no completion.
    capped = budget is not None and not single_line
    request = CompletionRequest(
        context_files=tuple([(display_path(f.path, ctx.roots), f.text) for f in files])
        if files
        else (),
        repo=ctx.repo,
        repo_path=display_path(ctx.path, ctx.roots) if files else "",
        prefix=parts.prefix,
        suffix=parts.suffix,
        language=ctx.language,
        path=ctx.path,
        max_tokens=budget.max_tokens if budget is not None and capped else s.completion.max_tokens,
        stop=request_stops(single_line=single_line),
        temperature=0.0,
        deadline=deadline,
        single_line=single_line,
        max_predict_s=budget.max_predict_s if budget is not None and capped else None,
        priority=s.remote.request_priority(invoked=ctx.invoked) if tier == "remote" else None,
        affinity=remote_affinity(ctx, tier) if tier == "remote" else "",
        plan=plan() if tier == "remote" else None,
    )
    return request, plan


def plan_tier(
    ctx: CompletionContext,
    tier: Tier,
    budget: TierBudget | None,
    env: Planning,
    *,
    deadline: float | None,
    single_line: bool,
) -> TierRequest:
    """`tier`'s request at `ctx` within `budget` (the local tier's; the remote tier's is
    `remote.max_prompt_chars`), privacy applied under `env.settings`."""
    chars = env.settings.remote.max_prompt_chars if budget is None else budget.prompt_chars
    parts = _prompt(ctx, tier, chars, env)
    request, plan = _request(
        ctx, tier, parts, env, deadline=deadline, single_line=single_line, budget=budget
    )
    files = parts.files
    notes = (
        tuple([(display_path(f.path, ctx.roots), f.bytes, tier) for f in files]) if files else ()
    )
    lazy = None if request.plan is not None else plan
    return TierRequest(tier, request, notes, chars, budget, lazy)


def cold_budget(env: Planning) -> TierBudget:
    """The local tier's total prompt and prediction budget, from its measured speed."""
    rates = getattr(env.local, "rates", None)
    s = env.settings
    return time_budget.local_budget(
        s.local, s.completion, rates if isinstance(rates, Rates) else None
    )


def kv_cap(env: Planning) -> int:
    """The largest local prompt: the setting, and what the backend holds untrimmed."""
    cap = env.settings.local.max_prompt_chars
    return min(cap, int(getattr(env.local, "prompt_chars_cap", cap)))


def multiline(ctx: CompletionContext, budget: TierBudget, settings: Settings) -> bool:
    """Several lines only when they can arrive within the prediction's time cap."""
    return wants_multiline(ctx.prefix, settings.completion.multiline) and budget.multiline


def plan_local(ctx: CompletionContext, env: Planning, *, deadline: float | None) -> TierRequest:
    """The local tier's request at `ctx`: the prompt as large as the KV cache allows
    (`kv_window`), each size tried assembled once, the one chosen sent as it was built."""
    budget = cold_budget(env)
    single_line = not multiline(ctx, budget, env.settings)
    uncached = getattr(env.local, "uncached_chars", None)
    if uncached is None:
        return plan_tier(ctx, "local", budget, env, deadline=deadline, single_line=single_line)
    tried: dict[int, TierRequest] = {}

    def at(size: int) -> TierRequest:
        if size not in tried:
            b = attrs.evolve(budget, prompt_chars=size)
            tried[size] = plan_tier(
                ctx, "local", b, env, deadline=deadline, single_line=single_line
            )
        return tried[size]

    sized = kv_window.sized(budget, kv_cap(env), lambda n: int(uncached(at(n).request)))
    chosen = at(sized.prompt_chars)
    return attrs.evolve(chosen, budget=sized)


def sized_budget(ctx: CompletionContext | None, env: Planning) -> TierBudget:
    """The local budget (at `ctx`: as the KV cache sizes it), for status and tests."""
    if ctx is None or getattr(env.local, "uncached_chars", None) is None:
        return cold_budget(env)
    planned = plan_local(ctx, env, deadline=None)
    assert planned.budget is not None
    return planned.budget


__all__ = [
    "Planning",
    "Tier",
    "TierRequest",
    "cold_budget",
    "context_allowed",
    "display_path",
    "kv_cap",
    "multiline",
    "plan_local",
    "plan_tier",
    "sized_budget",
]
