"""LSP positions <-> offsets, in the negotiated encoding, with LSP's own line breaks.

pygls' `TextDocument.lines` splits on every str.splitlines() separator (\\f, \\v,
U+2028 ...), while LSP counts lines only at \\n, \\r\\n and \\r; we do our own math.
"""

from __future__ import annotations

import re
from typing import Literal

Encoding = Literal["utf-8", "utf-16", "utf-32"]
_LINE = re.compile(r"\r\n|\r|\n")
_WORD = re.compile(r"[A-Za-z0-9_$]*$")


class PositionOutOfRange(ValueError):
    """The client sent a position that is not in the document."""


def line_starts(text: str) -> list[int]:
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
    row = line_text(text, starts, line)
    units = 0
    for i, ch in enumerate(row):
        if units >= character:
            if units > character:  # inside a surrogate pair / multibyte char
                raise PositionOutOfRange(f"position {line}:{character} splits a character")
            return starts[line] + i
        units += _units(ch, encoding)
    if units == character:
        return starts[line] + len(row)
    raise PositionOutOfRange(
        f"character {character} is past the end of line {line} ({units} {encoding} units)"
    )


def to_position(text: str, offset: int, encoding: Encoding) -> tuple[int, int]:
    """The LSP (line, character) of a code-point offset."""
    starts = line_starts(text)
    lo, hi = 0, len(starts) - 1
    while lo < hi:  # last line start <= offset
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo, sum(_units(ch, encoding) for ch in text[starts[lo] : offset])


def word_before(text: str, offset: int) -> str:
    """The identifier fragment that ends at `offset` (what editors filter completions by)."""
    start = max(0, offset - 200)
    m = _WORD.search(text[start:offset])
    return m.group(0) if m else ""


def advance(line: int, character: int, inserted: str, encoding: Encoding) -> tuple[int, int]:
    """The position after inserting `inserted` at (line, character)."""
    parts = _LINE.split(inserted)
    if len(parts) == 1:
        return line, character + sum(_units(c, encoding) for c in inserted)
    return line + len(parts) - 1, sum(_units(c, encoding) for c in parts[-1])
