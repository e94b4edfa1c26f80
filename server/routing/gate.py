"""The syntax gate as the pipeline uses it: settings in, `SyntaxInfo` out."""

from __future__ import annotations

from ..settings.config import RoutingSettings
from ..syntax import Verdict, check_completion, detect_language
from ..syntax.verdict import Mode
from ..vocab.kinds import Semantic
from ..vocab.record import SyntaxInfo
from .request import Anchor, CompletionContext


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
    """Checks completions in the configured mode and time budget, in files up to
    `max_bytes` (0: any size); with `semantic` "names", a valid completion is also checked
    for names defined nowhere (same budget)."""

    def __init__(
        self,
        mode: Mode,
        ts_budget_s: float,
        compiler_budget_s: float,
        max_bytes: int = 0,
        semantic: Semantic = "names",
    ) -> None:
        self.mode: Mode = mode
        self.budget_s = ts_budget_s if mode == "tree-sitter" else compiler_budget_s
        self.max_bytes = max_bytes
        self.names = semantic == "names"

    def _skipped(self, size: int) -> SyntaxInfo | None:
        """The verdict for a file too large to check (None: check it)."""
        if not self.max_bytes or size <= self.max_bytes:
            return None
        return SyntaxInfo(
            status="skipped",
            mode=self.mode,
            message=f"not checked: the file has {size:,} bytes, over "
            f"routing.syntax_max_bytes = {self.max_bytes:,}",
            checker="none",
        )

    @property
    def blocking(self) -> bool:
        return self.mode != "tree-sitter"

    def check(self, ctx: CompletionContext, completion: str) -> SyntaxInfo:
        if isinstance(ctx.document, Anchor):
            doc, at = ctx.document.document, ctx.document.at
            if (skipped := self._skipped(len(doc.data))) is not None:
                doc.release_tree()  # the file may have grown past the limit since its parse
                return skipped
            v = doc.check(completion, at, mode=self.mode, budget_s=self.budget_s, names=self.names)
            return _info(v)
        size = sum(len(t.encode("utf-8", "surrogatepass")) for t in (ctx.prefix, ctx.suffix))
        if (skipped := self._skipped(size)) is not None:
            return skipped
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
        routing.syntax_max_bytes,
        routing.semantic,
    )
