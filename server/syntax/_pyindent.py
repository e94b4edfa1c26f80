"""Python indentation, which tree-sitter-python does not check.

Its scanner pops the indent stack until the column is not deeper, so a line dedented to a
column that matches no outer level ("unindent does not match any outer indentation level")
or a top-level line with leading spaces parses without an error. Python's rule is simple on
a tree: the statements of one suite start at the same column, a top-level statement at
column 0, and `elif`/`else`/`except`/`finally` at their statement's column. We check it
only where the completion is involved: a statement in the completion, or a suite whose
first statement is in the completion.
"""

from __future__ import annotations

import re

import tree_sitter

from ._treesitter import ErrorSite

_CLAUSES = frozenset(
    {"elif_clause", "else_clause", "except_clause", "except_group_clause", "finally_clause"}
)
_SKIP = frozenset({"comment", "ERROR", "line_continuation"})


def _starts_line(data: bytes, pos: int) -> bool:
    ls = data.rfind(b"\n", 0, pos) + 1
    return not data[ls:pos].strip()


def _previous_indent(data: bytes, pos: int) -> int:
    """Indentation width of the closest non-blank line above the one holding `pos`."""
    end = data.rfind(b"\n", 0, pos)
    while end > 0:
        start = data.rfind(b"\n", 0, end) + 1
        line = data[start:end]
        if line.strip():
            return len(line) - len(line.lstrip())
        end = start - 1
    return 0


# Which statement tree-sitter-python accepts on the right of an assignment and Python
# does not: `x = y += 1`, `x += y = 1`, `x += y += 1` (a line cut after "=" glued to the
# next line of the user's text).
_BAD_RIGHT = {
    "assignment": frozenset({"augmented_assignment"}),
    "augmented_assignment": frozenset({"assignment", "augmented_assignment"}),
}
_STATEMENT_EXTRAS = frozenset({"comment", "line_continuation", ";", "ERROR"})
# The statements `_statement_error` looks into (the others: never an error of its kind).
_CHECKED_STATEMENTS = frozenset({"assignment", "augmented_assignment", "delete_statement"})


def _glued(
    data: bytes, prev: tree_sitter.Node | None, child: tree_sitter.Node, lo: int, hi: int
) -> bool:
    """Two statements of one suite on one line with no ";" between them (tree-sitter-python
    inserts an invisible MISSING newline), where the completion wrote the seam: a cut
    completion whose last line runs into the user's next line."""
    if prev is None or prev.type in _STATEMENT_EXTRAS or child.type in _STATEMENT_EXTRAS:
        return False
    if prev.is_extra or child.is_extra or prev.end_byte > child.start_byte:
        return False
    if not (prev.end_byte <= hi and lo <= child.start_byte):
        return False
    seam = data[prev.end_byte : child.start_byte]
    return b"\n" not in seam and b"\r" not in seam and b";" not in seam and b"\\" not in seam


# Targets Python refuses where tree-sitter-python takes any expression: `a, b += 1`
# ("illegal expression for augmented assignment"), `del f(x)` ("cannot delete").
_NOT_AUGMENTABLE = frozenset(
    {"pattern_list", "tuple_pattern", "list_pattern", "expression_list", "tuple", "list"}
)


def _bad_target(node: tree_sitter.Node, lo: int, hi: int) -> ErrorSite | None:
    if node.type == "augmented_assignment":
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if left is None or right is None or left.type not in _NOT_AUGMENTABLE:
            return None
        start, end = left.start_byte, right.start_byte
    elif node.type == "delete_statement":
        targets = [c for c in node.named_children if c.type == "call"]
        if not targets:
            return None
        start, end = node.start_byte, targets[0].end_byte
    else:
        return None
    if not (start <= hi and lo <= end) or _spans_lines(node, start, end):
        return None  # the completion wrote none of it, or tree-sitter joined two lines
    return ErrorSite(start, start, False, "INDENT", "", "invalid syntax")


def _spans_lines(node: tree_sitter.Node, start: int, end: int) -> bool:
    """tree-sitter-python joins `s[0],` and `l += k` on the next line into one statement
    (Python does not): trust these checks only on one line."""
    rows = {node.start_point.row}
    for c in node.children:
        if start <= c.start_byte <= end:
            rows.add(c.start_point.row)
    return len(rows) > 1 or node.start_point.row != node.end_point.row


def _statement_error(node: tree_sitter.Node, lo: int, hi: int) -> ErrorSite | None:
    """What tree-sitter-python parses in a statement and Python refuses, where the
    completion wrote part of it."""
    bad = _BAD_RIGHT.get(node.type)
    right = node.child_by_field_name("right") if bad is not None else None
    if bad is None or right is None or right.type not in bad:
        return _bad_target(node, lo, hi)
    # Blame the completion only when it wrote part of the seam: from the outer operator
    # to the inner one.
    left = node.child_by_field_name("left")
    inner_left = right.child_by_field_name("left")
    start = left.end_byte if left is not None else node.start_byte
    end = inner_left.end_byte if inner_left is not None else right.start_byte
    if not (start <= hi and lo <= end) or _spans_lines(node, start, end):
        return None
    return ErrorSite(right.start_byte, right.start_byte, False, "INDENT", "", "invalid syntax")


# The statements of a suite that hold no suite of their own (tree-sitter-python's simple
# statements): nothing in one is a block, a clause or a statement of a suite.
_SIMPLE = frozenset(
    {
        "expression_statement",
        "return_statement",
        "pass_statement",
        "break_statement",
        "continue_statement",
        "raise_statement",
        "assert_statement",
        "import_statement",
        "import_from_statement",
        "future_import_statement",
        "global_statement",
        "nonlocal_statement",
        "print_statement",
        "exec_statement",
        "type_alias_statement",
    }
)
_DEL = re.compile(rb"\bdel\b")


def one_statement_sites(
    tree: tree_sitter.Tree, data: bytes, lo: int, hi: int
) -> list[ErrorSite] | None:
    """`indentation_sites` without walking the window, where the completion [lo, hi] is
    one line (no line break) written after code on its line and that line's code is all
    inside one simple statement of an error-free tree (None: elsewhere). Then no line
    starts inside or after the completion on its line (no column to check), no
    statement of a suite begins on the line but that one (nothing glued), and no block
    or clause begins on it (no empty block): only an assignment or a `del` Python
    refuses can be there, inside that statement, and only with a `=` or a `del` on the
    line."""
    if b"\n" in data[lo:hi] or tree.root_node.has_error:
        return None
    ls = data.rfind(b"\n", 0, lo) + 1
    le = data.find(b"\n", hi)
    line = data[ls : len(data) if le < 0 else le]
    if not data[ls:lo].strip():
        return None
    first = ls + len(line) - len(line.lstrip())
    last = ls + len(line.rstrip())
    # The smallest node holding the line's code, or the simple statement above it (in an
    # error-free tree a simple statement is a statement of a suite).
    node = tree.root_node.descendant_for_byte_range(first, last)
    while node is not None and node.type not in _SIMPLE:
        if node.type in ("block", "module"):
            return None
        node = node.parent
    if node is None or node.start_byte > first or node.end_byte < last:
        return None
    if b"=" not in line and not _DEL.search(line):
        return []
    sites: list[ErrorSite] = []
    stack = [node]
    while stack:  # (a statement away from [lo, hi] is none of the completion's doing)
        n = stack.pop()
        if n.type in _CHECKED_STATEMENTS and (site := _statement_error(n, lo, hi)) is not None:
            sites.append(site)
        stack.extend(c for c in n.children if c.start_byte <= hi and c.end_byte >= lo)
    sites.sort(key=lambda s: s.start)
    return sites


def indentation_sites(
    tree: tree_sitter.Tree, data: bytes, lo: int, hi: int, *, empty_blocks: bool = True
) -> list[ErrorSite]:
    """Indentation errors involving the inserted bytes [lo, hi] of `data`.

    `empty_blocks`: also report a block header in the completion with no body under it
    (only meaningful on a tree without errors: recovery leaves empty blocks behind).
    """
    found = one_statement_sites(tree, data, lo, hi)
    if found is not None:
        return found  # (the common case, a line's end completed: the walk below costs more)
    win_lo = data.rfind(b"\n", 0, lo) + 1
    nl = data.find(b"\n", hi)
    nl = data.find(b"\n", nl + 1) if nl >= 0 else -1
    win_hi = len(data) if nl < 0 else nl  # through the first line after the completion

    def inside(pos: int) -> bool:
        return lo <= pos <= hi

    def indented_by(pos: int) -> bool:
        """The completion wrote (part of) the indentation of the line starting at `pos`: a
        completion cut in an indentation run shifts the next line of the user's text."""
        if inside(pos):
            return True
        ls = data.rfind(b"\n", 0, pos) + 1
        return ls < hi <= pos and hi > lo

    sites: list[ErrorSite] = []
    stack = [tree.root_node]
    # (Each node's type, offsets and children are read once: every read builds an object.)
    while stack:
        node = stack.pop()
        ntype = node.type
        nstart = node.start_byte
        starts = _starts_line(data, nstart)
        ref_col: int | None = None
        ref_inside = False
        if ntype == "module":
            ref_col = 0
        elif ntype == "block" and starts:
            ref_col = node.start_point.column
            ref_inside = inside(nstart)
        clause_col: int | None = node.start_point.column if starts else None
        suite = ntype in ("block", "module")
        n = node.child_count
        # By index, and found by bisection: next_sibling skips empty nodes (an empty
        # block is what we look for) and first_child_for_byte crashes when no child
        # qualifies (py-tree-sitter 0.26).
        i, j = 0, n
        while i < j:
            mid = (i + j) // 2
            if node.child(mid).end_byte < win_lo:
                i = mid + 1
            else:
                j = mid
        prev: tree_sitter.Node | None = node.child(i - 1) if i > 0 else None
        for k in range(i, n):
            child = node.child(k)
            pos = child.start_byte
            if pos > win_hi:
                break
            if suite and _glued(data, prev, child, lo, hi):
                sites.append(ErrorSite(pos, pos, False, "INDENT", "", "invalid syntax"))
            prev = child
            if child.end_byte >= win_lo:
                ctype = child.type
                if ctype in _CHECKED_STATEMENTS:
                    site = _statement_error(child, lo, hi)
                    if site is not None:
                        sites.append(site)
                if (
                    ctype not in _SKIP
                    and not child.is_extra
                    and not child.is_missing
                    and _starts_line(data, pos)
                ):
                    col = child.start_point.column
                    if ref_col is not None and col != ref_col and (indented_by(pos) or ref_inside):
                        deeper_before = _previous_indent(data, pos) > col
                        note = (
                            "unindent does not match any outer indentation level"
                            if col < ref_col or deeper_before
                            else "unexpected indent"
                        )
                        sites.append(ErrorSite(pos, pos, False, "INDENT", "", note))
                    elif (
                        ctype in _CLAUSES
                        and clause_col is not None
                        and col != clause_col
                        and (indented_by(pos) or inside(nstart))
                    ):
                        note = f"'{ctype.split('_')[0]}' is not aligned with its statement"
                        sites.append(ErrorSite(pos, pos, False, "INDENT", "", note))
                if (
                    empty_blocks
                    and ctype == "block"
                    and child.named_child_count == 0
                    and (inside(pos) or indented_by(nstart))
                ):
                    # `if x:` with nothing under it: tree-sitter accepts an empty block
                    sites.append(
                        ErrorSite(pos, pos, False, "INDENT", "", "expected an indented block")
                    )
                if child.child_count:
                    stack.append(child)
    sites.sort(key=lambda s: s.start)
    return sites
