"""The vocabulary every layer shares, defined once: routes, policies, gate modes,
syntax statuses and the reasons of a routing decision. A leaf module (it imports
nothing of ours), so the router, the settings, the gate and the decision record can
all use it without importing each other."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

Route = Literal["local", "remote", "none"]
Policy = Literal["synconf", "confidence", "syntax", "local", "remote"]
GateMode = Literal["tree-sitter", "compiler", "confirm"]
Semantic = Literal["names", "off"]  # the names gate after a valid syntax verdict
# "skipped": the file is over routing.syntax_max_bytes, the gate did not look.
SyntaxStatus = Literal["valid", "invalid", "timeout", "unsupported-language", "error", "skipped"]


class Reason(StrEnum):
    """Why a request was routed as it was: every branch of the router names one."""

    CONFIDENT_AND_VALID = "confident-and-valid"
    CONFIDENT = "confident"  # policy "confidence": no syntax check
    SYNTAX_VALID = "syntax-valid"  # policy "syntax": no confidence check
    SYNTAX_UNCHECKED = "syntax-unchecked"  # language the gate does not know
    LOW_CONFIDENCE = "low-confidence"
    NO_LOGPROBS = "no-logprobs"
    EMPTY_LOCAL = "empty-local"
    NO_EDIT = "no-edit"  # next edit: the local model is sure the region needs no change
    # Next edit: the local model cannot rewrite a region in time (next_edit.only_in_time)
    LOCAL_TOO_SLOW = "local-too-slow"
    SYNTAX_INVALID = "syntax-invalid"
    SYNTAX_TIMEOUT = "syntax-timeout"
    SYNTAX_SKIPPED = "syntax-skipped"  # file over routing.syntax_max_bytes: not checked
    UNDEFINED_NAME = "undefined-name"  # parses, but uses a name defined nowhere in the file
    POLICY_LOCAL = "policy-local"
    POLICY_REMOTE = "policy-remote"
    LOCAL_UNAVAILABLE = "local-unavailable"
    LOCAL_TIMEOUT = "local-timeout"  # the local tier's budget ran out (local.*_ms)
    REMOTE_OK = "remote-ok"
    # The remote model confirmed the whole local draft token by token (remote.verify_draft)
    VERIFIED_DRAFT = "verified-draft"
    REMOTE_FAILED = "remote-failed"
    REMOTE_FAILED_KEPT_LOCAL = "remote-failed-kept-local"
    REMOTE_EMPTY = "remote-empty"
    NO_REMOTE = "no-remote-configured"
    LOCAL_ONLY = "local-only"
    PRIVACY_BLOCKED = "privacy-blocked"
    KEPT_LOCAL_UNCONFIRMED = "kept-local-unconfirmed"  # wanted to escalate, could not
    CACHE_HIT = "cache-hit"
    # Under load (routing.backpressure, routing.escalation_budget): kept local, or none.
    CLUSTER_BUSY = "cluster-busy"
    ESCALATION_BUDGET = "escalation-budget"


__all__ = ["GateMode", "Policy", "Reason", "Route", "Semantic", "SyntaxStatus"]
