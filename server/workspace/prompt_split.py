"""How one tier's prompt budget is split between other files' code, recent edits, and the
current file's prefix and suffix; and which context goes in, in which order.

The split (characters; `max_prompt_chars` is the tier's total, `context_tokens` the most
that other files may take, see docs/crossfile.md for the peers and the reasons):

- context (definitions and snippets of other files): up to `context_tokens` x 3
  characters, less the share recent edits take, and never more than half the total;
- recent edits: up to EDITS_SHARE of that, when there are any (unused, it goes back to
  the definitions);
- the window: whatever the two leave; the prefix gets three quarters and the suffix one
  quarter (either side's unused share goes to the other), each cut at its FAR end (code
  150 lines above the cursor is worth less than the signature of the function called
  at it).

Context takes only what it uses: with no candidates, the window has the whole budget.

Order, for the KV cache of a model that keeps the previous prompt (llama.cpp, Ollama,
vLLM's prefix cache): other files' code first, then recent edits, then the current
file. The context of consecutive requests in one document is kept byte for byte unless
the ranking really changed (`Sticky`): a keystroke that moves the cursor by one
character should not rewrite the start of the prompt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
from cachetools import LRUCache

from ..settings.config import Settings
from ..vocab.positions import cap_window
from . import crossfile
from .crossfile import CHARS_PER_TOKEN, Candidate, ContextFile
from .recent_edits import EditChunk

EDITS_SHARE = 1 / 3  # of the context budget, for recent edits
MAX_EXTRA_SHARE = 0.5  # context + edits never take more than this share of the total


@attrs.frozen
class Split:
    context: int  # characters for other files' definitions and snippets
    edits: int  # characters for recent edits
    total: int  # the tier's whole budget (the window gets what the other two leave)


def split(total_chars: int, context_tokens: int, *, has_edits: bool) -> Split:
    """The most each part may take of a tier's `total_chars`."""
    extra = min(context_tokens * CHARS_PER_TOKEN, int(total_chars * MAX_EXTRA_SHARE))
    extra = max(0, extra)
    edits = int(extra * EDITS_SHARE) if has_edits else 0
    return Split(context=extra - edits, edits=edits, total=total_chars)


@attrs.frozen
class TierPrompt:
    """One tier's prompt parts: other files' code (stable first), recent edits, and the
    current file's window, all within the tier's budget."""

    context: tuple[ContextFile, ...]
    edits: tuple[ContextFile, ...]
    prefix: str
    suffix: str

    @property
    def files(self) -> tuple[ContextFile, ...]:
        """Everything from other files, in prompt order."""
        return self.context + self.edits


@attrs.define
class _Choice:
    budget: int
    fitted: crossfile.Fitted


_FitKey = tuple[int, str, tuple[tuple[str, int, str, str], ...]]
_FITS_KEPT = 8


class Sticky:
    """The context chosen last, per (document, tier): reused verbatim while the new
    ranking agrees with it, so consecutive keystrokes send the same prompt start."""

    def __init__(self, size: int = 64) -> None:
        self._last: LRUCache[tuple[str, str], _Choice] = LRUCache(size)
        # The last fits, by what they are a function of (`crossfile.fit_admitted`): the
        # admitted candidates' keys in rank order, the budget and the packing. While
        # one types, the ranking mostly comes back the same (3 keys in 4 in click's
        # core.py), and a KV-sized local request fits each window size once.
        self._fits: dict[_FitKey, crossfile.Fitted] = {}

    def choose(
        self,
        key: tuple[str, str],
        ranked: Sequence[Candidate],
        budget: int,
        allowed: Callable[[str], bool],
    ) -> crossfile.Fitted:
        cands = crossfile.admitted(ranked, allowed)  # privacy of this moment: in the key
        fit_key = (budget, crossfile.PACK, tuple(map(crossfile.key_tuple, cands)))
        new = self._fits.get(fit_key)
        if new is None:
            new = crossfile.fit_admitted(cands, budget)
            if len(self._fits) >= _FITS_KEPT:
                del self._fits[next(iter(self._fits))]  # the oldest
            self._fits[fit_key] = new
        prev = self._last.get(key)
        if (
            prev is not None
            and prev.budget == budget
            and _agrees(prev.fitted, new, ranked)
            and all(allowed(f.path) for f in prev.fitted.files)  # privacy of this moment
        ):
            return prev.fitted
        self._last[key] = _Choice(budget, new)
        return new


def _agrees(prev: crossfile.Fitted, new: crossfile.Fitted, ranked: Sequence[Candidate]) -> bool:
    """Whether the new ranking still stands behind the previous choice: each candidate
    it took is still offered with the same text, the best candidates taken now
    (`crossfile.TOP_KEPT`) were taken then, and so was at least half of the rest."""
    if prev.picked == new.picked:
        return True
    offered = {crossfile.key_of(c) for c in ranked}
    if not prev.picked <= offered:
        return False  # a definition changed (edited) or dropped out of the ranking
    if not set(new.top) <= prev.picked:
        return False  # a new candidate among the best: the user moved on
    return len(new.picked & prev.picked) * 2 >= len(new.picked)


def edit_files(
    chunks: Sequence[EditChunk], budget: int, allowed: Callable[[str], bool]
) -> tuple[ContextFile, ...]:
    """Recent edits within `budget`, newest kept first, placed oldest first (the newest
    next to the current file); one block per chunk."""
    left = budget
    taken: list[EditChunk] = []
    for c in chunks:  # newest first
        cost = len(c.text) + 1 + crossfile.HEADER_CHARS + len(c.path)
        if cost > left or not allowed(c.path):
            continue
        left -= cost
        taken.append(c)
    return tuple(ContextFile(c.path, c.text + "\n") for c in reversed(taken))


def assemble(
    *,
    prefix: str,
    suffix: str,
    ranked: Sequence[Candidate],
    chunks: Sequence[EditChunk],
    total_chars: int,
    context_tokens: int,
    allowed: Callable[[str], bool],
    sticky: Sticky | None = None,
    key: tuple[str, str] = ("", ""),
    cut_window: Callable[[str, str, int], tuple[str, str]] = cap_window,
) -> TierPrompt:
    """One tier's prompt parts under its budget (see the module's docstring).
    `cut_window(prefix, suffix, chars)` cuts the window to what context leaves (far
    ends first; a tier may anchor the cut for its KV cache)."""
    if not ranked and not chunks:  # nothing from other files: the window takes it all
        pre, suf = cut_window(prefix, suffix, max(1, total_chars))
        return TierPrompt(context=(), edits=(), prefix=pre, suffix=suf)
    s = split(total_chars, context_tokens, has_edits=bool(chunks))
    edits = edit_files(chunks, s.edits, allowed) if s.edits > 0 else ()
    used_edits = sum(len(f.text) + crossfile.HEADER_CHARS + len(f.path) for f in edits)
    room = s.context + (s.edits - used_edits)  # what edits leave goes to definitions
    context: tuple[ContextFile, ...] = ()
    if ranked and room > crossfile.HEADER_CHARS:
        if sticky is not None:
            fitted = sticky.choose(key, ranked, room, allowed)
        else:
            fitted = crossfile.fit_detail(ranked, room, allowed)
        context = tuple(fitted.files)
    used = used_edits + sum(len(f.text) + crossfile.HEADER_CHARS + len(f.path) for f in context)
    window = max(1, total_chars - used)
    pre, suf = cut_window(prefix, suffix, window)
    return TierPrompt(context=context, edits=edits, prefix=pre, suffix=suf)


def sharing(settings: Settings) -> str:
    """Where other files' code (context and recent edits) goes under `settings`, in
    words: the hover card and `synconfroute settings` show it."""
    c = settings.completion
    if c.context != "workspace" and not c.recent_edits:
        return "not used (completion.context = file, completion.recent_edits off)"
    if not settings.remote.configured:
        return "local model only (no remote tier)"
    if settings.privacy.local_only:
        return "local model only (privacy.local_only)"
    if not settings.remote.send_context:
        return "local model only (remote.send_context off)"
    return "local model and the cluster (remote.send_context on; never private files)"


__all__ = [
    "EDITS_SHARE",
    "MAX_EXTRA_SHARE",
    "Split",
    "Sticky",
    "TierPrompt",
    "assemble",
    "sharing",
    "split",
]
