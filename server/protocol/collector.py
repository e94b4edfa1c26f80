"""The cyclic garbage collector, moved off the request path while serving.

CPython collects its youngest generation (and, every tenth time, an older one) once 700
new container objects are alive, wherever that happens to be: inside a completion, a pass
cost ~1 ms on average here (`bench/lsp_stages.py` counts them: 0.22 passes and 220 µs a
request). While serving, the same passes run right after a response is written, while
the editor shows it, under CPython's own rule (the oldest generation past its threshold
first); the automatic threshold is raised to a backstop for long runs of notifications.
What startup built (modules, classes, the converters) is frozen: no pass walks it again.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

BACKSTOP = 20_000  # new objects before an automatic pass while serving (CPython: 700)


@contextlib.contextmanager
def serving() -> Iterator[None]:
    """Collections between requests (`after_response`) for the duration; the thresholds
    and the frozen objects as they were afterwards (tests serve in their own process)."""
    thresholds = gc.get_threshold()
    gc.freeze()  # (no collection first: it cost 44 ms of start-up to free ~100 objects)
    gc.set_threshold(BACKSTOP, *thresholds[1:])
    global _thresholds
    _thresholds = thresholds
    try:
        yield
    finally:
        _thresholds = None
        gc.set_threshold(*thresholds)
        gc.unfreeze()


_thresholds: tuple[int, ...] | None = None  # CPython's, while `serving`


def after_response() -> None:
    """The pass CPython would have made by now, if any: the oldest generation whose count
    is past its threshold, as its own rule picks it."""
    if _thresholds is None or not gc.isenabled():
        return
    counts = gc.get_count()
    for generation in (2, 1, 0):
        if counts[generation] > _thresholds[generation]:
            gc.collect(generation)
            return


__all__ = ["BACKSTOP", "after_response", "serving"]
