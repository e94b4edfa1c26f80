"""The open documents: one text per document (LSP line rule, negotiated encoding), its
tree, the editor's keystroke rhythm, and which edit inserted the completion we offered.

Text enters here (didOpen, didChange) and is sanitised once, here: a lone surrogate
(legal in an LSP string, not encodable as UTF-8) becomes U+FFFD, which takes the same
units in every position encoding. Nothing downstream meets one.

Knows nothing of pipelines, settings files or the ledger: `Session` composes it.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import statistics
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import attrs

from ..learning import later
from ..learning.retention import minimal_edit
from ..settings import config
from ..syntax import SyntaxDocument, detect_language
from ..vocab.positions import Encoding, Text, scrub_surrogates

# Parse trees cost ~40x the text; keep them for the documents being completed in, as
# many as fit in both bounds (the current one's always, unless over syntax_max_bytes).
_TREES_KEPT = 16
_TREE_BYTES_KEPT = 8_000_000  # of text: about 320 MB of trees
# Freeing a tree takes time in its size (3,800 lines: ~1 ms): a large one is freed
# after the response (`learning.later`); a small one at once, cheaper than deferring.
_FREE_LATER_CHARS = 20_000

# Called for each edit of a watched document: (start, end, inserted length), offsets
# in the text before the edit.
FollowEdit = Callable[[int, int, int], None]


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
    # The task of the request running the pipeline now (its handler's own), and that
    # task once it was stopped here (superseded, its document closed): it answers None.
    inner: asyncio.Task[Any] | None = None
    stopped: asyncio.Task[Any] | None = None
    last: tuple[str, int, int] | None = None  # (decision id, first line, last line)
    offer: tuple[str, tuple[int, int], str] | None = None  # (id, cursor, text) last offered
    shown: str | None = None  # id of the item last shown, until accepted or replaced
    diagnostics_shown: bool = False
    index_stale: bool = False  # edited since the workspace index last read it
    edited: float = 0.0  # monotonic time of its last edit (recent documents rank first)


def stop_request(st: DocState) -> None:
    """Stop the request running the pipeline for `st`, if any: it answers None (a
    $/cancelRequest, by contrast, ends it with RequestCancelled)."""
    task = st.inner
    if task is not None and not task.done():
        st.stopped = task
        task.cancel()


@attrs.frozen
class Changed:
    """What `DocumentStore.change` did."""

    doc: DocState
    accepted: str | None  # the decision whose completion the edit inserted
    inserted_at: int  # offset just past the last range edit's text
    cleared: bool  # route diagnostics were shown: the editor should clear them


class DocumentStore:
    def __init__(self) -> None:
        self.encoding: Encoding = "utf-16"
        self.documents: dict[str, DocState] = {}
        # Documents whose tree is kept, least recently completed in first. Not a
        # cachetools cache: two bounds (count, bytes) over sizes that change with edits.
        self._hot: OrderedDict[str, None] = OrderedDict()
        # The documents edited since they were opened, by key, least recently edited
        # first (`recent` reads the latest without sorting every open document), and how
        # many open documents name each path (`holds_path`).
        self._edited: dict[str, None] = {}
        self._paths: dict[str, int] = {}

    def document(self, uri: str) -> DocState | None:
        """The open document behind `uri`, however the editor percent-encodes it."""
        return self.documents.get(uri_key(uri))

    def open(
        self, uri: str, text: str, language_id: str | None, path: str | None = None
    ) -> DocState:
        path = scrub_surrogates(path or path_of(uri))  # a URI may hold one too: prompts name it
        language = detect_language(language_id, path) or ""
        doc = Text(scrub_surrogates(text), self.encoding)
        # Lazy: a document gets its tree at its first completion, not at open.
        tree = SyntaxDocument(doc, language or None, lazy=True)
        key = uri_key(uri)
        self._forget(key)  # opened again: a new document, not edited yet
        st = self.documents[key] = DocState(uri, language, path, doc, tree)
        self._paths[path] = self._paths.get(path, 0) + 1
        return st

    def _forget(self, key: str) -> None:
        """`recent` and `holds_path` no longer count the document at `key`."""
        self._edited.pop(key, None)
        st = self.documents.get(key)
        if st is not None:
            left = self._paths.pop(st.path, 0) - 1
            if left > 0:
                self._paths[st.path] = left

    def holds_path(self, path: str) -> bool:
        """Whether an open document is the file at `path` (as `DocState.path` names it)."""
        return path in self._paths

    @property
    def edited_count(self) -> int:
        """How many open documents were edited since they were opened."""
        return len(self._edited)

    def recent(self, n: int, exclude: DocState | None = None) -> list[DocState]:
        """The `n` open documents edited last, `exclude` left out, the most recent first,
        then those never edited, in the order they were opened: what sorting them all by
        `-edited` gives (ties in the order opened), without sorting every open document
        (`edited` is set by `change` only, from a monotonic clock)."""
        docs = self.documents
        out: list[DocState] = []
        tie = False
        for key in reversed(self._edited):
            st = docs[key]
            if out and st.edited >= out[-1].edited:
                tie = tie or st.edited == out[-1].edited
                if st.edited > out[-1].edited:  # not from `change`: sort them all
                    return _sorted_recent(docs.values(), n, exclude)
            if st is not exclude:
                out.append(st)
        if tie:  # the same clock reading: as opened
            order = {id(st): i for i, st in enumerate(docs.values())}
            out.sort(key=lambda st: (-st.edited, order[id(st)]))
        if out and out[-1].edited <= 0:  # not from `change`: sort them all
            return _sorted_recent(docs.values(), n, exclude)
        if len(out) < n:
            for key, st in docs.items():
                if len(out) >= n:
                    break
                if st is not exclude and key not in self._edited:
                    out.append(st)
        return out[:n]

    def change(
        self, uri: str, edits: Sequence[Edit], follow: FollowEdit | None = None
    ) -> Changed | None:
        """Apply edits (LSP line rule, negotiated encoding) to the document's one text;
        its tree follows. `follow` sees each edit's offsets (retention watches them).
        None if the document is not open."""
        key = uri_key(uri)
        st = self.documents.get(key)
        if st is None:
            return None
        edits = [_scrubbed(e) for e in edits]
        accepted = self._is_acceptance(st, edits)
        inserted_at = 0
        for e in edits:
            if e.start is None or e.end is None:
                if follow is not None:  # follow the accepted regions through a whole-text sync
                    a, b, new = minimal_edit(st.text.text, e.text)
                    follow(a, b, len(new))
                st.syntax.replace_all(e.text)
            else:
                a = st.text.edit_offset(*e.start) if follow is not None or accepted else 0
                if follow is not None:
                    follow(a, st.text.edit_offset(*e.end), len(e.text))
                inserted_at = a + len(e.text)
                st.syntax.edit(e.start, e.end, e.text)
        st.keystrokes.append(time.monotonic())
        st.edited = st.keystrokes[-1]
        st.index_stale = True
        self._edited.pop(key, None)
        self._edited[key] = None  # the most recently edited last
        st.offer = None
        if accepted is None:
            st.last = None  # the completion's lines may have moved: no stale hover
        cleared, st.diagnostics_shown = st.diagnostics_shown, False
        return Changed(st, accepted, inserted_at, cleared)

    def close(self, uri: str) -> DocState | None:
        """Forget the document (its request in flight is cancelled); it, if it was open."""
        key = uri_key(uri)
        self._hot.pop(key, None)
        self._forget(key)
        st = self.documents.pop(key, None)
        if st is not None:
            stop_request(st)
        return st

    def diagnostics_published(self, uri: str) -> None:
        """A route diagnostic is on the editor's screen: the next edit clears it."""
        st = self.document(uri)
        if st is not None:
            st.diagnostics_shown = True

    def forget_shown(self, did: str) -> None:
        """The item `did` was accepted: no document shows it any longer."""
        for st in self.documents.values():
            if st.shown == did:
                st.shown = None

    def touch(self, key: str, syntax_max_bytes: int) -> None:
        """Mark a document as in use; drop the trees of the least recently used ones."""
        self._hot[key] = None
        self._hot.move_to_end(key)
        too_big = syntax_max_bytes or float("inf")  # never get a tree
        count = size = 0
        for old in reversed(list(self._hot)):  # the most recent first
            st = self.documents.get(old)
            n = len(st.text.text) if st is not None else 0  # ~bytes: code is mostly ASCII
            if n > too_big:
                continue
            count, size = count + 1, size + n
            if old != key and (count > _TREES_KEPT or size > _TREE_BYTES_KEPT):
                del self._hot[old]
                if st is None:
                    continue
                if n < _FREE_LATER_CHARS:
                    st.syntax.release_tree()
                else:  # after the response, unless the document is in use again by then
                    later.after_response(functools.partial(self._release, old, st))

    def _release(self, key: str, st: DocState) -> None:
        if key not in self._hot:
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


def _sorted_recent(docs: Iterable[DocState], n: int, exclude: DocState | None) -> list[DocState]:
    """`DocumentStore.recent` the plain way: every document sorted."""
    return sorted((st for st in docs if st is not exclude), key=lambda st: -st.edited)[:n]


def _scrubbed(e: Edit) -> Edit:
    """`e` with its lone surrogates (legal in an LSP string, not in UTF-8) as U+FFFD: the
    document model never holds one, so no encoder downstream (HTTP bodies, the ledger,
    logs) can fail on it."""
    text = scrub_surrogates(e.text)
    return e if text is e.text else Edit(text, e.start, e.end)


def debounce_s(st: DocState, editor: config.EditorSettings) -> float:
    """How long an automatic request waits for the next keystroke."""
    base = editor.debounce_ms / 1000
    if not editor.adaptive_debounce or len(st.keystrokes) < 4:
        return base
    gaps = [b - a for a, b in itertools.pairwise(st.keystrokes) if b - a < 2.0]
    if len(gaps) < 3:
        return base
    # Wait a little longer than the user's usual pause between keystrokes.
    return min(max(1.5 * statistics.median(gaps), 0.03), base * 3)


# Both are pure functions of the URI, asked several times per request (each a urlsplit
# and unquotes): the spellings of the documents and folders open are remembered.
@functools.lru_cache(maxsize=1024)
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


@functools.lru_cache(maxsize=1024)
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
