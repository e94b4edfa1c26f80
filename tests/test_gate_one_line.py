"""The gate's check after its head start (`SyntaxDocument.prepare`), in the common case: a
one-line completion at a cursor where the text is whole. What depends on the text alone
was worked out while the model generated; after the last token the check parses and
judges the completion only, and its verdicts are those of the check without the head
start (which goes the general way)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from synconfroute.server.syntax import SyntaxDocument, _pyindent, _pywindow, document, names
from synconfroute.server.vocab.positions import Text
from synconfroute.server.vocab.verdict import Verdict

Pos = tuple[int, int]


def _seen(v: Verdict) -> tuple[object, ...]:
    return (v.status, v.line, v.column, v.message, v.detail, v.undefined)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """How often the check runs the text-only steps and the tree walks (counted)."""
    seen: Counter[str] = Counter()

    def counting(module: Any, name: str) -> None:
        real: Callable[..., Any] = getattr(module, name)

        def wrapper(*a: Any, **kw: Any) -> Any:
            seen[name] += 1
            return real(*a, **kw)

        monkeypatch.setattr(module, name, wrapper)

    counting(document, "_point")  # a scan of the text up to the cursor
    counting(_pywindow, "stranded")  # the lines above the cursor
    counting(_pywindow, "indentation_broken")
    counting(_pyindent, "_starts_line")  # the walk of the tree for indentation
    counting(names, "_role")  # the walk of the tree for names
    counting(names, "_star_import")  # a scan of the whole text
    counting(_pywindow, "_contexts")  # the window's readings of the lines above
    yield seen


def _prepared(text: str, at: Pos) -> SyntaxDocument:
    doc = SyntaxDocument(Text(text, "utf-16"), "python", lazy=True)
    doc.prepare(at)
    return doc


def _general(text: str, at: Pos, completion: str) -> Verdict:
    """The verdict the general way: no head start."""
    return SyntaxDocument(Text(text, "utf-16"), "python", lazy=True).check(
        completion, at, names=True
    )


BENCH = ("def g1(x):\n    return \n", (1, 11), " x + 1")  # bench.lsp_stages' document


def test_after_prepare_the_check_does_no_text_only_work(calls: Counter[str]) -> None:
    text, at, completion = BENCH
    doc = _prepared(text, at)
    calls.clear()
    verdict = doc.check(completion, at, names=True)
    assert verdict.status == "valid" and verdict.undefined == ()
    # (main: _point twice, stranded once, the indentation walk and the names walk too)
    assert dict(calls) == {}, dict(calls)


def test_a_second_check_at_the_cursor_reads_the_same_facts(calls: Counter[str]) -> None:
    """A trimmed run checks several texts at one cursor: none scans the text again."""
    text = "def f(a, b):\n    total = a\n    return \n"
    doc = _prepared(text, (2, 11))
    calls.clear()
    for completion in (" total", " total + b", " a * b"):
        assert doc.check(completion, (2, 11), names=True).status == "valid"
    assert dict(calls) == {}, dict(calls)


# (text, cursor, completion, whether the tree is walked for indentation)
CASES: list[tuple[str, Pos, str, bool]] = [
    # the common case: the rest of a line inside one simple statement
    ("def f(x):\n    return \n", (1, 11), " x + 1", False),
    ("def f(xs):\n    print(\n", (1, 10), "len(xs))", False),
    ("import os\nos.path.join(\n", (1, 13), "'a', 'b')", False),
    # a name defined nowhere: the names check still names it
    ("def f(x):\n    return \n", (1, 11), " x + helper(x)", False),
    ("def f(x):\n    return \n", (1, 11), " x + 1e5 + ex1", False),
    # an assignment: its statement is looked at, not the window
    ("def f(a):\n    y = \n", (1, 8), "a + 1", False),
    # Python refuses what tree-sitter accepts: found in the statement, or by the walk
    ("def f(s, l, k):\n    s[0], \n    l += k\n", (1, 10), "l += k", False),
    ("def f(te):\n    \n", (1, 4), "del te", True),  # (no code before it on its line)
    ("def f(te):\n    x = 1; \n", (1, 11), "del f(te)", True),
    ("def f(a):\n    x = \n", (1, 8), "a = b += 1", False),
    # two statements glued on one line: an error tree, the general way
    ("def f(a):\n    x = 1\n    y\n", (2, 5), " = 2 z = 3", True),
    # a block header on the line: not one simple statement
    ("def f(a):\n    if a\n", (1, 8), ":", True),
    ("def f(a):\n    if a\n", (1, 8), ": return a", True),
    # a completion in a string, a comment, an f-string
    ('def f(a):\n    s = "\n', (1, 9), 'abc"', False),
    ("def f(a):\n    return a  # \n", (1, 15), "note", True),  # (the comment: not in it)
    ("def f(a):\n    return f'\n", (1, 13), "{a} {b}'", False),
    # non-ASCII names: left to the tree walk of the names check
    ("def f(élan):\n    return \n", (1, 11), " élan", False),
    ("def f(a):\n    return \n", (1, 11), " élan", False),
    # broken near the cursor, a bracket left open above: the general way
    ("def f(a):\n    x = (1,\n    return \n", (2, 11), " a", True),
    ("def f(a):\n    fina\n    return \n", (2, 11), " a", False),  # (stranded: judged)
    # the completion ends in whitespace after whitespace (the edit moves)
    ("def f(a):\n    return a +\n", (1, 14), " 1 ", False),
]


@pytest.mark.parametrize(("text", "at", "completion", "walks"), CASES)
def test_prepared_verdict_is_the_general_one(
    calls: Counter[str], text: str, at: Pos, completion: str, walks: bool
) -> None:
    expected = _general(text, at, completion)
    doc = _prepared(text, at)
    calls.clear()
    verdict = doc.check(completion, at, names=True)
    assert _seen(verdict) == _seen(expected)
    # the walk runs only where something may be there to find
    assert (calls["_starts_line"] > 0) == walks, (dict(calls), _seen(verdict))
    assert calls["_point"] == 0  # (the points of the edit: prepared)


def test_the_cases_cover_both_verdicts_and_names() -> None:
    verdicts = [_general(t, at, c) for t, at, c, _ in CASES]
    assert {v.status for v in verdicts} == {"valid", "invalid"}
    assert any(v.undefined for v in verdicts)


def test_the_check_without_prepare_is_unchanged(calls: Counter[str]) -> None:
    """No head start (a local tier that answers within the delay): the check works it
    all out itself, as before."""
    text, at, completion = BENCH
    doc = SyntaxDocument(Text(text, "utf-16"), "python", lazy=True)
    assert doc.check(completion, at, names=True).status == "valid"
    assert calls["stranded"] == 1 and calls["_point"] == 2


# The file broken at the cursor (a statement the user left unfinished there): the window
# judges, and its readings of the lines above were worked out ahead.
BROKEN: list[tuple[str, Pos, str]] = [
    ("def f(a):\n    value = \n    return a\n", (1, 12), " a + 1"),
    ("def f(a):\n    value = \n    return a\n", (1, 12), " a +"),
    ("def f(a):\n    value = \n    return a\n", (1, 12), " a + 1\n    b = value"),
    (
        "class C:\n    def m(self, xs):\n        for x in xs:\n            total = \n"
        "        return total\n",
        (3, 20),
        " x * 2",
    ),
    ('def f(a):\n    """doc\n    value = \n', (2, 12), " a"),  # in a string left open
    ("def f(a):\n    g(a,\n    value = \n", (2, 12), " a"),  # a bracket left open
]


@pytest.mark.parametrize(("text", "at", "completion"), BROKEN)
def test_the_window_reads_the_lines_above_ahead(
    calls: Counter[str], text: str, at: Pos, completion: str
) -> None:
    expected = _general(text, at, completion)
    doc = _prepared(text, at)
    calls.clear()
    verdict = doc.check(completion, at, names=True)
    assert _seen(verdict) == _seen(expected)
    assert calls["_contexts"] == 0, dict(calls)  # (main: read after the last token)


def test_the_broken_cases_cover_both_verdicts() -> None:
    assert {_general(*case).status for case in BROKEN} == {"valid", "invalid"}
