"""The messages an editor sends on every keystroke, structured by hand when they have
their plain shape: the same lsprotocol objects the converter builds, without its dispatch
and generated functions (a dozen calls, each cold after 50 ms waiting for a backend).

Anything else, an optional field present, a type the converter would coerce, a value
its validators would refuse, gives None: the converter structures it, and its errors
are the errors. tests/test_protocol_fast_paths.py holds both ways together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeGuard

from lsprotocol import types as t

_UINT_END = 1 << 31  # lsprotocol's uinteger: 0 to 2**31 - 1
# The enums' members by value: an Enum call is two Python calls (EnumType.__call__,
# Enum.__new__) to find the same member.
_INLINE_TRIGGER = {k.value: k for k in t.InlineCompletionTriggerKind}
_COMPLETION_TRIGGER = {k.value: k for k in t.CompletionTriggerKind}
# Position and TextDocumentIdentifier are frozen attrs classes whose __init__ runs a
# validator per field (three and two Python calls): their fields are set here as
# __init__ sets them (object.__setattr__), after the same checks their validators make
# (a uinteger; a str). tests/test_protocol_fast_paths.py checks every object made so
# against the converter's: equal, valid, printed, hashed and unstructured the same.
_new = object.__new__
_set = object.__setattr__


def _uint(value: Any) -> TypeGuard[int]:
    return type(value) is int and 0 <= value < _UINT_END


def _position(data: Any) -> t.Position | None:
    if type(data) is not dict or len(data) != 2:
        return None
    line, character = data.get("line"), data.get("character")
    if type(line) is not int or type(character) is not int:
        return None
    if not (0 <= line < _UINT_END and 0 <= character < _UINT_END):
        return None
    position = _new(t.Position)
    _set(position, "line", line)
    _set(position, "character", character)
    return position


def _text_document(data: Any) -> t.TextDocumentIdentifier | None:
    if type(data) is not dict or len(data) != 1 or type(uri := data.get("uri")) is not str:
        return None
    document = _new(t.TextDocumentIdentifier)
    _set(document, "uri", uri)
    return document


def _envelope(data: dict[str, Any], request: bool) -> bool:
    """Only jsonrpc, method, params (and an int or str id for a request), params a dict."""
    if len(data) != (4 if request else 3) or type(data.get("params")) is not dict:
        return False
    return not request or type(data.get("id")) in (int, str)


def _inline_completion(data: dict[str, Any]) -> t.InlineCompletionRequest | None:
    if not _envelope(data, True):
        return None
    params = data["params"]
    context = params.get("context")
    if len(params) != 3 or type(context) is not dict or len(context) != 1:
        return None
    kind = context.get("triggerKind")
    doc, pos = _text_document(params.get("textDocument")), _position(params.get("position"))
    if doc is None or pos is None or type(kind) is not int or kind not in _INLINE_TRIGGER:
        return None
    # The three objects' fields stored as their generated __init__s store them (plain
    # slots, no validators; the optional ones their classes' defaults): three Python
    # calls less on every inline request.
    made_context = _new(t.InlineCompletionContext)
    made_context.trigger_kind = _INLINE_TRIGGER[kind]
    made_context.selected_completion_info = None
    made_params = _new(t.InlineCompletionParams)
    made_params.context = made_context
    made_params.text_document = doc
    made_params.position = pos
    made_params.work_done_token = None
    request = _new(t.InlineCompletionRequest)
    request.id = data["id"]
    request.params = made_params
    request.method = "textDocument/inlineCompletion"
    request.jsonrpc = data["jsonrpc"]
    return request


def _completion(data: dict[str, Any]) -> t.CompletionRequest | None:
    if not _envelope(data, True):
        return None
    params = data["params"]
    raw = params.get("context")
    context = None
    if raw is not None:
        if type(raw) is not dict or not 1 <= len(raw) <= 2:
            return None
        kind, char = raw.get("triggerKind"), raw.get("triggerCharacter")
        if type(kind) is not int or kind not in _COMPLETION_TRIGGER:
            return None
        if len(raw) == 2 and type(char) is not str:  # the other key is not a character
            return None
        context = t.CompletionContext(
            trigger_kind=_COMPLETION_TRIGGER[kind], trigger_character=char
        )
    if len(params) != 2 + ("context" in params):
        return None
    doc, pos = _text_document(params.get("textDocument")), _position(params.get("position"))
    if doc is None or pos is None:
        return None
    return t.CompletionRequest(
        id=data["id"],
        params=t.CompletionParams(text_document=doc, position=pos, context=context),
        jsonrpc=data["jsonrpc"],
    )


def _change(data: Any) -> t.TextDocumentContentChangeEvent | None:
    if type(data) is not dict or type(text := data.get("text")) is not str:
        return None
    if len(data) == 1:
        return t.TextDocumentContentChangeWholeDocument(text=text)
    span = data.get("range")
    length = data.get("rangeLength")
    if len(data) != 2 + ("rangeLength" in data) or type(span) is not dict or len(span) != 2:
        return None
    if "rangeLength" in data and not _uint(length):
        return None
    start, end = _position(span.get("start")), _position(span.get("end"))
    if start is None or end is None:
        return None
    return t.TextDocumentContentChangePartial(
        range=t.Range(start=start, end=end), text=text, range_length=length
    )


def _did_change(data: dict[str, Any]) -> t.DidChangeTextDocumentNotification | None:
    if not _envelope(data, False):
        return None
    params = data["params"]
    doc, changes = params.get("textDocument"), params.get("contentChanges")
    if len(params) != 2 or type(doc) is not dict or len(doc) != 2 or type(changes) is not list:
        return None
    uri, version = doc.get("uri"), doc.get("version")
    if type(uri) is not str or type(version) is not int or not -_UINT_END <= version < _UINT_END:
        return None
    events = tuple(_change(c) for c in changes)
    if None in events:
        return None
    return t.DidChangeTextDocumentNotification(
        params=t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(version=version, uri=uri),
            content_changes=events,  # type: ignore[arg-type]  # no None in it
        ),
        jsonrpc=data["jsonrpc"],
    )


PLAIN: dict[str, Callable[[dict[str, Any]], Any]] = {
    t.TEXT_DOCUMENT_INLINE_COMPLETION: _inline_completion,
    t.TEXT_DOCUMENT_COMPLETION: _completion,
    t.TEXT_DOCUMENT_DID_CHANGE: _did_change,
}


def structure_plain(data: dict[str, Any]) -> Any | None:
    """The lsprotocol message of `data` (a JSON-RPC request or notification whose
    envelope is valid), when its method is one of PLAIN's and it has the plain shape;
    else None."""
    make = PLAIN.get(data["method"])
    return None if make is None else make(data)
