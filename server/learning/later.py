"""Work a request leaves for after its response: a finished stream's close, the ledger's
lines. None of it changes what the editor is sent, and each costs a few hundred µs on a
machine whose caches went cold while the model generated. (Here, in the lowest layer
that leaves such work: the ledger's.)

The language server opens a `Later` for each request it answers (`for_request`, in the
request's own context: the tasks the handler starts share it) and runs it right after
writing the response. Work left where no request is being answered (a notification,
the evaluation, a test driving the pipeline) runs on the next turn of the event loop,
and outside an event loop at once. A `Later` that is not run soon after its first work
(a request that went on after answering) runs by itself after `LATEST_S`. `settle()`
runs everything still waiting (shutdown, tests).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

log = logging.getLogger(__name__)

LATEST_S = 0.05  # the longest work waits for a response before it runs anyway


class Later:
    """One request's work for after its response, in the order it was left."""

    def __init__(self) -> None:
        self._work: list[Callable[[], object]] = []
        self._timer: asyncio.TimerHandle | None = None
        self.done = False

    def add(self, fn: Callable[[], object]) -> None:
        self._work.append(fn)
        _waiting[self] = None
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(LATEST_S, self.run)

    def run(self) -> None:
        """Run the work (once the response is written); later work goes the usual way."""
        self.done = True
        _waiting.pop(self, None)
        if self._timer is not None:
            self._timer.cancel()
        work, self._work = self._work, []
        for fn in work:
            _run(fn)


_request: contextvars.ContextVar[Later | None] = contextvars.ContextVar(
    "synconfroute_later", default=None
)
_waiting: dict[Later, None] = {}  # with work not run yet, oldest first: for `settle`
_closing: set[asyncio.Task[None]] = set()


def for_request() -> Later:
    """A `Later` for the request handled in the current context (the caller runs it after
    writing the response)."""
    later = Later()
    _request.set(later)
    return later


def after_response(fn: Callable[[], object]) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        _run(fn)
        return
    later = _request.get()
    if later is not None and not later.done:
        later.add(fn)
        return
    # No response to wait for: the next turn of the loop. (call_later, not call_soon: a
    # call_soon made in a task comes before the task's own done callback.)
    own = Later()
    own.add(fn)
    loop.call_later(0, own.run)


def close_after_response(stream: AsyncGenerator[Any, None]) -> None:
    """Close a stream that ended (what is left is the end of the HTTP body and the
    backend's own bookkeeping), after the response."""

    def start() -> None:
        task = asyncio.get_running_loop().create_task(_close(stream))
        _closing.add(task)
        task.add_done_callback(_closing.discard)

    after_response(start)


async def _close(stream: AsyncGenerator[Any, None]) -> None:
    try:
        await stream.aclose()
    except Exception as exc:  # the answer is in hand: a failing close only costs a connection
        log.debug("closing a finished stream failed: %s", exc)


def _run(fn: Callable[[], object]) -> None:
    try:
        fn()
    except Exception:  # deferred bookkeeping never takes the server down
        log.exception("deferred work failed")


async def settle() -> None:
    """Run all work still waiting now, and wait for the streams closing."""
    while _waiting:
        next(iter(_waiting)).run()
    if _closing:
        await asyncio.gather(*list(_closing), return_exceptions=True)


__all__ = ["LATEST_S", "Later", "after_response", "close_after_response", "for_request", "settle"]
