"""Per document, the newest completion request wins: debounce, supersession, and what
was offered and shown. The request fields of `DocState` (generation, inner, last,
offer, shown) are written here, and by `DocumentStore` when an edit moves them.
"""

from __future__ import annotations

import asyncio

import attrs

from ..routing.pipeline import Pipeline
from ..routing.request import CompletionContext
from ..routing.router import Rules
from ..vocab.positions import Encoding, advance
from ..vocab.record import RouteDecision
from ..workspace.documents import DocState, stop_request


@attrs.frozen
class Ticket:
    """One request's place in its document's line of requests."""

    generation: int
    dismissed: str | None  # the item shown before it, not accepted: this one replaces it


class RequestTracker:
    @staticmethod
    def begin(st: DocState) -> Ticket:
        """A new request in `st`: it supersedes the one in flight (cancelled) and the
        item shown (dismissed: the caller resolves it)."""
        st.generation += 1
        dismissed, st.shown = st.shown, None
        stop_request(st)
        return Ticket(st.generation, dismissed)

    @staticmethod
    def current(st: DocState, ticket: Ticket) -> bool:
        return st.generation == ticket.generation

    @classmethod
    async def debounce(cls, st: DocState, ticket: Ticket, seconds: float) -> bool:
        """Wait for the next keystroke; False when a newer request came meanwhile."""
        await asyncio.sleep(seconds)
        return cls.current(st, ticket)

    @staticmethod
    async def run(
        st: DocState, pipeline: Pipeline, ctx: CompletionContext, rules: Rules
    ) -> RouteDecision | None:
        """The pipeline's decision; None when a newer request superseded this one.
        Raises CancelledError when the request itself was cancelled ($/cancelRequest)."""
        # Held until the request ends, so a settings change cannot close its backends.
        pipeline.hold()
        # The request's own task runs the pipeline (a task of its own would cost two
        # turns of the event loop): `stop_request` cancels it, and it answers None.
        task = asyncio.current_task()
        st.inner = task
        try:
            return await pipeline.complete(ctx, rules)
        except asyncio.CancelledError:
            if task is None or st.stopped is not task:
                raise  # $/cancelRequest: pygls answers -32800
            st.stopped = None
            task.uncancel()
            return None  # superseded by a newer request, or its document closed
        finally:
            pipeline.release()
            if st.inner is task:
                st.inner = None

    @staticmethod
    def offered(st: DocState, did: str, at: tuple[int, int], text: str, encoding: Encoding) -> bool:
        """Decision `did` offers `text` at `at` (hover covers its lines; an edit that
        inserts it is its acceptance); True when something is shown."""
        line, character = at
        end_line, _ = advance(line, character, text, encoding)
        st.last = (did, line, end_line)
        st.offer = (did, at, text)
        if text:
            st.shown = did
        return bool(text)
