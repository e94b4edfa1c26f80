"""The load controller, clock-free: the bar rises under congestion and comes back down;
the escalation budget holds over its window and keeps room for the likeliest helps."""

from __future__ import annotations

import random

import pytest

from synconfroute.server.routing.backpressure import Backpressure, EscalationBudget, Limits


def test_slow_first_tokens_raise_the_bar_and_recovery_lowers_it() -> None:
    bp = Backpressure(Limits(ttft_target_s=0.5, step=0.25, max_lift=1.0, recover_s=10))
    t = 0.0
    for _ in range(3):
        bp.answered(t, 0.2)
        t += 1
    assert bp.pressure(t).state == "ok" and bp.pressure(t).lift == 0.0
    for _ in range(10):
        bp.answered(t, 2.0)
        t += 1
    p = bp.pressure(t)
    # capped at max_lift, then 1 s of decay since the last signal
    assert p.state == "slow" and p.lift == pytest.approx(0.5 ** (1 / 10), abs=1e-3)
    assert "first token" in p.why and p.can_escalate(t)
    # The cluster recovers: fast answers, and time, bring the lift back to 0.
    for _ in range(5):
        bp.answered(t, 0.1)
        t += 5
    assert bp.pressure(t).lift < 0.5
    t += 60
    p = bp.pressure(t)
    assert p.lift == 0.0 and p.state == "ok"


def test_429_with_retry_after_holds_escalation_then_releases() -> None:
    bp = Backpressure(Limits(step=0.25, recover_s=10))
    bp.refused(100.0, 429, 7.0)
    p = bp.pressure(101.0)
    assert p.state == "shedding" and not p.can_escalate(101.0) and p.can_escalate(107.0)
    assert "429" in p.why and p.lift == pytest.approx(0.25 * 0.5 ** (1 / 10), abs=1e-3)
    assert bp.pressure(200.0).state == "ok"


def test_503_without_retry_after_and_connection_loss_hold_a_default_time() -> None:
    bp = Backpressure(Limits(default_retry_s=5))
    bp.refused(0.0, 503, None)
    assert not bp.pressure(4.9).can_escalate(4.9) and bp.pressure(5.0).can_escalate(5.0)
    bp.unreachable(10.0)
    assert bp.pressure(11.0).state == "down" and not bp.pressure(11.0).can_escalate(11.0)


def test_a_timeout_with_less_time_than_the_target_says_nothing() -> None:
    # A hung local tier left the escalation 0.1 s: its timeout is no sign of load.
    bp = Backpressure(Limits(ttft_target_s=0.5))
    bp.unreachable(0.0, waited_s=0.1, given_s=0.1)
    p = bp.pressure(0.5)
    assert p.state == "ok" and p.lift == 0.0 and p.ttft_s is None
    bp.unreachable(1.0, waited_s=2.0, given_s=2.0)  # the whole target and more: it counts
    assert bp.pressure(1.5).state == "down"


@pytest.mark.parametrize("share", [0.1, 0.3, 0.5])
def test_the_budget_holds_over_every_window(share: float) -> None:
    """Every candidate wants to escalate; over any trailing window at most share (+1) do."""
    rng = random.Random(1)
    b = EscalationBudget(share, window_s=60)
    events: list[tuple[float, bool]] = []
    t = 0.0
    for _ in range(3000):
        t += rng.expovariate(2.0)  # ~2 completions a second
        conf = rng.uniform(-3, 0)
        invalid = rng.random() < 0.1
        ok = b.allow(t, conf, invalid)
        b.record(t, conf, ok)
        events.append((t, ok))
    # Whenever one goes out, the trailing minute (what the client can know) holds the cap.
    # (Between escalations the share can drift up as older, unescalated completions leave
    # the window: that is not an escalation over budget.)
    for i, (end, went) in enumerate(events):
        if not went:
            continue
        window = [e for (ts, e) in events[: i + 1] if ts > end - 60]
        assert sum(window) <= share * len(window) + 1, (end, sum(window), len(window))
    total = sum(e for _, e in events) / len(events)
    assert share * 0.8 <= total <= share + 0.01


def test_near_the_cap_only_the_likeliest_helps_go_out() -> None:
    b = EscalationBudget(0.2, window_s=1000)
    t = 0.0
    for i in range(100):  # fill the window: 20 % escalated, confidences -2..0
        conf = -2 + 2 * (i % 10) / 10
        b.record(t, conf, escalated=i % 5 == 0)
        t += 1
    assert b.used(t) == pytest.approx(0.2)
    assert not b.allow(t, -0.6, syntax_invalid=False)  # ordinary low confidence: wait
    assert b.allow(t, -0.1, syntax_invalid=True)  # the gate caught it: goes out
    assert b.allow(t, -1.9, syntax_invalid=False)  # among the lowest 20 %: goes out


def test_budget_share_is_checked() -> None:
    with pytest.raises(ValueError, match=r"within 0\.\.1"):
        EscalationBudget(1.5)


def test_a_request_that_cannot_start_in_time_does_not_queue() -> None:
    bp = Backpressure(Limits(ttft_target_s=0.5))
    for i in range(5):
        bp.answered(float(i), 3.0)  # the cluster takes 3 s to a first token
    p = bp.pressure(5.0)
    assert p.can_escalate(5.0)  # no deadline given: nothing holds it
    # It must start in the first half of the time left, to be written in the second.
    assert not p.can_escalate(5.0, deadline=10.0)  # 5 s left: 3 s to a first token
    assert p.can_escalate(5.0, deadline=12.0)


def test_failures_in_a_row_double_the_hold_and_an_answer_resets_it() -> None:
    bp = Backpressure(Limits(default_retry_s=5, max_hold_s=30))
    holds = []
    t = 0.0
    for _ in range(5):
        bp.unreachable(t)
        holds.append(bp.pressure(t).hold_until - t)
        t = bp.pressure(t).hold_until
    assert holds == [5, 10, 20, 30, 30]
    bp.answered(t, 0.1)
    bp.unreachable(t + 1)
    assert bp.pressure(t + 1).hold_until == t + 1 + 5
