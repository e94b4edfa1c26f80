"""Work a request leaves for after its response: a finished stream's close, the cache's
new entry, the ledger's lines. None of it changes what the editor is sent, and each
costs a few hundred µs on a machine whose caches went cold while the model generated.

`after_response(fn)` runs `fn` on the next turn of the event loop, after the callbacks
already due. A request handler that returns without awaiting again has its response
written by one of those (the task's done callback), so the work runs after the write;
a handler that awaits again (a remote request) lets it run meanwhile. Outside an event
loop it runs at once. `settle()` runs what is still waiting (shutdown, tests).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

log = logging.getLogger(__name__)

_waiting: dict[asyncio.TimerHandle, Callable[[], object]] = {}
_closing: set[asyncio.Task[None]] = set()


def after_response(fn: Callable[[], object]) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        _run(fn)
        return
    handle: asyncio.TimerHandle | None = None

    def run() -> None:
        _waiting.pop(handle, None)  # type: ignore[arg-type]
        _run(fn)

    # call_later, not call_soon: a call_soon made while the handler runs would come
    # before the handler's own done callback, which writes the response.
    handle = loop.call_later(0, run)
    _waiting[handle] = fn


def close_after_response(stream: AsyncGenerator[Any, None]) -> None:
    """Close a stream whose last chunk came (what is left is the end of the HTTP body
    and the backend's own bookkeeping), after the response."""

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
    """Run the work still waiting for its turn now, and wait for the streams closing."""
    while _waiting:
        handle = next(iter(_waiting))  # in the order they were left
        fn = _waiting.pop(handle)
        handle.cancel()
        _run(fn)
    if _closing:
        await asyncio.gather(*list(_closing), return_exceptions=True)


__all__ = ["after_response", "close_after_response", "settle"]
