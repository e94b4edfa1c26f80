"""Cut the text around the cursor into the prefix and suffix the models see."""

from __future__ import annotations

import re

from .pipeline import CompletionContext
from .positions import Text, scrub_surrogates

_BREAK = re.compile(r"\r\n|\r|\n")


def make_context(
    text: str | Text,
    offset: int,
    *,
    context_lines: int,
    language: str = "",
    path: str = "",
    document: object | None = None,
) -> CompletionContext:
    """Prefix = up to `context_lines` lines before the cursor's line, suffix = as many
    after it; lines as LSP counts them (\\r\\n, \\r, \\n; not U+2028 or form feed).

    Lone surrogates become U+FFFD (one code point each, so nothing moves): the
    window must be encodable to be sent and parsed.
    """
    doc = text if isinstance(text, Text) else Text(text)
    starts, full = doc.starts, doc.text
    line = doc.line_of(offset)
    first = starts[max(0, line - context_lines)]
    last = line + context_lines + 1
    end = starts[last] if last < len(starts) else len(full)
    return CompletionContext(
        prefix=scrub_surrogates(full[first:offset]),
        suffix=scrub_surrogates(full[offset:end]),
        language=language,
        path=path,
        document=document,
    )


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
            m = _BREAK.search(prefix, start)
            if m is not None and _line_start(prefix, m.end()):
                start = m.end() if m.end() <= start + keep_prefix // 2 else start
        prefix = prefix[start:]
    if keep_suffix < len(suffix):
        end = keep_suffix
        if not _line_start(suffix, end):
            lo = end - keep_suffix // 2
            ends = [m.end() for m in _BREAK.finditer(suffix, lo, end)]
            ends = [e for e in ends if _line_start(suffix, e)]
            end = ends[-1] if ends else end
        suffix = suffix[:end]
    return prefix, suffix


def _line_start(s: str, i: int) -> bool:
    """Whether offset `i` of `s` starts a line (not inside a \r\n)."""
    if i <= 0 or i >= len(s):
        return True
    return s[i - 1] == "\n" or (s[i - 1] == "\r" and s[i] != "\n")
