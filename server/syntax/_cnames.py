"""C, C++: statements tree-sitter reads without an error only by giving a name a role it
cannot have, where a completion's cut end is glued to the user's next line.

C++ cannot be parsed without knowing which names are types; tree-sitter guesses, and a cut
tail glued to the next statement often reads as a declaration: `scanf` + `a[i]=x;` is
`scanf a[i]=x;` (a variable `a` of type `scanf`), `m` + `ruim = 1;` is `m ruim = 1;`,
`ll n,` + `scanf("%d", &m);` declares a variable `scanf`, `vector<pair<` + `vector<ll>
v;` is one template type with its `<` unclosed, and `long long` + `bool f;` is one type
`long long bool`. The compilers reject each of them.

Only a declaration that overlaps the completion is looked at, and a name counts as no type
only on evidence: a C/C++ library function or stream (never a type, never a local's name),
or a name the file itself uses as a value (`m--`, `m = 0`, `m[i]`, `m.size()`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import tree_sitter

# Library functions and streams: no type has these names, and no code names a variable so.
LIBRARY_FUNCTIONS = frozenset(
    b"scanf printf puts gets fgets getchar putchar fprintf sprintf snprintf sscanf fscanf "
    b"cin cout cerr clog endl getline memset memcpy memmove strlen strcpy strcmp strcat "
    b"freopen fflush malloc calloc realloc free".split()
)


_DIRECTIVE = re.compile(rb"(?m)^[ \t]*#.*$")


def _binding(node: tree_sitter.Node) -> bool:
    inner = node.child_by_field_name("declarator") if node.type == "init_declarator" else node
    return inner is not None and inner.type == "structured_binding_declarator"


def value_names(data: bytes) -> Callable[[bytes], bool]:
    """Whether the file `data` uses a name as a value (memoized per name): a type is never
    followed by `[`, `=`, `++`, `--`, a compound assignment, `.` or `->` (`using T =` and
    a template's default `class T =` aside)."""
    seen: dict[bytes, bool] = {}
    code: list[bytes] = []  # the text without its directives (`#include <string.h>`)

    def is_value(name: bytes) -> bool:
        if not code:
            code.append(_DIRECTIVE.sub(b"", data))
        if name not in seen:
            word = re.escape(name)
            pattern = re.compile(
                rb"(?<![\w.:>])(?<!using )(?<!class )(?<!typename )"
                + word
                + rb"\s*(?:\[|=(?!=)|\+\+|--|[-+*/%|&^]=|->|\.(?=[A-Za-z_]))"
            )
            seen[name] = pattern.search(code[0]) is not None
        return seen[name]

    return is_value


def misread(
    tree: tree_sitter.Tree,
    window: bytes,
    focus: tuple[int, int],
    is_value: Callable[[bytes], bool] | None,
) -> tuple[int, str] | None:
    """(byte offset, message) of the first declaration overlapping `focus` (the completion's
    bytes in `window`) that reads a value as a type, declares a library name, or holds a
    template type whose `<` are not all closed; None when there is none."""
    lo, hi = focus
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.end_byte <= lo or node.start_byte >= hi:
            continue  # wholly outside the completion
        if node.type == "declaration":
            found = _declaration(node, window, is_value)
            if found is not None:
                return found
        elif node.type == "binary_expression":
            found = _template_compared(node, window, is_value)
            if found is not None:
                return found
        stack.extend(reversed(node.children))
    return None


# Class templates of the standard library: `vector<ll> v;` after a cut `cin >> w >>` reads
# as `((cin >> w >> vector) < ll) > v`, which the compilers, knowing `vector`, reject.
_TEMPLATES = frozenset(
    b"vector map set multiset multimap unordered_map unordered_set unordered_multimap "
    b"unordered_multiset pair tuple array deque list queue priority_queue stack bitset "
    b"basic_string optional variant function unique_ptr shared_ptr".split()
)


def _operator(node: tree_sitter.Node) -> bytes:
    op = node.child_by_field_name("operator")
    return op.type.encode() if op is not None else b""


def _template_compared(
    node: tree_sitter.Node, window: bytes, is_value: Callable[[bytes], bool] | None
) -> tuple[int, str] | None:
    """`T < A > B` with `T` a class template of the library the file never uses as a value:
    a comparison chained so is no code anyone writes; a declaration glued to a cut is."""
    left = node.child_by_field_name("left")
    if _operator(node) != b">" or left is None or left.type != "binary_expression":
        return None
    name = left.child_by_field_name("left")
    if _operator(left) != b"<" or name is None:
        return None
    if name.type == "binary_expression":
        name = name.child_by_field_name("right")  # `cin >> w >> vector`: its last operand
    if name is None or name.type != "identifier":
        return None
    word = window[name.start_byte : name.end_byte]
    if word not in _TEMPLATES or (is_value is not None and is_value(word)):
        return None
    return name.start_byte, f"'{word.decode()}' is a template: a declaration cannot go on here"


# What `long`, `short`, `signed`, `unsigned` may size, and with which of them.
_SIZABLE = {b"int": None, b"char": {b"signed", b"unsigned"}, b"double": {b"long"}}


def _sized(kind: tree_sitter.Node, window: bytes) -> tuple[int, str] | None:
    """`long long` + `bool flag;` reads as one type `long long bool`: tree-sitter takes any
    primitive type after the size words; the compilers take `int`, `char` (signed or
    unsigned) and `double` (long) only."""
    base = next((c for c in kind.children if c.type == "primitive_type"), None)
    if base is None:
        return None
    words = window[kind.start_byte : base.start_byte].split()
    name = window[base.start_byte : base.end_byte]
    allowed = _SIZABLE.get(name, set())
    if allowed is None or (words and all(w in allowed for w in words) and len(words) == 1):
        return None
    return base.start_byte, f"'{b' '.join(words).decode()}' specified with '{name.decode()}'"


def _declared_names(decl: tree_sitter.Node, window: bytes) -> list[bytes]:
    """The variables a declaration declares (`int r, a1 = 0, v[5], *p;`)."""
    out = []
    for d in decl.children_by_field_name("declarator"):
        node: tree_sitter.Node | None = d
        while node is not None and node.type in (
            "init_declarator",
            "array_declarator",
            "pointer_declarator",
            "reference_declarator",
        ):
            inner = node.child_by_field_name("declarator")
            if inner is None and node.type == "reference_declarator":
                inner = node.named_children[0] if node.named_children else None
            node = inner
        if node is not None and node.type == "identifier":
            out.append(window[node.start_byte : node.end_byte])
    return out


def _variable_before(node: tree_sitter.Node, name: bytes, window: bytes) -> bool:
    """Whether a declaration before `node`, in a block that holds it, declares a variable
    `name` (`int r, a1, a2;` then `a1 A[a2][r] = 1;`, a cut `a1` glued to the next line):
    a variable hides a type of that name in its scope."""
    child = node
    parent = node.parent
    while parent is not None:
        if parent.type == "compound_statement":
            sib = child.prev_named_sibling
            while sib is not None:
                if sib.type == "declaration" and name in _declared_names(sib, window):
                    return True
                sib = sib.prev_named_sibling
        child, parent = parent, parent.parent
    return False


def _declaration(
    node: tree_sitter.Node, window: bytes, is_value: Callable[[bytes], bool] | None
) -> tuple[int, str] | None:
    declarators = node.children_by_field_name("declarator")
    if any(_binding(d) for d in declarators):
        return None  # `a[i] = x, f();` read as a structured binding `a [i] = ...`: unsure
    kind = node.child_by_field_name("type")
    if kind is not None:
        name = window[kind.start_byte : kind.end_byte]
        if kind.type == "type_identifier" and (
            name in LIBRARY_FUNCTIONS
            or (is_value is not None and is_value(name))
            or _variable_before(node, name, window)
        ):
            return kind.start_byte, f"'{name.decode()}' is not a type"
        if kind.type == "template_type":
            opened = name.count(b"<") - name.count(b">")
            if opened > 0:
                return kind.end_byte, "expected '>'"
        if kind.type == "sized_type_specifier":
            found = _sized(kind, window)
            if found is not None:
                return found
    for child in declarators:
        ident: tree_sitter.Node | None = child
        if child.type == "init_declarator":
            ident = child.child_by_field_name("declarator")
        if ident is not None and ident.type == "identifier":
            name = window[ident.start_byte : ident.end_byte]
            if name in LIBRARY_FUNCTIONS:
                return ident.start_byte, f"declares '{name.decode()}'"
    return None
