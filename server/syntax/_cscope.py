"""C, C++: a name used where no declaration of it is in scope.

A completion cut before its end often drops a declaration the user's next line needs (`ll
y = to[i], z = w[i];` cut away, then `d[y] = d[x] + z;`), or a loop header whose variable
the body uses (`for (int j = 0; ...)` cut, then `dist[i][j] = ...`), or stops inside a name.
The text parses; the compilers reject it for a name they cannot find.

A C/C++ name may come from a header, so this looks only in files that include nothing but
standard headers, and takes every name those declare as defined (`_cxxlibrary`, written
from the compilers' own headers by studies/cxx_library_names.py). A name used in the
completion, the rest of its last line or the user's next line of code is undeclared when
no declaration of it is in scope there (the blocks, statement headers, parameters and
captures that hold it) and the file declares it nowhere else but as a local variable of
other blocks, or nowhere at all.

Conservative by construction, every doubt passes:
- a use inside a function with a parse error, in a class body, or in a member function
  defined outside its class (`A::f`: members of a base we cannot see) is not looked up;
- a callee (`f(...)`), a qualified name (`std::x`), a member (`.x`, `->x`), a name in
  capitals (a macro, maybe from the command line), one reserved to the implementation
  (`__builtin_popcount`), or an argument of one of the file's function-like macros (`rep(i,
  0, n)` declares `i`) passes;
- a name declared at file scope, in a class, as a type, an enumerator or a macro, named in
  a macro's body, or inside a parse error counts as declared everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import tree_sitter

from ._cnames import LIBRARY_FUNCTIONS
from ._cxxlibrary import HEADERS, NAMES

_INCLUDE = re.compile(rb"#[ \t]*include[ \t]*[<\"]([^>\"\n]*)")
# Names no user declares: the headers', a macro's (capitals: maybe defined on the command
# line, `-DLOCAL`), those reserved to the implementation (`__builtin_popcount`, `_M_x`).
_RESERVED = re.compile(rb"[A-Z_][A-Z0-9_]*\Z|__|_[A-Z]")
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")

# Declarator wrappers between a declared identifier and its declaration.
_WRAPPERS = frozenset(
    {
        "init_declarator",
        "pointer_declarator",
        "reference_declarator",
        "array_declarator",
        "parenthesized_declarator",
        "structured_binding_declarator",
        "attributed_declarator",
    }
)
_PARAMETERS = frozenset(
    {"parameter_declaration", "optional_parameter_declaration", "variadic_parameter_declaration"}
)
# Statements whose header declares names for the whole statement.
_HEADED = frozenset(
    {"for_statement", "for_range_loop", "if_statement", "while_statement", "switch_statement"}
)
_FILE_SCOPE = frozenset({"translation_unit", "declaration_list", "linkage_specification"})


def _declared_by(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """If identifier `node` is the name a declarator declares: the node that declares it
    (declaration, parameter, for-range loop, lambda capture, field, enumerator, macro,
    function), else None."""
    child, parent = node, node.parent
    while parent is not None and parent.type in _WRAPPERS:
        field = _field(parent, child)
        if parent.type == "init_declarator" and field != "declarator":
            return None  # the value: `int x = y`
        if parent.type == "array_declarator" and field != "declarator":
            return None  # the size: `int a[n]`
        child, parent = parent, parent.parent
    if parent is None:
        return None
    field = _field(parent, child)
    if parent.type == "function_declarator":
        return parent if field == "declarator" else None
    if parent.type in ("declaration", "field_declaration", "for_range_loop") or (
        parent.type in _PARAMETERS
    ):
        return parent if field == "declarator" or child.type in _WRAPPERS else None
    if parent.type == "lambda_capture_initializer":
        return parent if field == "left" else None
    if parent.type in ("enumerator", "preproc_def", "preproc_function_def"):
        return parent if field == "name" else None
    if parent.type == "preproc_params":
        return parent
    return None


def _field(parent: tree_sitter.Node, child: tree_sitter.Node) -> str | None:
    for i, c in enumerate(parent.children):  # (`children` builds a list: once)
        if c.id == child.id:
            return parent.field_name_for_child(i)
    return None


def _scope_of(decl: tree_sitter.Node) -> tree_sitter.Node | None:
    """The node a local declaration is visible in (the declaration before it: in a block,
    from there on), or None for a declaration at file scope, in a class, a macro's."""
    if decl.type in ("field_declaration", "enumerator", "preproc_def", "preproc_function_def"):
        return None
    if decl.type in ("preproc_params", "function_declarator"):
        return None
    if decl.type == "lambda_capture_initializer":
        return _up_to(decl, ("lambda_expression",))
    if decl.type == "for_range_loop":
        return decl
    if decl.type in _PARAMETERS:
        owner = decl.parent.parent if decl.parent is not None else None  # the parameter list's
        if owner is None:
            return None
        if owner.type == "template_declaration":
            return owner
        if owner.type == "catch_clause":
            return owner
        if owner.type == "abstract_function_declarator":
            return _up_to(owner, ("lambda_expression",))
        if owner.type == "function_declarator":
            return _up_to(owner, ("function_definition", "declaration", "field_declaration"))
        return None
    # a declaration: in a block, a statement's header, or at file scope
    parent = decl.parent
    while parent is not None and parent.type in (
        "init_statement",
        "condition_clause",
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
    ):
        parent = parent.parent
    if parent is None or parent.type in _FILE_SCOPE or parent.type == "template_declaration":
        return None
    return parent


def _up_to(node: tree_sitter.Node, types: tuple[str, ...]) -> tree_sitter.Node | None:
    parent = node.parent
    while parent is not None and parent.type not in types:
        parent = parent.parent
    return parent


def _is_use(node: tree_sitter.Node) -> bool:
    """An identifier read as a value: not declared here, no callee, not qualified."""
    parent = node.parent
    if parent is None:
        return False
    if parent.type == "call_expression" and _field(parent, node) == "function":
        return False
    if parent.type in ("qualified_identifier", "template_function", "field_expression"):
        return parent.type == "field_expression" and _field(parent, node) == "argument"
    if parent.type in ("preproc_defined", "goto_statement", "labeled_statement"):
        return False
    return _declared_by(node) is None


def _enclosing_function(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The function definition `node` is in, or None where members may be in scope (a
    class body, `A::f`) or outside any function."""
    parent = node.parent
    found = None
    while parent is not None:
        if parent.type in ("field_declaration_list", "class_specifier", "struct_specifier"):
            return None
        if parent.type == "function_definition" and found is None:
            found = parent
        parent = parent.parent
    if found is None:
        return None
    decl = found.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    name = decl.child_by_field_name("declarator") if decl is not None else None
    if name is None or name.type != "identifier":
        return None  # `A::f`, an operator, a destructor: members of A are in scope
    return found


def _visible(use: tree_sitter.Node, name: bytes, data: bytes) -> bool:
    """Whether a declaration of `name` before `use` is in scope there (found by walking the
    blocks and statement headers that hold it)."""
    child, parent = use, use.parent
    while parent is not None:
        if parent.type in ("compound_statement", "case_statement") or parent.type.startswith(
            "preproc_"
        ):
            sib = child.prev_sibling
            while sib is not None:
                if _block_declares(sib, name, data):
                    return True
                sib = sib.prev_sibling
        elif parent.type in _HEADED or parent.type in (
            "catch_clause",
            "lambda_expression",
            "template_declaration",
            "function_definition",
            "declaration",  # `int n = strlen(s), r = n - 1;`
            "condition_clause",  # `if (int l = j - i; l > k)`
        ):
            for part in parent.children:
                if part.id == child.id:
                    break
                if part.type != "compound_statement" and _declares(part, name, data):
                    return True
        child, parent = parent, parent.parent
    return False


def _block_declares(node: tree_sitter.Node, name: bytes, data: bytes) -> bool:
    """Whether a statement of a block declares `name` for the statements after it: a
    declaration (also one under `#if`); a loop's or an `if`'s own names end with it."""
    if node.type == "declaration":
        return _declares(node, name, data)
    if node.type.startswith("preproc_"):
        return any(_block_declares(c, name, data) for c in node.children)
    return False


def _declares(node: tree_sitter.Node, name: bytes, data: bytes) -> bool:
    """Whether `node` (a statement, or a statement's header part) declares `name`."""
    if data.find(name, node.start_byte, node.end_byte) < 0:
        return False
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            if data[n.start_byte : n.end_byte] == name and _declared_by(n) is not None:
                return True
            continue
        if n.type in ("compound_statement", "lambda_expression") and n.id != node.id:
            continue  # its own block's names are not the statement's
        stack.extend(n.children)
    return False


def _occurrences(data: bytes, word: bytes) -> list[int]:
    """Where `word` occurs in `data` as a whole word."""
    pattern = re.compile(rb"(?<!\w)" + re.escape(word) + rb"(?!\w)")
    return [m.start() for m in pattern.finditer(data)]


def _declared_where(
    root: tree_sitter.Node,
    data: bytes,
    word: bytes,
    macros: set[bytes],
    skip: tuple[int, int] = (0, 0),
) -> str | None:
    """How the text `data` (parsed as `root`; bytes in `skip` left out) declares `word`:
    "local" (only as a local variable, somewhere), "none" (nowhere), or None when it may be
    in scope anywhere (declared at file scope, in a class, a macro, an enumerator; passed to
    one of the file's function-like macros; or a declaration the parser read inside a parse
    error)."""
    local = False
    for at in _occurrences(data, word):
        if skip[0] <= at < skip[1]:
            continue
        node = root.descendant_for_byte_range(at, at + len(word))
        if node is None or node.type in ("ERROR", "preproc_arg", "type_identifier"):
            return None  # a macro's body may declare it (`for (int k = 0; ...)`); a type
        if node.type not in ("identifier", "field_identifier"):
            continue  # a comment, a string
        if _up_to(node, ("ERROR",)) is not None:
            return None  # the parser's guess of its role
        decl = _declared_by(node)
        if decl is None:
            if _macro_argument(node, data, macros):
                return None
            continue
        if _scope_of(decl) is None:
            return None
        local = True
    return "local" if local else "none"


def _macro_argument(node: tree_sitter.Node, data: bytes, macros: set[bytes]) -> bool:
    if not macros:
        return False
    args = node.parent
    call = args.parent if args is not None and args.type == "argument_list" else None
    fn = call.child_by_field_name("function") if call is not None else None
    return fn is not None and data[fn.start_byte : fn.end_byte] in macros


def _function_macros(root: tree_sitter.Node, data: bytes) -> set[bytes]:
    out = set()
    for child in root.children:
        if child.type == "preproc_function_def":
            name = child.child_by_field_name("name")
            if name is not None:
                out.add(data[name.start_byte : name.end_byte])
    return out


def _region_end(data: bytes, hi: int) -> int:
    """The end of the user's next line of code after the completion's last line."""
    e = data.find(b"\n", hi)
    if e < 0:
        return len(data)
    pos = e + 1
    while pos < len(data):
        e = data.find(b"\n", pos)
        e = len(data) if e < 0 else e
        line = data[pos:e].strip()
        if line and not line.startswith((b"//", b"#", b"/*", b"*")):
            return e
        pos = e + 1
    return len(data)


def standard_headers_only(data: bytes) -> bool:
    """Whether every header the file includes is a standard one (whose names NAMES lists)."""
    return all(m.group(1).strip().decode("latin-1") in HEADERS for m in _INCLUDE.finditer(data))


Classify = Callable[[bytes], "str | None"]


def out_of_scope(
    tree: tree_sitter.Tree, data: bytes, lo: int, hi: int
) -> list[tuple[bytes, int, int]]:
    """(name, start, end) of the names used in the completion at bytes [lo, hi) of `data`
    (parsed as `tree`), the rest of its line or the next line of code, that no declaration
    in scope declares while the file declares them only as locals of other blocks, or
    nowhere and uses them nowhere else; empty when unsure."""
    if hi <= lo or not standard_headers_only(data):
        return []
    root = tree.root_node
    macros = _Lazy(lambda: _function_macros(root, data))
    return _scan(root, data, lo, hi, lambda w: _declared_where(root, data, w, macros()))


def out_of_scope_edit(
    parser: tree_sitter.Parser,
    tree: tree_sitter.Tree,
    before: bytes,
    after: bytes,
    span: tuple[int, int, int],
) -> list[tuple[bytes, int, int]]:
    """out_of_scope for the completion at `span` (start, old end, new end) of `before`
    (parsed as `tree`) that made `after`, without a parse of all of `after` (3-4 ms at
    2,500 lines of C++): only the function that holds the completion is parsed anew, up
    to the next definition (in a text broken at the cursor, the old tree may end the
    function early: its statements then run on as top-level errors)."""
    lo, old_end, hi = span
    if hi <= lo or not standard_headers_only(before):
        return []
    found = _definition_at(tree.root_node, lo)
    if found is None:
        return []
    fs, stop = found
    snippet = after[fs : stop + (hi - old_end) if stop >= old_end else hi]
    part = parser.parse(snippet).root_node
    root = tree.root_node
    macros = _Lazy(lambda: _function_macros(root, before))

    def classify(word: bytes) -> str | None:
        inside = _declared_where(part, snippet, word, macros())
        if inside is None:
            return None
        elsewhere = _declared_where(root, before, word, macros(), skip=(fs, stop))
        if elsewhere is None:
            return None
        return "local" if "local" in (inside, elsewhere) else "none"

    names = _scan(part, snippet, lo - fs, hi - fs, classify, whole=after, shift=fs)
    return [(w, a + fs, b + fs) for w, a, b in names]


class _Lazy:
    """The file's function-like macros, found on first use."""

    def __init__(self, make: Callable[[], set[bytes]]) -> None:
        self._make = make
        self._value: set[bytes] | None = None

    def __call__(self) -> set[bytes]:
        if self._value is None:
            self._value = self._make()
        return self._value


_CONTAINERS = frozenset({"namespace_definition", "linkage_specification"})
_DEFINITIONS = frozenset(
    {"function_definition", "template_declaration", "class_specifier", "struct_specifier"}
)


def _definition_at(root: tree_sitter.Node, pos: int) -> tuple[int, int] | None:
    """(start, end) of the function definition holding byte `pos` (or the last one before
    it, where the parser ended it early), the end being where the next definition starts;
    None where `pos` is in no function (a class's body, a declaration at file scope)."""
    node = root.descendant_for_byte_range(pos, pos)
    top = None  # the child of the file (or of a namespace's body) that holds `pos`
    while node is not None and node.parent is not None:
        if node.parent.type in ("translation_unit", "declaration_list"):
            top = node
            if node.type not in _CONTAINERS:
                break
        node = node.parent
    if top is None:  # between two children of the file: the one before
        top = next((k for k in reversed(root.children) if k.start_byte <= pos), None)
        if top is None:
            return None
    k: tree_sitter.Node | None = top
    while k is not None:  # back to the function the text at `pos` belongs to
        if k.type == "function_definition" or (
            k.type == "template_declaration"
            and any(c.type == "function_definition" for c in k.children)
        ):
            break
        if k.type in _DEFINITIONS or k.type in _CONTAINERS:
            return None  # (a class's body, a namespace: not a function's statements)
        if k.type == "declaration" and k.end_byte > pos:
            return None  # a declaration at file scope
        k = k.prev_sibling
    if k is None:
        return None
    nxt = top.next_sibling
    while nxt is not None and nxt.type not in _DEFINITIONS:
        nxt = nxt.next_sibling
    stop = nxt.start_byte if nxt is not None else (top.parent or root).end_byte
    return k.start_byte, stop


def _scan(
    root: tree_sitter.Node,
    data: bytes,
    lo: int,
    hi: int,
    classify: Classify,
    whole: bytes | None = None,
    shift: int = 0,
) -> list[tuple[bytes, int, int]]:
    """The names used in [lo, hi) of `data`, the rest of its line and the next line of
    code, that nothing in scope declares and `classify` calls "local", or "none" while they
    occur nowhere else in the whole text (`whole`, where `data` starts at `shift`)."""
    end = _region_end(data, hi)
    text = data if whole is None else whole
    damaged: bool | None = None
    out: list[tuple[bytes, int, int]] = []
    seen: set[bytes] = set()
    stack = [root.descendant_for_byte_range(lo, max(lo, end - 1)) or root]
    while stack:
        n = stack.pop()
        if n.end_byte <= lo or n.start_byte >= end:
            continue
        if n.type == "ERROR":
            continue
        if n.type != "identifier":
            stack.extend(reversed(n.children))
            continue
        word = data[n.start_byte : n.end_byte]
        if word in seen or _RESERVED.match(word) or not _is_use(n):
            continue
        seen.add(word)
        if word.decode("latin-1") in NAMES:
            continue
        fn = _enclosing_function(n)
        if fn is None or fn.has_error or _visible(n, word, data):
            continue
        where = classify(word)
        if where is None or (where == "none" and _outside(text, word, lo + shift, hi + shift)):
            continue  # (used elsewhere, declared nowhere: the user's lines may have lost it)
        if damaged is None:
            damaged = _damaged_above(root, data, lo)
        if damaged:
            return []
        out.append((word, n.start_byte, n.end_byte))
    return out


def _outside(data: bytes, word: bytes, lo: int, hi: int) -> bool:
    """Whether `word` occurs in `data` outside bytes [lo, hi)."""
    return any(not lo <= at < hi for at in _occurrences(data, word))


def _damaged_above(root: tree_sitter.Node, data: bytes, lo: int) -> bool:
    """Whether the statements before byte `lo`, in the blocks that hold it, show a line cut
    short: a parse error, or a local function declaration (`int` cut from `int tt;` reads
    on as `int scanf("%d", &tt);`, see _local_prototype). A declaration lost there leaves
    names undeclared that are no fault of the completion's."""
    node = root.descendant_for_byte_range(lo, lo)
    while node is not None and node.type != "function_definition":
        if node.type == "compound_statement":
            for sib in node.named_children:
                if sib.end_byte > lo:
                    break
                if sib.has_error or sib.is_missing or _local_prototype(sib, data):
                    return True
        node = node.parent
    return False


def _local_prototype(node: tree_sitter.Node, data: bytes) -> bool:
    """A declaration of a function, or of a variable named like a library function (`int
    scanf("%d", &t);` is direct initialization to tree-sitter), in a block."""
    if node.type != "declaration":
        return False
    for top in node.children_by_field_name("declarator"):
        d: tree_sitter.Node | None = top
        while d is not None and d.type in _WRAPPERS:
            d = d.child_by_field_name("declarator")
        if d is not None and d.type == "function_declarator":
            return True
        if d is not None and data[d.start_byte : d.end_byte] in LIBRARY_FUNCTIONS:
            return True
    return False
