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
    # What was shown: "lines", the whole lines; "gate", fewer, the longest run the gate
    # accepts with nothing left open at the cut; "nothing", no run was (remote answers).
    kept: str = "lines"


@attrs.frozen(kw_only=True)
class Latency:
    """Milliseconds per stage of one request; None where the stage did not run."""

    local_first_token: float | None = None
    local_total: float | None = None
    local_rerun: float | None = None  # the local stream finished after a failed escalation
    gate: float | None = None
    remote_first_token: float | None = None
    remote_total: float | None = None
    remote_gate: float | None = None  # the gate on the remote's length-cut text
    total: float | None = None

    def as_dict(self) -> dict[str, float]:
        """The stages that ran, by name (the JSON form: ledger, notification, --json)."""
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}


@attrs.frozen
class Problem:
    """A tier's problem as the user reads it; `error` is the exception when there was one
    (typed for the server's own use)."""

    tier: Tier
    text: str
    error: BackendError | None = None

    @classmethod
    def of(cls, tier: Tier, error: BackendError) -> Problem:
        return cls(tier, str(error), error)


@attrs.frozen(kw_only=True)
class RouteDecision:
    """One completion's decision, built once when the request ends (never edited)."""

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
    latency: Latency = Latency()
    bytes_sent: int = 0  # request bytes that left this machine
    # Cross-file context: (workspace-relative path, bytes, tier) per file that fed a
    # prompt, and the context bytes among `bytes_sent`.
    context_files: tuple[tuple[str, int, str], ...] = ()
    context_bytes_sent: int = 0
    context_sharing: str = ""  # where other files' code may go, in words (settings)
    # The egress gate's verdict on the remote request ("passed", "refused: <why>"); "":
    # the remote tier was not asked.
    egress: str = ""
    load: str = ""  # why the cluster's load kept this request home (cluster-busy), in words
    cache_hit: bool = False
    # A verified escalation (remote.verify_draft): the local draft's tokens the remote
    # model scored, and the leading ones it kept as its own answer.
    draft_tokens: int = 0
    draft_kept: int = 0
    language: str = ""
    path: str = ""
    problems: tuple[Problem, ...] = attrs.field(default=(), eq=False, repr=False)

    @property
    def errors(self) -> list[str]:
        """Backend problems, user-readable ("tier: message")."""
        return [f"{p.tier}: {p.text}" for p in self.problems]

    @property
    def error_kinds(self) -> list[str]:
        """ "tier:ExceptionClass" per problem that was an exception."""
        return [f"{p.tier}:{type(p.error).__name__}" for p in self.problems if p.error]

    @property
    def failures(self) -> list[TierFailure]:
        """The tiers' exceptions, typed (the session's trouble messages read them)."""
        return [TierFailure(p.tier, p.error) for p in self.problems if p.error is not None]

    @property
    def latency_ms(self) -> dict[str, float]:
        return self.latency.as_dict()

    @property
    def syntax_valid(self) -> bool | None:
        if self.syntax is None or self.syntax.status not in ("valid", "invalid"):
            return None
        return self.syntax.status == "valid"

    def to_json(self) -> dict[str, Any]:
        d = attrs.asdict(self, filter=lambda a, _: a.name not in ("problems", "latency"))
        d["latency_ms"] = self.latency_ms
        d["errors"] = self.errors
        d["error_kinds"] = self.error_kinds
        d["syntax_valid"] = self.syntax_valid
        return d
