"""`synconfroute complete`: one completion on a file, outside any editor."""

from __future__ import annotations

from pathlib import Path

from ..routing.backends import build_tiers, warm
from ..routing.context import make_context
from ..routing.gate import language_of
from ..routing.pipeline import build_pipeline
from ..routing.request import Anchor, CompletionContext
from ..settings.config import Settings
from ..syntax import SyntaxDocument
from ..vocab.card import route_card
from ..vocab.errors import UsageError
from ..vocab.positions import PositionOutOfRange, Text, line_text
from ..vocab.record import RouteDecision
from ..workspace.files import read_regular

FILE_MAX_BYTES = 64 * 2**20


class CompleteError(UsageError):
    """A problem with the command's input (file, position), worded for the user."""


def prepare(settings: Settings, path: Path, line: int, col: int) -> CompletionContext:
    """Read `path` and cut the context at 0-based (line, col); CompleteError if impossible."""
    try:  # a regular file only: a FIFO would block, a device never end
        text = read_regular(str(path), FILE_MAX_BYTES).decode("utf-8")
    except FileNotFoundError:
        raise CompleteError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CompleteError(f"cannot read {path}: {exc}") from exc
    doc = Text(text, "utf-32")  # columns in code points, lines as LSP counts them
    if line >= len(doc.starts):
        raise CompleteError(
            f"{path}: line {line + 1} is past the end of the file ({len(doc.starts)} lines)"
        )
    try:
        offset = doc.offset(line, col)
    except PositionOutOfRange:
        width = len(line_text(text, doc.starts, line))
        raise CompleteError(
            f"{path}: column {col + 1} is past the end of line {line + 1} ({width} characters)"
        ) from None
    language = language_of(str(path))
    syntax = SyntaxDocument(doc, language or None)  # the gate judges the whole file
    return make_context(
        doc,
        offset,
        context_lines=settings.completion.context_lines,
        language=language,
        path=str(path.resolve()),
        document=Anchor(syntax, (line, col)),
    )


async def run(settings: Settings, ctx: CompletionContext) -> RouteDecision:
    """Build both tiers from settings, run the pipeline once, close the backends."""
    tiers = await build_tiers(settings)
    try:
        await warm(tiers.local)  # a one-shot command: the model's start is not the request's
        pipeline = build_pipeline(settings, tiers)
        return await pipeline.complete(ctx)
    finally:
        await tiers.aclose()


def format_text(rec: RouteDecision) -> str:
    """The completion, then the decision as the hover card tells it (in plain text)."""
    body = rec.completion if rec.completion else "(no completion)"
    return "\n".join([body, "-" * 40, route_card(rec, markdown=False)])
