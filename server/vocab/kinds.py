"""The vocabulary every layer shares, defined once: routes, policies, gate modes and
syntax statuses. A leaf module (it imports nothing of ours), so the router, the
settings, the gate and the decision record can all use it without importing each
other."""

from __future__ import annotations

from typing import Literal

Route = Literal["local", "remote", "none"]
Policy = Literal["synconf", "confidence", "syntax", "local", "remote"]
GateMode = Literal["tree-sitter", "compiler", "confirm"]
Semantic = Literal["names", "off"]  # the names gate after a valid syntax verdict
# "skipped": the file is over routing.syntax_max_bytes, the gate did not look.
SyntaxStatus = Literal["valid", "invalid", "timeout", "unsupported-language", "error", "skipped"]

__all__ = ["GateMode", "Policy", "Route", "Semantic", "SyntaxStatus"]
