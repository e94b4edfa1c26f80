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
  budget directly; `prompt_split.Sticky` reuses the last fit of the same admitted
  candidates (privacy, edits and budgets must still show).
- `FolderSettings` remembers which folders hold a file (by name) and the rules of the
  folders open; `ContextBuilder` the folders' paths and copies the window field by field.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from synconfroute.clients.plan import FolderRules
from synconfroute.server.routing import time_budget
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.session.context_builder import ContextBuilder
from synconfroute.server.session.folders import FolderSettings
from synconfroute.server.settings.config import Settings
from synconfroute.server.vocab.positions import cap_window
from synconfroute.server.workspace import crossfile, prompt_split
from synconfroute.server.workspace.documents import DocumentStore, Edit
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


def test_weights_while_typing_on_a_line_and_after_an_edit_above() -> None:
    """The lines above the cursor's are remembered by their text: typing on the line
    reuses them, an edit above (same number of lines) does not."""
    above = "".join(f"def parse_{i}(row, value):\n" for i in range(40))
    typed = "result = parse_row(value).ensure_object"
    for k in range(len(typed) + 1):
        prefix = above + typed[:k]
        assert crossfile._weights(prefix, "\n    return result\n") == _weights_by_rule(
            prefix, "\n    return result\n"
        )
    edited = above.replace("parse_39(row, value)", "parse_39(row, other_name)") + typed
    assert crossfile._weights(edited, "") == _weights_by_rule(edited, "")
    assert "other_name" in crossfile._weights(edited, "")


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


C = "/ws/pkg/c.py"


def _definition(path: str, line: int, body: str, score: float) -> crossfile.Candidate:
    text = f"def f{line}(value):\n    {body}\n"
    return crossfile.Candidate(path, text, "definition", score, f"f{line}", line)


def test_a_remembered_fit_is_always_the_fit_of_this_moment() -> None:
    """`Sticky` reuses the last fit of the same admitted candidates, budget and packing:
    a file privacy no longer admits, an edited definition or another budget is fitted
    anew, and what it returns is what fitting afresh returns."""
    sticky = prompt_split.Sticky()
    key = (A, "remote@4000")
    ranked = [_definition(B, 1, "return value", 2.0), _definition(C, 3, "return [value]", 1.0)]

    def everything(p: str) -> bool:
        return True

    def no_b(p: str) -> bool:
        return p != B

    first = sticky.choose(key, ranked, 600, everything)
    assert first == crossfile.fit_detail(ranked, 600, everything)
    assert {f.path for f in first.files} == {B, C}
    # The same candidates again (typing on): the same fit, not fitted again.
    again = [_definition(B, 1, "return value", 2.5), _definition(C, 3, "return [value]", 0.5)]
    assert sticky.choose(key, again, 600, everything) is first
    # b.py became private (never_send, a folder closed): it must not come back.
    private = sticky.choose(key, again, 600, no_b)
    assert private == crossfile.fit_detail(again, 600, no_b)
    assert {f.path for f in private.files} == {C}
    # An edit changed c.py's definition: its new text goes in.
    edited = [_definition(B, 1, "return value", 2.0), _definition(C, 3, "return {value}", 1.0)]
    got = sticky.choose(key, edited, 600, everything)
    assert got == crossfile.fit_detail(edited, 600, everything)
    assert "return {value}" in "".join(f.text for f in got.files)
    # Another budget (a settings change, another window size): fitted to it.
    small = sticky.choose(key, edited, 80, everything)
    assert small == crossfile.fit_detail(edited, 80, everything)
    assert small != got


def test_the_folders_holding_a_file_follow_the_folders_open(tmp_path: Path) -> None:
    """`FolderSettings.settings_for` remembers which folders hold a file (by name, a
    function of the strings); a folder answering later, or removed, changes them."""
    outer, inner = tmp_path / "ws", tmp_path / "ws" / "pkg"
    window = Settings()
    f = FolderSettings()
    f.applied(FolderRules(root=str(outer)), {"completion": {"disabled_in": ["comment"]}})
    path = str(inner / "m.py")
    assert f.settings_for(path, window).routing.policy == "synconf"
    assert f.settings_for(path, window).completion.disabled_in == ["comment"]
    # The inner folder answers (a folder added, its configuration come): it applies.
    f.applied(FolderRules(root=str(inner)), {"routing": {"policy": "confidence"}})
    assert f.settings_for(path, window).routing.policy == "confidence"
    # The inner folder removed: its answer no longer does; the outer one still does.
    f.keep_only([str(outer)])
    got = f.settings_for(path, window)
    assert got.routing.policy == "synconf" and got.completion.disabled_in == ["comment"]
    # A file outside every folder by name is asked of the file system each time.
    outside = str(tmp_path / "elsewhere" / "x.py")
    assert f.settings_for(outside, window) is window
    assert outside not in f._chains


def test_the_folders_rules_asked_per_request_follow_every_change() -> None:
    """`FolderSettings.current` remembers its last answer: a folder expected (closed
    until it answers), answering, or removed changes it."""
    f = FolderSettings()
    roots = ("/ws", "/other")
    assert f.current(roots) == ()
    f.expect(["/ws"])  # asked for its settings: closed until they come
    assert f.current(roots) == (FolderRules(root="/ws", closed=True),)
    f.applied(FolderRules(root="/ws", never_send=("*.secret",)), {})
    assert f.current(roots) == (FolderRules(root="/ws", never_send=("*.secret",)),)
    assert f.current(("/other",)) == ()  # other roots asked: answered for them
    f.keep_only(["/other"])
    assert f.current(roots) == ()


def test_a_built_context_carries_every_field_of_its_window(tmp_path: Path) -> None:
    """`ContextBuilder.build` copies the window field by field (not `attrs.evolve`): a
    field added to CompletionContext must be added there too; this lists them."""
    names = {f.name for f in attrs.fields(CompletionContext)}
    assert names == {
        *("prefix", "suffix", "language", "path", "document", "roots", "folders"),
        *("crossfile", "repo", "recent_edits", "invoked", "settled", "settings"),
    }, "a new CompletionContext field: carry it in ContextBuilder.build, then list it here"
    docs = DocumentStore()
    uris = [tmp_path.as_uri()]
    rules = (FolderRules(root=str(tmp_path), closed=True),)
    cb = ContextBuilder(docs, lambda: uris, lambda work: work.close(), lambda roots: rules)
    uri = (tmp_path / "m.py").as_uri()
    st = docs.open(uri, "def f(x):\n    return x\n", "python")
    settings = Settings()
    window = cb.window(st, 21, settings)
    got = cb.build(window, st, (st.text.text, st.text.version), 21, (1, 10), settings,
                   blocking_gate=False, invoked=True)  # fmt: skip
    want = attrs.evolve(
        window,
        document=got.document,
        roots=(str(tmp_path),),
        folders=rules,
        settings=settings,
        crossfile=got.crossfile,
        recent_edits=(),
        repo=got.repo,
        invoked=True,
        settled=None,
    )
    assert all(getattr(got, n) == getattr(want, n) for n in names)
    assert got.prefix == "def f(x):\n    return " and got.path == str(tmp_path / "m.py")
    # The folders open change: the roots follow (remembered only while they stay).
    uris[:] = [tmp_path.as_uri(), (tmp_path / "sub").as_uri(), "untitled:x"]
    assert cb.roots() == (str(tmp_path), str(tmp_path / "sub"))
    uris.clear()
    assert cb.roots() == ()


def test_an_edited_untitled_buffer_does_not_break_completions_elsewhere(tmp_path: Path) -> None:
    """A recent edit of an untitled buffer (`untitled:Untitled-1`, no file path) feeds
    other files' prompts while the buffer is open and goes when it closes. Failed on
    s5base: every completion in another file raised ValueError (`Path.as_uri`)."""
    docs = DocumentStore()
    cb = ContextBuilder(docs, lambda: [], lambda work: work.close())
    settings = Settings()
    untitled = docs.open("untitled:Untitled-1", "x = 1\n", "python")
    old = untitled.text.text
    docs.change("untitled:Untitled-1", [Edit("total_rows = 2\n", (1, 0), (1, 0))])
    cb.changed(untitled, old, [Edit("total_rows = 2\n", (1, 0), (1, 0))], settings)
    st = docs.open((tmp_path / "a.py").as_uri(), "def f(x):\n    return \n", "python")

    def edits() -> list[str]:
        window = cb.window(st, 21, settings)
        snapshot = (st.text.text, st.text.version)
        ctx = cb.build(window, st, snapshot, 21, (1, 11), settings, blocking_gate=False)
        return [c.path for c in ctx.recent_edits]

    assert edits() == ["untitled:Untitled-1"]
    docs.close("untitled:Untitled-1")
    assert edits() == []
