"""The names gate: does a completion use a name that is defined nowhere?

"Valid but wrong" is the class no syntax gate sees; a third of the small model's valid but
wrong completions use a name that resolves nowhere in the file (a guessed helper, a
misremembered variable), and almost no correct completion does. This check flags such a
name, and only such a name: where resolution is uncertain it passes.

Conservative by construction:
- a name used in the completion counts as defined when it occurs anywhere else in the file
  as a word not preceded by "." (a definition, a parameter, an import, but also a use, a
  comment or a string: all of them say the name is not the model's invention);
- names bound by the completion itself (assignment targets, loop variables, parameters,
  imports, `as` aliases, walrus, def/class names) count as defined;
- builtins, keywords and module dunders count as defined;
- a star import anywhere turns the check off for the file;
- attribute names (`x.name`) and keyword-argument names (`f(name=...)`) are not looked up;
- annotations Python never evaluates are not looked up: a local variable's (`x: Foo = 1`
  in a function), and every annotation under `from __future__ import annotations`;
- a completion next to a syntax error (an ERROR node in the smallest subtree around it,
  or above a name within its statement) passes: error recovery gives names roles they do
  not have.

C and C++ (`_cscope`): a name may come from an `#include` we cannot read, so "defined
nowhere" proves nothing there; what does is a name the file declares only as a local
variable, used where none of those declarations is in scope (a cut completion that dropped
the declaration, or the loop header, the user's next line needs). Java: not looked at (a
name may come from a package or a superclass we cannot see).
"""

from __future__ import annotations

import builtins
import keyword
import re

import attrs
import tree_sitter

from . import _cscope
from .languages import LANGUAGES as SPECS
from .languages import LanguageSpec, spec_of

# The languages with a names check (their spec's `names` rule).
LANGUAGES = frozenset(s.name for s in SPECS.values() if s.names is not None)

_PY_KNOWN = frozenset(
    [
        *dir(builtins),
        *keyword.kwlist,
        *keyword.softkwlist,
        "__name__",
        "__file__",
        "__doc__",
        "__builtins__",
        "__spec__",
        "__loader__",
        "__package__",
        "__path__",
        "__annotations__",
        "__dict__",
        "__class__",
        "__qualname__",
        "__module__",
        "__debug__",
        "reveal_type",  # typing's, known to checkers without an import
    ]
)
# Nodes under which every identifier is bound (or is a module name), never a plain use.
_BINDING_CONTAINERS = frozenset(
    {
        "parameters",
        "lambda_parameters",
        "import_statement",
        "import_from_statement",
        "future_import_statement",
        "global_statement",
        "nonlocal_statement",
        "case_pattern",
        "type_parameter",
    }
)
# (parent type, field) pairs whose subtree binds names.
_BINDING_FIELDS = {
    ("assignment", "left"),
    ("augmented_assignment", "left"),
    ("for_statement", "left"),
    ("for_in_clause", "left"),
    ("named_expression", "name"),
    ("as_pattern", "alias"),
    ("function_definition", "name"),
    ("class_definition", "name"),
    ("type_alias_statement", "left"),
}
# The parents whose child's field `_role` looks at.
_FIELD_PARENTS = frozenset({"attribute", *(t for t, _ in _BINDING_FIELDS)})
# Matched at the few places bytes.find points to: a regex over the whole file costs more
# than the rest of the check on a 2,500-line file.
_STAR_AFTER_IMPORT = re.compile(rb"[ \t]*\(?\s*\*")
_LAZY_AFTER_FUTURE = re.compile(rb"[ \t]+import\b[^\n]*\bannotations\b")
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _star_import(data: bytes) -> bool:
    i = data.find(b"import")
    while i >= 0:
        if (i == 0 or data[i - 1] not in _WORD) and _STAR_AFTER_IMPORT.match(data, i + 6):
            return True
        i = data.find(b"import", i + 6)
    return False


def _lazy_annotations(data: bytes) -> bool:
    i = data.find(b"__future__")
    while i >= 0:
        if _LAZY_AFTER_FUTURE.match(data, i + 10):
            return True
        i = data.find(b"__future__", i + 10)
    return False


# Occurrences of a word `_word_in` tests one by one before it asks a regex: a short name
# is inside many longer words (`x` ~700 times in click's core.py, ~0.7 ms a check).
_FINDS = 16


def _word_in(data: bytes, word: bytes, start: int, end: int) -> bool:
    """`word` occurs in data[start:end] as a whole word of `data` not preceded by "."."""
    i = data.find(word, start, end)
    for _ in range(_FINDS):
        if i < 0:
            return False
        j = i + len(word)
        before = data[i - 1] if i > 0 else 32
        if before not in _WORD and before != 46 and (j >= len(data) or data[j] not in _WORD):
            return True
        i = data.find(word, i + 1, end)
    if i < 0:
        return False
    # (the word first, for the regex's fast scan for it; the lookbehind sees before `i`;
    # the lookahead sees no further than `end`, which the occurrence that ends there
    # must check itself, and that one is the last)
    w = re.escape(word)
    pattern = re.compile(w + rb"(?<![A-Za-z0-9_.]" + w + rb")(?![A-Za-z0-9_])")
    found = pattern.search(data, i, end)
    if found is None:
        return False
    j = found.end()
    return j < end or j >= len(data) or data[j] not in _WORD


@attrs.frozen
class UnknownName:
    """A name the completion uses that resolves nowhere; offsets in the checked text."""

    name: str
    start: int
    end: int


def _field_of(parent: tree_sitter.Node, child: tree_sitter.Node) -> str | None:
    for i, c in enumerate(parent.children):  # (`children` builds a list: once)
        if c.start_byte == child.start_byte and c.end_byte == child.end_byte and c.id == child.id:
            return parent.field_name_for_child(i)
    return None


def _in_function(node: tree_sitter.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in ("function_definition", "lambda"):
            return True
        if parent.type == "class_definition":
            return False  # a class body's annotations are evaluated
        parent = parent.parent
    return False


def _role(node: tree_sitter.Node, lazy_annotations: bool) -> str:
    """ "use", "bind" or "skip" (attribute, keyword-argument name, unevaluated annotation)
    for an identifier."""
    parent = node.parent
    if parent is None:
        return "use"
    first = parent.type
    if first == "attribute" and _field_of(parent, node) == "attribute":
        return "skip"
    if first == "keyword_argument" and _field_of(parent, node) == "name":
        return "skip"
    child = node
    while parent is not None:
        ptype = parent.type
        if ptype in ("block", "module"):
            break
        if parent.is_error:
            return "skip"  # error recovery: the role is a guess
        if ptype in _BINDING_CONTAINERS:
            return "bind"
        if ptype in _FIELD_PARENTS:  # (the child's field matters only under these)
            field = _field_of(parent, child)
            if (ptype, field) in _BINDING_FIELDS:
                return "bind"
            if ptype == "attribute" and field == "attribute":
                return "skip"
        if child.type == "type" and (
            lazy_annotations or (ptype == "assignment" and _in_function(parent))
        ):
            return "skip"
        child, parent = parent, parent.parent
    return "use"


def _identifiers(node: tree_sitter.Node, lo: int, hi: int) -> list[tree_sitter.Node]:
    """The identifier nodes overlapping bytes [lo, hi)."""
    out: list[tree_sitter.Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.end_byte <= lo or n.start_byte >= hi:
            continue
        if n.type == "identifier":
            out.append(n)
            continue
        stack.extend(n.children)
    return out


_RUN = re.compile(rb"[A-Za-z0-9_]+")


def all_words_known(data: bytes, lo: int, hi: int) -> bool:
    """Whether every word the completion at [lo, hi) touches is known or occurs elsewhere
    in the file (the test below, by name), read from the bytes alone: then no identifier
    of it can be unknown, whatever its role, and the tree need not be walked. An
    identifier is a whole run of word characters here (a number's run, all digits, holds
    none); a run starting with a digit and holding letters (`1e5`, `0x1f`) or a
    non-ASCII byte near the completion (identifiers may hold letters beyond ASCII)
    leaves it to the walk."""
    a, b, n = lo, hi, len(data)
    while a > 0 and (data[a - 1] in _WORD or data[a - 1] >= 0x80):
        a -= 1
    while b < n and (data[b] in _WORD or data[b] >= 0x80):
        b += 1
    seg = data[a:b]
    if not seg.isascii():
        return False
    for m in _RUN.finditer(seg):
        raw = m.group()
        if raw[0] < 0x3A:  # a digit
            if raw.isdigit():
                continue
            return False
        if raw.decode() in _PY_KNOWN:
            continue
        if not (_word_in(data, raw, 0, lo) or _word_in(data, raw, hi, n)):
            return False
    return True


def undefined_names(
    language: str | LanguageSpec, tree: tree_sitter.Tree, data: bytes, lo: int, hi: int
) -> list[UnknownName]:
    """Names the completion at bytes [lo, hi) of `data` (parsed as `tree`) uses and that
    nothing in the file defines (C/C++: nothing in scope, see _cscope); empty when unsure
    or the language has no check."""
    rule = (language if isinstance(language, LanguageSpec) else spec_of(language)).names
    if rule == "scope":
        return [
            UnknownName(w.decode("utf-8", "replace"), a, b)
            for w, a, b in _cscope.out_of_scope(tree, data, lo, hi)
        ]
    if rule != "file" or hi <= lo or all_words_known(data, lo, hi) or _star_import(data):
        return []
    root = tree.root_node
    start = root.descendant_for_byte_range(lo, max(lo, hi - 1)) or root
    while start.parent is not None and (start.start_byte > lo or start.end_byte < hi):
        start = start.parent
    if start.has_error:
        return []
    lazy = _lazy_annotations(data)
    used: list[tree_sitter.Node] = []
    bound: set[bytes] = set()
    for ident in _identifiers(start, lo, hi):
        role = _role(ident, lazy)
        if role == "bind":
            bound.add(data[ident.start_byte : ident.end_byte])
        elif role == "use":
            used.append(ident)
    unknown: list[UnknownName] = []
    seen: set[bytes] = set()
    for ident in used:
        raw = data[ident.start_byte : ident.end_byte]
        if raw in seen or raw in bound:
            continue
        seen.add(raw)
        name = raw.decode("utf-8", "replace")
        if name in _PY_KNOWN:
            continue
        # Elsewhere in the file means outside the completion: a second use inside it
        # defines nothing.
        if _word_in(data, raw, 0, lo) or _word_in(data, raw, hi, len(data)):
            continue
        unknown.append(UnknownName(name, ident.start_byte, ident.end_byte))
    return unknown
