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


def indentation_sites(
    tree: tree_sitter.Tree, data: bytes, lo: int, hi: int, *, empty_blocks: bool = True
) -> list[ErrorSite]:
    """Indentation errors involving the inserted bytes [lo, hi] of `data`.

    `empty_blocks`: also report a block header in the completion with no body under it
    (only meaningful on a tree without errors: recovery leaves empty blocks behind).
    """
    win_lo = data.rfind(b"\n", 0, lo) + 1
    nl = data.find(b"\n", hi)
    nl = data.find(b"\n", nl + 1) if nl >= 0 else -1
    win_hi = len(data) if nl < 0 else nl  # through the first line after the completion

    def inside(pos: int) -> bool:
        return lo <= pos <= hi

    sites: list[ErrorSite] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        ref_col: int | None = None
        ref_inside = False
        if node.type == "module":
            ref_col = 0
        elif node.type == "block" and _starts_line(data, node.start_byte):
            ref_col = node.start_point.column
            ref_inside = inside(node.start_byte)
        clause_col: int | None = None
        if _starts_line(data, node.start_byte):
            clause_col = node.start_point.column
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
        for k in range(i, n):
            child = node.child(k)
            if child.start_byte > win_hi:
                break
            if child.end_byte >= win_lo:
                pos = child.start_byte
                if (
                    not child.is_extra
                    and not child.is_missing
                    and child.type not in _SKIP
                    and _starts_line(data, pos)
                ):
                    col = child.start_point.column
                    if ref_col is not None and col != ref_col and (inside(pos) or ref_inside):
                        deeper_before = _previous_indent(data, pos) > col
                        note = (
                            "unindent does not match any outer indentation level"
                            if col < ref_col or deeper_before
                            else "unexpected indent"
                        )
                        sites.append(ErrorSite(pos, pos, False, "INDENT", "", note))
                    elif (
                        child.type in _CLAUSES
                        and clause_col is not None
                        and col != clause_col
                        and (inside(pos) or inside(node.start_byte))
                    ):
                        note = f"'{child.type.split('_')[0]}' is not aligned with its statement"
                        sites.append(ErrorSite(pos, pos, False, "INDENT", "", note))
                if (
                    empty_blocks
                    and child.type == "block"
                    and child.named_child_count == 0
                    and inside(pos)
                ):
                    # `if x:` with nothing under it: tree-sitter accepts an empty block
                    sites.append(
                        ErrorSite(pos, pos, False, "INDENT", "", "expected an indented block")
                    )
                if child.child_count:
                    stack.append(child)
    sites.sort(key=lambda s: s.start)
    return sites
