"""The LSP base protocol's rules on our side of pygls: the JSON-RPC 2.0 envelope, the
lifecycle rules of the specification (initialize first, nothing after shutdown, exit code)
and dispatch of each message to pygls' handlers.

pygls' reader is replaced by our framing (server/protocol/frames.py) and read loop
(server/protocol/serve.py); this module replaces the few protocol methods involved
(`exit` among them); everything else is pygls.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import itertools
import json
import json.encoder
import logging
from collections.abc import Callable, Generator
from concurrent.futures import Future
from typing import Any

from cattrs.errors import ClassValidationError
from lsprotocol import types as t
from pygls.exceptions import (
    FeatureNotificationError,
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
)
from pygls.feature_manager import wrap_with_server
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, LanguageServerProtocol
from pygls.protocol.json_rpc import JsonRPCProtocol, RPCMessage
from pygls.protocol.language_server import lsp_method

from ..learning import later
from . import collector
from .frames import MAX_BODY_BYTES, Body, Event, Skipped, TooLarge
from .outgoing import TEXT_MESSAGES, scrub_outgoing
from .plain_messages import structure_plain

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
SERVER_NOT_INITIALIZED = -32002


class _Answered:
    """What `structure_message` returns for a request it has answered itself (its params
    did not fit): `handle_message` drops it without a word."""

    jsonrpc = "answered"


ANSWERED = _Answered()


def _valid_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def envelope_problem(data: dict[str, Any]) -> str | None:
    """What makes `data` an invalid JSON-RPC 2.0 message (InvalidRequest), or None."""
    if data.get("jsonrpc") != "2.0":
        return f"not a JSON-RPC 2.0 message (jsonrpc is {_brief(data.get('jsonrpc'))})"
    if "method" in data and not isinstance(data["method"], str):
        return f"the method must be a string, got {type(data['method']).__name__}"
    ok_id = _valid_id(data.get("id")) or (data.get("id") is None and "method" not in data)
    if "id" in data and not ok_id:
        return f"the id must be a string or a number, got {type(data['id']).__name__}"
    return None


def _brief(value: Any) -> str:
    return repr(value) if isinstance(value, str | int | float | None) else type(value).__name__


_SCAN: Any = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # C, where there is one


def _loads(body: bytes) -> Any:
    """`json.loads(body)`. A body that starts with `{` (so UTF-8 without a BOM, as
    json.loads would find) and is one object exactly goes to the scanner directly,
    without json.loads' four Python layers and two regular expressions; anything else,
    an error included, is json.loads' to read or to refuse."""
    if body[:1] == b"{" and body[1:2] != b"\0":
        try:
            text = body.decode("utf-8", "surrogatepass")  # as json.loads decodes
            data, end = _SCAN(text, 0)
        except (StopIteration, ValueError):
            pass
        else:
            if end == len(text):
                return data
    return json.loads(body)


class InvalidEnvelope(Exception):
    """A message that is JSON but not a valid JSON-RPC 2.0 message: InvalidRequest, with
    its id when the id itself is valid."""

    def __init__(self, problem: str, data: dict[str, Any]) -> None:
        super().__init__(problem)
        self.problem = problem
        self.msg_id: int | str | None = data.get("id") if _valid_id(data.get("id")) else None


_REQUEST, _NOTIFICATION, _RESPONSE, _ERROR = (object() for _ in range(4))
_pygls_log = logging.getLogger("pygls.protocol.json_rpc")  # its lines, as pygls logs them
# JSONEncoder's own C encoder, made with the arguments json.dumps' defaults give it
# (markers, default, ensure_ascii's string encoder, indent, separators, sort_keys,
# skipkeys, allow_nan); None where the interpreter has none.
_C_MAKE_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_ASCII = json.encoder.encode_basestring_ascii
_CONTENT_TYPE = (
    f"Content-Type: {JsonRPCProtocol.CONTENT_TYPE}; charset={JsonRPCProtocol.CHARSET}".encode()
)


# The kind of each slotted attrs class's messages (lsprotocol's, pygls' own): every
# instance has the same attributes, so the same kind.
_KINDS: dict[type, object] = {}


_UNKNOWN: Any = object()


async def _feature(ls: Any) -> None:  # (only for the code object of pygls' wrapper)
    return None


# The code of the coroutine pygls wraps a feature in, to call it with the server first.
_pygls_wrapped = wrap_with_server(_feature, object())  # type: ignore[no-untyped-call]
_PYGLS_WRAPPED: Any = getattr(_pygls_wrapped, "__code__", None)


def message_kind(message: Any) -> object:
    """Which of pygls' RPCRequest, RPCNotification, RPCResponse (else RPCError) the message
    is, by the test those protocols make (all their attributes present), without their
    isinstance: a runtime-checkable Protocol's costs 10-16 µs on Python 3.11 (typing
    collects the protocol's attributes anew each time), and pygls made up to four a message."""
    has_id, has_method = hasattr(message, "id"), hasattr(message, "method")
    has_rpc, has_params = hasattr(message, "jsonrpc"), hasattr(message, "params")
    if has_id and has_method and has_rpc and has_params:
        kind = _REQUEST
    elif has_method and has_rpc and has_params:
        kind = _NOTIFICATION
    elif has_id and has_rpc and hasattr(message, "result"):
        kind = _RESPONSE
    else:
        kind = _ERROR
    cls = type(message)
    if hasattr(cls, "__attrs_attrs__") and not hasattr(message, "__dict__"):
        _KINDS[cls] = kind  # (a few dozen classes at most: lsprotocol's messages)
    return kind


class TransportProtocol(LanguageServerProtocol):
    """pygls' protocol with the lifecycle rules of the LSP specification:
    a request before initialize gets ServerNotInitialized (-32002) and a notification is
    dropped; a request after shutdown gets InvalidRequest; exit sets the exit code (0 after
    shutdown, else 1) and ends the read loop instead of raising SystemExit in it."""

    def __init__(self, server: Any, converter: Any) -> None:
        super().__init__(server, converter)
        self._encoder = json.JSONEncoder(default=self._serialize_message)
        self._writes: set[asyncio.Future[Any]] = set()
        self._notifications = itertools.count()
        # What to call for each handler that is a coroutine function (None: not one).
        self._async_handlers: dict[Callable[..., Any], Callable[..., Any] | None] = {}
        self.exit_code: int | None = None
        self._initialize_seen = False
        self._shutdown_seen = False
        self._laters: dict[Any, later.Later] = {}  # per request id, till its response

    def _send_data(self, data: Any) -> None:
        # The one way out to the editor: nothing that looks like a traceback passes.
        # (Our own results and notifications carry none of the texts it checks: the
        # test scrub_outgoing starts with, made here, spares them the call.)
        if (
            type(data) is not dict
            or data.get("error") is not None
            or (type(method := data.get("method")) is str and method in TEXT_MESSAGES)
        ):
            try:
                scrub_outgoing(data)
            except Exception:  # an object of an unexpected shape: sent as it is
                log.debug("synconfroute: could not check an outgoing message", exc_info=True)
        if not data or self.writer is None:
            super()._send_data(data)  # pygls drops it, or logs that it cannot send
            return
        # pygls' _send_data, the same bytes with one encoder kept (json.dumps with
        # `default` builds a new one for every message) and the header made as bytes.
        try:
            body = self._to_json(data).encode(self.CHARSET)
            if _pygls_log.isEnabledFor(logging.INFO):  # (one call, not two, when not)
                _pygls_log.info("Sending data: %s", body)
            if self._include_headers:
                body = b"Content-Length: %d\r\n%s\r\n\r\n%s" % (len(body), _CONTENT_TYPE, body)
            res = self.writer.write(body)
            if res is not None and inspect.isawaitable(res):  # an async writer's: kept
                task = asyncio.ensure_future(res)
                self._writes.add(task)
                task.add_done_callback(self._writes.discard)
        except BrokenPipeError:
            _pygls_log.exception("Error sending data. BrokenPipeError", exc_info=True)
            raise
        except Exception as error:
            _pygls_log.exception("Error sending data", exc_info=True)
            self._server._report_server_error(error, JsonRpcInternalError)

    def _to_json(self, data: Any) -> str:
        """`json.dumps(data, default=self._serialize_message)`: with the C encoder (where
        there is one) called directly, as JSONEncoder.encode would, without its two
        Python layers."""
        if _C_MAKE_ENCODER is None:
            return self._encoder.encode(data)
        encode = _C_MAKE_ENCODER(
            {}, self._serialize_message, _ASCII, None, ": ", ", ", False, False, True
        )
        return "".join(encode(data, 0))

    def send_notification_data(self, method: str, params: dict[str, Any]) -> None:
        """`notify(method, params)` for params that are JSON values already (a method
        without an lsprotocol type): sent as they are, the same bytes as pygls' notify
        sends after copying them through its converter."""
        if self.get_message_type(method) is not None:
            self.notify(method, params)
            return
        if _pygls_log.isEnabledFor(logging.DEBUG):
            _pygls_log.debug("Sending notification: '%s' %s", method, params)
        self._send_data({"method": method, "jsonrpc": JsonRPCProtocol.VERSION, "params": params})

    def send_error(self, msg_id: int | str | None, code: int, message: str) -> None:
        # Written by hand: pygls' converter drops "id": null, which JSON-RPC requires.
        error = {"code": code, "message": message}
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": error})

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: t.ResponseError | None = None
    ) -> None:
        # pygls answers a handler's crash with its traceback in `data`: the traceback is
        # in our log (pygls logs it), the client gets the message only.
        if error is not None and isinstance(error.data, dict) and "traceback" in error.data:
            text = f"synconfroute: internal error: {error.message} (the server log has the details)"
            error = t.ResponseError(code=error.code, message=text)
        if error is not None or msg_id in self._result_types:
            super()._send_response(msg_id, result, error)
        else:
            # pygls wraps the result in a JsonRPCResponseMessage that its converter then
            # takes apart again: the same dict, made directly (the encoder's `default`
            # unstructures what JSON does not know, as the converter would; a plain result
            # is not copied).
            self._send_data({"id": msg_id, "jsonrpc": JsonRPCProtocol.VERSION, "result": result})
        try:
            pending = self._laters.pop(msg_id, None)
        except TypeError:  # an unhashable id (a malformed message's) has none
            pending = None
        if pending is not None:
            pending.run()  # the request's bookkeeping, now that the editor has its answer
        collector.after_response()  # the garbage collector's pass, if one is due

    def _handle_request(self, msg_id: Any, method_name: str, params: Any) -> None:
        # (Run in a copy of the context, which the handler's task inherits: the work it
        # leaves for later finds this request's `Later`.)
        self._laters[msg_id] = later.for_request()
        super()._handle_request(msg_id, method_name, params)

    def _send_handler_result(self, future: Future[Any], *, msg_id: Any) -> None:
        # A request the client got wrong (a position outside the document, a malformed
        # params object) is answered with its error and one log line: pygls would log it
        # as an ERROR with a traceback and pop a message up in the editor, as for a crash.
        exc = None if future.cancelled() else future.exception()
        if isinstance(exc, JsonRpcInvalidParams | JsonRpcInvalidRequest):
            self._request_futures.pop(msg_id, None)
            log.info("answered request %s with error %d: %s", msg_id, exc.code, exc.message)
            self._send_response(msg_id, error=exc.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Callable[..., Any],
        callback: Callable[[Future[Any]], None],
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        try:
            call = self._async_handlers.get(handler, _UNKNOWN)
        except TypeError:  # an unhashable callable: asked each time
            call = handler if asyncio.iscoroutinefunction(handler) else None
        if call is _UNKNOWN:  # asked once a handler (inspect unwraps it: six calls)
            call = self._async_handlers[handler] = self._coroutine_call(handler)
        if call is None:
            super()._execute_handler(msg_id, handler, callback, args, kwargs)
            return
        # A coroutine's result is handed on (a request answered) in its own task: pygls
        # does it in a done-callback, which waits for the event loop's next turn (70 µs
        # a request, cold, bench/lsp_stages.py). Cancelled (before it ran, too) or
        # failed, the task still ends in the callback, as in pygls; answered, the
        # done-callback is taken off (it would cost the loop a turn after the response).
        handed = False

        async def run() -> Any:
            nonlocal handed
            result = await call(*(args or ()), **(kwargs or {}))
            done = asyncio.get_running_loop().create_future()  # no lock, unlike pygls' Future
            done.set_result(result)
            handed = True
            callback(done)  # type: ignore[arg-type]  # what the callback asks of a Future
            task.remove_done_callback(after)  # (only once the callback went through)
            return result

        def after(task: asyncio.Task[Any]) -> None:  # the task's done-callback
            if not handed:
                callback(task)  # type: ignore[arg-type]  # a Future, as pygls passes it
            elif not task.cancelled() and (exc := task.exception()) is not None:
                raise exc  # the callback's own failure: logged by the loop, as in pygls

        task = asyncio.get_running_loop().create_task(run())  # as pygls' ensure_future
        self._request_futures[msg_id] = task  # type: ignore[assignment]  # cancellable
        task.add_done_callback(after)

    def _coroutine_call(self, handler: Callable[..., Any]) -> Callable[..., Any] | None:
        """What to call for a coroutine handler (None: not one). pygls wraps a feature
        that takes the server first (wrap_with_server) in a coroutine that only awaits
        it with the server: the feature itself is called with the server instead, one
        coroutine frame less to start and to resume at every await of the request."""
        if not asyncio.iscoroutinefunction(handler):
            return None
        code: Any = getattr(handler, "__code__", None)
        cells: Any = getattr(handler, "__closure__", None)
        if code is None or code is not _PYGLS_WRAPPED or cells is None:
            return handler
        bound = dict(zip(code.co_freevars, cells, strict=True))
        if "f" not in bound or "server" not in bound:
            return handler
        return functools.partial(bound["f"].cell_contents, bound["server"].cell_contents)

    def _handle_notification(self, method_name: str, params: Any) -> None:
        # pygls' own, with a counted key for the handler's future instead of str(uuid4())
        # (a getrandom call and 5 µs a keystroke): a tuple, so no JSON-RPC id can equal it.
        if method_name == t.CANCEL_REQUEST:
            super()._handle_notification(method_name, params)
            return
        try:
            handler = self._get_handler(method_name)
            key = ("notification", next(self._notifications))
            self._execute_handler(key, handler, self._check_handler_result, (params,))
        except JsonRpcMethodNotFound:
            _pygls_log.warning("Ignoring notification for unknown method %r", method_name)
        except Exception as error:
            _pygls_log.exception(
                "Failed to handle notification %r: %s", method_name, params, exc_info=True
            )
            self._server._report_server_error(error, FeatureNotificationError)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        # A cancel for a request already answered is the usual case (clients cancel as
        # the user types on), and an id that is no JSON-RPC id names no request: neither
        # is worth a warning (pygls warns, or fails on an unhashable id).
        if not _valid_id(msg_id):
            log.debug("ignored $/cancelRequest with id %s", _brief(msg_id))
            return
        future = self._request_futures.pop(msg_id, None)
        if future is None:
            log.debug("$/cancelRequest for %s: not running (answered already)", msg_id)
        elif future.cancel():
            log.debug("cancelled request %s", msg_id)

    def structure_message(self, data: dict[str, Any]) -> Any:
        if "jsonrpc" not in data:  # an object inside a message
            return data
        # The usual request or notification passes envelope_problem's checks as seen here.
        usual = data["jsonrpc"] == "2.0" and type(data.get("method")) is str
        if not (usual and ("id" not in data or type(data["id"]) in (int, str))):
            problem = envelope_problem(data)
            if problem is not None:
                raise InvalidEnvelope(problem, data)
        if "method" not in data:  # a response to our request: pygls knows its type
            return super().structure_message(data)
        # A request or notification: structured as pygls does, but params the client got
        # wrong are its error (InvalidParams, answered and logged in one line), not an
        # ERROR with a traceback in the log as pygls writes it.
        if (plain := structure_plain(data)) is not None:
            return plain
        kind = JsonRPCRequestMessage if "id" in data else JsonRPCNotification
        try:
            return self._converter.structure(data, self.get_message_type(data["method"]) or kind)
        except ClassValidationError as exc:
            raise JsonRpcInvalidParams() from exc

    def _decode(self, body: bytes) -> Any:
        """The message in `body`, structured: `structure_message` is the object hook of
        every object in it, as in pygls, inner ones first. When `"jsonrpc"` is in the
        body once and nothing is escaped as \\uXXXX (so no other key can read "jsonrpc"),
        only the outermost object can be a message: it alone is structured, after a plain
        `json.loads` (no decoder made, no hook called for each inner object)."""
        if body.count(b'"jsonrpc"') != 1 or b"\\u" in body:
            return json.loads(body, object_hook=self.structure_message)
        data = _loads(body)
        if not isinstance(data, dict) or "jsonrpc" not in data:
            return json.loads(body, object_hook=self.structure_message)
        return self.structure_message(data)

    def handle_message(self, message: RPCMessage | _Answered) -> None:
        if isinstance(message, _Answered):  # a request `structure_message` answered already
            return
        method = getattr(message, "method", None)
        kind = _KINDS.get(type(message)) or message_kind(message)
        request = kind is _REQUEST
        msg_id = getattr(message, "id", None) if request else None
        if request and method == t.INITIALIZE and self._initialize_seen:
            text = "synconfroute: initialize was already received; it may be sent only once"
            self.send_error(msg_id, INVALID_REQUEST, text)
            return
        if method == t.EXIT:
            pass
        elif not self._initialize_seen and not (request and method == t.INITIALIZE):
            if request:
                text = f"synconfroute: {method} before initialize; send initialize first"
                self.send_error(msg_id, SERVER_NOT_INITIALIZED, text)
            return  # a notification before initialize is dropped (LSP specification)
        elif self._shutdown_seen and request:
            text = f"synconfroute: {method} after shutdown; only exit is accepted now"
            self.send_error(msg_id, INVALID_REQUEST, text)
            return
        if request and method == t.INITIALIZE:
            self._initialize_seen = True
        if request and method == t.SHUTDOWN:
            self._shutdown_seen = True
        self._dispatch(message, kind)

    def _dispatch(self, message: Any, kind: object) -> None:
        # pygls' handle_message, with the message's kind told by `message_kind`.
        if message.jsonrpc != JsonRPCProtocol.VERSION:
            _pygls_log.warning('Unknown message "%s"', message)
            return
        if self._shutdown and getattr(message, "method", "") != t.EXIT:
            _pygls_log.warning("Server shutting down. No more requests!")
            return
        ctx = contextvars.copy_context()  # each handler runs in its own context
        if kind is _REQUEST:
            if _pygls_log.isEnabledFor(logging.DEBUG):  # (one call, not two, when not)
                _pygls_log.debug("Request %r received", message.method)
            ctx.run(self._handle_request, message.id, message.method, message.params)
        elif kind is _NOTIFICATION:
            if _pygls_log.isEnabledFor(logging.DEBUG):
                _pygls_log.debug("Notification %r received", message.method)
            ctx.run(self._handle_notification, message.method, message.params)
        elif kind is _RESPONSE:
            _pygls_log.debug("Response message received.")
            ctx.run(self._handle_response, message.id, message.result)
        else:
            _pygls_log.debug("Error message received.")
            ctx.run(self._handle_response, message.id, None, message.error)

    @lsp_method(t.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        if (user_handler := self.fm.features.get(t.EXIT)) is not None:
            yield user_handler, args, None
        self.exit_code = 0 if self._shutdown_seen else 1

    def receive(self, event: Event) -> None:
        """Handle one event from the frame parser."""
        if type(event) is Body and len(event.body) == event.declared:  # the usual one
            self._receive_body(event.body)
        elif isinstance(event, Skipped):
            log.warning("synconfroute: skipped %d bytes that were not a message", event.nbytes)
        elif isinstance(event, TooLarge):
            text = (
                f"synconfroute: a message of {event.declared} bytes exceeds the limit of "
                f"{MAX_BODY_BYTES // (1024 * 1024)} MB; skipped"
            )
            log.warning("%s", text)
            self.send_error(None, INVALID_REQUEST, text)
        else:
            if len(event.body) != event.declared:
                log.warning(
                    "synconfroute: Content-Length said %d bytes, but the next message "
                    "began after %d; read the message up to there",
                    event.declared,
                    len(event.body),
                )
            self._receive_body(event.body)

    def _receive_body(self, body: bytes) -> None:
        try:
            message = self._decode(body)
        except InvalidEnvelope as exc:
            log.warning("synconfroute: %s", exc.problem)
            self.send_error(exc.msg_id, INVALID_REQUEST, f"synconfroute: {exc.problem}")
            return
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
            # The message text is not logged: it may hold source code.
            text = f"synconfroute: a message is not valid JSON ({exc})"
            log.warning("%s", text)
            self.send_error(None, PARSE_ERROR, text)
            return
        except JsonRpcException as exc:  # requests were answered by structure_message
            log.warning("synconfroute: dropped a malformed message: %s", exc)
            return
        if not isinstance(getattr(message, "jsonrpc", None), str):
            # Not a JSON-RPC 2.0 object (pygls passes such values on, then fails on them).
            fields = message if isinstance(message, dict) else {}
            if "id" not in fields and "method" in fields:
                return  # a notification gets no answer, even a malformed one
            msg_id = fields.get("id")
            if not isinstance(msg_id, str | int) or isinstance(msg_id, bool):
                msg_id = None
            text = "synconfroute: not a JSON-RPC 2.0 request object"
            log.warning("%s", text)
            self.send_error(msg_id, INVALID_REQUEST, text)
            return
        try:
            self.handle_message(message)
        except BrokenPipeError:
            raise
        except Exception:
            log.exception("synconfroute: failed to handle a message")


class StdoutWriter:
    """pygls' StdoutWriter without its layer: each message written, then flushed (a
    binary stream: stdout, or a test's)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._write = stream.write
        self._flush = stream.flush

    def write(self, data: bytes) -> None:
        self._write(data)
        self._flush()

    def close(self) -> Any:
        return self._stream.close()
