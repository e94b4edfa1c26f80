"""The decision record every completion produces (hover, diagnostics, ledger, --json)."""

from __future__ import annotations

from typing import Any

import attrs

from .router import Route


@attrs.frozen
class SyntaxInfo:
    status: str  # valid | invalid | timeout | unsupported-language | error
    mode: str
    line: int | None = None  # 0-based, in the completed file
    column: int | None = None
    message: str = ""
    checker: str = ""
    # names gate: the names the completion uses that nothing in the file defines
    undefined: tuple[str, ...] = ()


@attrs.define(kw_only=True)
class RouteDecision:
    completion: str
    route: Route
    reasons: list[str]
    policy: str
    confidence: float | None
    threshold: float
    syntax: SyntaxInfo | None
    local_model: str | None
    remote_model: str | None
    local_completion: str = ""  # what the local model wrote (after post-processing)
    local_tokens: int = 0
    local_cancelled_early: bool = False  # stream cut after k unconfident tokens
    latency_ms: dict[str, float] = attrs.field(factory=dict)
    bytes_sent: int = 0  # request bytes that left this machine
    cache_hit: bool = False
    errors: list[str] = attrs.field(factory=list)  # backend problems, user-readable
    error_kinds: list[str] = attrs.field(factory=list)  # "tier:ExceptionClass", per error
    language: str = ""
    path: str = ""

    @property
    def syntax_valid(self) -> bool | None:
        if self.syntax is None or self.syntax.status not in ("valid", "invalid"):
            return None
        return self.syntax.status == "valid"

    def to_json(self) -> dict[str, Any]:
        d = attrs.asdict(self)
        d["syntax_valid"] = self.syntax_valid
        return d
