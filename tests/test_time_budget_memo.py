"""The local budget is computed once per (settings, measured rates): a request asks for
it every time, and between two measurements nothing it depends on changes (settings
are never mutated; a backend's `Rates` is a new value with each measurement).

Fails on bf1b0db: every call built a new budget (and its log line).
"""

from __future__ import annotations

import attrs

from synconfroute.clients._speed import Rates
from synconfroute.server.routing.time_budget import local_budget
from synconfroute.server.settings.config import Settings


def test_the_same_settings_and_rates_give_the_same_budget_unbuilt() -> None:
    s = Settings()
    rates = Rates(prompt_tps=200.0, decode_tps=30.0)
    first = local_budget(s.local, s.completion, rates)
    assert local_budget(s.local, s.completion, rates) is first


def test_a_new_measurement_or_new_settings_give_a_new_budget() -> None:
    s = Settings()
    slow = local_budget(s.local, s.completion, Rates(prompt_tps=100.0, decode_tps=5.0))
    fast = local_budget(s.local, s.completion, Rates(prompt_tps=2000.0, decode_tps=80.0))
    assert fast.prompt_chars > slow.prompt_chars and fast.multiline and not slow.multiline
    # Equal values in a new object (settings reloaded): computed again, the same answer.
    again = local_budget(s.local, s.completion, Rates(prompt_tps=2000.0, decode_tps=80.0))
    assert again == fast
    capped = attrs.evolve(s.local, max_prompt_chars=1000)
    assert local_budget(capped, s.completion, None).prompt_chars == 1000
    assert local_budget(s.local, s.completion, None).prompt_chars == s.local.max_prompt_chars
    unmeasured = local_budget(s.local, s.completion, None)
    assert local_budget(s.local, s.completion, None) is unmeasured
