"""The textDocument/completion result, built as JSON directly (`lsp.completion_list`):
the same JSON lsprotocol's converter makes of the lsprotocol objects the handler built
before, for every encoding, documentation format and shape of completion."""

from __future__ import annotations

from typing import Any

import pytest
from lsprotocol import types as t
from pygls.protocol import default_converter

from synconfroute.server.protocol import lsp
from synconfroute.server.session.session import Completed
from synconfroute.server.vocab.card import route_card, summary
from synconfroute.server.vocab.positions import Encoding, advance
from tests.decisions import route_decision


def _as_lsprotocol(done: Completed | None, encoding: Encoding, formats: Any) -> t.CompletionList:
    """The result as lsp.completion built it before (lsprotocol objects)."""
    if done is None or not done.insert_text:
        return t.CompletionList(is_incomplete=True, items=[])
    rec = done.decision
    line, col = done.start
    word_start = t.Position(line, col - advance(0, 0, done.word, encoding)[1])
    new_text = done.word + done.insert_text
    first = done.insert_text.strip().split("\n", 1)[0]
    item = t.CompletionItem(
        label=f"{first[:60]}",
        label_details=t.CompletionItemLabelDetails(description=f"synconfroute {rec.route}"),
        kind=t.CompletionItemKind.Text,
        detail=summary(rec),
        documentation=lsp._markup(route_card(rec), formats),
        filter_text=new_text,
        sort_text="0",
        preselect=True,
        text_edit=t.TextEdit(t.Range(word_start, t.Position(*done.end)), new_text),
        insert_text_format=t.InsertTextFormat.PlainText,
        command=t.Command(title=summary(rec), command=lsp.CMD_ACCEPT, arguments=[done.id]),
    )
    return t.CompletionList(is_incomplete=True, items=[item])


@pytest.fixture(scope="module")
def converter() -> Any:
    """The converter pygls' server makes (no server: its log handler would outlive it)."""
    return default_converter()  # type: ignore[no-untyped-call]  # (pygls')


LOCAL = route_decision("local", ("confident-and-valid",), 0.97)
REMOTE = route_decision("remote", ("low-confidence", "syntax-invalid"), None)
DONES = [
    None,
    Completed("a", LOCAL, "", (0, 0), (0, 0), ""),
    Completed("b", LOCAL, " x + 1", (1, 11), (1, 11), ""),
    Completed("c", REMOTE, "é\n  \u2603 = 1\n", (4, 5), (6, 0), "wo"),
    Completed("d", REMOTE, "  \n" + "y" * 80, (2, 9), (2, 9), "\U0001f600é"),  # astral word
]
FORMATS = [None, [t.MarkupKind.PlainText], [t.MarkupKind.Markdown, t.MarkupKind.PlainText]]


@pytest.mark.parametrize("done", DONES)
@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
@pytest.mark.parametrize("formats", FORMATS, ids=["none", "plaintext", "markdown"])
def test_the_completion_result_is_what_the_converter_makes(
    converter: Any, done: Completed | None, encoding: Encoding, formats: Any
) -> None:
    want = converter.unstructure(_as_lsprotocol(done, encoding, formats))
    assert lsp.completion_list(done, encoding, formats) == want
