"""The garbage collector while serving: passes moved to just after a response, under
CPython's own rule, and everything as it was once serving ends."""

from __future__ import annotations

import gc
import weakref

from synconfroute.server.protocol import collector


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a  # freed only by the cyclic collector
    return weakref.ref(a)


def test_serving_raises_the_threshold_freezes_startup_and_restores_both() -> None:
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with collector.serving():
        assert gc.get_threshold() == (collector.BACKSTOP, *before[1:])
        assert gc.get_freeze_count() > frozen  # what existed is frozen
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen


def test_a_pass_that_is_due_runs_after_the_response_and_frees_cycles() -> None:
    if not gc.isenabled():  # (a test runner may run without it)
        return
    with collector.serving():
        young = gc.get_threshold()[0]
        assert young == collector.BACKSTOP
        gc.collect()
        refs = [_cycle() for _ in range(600)]  # 1,200 new objects: past CPython's 700
        assert gc.get_count()[0] > 700
        assert any(r() is not None for r in refs)  # no automatic pass took them
        collector.after_response()
        assert all(r() is None for r in refs)  # the young pass freed every cycle
        assert gc.get_count()[0] < 700


def test_no_pass_when_none_is_due() -> None:
    with collector.serving():
        gc.collect()
        ref = _cycle()  # 2 objects: far from any threshold
        collector.after_response()
        assert ref() is not None  # left for a pass that is due
    gc.collect()
    assert ref() is None
