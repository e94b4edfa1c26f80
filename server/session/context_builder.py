"""The context of one completion request: the window around the cursor, the syntax
anchor the gate checks against, and the other files' code (the workspace index, built
on first need, and the snippet cache live here). `Session` calls it; it knows nothing
of pipelines or of what the user did with completions.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from typing import Any

from synconfroute.clients.plan import FolderRules

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


async def in_daemon_thread(work: Callable[[], None], name: str) -> None:
    """Run `work` in a daemon thread and wait for it. Not `asyncio.to_thread`: the loop's
    executor threads are joined by asyncio.run and at interpreter exit, so one read
    stuck in the kernel (a FIFO once did it, a hung network mount still can) would hold
    the process after `exit`. A daemon thread never does."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if done.done():  # the waiter was cancelled
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    def run() -> None:
        error: BaseException | None = None
        try:
            work()
        except BaseException as exc:  # handed to the waiter, which logs or raises it
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle, error)

    threading.Thread(target=run, name=name, daemon=True).start()
    await done


@functools.lru_cache(maxsize=256)  # a pure function of the path; pathlib's is slow
def _file_uri(path: str) -> str | None:
    """The file URI of an absolute path; None for what has none (an untitled buffer's
    `untitled:Untitled-1`, which `Path.as_uri` refuses with a ValueError)."""
    try:
        return Path(path).as_uri()
    except ValueError:
        return None


def repo_name(path: str, roots: Sequence[str]) -> str:
    """The name repo-level prompts give the workspace (`<|repo_name|>`): the innermost
    open folder holding `path` (each folder is its own project); "" when none does."""
    holding = [r.rstrip("/") for r in roots if path.startswith(r.rstrip("/") + "/")]
    return max(holding, key=len).rsplit("/", 1)[-1] if holding else ""


class ContextBuilder:
    def __init__(
        self,
        docs: DocumentStore,
        roots: Callable[[], Sequence[str]],  # workspace folder URIs
        spawn: Spawn,
        folders: Callable[[Sequence[str]], tuple[FolderRules, ...]] = lambda roots: (),
    ) -> None:
        self._docs = docs
        self._roots = roots  # never_send patterns are relative to these folders
        self._spawn = spawn
        self._folders = folders  # each folder's own privacy settings, by folder path
        self._closed: list[str] = []  # paths closed lately (a didOpen may be their move)
        # The folder URIs last asked and their paths (`roots`: a pure function of them).
        self._last_roots: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        self._disk: dict[tuple[str, int, int], str] = {}  # closed files' text, by stat
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
        invoked: bool = False,
        settled: asyncio.Future[bool] | None = None,
    ) -> CompletionContext:
        """`window` completed: the syntax anchor, the workspace folders, with
        completion.context "workspace" the ranked cross-file candidates, and with
        completion.recent_edits the chunks changed lately in other files (`invoked`,
        `settled`: the request's own, see CompletionContext)."""
        text, version = snapshot
        anchor_doc = st.syntax
        if blocking_gate or st.text.version != version:
            # The check runs in a thread while edits may arrive, or edits came in since
            # the request: check against the request's text, in a copy of its own.
            # Lazy: parsed where the check runs (a thread), not here on the event loop.
            copy = Text(text, self._docs.encoding)
            anchor_doc = SyntaxDocument(copy, st.language or None, lazy=True)
        roots = self.roots()
        folders = self._folders(roots)
        crossfile_, edits = window.crossfile, window.recent_edits
        if settings.completion.context == "workspace":
            try:
                crossfile_ = self._crossfile(st, text, offset, settings)
            except Exception:  # context is a bonus: never fail the completion over it
                log.exception("cross-file context failed; completing with the file alone")
                crossfile_ = ()
        if settings.completion.recent_edits:
            chunks = self.recent.recent(exclude=st.path)
            edits = tuple([c for c in chunks if self._still_holds(c)]) if chunks else ()
        repo = repo_name(st.path, roots) if crossfile_ or edits else window.repo
        # One copy of the window, not one per field, and not `attrs.evolve` (its walk
        # over the fields costs more than the copy): every field named here
        # (tests/test_request_context_memo.py checks the list against the class).
        return CompletionContext(
            prefix=window.prefix,
            suffix=window.suffix,
            language=window.language,
            path=window.path,
            document=Anchor(anchor_doc, position),
            roots=roots,
            folders=folders,
            settings=settings,
            crossfile=crossfile_,
            recent_edits=edits,
            repo=repo,
            invoked=invoked,
            settled=settled,
        )

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

    def _still_holds(self, chunk: recent_edits.EditChunk) -> bool:
        """A recent edit of a file the editor no longer holds open feeds prompts only
        while the file on disk still holds it: moved, deleted or replaced, its chunks go
        (the content may now live under a private name)."""
        uri = _file_uri(chunk.path)
        if uri is None:  # not a file path (an untitled buffer): held while it is open
            if self._docs.holds_path(chunk.path):
                return True
        elif self._docs.document(uri) is not None:
            return True
        try:
            st = os.stat(chunk.path)
            key = (chunk.path, st.st_mtime_ns, st.st_size)
            text = self._disk.get(key)
            if text is None:
                with open(chunk.path, encoding="utf-8", errors="replace") as f:
                    text = f.read(4 * 2**20)
                self._disk = {key: text, **dict(list(self._disk.items())[:15])}
        except OSError:
            text = ""
        if chunk.text in text:
            return True
        self.recent.forget(chunk.path)
        return False

    def roots(self) -> tuple[str, ...]:
        uris = tuple(self._roots())
        last = self._last_roots
        if last[0] == uris:  # the folders open have not changed: their paths neither
            return last[1]
        paths = tuple(path_of(u) for u in uris if u.startswith("file:"))
        self._last_roots = (uris, paths)
        return paths

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

            self._spawn(in_daemon_thread(build, "synconfroute-index"))
        return self.index

    def _indexable(self, path: str) -> bool:
        """Only files inside a workspace folder feed the index (any, with no folder open)."""
        roots = self.roots()
        return not roots or egress.in_workspace(path, roots)

    def opened(self, st: DocState) -> None:
        # A new path opened while an old one was closed and is gone from disk: the editor
        # moved the file (no file events). The old name's code is forgotten.
        gone = [p for p in self._closed if p != st.path and not os.path.lexists(p)]
        self._closed = [p for p in self._closed if p not in gone]
        self.forget(gone)
        if self.index is not None and self._indexable(st.path):
            self.index.update(st.path, st.text.text, st.language or None)

    def forget(self, paths: Iterable[str]) -> None:
        """Files (or folders) moved or deleted: their index entries and recent-edit chunks
        go (what the old name held must not feed a prompt under it)."""
        for path in paths:
            prefix = path.rstrip("/") + "/"
            self.recent.forget(path)
            for chunk in self.recent.recent():
                if chunk.path.startswith(prefix):
                    self.recent.forget(chunk.path)
            if self.index is not None:
                self.index.remove(path)
                for known in self.index.paths_under(prefix):
                    self.index.remove(known)

    def renamed(self, moves: Sequence[tuple[str, str]]) -> None:
        """Files or folders renamed (old path, new path): the old names are forgotten,
        the new files read from disk where the editor does not hold them."""
        self.forget(old for old, _ in moves)
        if self.index is None:
            return
        for _, new in moves:
            held = self._docs.document(Path(new).as_uri()) is not None
            if not held and os.path.isfile(new) and self._indexable(new):
                self.index.update_from_disk(new)

    def saved(self, st: DocState) -> None:
        if self.index is not None and self._indexable(st.path):
            self.index.update(st.path, st.text.text, st.language or None)
            st.index_stale = False

    def closed(self, st: DocState) -> None:
        self._closed = [*self._closed[-15:], st.path]
        if self.index is not None and st.index_stale and self._indexable(st.path):
            self.index.update_from_disk(st.path)  # edits not saved are gone: disk is right

    async def files_changed(self, changes: Sequence[tuple[str, bool]]) -> None:
        """Watched files (uri, deleted?) changed on disk: re-read those the editor does
        not hold open (its text is newer), in a worker thread."""
        self.forget(path_of(u) for u, gone in changes if gone)
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

        await in_daemon_thread(apply, "synconfroute-watched-files")

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
        docs = self._docs
        # The documents edited last first (every one edited since it was opened, so
        # every one whose index entry is stale), then those never edited.
        others = docs.recent(max(8, docs.edited_count), exclude=st)
        for o in others:  # other documents edited since: their definitions moved
            if o.index_stale and self._indexable(o.path):
                index.update(o.path, o.text.text, o.language or None)
                o.index_stale = False

        ranked = functools.partial(  # no Python frame of its own: asked once, or twice
            crossfile.candidates,
            prefix=text[max(0, offset - 4000) : offset],
            suffix=text[offset : offset + 1000],
            path=st.path,
            language=st.language,
            index=index,
            open_docs=[(o.path, o.text.version, o.text.text) for o in others[:8]],
            snippets=self.snippets,
            full_prefix=text[: min(offset, 20000)],
        )
        found = ranked()
        if not found:
            return ()
        # A file not open whose entry is not what its file holds now (moved, replaced,
        # changed with no event): read again (gone: dropped) before it feeds a prompt.
        paths = {c.path for c in found}  # each file asked once, not once per candidate
        stale = {p for p in paths if not docs.holds_path(p) and not index.matches_disk(p)}
        for path in stale:
            index.update_from_disk(path)
        return tuple(ranked() if stale else found)
