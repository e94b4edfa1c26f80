"""Background prefill: evaluate the local prompt where the cursor rests, before any
request asks for it.

An editor that reports its cursor (`synconfroute/cursor`, sent when a document gains
focus and when the cursor rests) gets the local model's KV cache filled for that
position, so the first completion there starts from a warm prompt. The prefill runs
at low priority in the embedded worker: every completion request preempts it at its
next chunk, and what it evaluated stays cached. Only the latest rest position is
worth anything: a newer one replaces a prefill still waiting for its turn.

Editors without our plugin (Helix, JetBrains/LSP4IJ, plain eglot) never report the
cursor; after an edit it is almost surely at the end of the last content change, so
the server rests there itself (`rest_after`) until a client reports its cursor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from ..vocab.positions import Encoding, advance
from ..workspace.documents import Edit

log = logging.getLogger(__name__)

# How long the cursor must rest before its prompt is prefilled: moving through a file
# (arrow keys, scrolling) must not start a prefill at every line passed.
CURSOR_REST_S = 0.15


class Prefiller:
    """At most one pending prefill: the latest position replaces the one before."""

    def __init__(self, rest_s: float = CURSOR_REST_S) -> None:
        self.rest_s = rest_s
        self._task: asyncio.Task[None] | None = None
        self.done = 0  # prefills handed to the backend (status, tests)

    def schedule(self, run: Callable[[], Awaitable[object]]) -> None:
        """Run `run` once the cursor has rested `rest_s` (cancelling one still waiting;
        one already in the backend stops there by itself when superseded)."""
        self.cancel()
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a synchronous caller (unit tests): nothing runs behind it
            return
        self._task = asyncio.ensure_future(self._later(run))

    def cancel(self) -> None:
        """A completion request came: the prefill waiting for the rest is not needed."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None

    async def wait(self) -> None:
        """Until the pending prefill (if any) has ended (tests, benchmarks)."""
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _later(self, run: Callable[[], Awaitable[object]]) -> None:
        await asyncio.sleep(self.rest_s)
        try:
            await run()
            self.done += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a prefill is a bonus: never an error for the user
            log.debug("prefill failed: %s", exc)


def rest_after(edits: Sequence[Edit], encoding: Encoding) -> tuple[int, int] | None:
    """Where the cursor is after a didChange: the end of its last content change (the
    editor sends changes in order; the last one's start is in the final text). None for
    a whole-document change, which says nothing about the cursor."""
    if not edits or edits[-1].start is None:
        return None
    last = edits[-1]
    assert last.start is not None
    return advance(*last.start, last.text, encoding)
