"""tree-sitter side of the gate: parse under a deadline, find error sites, and the differential.

The question is "does the completion INTRODUCE a syntax error?", not "is the file valid?":
buffers being edited are broken elsewhere, and tree-sitter-cpp reports errors around
function-like macros it cannot expand. So we compare the error sites of the text with the
completion ("after") against those of the text without it ("before"), see `introduced`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import attrs
import tree_sitter

# tree-sitter's progress callback (our deadline) exists only for the callback form of
# Parser.parse (py-tree-sitter 0.26 ignores it, with a warning, for bytes, and has no
# timeout_micros any more). But that form keeps one reference to every object the read
# callback returns, forever: slices of the text leaked one copy of the document per check.
# So the callback returns only a fixed set of views over one scratch buffer per thread,
# one view per power-of-two length: the leaked references pile up on those few objects,
# which live for the whole process anyway. tree-sitter needs a chunk only until its next
# read (py-tree-sitter relies on that too), so refilling the buffer is safe.
_CHUNK_BITS = 16  # chunks of up to 64 KB
# A text this small, with this much time left per byte, is parsed in one call (no read
# and progress callbacks: half the cost of a check's parse on a small file, cold): the
# worst inputs measured (unclosed brackets, `x = (1` lines, in the four grammars) took
# under 13 µs a byte up to 4 KB, so the budget holds without the progress callback.
_PLAIN_MAX_BYTES = 4096
_PLAIN_S_PER_BYTE = 2e-5
_scratch = threading.local()


def _views() -> list[memoryview]:
    """This thread's views [0:1], [0:2], [0:4] ... [0:64K] of its scratch buffer."""
    views: list[memoryview] | None = getattr(_scratch, "views", None)
    if views is None:
        whole = memoryview(bytearray(1 << _CHUNK_BITS))
        views = [whole[: 1 << k] for k in range(_CHUNK_BITS + 1)]
        _scratch.views = views
    return views


def _reader(data: bytes) -> Callable[[int, tree_sitter.Point], memoryview | bytes]:
    src = memoryview(data)
    size = len(data)
    views = _views()

    def read(offset: int, _point: tree_sitter.Point) -> memoryview | bytes:
        rest = size - offset
        if rest <= 0:
            return b""  # a cached singleton: its leaked references cost nothing
        view = views[min(_CHUNK_BITS, rest.bit_length() - 1)]
        view[:] = src[offset : offset + len(view)]
        return view

    return read


@attrs.frozen
class Splice:
    """Bytes [start, old_end) of the before text became [start, new_end) of the after text."""

    start: int
    old_end: int
    new_end: int

    @property
    def delta(self) -> int:
        return self.new_end - self.old_end


@attrs.frozen
class ErrorSite:
    """One ERROR or MISSING node, in byte offsets of the text it was parsed from."""

    start: int
    end: int
    missing: bool
    kind: str  # the missing node's type (e.g. ")" or "identifier"), "ERROR", or "INDENT"
    text: str  # first unexpected token (ERROR) or "" (MISSING)
    note: str = ""  # a message of its own (indentation)
    at: int = -1  # where to point the user (the culprit token); -1: start

    @property
    def where(self) -> int:
        return self.start if self.at < 0 else self.at

    def message(self) -> str:
        if self.note:
            return self.note
        if self.missing:
            k = self.kind
            return f"missing {k}" if k.isidentifier() else f"missing '{k}'"
        if not self.text:
            return "syntax error"
        return f"unexpected '{self.text}'"


def parse(
    parser: tree_sitter.Parser,
    data: bytes,
    old_tree: tree_sitter.Tree | None = None,
    deadline: float | None = None,
) -> tree_sitter.Tree | None:
    """Parse `data` (incrementally from an edited `old_tree`); None if `deadline` passed.

    `deadline` is a `time.monotonic()` instant.
    """
    if deadline is None:
        return parser.parse(data) if old_tree is None else parser.parse(data, old_tree)
    left = deadline - time.monotonic()
    if left < 0:
        return None
    if len(data) <= _PLAIN_MAX_BYTES and len(data) * _PLAIN_S_PER_BYTE <= left:
        return parser.parse(data) if old_tree is None else parser.parse(data, old_tree)
    read = _reader(data)
    halted = False

    def progress(_offset: int, _has_error: bool) -> bool:
        nonlocal halted
        if time.monotonic() > deadline:
            halted = True
        return halted

    try:
        if old_tree is None:
            return parser.parse(read, progress_callback=progress)
        return parser.parse(read, old_tree, progress_callback=progress)
    except ValueError:
        if not halted:
            raise
        # A halted parser resumes on its next call unless reset; we want a fresh start.
        parser.reset()
        return None


def _culprit(node: tree_sitter.Node) -> tree_sitter.Node:
    """The token an ERROR node most likely complains about: its first direct child that is
    a bare token (the subtrees before it parsed fine), else its first token."""
    for k in range(node.child_count):
        c = node.child(k)
        if c.child_count == 0 and not c.is_extra and c.end_byte > c.start_byte:
            return c
    while node.child_count:
        node = node.child(0)
    return node


def _short(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= 24 else text[:21] + "..."


def blame(site: ErrorSite, tree: tree_sitter.Tree, data: bytes, splice: Splice) -> ErrorSite:
    """The site as the user should see it: an ERROR region that starts in their own text
    before the completion is reported at the completion's first token instead."""
    if site.missing or site.kind != "ERROR" or not site.where < splice.start < site.end:
        return site
    pos = splice.start
    stop = min(site.end, splice.new_end)
    while pos < stop and data[pos] in b" \t\r\n":
        pos += 1
    node = tree.root_node.descendant_for_byte_range(pos, pos)
    while node is not None and node.child_count:
        inner = None
        for k in range(node.child_count):
            c = node.child(k)
            if c.start_byte <= pos < c.end_byte:
                inner = c
                break
        if inner is None:
            break
        node = inner
    text = _short(data[node.start_byte : node.end_byte]) if node is not None else ""
    return ErrorSite(site.start, site.end, False, "ERROR", text or site.text, at=pos)


def collect_sites(tree: tree_sitter.Tree, data: bytes) -> list[ErrorSite]:
    """ERROR and MISSING nodes of `tree` (parsed from `data`), sorted by position; visits only
    subtrees with errors."""
    root = tree.root_node
    if not root.has_error:
        return []
    sites: list[ErrorSite] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing:
            sites.append(ErrorSite(node.start_byte, node.end_byte, True, node.type, ""))
            continue
        if node.is_error:
            tok = _culprit(node)
            # Not tok.text: it crashes (py-tree-sitter 0.26) on trees parsed from a callback.
            text = _short(data[tok.start_byte : tok.end_byte])
            sites.append(
                ErrorSite(node.start_byte, node.end_byte, False, "ERROR", text, at=tok.start_byte)
            )
        if node.has_error:
            stack.extend(node.children)
    sites.sort(key=lambda s: (s.start, s.end))
    return sites


def _map_before(site: ErrorSite, splice: Splice) -> list[tuple[int, int]]:
    """Where a before-text site can sit in the after text (two places when it is ambiguous)."""
    s, e = site.start, site.end
    d = splice.delta

    def shift(pos: int) -> int:
        return pos if pos < splice.start else max(pos + d, splice.start)

    if e < splice.start or (e == splice.start and s < e):
        return [(s, e)]
    if s > splice.old_end or (s == splice.old_end and s > splice.start):
        return [(s + d, e + d)]
    # Touches or overlaps the replaced range: it may stay at the left edge or move right.
    if s == e == splice.start == splice.old_end:
        return [(s, s), (s + d, s + d)]
    lo = min(s, splice.start)
    return [(lo, max(shift(e), splice.new_end) if e > splice.start else e)]


def _overlap(a0: int, a1: int, b0: int, b1: int) -> bool:
    return a0 <= b1 and b0 <= a1


def introduced(
    after: Sequence[ErrorSite],
    before: Sequence[ErrorSite],
    splice: Splice,
    before_data: bytes,
    *,
    enclosing_is_old: bool = True,
) -> list[ErrorSite]:
    """After-text error sites that the completion is responsible for.

    A site that touches the inserted text [start, new_end] is introduced unless the before
    text had the very same site (same kind, same mapped range): the completion sits inside
    it. A site away from the completion is introduced only when no before-site overlaps its
    mapped place: error recovery reshapes pre-existing errors, so away from the completion
    we match loosely, next to it strictly.
    """
    if not after:
        return []
    if enclosing_is_old:
        # The cursor sits in an error region that began two or more lines above its line:
        # the parser was lost before it got to the completion, whose own errors are noise.
        ls = before_data.rfind(b"\n", 0, splice.start) + 1
        prev = before_data.rfind(b"\n", 0, max(ls - 1, 0)) + 1 if ls else 0
        if any(b.start < prev and ls <= b.end and not b.missing for b in before):
            return []
    mapped = [(b, _map_before(b, splice)) for b in before]
    out: list[ErrorSite] = []
    for a in after:
        touches = _overlap(a.start, a.end, splice.start, splice.new_end)
        if touches:
            same = any(
                b.missing == a.missing
                and b.kind == a.kind
                and (
                    (a.start, a.end) in places
                    # an error region that began in the user's text before the completion
                    # and now merely runs on over it
                    or (
                        not a.missing
                        and b.start == a.start
                        and b.end < splice.start
                        and b"\n" in before_data[b.end : splice.start]
                    )
                )
                for b, places in mapped
            )
            if not same:
                out.append(a)
        else:
            near = any(
                _overlap(a.start, a.end, p0, p1) for _, places in mapped for p0, p1 in places
            )
            if not near:
                out.append(a)
    return out
