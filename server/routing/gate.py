"""The syntax gate as the pipeline uses it: settings in, `Verdict` out."""

from __future__ import annotations

from ..settings.config import RoutingSettings
from ..syntax import Verdict, check_completion, detect_language
from ..syntax.verdict import Mode
from ..vocab.kinds import Semantic
from .request import Anchor, CompletionContext


def language_of(path: str, language_id: str | None = None) -> str:
    return detect_language(language_id, path) or ""


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

    def _skipped(self, size: int, language: str | None) -> Verdict | None:
        """The verdict for a file too large to check (None: check it)."""
        if not self.max_bytes or size <= self.max_bytes:
            return None
        return Verdict(
            valid=False,
            status="skipped",
            mode=self.mode,
            language=language,
            message=f"not checked: the file has {size:,} bytes, over "
            f"routing.syntax_max_bytes = {self.max_bytes:,}",
            checker="none",
        )

    @property
    def blocking(self) -> bool:
        return self.mode != "tree-sitter"

    def prepare(self, ctx: CompletionContext) -> None:
        """The document's share of a check at the cursor worked out now (its tree, error
        sites, the cursor's surroundings: `SyntaxDocument.prepare`), kept for its current
        text only. Only where checks run on the event loop (a blocking gate checks a copy
        in a thread), for a document the gate would check (not over `max_bytes`)."""
        if self.blocking or not isinstance(ctx.document, Anchor):
            return
        doc = ctx.document.document
        if self.max_bytes and len(doc.data) > self.max_bytes:
            return
        doc.prepare(ctx.document.at)

    def state(self, ctx: CompletionContext) -> tuple[int, int] | None:
        """What a check at `ctx`'s cursor reads besides the completion and the settings:
        the version of the document's text (None: `ctx` holds no open document)."""
        if not isinstance(ctx.document, Anchor):
            return None
        doc = ctx.document.document
        return doc.version, doc.source.version

    def timeless(self, verdict: Verdict) -> bool:
        """Whether `verdict` is the check's answer whenever it runs on the same text: a
        decision reached within the time budget (every deadline the check looked at was
        still ahead, so no step was cut short or skipped for time)."""
        return verdict.decided and verdict.elapsed_s < self.budget_s * 0.9

    def check(self, ctx: CompletionContext, completion: str) -> Verdict:
        if isinstance(ctx.document, Anchor):
            doc, at = ctx.document.document, ctx.document.at
            if (skipped := self._skipped(len(doc.data), doc.language)) is not None:
                doc.release_tree()  # the file may have grown past the limit since its parse
                return skipped
            return doc.check(
                completion, at, mode=self.mode, budget_s=self.budget_s, names=self.names
            )
        size = sum(len(t.encode("utf-8", "surrogatepass")) for t in (ctx.prefix, ctx.suffix))
        language = ctx.language or None
        if (skipped := self._skipped(size, language)) is not None:
            return skipped
        return check_completion(
            ctx.prefix,
            completion,
            ctx.suffix,
            language,
            mode=self.mode,
            budget_s=self.budget_s,
            names=self.names,
        )


def make_gate(routing: RoutingSettings) -> SyntaxGate:
    return SyntaxGate(
        routing.syntax,
        routing.syntax_budget_ms / 1000,
        routing.compiler_budget_ms / 1000,
        routing.syntax_max_bytes,
        routing.semantic,
    )
