"""Next-edit suggestions in the session: one `copilotInlineEdit` request from the open
document to the edit shown, with its record, and the client's reports (shown, accepted).

The request is answered for the document version the client names: a stale version
(the client has typed since) gets no edit, and neither does a request the document
outran while the tiers worked. Each suggestion is a decision like a completion's (the
ledger, the hover card) but stays out of the completion's adaptive threshold: its
confidence is another measure (changed tokens of a rewrite).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import attrs

from ..learning.decision_log import DecisionLog
from ..routing.next_edit.pace import Pace
from ..routing.next_edit.plan import EditRequest
from ..routing.next_edit.sequence import NextEdit, suggest
from ..routing.pipeline import Pipeline
from ..routing.router import Rules
from ..settings.config import Settings
from ..vocab.record import RouteDecision
from ..workspace.documents import DocState, DocumentNotOpen, DocumentStore, debounce_s, uri_key
from .context_builder import ContextBuilder

log = logging.getLogger(__name__)


@attrs.frozen
class EditShown:
    """An edit ready to be an LSP item: `text` replaces `start`..`end` of `version`."""

    id: str
    decision: RouteDecision
    text: str
    start: tuple[int, int]
    end: tuple[int, int]
    version: int


@attrs.frozen
class Host:
    """What next edits use of the session (given as parts: no import of the session)."""

    docs: DocumentStore
    context: ContextBuilder
    decision_log: DecisionLog
    settings: Callable[[DocState], Settings]  # a file's own (its folders' keys too)
    rules: Callable[[Settings], Rules]
    pipeline: Callable[[], Awaitable[Pipeline]]
    await_workspace: Callable[[], Awaitable[None]]


class NextEdits:
    """The session's next-edit suggestions (one per session)."""

    def __init__(self, host: Host) -> None:
        self._s = host
        self.ids: set[str] = set()  # decisions that are next-edit suggestions
        # Per document, the editor's version (didOpen, didChange) and the text's own
        # version when it came: the text is at the editor's version while both hold.
        self._versions: dict[str, tuple[int, int]] = {}
        self._running: dict[str, asyncio.Future[NextEdit]] = {}  # per document, the latest
        self._shown: dict[str, str] = {}  # per document, the suggestion shown last
        self._docs_of: dict[str, str] = {}  # suggestion -> its document
        self._asked: dict[str, int] = {}  # per document, requests made (the newest wins)
        self.pace = Pace()  # whether the local model answers in time (only_in_time)

    def version(self, uri: str, version: int) -> None:
        """The editor says the document is now at `version` (didOpen, didChange)."""
        st = self._s.docs.documents.get(uri_key(uri))
        if st is not None:
            self._versions[uri_key(uri)] = (version, st.text.version)

    def forget(self, uri: str) -> None:
        """The document was closed."""
        self._versions.pop(uri_key(uri), None)
        self._asked.pop(uri_key(uri), None)

    def _at(self, key: str, version: int) -> int | None:
        """The text's own version matching the editor's `version`; None: stale."""
        known = self._versions.get(key)
        return known[1] if known is not None and known[0] == version else None

    async def suggest(self, uri: str, version: int, line: int, character: int) -> EditShown | None:
        """The edit after this one at (line, character) of `version`; None: nothing to
        suggest (off, stale, or no edit). Raises DocumentNotOpen, PositionOutOfRange."""
        s = self._s
        st = s.docs.documents.get(uri_key(uri))
        if st is None:
            raise DocumentNotOpen(f"{uri} is not open (send didOpen first)")
        settings = s.settings(st)
        own = self._at(uri_key(uri), version)
        if not settings.next_edit.enabled or own is None or st.text.version != own:
            return None  # off, or the client's version is not the text's (stale)
        offset = st.text.offset(line, character)
        text = st.text.text
        key = uri_key(uri)
        self._asked[key] = mine = self._asked.get(key, 0) + 1
        # The completions' debounce, counted from the last keystroke: a request made
        # while typing waits for the pause; one made after it is not delayed.
        wait = st.edited + debounce_s(st, settings.editor) - time.monotonic() if st.edited else 0
        if wait > 0:
            await asyncio.sleep(wait)
            if self._asked.get(key) != mine or st.text.version != own:
                return None  # typed meanwhile, or a newer request came: no model asked
        await s.await_workspace()
        pipeline = await s.pipeline()
        if st.text.version != own:
            return None
        window = s.context.window(st, offset, settings)
        ctx = s.context.build(
            window, st, (text, own), offset, (line, character), settings,
            blocking_gate=pipeline.gate_blocks,
        )  # fmt: skip
        # This file's own recent edits too: they are what the next edit follows from.
        recent = tuple(s.context.recent.recent()) if settings.completion.recent_edits else ()
        ereq = EditRequest(
            ctx=ctx, text=text, cursor=offset, recent=recent, next_edit=settings.next_edit
        )
        self._dismiss(key)  # a new request: the one shown before was passed over
        older = self._running.get(key)
        if older is not None and not older.done():
            older.cancel()  # a newer request for the document: the older one's answer is stale
        pipeline.hold()  # a settings change must not close its backends meanwhile
        inner = asyncio.ensure_future(suggest(pipeline, ereq, s.rules(s.settings(st)), self.pace))
        inner.add_done_callback(lambda _: pipeline.release())
        self._running[key] = inner
        try:
            got = await inner
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # $/cancelRequest: pygls answers -32800
            return None  # superseded: answered with no edit
        finally:
            if self._running.get(key) is inner:
                del self._running[key]
        did = s.decision_log.record(got.decision, task="next-edit")
        self.ids.add(did)
        self._docs_of[did] = key
        if got.edit is None or st.text.version != own:
            return None  # nothing to suggest, or the document moved on meanwhile
        start, end = st.text.position(got.edit.start), st.text.position(got.edit.end)
        st.last = (did, start[0], end[0])  # hover over the lines it replaces: its card
        return EditShown(did, got.decision, got.edit.text, start, end, version)

    def shown(self, did: str) -> bool:
        """`textDocument/didShowInlineEdit`: the client showed suggestion `did`."""
        if did not in self.ids:
            return False
        self._s.decision_log.shown(did)
        key = self._docs_of.get(did)
        if key is not None:
            self._shown[key] = did
        return True

    def _dismiss(self, key: str) -> None:
        """The suggestion shown last in `key`, if not taken, was dismissed (ledger only)."""
        did = self._shown.pop(key, None)
        log_ = self._s.decision_log
        if did is not None and did not in log_.accepted and log_._ledger_on:
            log_.ledger.event("dismissed", did)

    def accepted(self, did: str) -> bool:
        """The item's command: the user took suggestion `did` (ledger only: the
        completion's adaptive threshold learns from completions alone)."""
        log_ = self._s.decision_log
        if did not in self.ids or did in log_.accepted:
            return did in self.ids
        log_.accepted.add(did)
        if log_._ledger_on:
            log_.ledger.event("accepted", did)
        return True


__all__ = ["EditShown", "Host", "NextEdits"]
