"""The syntax gate: does inserting a completion INTRODUCE a syntax error?

Pure library (no LSP imports). `SyntaxDocument` keeps one tree-sitter tree per open
document, follows edits incrementally and checks completions against a copy of the tree;
`check_completion` is the one-shot form. Modes: "tree-sitter" (default, sub-millisecond),
"compiler" (the paper's checks: Python `ast.parse`, Java `javalang`, C/C++ `g++/gcc
-fsyntax-only`), "confirm" (tree-sitter, and a compiler only when tree-sitter objects).

How "introduced" is decided (measured by studies/gate_accuracy.py):

- tree-sitter: the ERROR/MISSING nodes of the text with the completion are compared with
  those of the document's own tree (the text without it). A node touching the inserted
  text counts unless the old tree had the very same node there, or an error region that
  began on an earlier line of the user's text and now merely runs on over the completion.
  A node away from the completion counts only if no old error overlaps its place. In brace
  languages, a cursor inside an old error region that began two or more lines above its
  line means the parser was already lost: nothing counts. Python adds what tree-sitter-
  python does not check: indentation of the statements in and around the completion, and
  a block header with no body. C/C++ statement-like macros (`FOR(i,0,n) x+=i;`) are
  rewritten to same-length statements and both texts parsed again before an error counts.
- Python, file broken near the cursor (an error of the text without the completion within
  a few lines of it, or an indentation tree-sitter-python accepts and Python does not):
  tree-sitter's recovery reshapes the old errors around any insertion, so Python's own
  parser decides on a window of the completion's lines, with stubs standing for the code
  above (`_pywindow`): an error in the completion, the rest of its line or the next line
  of code is its fault; an indentation error in the block after it too; an error further
  down that the text without the completion had on that line is not (studies/
  gate_broken.py: real files with the middle deleted, a call left open above, a
  half-typed line). A triple-quoted string the user left open above (its quotes cut, so
  it runs to the end of the file) is prose: one reading stands for it by its statement.
- Python, file whole around the cursor: a completion over several lines that tree-sitter
  passed gets the same window's second opinion (a `try:` cut before its handler, a cut
  inside the next line's indentation: Python reports those far below, where no
  differential can blame the completion). Not where the user's lines just below were
  broken already, and not inside a string (docstring prose).
- Java, C, C++, file broken near the cursor (the text without the completion has a tree-
  sitter error from a few lines above on; a brace too many or too few shows up only where
  the parser gives up): a parse of the completion's statement decides (`_bracewindow`):
  the cursor's line, the completion and the user's lines of the same statement, with one
  stub `{` per enclosing level read from the indentation above (javalang for Java,
  tree-sitter for C/C++ plus a check for statement keywords read as identifiers; in Java
  the levels end at a method's header). Parses in some reading of the lines above: valid,
  without reparsing the whole text; in none: invalid (the whole text's reparse then says
  where, in the user's words). Left to the differential: no window stands alone (among
  class members, in an initializer, unindented code other than the `}` that ends the
  function), the user's lines below are broken by themselves, the file ends inside the
  statement.
- compilers: the text with the completion compiles: valid. It fails and the text without
  it compiles: invalid. Both fail: an error inside the completion is its fault; with
  `ast`/`javalang` (first error only) an error after it that is the old first error, moved,
  is not; with g++ every diagnostic is matched against the old ones (message and moved
  place). When the compiler cannot see the completion (the first error comes before it, or
  a fatal error such as a missing header), tree-sitter's verdict decides and `detail` says
  so. Where the compiler fails without the completion and the file is broken near the
  cursor, the window above decides: the compiler's errors move around any insertion there.
"""

from ..vocab.positions import Encoding
from ._compilers import CompilerConfig, prepare_pch
from .document import Position, SyntaxDocument, check_completion
from .languages import (
    LANGUAGES,
    LanguageSpec,
    UnsupportedLanguage,
    detect_language,
    supported_languages,
)
from .verdict import DEFAULT_BUDGET_S, MODES, Mode, Status, Verdict

__all__ = [
    "DEFAULT_BUDGET_S",
    "LANGUAGES",
    "MODES",
    "CompilerConfig",
    "Encoding",
    "LanguageSpec",
    "Mode",
    "Position",
    "Status",
    "SyntaxDocument",
    "UnsupportedLanguage",
    "Verdict",
    "check_completion",
    "detect_language",
    "prepare_pch",
    "supported_languages",
]
