"""What a completion's context and plan keep between requests, or compute a shorter way,
agrees with computing it afresh (session 5: the server's time between the handler and
the backend request).

- `WorkspaceIndex.names_of` (the names the current file defines, which its own
  definitions leave out of the ranking) is kept with the file's entry: an edit that
  re-indexes the file, or its removal, must change it.
- `crossfile._weights` (names near the cursor) and `time_budget.anchored_window` (the
  window's start on a line grid) take shorter ways than the rules they replace; the
  rules are written out here and both compared on generated text.
- `prompt_split.assemble` with nothing from other files cuts the window to the whole
  budget directly.
"""

from __future__ import annotations

import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from synconfroute.server.routing import time_budget
from synconfroute.server.vocab.positions import cap_window
from synconfroute.server.workspace import crossfile, prompt_split
from synconfroute.server.workspace.workspace_index import WorkspaceIndex

A = "/ws/pkg/a.py"
B = "/ws/pkg/b.py"


def _ranked_names(index: WorkspaceIndex, prefix: str) -> set[tuple[str, str]]:
    found = crossfile.candidates(prefix=prefix, suffix="", path=A, language="python", index=index)
    return {(c.path, c.name) for c in found}


def test_the_current_files_own_names_follow_its_index_entry() -> None:
    index = WorkspaceIndex()
    index.update(A, "def parse_row(line):\n    return line\n", "python")
    index.update(B, "def parse_row(line):\n    return []\n", "python")
    assert index.names_of(A) == {"parse_row"}
    # Defined in the file being completed: another file's definition is not context.
    assert (B, "parse_row") not in _ranked_names(index, "x = parse_row(")
    # The file edited (re-indexed) without it: the other file's definition comes in.
    index.update(A, "def other(line):\n    return line\n", "python")
    assert index.names_of(A) == {"other"}
    assert (B, "parse_row") in _ranked_names(index, "x = parse_row(")
    # Removed from the index (moved, deleted): it defines nothing.
    index.remove(A)
    assert index.names_of(A) == frozenset()
    index.update(A, "def parse_row(line):\n    return line\n", "python")
    assert (B, "parse_row") not in _ranked_names(index, "x = parse_row(")
    # Too large to index now: its old entry, and its names, are gone.
    index.max_file_bytes = 10
    index.update(A, "def parse_row(line):\n    return line\n", "python")
    assert index.names_of(A) == frozenset()


_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def _weights_by_rule(prefix: str, suffix: str) -> dict[str, float]:
    """The rule `_weights` follows, the long way: every identifier of the last 30 lines
    before the cursor and the first 8 after it, weighted by distance, summed in order."""
    before = prefix.split("\n")[-crossfile.NEAR_LINES_BEFORE :]
    after = suffix.split("\n")[: crossfile.NEAR_LINES_AFTER]
    near: list[tuple[str, float]] = []
    n = len(before)
    for i, line in enumerate(before):
        near += [(m, 1.0 / (1 + (n - 1 - i) / 4)) for m in _IDENT.findall(line)]
    for i, line in enumerate(after):
        near += [(m, 0.5 / (1 + i / 2)) for m in _IDENT.findall(line)]
    weights: dict[str, float] = {}
    for name, w in near:
        if len(name) > 2 and name not in crossfile._KEYWORDS:
            weights[name] = weights.get(name, 0.0) + w
    return weights


_code = st.lists(
    st.sampled_from(["def", "value", "x", "self", "parse_row", "ab", "return", " ", "(", "\n"]),
    max_size=400,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(_code, _code)
def test_weights_are_the_rules_weights(prefix: str, suffix: str) -> None:
    got = crossfile._weights(prefix, suffix)
    want = _weights_by_rule(prefix, suffix)
    assert got == want and list(got) == list(want)  # the same floats, in the same order


def _anchored_by_rule(prefix: str, suffix: str, limit: int) -> tuple[str, str]:
    """`anchored_window` as first written: every grid line tested in turn."""
    if limit <= 0 or len(prefix) + len(suffix) <= limit:
        return prefix, suffix
    room_suffix = min(len(suffix), max(limit // 4, limit - len(prefix)))
    suffix = cap_window("", suffix, room_suffix)[1] if room_suffix < len(suffix) else suffix
    room = limit - len(suffix)
    if len(prefix) <= room:
        return prefix, suffix
    if "\r" in prefix:
        starts = [0, *(m.end() for m in re.finditer(r"\r\n?|\n", prefix))]
    else:
        starts = [0, *itertools.accumulate(len(line) + 1 for line in prefix.split("\n"))]
        starts.pop()
    for step in time_budget.GRID_STEPS:
        fits = (s for s in starts[::step] if len(prefix) - s <= room)
        start = next(fits, len(prefix))
        if len(prefix) - start >= room // 2:
            return prefix[start:], suffix
    return cap_window(prefix, "", room)[0], suffix


_lines = st.lists(
    st.text(alphabet="ab \t", max_size=90).map(lambda s: s + "\n")
    | st.sampled_from(["\r\n", "\r", "x" * 300]),
    max_size=120,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(_lines, _lines, st.integers(min_value=-1, max_value=6000))
def test_the_anchored_window_is_the_rules_window(prefix: str, suffix: str, limit: int) -> None:
    assert time_budget.anchored_window(prefix, suffix, limit) == _anchored_by_rule(
        prefix, suffix, limit
    )


def test_line_starts_are_remembered_for_the_same_string_only() -> None:
    text = "ab\ncd\n" * 50
    first = time_budget._line_starts(text)
    assert time_budget._line_starts(text) is first  # one request cut at several sizes
    other = "x\n" * 50
    assert time_budget._line_starts(other) == [2 * i for i in range(51)]
    # An equal string built anew: computed again, the same answer.
    again = "".join(["ab\ncd\n"] * 50)
    assert again is not text and time_budget._line_starts(again) == first


@settings(max_examples=100, deadline=None)
@given(_lines, _lines, st.integers(min_value=0, max_value=4000))
def test_a_prompt_with_nothing_from_other_files_gives_the_window_all_of_it(
    prefix: str, suffix: str, total: int
) -> None:
    cuts: list[int] = []

    def cut(pre: str, suf: str, chars: int) -> tuple[str, str]:
        cuts.append(chars)
        return cap_window(pre, suf, chars)

    got = prompt_split.assemble(
        prefix=prefix,
        suffix=suffix,
        ranked=(),
        chunks=(),
        total_chars=total,
        context_tokens=1024,
        allowed=lambda p: True,
        sticky=prompt_split.Sticky(),
        cut_window=cut,
    )
    assert cuts == [max(1, total)]
    assert (got.context, got.edits) == ((), ())
    assert (got.prefix, got.suffix) == cap_window(prefix, suffix, max(1, total))
