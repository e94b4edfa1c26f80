"""The decision record every completion produces (hover, diagnostics, ledger, --json)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from synconfroute.clients.errors import BackendError

from .kinds import Policy, Reason, Route
from .verdict import Verdict

Tier = Literal["local", "remote"]


@attrs.frozen
class TierFailure:
    """A backend error as the tier raised it (type and all), for the server's own use."""

    tier: Tier
    error: BackendError


@attrs.frozen
class Truncation:
    """What was dropped from a tier's text that its token budget cut (finish "length")."""

    chars: int  # characters dropped from what would have been shown
    lines: int  # lines (whole or partial) dropped


@attrs.define(kw_only=True)
class RouteDecision:
    completion: str
    route: Route
    reasons: tuple[Reason, ...]
    policy: Policy
    confidence: float | None
    threshold: float
    syntax: Verdict | None
    local_model: str | None
    remote_model: str | None
    local_completion: str = ""  # what the local model wrote (after post-processing)
    local_tokens: int = 0
    local_cancelled_early: bool = False  # stream cut after k unconfident tokens
    # Per tier ("local", "remote"): its text hit max_tokens and was trimmed back to whole
    # lines (and, multi-line, to those the gate accepts) before it was judged or shown.
    truncated: dict[str, Truncation] = attrs.field(factory=dict)
    latency_ms: dict[str, float] = attrs.field(factory=dict)
    bytes_sent: int = 0  # request bytes that left this machine
    # Cross-file context: (workspace-relative path, bytes, tier) per file that fed a
    # prompt, and the context bytes among `bytes_sent`.
    context_files: list[tuple[str, int, str]] = attrs.field(factory=list)
    context_bytes_sent: int = 0
    context_sharing: str = ""  # where other files' code may go, in words (settings)
    cache_hit: bool = False
    errors: list[str] = attrs.field(factory=list)  # backend problems, user-readable
    error_kinds: list[str] = attrs.field(factory=list)  # "tier:ExceptionClass", per error
    language: str = ""
    path: str = ""
    # The errors themselves (not serialized: `errors`/`error_kinds` are their JSON form).
    failures: list[TierFailure] = attrs.field(factory=list, eq=False, repr=False)

    def fail(self, tier: Tier, error: BackendError, text: str | None = None) -> None:
        """Record a tier's error: typed for the server, as text for the user and ledger."""
        self.failures.append(TierFailure(tier, error))
        self.errors.append(f"{tier}: {error if text is None else text}")
        self.error_kinds.append(f"{tier}:{type(error).__name__}")

    @property
    def syntax_valid(self) -> bool | None:
        if self.syntax is None or self.syntax.status not in ("valid", "invalid"):
            return None
        return self.syntax.status == "valid"

    def to_json(self) -> dict[str, Any]:
        d = attrs.asdict(self, filter=lambda a, _: a.name != "failures")
        d["syntax_valid"] = self.syntax_valid
        return d
