"""The language server's state, free of pygls: one Session per editor connection.

It owns the pipeline's lifetime and composes the parts: the open documents
(`workspace/documents.py`), the settings (`settings/settings_state.py`), what was
decided and accepted (`learning/decision_log.py`), the per-document request tracker
(`tracker.py`: debounce, supersession) and the context builder (`context_builder.py`:
window, anchor, workspace index). `protocol/lsp.py` unpacks LSP messages and calls
these methods; tests can drive a Session with plain calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

import attrs

from synconfroute.clients.errors import (
    BackendUnavailable,
    BadCredentials,
    FimUnsupported,
    ModelNotFound,
)
from synconfroute.clients.types import Backend

from ..learning import later
from ..learning.decision_log import DecisionLog, Status, WorkerStatus
from ..learning.ledger import Ledger
from ..routing.backends import build_tiers, speculates, warm
from ..routing.pipeline import Pipeline, build_pipeline
from ..routing.request import CompletionContext
from ..routing.router import Rules
from ..routing.rules import resolve_rules
from ..settings import config
from ..settings.settings_state import SettingsState
from ..vocab.card import route_card, summary
from ..vocab.positions import Encoding, PositionOutOfRange, word_before
from ..vocab.record import RouteDecision
from ..workspace.documents import (
    DocState,
    DocumentNotOpen,
    DocumentStore,
    Edit,
    debounce_s,
    path_of,
    stop_request,
    uri_key,
)
from ..workspace.workspace_index import WorkspaceIndex
from .context_builder import ContextBuilder
from .folders import FolderSettings, rules_of
from .next_edits import Host, NextEdits
from .prefill import Prefiller, rest_after
from .tracker import RequestTracker, Ticket
from .where import completion_off

__all__ = ["Completed", "DocState", "DocumentNotOpen", "Edit", "Session", "path_of", "uri_key"]

log = logging.getLogger(__name__)

# How long a completion waits for the editor's first workspace configuration.
WORKSPACE_WAIT_S = 0.5

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

    @functools.cached_property
    def title(self) -> str:
        """The decision's one-line summary, made once: the route notification and the
        accept command's title both show it."""
        return summary(self.decision)


class Session:
    def __init__(
        self,
        loaded: config.Loaded,
        *,
        show_message: Callable[[str, str], None] = lambda level, text: None,
        make_pipeline: Callable[[config.Settings], Pipeline] | None = None,
        ledger: Ledger | None = None,
        roots: Callable[[], Sequence[str]] = lambda: (),  # workspace folder URIs
        retention_delays: Sequence[float] | None = None,  # None: retention's defaults
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
        self._troubles: set[str] = set()
        self._remote_problem: str | None = None  # the last, until the remote answers again
        self._workspace_applied = asyncio.Event()
        self._closing: set[asyncio.Future[None]] = set()
        self.local_choice = ""
        self._last_local_model = ""
        self.tracker = RequestTracker()
        self.prefiller = Prefiller()
        # Where the cursor last rested in each document (`synconfroute/cursor`, or the
        # last request): reopened, the document is prefilled there.
        self._cursors: dict[str, tuple[int, int]] = {}
        self._cursor_reported = False  # the editor sends `synconfroute/cursor` itself
        self.folder_settings = FolderSettings()
        self.context = ContextBuilder(
            self.docs, roots, self._spawn, folders=self.folder_settings.current
        )
        self.next_edits = NextEdits(  # copilotInlineEdit
            Host(
                self.docs,
                self.context,
                self.decision_log,
                self.settings_for,
                self.rules,
                self.pipeline,
                self._await_workspace,
            )
        )
        self._sync_adaptive()

    @property
    def settings(self) -> config.Settings:
        """The current settings (a new object after each change; never mutated)."""
        return self.settings_state.current

    def negotiated(self, encoding: Encoding) -> None:
        """The position encoding agreed at initialize (documents opened later use it)."""
        self.docs.encoding = encoding

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` in the background; shutdown waits for it."""
        task = asyncio.ensure_future(work)
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

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
        if workspace is not None:
            self._workspace_applied.set()
        if self.settings != old:
            self._drop_pipeline()
            self._push_privacy(old)
            self._sync_adaptive()
        return issues

    def expect_folder_configuration(self, roots: Sequence[str]) -> None:
        """The editor will answer each of these folders' configuration (asked with the
        folder as scopeUri): until it has, their files stay on the machine."""
        self.folder_settings.expect(roots)

    def apply_folder_configuration(
        self, root: str, options: Mapping[str, Any]
    ) -> list[config.SettingsIssue]:
        """One folder's workspace configuration: its tighten-only privacy keys apply to
        the files inside it (at the egress gate), on top of everything else; its other
        tighten-only keys to each request for a file inside it (`settings_for`)."""
        folder, issues = self.settings_state.folder(options)
        self.folder_settings.applied(rules_of(root, folder, self.settings, issues), options)
        return issues

    def folders_changed(self, roots: Sequence[str]) -> None:
        """The workspace folders open now (didChangeWorkspaceFolders): removed ones stop
        being roots and lose their settings."""
        self.folder_settings.keep_only(roots)

    def files_moved(self, moves: Sequence[tuple[str, str]]) -> None:
        """didRenameFiles (old URI, new URI): the old names' code is forgotten."""
        self.context.renamed([(path_of(a), path_of(b)) for a, b in moves])

    def files_deleted(self, uris: Sequence[str]) -> None:
        self.context.forget(path_of(u) for u in uris)

    def expect_workspace_configuration(self) -> None:
        """The editor answers workspace/configuration: until its first answer is applied,
        nothing escalates (a repository's local_only or never_send would come too late)."""
        old = self.settings
        self.settings_state.expect_workspace()
        self._workspace_applied.clear()
        self._push_privacy(old)

    async def _await_workspace(self) -> None:
        """A short, bounded wait for the first workspace configuration; past it, this
        request is answered locally (the settings say local-only until it comes)."""
        if self.settings_state.awaiting_workspace:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._workspace_applied.wait(), WORKSPACE_WAIT_S)

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

    def settings_for(self, st: DocState) -> config.Settings:
        """The settings a request for `st` follows: the window's, tightened by the
        workspace folders holding the file (their tighten-only keys)."""
        return self.folder_settings.settings_for(st.path, self.settings)

    def _settings_mark(self) -> tuple[int, int]:
        """Moves when the settings or a folder's answer change (settings are new
        objects on each change, never mutated)."""
        return id(self.settings), self.folder_settings.generation

    def rules(self, settings: config.Settings | None = None) -> Rules:
        """The rules the next request routes by (under `settings`, a file's own from
        `settings_for`; None: the window's): the one value the router, `status`, the
        hover card and adaptive mode read."""
        s = self.settings if settings is None else settings
        adaptive = self.decision_log.adaptive_threshold
        if adaptive is not None:
            # A folder may have turned adaptive mode off or lowered its ceiling (its
            # lower threshold caps it): adaptive mode stays within the file's settings.
            adaptive = min(adaptive, s.routing.adaptive_max) if s.routing.adaptive else None
        return resolve_rules(s, self._local_model(), adaptive)

    def _local_model(self) -> str:
        """The model the local tier runs: the pipeline's; between pipelines the last one
        built (a settings change rebuilds it); before the first, the configured one."""
        if self._pipeline is not None:
            self._last_local_model = self._pipeline.local_model
        return self._last_local_model or self.settings.local.model

    # -- pipeline -------------------------------------------------------------
    async def pipeline(self) -> Pipeline:
        if self._pipeline is not None:  # (every request: no lock to take)
            return self._pipeline
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
        self._spawn(warm(tiers.local))
        return build_pipeline(settings, tiers)

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

        self._spawn(close_when_idle())

    @staticmethod
    async def _close(p: Pipeline) -> None:
        for b in (p.local, p.remote):
            if b is not None:
                await b.aclose()

    # -- workspace index (the context builder owns it) ---------------------------
    def start_index(self) -> WorkspaceIndex | None:
        return self.context.start_index(self.settings)

    def saved(self, uri: str) -> None:
        st = self.document(uri)
        if st is not None:
            self.context.saved(st)

    async def files_changed(self, changes: Sequence[tuple[str, bool]]) -> None:
        await self.context.files_changed(changes)

    async def shutdown(self) -> None:
        self.context.stop()
        for st in self.docs.documents.values():
            stop_request(st)
        if self._pipeline is not None:
            await self._close(self._pipeline)
            self._pipeline = None
        self.decision_log.retention.shutdown()  # no timer outlives the server
        if self._closing:  # retired pipelines close as their cancelled requests end
            await asyncio.wait(set(self._closing), timeout=2.0)
        await later.settle()  # the ledger's last lines, the last streams' close
        self.decision_log.ledger.flush()

    # -- documents ------------------------------------------------------------
    def document(self, uri: str) -> DocState | None:
        """The open document behind `uri`, however the editor percent-encodes it."""
        return self.docs.document(uri)

    def open(self, uri: str, text: str, language_id: str | None, path: str | None = None) -> None:
        self.context.opened(self.docs.open(uri, text, language_id, path))
        if (at := self._cursors.get(uri_key(uri))) is not None:
            self.cursor(uri, *at, reported=False)

    def cursor(self, uri: str, line: int, character: int, *, reported: bool = True) -> None:
        """The cursor rests at (line, character) of `uri` (focus, or a pause; `reported`
        by the editor, else inferred): prefill the local prompt a completion there would
        need, in the background."""
        key = uri_key(uri)
        if self.docs.documents.get(key) is None:
            return
        self._cursor_reported = self._cursor_reported or reported
        self._remember_cursor(key, (line, character))
        if self._prefill_wanted():
            self.prefiller.schedule(lambda: self._prefill(key, line, character))

    def _prefill_wanted(self) -> bool:
        """Prefill is on and the local tier can prefill (before the tiers are built: yes,
        `Pipeline.prefill` then finds out)."""
        p = self._pipeline
        if not self.settings.local.prefill:
            return False
        return p is None or getattr(p.local, "prefill", None) is not None

    def _remember_cursor(self, key: str, at: tuple[int, int]) -> None:
        self._cursors.pop(key, None)
        self._cursors[key] = at
        while len(self._cursors) > 256:  # the oldest go
            del self._cursors[next(iter(self._cursors))]

    async def _prefill(self, key: str, line: int, character: int) -> None:
        st = self.docs.documents.get(key)
        if st is None:
            return
        settings = self.settings_for(st)
        try:
            offset = st.text.offset(line, character)
        except PositionOutOfRange:
            return  # the document changed since: the next rest tells where
        if completion_off(st, offset, settings) is not None:
            return  # no completion wanted here: the local model is not asked either
        snapshot = st.text.text, st.text.version
        window = self.context.window(st, offset, settings)
        ctx = self.context.build(
            window, st, snapshot, offset, (line, character), settings, blocking_gate=False
        )
        pipeline = await self.pipeline()
        pipeline.hold()
        try:
            await pipeline.prefill(ctx)
        finally:
            pipeline.release()

    def change(self, uri: str, edits: Sequence[Edit]) -> bool:
        """Apply edits (LSP line rule, negotiated encoding) to the document's one text;
        its tree follows. True if diagnostics should be cleared."""
        key = uri_key(uri)
        retention = self.decision_log.retention
        follow = functools.partial(retention.edit, key) if retention.watching(key) else None
        before = self.docs.documents.get(key)
        old = before.text.text if before is not None else ""  # a str: immutable
        changed = self.docs.change(uri, edits, follow)
        if changed is None:
            return False
        st = changed.doc
        self.context.changed(st, old, edits, self.settings)
        if not self._cursor_reported and (at := rest_after(edits, self.docs.encoding)):
            self.cursor(uri, *at, reported=False)  # no plugin: the cursor ends the edit
        if changed.accepted is not None and self.accept(changed.accepted):
            # The editor inserted our completion: its lines now hold it, keep the card.
            self.decision_log.track(
                key, changed.accepted, changed.inserted_at, lambda: st.text.text
            )
        return changed.cleared

    def close(self, uri: str) -> None:
        # What the document held last is its retention.
        self.decision_log.retention.close(uri_key(uri))
        st = self.docs.close(uri)
        if st is not None:
            self.context.closed(st)

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
        st = self.docs.documents.get(key)
        if st is None:
            raise DocumentNotOpen(f"{uri} is not open (send didOpen first)")
        settings, mark = self.settings_for(st), self._settings_mark()
        offset = st.text.offset(line, character)
        self.prefiller.cancel()  # the request evaluates its prompt itself, first
        self._remember_cursor(key, (line, character))
        snapshot = st.text.text, st.text.version  # the request's (a str: immutable)
        window = self.context.window(st, offset, settings)
        self.docs.touch(key, settings.routing.syntax_max_bytes)
        ticket = self.tracker.begin(st)
        if ticket.dismissed is not None:
            self._resolve(ticket.dismissed, accepted=False)
        if (off := completion_off(st, offset, settings)) is not None:
            # Before any model is asked; the ticket supersedes requests still running.
            log.debug("no completion at %s:%d:%d: %s", key, line, character, off)
            return None
        settled: asyncio.Future[bool] | None = None
        if not invoked:
            wait = self.tracker.debounce(st, ticket, self.debounce_s(st))
            if settings.editor.speculative and speculates(self._local_backend()):
                settled = asyncio.ensure_future(wait)  # the local tier starts meanwhile
            elif not await wait:
                return None
        try:
            where = (window, snapshot, offset, (line, character))
            return await self._complete(st, ticket, where, (settings, mark), invoked, settled)
        finally:
            if settled is not None:
                settled.cancel()

    def _local_backend(self) -> Backend | None:
        return self._pipeline.local if self._pipeline is not None else None

    async def _complete(
        self,
        st: DocState,
        ticket: Ticket,
        where: tuple[CompletionContext, tuple[str, int], int, tuple[int, int]],
        settings_then: tuple[config.Settings, tuple[int, int]],
        invoked: bool,
        settled: asyncio.Future[bool] | None,
    ) -> Completed | None:
        window, snapshot, offset, at = where
        await self._await_workspace()
        pipeline = await self.pipeline()
        if not self.tracker.current(st, ticket):
            return None
        settings, mark = settings_then
        if self._settings_mark() != mark:  # the workspace configuration came meanwhile
            settings = self.settings_for(st)
        ctx = self.context.build(
            window,
            st,
            snapshot,
            offset,
            at,
            settings,
            blocking_gate=pipeline.gate_blocks,
            invoked=invoked,
            settled=settled,
        )
        rec = await self.tracker.run(st, pipeline, ctx, self.rules(settings))
        if rec is None or (settled is not None and not await settled):
            return None  # superseded (while typing went on: nothing shown, nothing logged)
        self._notice_trouble(rec)
        did = self.decision_log.record(rec)
        if not self.tracker.current(st, ticket):
            return None
        if self.tracker.offered(st, did, at, rec.completion, self.docs.encoding):
            self.decision_log.shown(did)
        word = word_before(snapshot[0], offset)
        return Completed(did, rec, rec.completion, at, at, word)

    def _notice_trouble(self, rec: RouteDecision) -> None:
        """One message per kind of backend trouble, until that tier works again."""
        failures = rec.failures if rec.problems else []
        for f in failures:
            kind = f"{f.tier}:{type(f.error).__name__}"
            if isinstance(f.error, _TROUBLE) and kind not in self._troubles:
                self._troubles.add(kind)
                self._show("error" if f.tier == "local" else "warning", f"{f.tier}: {f.error}")
            if f.tier == "remote" and isinstance(f.error, _TROUBLE):
                self._remote_problem = str(f.error)
        if not self._troubles and self._remote_problem is None:
            return  # the usual case: nothing was wrong, nothing is
        if not any(f.tier == "local" for f in failures) and rec.local_tokens:
            self._troubles = {k for k in self._troubles if not k.startswith("local:")}
        if rec.route == "remote":
            self._troubles = {k for k in self._troubles if not k.startswith("remote:")}
            self._remote_problem = None

    # -- hover, commands ------------------------------------------------------
    def hover(self, uri: str, line: int) -> str | None:
        st = self.document(uri)
        if st is None or st.last is None:
            return None
        did, first, last = st.last
        log_ = self.decision_log
        rec = log_.decisions.get(did)
        if rec is None or not first <= line <= last:
            return None
        card = route_card(rec)
        if log_.adaptive is not None:
            now = self.rules().threshold
            card += f"\n- adaptive threshold now {now:.3f}: {log_.adaptive.why}"
        if did in log_.accepted:
            card += "\n- accepted"
        return card

    def accept(self, did: str) -> bool:
        if did in self.next_edits.ids:  # a next edit's id, sent to the completion's command
            return self.next_edits.accepted(did)
        decisions, accepted = self.decision_log.decisions, self.decision_log.accepted
        if did not in decisions:
            return False
        if did in accepted:
            return True  # the editor's edit and the accept command both report it
        accepted.add(did)
        self.docs.forget_shown(did)
        self._resolve(did, accepted=True)
        log.info("accepted %s: %s", did, summary(decisions[did]))
        return True

    def _resolve(self, did: str, *, accepted: bool) -> None:
        """A shown item was accepted, or dismissed by a newer request."""
        self.decision_log.resolve(did, accepted=accepted)  # the next rules see a move

    def status(self) -> Status:
        rules = self.rules()
        return self.decision_log.status(
            rules.policy,
            rules.threshold,
            self.local_choice,
            os.getpid(),
            self._worker_status(),
            self._cluster_status(),
            self._index_status(),
        )

    def deployment_status(self) -> dict[str, Any]:
        """What `status` adds for an organisation's deployment: the policy and the keys
        it set, and the remote tier's last connection problem (a TLS handshake, a proxy),
        with `lines` in words."""
        pol = self.settings_state.policy
        policy = {"path": str(pol.path), "sets": sorted(pol.values)} if pol else None
        problem = self._remote_problem
        lines = []
        if policy is not None:
            lines.append(f"policy {policy['path']} sets {', '.join(policy['sets']) or 'nothing'}")
        if problem is not None:
            lines.append(f"remote problem: {problem}")
        return {"managed_policy": policy, "remote_problem": problem, "lines": lines}

    def _index_status(self) -> dict[str, object] | None:
        index = self.context.index
        if index is None:
            return None
        figures: dict[str, object] = {**index.figures(), "ready": index.ready}
        return figures

    def _cluster_status(self) -> dict[str, object] | None:
        return self._pipeline.load_status() if self._pipeline is not None else None

    def _worker_status(self) -> WorkerStatus | None:
        """The embedded tier's worker process (llama.cpp runs there, not in the server)."""
        local = self._pipeline.local if self._pipeline is not None else None
        pid = getattr(local, "worker_pid", None)
        if local is None or pid is None:
            return None
        rss = local.worker_rss_bytes()  # type: ignore[attr-defined]
        rates = getattr(local, "rates", None)
        return WorkerStatus(
            pid=pid,
            rss_mb=round(rss / 2**20, 1) if rss else None,
            restarts=getattr(local, "restarts", 0),
            prompt_tps=getattr(rates, "prompt_tps", None),
            decode_tps=getattr(rates, "decode_tps", None),
            prompt_tokens=getattr(local, "prompt_tokens_total", 0),
            cached_tokens=getattr(local, "cached_tokens_total", 0),
            generations=getattr(local, "generations_total", 0),
            prefills=self.prefiller.done,
            protocol_errors=getattr(local, "protocol_errors", 0),
        )
