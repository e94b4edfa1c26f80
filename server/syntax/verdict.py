"""The gate's modes and time budgets; its answer, `Verdict`, is shared vocabulary
(vocab/verdict.py: the gate, the decision record and the evaluation all use it)."""

from __future__ import annotations

from ..vocab.kinds import GateMode as Mode
from ..vocab.kinds import SyntaxStatus as Status
from ..vocab.verdict import Verdict

__all__ = ["DEFAULT_BUDGET_S", "MODES", "Mode", "Status", "Verdict"]

MODES: tuple[Mode, ...] = ("tree-sitter", "compiler", "confirm")

# Seconds per check when the caller gives none. tree-sitter answers in well under a
# millisecond on ordinary files; g++ with <bits/stdc++.h> needs about a second (two runs
# when the buffer without the completion must be compiled too).
DEFAULT_BUDGET_S: dict[Mode, float] = {"tree-sitter": 0.05, "compiler": 3.0, "confirm": 3.0}
