"""The next-edit prompt: recent edits as unified diffs, then the excerpt around the
cursor with its editable region marked.

Zeta's public format (zed-industries/zeta): the model answers with the editable region
rewritten, its markers included. The "plain" format says the same without special
tokens, for a general code model. Pure text: no I/O, no settings object.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Literal

import attrs

START = "<|editable_region_start|>"
CURSOR = "<|user_cursor_is_here|>"
END = "<|editable_region_end|>"
START_OF_FILE = "<|start_of_file|>"

PromptFormat = Literal["zeta", "plain"]

_ZETA_INSTRUCTION = (
    "### Instruction:\n"
    "You are a code completion assistant and your task is to analyze user edits and then "
    "rewrite an excerpt that the user provides, suggesting the appropriate edits within the "
    "excerpt, taking into account the cursor location.\n\n"
)
_PLAIN_INSTRUCTION = (
    "Below are the user's recent edits, then an excerpt of the file being edited. Rewrite "
    "the part between the region markers as it should look after the user's next edit, "
    "and answer with that part only, markers included.\n\n"
)


@attrs.frozen
class RecentEdit:
    """One recent change, as the prompt shows it: the file and its lines before/after."""

    path: str  # as shown (workspace-relative)
    before: str
    after: str


@attrs.frozen
class Region:
    """The excerpt of the current file around the cursor, in offsets of the file."""

    excerpt_start: int
    start: int  # the editable region
    cursor: int
    end: int
    excerpt_end: int


def region_at(text: str, cursor: int, *, region_lines: int, context_lines: int) -> Region:
    """The editable region: whole lines from `region_lines` above the cursor's line to
    `region_lines` below it; the excerpt adds `context_lines` more on each side."""
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]
    line = max(0, text.count("\n", 0, cursor))

    def start_of(n: int) -> int:
        return starts[max(0, min(n, len(starts) - 1))]

    def end_of(n: int) -> int:  # the end of line n, its line break excluded
        return starts[n + 1] - 1 if n + 1 < len(starts) else len(text)

    last = len(starts) - 1
    return Region(
        excerpt_start=start_of(line - region_lines - context_lines),
        start=start_of(line - region_lines),
        cursor=cursor,
        end=end_of(min(last, line + region_lines)),
        excerpt_end=end_of(min(last, line + region_lines + context_lines)),
    )


def unified_diff(edit: RecentEdit) -> str:
    """The edit as a unified diff (hunks only: the file is named by the heading)."""
    lines = difflib.unified_diff(edit.before.split("\n"), edit.after.split("\n"), lineterm="", n=3)
    return "\n".join(line for line in lines if not line.startswith(("---", "+++")))


def _events(edits: Sequence[RecentEdit]) -> str:
    out = []
    for e in edits:
        diff = unified_diff(e)
        if diff:
            out.append(f'User edited "{e.path}":\n```diff\n{diff}\n```\n')
    return "\n".join(out)


def excerpt(text: str, r: Region) -> str:
    """The excerpt with its markers (and Zeta's start-of-file marker at the top)."""
    head = START_OF_FILE + "\n" if r.excerpt_start == 0 else ""
    return (
        head
        + text[r.excerpt_start : r.start]
        + START
        + "\n"
        + text[r.start : r.cursor]
        + CURSOR
        + text[r.cursor : r.end]
        + "\n"
        + END
        + text[r.end : r.excerpt_end]
    )


def build(fmt: PromptFormat, path: str, text: str, r: Region, edits: Sequence[RecentEdit]) -> str:
    """The prompt: the recent edits (oldest first, as they happened), then the excerpt."""
    events = _events(edits)
    if fmt == "zeta":
        return (
            _ZETA_INSTRUCTION
            + f"### User Edits:\n\n{events}\n"
            + f"### User Excerpt:\n\n```{path}\n{excerpt(text, r)}\n```\n\n"
            + "### Response:\n"
        )
    return (
        _PLAIN_INSTRUCTION
        + f"Recent edits:\n\n{events or '(none)'}\n\n"
        + f"File {path}:\n{excerpt(text, r)}\n\n"
        + "Rewritten region:\n"
    )


__all__ = [
    "CURSOR",
    "END",
    "START",
    "PromptFormat",
    "RecentEdit",
    "Region",
    "build",
    "excerpt",
    "region_at",
    "unified_diff",
]
