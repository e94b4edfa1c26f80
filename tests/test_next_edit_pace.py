"""`next_edit.only_in_time`'s judge (routing/next_edit/pace.py): whether the local model
can rewrite a region within `next_edit.local_ms`, from its measured rates and from how
its last rewrites ended."""

from __future__ import annotations

from synconfroute.clients._speed import EMBEDDED_PRIOR, Rates
from synconfroute.server.routing.next_edit.pace import RETRY_S, WINDOW, Pace, rewrite_s


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_the_estimate_needs_measured_rates() -> None:
    assert rewrite_s(None, 3500, 350) is None
    assert rewrite_s(Rates(), 3500, 350) is None
    # The embedded backend's assumed rates (no sample yet) judge nothing.
    assert EMBEDDED_PRIOR.samples == 0 and rewrite_s(EMBEDDED_PRIOR, 3500, 350) is None
    # 1,000 prompt tokens at 500 tok/s, (100 + 16) tokens at 58 tok/s: 2 s + 2 s.
    got = rewrite_s(Rates(prompt_tps=500.0, decode_tps=58.0, samples=3), 3500, 350)
    assert got is not None and abs(got - 4.0) < 1e-9


def test_measured_rates_too_slow_for_the_budget_turn_next_edits_off() -> None:
    pace = Pace(Clock())
    slow = Rates(prompt_tps=500.0, decode_tps=58.0, samples=3)  # 4 s a rewrite
    why = pace.too_slow(slow, 3500, 350, budget_ms=3000)
    assert why is not None and "4.0 s" in why and "next_edit.local_ms = 3000" in why
    assert pace.too_slow(slow, 3500, 350, budget_ms=5000) is None
    assert pace.too_slow(slow, 350, 35, budget_ms=3000) is None  # a small region fits
    # A request that cannot escalate has the whole deadline.
    why = pace.too_slow(slow, 3500, 350, 3000, "next_edit.deadline_ms")
    assert why is not None and "next_edit.deadline_ms = 3000" in why


def test_late_rewrites_in_a_row_turn_next_edits_off_until_one_is_retried() -> None:
    clock = Clock()
    pace = Pace(clock)
    for _ in range(WINDOW - 1):
        pace.observed(late=True)
        assert pace.too_slow(None, 3500, 350, 300) is None  # not yet WINDOW in a row
    pace.observed(late=False)  # one in time breaks the run
    for _ in range(WINDOW - 1):
        pace.observed(late=True)
    assert pace.too_slow(None, 3500, 350, 300) is None
    pace.observed(late=True)  # WINDOW late in a row
    why = pace.too_slow(None, 3500, 350, 300)
    assert why is not None and f"last {WINDOW} rewrites" in why
    clock.t += RETRY_S - 1
    assert pace.too_slow(None, 3500, 350, 300) is not None  # still off
    clock.t += 2
    assert pace.too_slow(None, 3500, 350, 300) is None  # one request measures again
    pace.observed(late=True)  # late again: off for another RETRY_S
    assert pace.too_slow(None, 3500, 350, 300) is not None
    clock.t += RETRY_S + 1
    assert pace.too_slow(None, 3500, 350, 300) is None
    pace.observed(late=False)  # in time: on again
    assert pace.too_slow(None, 3500, 350, 300) is None
