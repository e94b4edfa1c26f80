"""Cut the text around the cursor into the prefix and suffix the models see."""

from __future__ import annotations

from .pipeline import CompletionContext


class PositionError(ValueError):
    """A cursor position outside the document (the message says where)."""


def offset_of(text: str, line: int, column: int) -> int:
    """Character offset of 0-based (line, column in code points); lines split on \\n only.

    A column past the end of its line is an error rather than silently clamped:
    the caller has a stale or wrong position.
    """
    if line < 0 or column < 0:
        raise PositionError(f"position {line + 1}:{column + 1} is before the start of the file")
    start = 0
    for _ in range(line):
        nl = text.find("\n", start)
        if nl < 0:
            total = text.count("\n") + 1
            raise PositionError(f"line {line + 1} is past the end of the file ({total} lines)")
        start = nl + 1
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    if end > start and text[end - 1] == "\r":
        end -= 1  # CRLF: the \r is not part of the line's text
    if start + column > end:
        raise PositionError(
            f"column {column + 1} is past the end of line {line + 1} ({end - start} characters)"
        )
    return start + column


def make_context(
    text: str,
    offset: int,
    *,
    context_lines: int,
    language: str = "",
    path: str = "",
    document: object | None = None,
) -> CompletionContext:
    """Prefix = up to `context_lines` lines before the cursor, suffix = as many after."""
    prefix, suffix = text[:offset], text[offset:]
    cut = len(prefix)
    for _ in range(context_lines + 1):
        cut = prefix.rfind("\n", 0, cut)
        if cut < 0:
            break
    prefix = prefix if cut < 0 else prefix[cut + 1 :]
    end = -1
    for _ in range(context_lines + 1):
        end = suffix.find("\n", end + 1)
        if end < 0:
            break
    suffix = suffix if end < 0 else suffix[: end + 1]
    return CompletionContext(
        prefix=prefix, suffix=suffix, language=language, path=path, document=document
    )
