"""Next-edit tasks from a real commit history: where one commit makes the same kind of
change in several places of a file, the model is shown the first place done and asked
for the next.

For each commit (merges left out) and each Python file it changes, the hunks are read
from `git diff -U0`. Two hunks in a row are *similar* when they remove a word in common
and add a word in common (a rename carried to another line, the same argument added
twice). The task's file is the parent's version with the first hunk applied (that hunk
is the recent edit, as a diff), the cursor at the end of its new lines, and the answer is
the same file with the second hunk applied too. A second hunk beyond the editable region
could not be suggested from there: such pairs are counted, not kept. Real git only.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import attrs

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@attrs.frozen
class Hunk:
    """Lines `old_start`..(`old_start`+len(old)) of the parent (0-based) become `new`."""

    old_start: int
    old: tuple[str, ...]
    new: tuple[str, ...]

    def words(self) -> tuple[set[str], set[str]]:
        """(words removed, words added)."""
        old = set(_WORD.findall("\n".join(self.old)))
        new = set(_WORD.findall("\n".join(self.new)))
        return old - new, new - old


@attrs.frozen
class EditTask:
    commit: str
    path: str  # relative to the repository
    text: str  # the file with the first place done
    cursor: int  # offset: the end of the first place's new text
    before: str  # the first place's lines before (the recent edit)
    after: str  # ... and after
    first_line: int  # 0-based line of the recent edit in `text`
    expected: str  # the file with the next place done too


@attrs.frozen
class Built:
    tasks: tuple[EditTask, ...]
    commits: int  # commits read
    pairs: int  # similar hunk pairs found
    out_of_region: int  # pairs whose second place lies beyond the editable region


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
        errors="replace",
    ).stdout  # fmt: skip


def hunks(diff: str) -> list[Hunk]:
    """The hunks of a `git diff -U0` of one file."""
    out: list[Hunk] = []
    old: list[str] = []
    new: list[str] = []
    start = -1
    for line in diff.split("\n"):
        m = _HUNK.match(line)
        if m:
            if start >= 0:
                out.append(Hunk(start, tuple(old), tuple(new)))
            count = 1 if m.group(2) is None else int(m.group(2))
            # `-l,0`: an insertion after line l (1-based), i.e. before 0-based line l.
            start = int(m.group(1)) - (1 if count else 0)
            old, new = [], []
        elif start >= 0 and line.startswith("-") and not line.startswith("---"):
            old.append(line[1:])
        elif start >= 0 and line.startswith("+") and not line.startswith("+++"):
            new.append(line[1:])
    if start >= 0:
        out.append(Hunk(start, tuple(old), tuple(new)))
    return out


def similar(a: Hunk, b: Hunk) -> bool:
    ra, aa = a.words()
    rb, ab = b.words()
    return bool(a.old and b.old and a.new and b.new and ra & rb and aa & ab)


def _apply(lines: list[str], hs: list[Hunk]) -> list[str]:
    """`lines` with hunks `hs` (in order, parent coordinates) applied."""
    out = list(lines)
    for h in sorted(hs, key=lambda h: h.old_start, reverse=True):
        out[h.old_start : h.old_start + len(h.old)] = list(h.new)
    return out


def _tasks_of(
    commit: str, path: str, parent: str, hs: list[Hunk], region_lines: int
) -> Iterator[EditTask | None]:
    lines = parent.split("\n")
    for a, b in itertools.pairwise(hs):
        small = max(len(a.old), len(a.new), len(b.old), len(b.new)) <= region_lines
        if not (small and similar(a, b)):
            continue  # one place rewritten at length is not a repeated edit
        if [lines[a.old_start + i] for i in range(len(a.old))] != list(a.old):
            continue  # the diff does not match the parent text (encoding): skip
        state = _apply(lines, [a])
        shift = len(a.new) - len(a.old)
        cursor_line = a.old_start + len(a.new) - 1
        b_first = b.old_start + shift
        b_last = b_first + max(len(b.old), 1) - 1
        if b_last > cursor_line + region_lines:
            yield None  # the next place is beyond the region the model may rewrite
            continue
        text = "\n".join(state)
        cursor = sum(len(x) + 1 for x in state[:cursor_line]) + len(state[cursor_line])
        yield EditTask(
            commit=commit,
            path=path,
            text=text,
            cursor=cursor,
            before="\n".join(a.old),
            after="\n".join(a.new),
            first_line=a.old_start,
            expected="\n".join(_apply(lines, [a, b])),
        )


def build(repo: Path, *, region_lines: int = 5, max_tasks: int | None = None) -> Built:
    """Tasks from every non-merge commit of `repo` (newest first) touching `*.py`."""
    commits = _git(repo, "log", "--no-merges", "--format=%H").split()
    tasks: list[EditTask] = []
    pairs = far = 0
    read = 0
    for commit in commits:
        if max_tasks is not None and len(tasks) >= max_tasks:
            break
        read += 1
        parents = _git(repo, "rev-list", "--parents", "-n", "1", commit).split()[1:]
        if len(parents) != 1:
            continue  # the root commit
        names = _git(
            repo, "diff", "--name-only", "--diff-filter=M", parents[0], commit, "--", "*.py"
        )
        for path in names.split():
            diff = _git(repo, "diff", "-U0", parents[0], commit, "--", path)
            hs = hunks(diff)
            if len(hs) < 2:
                continue
            parent = _git(repo, "show", f"{parents[0]}:{path}")
            for task in _tasks_of(commit, path, parent, hs, region_lines):
                pairs += 1
                if task is None:
                    far += 1
                else:
                    tasks.append(task)
    return Built(tuple(tasks[:max_tasks] if max_tasks else tasks), read, pairs, far)


__all__ = ["Built", "EditTask", "Hunk", "build", "hunks", "similar"]
