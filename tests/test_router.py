"""Every row of the decision table, as plain function calls."""

from __future__ import annotations

import math
from typing import Any

import attrs
import pytest

from synconfroute.server.routing.router import (
    LocalEvidence,
    Reason,
    Rules,
    Ruling,
    after_remote,
    confidence,
    decide,
    early_escalation,
    needs_syntax,
)
from synconfroute.server.routing.rules import resolve_rules
from synconfroute.server.settings.config import Settings

R = Reason
HIGH = (-0.1, -0.2, -0.05, -3.0)  # mean of first 3 = -0.1167
LOW = (-2.0, -1.0, -0.5, -0.0)  # mean of first 3 = -1.1667


def _rules(**kw: Any) -> Rules:
    """The server's rules at the default settings (`resolve_rules`), `kw` changed; the
    names gate off unless asked."""
    return attrs.evolve(resolve_rules(Settings(), ""), **{"semantic": "off", **kw})


def ev(
    text: str = "x + 1", lps: tuple[float, ...] = HIGH, syntax: str | None = "valid", **kw: object
) -> LocalEvidence:
    return LocalEvidence(text=text, logprobs=lps, syntax=syntax, **kw)  # type: ignore[arg-type]


def test_confidence_is_mean_of_first_k() -> None:
    assert confidence(HIGH, 3) == pytest.approx((-0.1 - 0.2 - 0.05) / 3)
    assert confidence((-1.0,), 3) == -1.0  # shorter than k: mean of what there is
    assert confidence((), 3) is None
    assert confidence((-math.inf, 0.0), 2) == pytest.approx(-9999.0 / 2)
    assert confidence((math.nan,), 1) == -9999.0


@pytest.mark.parametrize(
    ("policy", "evidence", "action", "reasons"),
    [
        # synconf: both conditions
        ("synconf", ev(), "keep-local", (R.CONFIDENT_AND_VALID,)),
        ("synconf", ev(syntax="invalid"), "escalate", (R.SYNTAX_INVALID,)),
        ("synconf", ev(syntax="timeout"), "escalate", (R.SYNTAX_TIMEOUT,)),
        ("synconf", ev(syntax="skipped"), "escalate", (R.SYNTAX_SKIPPED,)),
        ("synconf", ev(syntax="unsupported-language"), "keep-local", (R.SYNTAX_UNCHECKED,)),
        ("synconf", ev(syntax="error"), "keep-local", (R.SYNTAX_UNCHECKED,)),
        ("synconf", ev(lps=LOW), "escalate", (R.LOW_CONFIDENCE,)),
        ("synconf", ev(lps=LOW, syntax="invalid"), "escalate", (R.LOW_CONFIDENCE,)),
        ("synconf", ev(text="", lps=()), "escalate", (R.EMPTY_LOCAL,)),
        ("synconf", ev(available=False, text="", lps=()), "escalate", (R.LOCAL_UNAVAILABLE,)),
        ("synconf", ev(lps=(), has_logprobs=False), "escalate", (R.NO_LOGPROBS,)),
        # confidence only
        ("confidence", ev(syntax="invalid"), "keep-local", (R.CONFIDENT,)),
        ("confidence", ev(lps=LOW), "escalate", (R.LOW_CONFIDENCE,)),
        # syntax only
        ("syntax", ev(lps=LOW), "keep-local", (R.SYNTAX_VALID,)),
        ("syntax", ev(lps=LOW, syntax="invalid"), "escalate", (R.SYNTAX_INVALID,)),
        ("syntax", ev(lps=LOW, syntax="skipped"), "escalate", (R.SYNTAX_SKIPPED,)),
        # fixed policies
        ("local", ev(lps=LOW, syntax="invalid"), "keep-local", (R.POLICY_LOCAL,)),
        ("remote", ev(), "escalate", (R.POLICY_REMOTE,)),
        ("remote", ev(available=False, text=""), "escalate", (R.LOCAL_UNAVAILABLE,)),
    ],
)
def test_decision_table(
    policy: str, evidence: LocalEvidence, action: str, reasons: tuple[Reason, ...]
) -> None:
    v = decide(evidence, _rules(policy=policy), "ok")  # type: ignore[arg-type]
    assert (v.action, v.reasons) == (action, reasons)


def test_missing_logprobs_trust_setting() -> None:
    v = decide(ev(lps=(), has_logprobs=False), _rules(missing_logprobs="trust"), "ok")
    assert v == Ruling("keep-local", (R.CONFIDENT_AND_VALID,), None)


def test_threshold_boundary_is_inclusive() -> None:
    assert decide(ev(lps=(-0.5, -0.5, -0.5)), _rules(threshold=-0.5), "ok").action == "keep-local"
    assert decide(ev(lps=(-0.5, -0.5, -0.51)), _rules(threshold=-0.5), "ok").action == "escalate"


def test_k_changes_the_window() -> None:
    lps = (-0.1, -0.1, -0.1, -5.0)
    assert decide(ev(lps=lps), _rules(k=3), "ok").action == "keep-local"
    assert decide(ev(lps=lps), _rules(k=4), "ok").action == "escalate"


@pytest.mark.parametrize(
    ("access", "block"),
    [
        ("not-configured", R.NO_REMOTE),
        ("local-only", R.LOCAL_ONLY),
        ("privacy-blocked", R.PRIVACY_BLOCKED),
    ],
)
def test_blocked_escalation_keeps_valid_local_unconfirmed(access: str, block: Reason) -> None:
    v = decide(ev(lps=LOW), _rules(), access)  # type: ignore[arg-type]
    assert v.action == "keep-local"
    assert v.reasons == (R.LOW_CONFIDENCE, block, R.KEPT_LOCAL_UNCONFIRMED)


def test_blocked_escalation_never_shows_invalid_code() -> None:
    v = decide(ev(syntax="invalid"), _rules(), "privacy-blocked")
    assert (v.action, v.reasons) == ("none", (R.SYNTAX_INVALID, R.PRIVACY_BLOCKED))


def test_blocked_escalation_with_local_down_is_none() -> None:
    v = decide(ev(available=False, text=""), _rules(), "not-configured")
    assert (v.action, v.reasons) == ("none", (R.LOCAL_UNAVAILABLE, R.NO_REMOTE))


def test_after_remote_rows() -> None:
    esc = Ruling("escalate", (R.LOW_CONFIDENCE,), -1.2)
    ok = after_remote(esc, ev(lps=LOW), remote_ok=True, remote_text="y")
    assert (ok.route, ok.reasons) == ("remote", (R.LOW_CONFIDENCE, R.REMOTE_OK))
    kept = after_remote(esc, ev(lps=LOW, syntax="valid"), remote_ok=False, remote_text="")
    assert (kept.route, kept.reasons) == (
        "local",
        (R.LOW_CONFIDENCE, R.REMOTE_FAILED, R.REMOTE_FAILED_KEPT_LOCAL),
    )
    bad = after_remote(esc, ev(syntax="invalid"), remote_ok=False, remote_text="")
    assert (bad.route, bad.reasons) == ("none", (R.LOW_CONFIDENCE, R.REMOTE_FAILED))
    unchecked = after_remote(esc, ev(syntax=None), remote_ok=False, remote_text="")
    assert unchecked.route == "none"  # nobody vouched for the local text
    empty = after_remote(esc, ev(), remote_ok=True, remote_text="")
    assert empty.route == "local" and R.REMOTE_EMPTY in empty.reasons


def test_early_escalation() -> None:
    assert not early_escalation((-3.0, -3.0), _rules())  # fewer than k tokens: wait
    assert early_escalation((-3.0, -3.0, -3.0), _rules())
    assert not early_escalation((-0.1, -0.1, -0.1), _rules())
    assert not early_escalation((-3.0, -3.0, -3.0), _rules(policy="syntax"))
    assert not early_escalation((-3.0, -3.0, -3.0), _rules(policy="local"))


def test_needs_syntax() -> None:
    assert needs_syntax(ev(syntax=None), _rules())
    assert not needs_syntax(ev(lps=LOW, syntax=None), _rules())  # escalates anyway
    assert needs_syntax(ev(lps=LOW, syntax=None), _rules(policy="syntax"))
    assert not needs_syntax(ev(syntax=None), _rules(policy="confidence"))
    assert not needs_syntax(ev(text="", syntax=None), _rules())
    assert needs_syntax(ev(lps=LOW, syntax=None), _rules(), "local-only")  # gate decides display
    assert not needs_syntax(ev(syntax=None), _rules(policy="local"), "local-only")


def test_a_skipped_gate_is_not_a_valid_one() -> None:
    # A file too large for the gate: unchecked is not valid. Escalate where allowed; where
    # not, show it unconfirmed (as any completion nobody could check); after a failed
    # escalation, show nothing (as after a timeout).
    skipped = ev(syntax="skipped")
    blocked = decide(skipped, _rules(), "local-only")
    assert blocked == Ruling(
        "keep-local", (R.SYNTAX_SKIPPED, R.LOCAL_ONLY, R.KEPT_LOCAL_UNCONFIRMED), blocked.confidence
    )
    v = decide(skipped, _rules(), "ok")
    assert after_remote(v, skipped, remote_ok=False, remote_text="").route == "none"
