"""The protocol path's shortcuts give what the long way gives, message for message.

Each shortcut (server/protocol/frames.py, transport.py) skips work pygls or our own parser would do
for the usual message; here the same messages, usual and odd, go both ways and must come
out the same: the frames parsed, the messages decoded and structured (with the same
errors and the same answers sent), the bytes written for responses and notifications,
and the kind of each message pygls would dispatch it as.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import attrs
import pytest
from lsprotocol import types as t
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCProtocol,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    RPCNotification,
    RPCRequest,
    RPCResponse,
)

from synconfroute.server.protocol import lsp, plain_messages, transport
from synconfroute.server.protocol.frames import Body, FrameParser
from synconfroute.server.protocol.transport import StdoutWriter
from synconfroute.server.session.session import Completed
from synconfroute.server.settings import config
from synconfroute.server.vocab.card import summary
from tests.captures import Capture
from tests.decisions import route_decision


@pytest.fixture
def proto(tmp_path: Path) -> Any:
    """The server's protocol, initialized, writing into a Capture (`proto.capture`)."""
    server = lsp.create_server(config.load(tmp_path / "none.toml", environ={}), tmp_path / "l")
    protocol = server.protocol
    capture = Capture()
    protocol.set_writer(capture)
    protocol.capture = capture  # type: ignore[attr-defined]
    return protocol


def frame(body: bytes, head: bytes | None = None) -> bytes:
    return (head or b"Content-Length: %d\r\n\r\n" % len(body)) + body


# --- frames: the one-step frame and the header-by-header parser agree ---

BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}).encode()


@pytest.mark.parametrize(
    "stream",
    [
        frame(BODY) * 3,
        frame(b'{"a":\n1}') + frame(BODY),  # a raw newline: parsed by the long way
        frame(b"[1, 2]") + frame(BODY),  # a batch array ends with a bracket
        frame(BODY + b" ") + frame(BODY),  # a body that does not end with its brace
        frame(BODY, b"Content-Length: %d\r\n\r\n" % (len(BODY) - 3)) + frame(BODY),
        frame(BODY, b"Content-Length: %d\r\n\r\n" % (len(BODY) + 5)) + frame(BODY),
        # too large by a whole frame: the body would end with the next one's brace
        frame(BODY, b"Content-Length: %d\r\n\r\n" % (len(BODY) + len(frame(BODY)))) + frame(BODY),
        frame(BODY, b"Content-Length: 0\r\n\r\n") + frame(BODY),
        frame(BODY, b"Content-Length: 0%d\r\n\r\n" % len(BODY)),
        b"junk\r\n" + frame(BODY) + frame(BODY),
        frame(BODY, b"Content-Length: %d\r\nContent-Type: x\r\n\r\n" % len(BODY)) + frame(BODY),
        frame(BODY, b"Content-Length: 99999999\r\n\r\n") + frame(BODY),  # above the limit
    ],
)
def test_frames_come_out_the_same_whole_or_byte_by_byte(stream: bytes) -> None:
    whole = FrameParser(max_body=1 << 20).feed(stream)
    parser = FrameParser(max_body=1 << 20)
    one_by_one = [e for i in range(len(stream)) for e in parser.feed(stream[i : i + 1])]
    assert whole == one_by_one
    assert any(isinstance(e, Body) for e in whole)


# --- decoding: structured alone, or with the hook on every object ---

MESSAGES: list[Any] = [
    {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "textDocument/inlineCompletion",
        "params": {
            "textDocument": {"uri": "file:///a.py"},
            "position": {"line": 1, "character": 11},
            "context": {"triggerKind": 1},
        },
    },
    {
        "jsonrpc": "2.0",
        "method": "textDocument/didChange",
        "params": {
            "textDocument": {"uri": "file:///a.py", "version": 2},
            "contentChanges": [
                {
                    "range": {
                        "start": {"line": 0, "character": 0},
                        "end": {"line": 0, "character": 1},
                    },
                    "text": "x",
                },
                {"text": "whole\ntext"},
            ],
        },
    },
    {
        "jsonrpc": "2.0",
        "id": "s",
        "method": "textDocument/completion",
        "params": {
            "textDocument": {"uri": "file:///a.py"},
            "position": {"line": 0, "character": 0},
        },
    },
    {
        "jsonrpc": "2.0",
        "id": 8,
        "method": "textDocument/inlineCompletion",
        "params": {"position": 3},
    },
    {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "textDocument/inlineCompletion",
        "params": {
            "textDocument": {"uri": "file:///a.py"},
            "position": {"line": "1", "character": 1.5},  # coerced by the converter
            "context": {"triggerKind": 1},
        },
    },
    {"jsonrpc": "2.0", "id": 10, "method": "x/custom", "params": {"deep": {"jsonrpc": "2.0"}}},
    {"jsonrpc": "2.0", "id": 11, "method": "x/custom", "params": {"a": {"jsonrpc": 1}}},
    {"jsonrpc": "1.0", "id": 12, "method": "shutdown"},
    {"jsonrpc": "2.0", "id": [1], "method": "shutdown"},
    {"jsonrpc": "2.0", "id": 13, "method": "x/custom", "params": {"text": 'caf\u00e9 "jsonrpc"'}},
    {"jsonrpc": "2.0", "id": 14, "result": {"a": 1}},
    {"jsonrpc": "2.0", "id": 15, "error": {"code": -1, "message": "no"}},
    {"method": "textDocument/didOpen", "params": {"jsonrpc": "2.0"}},
    {"id": 1, "method": "x", "params": {"inner": {"jsonrpc": "2.0", "method": "y"}}},
    [{"jsonrpc": "2.0", "method": "exit"}],
    "jsonrpc",
]
BODIES = [json.dumps(m).encode() for m in MESSAGES] + [
    json.dumps(MESSAGES[0], ensure_ascii=False).encode(),
    b'{"jsonrpc": "2.0", "id": 16, "method": "x/c", "params": {"json\\u0072pc": "2.0"}}',
    b'{"jsonrpc": "2.0", "id": 17, "method": "x/c", "params": {"jsonrpc": "2.0", "method": 3}}',
    b'{"jsonrpc": "2.0", "jsonrpc": "2.0", "id": 18, "method": "shutdown"}',
    b'{"jsonrpc": "2.0", "id": 19, "method": "shutdown"',
    b"\xff",
]


def outcome(proto: Any, decode: Any, body: bytes) -> tuple[Any, bytes]:
    try:
        value: Any = decode(body)
    except Exception as exc:
        value = (type(exc), str(exc), type(exc.__cause__))
    return value, proto.capture.take()


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_a_body_decodes_as_with_the_hook_on_every_object(proto: Any, body: bytes) -> None:
    def hooked(data: bytes) -> Any:
        return json.loads(data, object_hook=proto.structure_message)

    assert outcome(proto, proto._decode, body) == outcome(proto, hooked, body)


# --- what is written: responses, notifications, any message ---

RESULTS: list[Any] = [
    None,
    True,
    {"edits": [], "n": (1, 2), "f": 0.5},
    [t.Position(1, 2), t.Position(3, 4)],
    t.InlineCompletionList(
        items=[
            t.InlineCompletionItem(
                insert_text=" x + 1",
                range=t.Range(t.Position(1, 11), t.Position(1, 11)),
                command=t.Command(title="synconfroute: local", command="c", arguments=["id"]),
            )
        ]
    ),
    t.CompletionList(
        is_incomplete=True,
        items=[
            t.CompletionItem(
                label="x",
                kind=t.CompletionItemKind.Text,
                documentation=t.MarkupContent(t.MarkupKind.Markdown, "**x**"),
                insert_text_format=t.InsertTextFormat.PlainText,
                text_edit=t.TextEdit(t.Range(t.Position(0, 0), t.Position(0, 1)), "x"),
                preselect=True,
            )
        ],
    ),
    t.Hover(contents="plain"),
    {"status": "café \ud800", "routes": {"local": 1}},
]


@pytest.mark.parametrize("result", RESULTS, ids=range(len(RESULTS)))
@pytest.mark.parametrize("msg_id", [3, "abc"])
def test_a_response_is_written_as_pygls_writes_it(proto: Any, result: Any, msg_id: Any) -> None:
    proto._send_response(msg_id, result=result)
    ours = proto.capture.take()
    JsonRPCProtocol._send_response(proto, msg_id, result=result)
    assert ours == proto.capture.take()
    assert json.loads(ours.split(b"\r\n\r\n", 1)[1])["id"] == msg_id


class Color(enum.Enum):
    RED = "red"


ROUTE = {
    "uri": "file:///a.py",
    "id": "c1",
    "route": "local",
    "reasons": ["confident"],
    "confidence": 0.97,
    "threshold": 0.6,
    "cacheHit": False,
    "summary": "synconfroute: local (confident, confidence 0.97)",
    "card": {"kind": "markdown", "value": "**synconfroute**: local\n\n- why: confident"},
    "range": {"start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 11}},
}
PARAMS = [
    ROUTE,
    {**ROUTE, "kind": "next-edit", "confidence": None},
    {"t": (1, "a"), "e": Color.RED, "k": t.CompletionItemKind.Text, "p": t.Position(0, 1)},
    {"nested": [{"a": [None, 1.25, "\u00e9"]}], 3: "int key"},
]


@pytest.mark.parametrize("params", PARAMS, ids=range(len(PARAMS)))
def test_a_notification_is_written_as_pygls_writes_it(proto: Any, params: Any) -> None:
    proto.send_notification_data(lsp.ROUTE_NOTIFICATION, params)
    ours = proto.capture.take()
    JsonRPCProtocol.notify(proto, lsp.ROUTE_NOTIFICATION, params)
    assert ours == proto.capture.take()
    assert ours.count(b"Content-Length") == 1


@pytest.mark.parametrize(
    "message",
    [
        t.LogMessageNotification(params=t.LogMessageParams(t.MessageType.Warning, "w \u00e9")),
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no"}},
        t.ResponseErrorMessage(id=2, error=t.ResponseError(code=-32602, message="bad")),
        JsonRPCResponseMessage(id=4, result=[t.Position(0, 0)], jsonrpc="2.0"),
    ],
)
def test_any_message_is_written_as_pygls_writes_it(proto: Any, message: Any) -> None:
    proto._send_data(message)
    ours = proto.capture.take()
    JsonRPCProtocol._send_data(proto, message)
    assert ours == proto.capture.take()
    assert ours.startswith(b"Content-Length: ")


# --- dispatch: the kind pygls' runtime-checkable protocols would see ---


@pytest.mark.parametrize(
    "message",
    [
        t.InlineCompletionRequest(id=1, params=None),  # type: ignore[arg-type]
        t.ShutdownRequest(id="x"),
        t.DidChangeTextDocumentNotification(
            params=t.DidChangeTextDocumentParams(
                t.VersionedTextDocumentIdentifier(1, "file:///a"), []
            )
        ),
        t.ExitNotification(),
        t.InitializedNotification(params=t.InitializedParams()),
        t.ApplyWorkspaceEditResponse(id=3, result=t.ApplyWorkspaceEditResult(applied=True)),
        t.ResponseErrorMessage(id=3, error=t.ResponseError(code=1, message="m")),
        t.ResponseErrorMessage(id=None, error=None),
        JsonRPCRequestMessage(id=1, method="x", jsonrpc="2.0", params=None),
        JsonRPCNotification(method="x", jsonrpc="2.0", params=None),
        JsonRPCResponseMessage(id=1, result=None, jsonrpc="2.0"),
        SimpleNamespace(method="x", jsonrpc="2.0"),  # no params: no notification
        SimpleNamespace(id=1, method="x", jsonrpc="2.0"),
        SimpleNamespace(id=1, method="x", params=None, result=None),
        SimpleNamespace(id=1, jsonrpc="2.0", params=None),
    ],
)
def test_a_message_is_dispatched_as_the_pygls_protocols_tell(message: Any) -> None:
    transport._KINDS.pop(type(message), None)
    expected = next(
        (
            kind
            for kind, cls in (
                (transport._REQUEST, RPCRequest),
                (transport._NOTIFICATION, RPCNotification),
                (transport._RESPONSE, RPCResponse),
            )
            if isinstance(message, cls)
        ),
        transport._ERROR,
    )
    assert transport.message_kind(message) is expected
    # The kind remembered for its class (handle_message asks that first) is the same, and
    # only a slotted attrs class's is remembered: its instances all have one shape.
    remembered = transport._KINDS.get(type(message))
    assert remembered in (None, expected)
    assert (remembered is None) == hasattr(message, "__dict__"), type(message)


# --- the inlineCompletion result, built as JSON directly ---


def _as_lsprotocol(done: Any) -> Any:
    """The result as lsp.inline_completion built it before (lsprotocol objects)."""
    if done is None or not done.insert_text:
        return t.InlineCompletionList(items=[])
    pos = t.Position(*done.start)
    item = t.InlineCompletionItem(
        insert_text=done.insert_text,
        range=t.Range(pos, t.Position(*done.end)),
        command=t.Command(
            title=summary(done.decision), command=lsp.CMD_ACCEPT, arguments=[done.id]
        ),
    )
    return t.InlineCompletionList(items=[item])


@pytest.mark.parametrize(
    "done",
    [
        None,
        Completed("a", route_decision("local", ("confident",), 0.97), "", (0, 0), (0, 0), ""),
        Completed(
            "b", route_decision("local", ("confident",), 0.97), " x + 1", (1, 11), (1, 11), ""
        ),
        Completed(
            "c",
            route_decision("remote", ("low-confidence", "syntax-invalid"), None),
            "é\n  \u2603",
            (4, 2),
            (6, 0),
            "wo",
        ),
    ],
)
def test_the_inline_result_is_what_the_converter_makes(proto: Any, done: Any) -> None:
    assert lsp.inline_list(done) == proto._converter.unstructure(_as_lsprotocol(done))


# --- the keystroke messages, structured by hand when plain ---


def _inline(params: Any, **envelope: Any) -> dict[str, Any]:
    msg = {"jsonrpc": "2.0", "id": 5, "method": t.TEXT_DOCUMENT_INLINE_COMPLETION}
    return {**msg, "params": params, **envelope}


def _completion(params: Any, **envelope: Any) -> dict[str, Any]:
    msg = {"jsonrpc": "2.0", "id": "c", "method": t.TEXT_DOCUMENT_COMPLETION}
    return {**msg, "params": params, **envelope}


def _did_change(params: Any, **envelope: Any) -> dict[str, Any]:
    msg = {"jsonrpc": "2.0", "method": t.TEXT_DOCUMENT_DID_CHANGE}
    return {**msg, "params": params, **envelope}


DOC = {"uri": "file:///a.py"}
AT = {"line": 1, "character": 11}
SPAN = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 2}}
VDOC = {"uri": "file:///a.py", "version": 3}
PLAIN = [  # built by hand
    _inline({"textDocument": DOC, "position": AT, "context": {"triggerKind": 1}}),
    _inline({"textDocument": DOC, "position": AT, "context": {"triggerKind": 2}}, id="s"),
    _completion({"textDocument": DOC, "position": AT}),
    _completion({"textDocument": DOC, "position": AT, "context": {"triggerKind": 1}}),
    _completion(
        {
            "textDocument": DOC,
            "position": AT,
            "context": {"triggerKind": 2, "triggerCharacter": "."},
        }
    ),
    _did_change({"textDocument": VDOC, "contentChanges": [{"range": SPAN, "text": "ab"}]}),
    _did_change({"textDocument": VDOC, "contentChanges": [{"text": "whole"}]}),
    _did_change(
        {
            "textDocument": VDOC,
            "contentChanges": [{"range": SPAN, "rangeLength": 2, "text": ""}, {"text": "é"}],
        }
    ),
    _did_change({"textDocument": VDOC, "contentChanges": []}),
    _completion({"textDocument": DOC, "position": AT, "context": None}),
]
ODD = [  # left to the converter: coerced, refused, or with fields the hand leaves out
    _inline({"textDocument": DOC, "position": AT, "context": {"triggerKind": 3}}),
    _inline({"textDocument": DOC, "position": AT, "context": {"triggerKind": True}}),
    _inline(
        {
            "textDocument": DOC,
            "position": {"line": "1", "character": 2},
            "context": {"triggerKind": 1},
        }
    ),
    _inline(
        {
            "textDocument": DOC,
            "position": {"line": 1.0, "character": 2},
            "context": {"triggerKind": 1},
        }
    ),
    _inline(
        {
            "textDocument": DOC,
            "position": {"line": -1, "character": 2},
            "context": {"triggerKind": 1},
        }
    ),
    _inline(
        {
            "textDocument": DOC,
            "position": {"line": 2**31, "character": 0},
            "context": {"triggerKind": 1},
        }
    ),
    _inline(
        {
            "textDocument": DOC,
            "position": {"line": 1, "character": 2, "x": 0},
            "context": {"triggerKind": 1},
        }
    ),
    _inline({"textDocument": {"uri": 3}, "position": AT, "context": {"triggerKind": 1}}),
    _inline({"textDocument": {**DOC, "version": 1}, "position": AT, "context": {"triggerKind": 1}}),
    _inline({"textDocument": DOC, "position": AT}),
    _inline(
        {"textDocument": DOC, "position": AT, "context": {"triggerKind": 1}, "workDoneToken": "w"}
    ),
    _inline(
        {
            "textDocument": DOC,
            "position": AT,
            "context": {
                "triggerKind": 1,
                "selectedCompletionInfo": {"range": SPAN, "text": "a"},
            },
        }
    ),
    _inline({"textDocument": DOC, "position": AT, "context": {"triggerKind": 1}}, id=True),
    _inline({"textDocument": DOC, "position": AT, "context": {"triggerKind": 1}}, extra=1),
    _inline([1, 2]),
    _completion({"textDocument": DOC, "position": AT, "context": {"triggerKind": 4}}),
    _completion(
        {
            "textDocument": DOC,
            "position": AT,
            "context": {"triggerKind": 2, "triggerCharacter": None},
        }
    ),
    _completion({"textDocument": DOC, "position": AT, "context": {"triggerKind": 2, "other": "."}}),
    _completion({"textDocument": DOC, "position": AT, "partialResultToken": 1}),
    _did_change({"textDocument": {**VDOC, "version": "3"}, "contentChanges": []}),
    _did_change({"textDocument": {**VDOC, "version": None}, "contentChanges": []}),
    _did_change({"textDocument": VDOC, "contentChanges": [{"range": SPAN}]}),
    _did_change({"textDocument": VDOC, "contentChanges": [{"range": SPAN, "text": 1}]}),
    _did_change(
        {"textDocument": VDOC, "contentChanges": [{"range": SPAN, "rangeLength": -1, "text": ""}]}
    ),
    _did_change(
        {"textDocument": VDOC, "contentChanges": [{"range": SPAN, "rangeLength": None, "text": ""}]}
    ),
    _did_change({"textDocument": VDOC, "contentChanges": [{"range": {"start": AT}, "text": ""}]}),
    _did_change({"textDocument": VDOC, "contentChanges": [{"range": SPAN, "text": "", "x": 1}]}),
    _did_change({"textDocument": VDOC, "contentChanges": ({"text": "t"},)}),
    _did_change({"textDocument": VDOC, "contentChanges": [{"text": "t"}]}, id=4),
]


def _converted(proto: Any, data: dict[str, Any]) -> Any:
    kind = JsonRPCRequestMessage if "id" in data else JsonRPCNotification
    try:
        return proto._converter.structure(data, proto.get_message_type(data["method"]) or kind)
    except Exception as exc:
        return type(exc)


def _parts(obj: Any) -> list[Any]:
    """The attrs objects in `obj`, itself included, depth first."""
    if isinstance(obj, list | tuple):
        return [p for item in obj for p in _parts(item)]
    if not attrs.has(type(obj)):
        return []
    return [obj, *(p for f in attrs.fields(type(obj)) for p in _parts(getattr(obj, f.name)))]


def _hash(obj: Any) -> Any:
    try:
        return hash(obj)
    except TypeError as exc:  # (TextDocumentIdentifier is not hashable)
        return str(exc)


@pytest.mark.parametrize("data", PLAIN, ids=range(len(PLAIN)))
def test_a_plain_keystroke_message_is_what_the_converter_makes(proto: Any, data: Any) -> None:
    made = plain_messages.structure_plain(data)
    assert made is not None  # the hand built it
    converted = _converted(proto, data)
    assert made == converted
    # Every object in it whole (fields set without __init__ included): its validators
    # pass, it hashes and prints as the converter's, and unstructures to the same JSON.
    for part, theirs in zip(_parts(made), _parts(converted), strict=True):
        attrs.validate(part)
        assert (_hash(part), repr(part)) == (_hash(theirs), repr(theirs))
    assert proto._converter.unstructure(made) == proto._converter.unstructure(converted)


@pytest.mark.parametrize("data", ODD, ids=range(len(ODD)))
def test_an_odd_keystroke_message_is_left_to_the_converter(proto: Any, data: Any) -> None:
    assert plain_messages.structure_plain(data) is None, _converted(proto, data)


# --- json.loads, the scanner called directly for one plain object ---


@pytest.mark.parametrize(
    "body",
    [
        *BODIES,
        b'{"a": 1} ',
        b'{"a": 1}\n',
        b'{"a": 1}{}',
        b'{"a": 1',
        b"{",
        b"{}",
        b'{"a": "\xff"}',
        b'{"a": "\xed\xa0\x80"}',  # a surrogate, as bytes: json.loads lets it pass
        b'{"a": "\\ud800"}',
        b'{"a": NaN, "b": -Infinity}',
        b"\xef\xbb\xbf" + b'{"a": 1}',  # a UTF-8 BOM
        '{"a": 1}'.encode("utf-16-le"),
        '{"a": 1}'.encode("utf-32-le"),
        b'{"a": ' * 100_000 + b"1" + b"}" * 100_000,
    ],
)
def test_loads_is_json_loads(body: bytes) -> None:
    def outcome(load: Any) -> Any:
        try:
            return load(body)
        except Exception as exc:
            return (type(exc), str(exc))

    assert outcome(transport._loads) == outcome(json.loads)


# --- the envelope: the usual one passes without envelope_problem, the rest is its ---

ENVELOPES: list[dict[str, Any]] = (
    [
        {"jsonrpc": "2.0", "id": i, "method": m, "params": {}}
        for i in (1, "a", 0, -1, True, False, 1.5, None, [1], {"a": 1})
        for m in ("shutdown", "x/y")
    ]
    + [
        {"jsonrpc": v, "id": 1, "method": "shutdown", "params": {}}
        for v in ("1.0", 2.0, None, ["2.0"], "2.0 ")
    ]
    + [
        {"jsonrpc": "2.0", "method": 3, "params": {}},
        {"jsonrpc": "2.0", "method": None},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 1, "result": None},
        {"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "m"}},
        {"jsonrpc": "2.0", "id": True, "result": None},
    ]
)


@pytest.mark.parametrize("data", ENVELOPES, ids=range(len(ENVELOPES)))
def test_an_envelope_is_refused_exactly_when_envelope_problem_says(proto: Any, data: Any) -> None:
    problem = transport.envelope_problem(data)
    try:
        proto.structure_message(dict(data))
    except transport.InvalidEnvelope as exc:
        assert exc.problem == problem
    except Exception:  # refused later (params, an unknown response): not the envelope
        assert problem is None
    else:
        assert problem is None


# --- what goes out unscrubbed: only what scrub_outgoing would leave as it is ---

TRACE = 'Traceback (most recent call last):\n  File "x.py", line 1, in f\nValueError: v'
OUTGOING: list[Any] = [
    {"jsonrpc": "2.0", "id": 1, "result": {"items": [{"insertText": TRACE}]}},
    {"jsonrpc": "2.0", "id": 1, "result": None},
    {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "boom\n" + TRACE}},
    {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "m", "data": TRACE}},
    {"jsonrpc": "2.0", "id": 1, "error": None, "result": 1},
    {"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 1, "message": TRACE}},
    {"jsonrpc": "2.0", "method": "window/showMessage", "params": {"type": 1, "message": TRACE}},
    {"jsonrpc": "2.0", "method": "$/logTrace", "params": {"message": "m", "verbose": TRACE}},
    {"jsonrpc": "2.0", "method": lsp.ROUTE_NOTIFICATION, "params": {"summary": TRACE}},
    {"jsonrpc": "2.0", "method": ["odd"], "params": {}},
    t.LogMessageNotification(params=t.LogMessageParams(t.MessageType.Error, TRACE)),
    t.ResponseErrorMessage(id=2, error=t.ResponseError(code=-32603, message=TRACE)),
]


@pytest.mark.parametrize("message", OUTGOING, ids=range(len(OUTGOING)))
def test_what_is_sent_is_what_scrub_outgoing_leaves(proto: Any, message: Any) -> None:
    import copy

    from synconfroute.server.protocol.outgoing import scrub_outgoing

    expected = copy.deepcopy(message)
    scrub_outgoing(expected)
    proto._send_data(copy.deepcopy(message))
    ours = proto.capture.take()
    JsonRPCProtocol._send_data(proto, expected)
    assert ours == proto.capture.take()


# --- stdout: written and flushed, message by message, without pygls' StdoutWriter ---


class Buffered:
    """A buffered binary stream's calls, in order: what reaches the pipe is what was
    written up to each flush."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []

    def write(self, data: bytes) -> int:
        self.calls.append(("write", bytes(data)))
        return len(data)

    def flush(self) -> None:
        self.calls.append(("flush", b""))

    def close(self) -> None:
        self.calls.append(("close", b""))


def test_stdout_gets_each_message_written_then_flushed() -> None:
    stream = Buffered()
    writer = StdoutWriter(stream)
    writer.write(b"one")  # returns nothing to await (pygls asks only then)
    writer.write(b"two")
    writer.close()
    assert stream.calls == [
        ("write", b"one"),
        ("flush", b""),
        ("write", b"two"),
        ("flush", b""),
        ("close", b""),
    ]
