"""Cross-file context for one completion: what other files say about the code at the cursor.

Two kinds of candidates, ranked together:

- definitions (from the workspace index) of the names used near the cursor, and of the
  names the file imports; a definition in a file the imports point at ranks higher
  (import resolution by path, where the language makes it cheap: Python modules, Java
  classes, relative JS/TS imports, C includes);
- snippets of open, recently edited documents whose identifiers resemble the lines
  before the cursor (Jaccard similarity over fixed windows, as neighbouring-tab tools do).

`candidates()` ranks them once per request, with no privacy filter and no budget;
`fit()` then picks, per tier, those its privacy rule allows, within its budget. The
current file's prefix and suffix are not candidates: they keep priority (the budget is
what the tier's `max_prompt_chars` leaves after them).
"""

from __future__ import annotations

import functools
import itertools
import operator
import posixpath
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import NamedTuple

import attrs

from .workspace_index import Symbol, WorkspaceIndex

CHARS_PER_TOKEN = 3  # code in these tokenizers: ~3-4 characters a token; err on the small side
NEAR_LINES_BEFORE = 30
NEAR_LINES_AFTER = 8
SNIPPET_LINES = 16  # window of an open document compared with the cursor's lines
SNIPPET_MIN_SIMILARITY = 0.15
HEADER_CHARS = 40  # what a file header costs, roughly, besides the path
# A name the file imports but that the lines around the cursor do not show yet is the
# likeliest next call (the cursor is where it gets used): it ranks like a name on the
# line before the cursor. An imported name already in view gets a smaller lift.
IMPORTED_UNSEEN = 0.8
IMPORTED_SEEN = 0.3
IMPORTED_FILE_BOOST = 3.0  # a definition in a file the imports point at
MEMBER_WEIGHT = 1.0  # a method of a class named near the cursor, relative to the class
TOP_KEPT = 3  # the best candidates a sticky context must hold to be kept (prompt_split)
PACK = "mixed"  # how `fit` packs candidates (fit_detail; bench/context_prompt.py)
SIGNATURE_CHARS = 160  # longest one-line signature kept (longer ones are cut at a comma)
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_KEYWORDS = frozenset(
    {
        "and",
        "as",
        "assert",
        "async",
        "await",
        "break",
        "case",
        "catch",
        "char",
        "class",
        "const",
        "continue",
        "def",
        "default",
        "del",
        "do",
        "double",
        "elif",
        "else",
        "enum",
        "except",
        "export",
        "extends",
        "false",
        "final",
        "finally",
        "float",
        "fn",
        "for",
        "from",
        "func",
        "function",
        "go",
        "if",
        "impl",
        "implements",
        "import",
        "in",
        "instanceof",
        "int",
        "interface",
        "is",
        "lambda",
        "let",
        "long",
        "match",
        "mod",
        "module",
        "mut",
        "new",
        "nil",
        "none",
        "not",
        "null",
        "or",
        "package",
        "pass",
        "private",
        "protected",
        "pub",
        "public",
        "raise",
        "return",
        "self",
        "static",
        "struct",
        "super",
        "switch",
        "synchronized",
        "this",
        "throw",
        "throws",
        "trait",
        "true",
        "try",
        "type",
        "typeof",
        "use",
        "var",
        "void",
        "while",
        "with",
        "yield",
        "None",
        "True",
        "False",
        "String",
        "Object",
        "Override",
        "bool",
        "boolean",
        "byte",
        "short",
        "str",
        "dict",
        "list",
        "tuple",
        "set",
        "len",
        "print",
        "range",
        "isinstance",
    }
)


@attrs.frozen
class Candidate:
    path: str  # absolute: privacy patterns and workspace-relative display use it
    text: str
    kind: str  # "definition" | "snippet"
    score: float
    name: str = ""  # the symbol a definition defines
    line: int = 0  # where the text starts in its file (ordering within a file)


@attrs.frozen
class ContextFile:
    """One file's contribution to a prompt: its path and the pieces taken from it."""

    path: str
    text: str

    @property
    def bytes(self) -> int:
        return len(self.text.encode("utf-8", "surrogatepass"))


def _weights(prefix: str, suffix: str) -> dict[str, float]:
    """The names around the cursor (longer than two characters, not keywords), each
    weighted by closeness (1 on the cursor's line), a name's weights summed in text
    order. The lines above the cursor's are what they were at the last key while one
    types on a line: their sums are remembered (`_above`), then the cursor's line and
    those below are added, in the same order, so the floats are the same. The text is
    split from the cursor outwards only as far as read."""
    before = prefix.rsplit("\n", NEAR_LINES_BEFORE)[-NEAR_LINES_BEFORE:]
    n = len(before)
    remembered = n > 2  # one line above: cheaper to read again than to look up
    weights = dict(_above("\n".join(before[:-1]), n)) if remembered else {}
    get, findall, keywords = weights.get, _IDENT.findall, _KEYWORDS
    for i in range(n - 1 if remembered else 0, n):  # then the cursor's line (weight 1)
        w = 1.0 / (1 + (n - 1 - i) / 4)
        for name in findall(before[i]):
            if len(name) > 2 and name not in keywords:
                weights[name] = get(name, 0.0) + w
    for i, line in enumerate(suffix.split("\n", NEAR_LINES_AFTER)[:NEAR_LINES_AFTER]):
        w = 0.5 / (1 + i / 2)
        for name in findall(line):
            if len(name) > 2 and name not in keywords:
                weights[name] = get(name, 0.0) + w
    return weights


@functools.lru_cache(maxsize=8)  # a pure function of the text: while typing, one line
def _above(lines: str, n: int) -> dict[str, float]:
    """The weights of the `n` - 1 lines above the cursor's (`lines`, joined; "" when
    the cursor is on the first line), line i weighing 1 / (1 + (n - 1 - i) / 4).
    Callers copy it: the remembered dict is never changed."""
    weights: dict[str, float] = {}
    if n < 2:
        return weights
    get, findall, keywords = weights.get, _IDENT.findall, _KEYWORDS
    for i, line in enumerate(lines.split("\n")):
        w = 1.0 / (1 + (n - 1 - i) / 4)
        for name in findall(line):
            if len(name) > 2 and name not in keywords:
                weights[name] = get(name, 0.0) + w
    return weights


# `from m import a, b` or `from m import (\n    a,\n    b,\n)` (the parenthesised list may
# span lines and hold comments).
_PY_FROM = re.compile(r"^\s*from\s+(\.*[\w.]*)\s+import\s+(\([^)]{0,4000}\)?|[^\n#]*)", re.M)
_PY_COMMENT = re.compile(r"#[^\n]*")
_PY_IMPORT = re.compile(r"^\s*import\s+([\w., ]+)", re.M)
_JAVA_IMPORT = re.compile(r"^\s*import\s+(?:static\s+)?([\w.]+)\s*;", re.M)
_JS_IMPORT = re.compile(r"""(?:from|import|require\()\s*['"](\.{1,2}/[^'"]+)['"]""")
_C_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def imports(language: str, text: str, path: str) -> tuple[set[str], list[str]]:
    """(names the file imports, path endings of the files it imports from)."""
    return _scan_imports(language, text, posixpath.dirname(path))


def _scan_imports(language: str, text: str, folder: str) -> tuple[set[str], list[str]]:
    """`imports` of a file in `folder` (relative imports resolve against it)."""
    names: set[str] = set()
    ends: list[str] = []
    if language in ("python", "java") and "import" not in text:
        return names, ends  # both spell every import with the word (a search in C)
    if language == "python":
        for mod, what in _PY_FROM.findall(text):
            dots = len(mod) - len(mod.lstrip("."))
            parts = [p for p in mod.lstrip(".").split(".") if p]
            what = _PY_COMMENT.sub("", what).strip("()")
            for item in what.replace("\\\n", " ").split(","):
                name = item.strip().split(" as ")[0].strip()
                if name and name != "*":
                    names.add(name)
                    ends.append("/".join([*parts, name]) + ".py")  # a submodule
            if parts:
                base = "/".join(parts)
                if dots:  # relative: resolve against this file's package
                    up = folder
                    for _ in range(dots - 1):
                        up = posixpath.dirname(up)
                    base = f"{up}/{base}"
                ends += [base + ".py", base + "/__init__.py"]
        for mods in _PY_IMPORT.findall(text):
            for m in mods.split(","):
                mod = m.strip().split(" as ")[0].strip()
                if mod:
                    ends += [mod.replace(".", "/") + ".py", mod.replace(".", "/") + "/__init__.py"]
    elif language == "java":
        for q in _JAVA_IMPORT.findall(text):
            parts = q.split(".")
            names.add(parts[-1])
            ends.append("/".join(parts) + ".java")
            ends.append("/".join(parts[:-1]) + ".java")  # static import: the class
    elif language in ("javascript", "typescript", "tsx"):
        for rel in _JS_IMPORT.findall(text):
            base = posixpath.normpath(posixpath.join(folder, rel))
            ends += [base + e for e in ("", ".js", ".ts", ".tsx", ".jsx", "/index.js", "/index.ts")]
    elif language in ("c", "cpp"):
        ends += [posixpath.normpath(posixpath.join(folder, h)) for h in _C_INCLUDE.findall(text)]
        ends += ["/" + h for h in _C_INCLUDE.findall(text)]
    return names, [e if e.startswith("/") else "/" + e for e in ends]


class _Imports(NamedTuple):
    order: tuple[str, ...]  # the names imported, in the order `imports`' set gives them
    names: frozenset[str]
    ends: tuple[str, ...]


_IMPORTS_KEPT_FROM = 4096  # characters of head from which its imports are remembered


@functools.lru_cache(maxsize=32)
def _imports_of(language: str, head: str, folder: str) -> _Imports:
    """`imports`, remembered: a request's `head` (the file's first 20,000 characters
    up to the cursor) is the same text request after request while one types below it,
    and scanning it costs more than hashing it. By folder, not path: only the folder
    reads relative imports."""
    names, ends = _scan_imports(language, head, folder)
    return _Imports(tuple(names), frozenset(names), tuple(ends))


@attrs.frozen
class _Windows:
    """One document cut into overlapping windows: (first line, text, identifier count)
    each, and which windows hold each identifier."""

    windows: list[tuple[int, str, int]]
    postings: dict[str, list[int]]
    # `_best_window`'s answers, by (query size, the query's identifiers found here):
    # while one types, the lines before the cursor change mostly in words no window
    # holds (a name being typed), so the answer repeats. A set of them when the best
    # window is the only one that good; a tuple in the query's order when equals tied
    # (the order settles a tie, and it follows the set's hashing).
    best: dict[tuple[int, frozenset[str] | tuple[str, ...]], tuple[float, int] | None] = (
        attrs.field(factory=dict, eq=False, repr=False)
    )


class SnippetCache:
    """Open documents' windows and their identifiers, per (path, version): recomputed
    only after an edit."""

    def __init__(self, size: int = 32) -> None:
        # Least recently used first. Not a cachetools LRUCache: its lookups cost several
        # Python calls each, and a request looks up 8 documents.
        self._cache: OrderedDict[tuple[str, int], _Windows] = OrderedDict()
        self._size = size

    def windows(self, path: str, version: int, text: str) -> _Windows:
        key = (path, version)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        lines = text.split("\n")
        step = SNIPPET_LINES // 2
        out: list[tuple[int, str, int]] = []
        postings: dict[str, list[int]] = {}
        for start in range(0, max(1, len(lines) - step), step):
            chunk = "\n".join(lines[start : start + SNIPPET_LINES])
            idents = frozenset(_IDENT.findall(chunk)) - _KEYWORDS
            if len(idents) >= 3:
                for ident in idents:
                    postings.setdefault(ident, []).append(len(out))
                out.append((start, chunk, len(idents)))
        found = _Windows(out, postings)
        self._cache[key] = found
        if len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return found


class OpenDoc(NamedTuple):  # a tuple: a request makes 8, and an attrs class costs more
    path: str
    version: int
    text: str


# An open document as `candidates` takes it: (path, version, text), an `OpenDoc` or a
# plain tuple (a request passes 8: a plain one costs no call to make).
DocTuple = tuple[str, int, str]


def candidates(
    *,
    prefix: str,
    suffix: str,
    path: str,
    language: str,
    index: WorkspaceIndex | None,
    open_docs: Sequence[DocTuple] = (),
    snippets: SnippetCache | None = None,
    full_prefix: str | None = None,
    limit: int = 120,
) -> list[Candidate]:
    """Ranked context for the cursor between `prefix` and `suffix` of the file `path`.

    `open_docs`: other open documents, most recently edited first. `full_prefix`: the
    file's text before the cursor, for its imports (default `prefix`).
    """
    out: list[Candidate] = []
    if index is not None:
        out += _definitions(prefix, suffix, path, language, index, full_prefix or prefix)
    if open_docs:
        out += _snippets(prefix, path, open_docs, snippets or SnippetCache())
    out.sort(key=lambda c: -c.score)
    return out[:limit]


def _definitions(
    prefix: str, suffix: str, path: str, language: str, index: WorkspaceIndex, head: str
) -> list[Candidate]:
    weights = _weights(prefix, suffix)
    order: Collection[str]
    imported: AbstractSet[str]
    if language in ("python", "java") and "import" not in head:
        order = imported = frozenset()  # what `imports` finds there (a search in C)
        ends: tuple[str, ...] = ()
    elif len(head) < _IMPORTS_KEPT_FROM:  # cheap to scan; and it ends at the cursor: a new text
        names, found = imports(language, head, path)
        order, imported, ends = names, names, tuple(found)
    else:
        order, imported, ends = _imports_of(language, head, posixpath.dirname(path))
    if not weights and not order:
        return []  # no name near the cursor, none imported: nothing to look up
    near = set(weights)
    for name in order:
        # Python imports name functions (a call to come); Java's name classes, whose
        # members come in below when the class shows near the cursor.
        unseen = language == "python" and name not in weights
        weights[name] = weights.get(name, 0.0) + (IMPORTED_UNSEEN if unseen else IMPORTED_SEEN)
    own = index.names_of(path)  # kept with the file's entry: not a set per request
    suffixes = ends
    imported_file: dict[str, bool] = {}
    scored: list[Candidate] = []
    # Defined here: the prefix or suffix shows it, or it is out of reach.
    known = index.lookup_many(weights, skip=own) if weights.keys() - own else {}
    for name, w in weights.items():
        hits = known.get(name)
        if hits is None:
            continue
        defs = [s for s in hits if s.path != path]
        if not defs:
            continue
        for s in defs:
            hit = imported_file.get(s.path)
            if hit is None:
                hit = imported_file[s.path] = bool(suffixes) and s.path.endswith(suffixes)
            boost = IMPORTED_FILE_BOOST if hit else 1.0
            if s.kind == "class" and name in imported:
                boost *= 1.5
            score = w * boost / len(defs) ** 0.5
            scored.append(
                Candidate(
                    path=s.path,
                    text=s.text,
                    kind="definition",
                    score=score,
                    name=name,
                    line=s.line,
                )
            )
            if s.kind == "class" and name in near and MEMBER_WEIGHT > 0:
                scored += _members(index, s, score * MEMBER_WEIGHT)
    return scored


def _members(index: WorkspaceIndex, cls: Symbol, score: float) -> list[Candidate]:
    """The methods of class `cls` (those after it in its file, up to the next class), as
    candidates: a type named near the cursor (`JsonReader in`) is often the receiver of
    the call being typed (`in.peek()`), whose name is nowhere near yet."""
    out = []
    for m in index.symbols_of(cls.path):
        if m.line <= cls.line:
            continue
        if m.kind == "class":
            break
        if m.kind == "method" and not m.name.startswith("_"):
            out.append(
                Candidate(
                    path=m.path,
                    text=m.text,
                    kind="definition",
                    score=score,
                    name=m.name,
                    line=m.line,
                )
            )
    return out


def _snippets(
    prefix: str, path: str, open_docs: Sequence[DocTuple], cache: SnippetCache
) -> list[Candidate]:
    last = "\n".join(prefix.rsplit("\n", SNIPPET_LINES)[-SNIPPET_LINES:])
    query = frozenset(_IDENT.findall(last)) - _KEYWORDS
    if len(query) < 2:
        return []
    out = []
    kept = cache._cache  # the hit path of `cache.windows`, without a call per document
    for rank, (doc_path, version, text) in enumerate(open_docs):
        if doc_path == path:
            continue
        doc_windows = kept.get((doc_path, version))
        if doc_windows is None:
            doc_windows = cache.windows(doc_path, version, text)
        else:
            kept.move_to_end((doc_path, version))
        if not doc_windows.postings:
            continue  # too short to hold a window
        found = _best_window(query, doc_windows)
        if found is not None:
            sim, w = found
            start, chunk, _ = doc_windows.windows[w]
            recency = 1.0 / (1 + rank / 4)
            out.append(
                Candidate(
                    path=doc_path, text=chunk, kind="snippet", score=sim * recency, line=start
                )
            )
    return out


_BEST_KEPT = 64  # `_best_window` answers remembered per document version


def _best_window(query: frozenset[str], doc: _Windows) -> tuple[float, int] | None:
    """(Jaccard similarity, window) of the window of `doc` most like `query`, at least
    SNIPPET_MIN_SIMILARITY; of equals, the first met in the order the query's postings
    list them (what one pass over every window sharing an identifier would keep).

    Windows are visited most shared identifiers first, and the visit stops once no
    window left can reach the best so far: a window sharing `n` of the query's `q`
    identifiers scores at most n / q (it holds at least those n). On a large file most
    windows share one or two common names and are never scored. The answer is kept
    with the document's windows (`_Windows.best`)."""
    postings = doc.postings
    shared = postings.keys() & query  # in C; the query's order only when it is needed
    if not shared:
        return None
    q, memo = len(query), doc.best
    unordered = (q, frozenset(shared))
    if unordered in memo:
        return memo[unordered]
    present = tuple(i for i in query if i in postings)  # in the query's order: ties
    ordered = (q, present)
    if ordered in memo:
        return memo[ordered]
    if len(memo) >= _BEST_KEPT:
        memo.clear()
    found, tied = _scored(q, [postings[i] for i in present], doc.windows)
    memo[ordered if tied else unordered] = found
    return found


def _scored(
    q: int, hits: list[list[int]], windows: list[tuple[int, str, int]]
) -> tuple[tuple[float, int] | None, bool]:
    """`_best_window` for a query of `q` identifiers whose postings here are `hits`, and
    whether another window was as good (then the order of `hits` chose)."""
    # Identifiers shared with each window, counted in C; keys in first-met order.
    shared = Counter(itertools.chain.from_iterable(hits))
    best_w, best_sim, best_inter = -1, 0.0, 0
    tied = False  # another window scored best_sim (each one that can is visited)
    order: dict[int, int] | None = None  # first-met order, built only to break a tie
    for w, inter in shared.most_common():  # a stable sort: first-met order within a count
        bound = inter / q
        if bound < SNIPPET_MIN_SIMILARITY or bound < best_sim:
            break
        sim = inter / (q + windows[w][2] - inter)  # Jaccard
        if sim < SNIPPET_MIN_SIMILARITY or sim < best_sim:
            continue
        if sim == best_sim and best_w >= 0:
            tied = True
            if inter == best_inter:
                continue  # met after the best: same count, later in first-met order
            if order is None:
                order = {k: n for n, k in enumerate(shared)}
            if order[w] > order[best_w]:
                continue
        elif sim > best_sim:
            tied = False
        best_w, best_sim, best_inter = w, sim, inter
    return ((best_sim, best_w) if best_w >= 0 else None), tied


_BODY_OPENER = re.compile(r"[{:]\s*(//.*|#.*)?$")
_WS = re.compile(r"\s+")


@functools.lru_cache(maxsize=4096)  # a pure function of its text: asked per candidate
def signature(text: str, path: str = "") -> str:
    """A definition's header on one line: decorators and annotations left out, a header
    over several lines joined, the body replaced by `...` (Python) or `;` (braces).

    Many candidates fit where bodies let two: the model learns the callee's name,
    parameters and return type, which is what a call at the cursor needs."""
    lines = text.split("\n")
    i = 0
    while i < len(lines) - 1 and lines[i].lstrip().startswith("@"):
        i += 1  # decorators, Java annotations
    header: list[str] = []
    for line in lines[i:]:
        header.append(line.strip())
        if _BODY_OPENER.search(line) or line.rstrip().endswith(";"):
            break
    one = _WS.sub(" ", " ".join(header)).strip()
    python = path.endswith((".py", ".pyi")) or one.startswith(("def ", "async def ", "class "))
    if python and one.endswith(":"):
        one += " ..."
    elif one.endswith("{"):
        one = one[:-1].rstrip() + ";"
    if len(one) > SIGNATURE_CHARS:
        cut = one.rfind(",", 0, SIGNATURE_CHARS)
        one = one[: cut if cut > 0 else SIGNATURE_CHARS] + ", ..."
    return one


@attrs.frozen
class Fitted:
    """What `fit` chose: the files, and the candidates that went in (for stickiness)."""

    files: list[ContextFile]
    picked: frozenset[tuple[str, int, str, str]]  # candidate keys
    top: tuple[tuple[str, int, str, str], ...]  # the best-ranked candidates that went in


def key_of(c: Candidate) -> tuple[str, int, str, str]:
    return (c.path, c.line, c.kind, c.text)


def fit(
    ranked: Iterable[Candidate],
    budget_chars: int,
    allowed: Callable[[str], bool],
    *,
    pack: str = "",
) -> list[ContextFile]:
    """The best candidates that `allowed` admits, within `budget_chars`, grouped by file."""
    return fit_detail(ranked, budget_chars, allowed, pack=pack).files


def fit_detail(
    ranked: Iterable[Candidate],
    budget_chars: int,
    allowed: Callable[[str], bool],
    *,
    pack: str = "",
) -> Fitted:
    """`fit`, with the candidates taken.

    `pack`: "bodies" takes each candidate whole, best first, while it fits (a 12-line
    body each: few candidates); "signatures" takes a one-line signature of each
    definition (snippets whole); "mixed" (the default, see docs/crossfile.md) first
    takes signatures, best first, then replaces them with whole bodies, best first, while
    the budget lasts, then adds snippets.

    Files come least relevant first: the most useful context sits next to the current
    file at the end of the prompt, where models attend most."""
    return fit_admitted(admitted(ranked, allowed), budget_chars, pack=pack)


def admitted(ranked: Iterable[Candidate], allowed: Callable[[str], bool]) -> list[Candidate]:
    """The candidates `allowed` admits, in rank order; `allowed` asked once per file."""
    verdict: dict[str, bool] = {}
    out = []
    for c in ranked:
        v = verdict.get(c.path)
        if v is None:
            v = verdict[c.path] = allowed(c.path)
        if v:
            out.append(c)
    return out


# A candidate's key as a C call (`key_of`'s tuple): `prompt_split.Sticky` compares the
# keys of a request's admitted candidates with the last ones' to reuse their fit.
key_tuple = operator.attrgetter("path", "line", "kind", "text")


def fit_admitted(cands: Sequence[Candidate], budget_chars: int, *, pack: str = "") -> Fitted:
    """`fit_detail` of candidates already admitted (`admitted`): a pure function of
    their keys in order, `budget_chars` and `pack` (or `PACK`)."""
    pack = pack or PACK
    left = budget_chars
    pieces: dict[str, dict[tuple[str, int, str, str], tuple[Candidate, str]]] = {}

    def take(c: Candidate, text: str) -> bool:
        nonlocal left
        same = pieces.get(c.path, {})
        k = key_tuple(c)
        old = same.get(k)
        if any(t == text or text in t for kk, (_, t) in same.items() if kk != k):
            return False
        cost = len(text) + 1 - (len(old[1]) + 1 if old else 0)
        cost += 0 if same else HEADER_CHARS + len(c.path)
        if cost > left:
            return False
        left -= cost
        pieces.setdefault(c.path, {})[k] = (c, text)
        return True

    if pack == "bodies":
        for c in cands:
            if left <= HEADER_CHARS:
                break
            take(c, c.text.rstrip("\n"))
    else:
        sigs = {}
        for c in cands:
            if c.kind == "definition":
                sigs[key_tuple(c)] = sig = signature(c.text, c.path)
                if left > HEADER_CHARS:
                    take(c, sig)
        if pack == "mixed":
            for c in cands:  # upgrade to bodies, best first; snippets and edits whole
                if left <= 0:
                    break
                body = c.text.rstrip("\n")
                if body != sigs.get(key_tuple(c)):
                    take(c, body)
    rank = {key_tuple(c): i for i, c in reversed(list(enumerate(cands)))}
    first: dict[str, int] = {}
    for p, taken in pieces.items():
        first[p] = min(rank[k] for k in taken)
    files = []
    for p in sorted(pieces, key=lambda p: -first[p]):
        parts = sorted(pieces[p].values(), key=lambda ct: ct[0].line)
        files.append(ContextFile(p, "\n".join(t for _, t in parts) + "\n"))
    picked = frozenset(k for p in pieces.values() for k in p)
    top = tuple(sorted(picked, key=lambda k: rank[k])[:TOP_KEPT])
    return Fitted(files, picked, top)
