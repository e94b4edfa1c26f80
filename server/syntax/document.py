"""One open document: its text and tree-sitter tree, kept in sync by edits, and the gate.

`SyntaxDocument.check` answers "does inserting this completion here introduce a syntax
error?" without touching the document: it edits a copy of the tree and reparses
incrementally (or from scratch with `full=True`, for benchmarks).
"""

from __future__ import annotations

import bisect
import time
from typing import Literal

import tree_sitter

from . import _cmacros, _compilers
from ._compilers import DEFAULT_CONFIG, CompilerConfig, CompilerResult, Judgement
from ._pyindent import indentation_sites
from ._treesitter import ErrorSite, Splice, blame, collect_sites, introduced, parse
from .languages import LANGUAGES, UnsupportedLanguage, detect_language, parser_for, ts_language
from .verdict import DEFAULT_BUDGET_S, MODES, Mode, Verdict

Position = tuple[int, int]  # (line, character), 0-based; character in the document's encoding
Encoding = Literal["utf-32", "utf-16", "utf-8"]

_WS = frozenset(b" \t\r\n")


def _units(raw: bytes, encoding: Encoding) -> int:
    """Length of UTF-8 `raw` in the position encoding's units."""
    if encoding == "utf-8":
        return len(raw)
    text = raw.decode("utf-8", "replace")
    if encoding == "utf-32" or text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _prefix_bytes(line: bytes, units: int, encoding: Encoding) -> int:
    """Bytes of the first `units` position units of `line` (clamped to the line)."""
    if units <= 0:
        return 0
    if encoding == "utf-8" or line.isascii():
        return min(units, len(line))
    text = line.decode("utf-8", "replace")
    if encoding == "utf-32":
        return len(text[:units].encode("utf-8", "surrogatepass"))
    count = 0
    for i, ch in enumerate(text):
        if count >= units:
            return len(text[:i].encode("utf-8", "surrogatepass"))
        count += 2 if ord(ch) > 0xFFFF else 1
    return len(line)


class _Stage:
    """What the tree-sitter stage found."""

    __slots__ = ("intro", "status")

    def __init__(self, status: Literal["valid", "invalid", "timeout"], intro: list[ErrorSite]):
        self.status = status
        self.intro = intro


class SyntaxDocument:
    """Text + tree of one document. Not thread-safe: one owner at a time.

    Positions are (line, character), 0-based, lines split at '\\n' (a '\\r' before it belongs
    to the line), character counted in `encoding` units: "utf-32" (code points, default),
    "utf-16" (the LSP default) or "utf-8" (bytes).
    Edits only edit the tree; the incremental reparse happens once, at the next check or
    `tree` access, however many edits came in between.
    """

    def __init__(
        self,
        text: str,
        language: str | None,
        *,
        encoding: Encoding = "utf-32",
        compilers: CompilerConfig = DEFAULT_CONFIG,
        lazy: bool = False,
    ) -> None:
        self.language = language
        self.encoding: Encoding = encoding
        self.compilers = compilers
        self.version = 0
        self._data = text.encode("utf-8", "surrogatepass")
        self._text: str | None = text
        self._starts = self._line_starts(self._data)
        self._unsupported = ""
        self._tree: tree_sitter.Tree | None = None
        self._stale = False
        # No tree kept (memory): parse from scratch when one is next needed.
        self._released = False
        self._before_sites: tuple[int, list[ErrorSite]] | None = None
        self._before_compiled: dict[str, tuple[int, CompilerResult]] = {}
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
                self._tree = parse(self._parser(), self._data)

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
    def data(self) -> bytes:
        return self._data

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self._data.decode("utf-8", "surrogatepass")
        return self._text

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

    @property
    def tree(self) -> tree_sitter.Tree | None:
        """The tree of the current text (reparsed incrementally if edits are pending)."""
        if self._released:
            self._tree = parse(self._parser(), self._data)
            self._released = False
            self._stale = False
        if self._stale and self._tree is not None:
            self._tree = parse(self._parser(), self._data, self._tree)
            self._stale = False
        return self._tree

    def _parser(self) -> tree_sitter.Parser:
        assert self.language is not None
        return parser_for(self.language)

    @staticmethod
    def _line_starts(data: bytes) -> list[int]:
        starts = [0]
        pos = data.find(b"\n")
        while pos >= 0:
            starts.append(pos + 1)
            pos = data.find(b"\n", pos + 1)
        return starts

    # ------------------------------------------------------------ positions

    def byte_offset(self, position: Position) -> int:
        """Byte offset of (line, character); past the end of a line means its end, past the
        last line means the end of the text (as LSP asks)."""
        line, character = position
        if line < 0:
            return 0
        if line >= len(self._starts):
            return len(self._data)
        ls = self._starts[line]
        le = self._starts[line + 1] - 1 if line + 1 < len(self._starts) else len(self._data)
        return ls + _prefix_bytes(self._data[ls:le], character, self.encoding)

    def position(self, offset: int) -> Position:
        """(line, character) of a byte offset of the current text."""
        return self._position_in(self._data, self._starts, offset)

    def _position_in(self, data: bytes, starts: list[int] | None, offset: int) -> Position:
        offset = max(0, min(offset, len(data)))
        if starts is None:
            row = data.count(b"\n", 0, offset)
            ls = data.rfind(b"\n", 0, offset) + 1
        else:
            row = bisect.bisect_right(starts, offset) - 1
            ls = starts[row]
        return row, _units(data[ls:offset], self.encoding)

    def _point(self, offset: int) -> tuple[int, int]:
        """tree-sitter point (row, byte column) of a byte offset of the current text."""
        row = bisect.bisect_right(self._starts, offset) - 1
        return row, offset - self._starts[row]

    # ------------------------------------------------------------ edits

    def edit_bytes(self, start: int, end: int, new_text: str) -> None:
        """Replace bytes [start, end) of the text with `new_text`."""
        n = len(self._data)
        if not 0 <= start <= end <= n:
            raise ValueError(f"edit range {start}..{end} is outside the text (0..{n})")
        new = new_text.encode("utf-8", "surrogatepass")
        srow, scol = self._point(start)
        erow, ecol = self._point(end)
        nl = new.count(b"\n")
        if nl:
            new_end_point = (srow + nl, len(new) - new.rfind(b"\n") - 1)
        else:
            new_end_point = (srow, scol + len(new))
        delta = len(new) - (end - start)
        added = []
        pos = new.find(b"\n")
        while pos >= 0:
            added.append(start + pos + 1)
            pos = new.find(b"\n", pos + 1)
        tail = self._starts[erow + 1 :]
        self._starts = self._starts[: srow + 1] + added + [s + delta for s in tail]
        self._data = self._data[:start] + new + self._data[end:]
        self._text = None
        self.version += 1
        if self._tree is not None:
            self._tree.edit(start, end, start + len(new), (srow, scol), (erow, ecol), new_end_point)
            self._stale = True

    def edit(self, start: Position, end: Position, new_text: str) -> None:
        """Replace the range [start, end) (LSP-style positions) with `new_text`."""
        self.edit_bytes(self.byte_offset(start), self.byte_offset(end), new_text)

    def replace_all(self, text: str) -> None:
        """A full-text change: parse from scratch."""
        self._data = text.encode("utf-8", "surrogatepass")
        self._text = text
        self._starts = self._line_starts(self._data)
        self.version += 1
        if self._tree is not None:
            self._tree = parse(self._parser(), self._data)
            self._stale = False

    # ------------------------------------------------------------ the gate

    def check(
        self,
        completion: str,
        at: int | Position,
        *,
        end: int | Position | None = None,
        mode: Mode = "tree-sitter",
        budget_s: float | None = None,
        full: bool = False,
    ) -> Verdict:
        """Would inserting `completion` at `at` (replacing up to `end`) introduce a syntax error?

        `at`/`end`: a byte offset or a (line, character) position. `budget_s` bounds the whole
        check (defaults: 0.05 s for tree-sitter, 3 s with a compiler). `full` reparses the text
        with the completion from scratch instead of incrementally. The document is unchanged.
        """
        t0 = time.perf_counter()
        if mode not in MODES:
            raise ValueError(f"unknown gate mode {mode!r}; use one of {', '.join(MODES)}")
        budget = DEFAULT_BUDGET_S[mode] if budget_s is None else budget_s
        deadline = time.monotonic() + budget
        if not self.supported:
            return Verdict(
                valid=False,
                status="unsupported-language",
                mode=mode,
                checker="none",
                language=self.language,
                message=self._unsupported,
                elapsed_s=time.perf_counter() - t0,
            )
        start = at if isinstance(at, int) else self.byte_offset(at)
        old_end = start if end is None else (end if isinstance(end, int) else self.byte_offset(end))
        if not 0 <= start <= old_end <= len(self._data):
            raise ValueError(
                f"completion range {start}..{old_end} is outside the text (0..{len(self._data)})"
            )
        ins = completion.encode("utf-8", "surrogatepass")
        after = self._data[:start] + ins + self._data[old_end:]
        splice = Splice(start, old_end, start + len(ins))
        if not ins and start == old_end:
            verdict = self._verdict("valid", mode, "tree-sitter", detail="empty completion")
        elif mode == "tree-sitter":
            stage = self._ts_stage(after, splice, deadline, full)
            verdict = self._ts_verdict(stage, mode, after)
        elif mode == "compiler":
            verdict = self._compiler_mode(completion, after, splice, deadline, full)
        else:
            verdict = self._confirm_mode(completion, after, splice, deadline, full)
        return verdict.with_elapsed(time.perf_counter() - t0)

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
        sites = collect_sites(tree, self._data) if tree is not None else []
        self._before_sites = (self.version, sites)
        return sites

    def _ts_stage(self, after: bytes, splice: Splice, deadline: float, full: bool) -> _Stage:
        tree = self.tree
        assert tree is not None
        parser = self._parser()
        if full:
            new = parse(parser, after, None, deadline)
        else:
            new = parse(parser, after, self._edited_copy(tree, splice, after), deadline)
        if new is None:
            return _Stage("timeout", [])
        intro: list[ErrorSite] = []
        if self.language == "python":
            intro = indentation_sites(
                new,
                after,
                splice.start,
                splice.new_end,
                empty_blocks=not new.root_node.has_error,
            )
        if not new.root_node.has_error:
            return _Stage("invalid" if intro else "valid", intro)
        # In Python a hole under a block header makes tree-sitter wrap the lines above the
        # cursor in an ERROR, so an error region that starts above the cursor is no sign of
        # code broken before it (see `introduced`); in brace languages it is.
        old_ok = self.language != "python"
        intro += introduced(
            collect_sites(new, after),
            self._sites_before(),
            splice,
            self._data,
            enclosing_is_old=old_ok,
        )
        intro.sort(key=lambda s: s.start)
        if intro and self.language in ("c", "cpp"):
            macros = _cmacros.statement_macros(after)
            if macros:
                # Rare path: full parses of both texts with the macro invocations rewritten.
                nb = _cmacros.neutralize(self._data, macros)
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
        return _Stage("invalid" if intro else "valid", intro)

    def _edited_copy(
        self, tree: tree_sitter.Tree, splice: Splice, after: bytes
    ) -> tree_sitter.Tree:
        start, old_end, new_end = splice.start, splice.old_end, splice.new_end
        if start == old_end:
            # Same text, cheaper edit: tree-sitter reparses far less when an insertion that ends
            # in whitespace is moved left over equal whitespace (e.g. "x\n" after a "\n" becomes
            # "\nx" before it); an edit at the start of a line reuses little of the old tree.
            data = self._data
            while start > 0 and new_end > start:
                c = data[start - 1]
                if c not in _WS or after[new_end - 1] != c:
                    break
                start -= 1
                old_end -= 1
                new_end -= 1
        copy = tree.copy()
        sp = self._point(start)
        ep = self._point(old_end)
        seg = after[start:new_end]
        nl = seg.count(b"\n")
        if nl:
            np_ = (sp[0] + nl, new_end - (after.rfind(b"\n", start, new_end) + 1))
        else:
            np_ = (sp[0], sp[1] + (new_end - start))
        copy.edit(start, old_end, new_end, sp, ep, np_)
        return copy

    def _ts_verdict(self, stage: _Stage, mode: Mode, after: bytes, detail: str = "") -> Verdict:
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
        return self._verdict(
            "invalid",
            mode,
            "tree-sitter",
            where=self._position_in(after, None, site.where),
            message=site.message(),
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
        cs = len(self._data[: splice.start].decode("utf-8", "replace"))
        ce = cs + len(self._data[splice.start : splice.old_end].decode("utf-8", "replace"))
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
        before = after_text[:offset]
        line = before.count("\n")
        col_text = before[before.rfind("\n") + 1 :]
        return line, _units(col_text.encode("utf-8", "surrogatepass"), self.encoding)

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
) -> Verdict:
    """One-shot gate: parse `prefix + suffix`, then check `completion` between them."""
    doc = SyntaxDocument(prefix + suffix, language, compilers=compilers)
    return doc.check(
        completion, len(prefix.encode("utf-8", "surrogatepass")), mode=mode, budget_s=budget_s
    )
