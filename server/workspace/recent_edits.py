"""Recent edits: the chunks of code the user changed in the last minutes, in any open file.

A ring buffer, as llama.vscode's (16 chunks from edited and visited files) and Zed's edit
history: each change notes the lines it touched (plus a little around them) in the text
as it is after the change; a later change next to a chunk of the same file replaces it
(so typing through a function keeps one chunk, the latest), the oldest chunk goes when
the ring is full, and a chunk older than `max_age_s` is no longer offered.

The chunks are context like any other file's code: the pipeline gives them a share of
the tier's budget and checks each one's path under the privacy settings of the moment
(a private file's edit feeds only the local tier). The current file's own edits are not
offered for its prompt: its prefix and suffix already show the code around the cursor.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import attrs

from ..learning.retention import minimal_edit

AROUND = 2  # lines kept before and after the changed ones
MAX_LINES = 12  # most lines of one chunk (around the latest change)
MERGE_GAP = 3  # a change this close to a chunk of the same file joins it


@attrs.frozen
class EditChunk:
    path: str  # absolute, like the index's paths: privacy patterns apply to it
    first: int  # 0-based line of the chunk's first line, when it was taken
    text: str  # the chunk's lines, without a final line break
    at: float  # when the last change in it happened (monotonic seconds)
    # The same lines before the changes that made the chunk (next-edit prompts show the
    # chunk as a diff); None: not known (the change's old text was not given, or the
    # chunk was cut to MAX_LINES).
    before: str | None = None

    @property
    def last(self) -> int:
        return self.first + self.text.count("\n")


class RecentEdits:
    """The ring buffer (one per session; not thread-safe: the event loop owns it)."""

    def __init__(
        self,
        max_chunks: int = 16,
        max_age_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_chunks = max_chunks
        self.max_age_s = max_age_s
        self._clock = clock
        self._chunks: list[EditChunk] = []  # oldest first

    def note(self, path: str, text: str, first: int, last: int, old: str | None = None) -> None:
        """Lines `first`..`last` (0-based, in `text`, the file after the change) changed;
        `old`, if given, is the file before it (the chunk then knows its lines before)."""
        lines = text.split("\n")
        old_lines = old.split("\n") if old is not None else None
        shift = len(lines) - len(old_lines) if old_lines is not None else 0
        merged: EditChunk | None = None
        if not lines or first >= len(lines):
            first = last = max(0, len(lines) - 1)
        lo = max(0, min(first, last) - AROUND)
        hi = min(len(lines) - 1, max(first, last) + AROUND)
        kept = []
        for c in self._chunks:
            near = c.path == path and c.first - MERGE_GAP <= hi and lo <= c.last + MERGE_GAP
            if near:  # the same place, edited again: one chunk, spanning both
                lo, hi = min(lo, c.first), max(hi, min(c.last, len(lines) - 1))
                merged = c
            else:
                kept.append(c)
        cut = hi - lo + 1 > MAX_LINES
        if cut:  # keep the lines around this change
            centre = (first + last) // 2
            lo = max(0, min(centre - MAX_LINES // 2, len(lines) - MAX_LINES))
            hi = lo + MAX_LINES - 1
        chunk_text = "\n".join(lines[lo : hi + 1])
        before = None
        if old_lines is not None and not cut:
            before = _before(old_lines, lo, hi - shift, merged)
        if chunk_text.strip():
            kept.append(EditChunk(path, lo, chunk_text, self._clock(), before))
        self._chunks = kept[-self.max_chunks :]

    def forget(self, path: str) -> None:
        """Drop a file's chunks (e.g. the file was deleted)."""
        self._chunks = [c for c in self._chunks if c.path != path]

    def recent(self, *, exclude: str = "") -> list[EditChunk]:
        """Chunks younger than max_age_s, newest first, none of the file `exclude`."""
        if not self._chunks:  # asked by every request: none, most of the time
            return []
        now = self._clock()
        return [
            c for c in reversed(self._chunks) if c.path != exclude and now - c.at <= self.max_age_s
        ]


def _before(old: list[str], lo: int, hi: int, merged: EditChunk | None) -> str | None:
    """Lines `lo`..`hi` of the old text, where a chunk merged into this one still holds
    what its own lines were before (so a word typed letter by letter is one change)."""
    if hi < lo - 1:
        return None
    if merged is None or merged.before is None:
        return "\n".join(old[lo : hi + 1])
    if not lo <= merged.first <= merged.last <= hi:
        return None  # the earlier chunk does not sit inside this one: not known
    return "\n".join([*old[lo : merged.first], merged.before, *old[merged.last + 1 : hi + 1]])


def lines_of_range_edit(start_line: int, inserted: str) -> tuple[int, int]:
    """The lines (first, last) of the new text that an LSP range edit starting at line
    `start_line` and inserting `inserted` touched."""
    breaks = inserted.count("\n") + inserted.count("\r") - inserted.count("\r\n")
    return start_line, start_line + breaks


def lines_of_sync(old: str, new: str) -> tuple[int, int]:
    """The lines (first, last) of `new` that differ from `old` (a whole-text sync)."""
    a, _, inserted = minimal_edit(old, new)
    first = new.count("\n", 0, a)
    return first, first + inserted.count("\n")


__all__ = ["EditChunk", "RecentEdits", "lines_of_range_edit", "lines_of_sync"]
