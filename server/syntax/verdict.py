"""The gate's answer: does this completion introduce a syntax error?"""

from __future__ import annotations

import attrs

from ..vocab.kinds import GateMode as Mode
from ..vocab.kinds import SyntaxStatus as Status

__all__ = ["DEFAULT_BUDGET_S", "MODES", "Mode", "Status", "Verdict"]

MODES: tuple[Mode, ...] = ("tree-sitter", "compiler", "confirm")

# Seconds per check when the caller gives none. tree-sitter answers in well under a
# millisecond on ordinary files; g++ with <bits/stdc++.h> needs about a second (two runs
# when the buffer without the completion must be compiled too).
DEFAULT_BUDGET_S: dict[Mode, float] = {"tree-sitter": 0.05, "compiler": 3.0, "confirm": 3.0}


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
    status: Status
    mode: Mode
    checker: str
    language: str | None
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
        return attrs.evolve(self, elapsed_s=elapsed_s)
