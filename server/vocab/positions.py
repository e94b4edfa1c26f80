"""LSP positions <-> offsets, in the negotiated encoding, with LSP's own line breaks.

pygls' `TextDocument.lines` splits on every str.splitlines() separator (\\f, \\v,
U+2028 ...), while LSP counts lines only at \\n, \\r\\n and \\r; we do our own math.
"""

from __future__ import annotations

import bisect
import re
from itertools import accumulate, count
from operator import add
from typing import Literal

Encoding = Literal["utf-8", "utf-16", "utf-32"]
_LINE = re.compile(r"\r\n|\r|\n")
_WORD = re.compile(r"[A-Za-z0-9_$]*$")


class PositionOutOfRange(ValueError):
    """The client sent a position that is not in the document."""


def line_starts(text: str) -> list[int]:
    """Offsets where the lines of `text` start (after \\n, \\r\\n and \\r)."""
    if "\r" not in text:  # the usual case, in C: line i + 1 starts after i + 1 breaks
        lengths = accumulate(map(len, text.split("\n")[:-1]))
        return [0, *map(add, lengths, count(1))]
    return [0, *(m.end() for m in _LINE.finditer(text))]


def _units(ch: str, encoding: Encoding) -> int:
    if encoding == "utf-16":
        return 2 if ord(ch) > 0xFFFF else 1
    if encoding == "utf-8":
        return len(ch.encode("utf-8", "surrogatepass"))
    return 1


def line_text(text: str, starts: list[int], line: int) -> str:
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    return _LINE.sub("", text[starts[line] : end])


def to_offset(text: str, line: int, character: int, encoding: Encoding) -> int:
    """Offset (code points) of an LSP position; PositionOutOfRange if it is not in `text`."""
    starts = line_starts(text)
    if line < 0 or character < 0 or line >= len(starts):
        raise PositionOutOfRange(
            f"position {line}:{character} is outside the document ({len(starts)} lines)"
        )
    return starts[line] + _in_row(line_text(text, starts, line), line, character, encoding)


def _in_row(row: str, line: int, character: int, encoding: Encoding) -> int:
    """Offset in `row` (one line's text) of `character` units."""
    if encoding == "utf-32" or row.isascii():
        if character <= len(row):
            return character
        n = len(row) if encoding == "utf-32" else units(row, encoding)
        raise PositionOutOfRange(
            f"character {character} is past the end of line {line} ({n} {encoding} units)"
        )
    count = 0
    for i, ch in enumerate(row):
        if count >= character:
            if count > character:  # inside a surrogate pair / multibyte char
                raise PositionOutOfRange(f"position {line}:{character} splits a character")
            return i
        count += _units(ch, encoding)
    if count == character:
        return len(row)
    raise PositionOutOfRange(
        f"character {character} is past the end of line {line} ({count} {encoding} units)"
    )


def to_position(text: str, offset: int, encoding: Encoding) -> tuple[int, int]:
    """The LSP (line, character) of a code-point offset.

    Counted with str methods, not a list of every line's start: the gate places each
    rejected completion's error in a text of thousands of lines."""
    head = text[:offset]
    cr = head.count("\r")
    line = head.count("\n") + cr - (head.count("\r\n") if cr else 0)
    end = len(head)
    if cr and head.endswith("\r") and text.startswith("\n", offset):
        line -= 1  # between the two halves of a \r\n: still on the line it ends
        end -= 1
    start = max(head.rfind("\n", 0, end), head.rfind("\r", 0, end)) + 1
    return line, units(text[start:offset], encoding)


def word_before(text: str, offset: int) -> str:
    """The identifier fragment that ends at `offset` (what editors filter completions by)."""
    start = max(0, offset - 200)
    m = _WORD.search(text[start:offset])
    return m.group(0) if m else ""


def advance(line: int, character: int, inserted: str, encoding: Encoding) -> tuple[int, int]:
    """The position after inserting `inserted` at (line, character)."""
    parts = _LINE.split(inserted)
    if len(parts) == 1:
        return line, character + units(inserted, encoding)
    return line + len(parts) - 1, units(parts[-1], encoding)


def clamp_offset(
    text: str, starts: list[int], line: int, character: int, encoding: Encoding
) -> int:
    """Offset of an edit position, lenient as LSP asks: a character past the end of its
    line means the line's end, a line past the last one means the end of the text, a
    position inside a character means that character's start."""
    if line < 0:
        return 0
    if line >= len(starts):
        return len(text)
    start = starts[line]
    end = starts[line + 1] if line + 1 < len(starts) else len(text)
    while end > start and text[end - 1] in "\r\n":  # the line break is not in the line
        end -= 1
    if encoding == "utf-32" or character <= 0 or text[start:end].isascii():
        return start + max(0, min(character, end - start))
    units = 0
    for i in range(start, end):
        units += _units(text[i], encoding)
        if units > character:
            return i
    return end


class Text:
    """One open document's text: the only copy the server keeps, with LSP line starts.

    Lines break at \\r\\n, \\r and \\n only (not at U+2028, U+0085, form feed ...);
    positions count in the negotiated encoding. Edits update the line table locally.
    """

    __slots__ = ("_starts", "_text", "encoding", "version")

    def __init__(self, text: str, encoding: Encoding = "utf-16") -> None:
        self._text = text
        self._starts: list[int] | None = None
        self.encoding: Encoding = encoding
        self.version = 0

    @property
    def text(self) -> str:
        return self._text

    @property
    def starts(self) -> list[int]:
        """Code-point offsets of the line starts."""
        if self._starts is None:
            self._starts = line_starts(self._text)
        return self._starts

    def offset(self, line: int, character: int) -> int:
        """Offset of a request position; PositionOutOfRange if it is not in the text."""
        starts = self.starts
        if line < 0 or character < 0 or line >= len(starts):
            raise PositionOutOfRange(
                f"position {line}:{character} is outside the document ({len(starts)} lines)"
            )
        row = line_text(self._text, starts, line)
        return starts[line] + _in_row(row, line, character, self.encoding)

    def edit_offset(self, line: int, character: int) -> int:
        """Offset of a didChange position (clamped, see `clamp_offset`)."""
        return clamp_offset(self._text, self.starts, line, character, self.encoding)

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset) - 1

    def position(self, offset: int) -> tuple[int, int]:
        line = self.line_of(offset)
        return line, units(self._text[self.starts[line] : offset], self.encoding)

    def replace(self, start: int, end: int, new: str) -> None:
        """Replace code points [start, end) with `new`."""
        old = self._text
        if not 0 <= start <= end <= len(old):
            raise ValueError(f"edit range {start}..{end} is outside the text (0..{len(old)})")
        text = old[:start] + new + old[end:]
        self._text = text
        self.version += 1
        starts = self._starts
        if starts is None:
            return
        # A break ending before `start` keeps its extent (the character after it is
        # unchanged); one ending at >= end + 2 lies wholly in the unchanged tail. Rescan
        # in between: a \r before the edit may now meet a \n, and so on.
        new_end = start + len(new)
        delta = new_end - end
        lo = bisect.bisect_left(starts, max(start, 1))  # 0 always starts a line
        hi = bisect.bisect_left(starts, end + 2)
        a = max(0, start - 1)
        b = min(len(text), new_end + 2)
        mid = [m.end() for m in _LINE.finditer(text, a, b) if start <= m.end() < new_end + 2]
        tail = starts[hi:]
        self._starts = starts[:lo] + mid + ([s + delta for s in tail] if delta else tail)


def units(s: str, encoding: Encoding) -> int:
    """Length of `s` in position units."""
    if encoding == "utf-32" or s.isascii():
        return len(s)
    if encoding == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    return len(s) + sum(1 for ch in s if ord(ch) > 0xFFFF)


_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_surrogates(s: str) -> str:
    """Lone surrogates (a Python str holds no other kind) replaced by U+FFFD, one code
    point for one: positions do not move in any encoding (one UTF-16 unit, three UTF-8
    bytes, one code point either way), and the text can be encoded to UTF-8."""
    if s.isascii():  # the common case, at C speed
        return s
    return _SURROGATE.sub("\ufffd", s) if _SURROGATE.search(s) else s


def cap_window(prefix: str, suffix: str, limit: int) -> tuple[str, str]:
    """At most `limit` characters of prefix + suffix, cut where the model needs them
    least: far from the cursor. The prefix gets three quarters of the budget (FIM
    models lean on the code before the cursor), the suffix the rest, and either side's
    unused share goes to the other. A cut moves to a line boundary when one lies in
    the outer half of what is kept (a single huge line is cut where it must be)."""
    if limit <= 0 or len(prefix) + len(suffix) <= limit:
        return prefix, suffix
    keep_suffix = min(len(suffix), max(limit // 4, limit - len(prefix)))
    keep_prefix = min(len(prefix), limit - keep_suffix)
    if keep_prefix < len(prefix):
        start = len(prefix) - keep_prefix
        if not _line_start(prefix, start):
            m = _LINE.search(prefix, start)
            if m is not None and _line_start(prefix, m.end()):
                start = m.end() if m.end() <= start + keep_prefix // 2 else start
        prefix = prefix[start:]
    if keep_suffix < len(suffix):
        end = keep_suffix
        if not _line_start(suffix, end):
            lo = end - keep_suffix // 2
            ends = [m.end() for m in _LINE.finditer(suffix, lo, end)]
            ends = [e for e in ends if _line_start(suffix, e)]
            end = ends[-1] if ends else end
        suffix = suffix[:end]
    return prefix, suffix


def _line_start(s: str, i: int) -> bool:
    """Whether offset `i` of `s` starts a line (not inside a \r\n)."""
    if i <= 0 or i >= len(s):
        return True
    return s[i - 1] == "\n" or (s[i - 1] == "\r" and s[i] != "\n")
