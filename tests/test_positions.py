"""Position math in utf-16, utf-8 and utf-32 with emoji, CJK and CRLF."""

from __future__ import annotations

import bisect
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synconfroute.server.vocab.positions import (
    PositionOutOfRange,
    advance,
    clamp_offset,
    line_starts,
    to_offset,
    to_position,
    word_before,
)

TEXT = "a😀b\r\n漢字x\n\fend"  # emoji = 2 utf-16 units, 4 utf-8 bytes; \f is NOT a line break


@pytest.mark.parametrize(
    ("encoding", "line", "char", "offset"),
    [
        ("utf-16", 0, 3, 2),  # after the emoji
        ("utf-8", 0, 5, 2),
        ("utf-32", 0, 2, 2),
        ("utf-16", 0, 4, 3),  # end of line, before \r\n
        ("utf-16", 1, 2, 7),  # after 漢字
        ("utf-8", 1, 6, 7),
        ("utf-32", 2, 1, 10),  # after the form feed, same line
        ("utf-32", 2, 4, 13),
    ],
)
def test_to_offset(encoding: str, line: int, char: int, offset: int) -> None:
    assert to_offset(TEXT, line, char, encoding) == offset  # type: ignore[arg-type]
    assert to_position(TEXT, offset, encoding) == (line, char)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("line", "char", "fragment"),
    [(0, 5, "past the end"), (3, 0, "outside"), (-1, 0, "outside"), (0, 2, "splits")],
)
def test_out_of_range_is_an_error(line: int, char: int, fragment: str) -> None:
    with pytest.raises(PositionOutOfRange, match=fragment):
        to_offset(TEXT, line, char, "utf-16")


_CODEC = {"utf-8": ("utf-8", 1), "utf-16": ("utf-16-le", 2), "utf-32": ("utf-32-le", 4)}


@given(st.text(alphabet="a😀\r\n\f漢", max_size=24), st.sampled_from(sorted(_CODEC)))
def test_to_position_is_the_line_starts_rule(text: str, encoding: str) -> None:
    """The counting `to_position` agrees with the plain rule at every offset: the line
    whose start is the last one at or before it, \r\n one break (an offset between its
    halves stays on the line it ends)."""
    starts = line_starts(text)
    codec, width = _CODEC[encoding]
    for offset in range(len(text) + 1):
        line = bisect.bisect_right(starts, offset) - 1
        want = (line, len(text[starts[line] : offset].encode(codec)) // width)
        assert to_position(text, offset, encoding) == want, (text, offset)  # type: ignore[arg-type]


def test_lone_cr_is_a_line_break() -> None:
    assert to_offset("ab\rcd", 1, 1, "utf-16") == 4


def test_word_before_and_advance() -> None:
    assert word_before("x = foo_ba", 10) == "foo_ba"
    assert word_before("x = (", 5) == ""
    assert advance(3, 4, "ab😀", "utf-16") == (3, 8)
    assert advance(3, 4, "ab\ncd", "utf-16") == (4, 2)


@given(st.text(alphabet=st.sampled_from("ab\r\né😀\u2028"), max_size=12), st.integers(0, 5))
def test_advance_counts_every_encoding_as_the_text_encoded(inserted: str, character: int) -> None:
    """The position after an insertion: lines broken at LSP's breaks only, the last
    line's length in the encoding's units (UTF-16: two for a character past U+FFFF)."""
    for encoding, unit in (("utf-8", 1), ("utf-16", 2), ("utf-32", 4)):
        codec = {"utf-8": "utf-8", "utf-16": "utf-16-le", "utf-32": "utf-32-le"}[encoding]
        last = inserted.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        want_line = 2 + len(last) - 1
        width = len(last[-1].encode(codec)) // unit
        want = (want_line, character + width if len(last) == 1 else width)
        assert advance(2, character, inserted, encoding) == want  # type: ignore[arg-type]


@given(st.text(alphabet=st.sampled_from("ab\r\n\u2028é"), max_size=30))
def test_line_starts_break_at_lsp_line_breaks_only(text: str) -> None:
    """Line starts, with or without a \\r in the text (two ways of counting them)."""
    want, i = [0], 0
    while i < len(text):
        if text.startswith("\r\n", i):
            i += 2
            want.append(i)
            continue
        i += 1
        if text[i - 1] in "\r\n":
            want.append(i)
    assert line_starts(text) == want


def _clamp_reference(text: str, line: int, character: int, encoding: str) -> int:
    """clamp_offset by its rule, from the lines LSP sees, one character at a time."""
    parts = re.split(r"(\r\n|\r|\n)", text)  # lines, and the break after each
    rows, breaks = parts[0::2], [*parts[1::2], ""]
    if line < 0:
        return 0
    if line >= len(rows):
        return len(text)
    start = sum(len(r) + len(b) for r, b in zip(rows[:line], breaks[:line], strict=True))
    codec = {"utf-8": "utf-8", "utf-16": "utf-16-le", "utf-32": "utf-32-le"}[encoding]
    width = {"utf-8": 1, "utf-16": 2, "utf-32": 4}[encoding]
    units = 0
    for i, ch in enumerate(rows[line]):
        units += len(ch.encode(codec, "surrogatepass")) // width
        if units > character:
            return start + i
    return start + len(rows[line])


@given(
    st.text(alphabet=st.sampled_from("ab\r\né😀"), max_size=20),
    st.integers(-1, 4),
    st.integers(-1, 12),
    st.sampled_from(["utf-8", "utf-16", "utf-32"]),
)
def test_clamp_offset_is_lenient_as_lsp_asks(text: str, line: int, char: int, enc: str) -> None:
    """An edit position past its line's end, past the last line or inside a character
    lands on the line's end, the text's end or the character's start."""
    got = clamp_offset(text, line_starts(text), line, char, enc)  # type: ignore[arg-type]
    assert got == _clamp_reference(text, line, max(char, 0), enc)
