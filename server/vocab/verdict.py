"""The syntax gate's answer: does this completion introduce a syntax error? One type for
the gate, the decision record and the evaluation's run records."""

from __future__ import annotations

from typing import Any

import attrs

from .kinds import GateMode, SyntaxStatus


@attrs.frozen(kw_only=True)
class Verdict:
    """The result of one check.

    `valid` is True only for status "valid". "timeout", "unsupported-language" and "error"
    mean the gate could not decide (see `decided`); the router chooses what to do then.
    `line` and `column` are 0-based, the column in code points, and point into the text
    WITH the completion inserted; None when the verdict has no position.
    `checker` names what decided: "tree-sitter", "python-ast", "javalang", "g++", "gcc",
    or "none".
    """

    valid: bool
    status: SyntaxStatus
    mode: GateMode
    checker: str = ""
    language: str | None = None
    line: int | None = None
    column: int | None = None
    message: str = ""
    elapsed_s: float = 0.0
    detail: str = ""  # how the decision was reached when it is not obvious
    # Names gate (`check(..., names=True)`, a valid verdict only): names the completion
    # uses that nothing in the file defines; `line`/`column` then point at the first.
    undefined: tuple[str, ...] = ()

    @property
    def decided(self) -> bool:
        return self.status in ("valid", "invalid")

    def with_elapsed(self, elapsed_s: float) -> Verdict:
        # Spelled out, not attrs.evolve (which walks the fields): once per gate check.
        return Verdict(
            valid=self.valid,
            status=self.status,
            mode=self.mode,
            checker=self.checker,
            language=self.language,
            line=self.line,
            column=self.column,
            message=self.message,
            elapsed_s=elapsed_s,
            detail=self.detail,
            undefined=self.undefined,
        )

    @classmethod
    def from_json(cls, d: dict[str, Any], *, mode: GateMode) -> Verdict:
        """A verdict as `attrs.asdict` wrote it; older run records hold only some fields
        (status, checker, position, message, time) and name the mode by their key."""
        names = {a.name for a in attrs.fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw.setdefault("mode", mode)
        kw.setdefault("valid", kw.get("status") == "valid")
        kw["undefined"] = tuple(kw.get("undefined", ()))
        return cls(**kw)
