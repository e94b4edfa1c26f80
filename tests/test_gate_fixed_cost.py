"""The work after the model's last token, done once: what the gate reads of the text is
built with one copy of it (`_spliced`), and a one-line completion leaves the suffix
unread (`post_process`, `first_code_line`). Each is held to the rule it replaced,
spelled out here as it was written before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from synconfroute.clients.types import line_end
from synconfroute.server.routing.text_rules import first_code_line, post_process
from synconfroute.server.syntax import document

# Texts made of what the rules look at: line breaks, blanks, fences, code-like words.
_pieces = st.sampled_from(["\n", "\r\n", " ", "\t", "```", "x = 1", "return", "def f():", "ab"])
_texts = st.lists(_pieces, max_size=14).map("".join)


def _post_process_before(text: str, suffix: str, *, multiline: bool) -> str:
    """`post_process` as it was: the suffix split whole for its first code line."""
    if not multiline:
        end = line_end(text)
        text = text if end < 0 else text[:end]
    for marker in ("\n```", "\n\n\n"):
        cut = text.find(marker)
        if cut >= 0:
            text = text[:cut]
    anchor = next((ln.strip() for ln in suffix.split("\n") if ln.strip()), "")
    if len(anchor) >= 3:
        lines = text.split("\n")
        for i in range(1, len(lines)):
            if lines[i].strip() == anchor:
                text = "\n".join(lines[:i])
                break
    return text.rstrip() if text.strip() == "" else text


@settings(max_examples=400, deadline=None)
@given(_texts, _texts, st.booleans())
def test_post_process_is_the_rule_it_was(text: str, suffix: str, multiline: bool) -> None:
    assert post_process(text, suffix, multiline=multiline) == _post_process_before(
        text, suffix, multiline=multiline
    )


@settings(max_examples=300, deadline=None)
@given(_texts)
def test_first_code_line_is_the_first_non_blank_line(text: str) -> None:
    assert first_code_line(text) == next((ln.strip() for ln in text.split("\n") if ln.strip()), "")


def test_a_completion_cut_at_the_suffixs_first_line() -> None:
    # (the case the anchor is for: the model re-types the line after the cursor)
    suffix = "\n\n    return total\n"
    assert post_process("x\n    return total\nmore", suffix, multiline=True) == "x"
    assert post_process("    return total", suffix, multiline=False) == "    return total"


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 3 * document._SPLICE_IN_PLACE),
    st.integers(0, 200),
    st.integers(0, 50),
    st.binary(max_size=40),
)
def test_spliced_is_the_concatenation(size: int, start: int, length: int, new: bytes) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    start = min(start * 37, size)
    end = min(start + length, size)
    assert document._spliced(data, start, end, new) == data[:start] + new + data[end:]
