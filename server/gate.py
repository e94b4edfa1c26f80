"""The syntax gate as the pipeline uses it: settings in, `SyntaxInfo` out."""

from __future__ import annotations

import attrs

from .config import RoutingSettings, Semantic
from .pipeline import CompletionContext
from .record import SyntaxInfo
from .syntax import Position, SyntaxDocument, Verdict, check_completion, detect_language
from .syntax.verdict import Mode


@attrs.frozen
class Anchor:
    """Where the cursor is in a whole open document (for incremental checks)."""

    document: SyntaxDocument
    at: Position


def language_of(path: str, language_id: str | None = None) -> str:
    return detect_language(language_id, path) or ""


def _info(v: Verdict) -> SyntaxInfo:
    return SyntaxInfo(
        status=v.status,
        mode=v.mode,
        line=v.line,
        column=v.column,
        message=v.message,
        checker=v.checker,
        undefined=v.undefined,
    )


class SyntaxGate:
    """Checks completions in the configured mode and time budget; with `semantic` "names",
    a valid completion is also checked for names defined nowhere (same budget)."""

    def __init__(
        self,
        mode: Mode,
        ts_budget_s: float,
        compiler_budget_s: float,
        semantic: Semantic = "names",
    ) -> None:
        self.mode: Mode = mode
        self.budget_s = ts_budget_s if mode == "tree-sitter" else compiler_budget_s
        self.names = semantic == "names"

    @property
    def blocking(self) -> bool:
        return self.mode != "tree-sitter"

    def check(self, ctx: CompletionContext, completion: str) -> SyntaxInfo:
        if isinstance(ctx.document, Anchor):
            doc, at = ctx.document.document, ctx.document.at
            v = doc.check(completion, at, mode=self.mode, budget_s=self.budget_s, names=self.names)
            return _info(v)
        language = ctx.language or None
        v = check_completion(
            ctx.prefix,
            completion,
            ctx.suffix,
            language,
            mode=self.mode,
            budget_s=self.budget_s,
            names=self.names,
        )
        return _info(v)


def make_gate(routing: RoutingSettings) -> SyntaxGate:
    return SyntaxGate(
        routing.syntax,
        routing.syntax_budget_ms / 1000,
        routing.compiler_budget_ms / 1000,
        routing.semantic,
    )
