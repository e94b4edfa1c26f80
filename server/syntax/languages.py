"""Which languages the gate knows, how to recognise them, and their tree-sitter grammars."""

from __future__ import annotations

import importlib
import os
import threading
from typing import Literal

import attrs
import tree_sitter


@attrs.frozen(kw_only=True)
class LanguageSpec:
    """One language: its grammar package, how editors name it, its compiler check, and
    how the gate treats it. The gate's core (document.py, names.py) asks these and never
    compares language names: a new language is one spec (and its tests)."""

    name: str
    package: str  # the PyPI package (and, with '-' -> '_', the module) of the grammar
    factory: str  # function of the module that returns the TSLanguage pointer
    extensions: tuple[str, ...]
    language_ids: tuple[str, ...]  # LSP languageId values
    compiler: str | None  # checker name for mode "compiler"; None: tree-sitter only
    # The window judge where the file is broken near the cursor: "indent", Python's own
    # parser on the completion's lines (_pywindow); "brace", the completion's statement
    # with stubs for the code around it (_bracewindow); None: the differential alone.
    window: Literal["indent", "brace"] | None = None
    # Blocks by indentation: a hole under a block header is no error of the code above
    # (tree-sitter wraps it in an ERROR), and changed indentation is checked (_pyindent).
    indentation: bool = False
    # The brace window's stubs and check: statements in a method of a class, checked by
    # javalang ("class"), or in a function, checked by the tree-sitter grammar.
    stubs: Literal["class", "function"] = "function"
    # The C preprocessor: statement-like macros (`FOR(i,1,n) stmt`) are rewritten before
    # the differential decides, and the window's stubs know the file's value names.
    preprocessor: bool = False
    # The names gate: a name "file" defines nowhere (Python), or one not declared in
    # "scope" at the completion (C/C++, _cscope); None: no names check.
    names: Literal["file", "scope"] | None = None

    @property
    def module(self) -> str:
        return self.package.replace("-", "_")


_SPECS = (
    LanguageSpec(
        name="python",
        package="tree-sitter-python",
        factory="language",
        extensions=(".py", ".pyi", ".pyw"),
        language_ids=("python",),
        compiler="python-ast",
        window="indent",
        indentation=True,
        names="file",
    ),
    LanguageSpec(
        name="java",
        package="tree-sitter-java",
        factory="language",
        extensions=(".java",),
        language_ids=("java",),
        compiler="javalang",
        window="brace",
        stubs="class",
    ),
    LanguageSpec(
        name="cpp",
        package="tree-sitter-cpp",
        factory="language",
        # .h goes to C++: the C++ grammar reads nearly all C headers, the C grammar no C++ ones.
        extensions=(
            ".cc",
            ".cpp",
            ".cxx",
            ".c++",
            ".cp",
            ".hh",
            ".hpp",
            ".hxx",
            ".h++",
            ".h",
            ".ipp",
        ),
        language_ids=("cpp", "c++", "cuda-cpp"),
        compiler="g++",
        window="brace",
        preprocessor=True,
        names="scope",
    ),
    LanguageSpec(
        name="c",
        package="tree-sitter-c",
        factory="language",
        extensions=(".c",),
        language_ids=("c",),
        compiler="gcc",
        window="brace",
        preprocessor=True,
        names="scope",
    ),
    LanguageSpec(
        name="javascript",
        package="tree-sitter-javascript",
        factory="language",
        extensions=(".js", ".mjs", ".cjs", ".jsx"),
        language_ids=("javascript", "javascriptreact", "js", "jsx"),
        compiler=None,
    ),
    LanguageSpec(
        name="typescript",
        package="tree-sitter-typescript",
        factory="language_typescript",
        extensions=(".ts", ".mts", ".cts"),
        language_ids=("typescript", "ts"),
        compiler=None,
    ),
    LanguageSpec(
        name="tsx",
        package="tree-sitter-typescript",
        factory="language_tsx",
        extensions=(".tsx",),
        language_ids=("typescriptreact", "tsx"),
        compiler=None,
    ),
    LanguageSpec(
        name="go",
        package="tree-sitter-go",
        factory="language",
        extensions=(".go",),
        language_ids=("go",),
        compiler=None,
    ),
    LanguageSpec(
        name="rust",
        package="tree-sitter-rust",
        factory="language",
        extensions=(".rs",),
        language_ids=("rust",),
        compiler=None,
    ),
)

LANGUAGES: dict[str, LanguageSpec] = {s.name: s for s in _SPECS}
# What a document of no known language is judged as: no window, no names.
PLAIN = LanguageSpec(name="", package="", factory="", extensions=(), language_ids=(), compiler=None)


def spec_of(name: str | None) -> LanguageSpec:
    """The spec of the gate's language `name` (PLAIN when it has none)."""
    return LANGUAGES.get(name or "", PLAIN)


_BY_ID = {lid: s.name for s in _SPECS for lid in s.language_ids}
_BY_EXT = {ext: s.name for s in _SPECS for ext in s.extensions}


class UnsupportedLanguage(Exception):
    """The gate has no grammar for this language (unknown, or its package is not installed)."""

    def __init__(self, message: str, *, language: str | None) -> None:
        super().__init__(message)
        self.language = language


def detect_language(language_id: str | None = None, path: str | None = None) -> str | None:
    """The gate's name for a document's language, from the LSP languageId, else the file name.

    Returns None when neither is recognised. The languageId wins: editors know better than
    extensions (a `.h` file that the editor calls "c" is C).
    """
    if language_id:
        found = _BY_ID.get(language_id.strip().lower())
        if found is not None:
            return found
    if path:
        # A URI or a path: only the last component matters.
        base = path.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
        _, ext = os.path.splitext(base.lower())
        found = _BY_EXT.get(ext)
        if found is not None:
            return found
    return None


_lock = threading.Lock()
_loaded: dict[str, tree_sitter.Language] = {}


def ts_language(name: str) -> tree_sitter.Language:
    """The tree-sitter Language for `name` (loaded once); UnsupportedLanguage if impossible."""
    lang = _loaded.get(name)
    if lang is not None:
        return lang
    spec = LANGUAGES.get(name)
    if spec is None:
        known = ", ".join(sorted(LANGUAGES))
        raise UnsupportedLanguage(
            f"no syntax check for language {name!r}; the gate knows: {known}", language=name
        )
    with _lock:
        lang = _loaded.get(name)
        if lang is not None:
            return lang
        try:
            module = importlib.import_module(spec.module)
        except ImportError as exc:
            raise UnsupportedLanguage(
                f"the tree-sitter grammar for {name} is not installed: "
                f"run `pip install {spec.package}`",
                language=name,
            ) from exc
        lang = tree_sitter.Language(getattr(module, spec.factory)())
        _loaded[name] = lang
        return lang


def supported_languages() -> list[str]:
    """Languages whose grammar package is importable here, sorted."""
    out = []
    for name in sorted(LANGUAGES):
        try:
            ts_language(name)
        except UnsupportedLanguage:
            continue
        out.append(name)
    return out


_parsers = threading.local()


def parser_for(name: str) -> tree_sitter.Parser:
    """A parser for `name` owned by the calling thread (tree-sitter parsers are not thread-safe)."""
    cache: dict[str, tree_sitter.Parser] | None = getattr(_parsers, "cache", None)
    if cache is None:
        cache = {}
        _parsers.cache = cache
    parser = cache.get(name)
    if parser is None:
        parser = tree_sitter.Parser(ts_language(name))
        cache[name] = parser
    return parser
