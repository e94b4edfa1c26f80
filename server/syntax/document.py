"""One open document: its text and tree-sitter tree, kept in sync by edits, and the gate.

`SyntaxDocument.check` answers "does inserting this completion here introduce a syntax
error?" without touching the document: it edits a copy of the tree and reparses
incrementally (or from scratch with `full=True`, for benchmarks).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Literal, TypeVar

import attrs
import tree_sitter

from ..vocab.positions import Encoding, Text, to_position
from . import _bracewindow, _cmacros, _cnames, _compilers, _cscope, _pywindow
from ._compilers import DEFAULT_CONFIG, CompilerConfig, CompilerResult, Judgement
from ._pyindent import indentation_sites
from ._treesitter import ErrorSite, Splice, blame, collect_sites, introduced, parse
from .languages import (
    LANGUAGES,
    LanguageSpec,
    UnsupportedLanguage,
    detect_language,
    parser_for,
    spec_of,
    ts_language,
)
from .names import UnknownName, all_words_known, undefined_names
from .verdict import DEFAULT_BUDGET_S, MODES, Mode, Verdict

Position = tuple[int, int]  # (line, character), 0-based; character in the document's encoding

_WS = frozenset(b" \t\r\n")
# An error in the text without the completion this many lines above the cursor's line (or
# two lines below the replaced range) makes the file "broken near the cursor".
_NEAR_LINES = 6
_STRING_REACH = 40_000  # bytes (~500 lines) searched back for a string left open
_SPLICE_IN_PLACE = 4096  # bytes up to which `_spliced` concatenates slices (cheaper there)
_MEMO_SIZE = 64  # facts kept per version of the text (a few per cursor position)
_T = TypeVar("_T")


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # lone surrogates too: never raise


def _spliced(data: bytes, start: int, end: int, new: bytes) -> bytes:
    """`data` with bytes [start, end) replaced by `new`. A long text is copied once (its
    two slices concatenated copy it twice more: ~100 µs at 150 KB, against ~3)."""
    if len(data) <= _SPLICE_IN_PLACE:
        return data[:start] + new + data[end:]
    whole = memoryview(data)
    return b"".join((whole[:start], new, whole[end:]))


def _decode_to(data: bytes, offset: int) -> str:
    """The text of `data[:offset]`, the offset moved back to a character boundary."""
    offset = max(0, min(offset, len(data)))
    while 0 < offset < len(data) and data[offset] & 0xC0 == 0x80:
        offset -= 1
    try:
        return data[:offset].decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # a check at a byte offset inside a character
        return data[:offset].decode("utf-8", "replace")


class _Stage:
    """What the tree-sitter stage found."""

    __slots__ = ("intro", "status", "tree", "window")

    def __init__(
        self,
        status: Literal["valid", "invalid", "timeout"],
        intro: list[ErrorSite],
        tree: tree_sitter.Tree | None = None,
        window: bool = False,
    ):
        self.status = status
        self.intro = intro
        self.tree = tree  # of the text with the completion
        self.window = window  # the file is broken near the cursor and a window decided


def _unclosed_string(error: tree_sitter.Node, pos: int) -> int:
    """Where a string's opening quotes stand alone (no closing quotes after them) among
    the children of `error` before byte `pos`, within a few hundred lines, or -1."""
    for child in reversed(error.children):
        if child.start_byte >= pos:
            continue
        if child.type == "string_end" or child.end_byte < pos - _STRING_REACH:
            break
        if child.type == "string_start":
            return child.start_byte
    return -1


def _lines_below(data: bytes, pos: int, n: int) -> int:
    """The end of the n-th line after the one holding byte `pos`."""
    for _ in range(n):
        e = data.find(b"\n", pos + 1)
        pos = len(data) if e < 0 else e
    return pos


def _window_rejects(w: _pywindow.WindowVerdict, stage: _Stage) -> _Stage:
    """Invalid at the Python window's error, the tree of `stage` kept."""
    site = ErrorSite(w.where, w.where, False, "INDENT", "", note=w.message)
    return _Stage("invalid", [site], stage.tree, window=True)


class SyntaxDocument:
    """The tree of one document, following its one `Text`. Not thread-safe: one owner.

    Positions are (line, character), 0-based, with LSP's line breaks (\\r\\n, \\r, \\n;
    see server/vocab/positions.py), character counted in `encoding` units: "utf-32" (code
    points, default), "utf-16" (the LSP default) or "utf-8" (bytes). Given a `Text`, the
    document shares it (the session's one copy) and applies edits to it; given a str,
    it wraps it. The UTF-8 bytes tree-sitter parses are derived from that text.
    Edits only edit the tree; the incremental reparse happens once, at the next check or
    `tree` access, however many edits came in between.
    """

    def __init__(
        self,
        text: str | Text,
        language: str | None,
        *,
        encoding: Encoding = "utf-32",
        compilers: CompilerConfig = DEFAULT_CONFIG,
        lazy: bool = False,
    ) -> None:
        self.language = language
        self.source = text if isinstance(text, Text) else Text(text, encoding)
        self.compilers = compilers
        self.version = 0
        self._followed = self.source.version  # the text version the tree/bytes follow
        self._bytes: bytes | None = None
        self._unsupported = ""
        self._tree: tree_sitter.Tree | None = None
        self._stale = False
        # No tree kept (memory): parse from scratch when one is next needed.
        self._released = False
        self._before_sites: tuple[int, list[ErrorSite]] | None = None
        self._before_compiled: dict[str, tuple[int, CompilerResult]] = {}
        self._before_macros: tuple[int, dict[bytes, str]] | None = None
        self._before_depth: tuple[int, int] | None = None
        # Facts about the text without the completion near a cursor (see `_memo`), for
        # the text's version `_memo_version` only.
        self._memo_table: dict[tuple[str, int, int], object] = {}
        self._memo_version = -1
        self._spec = spec_of(language)  # (the language is the document's for good)
        try:
            if language is None:
                raise UnsupportedLanguage(
                    "the document's language is unknown (neither its languageId nor its file "
                    "name says): no syntax check",
                    language=None,
                )
            ts_language(language)
        except UnsupportedLanguage as exc:
            self._unsupported = str(exc)
        else:
            if lazy:
                self._released = True
            else:
                self._tree = parse(self._parser(), self.data)

    @classmethod
    def open(
        cls,
        text: str,
        *,
        language_id: str | None = None,
        path: str | None = None,
        encoding: Encoding = "utf-32",
        compilers: CompilerConfig = DEFAULT_CONFIG,
    ) -> SyntaxDocument:
        """A document whose language comes from the LSP languageId or the file name."""
        lang = detect_language(language_id, path)
        return cls(text, lang, encoding=encoding, compilers=compilers)

    # ------------------------------------------------------------ state

    @property
    def supported(self) -> bool:
        return not self._unsupported

    @property
    def encoding(self) -> Encoding:
        return self.source.encoding

    @property
    def data(self) -> bytes:
        """The text as tree-sitter parses it (UTF-8, derived and cached)."""
        self._sync()
        if self._bytes is None:
            self._bytes = _utf8(self.source.text)
        return self._bytes

    @property
    def text(self) -> str:
        return self.source.text

    def _sync(self) -> None:
        """The text was changed behind our back (not through `edit`): start afresh."""
        if self._followed != self.source.version:
            self._followed = self.source.version
            self._bytes = None
            self.version += 1
            if self._tree is not None:
                self.release_tree()

    @property
    def has_tree(self) -> bool:
        """Whether a parse tree is held in memory now."""
        return self._tree is not None

    def release_tree(self) -> None:
        """Drop the parse tree to save memory (about 30x the text's size); the next
        check parses from scratch and keeps following edits from then on."""
        if self._tree is not None:
            self._tree = None
            self._stale = False
            self._released = True
        self._bytes = None  # derived: rebuilt with the tree

    @property
    def tree(self) -> tree_sitter.Tree | None:
        """The tree of the current text (reparsed incrementally if edits are pending)."""
        self._sync()
        if self._released:
            self._tree = parse(self._parser(), self.data)
            self._released = False
            self._stale = False
        if self._stale and self._tree is not None:
            self._tree = parse(self._parser(), self.data, self._tree)
            self._stale = False
        return self._tree

    @property
    def spec(self) -> LanguageSpec:
        """How the gate treats this document's language (its spec; PLAIN for none)."""
        return self._spec

    def _parser(self) -> tree_sitter.Parser:
        assert self.language is not None
        return parser_for(self.language)

    # ------------------------------------------------------------ positions

    def _byte_at(self, offset: int) -> int:
        """Byte offset of a code-point offset of the current text."""
        data = self.data
        if len(data) == len(self.source.text):  # ASCII
            return offset
        return len(_utf8(self.source.text[:offset]))

    def byte_offset(self, position: Position) -> int:
        """Byte offset of (line, character); past the end of a line means its end, past the
        last line means the end of the text (as LSP asks)."""
        return self._byte_at(self.source.edit_offset(*position))

    def position(self, offset: int) -> Position:
        """(line, character) of a byte offset of the current text."""
        return self.source.position(len(_decode_to(self.data, offset)))

    def _position_after(self, after: bytes, offset: int) -> Position:
        """(line, character) of a byte offset of `after` (the text with a completion)."""
        head = _decode_to(after, offset)
        return to_position(head, len(head), self.encoding)

    # ------------------------------------------------------------ edits

    def edit_bytes(self, start: int, end: int, new_text: str) -> None:
        """Replace bytes [start, end) of the text with `new_text`."""
        data = self.data
        n = len(data)
        if not 0 <= start <= end <= n:
            raise ValueError(f"edit range {start}..{end} is outside the text (0..{n})")
        cs = len(data[:start].decode("utf-8", "surrogatepass"))
        ce = cs + len(data[start:end].decode("utf-8", "surrogatepass"))
        self.edit_offsets(cs, ce, new_text)

    def edit(self, start: Position, end: Position, new_text: str) -> None:
        """Replace the range [start, end) (LSP didChange positions, clamped) with `new_text`."""
        a, b = self.source.edit_offset(*start), self.source.edit_offset(*end)
        self.edit_offsets(min(a, b), max(a, b), new_text)

    def edit_offsets(self, start: int, end: int, new_text: str) -> None:
        """Replace code points [start, end) of the text with `new_text`; the tree follows."""
        self._sync()
        src = self.source
        if self._tree is None and self._bytes is None:
            src.replace(start, end, new_text)  # nothing derived to update
        else:
            # tree-sitter wants byte offsets and (row, byte column) points, rows counted
            # at \n only (its own rule), all computed from the text before the edit.
            bs, be = self._byte_at(start), self._byte_at(end)
            sp, ep = _point(self.data, bs), _point(self.data, be)
            new = _utf8(new_text)
            nl = new_text.count("\n")
            np_ = (sp[0] + nl, len(new) - new.rfind(b"\n") - 1) if nl else (sp[0], sp[1] + len(new))
            src.replace(start, end, new_text)
            if self._bytes is not None:
                self._bytes = _spliced(self._bytes, bs, be, new)
            if self._tree is not None:
                self._tree.edit(bs, be, bs + len(new), sp, ep, np_)
                self._stale = True
        self._followed = src.version
        self.version += 1

    def replace_all(self, text: str) -> None:
        """A full-text change: parse from scratch."""
        self._sync()
        self.source.replace(0, len(self.source.text), text)
        self._followed = self.source.version
        self._bytes = None
        self.version += 1
        if self._tree is not None:
            self._tree = parse(self._parser(), self.data)
            self._stale = False

    # ------------------------------------------------------------ the gate

    def prepare(self, at: int | Position, *, end: int | Position | None = None) -> None:
        """Work out now what a check at `at` (replacing up to `end`) needs of the text
        without the completion: its tree and error sites and, in Python, what surrounds
        the cursor. For a caller with time to spare before the completion comes (while
        the model generates); the check then has only the completion's part left. Kept
        for this version of the text only: an edit, or a change of the text behind the
        document's back, drops them. Out-of-range positions and unsupported documents
        are ignored (the check reports them)."""
        if not self.supported:
            return
        data = self.data
        start = self._offset_of(at)
        old_end = start if end is None else self._offset_of(end)
        if not 0 <= start <= old_end <= len(data):
            return
        self._sites_before()  # (parses the tree when there is none)
        points = self._points(start, old_end)
        if self.spec.window == "indent":
            near = self._broken_near(Splice(start, old_end, old_end))
            ls = data.rfind(b"\n", 0, start) + 1
            calm = self._memo("calm", start, ls, lambda: self._find_calm(start, ls))
            # what `_one_line` reads (None: not its case)
            self._memo("one-line", start, old_end, lambda: None if near or not calm else points)
            if (near or not calm) and data[ls:start].strip(b" \t"):
                # the window will likely judge: its readings of the lines above the cursor
                # (most of its work on a long file: ~2 ms at 3,800 lines), which hold
                # for any completion after the code before the cursor on its line
                at = self._string_at(start)
                self._memo("readings", start, ls, lambda: _pywindow.readings(data, ls, at))

    def _memo(self, kind: str, a: int, b: int, make: Callable[[], _T]) -> _T:
        """`make()`, a fact about the current text (what the check computes from the text
        without the completion alone), kept until the text changes."""
        if self._followed != self.source.version:
            self._sync()  # (a text changed behind our back bumps `version` first)
        table = self._memo_table
        if self._memo_version != self.version or len(table) >= _MEMO_SIZE:
            table.clear()
            self._memo_version = self.version
        key = (kind, a, b)
        if key in table:
            return table[key]  # type: ignore[return-value]
        value = table[key] = make()
        return value

    def _offset_of(self, at: int | Position) -> int:
        """A check's byte offset: `at` itself, or the byte offset of a position."""
        if isinstance(at, int):
            return at
        line, character = at
        return self._memo("offset", line, character, lambda: self.byte_offset(at))

    def _points(self, start: int, old_end: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """tree-sitter points of bytes `start` and `old_end` (each a scan of the text up
        to it: on a 3,800-line file, more than the rest of a one-line check's edit)."""
        return self._memo(
            "points", start, old_end, lambda: (_point(self.data, start), _point(self.data, old_end))
        )

    def _prepared(self, kind: str, a: int, b: int) -> object:
        """The fact `_memo` keeps under (kind, a, b) for the current text, if it has one
        (None: not worked out, `prepare` did not run here)."""
        if self._followed != self.source.version or self._memo_version != self.version:
            return None
        return self._memo_table.get((kind, a, b))

    def _find_calm(self, start: int, ls: int) -> bool:
        """Whether no completion at byte `start` can be stranded (`_pywindow.stranded`):
        the line above is no half-typed keyword, no bracket above is open at the cursor's
        line and the cursor is in no string that starts above it. Those are stranded's
        only reasons, and each is a fact of the text alone."""
        if self._half_keyword(ls) >= 0 or self._brackets(ls):
            return False
        return not 0 <= self._string_at(start) < ls

    def _half_keyword(self, ls: int) -> int:
        return self._memo("half", ls, 0, lambda: _pywindow.half_keyword_above(self.data, ls))

    def _brackets(self, ls: int) -> tuple[tuple[int, bool], ...]:
        return self._memo("brackets", ls, 0, lambda: _pywindow.open_brackets_above(self.data, ls))

    def check(
        self,
        completion: str,
        at: int | Position,
        *,
        end: int | Position | None = None,
        mode: Mode = "tree-sitter",
        budget_s: float | None = None,
        full: bool = False,
        names: bool = False,
    ) -> Verdict:
        """Would inserting `completion` at `at` (replacing up to `end`) introduce a syntax error?

        `at`/`end`: a byte offset or a (line, character) position. `budget_s` bounds the whole
        check (defaults: 0.05 s for tree-sitter, 3 s with a compiler). `full` reparses the text
        with the completion from scratch instead of incrementally. `names`: on a valid
        verdict, also list the names the completion uses that nothing in the file defines
        (`Verdict.undefined`; languages in `names.LANGUAGES`, within the same budget). The
        document is unchanged.
        """
        t0 = time.perf_counter()
        if mode not in MODES:
            raise ValueError(f"unknown gate mode {mode!r}; use one of {', '.join(MODES)}")
        budget = DEFAULT_BUDGET_S[mode] if budget_s is None else budget_s
        deadline = time.monotonic() + budget
        if self._unsupported:
            return Verdict(
                valid=False,
                status="unsupported-language",
                mode=mode,
                checker="none",
                language=self.language,
                message=self._unsupported,
                elapsed_s=time.perf_counter() - t0,
            )
        data = self.data
        start = self._offset_of(at)
        old_end = start if end is None else self._offset_of(end)
        if not 0 <= start <= old_end <= len(data):
            raise ValueError(
                f"completion range {start}..{old_end} is outside the text (0..{len(data)})"
            )
        ins = _utf8(completion)
        after = _spliced(data, start, old_end, ins)
        parsed: tuple[tree_sitter.Tree | None] | None = None
        if mode == "tree-sitter" and not full:
            quick = self._one_line(after, ins, start, old_end, deadline, names)
            if quick is True:
                return Verdict(
                    valid=True,
                    status="valid",
                    mode=mode,
                    checker="tree-sitter",
                    language=self.language,
                    elapsed_s=time.perf_counter() - t0,
                )
            parsed = quick
        splice = Splice(start, old_end, start + len(ins))
        ts_tree: tree_sitter.Tree | None = None  # of `after`, when the tree-sitter stage ran
        if not ins and start == old_end:
            verdict = self._verdict("valid", mode, "tree-sitter", detail="empty completion")
        elif mode == "tree-sitter":
            stage = self._ts_stage(after, splice, deadline, full, parsed)
            verdict = self._ts_verdict(stage, mode, after, splice=splice)
            ts_tree = stage.tree
        elif mode == "compiler":
            verdict = self._compiler_mode(completion, after, splice, deadline, full)
        else:
            verdict = self._confirm_mode(completion, after, splice, deadline, full)
        if names and verdict.valid and ins and self.spec.names is not None:
            verdict = self._names(verdict, after, splice, deadline, ts_tree)
        return verdict.with_elapsed(time.perf_counter() - t0)

    def _one_line(
        self, after: bytes, ins: bytes, start: int, old_end: int, deadline: float, names: bool
    ) -> Literal[True] | tuple[tree_sitter.Tree | None] | None:
        """The check's common case in one pass, after `prepare` (the model's last token is
        in, the user waits): a one-line completion in Python at a cursor where the text
        without it is whole nearby and nothing can strand it. The same steps as the
        general path, without its dispatch and with the prepared facts read once: the
        incremental parse, the indentation check (on one simple statement: nothing to
        walk) and the names. True: valid, nothing more to say. Otherwise the general
        path decides, given the parse, if it ran ((None,): out of time), so as not to
        parse again; None: not this case."""
        spec = self._spec
        if spec.window != "indent" or not ins or b"\n" in ins or self._stale:
            return None
        data = self._bytes
        tree = self._tree
        if data is None or tree is None or self._memo_version != self.version:
            return None
        points = self._memo_table.get(("one-line", start, old_end))  # (see `prepare`)
        if not isinstance(points, tuple):
            return None
        if start == old_end and start > 0 and data[start - 1] in _WS and ins[-1] == data[start - 1]:
            return None  # `_edited_copy` moves this edit: its way
        new_end = start + len(ins)
        sp, ep = points
        copy = tree.copy()
        copy.edit(start, old_end, new_end, sp, ep, (sp[0], sp[1] + len(ins)))
        new = parse(parser_for(spec.name), after, copy, deadline)
        if new is None or new.root_node.has_error:
            return (new,)
        if spec.indentation and indentation_sites(new, after, start, new_end):
            return (new,)
        # valid: stranded cannot be (calm), `_second_opinion` passes one line; the names
        if not names or spec.names is None:
            return True
        if (
            spec.names == "file"
            and time.monotonic() <= deadline
            and all_words_known(after, start, new_end)  # (else `undefined_names` looks)
        ):
            return True
        return (new,)

    def _names(
        self,
        verdict: Verdict,
        after: bytes,
        splice: Splice,
        deadline: float,
        tree: tree_sitter.Tree | None,
    ) -> Verdict:
        """The names gate on a syntax-valid completion; out of budget, it passes."""
        base = self.tree
        if tree is None and base is not None and self.spec.names == "scope":
            # no tree of `after` yet (the window or the compiler decided): C/C++ parse only
            # the function that holds the completion (a whole parse is 3-4 ms at 2,500 lines)
            span = (splice.start, splice.old_end, splice.new_end)
            found = _cscope.out_of_scope_edit(self._parser(), base, self.data, after, span)
            unknown = [UnknownName(w.decode("utf-8", "replace"), a, b) for w, a, b in found]
        else:
            if tree is None and base is not None:  # a compiler decided: no tree of `after`
                tree = parse(
                    self._parser(), after, self._edited_copy(base, splice, after), deadline
                )
            if tree is None or time.monotonic() > deadline:
                return attrs.evolve(verdict, detail=_join(verdict.detail, "names: no time left"))
            unknown = undefined_names(self.spec, tree, after, splice.start, splice.new_end)
        if not unknown:
            return verdict
        line, column = self._position_after(after, unknown[0].start)
        listed = ", ".join(f"'{u.name}'" for u in unknown)
        one = len(unknown) == 1
        if self.spec.names == "scope":
            message = f"{'name' if one else 'names'} {listed} {'is' if one else 'are'} not "
            message += "declared in scope here"
        else:
            message = (
                f"name {listed} is defined nowhere in the file"
                if one
                else f"names {listed} are defined nowhere in the file"
            )
        return attrs.evolve(
            verdict,
            undefined=tuple(u.name for u in unknown),
            line=line,
            column=column,
            message=message,
        )

    def _verdict(
        self,
        status: Literal["valid", "invalid", "timeout", "error"],
        mode: Mode,
        checker: str,
        *,
        where: Position | None = None,
        message: str = "",
        detail: str = "",
    ) -> Verdict:
        return Verdict(
            valid=status == "valid",
            status=status,
            mode=mode,
            checker=checker,
            language=self.language,
            line=None if where is None else where[0],
            column=None if where is None else where[1],
            message=message,
            detail=detail,
        )

    # tree-sitter ------------------------------------------------

    def _sites_before(self) -> list[ErrorSite]:
        cached = self._before_sites
        if cached is not None and cached[0] == self.version:
            return cached[1]
        tree = self.tree
        sites = collect_sites(tree, self.data) if tree is not None else []
        self._before_sites = (self.version, sites)
        return sites

    def _ts_stage(
        self,
        after: bytes,
        splice: Splice,
        deadline: float,
        full: bool,
        parsed: tuple[tree_sitter.Tree | None] | None = None,
    ) -> _Stage:
        """`parsed`: `after` already parsed (by `_one_line`; (None,): out of time)."""
        if self.spec.window == "brace":
            return self._brace_stage(after, splice, deadline, full)
        stage = self._ts_differential(after, splice, deadline, full, parsed)
        if self.spec.window != "indent" or stage.status == "timeout":
            return stage
        data = self.data
        ls = data.rfind(b"\n", 0, splice.start) + 1
        calm = self._prepared("calm", splice.start, ls)  # (prepared: see _find_calm)
        if not self._broken_near(splice) and (
            calm
            or not _pywindow.stranded(
                data,
                splice.start,
                after[after.rfind(b"\n", 0, splice.start) + 1 : splice.new_end],
                lambda: self._string_at(splice.start),
                half_keyword=lambda: self._half_keyword(ls),
                brackets=lambda: self._brackets(ls),
            )
        ):
            return self._second_opinion(after, splice, stage)
        # The file is broken near the cursor (or the user left a bracket or a string open
        # above it): tree-sitter's recovery reshapes the old errors around the completion
        # either way; Python's parser on the completion's own lines decides (see _pywindow).
        if not after[splice.start : splice.new_end].strip():
            return stage  # blank: nothing for Python to judge that tree-sitter cannot
        ahead = self._prepared("readings", splice.start, ls)  # (see `prepare`)
        w = _pywindow.judge(
            after,
            splice.start,
            splice.new_end,
            self._string_at(splice.start),
            ahead if isinstance(ahead, list) else None,
        )
        if w.valid is None:
            return stage
        if w.valid or (w.beyond and self._broken_line(w.where - splice.delta)):
            # (beyond: the user's own error, further down)
            return _Stage("valid", [], stage.tree, window=True)
        if stage.status == "invalid":
            stage.window = True  # both object: tree-sitter's site says more precisely where
            return stage
        return _window_rejects(w, stage)

    def _second_opinion(self, after: bytes, splice: Splice, stage: _Stage) -> _Stage:
        """Python, a file whole around the cursor: tree-sitter-python passes a block left
        without its body's end or its handler (`try:` cut after its first line), or with
        a line's indentation changed to match no level (a cut after the newline, in the
        indentation: the next line gets it too), which Python rejects far below, where the
        differential cannot blame the completion. Python's parser on the window judges a
        completion over several lines that tree-sitter passed, where the lines the window
        may grow over were whole before it (a bracket the user left open there is theirs)."""
        if stage.status != "valid" or b"\n" not in after[splice.start : splice.new_end - 1]:
            return stage  # (one line, or one whole line: tree-sitter's verdict stands)
        data = self.data
        ls = data.rfind(b"\n", 0, splice.start) + 1
        hi = _lines_below(data, splice.old_end, _NEAR_LINES)
        if any(s.start <= hi and ls <= s.end for s in self._sites_before()):
            return stage
        if self._string_at(splice.start) >= 0:
            return stage  # prose in a docstring: no code to judge
        ahead = self._prepared("readings", splice.start, ls)  # (string_at: none, as here)
        w = _pywindow.judge(
            after, splice.start, splice.new_end, -1, ahead if isinstance(ahead, list) else None
        )
        if w.valid is not False or w.beyond:
            return stage
        return _window_rejects(w, stage)

    def _brace_stage(self, after: bytes, splice: Splice, deadline: float, full: bool) -> _Stage:
        """Java/C/C++: where the file is broken near the cursor, a parse of the completion's
        statement with stubs for the code around it decides (see _bracewindow); elsewhere,
        and where no window stands on its own, the differential."""
        w = self._brace_window(after, splice, deadline)
        if w is not None and w.valid:
            # the window alone decides a valid verdict: the reparse of the whole text
            # would cost as much again and change nothing
            return _Stage("valid", [], window=True)
        if w is not None and w.exact:
            # invalid, and the window's parser says where in the text's own words: the
            # reparse would only say it in other words (a stub-side error needs it)
            return _Stage("invalid", [_window_site(after, splice, w)], window=True)
        stage = self._ts_differential(after, splice, deadline, full)
        tree = stage.tree
        if (
            w is None
            and stage.status == "invalid"
            and tree is not None
            and self.spec.preprocessor
            and any(_unfinished_above(s, tree, after, splice) for s in stage.intro)
        ):
            # the user's line above is a statement left unfinished (`ll n;c`, cut short)
            # that the parser reads on into the completion, in a file that did not look
            # broken: the window judges the completion's own statement
            w = self._brace_window(after, splice, deadline, broken=True)
            if w is not None and w.valid:
                return _Stage("valid", [], window=True)
        if w is None:
            return stage
        if stage.status == "invalid":
            # (both object: tree-sitter's site says more precisely where, and in the
            # user's words: the window's parser sees stubs)
            stage.window = True
            return stage
        site = ErrorSite(w.where, w.where, False, "ERROR", "", note=w.message)
        return _Stage("invalid", [site], stage.tree, window=True)

    def _brace_window(
        self, after: bytes, splice: Splice, deadline: float, broken: bool = False
    ) -> _bracewindow.WindowVerdict | None:
        """The window's verdict where the text without the completion is broken near the
        cursor (`broken`: known to be) and a window stands on its own there, else None."""
        sites = self._sites_before()
        if not (sites or broken) or not after[splice.start : splice.new_end].strip():
            return None
        spec = self.spec
        in_class = spec.stubs == "class"
        parse = (
            _bracewindow.java_parser(deadline)
            if in_class
            else _bracewindow.tree_sitter_parser(
                spec.name,
                self._macros() if spec.preprocessor else {},
                deadline,
                _cnames.value_names(self.data) if spec.preprocessor else None,
            )
        )
        delta = splice.delta

        def user_broken(lo: int, hi: int) -> bool:
            return self._broken_lines(lo - delta, hi - delta)

        w = _bracewindow.judge(
            after,
            splice.start,
            splice.new_end,
            in_class,
            parse,
            self._brace_surplus(),
            user_broken,
        )
        if w.valid is None:
            return None
        # broken near the cursor: the text without the completion has an error from a few
        # lines above the window on (a brace too many or too few at the cursor shows up
        # only where the parser gives up, often far below)
        data = self.data
        lo = w.span[0]
        for _ in range(_NEAR_LINES + 1):
            lo = data.rfind(b"\n", 0, max(lo - 1, 0)) + 1 if lo > 0 else 0
        return w if broken or any(lo <= s.end for s in sites) else None

    def _brace_surplus(self) -> bool:
        """Whether the text closes more braces than it opens (a block header deleted)."""
        cached = self._before_depth
        if cached is None or cached[0] != self.version:
            cached = (self.version, _bracewindow.brace_depth(self.data))
            self._before_depth = cached
        return cached[1] < 0

    def _macros(self) -> dict[bytes, str]:
        cached = self._before_macros
        if cached is None or cached[0] != self.version:
            cached = (self.version, _cmacros.statement_macros(self.data))
            self._before_macros = cached
        return cached[1]

    def _string_at(self, pos: int) -> int:
        """Where the string literal holding byte `pos` of the text starts, or -1. Also a
        string never closed (it runs on to the end of the file): tree-sitter leaves its
        opening quotes alone in an error node."""
        return self._memo("string", pos, 0, lambda: self._find_string_at(pos))

    def _find_string_at(self, pos: int) -> int:
        tree = self.tree
        node = tree.root_node.descendant_for_byte_range(pos, pos) if tree is not None else None
        while node is not None and node.type not in ("string", "block", "module"):
            if node.type == "ERROR" and (at := _unclosed_string(node, pos)) >= 0:
                return at
            node = node.parent
        if node is None or node.type != "string" or not node.start_byte < pos < node.end_byte:
            return -1
        return node.start_byte

    def _broken_near(self, splice: Splice) -> bool:
        """Whether the text without the completion has an error within a few lines of it
        (Python: or a broken indentation at it, which tree-sitter-python does not report)."""
        start, old_end = splice.start, splice.old_end
        return self._memo("near", start, old_end, lambda: self._find_broken_near(start, old_end))

    def _find_broken_near(self, start: int, old_end: int) -> bool:
        data = self.data
        if _pywindow.indentation_broken(data, start):
            return True
        sites = self._sites_before()
        if not sites:
            return False
        lo = start
        for _ in range(_NEAR_LINES + 1):
            lo = data.rfind(b"\n", 0, max(lo - 1, 0)) + 1 if lo > 0 else 0
        hi = _lines_below(data, old_end, 2)
        return any(s.start <= hi and lo <= s.end for s in sites)

    def _broken_lines(self, lo: int, hi: int) -> bool:
        """Whether the text without the completion has an error starting in bytes (lo, hi].
        A brace too many or too few, or a missing `;`, is no such error: that is how
        tree-sitter recovers from a block broken at the cursor, which the window judges."""
        return any(
            lo < s.start <= hi and "}" not in (s.kind, s.text) and s.kind != ";"
            for s in self._sites_before()
        )

    def _broken_line(self, pos: int) -> bool:
        """Whether the text without the completion has an error starting on the line of
        byte `pos`."""
        data = self.data
        ls = data.rfind(b"\n", 0, pos) + 1
        le = data.find(b"\n", pos)
        le = len(data) if le < 0 else le
        return any(ls <= s.start <= le for s in self._sites_before())

    def _ts_differential(
        self,
        after: bytes,
        splice: Splice,
        deadline: float,
        full: bool,
        parsed: tuple[tree_sitter.Tree | None] | None = None,
    ) -> _Stage:
        tree = self.tree
        assert tree is not None
        parser = self._parser()
        if parsed is not None:
            new = parsed[0]
        elif full:
            new = parse(parser, after, None, deadline)
        else:
            new = parse(parser, after, self._edited_copy(tree, splice, after), deadline)
        if new is None:
            return _Stage("timeout", [])
        intro: list[ErrorSite] = []
        if self.spec.indentation:
            intro = indentation_sites(
                new,
                after,
                splice.start,
                splice.new_end,
                empty_blocks=not new.root_node.has_error,
            )
        if not new.root_node.has_error:
            return _Stage("invalid" if intro else "valid", intro, new)
        # In Python a hole under a block header makes tree-sitter wrap the lines above the
        # cursor in an ERROR, so an error region that starts above the cursor is no sign of
        # code broken before it (see `introduced`); in brace languages it is.
        old_ok = not self.spec.indentation
        intro += introduced(
            collect_sites(new, after),
            self._sites_before(),
            splice,
            self.data,
            enclosing_is_old=old_ok,
        )
        intro.sort(key=lambda s: s.start)
        if intro and self.spec.preprocessor:
            macros = _cmacros.statement_macros(after)
            if macros:
                # Rare path: full parses of both texts with the macro invocations rewritten.
                nb = _cmacros.neutralize(self.data, macros)
                na = _cmacros.neutralize(after, macros)
                tb = parse(parser, nb, None, deadline)
                ta = parse(parser, na, None, deadline)
                if tb is None or ta is None:
                    return _Stage("timeout", [])
                intro = introduced(
                    collect_sites(ta, na),
                    collect_sites(tb, nb),
                    splice,
                    nb,
                    enclosing_is_old=old_ok,
                )
                if intro:
                    intro[0] = blame(intro[0], ta, after, splice)
                return _Stage("invalid" if intro else "valid", intro)
        if intro:
            intro[0] = blame(intro[0], new, after, splice)
        return _Stage("invalid" if intro else "valid", intro, new)

    def _edited_copy(
        self, tree: tree_sitter.Tree, splice: Splice, after: bytes
    ) -> tree_sitter.Tree:
        start, old_end, new_end = splice.start, splice.old_end, splice.new_end
        data = self.data
        if start == old_end:
            # Same text, cheaper edit: tree-sitter reparses far less when an insertion that ends
            # in whitespace is moved left over equal whitespace (e.g. "x\n" after a "\n" becomes
            # "\nx" before it); an edit at the start of a line reuses little of the old tree.
            while start > 0 and new_end > start:
                c = data[start - 1]
                if c not in _WS or after[new_end - 1] != c:
                    break
                start -= 1
                old_end -= 1
                new_end -= 1
        copy = tree.copy()
        if start == splice.start:
            sp, ep = self._points(start, old_end)  # (worked out by `prepare`)
        else:
            sp, ep = _point(data, start), _point(data, old_end)
        seg = after[start:new_end]
        nl = seg.count(b"\n")
        if nl:
            np_ = (sp[0] + nl, new_end - (after.rfind(b"\n", start, new_end) + 1))
        else:
            np_ = (sp[0], sp[1] + (new_end - start))
        copy.edit(start, old_end, new_end, sp, ep, np_)
        return copy

    def _ts_verdict(
        self,
        stage: _Stage,
        mode: Mode,
        after: bytes,
        detail: str = "",
        splice: Splice | None = None,
    ) -> Verdict:
        if stage.status == "timeout":
            return self._verdict(
                "timeout",
                mode,
                "tree-sitter",
                message="tree-sitter did not finish within the time budget",
                detail=detail,
            )
        if stage.status == "valid":
            return self._verdict("valid", mode, "tree-sitter", detail=detail)
        site = stage.intro[0]
        where, message = site.where, site.message()
        if splice is not None:
            # tree-sitter's error node often starts where its recovery began ("unexpected
            # 'a'" for `a + (b`); when the completion opened a bracket it never closes and
            # that node covers it, the bracket is what the user must see.
            opener = unclosed_opener(after[splice.start : splice.new_end])
            if opener is not None:
                at = splice.start + opener[0]
                if any(s.start <= at <= max(s.end, s.start) for s in stage.intro):
                    where, message = at, f"'{opener[1]}' is never closed"
        return self._verdict(
            "invalid",
            mode,
            "tree-sitter",
            where=self._position_after(after, where),
            message=message,
            detail=detail,
        )

    # compilers ----------------------------------------------------

    def _compile(
        self, completion: str, splice: Splice, deadline: float
    ) -> tuple[str, CompilerResult, Judgement | None, Splice]:
        """Run the language's compiler check; the judgement is None when it cannot run."""
        assert self.language is not None
        checker = LANGUAGES[self.language].compiler
        assert checker is not None
        text = self.text
        # character offsets for the compiler side
        data = self.data
        cs = len(_decode_to(data, splice.start))
        ce = len(_decode_to(data, splice.old_end))
        csplice = Splice(cs, ce, cs + len(completion))
        after_text = text[:cs] + completion + text[ce:]
        res = _compilers.run_checker(checker, after_text, deadline, self.compilers)
        if res.ok or res.timed_out or res.failure:
            return checker, res, (None if not res.ok else Judgement(False)), csplice
        before = self._compiled_before(checker, deadline)
        if before is not None and (before.timed_out or before.failure):
            before = None
        return checker, res, _compilers.judge(before, res, csplice), csplice

    def _compiled_before(self, checker: str, deadline: float) -> CompilerResult | None:
        cached = self._before_compiled.get(checker)
        if cached is not None and cached[0] == self.version:
            return cached[1]
        res = _compilers.run_checker(checker, self.text, deadline, self.compilers)
        if not res.timed_out:
            self._before_compiled[checker] = (self.version, res)
        return res

    def _diag_where(self, completion: str, csplice: Splice, offset: int | None) -> Position | None:
        if offset is None:
            return None
        text = self.text
        after_text = text[: csplice.start] + completion + text[csplice.old_end :]
        return to_position(after_text, offset, self.encoding)

    def _compiler_mode(
        self, completion: str, after: bytes, splice: Splice, deadline: float, full: bool
    ) -> Verdict:
        mode: Mode = "compiler"
        assert self.language is not None
        if LANGUAGES[self.language].compiler is None:
            stage = self._ts_stage(after, splice, deadline, full)
            return self._ts_verdict(
                stage, mode, after, detail=f"no compiler check for {self.language}: tree-sitter"
            )
        checker, res, judgement, csplice = self._compile(completion, splice, deadline)
        if res.ok:
            return self._verdict("valid", mode, checker)
        if res.timed_out:
            return self._verdict(
                "timeout", mode, checker, message=f"{checker} did not finish within the budget"
            )
        if res.failure:
            stage = self._ts_stage(after, splice, deadline, full)
            return self._ts_verdict(stage, mode, after, detail=f"{res.failure}; tree-sitter")
        assert judgement is not None
        before = self._compiled_before(checker, deadline)  # (cached by _compile)
        if judgement.introduced is not None and before is not None and not before.ok:
            # In a file broken near the cursor the compiler's errors before and after move
            # around any insertion, as tree-sitter's do, both ways: where they disagree,
            # the parse of the completion's own statement decides (in a fresh SAFIM set,
            # the compiler's comparison rejected 81 of 419 correct completions).
            stage = self._ts_stage(after, splice, deadline, full)
            if stage.window and (stage.status == "invalid") != judgement.introduced:
                return self._ts_verdict(
                    stage,
                    mode,
                    after,
                    detail=f"{checker} fails without the completion too ({judgement.reason}): "
                    "the file is broken near the cursor, a parse of the completion's "
                    "statement decided",
                )
        if judgement.introduced is None:
            stage = self._ts_stage(after, splice, deadline, full)
            return self._ts_verdict(
                stage,
                mode,
                after,
                detail=f"{checker} fails without the completion too ({judgement.reason}): "
                "tree-sitter's differential decided",
            )
        diag = judgement.diagnostic
        if not judgement.introduced:
            return self._verdict("valid", mode, checker, detail=judgement.reason)
        return self._verdict(
            "invalid",
            mode,
            checker,
            where=self._diag_where(completion, csplice, diag.offset if diag else None),
            message=diag.message if diag else "syntax error",
            detail=judgement.reason,
        )

    def _confirm_mode(
        self, completion: str, after: bytes, splice: Splice, deadline: float, full: bool
    ) -> Verdict:
        mode: Mode = "confirm"
        stage = self._ts_stage(after, splice, deadline, full)
        ts_verdict = self._ts_verdict(stage, mode, after)
        if stage.status != "invalid":
            return ts_verdict
        assert self.language is not None
        if LANGUAGES[self.language].compiler is None:
            return self._ts_verdict(
                stage, mode, after, detail=f"no compiler check for {self.language}"
            )
        objection = f"tree-sitter: {ts_verdict.message} at {ts_verdict.line}:{ts_verdict.column}"
        checker, res, judgement, csplice = self._compile(completion, splice, deadline)
        if res.ok:
            return self._verdict(
                "valid", mode, checker, detail=f"{objection}; {checker} accepts the file"
            )
        if res.timed_out or res.failure or judgement is None or judgement.introduced is None:
            why = (
                f"{checker} did not answer within the budget"
                if res.timed_out
                else res.failure or (judgement.reason if judgement else "")
            )
            return self._ts_verdict(
                stage, mode, after, detail=f"{why}; tree-sitter's objection stands"
            )
        diag = judgement.diagnostic
        if not judgement.introduced:
            return self._verdict(
                "valid", mode, checker, detail=f"{objection}; {checker}: {judgement.reason}"
            )
        where = self._diag_where(completion, csplice, diag.offset if diag else None)
        if where is None:
            where = (ts_verdict.line or 0, ts_verdict.column or 0)
        return self._verdict(
            "invalid",
            mode,
            checker,
            where=where,
            message=diag.message if diag else ts_verdict.message,
            detail=f"{objection}; {checker} agrees ({judgement.reason})",
        )


def check_completion(
    prefix: str,
    completion: str,
    suffix: str,
    language: str | None,
    *,
    mode: Mode = "tree-sitter",
    budget_s: float | None = None,
    compilers: CompilerConfig = DEFAULT_CONFIG,
    names: bool = False,
) -> Verdict:
    """One-shot gate: parse `prefix + suffix`, then check `completion` between them."""
    doc = SyntaxDocument(prefix + suffix, language, compilers=compilers)
    return doc.check(completion, len(_utf8(prefix)), mode=mode, budget_s=budget_s, names=names)


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


def _point(data: bytes, offset: int) -> tuple[int, int]:
    """tree-sitter point (row, byte column) of a byte offset: rows counted at \\n only,
    tree-sitter's own rule (LSP positions are another matter: server/vocab/positions.py)."""
    return data.count(b"\n", 0, offset), offset - (data.rfind(b"\n", 0, offset) + 1)


_CLOSERS = {ord("("): ord(")"), ord("["): ord("]"), ord("{"): ord("}")}


def _window_site(after: bytes, splice: Splice, w: _bracewindow.WindowVerdict) -> ErrorSite:
    """Where an invalid window's error is, for the user: a `(` or `[` of the completion's
    that nothing in the window closes (its parser fails wherever the statement runs out,
    often a line or two on: the bracket is what to fix), else the parser's error."""
    opener = unclosed_opener(after[splice.start : w.span[1]])
    if opener is not None and opener[1] in "([" and opener[0] < splice.new_end - splice.start:
        at = splice.start + opener[0]
        return ErrorSite(at, at, False, "ERROR", "", note=f"'{opener[1]}' is never closed")
    return ErrorSite(w.where, w.where, False, "ERROR", "", note=w.message)


_STATEMENT_KEYWORD = re.compile(rb"\s*(if|for|while|do|switch|return|break|continue|throw)\b")


def _unfinished_above(
    site: ErrorSite, tree: tree_sitter.Tree, after: bytes, splice: Splice
) -> bool:
    """Whether `site` is a `;` missing from a statement the user began on a line above
    the completion and left unfinished (`ll n;c`, a line cut short): the completion's
    lines start with a statement of their own (a keyword), which cannot finish it. The
    parser reads the two as one statement and misses the `;` inside the completion."""
    if not (site.missing and site.kind == ";"):
        return False
    ls = after.rfind(b"\n", 0, splice.start) + 1
    if after[ls : splice.start].strip() or not _STATEMENT_KEYWORD.match(
        after[splice.start : splice.new_end]
    ):
        return False
    node: tree_sitter.Node | None = tree.root_node.descendant_for_byte_range(site.start, site.end)
    while node is not None and not (
        node.type.endswith(("statement", "declaration")) and node.type != "compound_statement"
    ):
        node = node.parent
    return node is not None and node.start_byte < ls


def unclosed_opener(inserted: bytes) -> tuple[int, str] | None:
    """(byte offset, bracket) of the last bracket `inserted` opens and does not close, or
    None. Brackets inside a one-line string literal are skipped; a closer with no opener
    (the completion closes something of the user's) ends nothing of ours."""
    stack: list[int] = []
    quote = 0
    i = 0
    while i < len(inserted):
        c = inserted[i]
        if quote:
            if c == ord("\\"):
                i += 1
            elif c == quote or c == ord("\n"):
                quote = 0
        elif c in (ord("'"), ord('"')):
            quote = c
        elif c in _CLOSERS:
            stack.append(i)
        elif stack and c == _CLOSERS[inserted[stack[-1]]]:
            stack.pop()
        i += 1
    return (stack[-1], chr(inserted[stack[-1]])) if stack else None
