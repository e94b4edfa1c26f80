"""The workspace index: the definitions of a workspace's symbols, found with tree-sitter.

Functions, classes (and interfaces, structs, enums, type aliases), methods, fields and
top-level constants of every language the syntax gate knows, each with its name and
the first lines of its definition. Cross-file context (server/workspace/crossfile.py) looks names
up here. Pure: no pygls, no asyncio; the session builds it in a worker thread and keeps
it current from the editor's notifications.

Bounded: files over `max_file_bytes`, files past `max_files`, and definitions past
`max_bytes` of stored text are left out (and counted in `skipped`). `.gitignore` files
are honoured (with `!` negation), and the usual tool folders are never entered. Files
are read through `files.read_regular` only: a FIFO, a device or a socket is never read
(counted in `special`).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Collection, Iterable, Iterator

import attrs
import tree_sitter

from ..syntax.languages import UnsupportedLanguage, detect_language, parser_for
from . import privacy
from .files import GITIGNORE_MAX_BYTES, NotRegular, read_regular, read_regular_text

# Never source, often huge.
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache"}
)
DEF_LINES = 12  # lines of a definition kept: its signature, doc and first statements
DEF_CHARS = 800
# What a symbol costs besides its text (the record, its name, the lookup lists), measured
# with tracemalloc by bench/crossfile.py: `max_bytes` bounds the whole.
SYMBOL_OVERHEAD = 320


@attrs.frozen
class Symbol:
    name: str
    kind: str  # function | class | method | field | constant
    path: str  # absolute, '/'-separated
    line: int  # 0-based line of the definition
    text: str  # the definition's first lines (DEF_LINES, DEF_CHARS)


@attrs.frozen
class FileEntry:
    path: str
    language: str
    symbols: tuple[Symbol, ...]
    size: int  # bytes of the source
    stored: int  # bytes it costs the index, estimated (text + SYMBOL_OVERHEAD a symbol)
    # (modification time, size) of the file when read from disk; None: from an editor
    # buffer. A file whose stamp no longer matches is read again before it feeds a prompt.
    stamp: tuple[int, int] | None = None


# -- extraction ----------------------------------------------------------------------

_CLASS_TYPES = {
    # python
    "class_definition",
    # java
    "class_declaration",
    "interface_declaration",
    "enum_declaration",
    "record_declaration",
    "annotation_type_declaration",
    # c / c++
    "struct_specifier",
    "class_specifier",
    "union_specifier",
    "enum_specifier",
    "type_definition",
    # js / ts
    "abstract_class_declaration",
    "type_alias_declaration",
    # go
    "type_spec",
    # rust
    "struct_item",
    "enum_item",
    "trait_item",
    "type_item",
    "union_item",
}
_FUNCTION_TYPES = {
    "function_definition",  # python, c, c++
    "function_declaration",  # js, ts, go
    "generator_function_declaration",
    "function_item",  # rust
    "function_signature_item",
    "macro_definition",
    "preproc_function_def",
}
_METHOD_TYPES = {"method_declaration", "constructor_declaration", "method_definition"}
_FIELD_TYPES = {"field_declaration", "public_field_definition", "field_definition"}
_CONST_TYPES = {"const_item", "static_item", "const_spec", "preproc_def"}
# Nodes whose children may hold definitions (bodies, wrappers, namespaces).
_CONTAINERS = {
    "module",
    "program",
    "translation_unit",
    "source_file",
    "block",  # python class body
    "class_body",
    "interface_body",
    "enum_body",
    "enum_body_declarations",
    "record_declaration_body",
    "field_declaration_list",
    "declaration_list",
    "decorated_definition",
    "export_statement",
    "namespace_definition",
    "linkage_specification",
    "template_declaration",
    "preproc_ifdef",
    "preproc_if",
    "preproc_else",
    "impl_item",
    "type_declaration",
    "const_declaration",
    "var_declaration",
    "mod_item",
    "internal_module",
    "statement_block",
    "object_type",
    "interface_declaration",
}
_CLASS_BODIES = {"impl_item", "class_body", "field_declaration_list"}
_NAME_TYPES = {
    "identifier",
    "type_identifier",
    "field_identifier",
    "property_identifier",
    "private_property_identifier",
    "destructor_name",
    "operator_name",
}


def _name(node: tree_sitter.Node) -> tree_sitter.Node | None:
    """The identifier a definition node defines (C declarators nest it)."""
    named = node.child_by_field_name("name")
    if named is not None:
        return named
    n: tree_sitter.Node | None = node.child_by_field_name("declarator")
    for _ in range(8):
        if n is None:
            return None
        if n.type in _NAME_TYPES:
            return n
        if n.type in ("qualified_identifier", "scoped_identifier"):
            n = n.child_by_field_name("name")
            continue
        if n.type == "variable_declarator":  # java field
            return n.child_by_field_name("name")
        nxt = n.child_by_field_name("declarator")
        n = nxt if nxt is not None else next((c for c in n.named_children), None)
    return None


def _declares_function(node: tree_sitter.Node) -> bool:
    n: tree_sitter.Node | None = node.child_by_field_name("declarator")
    while n is not None:
        if n.type == "function_declarator":
            return True
        n = n.child_by_field_name("declarator")
    return False


def _clip(text: str) -> str:
    lines = text.split("\n", DEF_LINES)
    if len(lines) > DEF_LINES:
        lines = lines[:DEF_LINES]
        lines.append("...")
    out = "\n".join(lines)
    return out if len(out) <= DEF_CHARS else out[:DEF_CHARS] + "..."


def _kind(node: tree_sitter.Node, in_class: bool) -> str | None:
    t = node.type
    if t in _CLASS_TYPES:
        # A struct used as a type (`struct x *p;`) defines nothing: it has no body.
        if t.endswith("_specifier") and node.child_by_field_name("body") is None:
            return None
        return "class"
    if t in _METHOD_TYPES:
        return "method"
    if t in _FUNCTION_TYPES:
        return "method" if in_class else "function"
    if t in _FIELD_TYPES:
        if node.child_by_field_name("declarator") is not None and any(
            c.type == "function_declarator" for c in node.named_children
        ):
            return "method"  # a C++ member function declared in its class
        return "field"
    if t in _CONST_TYPES:
        return "constant"
    return None


def _lines(src: bytes, node: tree_sitter.Node, start: int | None = None) -> str:
    s = node.start_byte if start is None else start
    return src[s : node.end_byte].decode("utf-8", "replace")


def extract(language: str, source: str | bytes, path: str) -> list[Symbol]:
    """The definitions in one file; [] for a language the gate does not know."""
    src = source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source
    try:
        tree = parser_for(language).parse(src)
    except (UnsupportedLanguage, ValueError):
        return []
    out: list[Symbol] = []
    stack: list[tuple[tree_sitter.Node, bool, bool]] = [(tree.root_node, False, True)]
    while stack:
        node, in_class, top = stack.pop()
        for child in reversed(node.named_children):
            kind = _kind(child, in_class)
            if kind is not None:
                name = _name(child)
                if name is not None and name.text:
                    out.append(_symbol(src, child, name, kind, path))
                if kind == "class":
                    for field in ("body", "type"):  # class bodies; go's `type_spec` struct
                        body = child.child_by_field_name(field)
                        if body is not None:
                            stack.append((body, True, False))
                continue
            t = child.type
            if top and t in ("expression_statement", "lexical_declaration", "variable_declaration"):
                out.extend(_assignments(src, child, path))
            elif t == "declaration" and not in_class:  # c, c++: prototypes and globals
                name = _name(child)
                if name is not None and name.text:
                    fn = _declares_function(child)
                    out.append(_symbol(src, child, name, "function" if fn else "constant", path))
            elif in_class and t == "expression_statement":
                for s in _assignments(src, child, path):
                    out.append(attrs.evolve(s, kind="field"))
            elif t in _CONTAINERS or t == "body":
                inner = in_class or t in _CLASS_BODIES
                stack.append((child, inner, top and not inner))
            elif t == "struct_type":
                stack.append((child, True, False))
    out.sort(key=lambda s: s.line)
    return out


def _symbol(
    src: bytes, node: tree_sitter.Node, name: tree_sitter.Node, kind: str, path: str
) -> Symbol:
    # Decorators, annotations and template headers belong with the definition.
    start = node
    parent = node.parent
    if parent is not None and parent.type in ("decorated_definition", "template_declaration"):
        start = parent
    text = _lines(src, node, start.start_byte)
    return Symbol(
        name=sys.intern((name.text or b"").decode("utf-8", "replace")),
        kind=kind,
        path=path,
        line=start.start_point[0],
        text=_clip(text),
    )


def _assignments(src: bytes, node: tree_sitter.Node, path: str) -> Iterator[Symbol]:
    """Top-level `NAME = ...` (python), `const x = ...` (js/ts)."""
    for child in node.named_children:
        if child.type == "assignment":  # python
            left = child.child_by_field_name("left")
            if left is not None and left.type == "identifier":
                yield _symbol(src, child, left, "constant", path)
        elif child.type == "variable_declarator":  # js / ts
            name = child.child_by_field_name("name")
            if name is not None and name.type == "identifier":
                value = child.child_by_field_name("value")
                fn = value is not None and value.type in ("arrow_function", "function_expression")
                yield _symbol(src, node, name, "function" if fn else "constant", path)


# -- files -----------------------------------------------------------------------------


@attrs.frozen
class _Rule:
    base: str  # the folder holding the .gitignore, relative to the root ("" = root)
    regex: re.Pattern[str]
    dir_only: bool
    negate: bool


def _read_gitignore(folder: str, base: str) -> list[_Rule]:
    try:
        text = read_regular_text(os.path.join(folder, ".gitignore"), GITIGNORE_MAX_BYTES)
    except OSError:  # none, unreadable, or not a regular file
        return []
    lines = text.splitlines()
    rules = []
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        negate = line.startswith("!")
        compiled = privacy._compile(line[1:] if negate else line)
        if compiled is not None:
            rules.append(_Rule(base, compiled[0], compiled[1], negate))
    return rules


def _ignored(rules: list[_Rule], rel: str, is_dir: bool) -> bool:
    """gitignore semantics for one entry: the last matching rule wins."""
    ignored = False
    for r in rules:
        if r.base:
            if not rel.startswith(r.base + "/"):
                continue
            sub = rel[len(r.base) + 1 :]
        else:
            sub = rel
        if r.dir_only and not is_dir:
            continue
        if r.regex.fullmatch(sub):
            ignored = not r.negate
    return ignored


def source_files(root: str, max_file_bytes: int) -> Iterator[tuple[str, int]]:
    """(absolute path, size) of the files under `root` in a language the gate knows,
    minus what .gitignore files exclude and files over the size limit."""
    root = root.rstrip("/") or "/"
    rules_at: dict[str, list[_Rule]] = {}
    for folder, dirs, files in os.walk(root):
        rel_folder = os.path.relpath(folder, root).replace(os.sep, "/")
        rel_folder = "" if rel_folder == "." else rel_folder
        parent = rel_folder.rsplit("/", 1)[0] if "/" in rel_folder else ""
        inherited = rules_at.get(parent, []) if rel_folder else []
        rules = inherited + _read_gitignore(folder, rel_folder)
        rules_at[rel_folder] = rules
        keep = []
        for d in sorted(dirs):
            rel = f"{rel_folder}/{d}" if rel_folder else d
            if d in SKIP_DIRS or os.path.islink(os.path.join(folder, d)):
                continue
            if not _ignored(rules, rel, True):
                keep.append(d)
        dirs[:] = keep
        for name in sorted(files):
            if detect_language(None, name) is None:
                continue
            rel = f"{rel_folder}/{name}" if rel_folder else name
            if _ignored(rules, rel, False):
                continue
            full = os.path.join(folder, name)
            if not full.isascii() and not _utf8(full):
                continue  # a name that is not UTF-8: no LSP URI or prompt can carry it
            if os.path.islink(full) and not _links_inside(full, root):
                continue  # a link out of the workspace: its target is not ours to index
            try:
                size = os.path.getsize(full)
            except OSError:
                continue
            if size <= max_file_bytes:
                yield full.replace(os.sep, "/"), size


def _utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:  # surrogate escapes: bytes that are not UTF-8
        return False
    return True


def _links_inside(link: str, root: str) -> bool:
    real, real_root = os.path.realpath(link), os.path.realpath(root)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


# -- the index -------------------------------------------------------------------------


_NO_NAMES: frozenset[str] = frozenset()


class WorkspaceIndex:
    """Symbols by name and by file; safe to update from one thread while another reads."""

    def __init__(
        self,
        *,
        max_files: int = 20000,
        max_file_bytes: int = 512 * 1024,
        max_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.max_files = max_files
        self.max_file_bytes = max_file_bytes
        self.max_bytes = max_bytes
        self.files: dict[str, FileEntry] = {}
        self.by_name: dict[str, list[Symbol]] = {}
        # The names each file defines, kept with its entry (`names_of`): every request
        # asks it of the file being completed.
        self._names: dict[str, frozenset[str]] = {}
        self.stored = 0  # bytes kept, estimated: definition text + SYMBOL_OVERHEAD a symbol
        self.skipped = 0  # files left out by a limit
        # FIFOs, devices, sockets met where a source file was expected: never read.
        self.special: set[str] = set()
        self.ready = False  # the first build has finished
        self.build_s: float | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.files)

    def lookup(self, name: str) -> list[Symbol]:
        with self._lock:
            return list(self.by_name.get(name, ()))

    def lookup_many(
        self, names: Iterable[str], skip: Collection[str] = ()
    ) -> dict[str, list[Symbol]]:
        """`lookup` of each of `names` not in `skip` that anything defines, under one
        hold of the lock (a request asks ~70 names near the cursor, most defined nowhere)."""
        by_name = self.by_name
        with self._lock:
            return {n: list(by_name[n]) for n in names if n in by_name and n not in skip}

    def symbols_of(self, path: str) -> tuple[Symbol, ...]:
        entry = self.files.get(path)
        return entry.symbols if entry is not None else ()

    def names_of(self, path: str) -> frozenset[str]:
        """The names of `symbols_of(path)`, made when the file's entry was."""
        return self._names.get(path, _NO_NAMES)

    def update(
        self,
        path: str,
        text: str | bytes,
        language: str | None = None,
        stamp: tuple[int, int] | None = None,
    ) -> bool:
        """(Re)index one file from its text (`stamp`: the file's, when read from disk);
        False when a limit or its language keeps it out."""
        language = language or detect_language(None, path)
        size = len(text)
        if not language or size > self.max_file_bytes:
            self.remove(path)
            return False
        if path not in self.files and len(self.files) >= self.max_files:
            self.skipped += 1
            return False
        symbols = tuple(extract(language, text, path))
        stored = sum(len(s.text) + SYMBOL_OVERHEAD for s in symbols)
        with self._lock:
            old = self.files.get(path)
            room = self.max_bytes - self.stored + (old.stored if old else 0)
            if stored > room:
                self.skipped += 1
                return False
            if old is not None:
                self._unlink(old)
            entry = FileEntry(path, language, symbols, size, stored, stamp)
            self.files[path] = entry
            self._names[path] = frozenset(s.name for s in symbols)
            self.stored += stored
            for s in symbols:
                self.by_name.setdefault(s.name, []).append(s)
        return True

    def update_from_disk(self, path: str) -> bool:
        """(Re)index one file from disk; False when it is gone, too large, unreadable or
        not a regular file (a FIFO, a device, a socket: skipped unread, counted)."""
        try:
            st = os.stat(path)  # before the read: a change after it makes the stamp stale
            data = read_regular(path, self.max_file_bytes)
        except NotRegular as exc:
            self.remove(path)
            with self._lock:  # bounded like the index itself; a folder is not special
                if exc.kind != "folder" and len(self.special) < self.max_files:
                    self.special.add(path)
            return False
        except (OSError, ValueError):  # gone, no permission, over max_file_bytes
            self.remove(path)
            return False
        with self._lock:
            self.special.discard(path)
        return self.update(path, data, stamp=(st.st_mtime_ns, st.st_size))

    def matches_disk(self, path: str) -> bool:
        """Whether the entry of `path` (if any) was read from the file as it is now: a
        file moved away, replaced or changed since does not (its old code must not feed
        a prompt under this name)."""
        entry = self.files.get(path)
        if entry is None:
            return True
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return False
        return entry.stamp == (st.st_mtime_ns, st.st_size)

    def paths_under(self, prefix: str) -> list[str]:
        """The indexed files whose path starts with `prefix` (a folder and its '/')."""
        with self._lock:
            return [p for p in self.files if p.startswith(prefix)]

    def remove(self, path: str) -> None:
        with self._lock:
            self.special.discard(path)
            old = self.files.pop(path, None)
            if old is not None:
                self._unlink(old)

    def _unlink(self, old: FileEntry) -> None:
        self.stored -= old.stored
        self._names.pop(old.path, None)
        for s in old.symbols:
            same = self.by_name.get(s.name)
            if same is not None:
                same[:] = [x for x in same if x.path != old.path]
                if not same:
                    del self.by_name[s.name]

    def build(
        self, roots: Iterable[str], *, skip: Iterable[str] = (), stop: threading.Event | None = None
    ) -> None:
        """Index every source file under `roots` (run it in a worker thread). Files in
        `skip` (open documents: the editor's text is newer) are left alone."""
        t0 = time.perf_counter()
        leave = set(skip)
        for root in roots:
            for path, _size in source_files(root, self.max_file_bytes):
                if stop is not None and stop.is_set():
                    return
                if path in leave or path in self.files:
                    continue
                if len(self.files) >= self.max_files:
                    self.skipped += 1
                    continue
                self.update_from_disk(path)
        self.build_s = time.perf_counter() - t0
        self.ready = True

    def figures(self) -> dict[str, float]:
        """Counts for logs and the benchmark script."""
        return {
            "files": len(self.files),
            "symbols": sum(len(e.symbols) for e in self.files.values()),
            "names": len(self.by_name),
            "stored_bytes": self.stored,
            "skipped": self.skipped,
            "special": len(self.special),
            "build_s": self.build_s or 0.0,
        }
