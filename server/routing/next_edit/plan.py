"""Each tier's next-edit request, planned once as the planner's frozen `TierRequest`:
the prompt (`prompt.build`) and its `PromptPlan`, which names the current file (its
excerpt and its own recent edits) as the window and every other file whose recent edit
the prompt shows as context, so the egress gate judges each of them.

Privacy as for completions: another file's edits feed the remote tier only with
`remote.send_context` and never from a private file (`planner.context_allowed`).
"""

from __future__ import annotations

import attrs

from synconfroute.clients.types import CompletionRequest

from ...settings.config import NextEditSettings
from ...workspace.recent_edits import EditChunk
from ..planner import (
    Planning,
    Tier,
    TierRequest,
    context_allowed,
    display_path,
    prompt_plan,
    remote_affinity,
)
from ..request import CompletionContext
from . import prompt

MAX_EDITS = 8  # most recent edits a prompt shows (Zeta was trained on a handful)


@attrs.frozen(kw_only=True)
class EditRequest:
    """One next-edit request: the document as the request saw it, and the cursor."""

    ctx: CompletionContext  # path, language, roots (prefix/suffix: the cursor's window)
    text: str  # the whole document
    cursor: int  # offset in `text`
    recent: tuple[EditChunk, ...] = ()  # the ring's chunks, newest first, this file's too
    # The file's own next-edit settings (its workspace folders' tighten-only keys over
    # the window's); None: the pipeline's.
    next_edit: NextEditSettings | None = None

    def settings(self, planning: Planning) -> NextEditSettings:
        return self.next_edit if self.next_edit is not None else planning.settings.next_edit

    def region(self, planning: Planning) -> prompt.Region:
        ne = self.settings(planning)
        return prompt.region_at(
            self.text, self.cursor, region_lines=ne.region_lines, context_lines=ne.context_lines
        )


def _edits(req: EditRequest, tier: Tier, env: Planning) -> tuple[list[EditChunk], list[EditChunk]]:
    """(this file's chunks, other files' chunks) the tier may see, oldest first; only
    chunks whose lines before are known make a diff."""
    allowed = context_allowed(req.ctx, tier, env.settings)
    own: list[EditChunk] = []
    other: list[EditChunk] = []
    for c in req.recent[:MAX_EDITS]:
        if c.before is None or c.before == c.text:
            continue
        if c.path == req.ctx.path:
            own.append(c)
        elif allowed(c.path):
            other.append(c)
    return own[::-1], other[::-1]


def model_for(ne: NextEditSettings, tier: Tier) -> str:
    """The tier's next-edit model; empty: the tier's completion model."""
    return ne.local_model if tier == "local" else ne.remote_model


def plan_edit(
    req: EditRequest, tier: Tier, env: Planning, *, deadline: float | None
) -> TierRequest:
    """`tier`'s request for the edit after this one, privacy applied under `env`."""
    ctx = req.ctx
    s = env.settings
    region = req.region(env)
    own, other = _edits(req, tier, env)
    shown = sorted([*own, *other], key=lambda c: c.at)
    recent = [
        prompt.RecentEdit(display_path(c.path, ctx.roots), c.before or "", c.text) for c in shown
    ]
    text = prompt.build(
        s.next_edit.prompt_format, display_path(ctx.path, ctx.roots), req.text, region, recent
    )
    window_chars = region.excerpt_end - region.excerpt_start
    window_chars += sum(len(c.text) + len(c.before or "") for c in own)
    context = [(c.path, len(c.text) + len(c.before or "")) for c in other]
    request = CompletionRequest(
        prefix=text,
        raw=True,
        language=ctx.language,
        path=ctx.path,
        max_tokens=s.next_edit.max_tokens,
        temperature=0.0,
        deadline=deadline,
        priority=s.remote.request_priority(invoked=ctx.invoked) if tier == "remote" else None,
        affinity=remote_affinity(ctx, tier),
        plan=prompt_plan(ctx, tier, window_chars=window_chars, context=context),
        model=model_for(s.next_edit, tier),
    )
    notes = tuple((display_path(p, ctx.roots), n, tier) for p, n in context)
    return TierRequest(tier, request, notes, len(text), None)


__all__ = ["MAX_EDITS", "EditRequest", "model_for", "plan_edit"]
