"""The local stream's running record and its frozen result hold the same fields: a field
added to one and not the other would be dropped when the run is frozen."""

from __future__ import annotations

import attrs

from synconfroute.clients.errors import BackendError
from synconfroute.server.routing.local_run import _LocalRun
from synconfroute.server.routing.steps import LocalRun


def test_every_field_of_the_running_record_reaches_the_frozen_one() -> None:
    assert [f.name for f in attrs.fields(_LocalRun)] == [f.name for f in attrs.fields(LocalRun)]
    run = _LocalRun(
        text=" x",
        logprobs=[-0.1, -0.2],
        has_logprobs=False,
        cancelled_early=True,
        error=BackendError("gone", backend="local"),
        first_token_s=0.05,
        total_s=0.07,
        timed_out=True,
        finish_reason="length",
        tokens=[" ", "x"],
    )
    frozen = run.frozen()
    for f in attrs.fields(LocalRun):
        want = getattr(run, f.name)
        want = tuple(want) if isinstance(want, list) else want
        assert getattr(frozen, f.name) == want, f.name
