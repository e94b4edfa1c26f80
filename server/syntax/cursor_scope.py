"""What the cursor is in, from the tree-sitter node at it: a comment, a string, or code.

`completion.disabled_in` turns completions off in comments or strings (for people who
write prose there, and for screen-reader users whom a suggestion interrupts); the
session asks here before any model is asked.
"""

from __future__ import annotations

from typing import Literal

import tree_sitter

Scope = Literal["comment", "string"]
SCOPES: tuple[Scope, ...] = ("comment", "string")

# Grammar node types that hold a string literal's text, across our grammars (Python
# `string`, C/C++ `string_literal` / `raw_string_literal` / `char_literal`, Go
# `interpreted_string_literal`, JS/TS `template_string`, Rust `string_literal`, ...).
_STRING_WORDS = ("string", "char_literal", "character_literal", "heredoc")
# Parts of a string that are code: an f-string's or template's interpolation.
_CODE_IN_STRING = ("interpolation", "template_substitution", "format_expression")


def _is_comment(node_type: str) -> bool:
    return "comment" in node_type


def _is_string(node_type: str) -> bool:
    return any(w in node_type for w in _STRING_WORDS)


def scope_at(tree: tree_sitter.Tree, pos: int) -> Scope | None:
    """The scope holding byte offset `pos` (the cursor sits before byte `pos`).

    Inside a string means strictly between its first and last byte (after the closing
    quote is code again). A line comment holds the cursor at its end too: the cursor is
    still on the comment's line, typing it; a block comment (`*/`) does not."""
    root = tree.root_node
    for at in (pos, pos - 1) if pos > 0 else (pos,):
        node: tree_sitter.Node | None = root.descendant_for_byte_range(at, at)
        while node is not None and node is not root:
            kind = node.type
            if any(c in kind for c in _CODE_IN_STRING):
                break  # code inside a string: neither
            if _is_comment(kind):
                text = node.text or b""
                if node.start_byte < pos < node.end_byte:
                    return "comment"
                ends_line = text.endswith(b"\n") or text.rstrip().endswith(b"*/")
                if pos == node.end_byte and not ends_line:
                    return "comment"
            elif _is_string(kind) and node.start_byte < pos < node.end_byte:
                return "string"
            node = node.parent
    return None


__all__ = ["SCOPES", "Scope", "scope_at"]
