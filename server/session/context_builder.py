"""The context of one completion request: the window around the cursor, the syntax
anchor the gate checks against, and the other files' code (the workspace index, built
on first need, and the snippet cache live here). `Session` calls it; it knows nothing
of pipelines or of what the user did with completions.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import attrs

from ..routing.context import make_context
from ..routing.request import Anchor, CompletionContext
from ..settings import config
from ..syntax import SyntaxDocument
from ..vocab.positions import Text
from ..workspace import crossfile, egress, recent_edits
from ..workspace.documents import DocState, DocumentStore, Edit, path_of
from ..workspace.workspace_index import WorkspaceIndex

log = logging.getLogger(__name__)

Spawn = Callable[[Coroutine[Any, Any, None]], None]  # the session runs it, awaits it at shutdown


class ContextBuilder:
    def __init__(
        self,
        docs: DocumentStore,
        roots: Callable[[], Sequence[str]],  # workspace folder URIs
        spawn: Spawn,
    ) -> None:
        self._docs = docs
        self._roots = roots  # never_send patterns are relative to these folders
        self._spawn = spawn
        # Cross-file context (completion.context = "workspace"): built on first need.
        self.index: WorkspaceIndex | None = None
        self._index_stop = threading.Event()
        self.snippets = crossfile.SnippetCache()
        self.recent = recent_edits.RecentEdits()  # chunks changed lately, any open file

    # -- the request's context --------------------------------------------------
    @staticmethod
    def window(st: DocState, offset: int, settings: config.Settings) -> CompletionContext:
        """The prefix and suffix around `offset`, cut when the request arrives."""
        return make_context(
            st.text,
            offset,
            context_lines=settings.completion.context_lines,
            language=st.language,
            path=st.path,
        )

    def build(
        self,
        window: CompletionContext,
        st: DocState,
        snapshot: tuple[str, int],  # the request's (text, version)
        offset: int,
        position: tuple[int, int],
        settings: config.Settings,
        *,
        blocking_gate: bool,
    ) -> CompletionContext:
        """`window` completed: the syntax anchor, the workspace folders, with
        completion.context "workspace" the ranked cross-file candidates, and with
        completion.recent_edits the chunks changed lately in other files."""
        text, version = snapshot
        anchor_doc = st.syntax
        if blocking_gate or st.text.version != version:
            # The check runs in a thread while edits may arrive, or edits came in since
            # the request: check against the request's text, in a copy of its own.
            # Lazy: parsed where the check runs (a thread), not here on the event loop.
            copy = Text(text, self._docs.encoding)
            anchor_doc = SyntaxDocument(copy, st.language or None, lazy=True)
        ctx = attrs.evolve(window, document=Anchor(anchor_doc, position))
        roots = self.roots()
        ctx = attrs.evolve(ctx, roots=roots)
        if settings.completion.context == "workspace":
            try:
                cands = self._crossfile(st, text, offset, settings)
            except Exception:  # context is a bonus: never fail the completion over it
                log.exception("cross-file context failed; completing with the file alone")
                cands = ()
            ctx = attrs.evolve(ctx, crossfile=cands)
        if settings.completion.recent_edits:
            ctx = attrs.evolve(ctx, recent_edits=tuple(self.recent.recent(exclude=st.path)))
        if ctx.crossfile or ctx.recent_edits:
            repo = roots[0].rstrip("/").rsplit("/", 1)[-1] if roots else ""
            ctx = attrs.evolve(ctx, repo=repo)
        return ctx

    def changed(
        self, st: DocState, old: str, edits: Sequence[Edit], settings: config.Settings
    ) -> None:
        """`st` changed from `old` by `edits`: feed the recent-edits ring (context for
        other files' prompts)."""
        if not settings.completion.recent_edits or not edits:
            return
        new = st.text.text
        for e in edits:
            if e.start is None:
                first, last = recent_edits.lines_of_sync(old, new)
            else:
                first, last = recent_edits.lines_of_range_edit(e.start[0], e.text)
            self.recent.note(st.path, new, first, last, old if len(edits) == 1 else None)

    def roots(self) -> tuple[str, ...]:
        return tuple(path_of(u) for u in self._roots() if u.startswith("file:"))

    # -- the workspace index ------------------------------------------------------
    def start_index(self, settings: config.Settings) -> WorkspaceIndex | None:
        """The workspace index, its build started in a worker thread on first call
        (completions never wait for it); None when completion.context is "file"."""
        c = settings.completion
        if c.context != "workspace":
            return None
        if self.index is None:
            index = WorkspaceIndex(
                max_files=c.index_max_files,
                max_file_bytes=c.index_max_file_kb * 1024,
                max_bytes=c.index_max_mb * 2**20,
            )
            self.index = index
            for st in self._docs.documents.values():
                if self._indexable(st.path):
                    index.update(st.path, st.text.text, st.language or None)
            roots = self.roots()
            skip = [st.path for st in self._docs.documents.values()]

            def build() -> None:
                index.build(roots, skip=skip, stop=self._index_stop)
                log.info("workspace index: %s", index.figures())

            self._spawn(asyncio.to_thread(build))
        return self.index

    def _indexable(self, path: str) -> bool:
        """Only files inside a workspace folder feed the index (any, with no folder open)."""
        roots = self.roots()
        return not roots or egress.in_workspace(path, roots)

    def opened(self, st: DocState) -> None:
        if self.index is not None and self._indexable(st.path):
            self.index.update(st.path, st.text.text, st.language or None)

    def saved(self, st: DocState) -> None:
        if self.index is not None and self._indexable(st.path):
            self.index.update(st.path, st.text.text, st.language or None)
            st.index_stale = False

    def closed(self, st: DocState) -> None:
        if self.index is not None and st.index_stale and self._indexable(st.path):
            self.index.update_from_disk(st.path)  # edits not saved are gone: disk is right

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
            if self._docs.document(u) is None and (gone or egress.in_workspace(path_of(u), roots))
        ]

        def apply() -> None:
            for path, gone in todo:
                if gone:
                    index.remove(path)
                else:
                    index.update_from_disk(path)

        await asyncio.to_thread(apply)

    def stop(self) -> None:
        """No index build outlives the server."""
        self._index_stop.set()

    def _crossfile(
        self, st: DocState, text: str, offset: int, settings: config.Settings
    ) -> tuple[crossfile.Candidate, ...]:
        """Ranked context candidates for a cursor at `offset` of `text` (the request's
        snapshot of `st`)."""
        index = self.start_index(settings)
        if index is None:
            return ()
        documents = self._docs.documents.values()
        others = sorted((o for o in documents if o is not st), key=lambda o: -o.edited)
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
