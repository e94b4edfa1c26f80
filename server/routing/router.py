"""SynConfRoute as pure functions: (local tokens, syntax verdict, settings) -> decision.

Nothing here does I/O or knows about LSP; every branch returns a named reason
(`Reason`) so the hover card, the ledger and the tests speak the same words.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import attrs

from ..vocab.kinds import Policy, Reason, Route, Semantic, SyntaxStatus

__all__ = ["Policy", "Reason", "Route", "Semantic", "SyntaxStatus"]  # re-exported: the vocabulary


RemoteAccess = Literal["ok", "not-configured", "local-only", "privacy-blocked"]
_BLOCK_REASON: dict[RemoteAccess, Reason] = {
    "not-configured": Reason.NO_REMOTE,
    "local-only": Reason.LOCAL_ONLY,
    "privacy-blocked": Reason.PRIVACY_BLOCKED,
}


def confidence(logprobs: Sequence[float], k: int) -> float | None:
    """Mean log-prob of the first `k` tokens (fewer if the completion is shorter).

    None when there is no token to judge. vLLM clamps -inf to -9999.0; any
    non-finite value counts as that floor so the mean stays a number.
    """
    head = [lp if math.isfinite(lp) else -9999.0 for lp in logprobs[:k]]
    if not head:
        return None
    return sum(head) / len(head)


@attrs.frozen(kw_only=True)
class Rules:
    """The routing settings the decision needs (a projection of RoutingSettings)."""

    policy: Policy
    threshold: float
    k: int
    missing_logprobs: Literal["escalate", "trust"]
    # "names": a syntax-valid completion that uses a name defined nowhere escalates
    # wherever the gate decides (policies synconf and syntax); "off": names are ignored.
    # No defaults of its own: `resolve_rules` builds it from the settings (the evaluation
    # then names its "+names" policies).
    semantic: Semantic


@attrs.frozen(kw_only=True)
class LocalEvidence:
    """What the pipeline learnt from the local tier."""

    available: bool = True  # False: backend down or failed
    text: str = ""
    logprobs: Sequence[float] = ()
    has_logprobs: bool = True  # False: the server reported none
    syntax: SyntaxStatus | None = None  # None: not checked (yet)
    undefined: tuple[str, ...] = ()  # names the completion uses that nothing defines
    timed_out: bool = False  # unavailable because its time budget ran out


@attrs.frozen
class Ruling:
    """The router's ruling before any remote call: keep local, escalate, or nothing
    (named apart from the syntax gate's `Verdict`)."""

    action: Literal["keep-local", "escalate", "none"]
    reasons: tuple[Reason, ...]
    confidence: float | None = None


def is_confident(ev: LocalEvidence, rules: Rules) -> tuple[bool, float | None, Reason | None]:
    """(confident?, confidence, reason when not) for the local completion."""
    if not ev.has_logprobs:
        ok = rules.missing_logprobs == "trust"
        return ok, None, None if ok else Reason.NO_LOGPROBS
    conf = confidence(ev.logprobs, rules.k)
    if conf is None:
        return False, None, Reason.EMPTY_LOCAL
    if conf < rules.threshold:
        return False, conf, Reason.LOW_CONFIDENCE
    return True, conf, None


def early_escalation(logprobs: Sequence[float], rules: Rules) -> bool:
    """True once k tokens are in and their confidence already says 'escalate'.

    Only policies that escalate on confidence cut the local stream early; the
    others need the whole local completion anyway.
    """
    if rules.policy not in ("synconf", "confidence") or len(logprobs) < rules.k:
        return False
    conf = confidence(logprobs, rules.k)
    return conf is not None and conf < rules.threshold


def needs_syntax(ev: LocalEvidence, rules: Rules, access: RemoteAccess = "ok") -> bool:
    """Whether the verdict depends on the syntax gate (so the pipeline runs it)."""
    if not ev.available or not ev.text or rules.policy == "local":
        return False
    if rules.policy == "syntax" or access != "ok":
        # With escalation blocked, the gate decides whether the local text is shown.
        return True
    if rules.policy == "synconf":
        return is_confident(ev, rules)[0]
    return False


def decide(ev: LocalEvidence, rules: Rules, access: RemoteAccess) -> Ruling:
    """The SynConfRoute decision for one request, before any remote call."""
    want, reasons, conf = _want(ev, rules)
    if want == "keep-local":
        return Ruling("keep-local", reasons, conf)
    if access == "ok":
        return Ruling("escalate", reasons, conf)
    blocked = (*reasons, _BLOCK_REASON[access])
    # Escalation is impossible: show the local completion unless it breaks the
    # file (or there is none); say that nobody confirmed it. An undefined name does
    # not break the file (and the name may come from where we cannot see): shown.
    if ev.available and ev.text and ev.syntax != "invalid":
        return Ruling("keep-local", (*blocked, Reason.KEPT_LOCAL_UNCONFIRMED), conf)
    return Ruling("none", blocked, conf)


def _want(
    ev: LocalEvidence, rules: Rules
) -> tuple[Literal["keep-local", "escalate"], tuple[Reason, ...], float | None]:
    if not ev.available:
        return (
            "escalate",
            (Reason.LOCAL_TIMEOUT if ev.timed_out else Reason.LOCAL_UNAVAILABLE,),
            None,
        )
    if rules.policy == "remote":
        return "escalate", (Reason.POLICY_REMOTE,), None
    ok, conf, why = is_confident(ev, rules)
    if not ev.text:
        return "escalate", (Reason.EMPTY_LOCAL,), conf
    if rules.policy == "local":
        return "keep-local", (Reason.POLICY_LOCAL,), conf
    if rules.policy in ("synconf", "confidence") and not ok:
        assert why is not None
        return "escalate", (why,), conf
    if rules.policy == "confidence":
        return "keep-local", (Reason.CONFIDENT,), conf
    # synconf (confident by now) and syntax: the gate decides.
    if ev.syntax == "invalid":
        return "escalate", (Reason.SYNTAX_INVALID,), conf
    if ev.syntax == "timeout":
        return "escalate", (Reason.SYNTAX_TIMEOUT,), conf
    if ev.syntax == "skipped":
        # Unchecked is not valid (the gate could run, we chose not to): as a timeout.
        return "escalate", (Reason.SYNTAX_SKIPPED,), conf
    if ev.syntax == "valid" and ev.undefined and rules.semantic == "names":
        return "escalate", (Reason.UNDEFINED_NAME,), conf
    if ev.syntax in ("unsupported-language", "error", None):
        return "keep-local", (Reason.SYNTAX_UNCHECKED,), conf
    good = Reason.CONFIDENT_AND_VALID if rules.policy == "synconf" else Reason.SYNTAX_VALID
    return "keep-local", (good,), conf


@attrs.frozen
class Final:
    route: Route
    reasons: tuple[Reason, ...]


def after_remote(
    verdict: Ruling,
    ev: LocalEvidence,
    *,
    remote_ok: bool,
    remote_text: str,
    held: Reason | None = None,
    verified: bool = False,
) -> Final:
    """The route once the escalated request came back (or failed), or was `held` home
    under load (cluster-busy, escalation-budget): a valid local answer stays, else none."""
    if held is not None:
        keep = ev.available and bool(ev.text) and ev.syntax == "valid"
        return Final("local" if keep else "none", (*verdict.reasons, held))
    if remote_ok and remote_text:
        done = (Reason.REMOTE_OK, Reason.VERIFIED_DRAFT) if verified else (Reason.REMOTE_OK,)
        return Final("remote", (*verdict.reasons, *done))
    failed = Reason.REMOTE_FAILED if not remote_ok else Reason.REMOTE_EMPTY
    # The local answer is still worth showing if it passed the gate: a remote
    # outage must not take completions away from users whose code is fine.
    if ev.available and ev.text and ev.syntax == "valid":
        return Final("local", (*verdict.reasons, failed, Reason.REMOTE_FAILED_KEPT_LOCAL))
    return Final("none", (*verdict.reasons, failed))
