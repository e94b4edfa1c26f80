"""The language server's state, free of pygls: documents, settings, pipeline, decisions.

`lsp.py` unpacks LSP messages and calls these methods; tests can drive a Session
with plain calls. One Session serves one editor connection.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import statistics
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import attrs

from clients.errors import BackendUnavailable, BadCredentials, FimUnsupported, ModelNotFound
from clients.types import Backend

from . import config, crossfile
from .adaptive import Adaptive
from .backends import choose_local, make_local, make_remote, warm
from .card import route_card, summary
from .context import make_context
from .gate import Anchor, SyntaxGate, make_gate
from .ledger import Ledger
from .ledger import load as load_ledger
from .pipeline import Pipeline
from .positions import Encoding, Text, advance, word_before
from .record import RouteDecision
from .retention import DEFAULT_DELAYS, Retention, minimal_edit
from .syntax import SyntaxDocument, detect_language
from .workspace_index import WorkspaceIndex

log = logging.getLogger(__name__)

# Backend problems worth one message to the user (timeouts are not: they are noise).
_TROUBLE = (BackendUnavailable, ModelNotFound, BadCredentials, FimUnsupported)
_DECISIONS_KEPT = 256
# Parse trees cost ~40x the text; keep them for the documents being completed in, as
# many as fit in both bounds (the current one's always, unless over syntax_max_bytes).
_TREES_KEPT = 16
_TREE_BYTES_KEPT = 8_000_000  # of text: about 320 MB of trees


@attrs.define
class Edit:
    """One LSP content change: a range (start, end as (line, character)) or the whole text."""

    text: str
    start: tuple[int, int] | None = None
    end: tuple[int, int] | None = None


class DocumentNotOpen(KeyError):
    """A request for a document the editor has not opened (or has closed)."""


@attrs.define
class DocState:
    uri: str  # as the editor spelled it (for messages back to it)
    language: str
    path: str  # decoded file path (never_send, language detection), or the URI
    text: Text  # the one copy of the document's text
    syntax: SyntaxDocument  # its tree, sharing `text`
    keystrokes: deque[float] = attrs.field(factory=lambda: deque(maxlen=12))
    generation: int = 0  # bumps with every completion request: newer supersedes older
    inner: asyncio.Task[RouteDecision] | None = None
    last: tuple[str, int, int] | None = None  # (decision id, first line, last line)
    offer: tuple[str, tuple[int, int], str] | None = None  # (id, cursor, text) last offered
    shown: str | None = None  # id of the item last shown, until accepted or replaced
    diagnostics_shown: bool = False
    index_stale: bool = False  # edited since the workspace index last read it
    edited: float = 0.0  # monotonic time of its last edit (recent documents rank first)


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
        self.base = loaded.settings
        self.load_issues = list(loaded.issues)  # reported to the editor at initialize
        self.settings = loaded.settings
        self.init_options: dict[str, Any] = {}
        self.workspace_options: dict[str, Any] = {}
        self.local_only_override: bool | None = None
        self.encoding: Encoding = "utf-16"
        self.documents: dict[str, DocState] = {}
        self.decisions: OrderedDict[str, RouteDecision] = OrderedDict()
        self.accepted: set[str] = set()
        self._ids = itertools.count(1)
        self._show = show_message
        self.ledger = ledger or Ledger(None)
        self._make_pipeline = make_pipeline
        self._pipeline: Pipeline | None = None
        self._pipeline_lock = asyncio.Lock()
        self._settings_gen = 0  # bumps when the pipeline must be rebuilt
        self._retiring: set[Pipeline] = set()  # replaced, closed once their requests end
        self._refusals_shown: set[str] = set()
        self._roots = roots  # never_send patterns are relative to these folders
        self._troubles: set[str] = set()
        self._hot: OrderedDict[str, None] = OrderedDict()  # docs whose tree is kept
        self._closing: set[asyncio.Future[None]] = set()
        self.local_choice = ""
        # Cross-file context (completion.context = "workspace"): built on first need.
        self.index: WorkspaceIndex | None = None
        self._index_stop = threading.Event()
        self.snippets = crossfile.SnippetCache()
        self.retention = Retention(self._retained, retention_delays)
        self.adaptive: Adaptive | None = None
        self._sync_adaptive()

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
        if init is not None:
            self.init_options = dict(init)
        if workspace is not None:
            self.workspace_options = dict(workspace)
        user, issues = config.merge(self.base, self.init_options)
        settings, ws_issues = config.merge_workspace(user, self.workspace_options)
        for issue in ws_issues:
            if issue.message.startswith("refused:"):
                if str(issue) in self._refusals_shown:
                    continue
                self._refusals_shown.add(str(issue))
                log.warning("%s", issue)
            issues.append(issue)
        if self.local_only_override is not None:
            settings.privacy.local_only = self.local_only_override
        changed = settings != self.settings
        old, self.settings = self.settings, settings
        if changed:
            self._drop_pipeline()
            self._push_privacy(old)
            self._sync_adaptive()
        return issues

    def toggle_local_only(self) -> bool:
        self.local_only_override = not self.settings.privacy.local_only
        self.settings.privacy.local_only = self.local_only_override
        self._push_privacy(self.settings)
        return self.local_only_override

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
                else:  # the settings changed while we built it: build again
                    self._retire(built)
            self._pipeline.settings = self.settings  # privacy toggles apply at once
            self._pipeline.threshold_override = self.adaptive.current if self.adaptive else None
            return self._pipeline

    async def _build(self, settings: config.Settings) -> Pipeline:
        choice = await choose_local(settings.local)
        self.local_choice = f"{choice.kind} ({choice.reason})"
        log.info("local tier: %s", choice.reason)
        local: Backend = make_local(settings.local, choice.kind)
        remote = make_remote(settings.remote)
        # Load the embedded model now, in the background: not on the first keystroke.
        task = asyncio.ensure_future(warm(local))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        return Pipeline(settings, local, remote, make_gate(settings.routing))

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

    def saved(self, uri: str) -> None:
        st = self.document(uri)
        if st is not None and self.index is not None:
            self.index.update(st.path, st.text.text, st.language or None)
            st.index_stale = False

    async def files_changed(self, changes: Sequence[tuple[str, bool]]) -> None:
        """Watched files (uri, deleted?) changed on disk: re-read those the editor does
        not hold open (its text is newer), in a worker thread."""
        index = self.index
        if index is None:
            return
        todo = [(path_of(u), gone) for u, gone in changes if self.document(u) is None]

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
            if o.index_stale:
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
        return self.documents.get(uri_key(uri))

    def open(self, uri: str, text: str, language_id: str | None, path: str | None = None) -> None:
        path = path or path_of(uri)
        language = detect_language(language_id, path) or ""
        doc = Text(text, self.encoding)
        # Lazy: a document gets its tree at its first completion, not at open.
        tree = SyntaxDocument(doc, language or None, lazy=True)
        self.documents[uri_key(uri)] = DocState(uri, language, path, doc, tree)
        if self.index is not None:
            self.index.update(path, text, language or None)

    def change(self, uri: str, edits: Sequence[Edit]) -> bool:
        """Apply edits (LSP line rule, negotiated encoding) to the document's one text;
        its tree follows. True if diagnostics should be cleared."""
        st = self.document(uri)
        if st is None:
            return False
        accepted = self._is_acceptance(st, edits)
        key = uri_key(uri)
        watch = self.retention.watching(key)
        inserted_at = 0
        for e in edits:
            if e.start is None or e.end is None:
                if watch:  # follow the accepted regions through a whole-text sync
                    a, b, new = minimal_edit(st.text.text, e.text)
                    self.retention.edit(key, a, b, len(new))
                st.syntax.replace_all(e.text)
            else:
                a = st.text.edit_offset(*e.start) if watch or accepted else 0
                if watch:
                    self.retention.edit(key, a, st.text.edit_offset(*e.end), len(e.text))
                inserted_at = a + len(e.text)
                st.syntax.edit(e.start, e.end, e.text)
        st.keystrokes.append(time.monotonic())
        st.edited = st.keystrokes[-1]
        st.index_stale = True
        st.offer = None
        if accepted is not None:
            # The editor inserted our completion: its lines now hold it, keep the card.
            if self.accept(accepted) and self.settings.editor.ledger:
                text = self.decisions[accepted].completion
                self.retention.track(
                    key, accepted, inserted_at - len(text), text, lambda: st.text.text
                )
        else:
            st.last = None  # the completion's lines may have moved: no stale hover
        cleared, st.diagnostics_shown = st.diagnostics_shown, False
        return cleared

    def _touch(self, key: str) -> None:
        """Mark a document as in use; drop the trees of the least recently used ones."""
        self._hot[key] = None
        self._hot.move_to_end(key)
        too_big = self.settings.routing.syntax_max_bytes or float("inf")  # never get a tree
        count = size = 0
        for old in reversed(list(self._hot)):  # the most recent first
            st = self.documents.get(old)
            n = len(st.text.text) if st is not None else 0  # ~bytes: code is mostly ASCII
            if n > too_big:
                continue
            count, size = count + 1, size + n
            if old != key and (count > _TREES_KEPT or size > _TREE_BYTES_KEPT):
                del self._hot[old]
                if st is not None:
                    st.syntax.release_tree()

    @staticmethod
    def _is_acceptance(st: DocState, edits: Sequence[Edit]) -> str | None:
        """The decision id if `edits` insert the offered completion at its cursor.

        Editors apply an accepted item as one edit ending at the cursor (the
        completion fallback also replaces the word before it)."""
        if st.offer is None or len(edits) != 1:
            return None
        did, cursor, text = st.offer
        e = edits[0]
        if e.end == cursor and e.start is not None and e.text.endswith(text) and text:
            return did
        return None

    def close(self, uri: str) -> None:
        key = uri_key(uri)
        self._hot.pop(key, None)
        self.retention.close(key)  # what the document held last is its retention
        st = self.documents.pop(key, None)
        if st is not None and st.inner is not None:
            st.inner.cancel()
        if st is not None and self.index is not None and st.index_stale:
            self.index.update_from_disk(st.path)  # edits not saved are gone: disk is right

    def debounce_s(self, st: DocState) -> float:
        e = self.settings.editor
        base = e.debounce_ms / 1000
        if not e.adaptive_debounce or len(st.keystrokes) < 4:
            return base
        gaps = [b - a for a, b in itertools.pairwise(st.keystrokes) if b - a < 2.0]
        if len(gaps) < 3:
            return base
        # Wait a little longer than the user's usual pause between keystrokes.
        return min(max(1.5 * statistics.median(gaps), 0.03), base * 3)

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
        self._touch(key)
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
            repo = roots[0].rstrip("/").rsplit("/", 1)[-1] if roots else ""
            ctx = attrs.evolve(ctx, crossfile=cands, repo=repo)
        # Held until the request ends, so a settings change cannot close its backends.
        pipeline.hold()
        inner = asyncio.ensure_future(pipeline.complete(ctx))
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
        did = f"c{next(self._ids)}"
        self.decisions[did] = rec
        if self.settings.editor.ledger:
            self.ledger.decision(did, rec)
        while len(self.decisions) > _DECISIONS_KEPT:
            self.decisions.popitem(last=False)
        if st.generation != mine:
            return None
        end_line, _ = advance(line, character, rec.completion, self.encoding)
        st.last = (did, line, end_line)
        st.offer = (did, (line, character), rec.completion)
        word = word_before(text, offset)
        if rec.completion:
            st.shown = did
            if self.settings.editor.ledger:
                self.ledger.event("shown", did)
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
            card += f"\n- adaptive threshold now {self.adaptive.current:.3f}: {self.adaptive.why}"
        if did in self.accepted:
            card += "\n- accepted"
        return card

    def accept(self, did: str) -> bool:
        if did not in self.decisions:
            return False
        if did in self.accepted:
            return True  # the editor's edit and the accept command both report it
        self.accepted.add(did)
        for st in self.documents.values():
            if st.shown == did:
                st.shown = None
        self._resolve(did, accepted=True)
        log.info("accepted %s: %s", did, summary(self.decisions[did]))
        return True

    # -- learning from the user (acceptance, retention, adaptive threshold) ----
    def _resolve(self, did: str, *, accepted: bool) -> None:
        """A shown item was accepted, or dismissed by a newer request."""
        if self.settings.editor.ledger:
            self.ledger.event("accepted" if accepted else "dismissed", did)
        rec = self.decisions.get(did)
        if self.adaptive is None or rec is None or rec.confidence is None or rec.cache_hit:
            return
        move = self.adaptive.observe(rec.confidence, rec.route, accepted)
        if move is not None:
            log.info("adaptive threshold %s", move.why)
            if self.settings.editor.ledger:
                self.ledger.adaptive(move.old, move.new, move.why, self.adaptive.start)
            if self._pipeline is not None:
                self._pipeline.threshold_override = move.new

    def _retained(self, did: str, after: float, ratio: float, chars: int, closed: bool) -> None:
        if self.settings.editor.ledger:
            self.ledger.retained(did, after, ratio, chars, closed)

    def _sync_adaptive(self) -> None:
        """Adaptive mode follows the settings: built when turned on, re-bounded when its
        bounds change (a workspace may have lowered them), dropped when turned off."""
        r = self.settings.routing
        if not r.adaptive or r.policy not in ("synconf", "confidence"):
            self.adaptive = None
        elif self.adaptive is None:
            self.adaptive = Adaptive(
                r.threshold_for(self.settings.local.model),
                r.adaptive_min,
                r.adaptive_max,
                step=r.adaptive_step,
                every=r.adaptive_every,
            )
            self._resume_adaptive(self.adaptive)
        else:
            self.adaptive.rebound(r.adaptive_min, r.adaptive_max)
            self.adaptive.step, self.adaptive.every = r.adaptive_step, r.adaptive_every
        if self._pipeline is not None:
            self._pipeline.threshold_override = self.adaptive.current if self.adaptive else None

    def _resume_adaptive(self, a: Adaptive) -> None:
        """Carry on from the ledger's last move, if it began from today's configured
        threshold (a new one, e.g. from `calibrate`, starts afresh), and take the recent
        outcomes as evidence. Reads only the end of the file."""
        path = self.ledger.path
        if path is None or not self.settings.editor.ledger:
            return
        try:
            decisions, moves, _ = load_ledger(path, tail_bytes=2_000_000)
        except OSError:
            return  # no ledger yet
        observed = [
            (float(d["confidence"]), str(d["route"]), bool(d["accepted"]))
            for d in decisions
            if (d["accepted"] or d["dismissed"])
            and isinstance(d.get("confidence"), int | float)
            and not d.get("cache_hit")
        ]
        last = moves[-1] if moves else None
        if last is not None and last.get("start") == round(a.start, 4):
            a.resume(float(last["adaptive"]), str(last.get("why", "")), observed)
        else:
            a.resume(a.current, "", observed)

    def status(self) -> dict[str, Any]:
        recent = list(self.decisions.values())
        routes = {r: sum(1 for d in recent if d.route == r) for r in ("local", "remote", "none")}
        last = recent[-1] if recent else None
        return {
            "local_only": self.settings.privacy.local_only,
            "local": self.local_choice or self.settings.local.backend,
            "remote": (
                ", ".join(self.settings.remote.all_urls)
                if self.settings.remote.configured
                else "not configured"
            ),
            "policy": self.settings.routing.policy,
            "threshold": (
                self.adaptive.current if self.adaptive else self.settings.routing.threshold
            ),
            "adaptive": self.adaptive.status() if self.adaptive else None,
            "completions": len(recent),
            "routes": routes,
            "accepted": len(self.accepted),
            "last": summary(last) if last else None,
            "pid": os.getpid(),
            "local_worker": self._worker_status(),
        }

    def _worker_status(self) -> dict[str, Any] | None:
        """The embedded tier's worker process (llama.cpp runs there, not in the server)."""
        local = self._pipeline.local if self._pipeline is not None else None
        pid = getattr(local, "worker_pid", None)
        if local is None or pid is None:
            return None
        rss = local.worker_rss_bytes()  # type: ignore[attr-defined]
        return {
            "pid": pid,
            "rss_mb": round(rss / 2**20, 1) if rss else None,
            "restarts": getattr(local, "restarts", 0),
        }


def uri_key(uri: str) -> str:
    """One spelling per document: editors percent-encode URIs differently
    (`My%20Project`, `c%3A`, `%40types`) and pygls unquotes them. File URIs are
    decoded, re-encoded one way, with a lower-case Windows drive letter."""
    if not uri.startswith("file:"):
        return uri
    parts = urlsplit(uri)
    path = unquote(parts.path)
    if len(path) >= 3 and path[0] == "/" and path[2] == ":" and path[1].isalpha():
        path = "/" + path[1].lower() + path[2:]
    return f"file://{unquote(parts.netloc).lower()}{quote(path, safe='/:', errors='surrogatepass')}"


def path_of(uri: str) -> str:
    """The decoded file path of a file URI (`/c:/x` -> `c:/x`); other URIs as they are."""
    if not uri.startswith("file:"):
        return uri
    parts = urlsplit(uri)
    path = unquote(parts.path)
    if len(path) >= 3 and path[0] == "/" and path[2] == ":" and path[1].isalpha():
        path = path[1:]  # a Windows drive
    host = unquote(parts.netloc)
    return f"//{host}{path}" if host and host != "localhost" else path
