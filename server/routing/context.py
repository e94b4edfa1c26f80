"""Cut the text around the cursor into the prefix and suffix the models see."""

from __future__ import annotations

import bisect

from ..vocab.positions import Text, scrub_surrogates
from .request import Anchor, CompletionContext
from .time_budget import anchor_line


def make_context(
    text: str | Text,
    offset: int,
    *,
    context_lines: int,
    language: str = "",
    path: str = "",
    document: Anchor | None = None,
) -> CompletionContext:
    """Prefix = up to `context_lines` lines before the cursor's line (from a grid line),
    suffix = as many after it; lines as LSP counts them (\\r\\n, \\r, \\n; not U+2028 or form feed).

    Lone surrogates become U+FFFD (one code point each, so nothing moves): the
    window must be encodable to be sent and parsed.
    """
    doc = text if isinstance(text, Text) else Text(text)
    starts, full = doc.starts, doc.text
    line = bisect.bisect_right(starts, offset) - 1  # doc.line_of, one call less
    # The start sits on a coarse line grid, so that it stays put while one types and
    # the local model's KV cache keeps the prompt (`time_budget.anchor_line`).
    first = starts[anchor_line(line, context_lines)]
    last = line + context_lines + 1
    end = starts[last] if last < len(starts) else len(full)
    prefix, suffix = full[first:offset], full[offset:end]
    return CompletionContext(
        prefix=prefix if prefix.isascii() else scrub_surrogates(prefix),
        suffix=suffix if suffix.isascii() else scrub_surrogates(suffix),
        language=language,
        path=path,
        document=document,
    )
