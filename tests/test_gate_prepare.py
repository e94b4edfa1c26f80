"""The gate's head start (`SyntaxDocument.prepare`, `gating.prepare_ahead`): what it works
out ahead is the text's alone, and a changed text never gets a verdict from it."""

from __future__ import annotations

import asyncio

import attrs
import pytest

from synconfroute.server.routing.gate import SyntaxGate
from synconfroute.server.routing.gating import prepare_ahead
from synconfroute.server.routing.request import Anchor, CompletionContext
from synconfroute.server.syntax import SyntaxDocument
from synconfroute.server.vocab.positions import Text
from synconfroute.server.vocab.verdict import Verdict

Pos = tuple[int, int]

# (text prepared at the cursor, the text after an edit, cursor, completion): each fact
# the preparation keeps would give the edited text a different verdict if it went stale.
CASES = [
    # the cursor's byte offset: line 0 grew, (1, 4) is 4 bytes further on
    ("a = 1\nb = \n", "alpha = 1\nb = \n", (1, 4), "1"),
    # a bracket left open on the line above (the completion's statement is stranded)
    ("def f():\n    x = g(1)\n    \n", "def f():\n    x = g(1,\n    \n", (2, 4), "return x"),
    # broken near the cursor: an error two lines up
    (
        "def f():\n    y = 2\n    x = 1\n    \n",
        "def f():\n    y = (2\n    x = 1\n    \n",
        (3, 4),
        "if x:\n        pass\n",
    ),
    # in a string (a docstring left open above the cursor)
    ("def f():\n    x = 1\n    \n", 'def f():\n    """x = 1\n    \n', (2, 4), "return x"),
    # the line above is a header's keyword half typed
    ("def f():\n    x = 1\n    \n", "def f():\n    fina\n    \n", (2, 4), "    pass"),
]


def _seen(v: Verdict) -> tuple[object, ...]:
    return (v.status, v.line, v.column, v.message, v.detail, v.undefined)


def _fresh(text: str, at: Pos, completion: str) -> Verdict:
    return SyntaxDocument(text, "python").check(completion, at, names=True)


@pytest.mark.parametrize(("before", "after", "at", "completion"), CASES)
def test_prepared_then_edited_gets_the_edited_texts_verdict(
    before: str, after: str, at: Pos, completion: str
) -> None:
    doc = SyntaxDocument(Text(before, "utf-16"), "python", lazy=True)
    doc.prepare(at)
    assert doc.has_tree  # the preparation parsed it
    prepared = doc.check(completion, at, names=True)
    assert _seen(prepared) == _seen(_fresh(before, at, completion))
    doc.replace_all(after)  # (an edit: the text's version moves on)
    doc.prepare(at)
    assert _seen(doc.check(completion, at, names=True)) == _seen(_fresh(after, at, completion))


@pytest.mark.parametrize(("before", "after", "at", "completion"), CASES)
def test_text_changed_behind_the_documents_back(
    before: str, after: str, at: Pos, completion: str
) -> None:
    """The session's one `Text` edited without the document's `edit` (the document follows
    the text's version, not its own calls)."""
    text = Text(before, "utf-16")
    doc = SyntaxDocument(text, "python", lazy=True)
    doc.prepare(at)
    doc.check(completion, at, names=True)
    text.replace(0, len(before), after)
    assert _seen(doc.check(completion, at, names=True)) == _seen(_fresh(after, at, completion))


def test_the_cases_tell_stale_from_fresh() -> None:
    """Each case's facts differ between its two texts. (With the version check taken out
    of `SyntaxDocument._memo`, the two tests above fail for the offset, bracket and
    string cases: checked; the other two then still get the right verdict.)"""
    for before, after, at, _ in CASES:
        doc = SyntaxDocument(before, "python")
        doc.prepare(at)
        table = dict(doc._memo_table)
        doc.replace_all(after)
        doc.prepare(at)
        assert table != doc._memo_table, (before, after)


def test_prepare_ignores_what_the_check_reports() -> None:
    SyntaxDocument("x = 1\n", "python").prepare(99)  # out of range: the check raises
    SyntaxDocument("x = 1\n", None).prepare((0, 0))  # unsupported: the check says so
    doc = SyntaxDocument("x = 1\n", "python")
    doc.prepare((0, 5))
    with pytest.raises(ValueError, match="outside the text"):
        doc.check("1", 99)


def _ctx(doc: SyntaxDocument, at: Pos) -> CompletionContext:
    return CompletionContext(prefix="", suffix="", document=Anchor(doc, at), language="python")


def test_prepare_ahead_runs_while_the_loop_waits_and_cancels() -> None:
    async def go() -> None:
        gate = SyntaxGate("tree-sitter", 0.05, 3.0)
        ready = SyntaxDocument(Text("def f():\n    return \n", "utf-16"), "python", lazy=True)
        handle = prepare_ahead(gate, _ctx(ready, (1, 11)), delay_s=0)
        assert handle is not None
        await asyncio.sleep(0.05)  # (the local tier generating)
        assert ready.has_tree
        late = SyntaxDocument(Text("def f():\n    return \n", "utf-16"), "python", lazy=True)
        handle = prepare_ahead(gate, _ctx(late, (1, 11)), delay_s=0.01)
        assert handle is not None
        handle.cancel()  # the local answer came first
        await asyncio.sleep(0.05)
        assert not late.has_tree
        # A blocking gate checks a copy in a thread; too large a file is not checked.
        compiler = SyntaxGate("compiler", 0.05, 3.0)
        assert prepare_ahead(compiler, _ctx(late, (1, 11))) is None
        big = SyntaxDocument(Text("x = 1\n" * 100, "utf-16"), "python", lazy=True)
        handle = prepare_ahead(
            SyntaxGate("tree-sitter", 0.05, 3.0, max_bytes=100), _ctx(big, (0, 0)), 0
        )
        await asyncio.sleep(0.05)
        assert not big.has_tree

    asyncio.run(go())


def test_with_elapsed_keeps_every_field() -> None:
    samples = {
        "valid": True,
        "status": "valid",
        "mode": "confirm",
        "checker": "g++",
        "language": "cpp",
        "line": 3,
        "column": 4,
        "message": "m",
        "elapsed_s": 1.0,
        "detail": "d",
        "undefined": ("a",),
    }
    names = [a.name for a in attrs.fields(Verdict)]
    assert sorted(names) == sorted(samples), "a new Verdict field: spell it out in with_elapsed"
    v = Verdict(**samples).with_elapsed(2.0)  # type: ignore[arg-type]
    assert attrs.asdict(v) == {**samples, "elapsed_s": 2.0}
