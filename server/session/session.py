"""The language server's state, free of pygls: one Session per editor connection.

It owns the pipeline's lifetime, the workspace index, completion and hover, and
composes three parts: the open documents (`documents.py`), the settings
(`settings_state.py`) and what was decided and accepted (`decision_log.py`).
`lsp.py` unpacks LSP messages and calls these methods; tests can drive a Session
with plain calls.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from cachetools import LRUCache

from synconfroute.clients.errors import (
    BackendUnavailable,
    BadCredentials,
    FimUnsupported,
    ModelNotFound,
)

from ..learning.adaptive import Adaptive
from ..learning.decision_log import DecisionLog, Status, WorkerStatus
from ..learning.ledger import Ledger
from ..learning.retention import DEFAULT_DELAYS, Retention
from ..routing.backends import build_tiers, warm
from ..routing.context import make_context
from ..routing.gate import SyntaxGate, make_gate
from ..routing.pipeline import Pipeline
from ..routing.request import Anchor
from ..routing.router import Rules
from ..routing.rules import resolve_rules
from ..settings import config
from ..settings.settings_state import SettingsState
from ..syntax import SyntaxDocument
from ..vocab.card import route_card, summary
from ..vocab.positions import Encoding, Text, advance, word_before
from ..vocab.record import RouteDecision
from ..workspace import crossfile, egress, recent_edits
from ..workspace.documents import (
    DocState,
    DocumentNotOpen,
    DocumentStore,
    Edit,
    debounce_s,
    path_of,
    uri_key,
)
from ..workspace.workspace_index import WorkspaceIndex

__all__ = ["Completed", "DocState", "DocumentNotOpen", "Edit", "Session", "path_of", "uri_key"]

log = logging.getLogger(__name__)

# Backend problems worth one message to the user (timeouts are not: they are noise).
_TROUBLE = (BackendUnavailable, ModelNotFound, BadCredentials, FimUnsupported)


@attrs.frozen
class Completed:
    """A completion ready to be turned into an LSP item."""

    id: str
    decision: RouteDecision
    insert_text: str
    start: tuple[int, int]  # the range the item replaces (start == cursor for inline)
    end: tuple[int, int]
    word: str  # identifier fragment before the cursor (completion filterText)


class Session:
    def __init__(
        self,
        loaded: config.Loaded,
        *,
        show_message: Callable[[str, str], None] = lambda level, text: None,
        make_pipeline: Callable[[config.Settings], Pipeline] | None = None,
        ledger: Ledger | None = None,
        roots: Callable[[], Sequence[str]] = lambda: (),  # workspace folder URIs
        retention_delays: Sequence[float] = DEFAULT_DELAYS,
    ) -> None:
        self.settings_state = SettingsState(loaded)
        self.docs = DocumentStore()
        self.decision_log = DecisionLog(
            lambda: self.settings_state.current, ledger, retention_delays
        )
        self._show = show_message
        self._make_pipeline = make_pipeline
        self._pipeline: Pipeline | None = None
        self._pipeline_lock = asyncio.Lock()
        self._settings_gen = 0  # bumps when the pipeline must be rebuilt
        self._retiring: set[Pipeline] = set()  # replaced, closed once their requests end
        self._roots = roots  # never_send patterns are relative to these folders
        self._troubles: set[str] = set()
        self._closing: set[asyncio.Future[None]] = set()
        self.local_choice = ""
        self._last_local_model = ""
        # Cross-file context (completion.context = "workspace"): built on first need.
        self.index: WorkspaceIndex | None = None
        self._index_stop = threading.Event()
        self.snippets = crossfile.SnippetCache()
        self.recent = recent_edits.RecentEdits()  # chunks changed lately, any open file
        self._sync_adaptive()

    # -- the parts' state, as callers knew it ---------------------------------
    @property
    def settings(self) -> config.Settings:
        """The current settings (a new object after each change; never mutated)."""
        return self.settings_state.current

    @property
    def load_issues(self) -> list[config.SettingsIssue]:
        return self.settings_state.load_issues

    @property
    def encoding(self) -> Encoding:
        return self.docs.encoding

    @encoding.setter
    def encoding(self, value: Encoding) -> None:
        self.docs.encoding = value

    @property
    def documents(self) -> dict[str, DocState]:
        return self.docs.documents

    @property
    def decisions(self) -> LRUCache[str, RouteDecision]:
        return self.decision_log.decisions

    @property
    def accepted(self) -> set[str]:
        return self.decision_log.accepted

    @property
    def ledger(self) -> Ledger:
        return self.decision_log.ledger

    @property
    def retention(self) -> Retention:
        return self.decision_log.retention

    @property
    def adaptive(self) -> Adaptive | None:
        return self.decision_log.adaptive

    # -- settings -------------------------------------------------------------
    def apply_overrides(
        self,
        *,
        init: Mapping[str, Any] | None = None,
        workspace: Mapping[str, Any] | None = None,
    ) -> list[config.SettingsIssue]:
        """Merge editor settings over file + env: initializationOptions (user scope),
        then the workspace configuration (workspace scope: it may only tighten what
        leaves the machine). A source passed as None keeps its last value; a new
        workspace configuration replaces the old one (a removed key goes back to the
        user's value). A refused workspace value is reported once."""
        old = self.settings
        issues = self.settings_state.apply(init=init, workspace=workspace)
        if self.settings != old:
            self._drop_pipeline()
            self._push_privacy(old)
            self._sync_adaptive()
        return issues

    def toggle_local_only(self) -> bool:
        old = self.settings
        on = self.settings_state.toggle_local_only()
        self._push_privacy(old)
        return on

    def _push_privacy(self, old: config.Settings) -> None:
        """Requests in flight see the new privacy settings at once (they check again
        before escalating; a remote call they may no longer make is cancelled)."""
        new = self.settings
        revoked = not new.remote.configured or not set(old.remote.all_urls) <= set(
            new.remote.all_urls
        )
        for p in self._live():
            p.update_privacy(new.privacy, remote_revoked=revoked)

    def _live(self) -> list[Pipeline]:
        return [*([self._pipeline] if self._pipeline is not None else []), *self._retiring]

    def _sync_adaptive(self) -> None:
        """Adaptive mode starts from the configured rules of the model the local tier
        runs (the configured `local.model` until the pipeline is built)."""
        self.decision_log.sync_adaptive(resolve_rules(self.settings, self._local_model()).threshold)

    def rules(self) -> Rules:
        """The rules the next request routes by: the one value the router, `status`, the
        hover card and adaptive mode read."""
        adaptive = self.decision_log.adaptive_threshold
        return resolve_rules(self.settings, self._local_model(), adaptive)

    def _local_model(self) -> str:
        """The model the local tier runs: the pipeline's; between pipelines the last one
        built (a settings change rebuilds it); before the first, the configured one."""
        if self._pipeline is not None:
            self._last_local_model = self._pipeline.local_model
        return self._last_local_model or self.settings.local.model

    # -- pipeline -------------------------------------------------------------
    async def pipeline(self) -> Pipeline:
        async with self._pipeline_lock:
            while self._pipeline is None:
                gen, settings = self._settings_gen, self.settings
                if self._make_pipeline is not None:
                    built = self._make_pipeline(settings)
                else:
                    built = await self._build(settings)
                if gen == self._settings_gen:
                    self._pipeline = built
                    self._sync_adaptive()  # now the local model is known
                else:  # the settings changed while we built it: build again
                    self._retire(built)
            return self._pipeline

    async def _build(self, settings: config.Settings) -> Pipeline:
        tiers = await build_tiers(settings)
        self.local_choice = f"{tiers.choice.kind} ({tiers.choice.reason})"
        log.info("local tier: %s", tiers.choice.reason)
        # Load the embedded model now, in the background: not on the first keystroke.
        task = asyncio.ensure_future(warm(tiers.local))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        return Pipeline(settings, tiers.local, tiers.remote, make_gate(settings.routing))

    def _drop_pipeline(self) -> None:
        self._settings_gen += 1
        old, self._pipeline = self._pipeline, None
        if old is not None:
            self._retire(old)

    def _retire(self, old: Pipeline) -> None:
        """Close `old`'s backends once the requests it is running have ended: closing
        them under a request fails it ("the client has been closed")."""
        self._retiring.add(old)

        async def close_when_idle() -> None:
            try:
                await old.wait_idle()
                await self._close(old)
            finally:
                self._retiring.discard(old)

        task = asyncio.ensure_future(close_when_idle())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    @staticmethod
    async def _close(p: Pipeline) -> None:
        for b in (p.local, p.remote):
            if b is not None:
                await b.aclose()

    # -- workspace index -----------------------------------------------------
    def roots(self) -> tuple[str, ...]:
        return tuple(path_of(u) for u in self._roots() if u.startswith("file:"))

    def start_index(self) -> WorkspaceIndex | None:
        """The workspace index, its build started in a worker thread on first call
        (completions never wait for it); None when completion.context is "file"."""
        c = self.settings.completion
        if c.context != "workspace":
            return None
        if self.index is None:
            index = WorkspaceIndex(
                max_files=c.index_max_files,
                max_file_bytes=c.index_max_file_kb * 1024,
                max_bytes=c.index_max_mb * 2**20,
            )
            self.index = index
            for st in self.documents.values():
                if self._indexable(st.path):
                    index.update(st.path, st.text.text, st.language or None)
            roots = self.roots()
            skip = [st.path for st in self.documents.values()]

            def build() -> None:
                index.build(roots, skip=skip, stop=self._index_stop)
                log.info("workspace index: %s", index.figures())

            task = asyncio.ensure_future(asyncio.to_thread(build))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return self.index

    def _indexable(self, path: str) -> bool:
        """Only files inside a workspace folder feed the index (any, with no folder open)."""
        roots = self.roots()
        return not roots or egress.in_workspace(path, roots)

    def saved(self, uri: str) -> None:
        st = self.document(uri)
        if st is not None and self.index is not None and self._indexable(st.path):
            self.index.update(st.path, st.text.text, st.language or None)
            st.index_stale = False

    async def files_changed(self, changes: Sequence[tuple[str, bool]]) -> None:
        """Watched files (uri, deleted?) changed on disk: re-read those the editor does
        not hold open (its text is newer), in a worker thread."""
        index = self.index
        if index is None:
            return
        roots = self.roots()
        todo = [
            (path_of(u), gone)
            for u, gone in changes
            # Outside every workspace folder: never indexed (a deletion may still drop it).
            if self.document(u) is None and (gone or egress.in_workspace(path_of(u), roots))
        ]

        def apply() -> None:
            for path, gone in todo:
                if gone:
                    index.remove(path)
                else:
                    index.update_from_disk(path)

        await asyncio.to_thread(apply)

    def _crossfile(
        self, key: str, st: DocState, text: str, offset: int
    ) -> tuple[crossfile.Candidate, ...]:
        """Ranked context candidates for a cursor at `offset` of `text` (the request's
        snapshot of `st`)."""
        index = self.start_index()
        if index is None:
            return ()
        others = sorted((o for k, o in self.documents.items() if k != key), key=lambda o: -o.edited)
        for o in others:  # other documents edited since: their definitions moved
            if o.index_stale and self._indexable(o.path):
                index.update(o.path, o.text.text, o.language or None)
                o.index_stale = False
        found = crossfile.candidates(
            prefix=text[max(0, offset - 4000) : offset],
            suffix=text[offset : offset + 1000],
            path=st.path,
            language=st.language,
            index=index,
            open_docs=[crossfile.OpenDoc(o.path, o.text.version, o.text.text) for o in others[:8]],
            snippets=self.snippets,
            full_prefix=text[: min(offset, 20000)],
        )
        return tuple(found)

    async def shutdown(self) -> None:
        self._index_stop.set()
        for st in self.documents.values():
            if st.inner is not None:
                st.inner.cancel()
        if self._pipeline is not None:
            await self._close(self._pipeline)
            self._pipeline = None
        self.retention.shutdown()  # no timer outlives the server
        if self._closing:  # retired pipelines close as their cancelled requests end
            await asyncio.wait(set(self._closing), timeout=2.0)

    # -- documents ------------------------------------------------------------
    def document(self, uri: str) -> DocState | None:
        """The open document behind `uri`, however the editor percent-encodes it."""
        return self.docs.document(uri)

    def open(self, uri: str, text: str, language_id: str | None, path: str | None = None) -> None:
        st = self.docs.open(uri, text, language_id, path)
        if self.index is not None and self._indexable(st.path):
            self.index.update(st.path, text, st.language or None)

    def change(self, uri: str, edits: Sequence[Edit]) -> bool:
        """Apply edits (LSP line rule, negotiated encoding) to the document's one text;
        its tree follows. True if diagnostics should be cleared."""
        key = uri_key(uri)
        watched = self.retention.watching(key)
        follow = functools.partial(self.retention.edit, key) if watched else None
        before = self.documents.get(key)
        old = before.text.text if before is not None else ""
        changed = self.docs.change(uri, edits, follow)
        if changed is None:
            return False
        st = changed.doc
        self._note_edits(st, old, edits)
        if changed.accepted is not None and self.accept(changed.accepted):
            # The editor inserted our completion: its lines now hold it, keep the card.
            self.decision_log.track(
                key, changed.accepted, changed.inserted_at, lambda: st.text.text
            )
        return changed.cleared

    def _note_edits(self, st: DocState, old: str, edits: Sequence[Edit]) -> None:
        """Feed the recent-edits ring (context for other files' prompts)."""
        if not self.settings.completion.recent_edits or not edits:
            return
        new = st.text.text
        for e in edits:
            if e.start is None:
                first, last = recent_edits.lines_of_sync(old, new)
            else:
                first, last = recent_edits.lines_of_range_edit(e.start[0], e.text)
            self.recent.note(st.path, new, first, last)

    def close(self, uri: str) -> None:
        self.retention.close(uri_key(uri))  # what the document held last is its retention
        st = self.docs.close(uri)
        if (
            st is not None
            and self.index is not None
            and st.index_stale
            and self._indexable(st.path)
        ):
            self.index.update_from_disk(st.path)  # edits not saved are gone: disk is right

    def debounce_s(self, st: DocState) -> float:
        return debounce_s(st, self.settings.editor)

    # -- completion -----------------------------------------------------------
    async def complete(
        self, uri: str, line: int, character: int, *, invoked: bool
    ) -> Completed | None:
        """One completion at an LSP position of the session's own text; None when
        superseded or nothing to offer.

        Raises DocumentNotOpen, PositionOutOfRange for a position outside the
        document, and CancelledError when the request itself was cancelled.
        """
        key = uri_key(uri)
        st = self.documents.get(key)
        if st is None:
            raise DocumentNotOpen(f"{uri} is not open (send didOpen first)")
        offset = st.text.offset(line, character)
        text, version = st.text.text, st.text.version  # the request's snapshot (a str)
        window = make_context(
            st.text,
            offset,
            context_lines=self.settings.completion.context_lines,
            language=st.language,
            path=st.path,
        )
        self.docs.touch(key, self.settings.routing.syntax_max_bytes)
        st.generation += 1
        mine = st.generation
        if st.shown is not None:  # the item shown was not accepted: this one replaces it
            self._resolve(st.shown, accepted=False)
            st.shown = None
        if st.inner is not None and not st.inner.done():
            st.inner.cancel()  # a newer request supersedes the older one
        if not invoked:
            await asyncio.sleep(self.debounce_s(st))
            if st.generation != mine:
                return None
        pipeline = await self.pipeline()
        if st.generation != mine:
            return None
        anchor_doc = st.syntax
        blocking = isinstance(pipeline.gate, SyntaxGate) and pipeline.gate.blocking
        if blocking or st.text.version != version:
            # The check runs in a thread while edits may arrive, or edits came in since
            # the request: check against the request's text, in a copy of its own.
            # Lazy: parsed where the check runs (a thread), not here on the event loop.
            anchor_doc = SyntaxDocument(Text(text, self.encoding), st.language or None, lazy=True)
        ctx = attrs.evolve(window, document=Anchor(anchor_doc, (line, character)))
        roots = self.roots()
        ctx = attrs.evolve(ctx, roots=roots)
        if self.settings.completion.context == "workspace":
            try:
                cands = self._crossfile(key, st, text, offset)
            except Exception:  # context is a bonus: never fail the completion over it
                log.exception("cross-file context failed; completing with the file alone")
                cands = ()
            ctx = attrs.evolve(ctx, crossfile=cands)
        if self.settings.completion.recent_edits:
            ctx = attrs.evolve(ctx, recent_edits=tuple(self.recent.recent(exclude=st.path)))
        if ctx.crossfile or ctx.recent_edits:
            repo = roots[0].rstrip("/").rsplit("/", 1)[-1] if roots else ""
            ctx = attrs.evolve(ctx, repo=repo)
        # Held until the request ends, so a settings change cannot close its backends.
        pipeline.hold()
        inner = asyncio.ensure_future(pipeline.complete(ctx, self.rules()))
        inner.add_done_callback(lambda _: pipeline.release())
        st.inner = inner
        try:
            rec = await inner
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # $/cancelRequest: pygls answers -32800
            return None  # superseded by a newer request
        finally:
            if st.inner is inner:
                st.inner = None
        self._notice_trouble(rec)
        did = self.decision_log.record(rec)
        if st.generation != mine:
            return None
        end_line, _ = advance(line, character, rec.completion, self.encoding)
        st.last = (did, line, end_line)
        st.offer = (did, (line, character), rec.completion)
        word = word_before(text, offset)
        if rec.completion:
            st.shown = did
            self.decision_log.shown(did)
        return Completed(did, rec, rec.completion, (line, character), (line, character), word)

    def _notice_trouble(self, rec: RouteDecision) -> None:
        """One message per kind of backend trouble, until that tier works again."""
        for f in rec.failures:
            kind = f"{f.tier}:{type(f.error).__name__}"
            if isinstance(f.error, _TROUBLE) and kind not in self._troubles:
                self._troubles.add(kind)
                self._show("error" if f.tier == "local" else "warning", f"{f.tier}: {f.error}")
        if not any(f.tier == "local" for f in rec.failures) and rec.local_tokens:
            self._troubles = {k for k in self._troubles if not k.startswith("local:")}
        if rec.route == "remote":
            self._troubles = {k for k in self._troubles if not k.startswith("remote:")}

    # -- hover, commands ------------------------------------------------------
    def hover(self, uri: str, line: int) -> str | None:
        st = self.document(uri)
        if st is None or st.last is None:
            return None
        did, first, last = st.last
        rec = self.decisions.get(did)
        if rec is None or not first <= line <= last:
            return None
        card = route_card(rec)
        if self.adaptive is not None:
            now = self.rules().threshold
            card += f"\n- adaptive threshold now {now:.3f}: {self.adaptive.why}"
        if did in self.accepted:
            card += "\n- accepted"
        return card

    def accept(self, did: str) -> bool:
        if did not in self.decisions:
            return False
        if did in self.accepted:
            return True  # the editor's edit and the accept command both report it
        self.accepted.add(did)
        self.docs.forget_shown(did)
        self._resolve(did, accepted=True)
        log.info("accepted %s: %s", did, summary(self.decisions[did]))
        return True

    def _resolve(self, did: str, *, accepted: bool) -> None:
        """A shown item was accepted, or dismissed by a newer request."""
        self.decision_log.resolve(did, accepted=accepted)  # the next rules see a move

    def status(self) -> Status:
        rules = self.rules()
        return self.decision_log.status(
            rules.policy, rules.threshold, self.local_choice, os.getpid(), self._worker_status()
        )

    def _worker_status(self) -> WorkerStatus | None:
        """The embedded tier's worker process (llama.cpp runs there, not in the server)."""
        local = self._pipeline.local if self._pipeline is not None else None
        pid = getattr(local, "worker_pid", None)
        if local is None or pid is None:
            return None
        rss = local.worker_rss_bytes()  # type: ignore[attr-defined]
        return WorkerStatus(
            pid=pid,
            rss_mb=round(rss / 2**20, 1) if rss else None,
            restarts=getattr(local, "restarts", 0),
        )
