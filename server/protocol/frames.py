"""The LSP base protocol's framing, on our side of pygls: bytes in, message bodies out,
resynchronising on the next `Content-Length` header after anything malformed.

pygls 2's reader (`pygls.io_.run_async`) matches only `Content-Length: N\\r\\n` exactly,
reads whatever length it is told, and loses the frame boundary for good after one bad
frame: this parser replaces it (server/protocol/serve.py feeds it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_BODY_BYTES = 64 * 1024 * 1024
"""A message body above this is refused (an error response with id null) and its bytes
skipped: the length is the peer's word, and 10**12 would otherwise be allocated."""

_MAX_HEADER_LINE = 8192  # a longer line without a newline is not a header
_TAIL_KEPT = 64  # of skipped bytes, enough to hold the start of a header cut in two
_TCHAR = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]"  # RFC 7230 token, as header names are
_HEADER = re.compile(_TCHAR + rb"+[ \t]*:[ \t]*(.*?)[ \t]*")
_LENGTH_NAME = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
# A whole Content-Length line, raw newline included: valid JSON cannot hold one (a raw
# newline is not allowed inside a string, and the bare words outside one), so inside a
# body it can only be the next frame, after a Content-Length that was too large.
_LENGTH_LINE = re.compile(rb"content-length[ \t]{0,16}:[ \t]{0,16}\d{1,20}[ \t]{0,16}\r?\n", re.I)
_LENGTH_LINE_MAX = 100
# Header lines, the last one possibly cut: what follows a body's closing brace when the
# declared length ran a few bytes into the next frame's header.
_HEADER_TAIL = re.compile(
    rb"(?:" + _TCHAR + rb"+[ \t]*:[^\r\n]*\r?\n)*" + _TCHAR + rb"*(?:[ \t]*:[^\r\n]*)?\r?"
)


_PLAIN_NAME = b"Content-Length: "  # then 1 to 12 digits and the blank line
_DIGITS_AT = len(_PLAIN_NAME)
_BRACE = ord("}")


@dataclass(frozen=True)
class Body:
    """One message body; shorter than `declared` when the next frame began inside it."""

    body: bytes
    declared: int


@dataclass(frozen=True)
class TooLarge:
    declared: int


@dataclass(frozen=True)
class Skipped:
    """Bytes dropped while looking for the next header."""

    nbytes: int


Event = Body | TooLarge | Skipped


class FrameParser:
    """Bytes in, message bodies out, resynchronising on the next `Content-Length` header
    after anything malformed. Pure: the same stream gives the same bodies however it is cut.

    Header names are case-insensitive (the base protocol uses HTTP's header rules); only
    Content-Length matters, Content-Type is accepted and ignored (UTF-8 is the only charset
    in use)."""

    def __init__(self, max_body: int = MAX_BODY_BYTES) -> None:
        self._max_body = max_body
        self._buf = bytearray()
        self._length: int | None = None  # None while reading headers
        self._content_length: bytes | None = None
        self._header_lines = 0
        self._scanned = 0  # bytes of the current body already searched for a header
        self._skipped = 0

    def feed(self, data: bytes) -> list[Event]:
        self._buf += data
        out: list[Event] = []
        while True:
            if self._length is not None:
                if not self._body(out):
                    break
            elif not self._buf or not (self._plain_frame(out) or self._header_line(out)):
                break  # (no header starts in an empty buffer)
        return out

    def _plain_frame(self, out: list[Event]) -> bool:
        """The usual frame, whole in the buffer, taken in one step: `Content-Length: N`
        alone, a body without a newline that ends with its closing brace (the steps
        below would find the same body, a dozen calls later). No regular expression:
        it is one more engine to bring into the CPU's caches."""
        buf = self._buf
        if self._header_lines or self._skipped or not buf.startswith(_PLAIN_NAME):
            return False
        blank = buf.find(b"\r\n\r\n", _DIGITS_AT + 1, _DIGITS_AT + 16)
        digits = buf[_DIGITS_AT:blank]
        if blank < 0 or not digits.isdigit():
            return False
        start = blank + 4
        end = start + int(digits)
        if end > len(buf) or end - start > self._max_body or buf[end - 1] != _BRACE:
            return False
        if buf.find(b"\n", start, end) >= 0:
            return False
        body = bytes(buf[start:end])
        del buf[:end]
        out.append(Body(body, end - start))
        return True

    def _skip(self, n: int) -> None:
        del self._buf[:n]
        self._skipped += n

    def _flush_skipped(self, out: list[Event]) -> None:
        if self._skipped:
            out.append(Skipped(self._skipped))
            self._skipped = 0

    def _drop_headers(self) -> None:
        self._content_length = None
        self._header_lines = 0

    def _header_line(self, out: list[Event]) -> bool:
        buf = self._buf
        nl = buf.find(b"\n")
        if nl < 0:
            if len(buf) <= _MAX_HEADER_LINE:
                return False  # wait for the rest of the line
            starts = [m.start() for m in _LENGTH_NAME.finditer(buf)]
            cut = starts[-1] if starts and starts[-1] > 0 else len(buf) - _TAIL_KEPT
            self._skip(cut)
            self._drop_headers()
            return True
        line = bytes(buf[: nl + 1])
        # A Content-Length inside a line starts the next frame: what precedes it is the
        # rest of a body whose Content-Length was too small (or other noise).
        starts = [m.start() for m in _LENGTH_NAME.finditer(line)]
        if starts and starts[-1] > 0:
            self._skip(starts[-1])
            self._drop_headers()
            return True
        del buf[: nl + 1]
        text = line.rstrip(b"\r\n")
        if not text.strip():  # the blank line that ends the headers
            if self._content_length is not None:
                self._start_body(int(self._content_length), out)
            elif self._header_lines:
                self._skipped += self._header_lines  # headers without a length: a lost frame
            self._drop_headers()
            return True
        m = _HEADER.fullmatch(text)
        if starts and m is not None and m.group(1).isdigit():
            self._content_length = m.group(1)
        elif m is None or starts:  # not a header, or a Content-Length that is not a number
            self._skipped += len(line)
            self._drop_headers()
            return True
        self._header_lines += len(line)
        return True

    def _start_body(self, length: int, out: list[Event]) -> None:
        self._flush_skipped(out)
        if length > self._max_body:
            out.append(TooLarge(length))  # its bytes, if they come, are skipped as noise
            return
        self._length = length
        self._scanned = 0

    def _body(self, out: list[Event]) -> bool:
        buf, n = self._buf, self._length
        assert n is not None
        end = min(len(buf), n)
        start = max(0, self._scanned - _LENGTH_LINE_MAX)
        m = _LENGTH_LINE.search(buf, start, end) if buf.find(b"\n", start, end) >= 0 else None
        if m is not None:
            # The declared length was too large: the body ends where the next frame starts.
            body = bytes(buf[: m.start()])
            brace = body.rfind(b"}")
            keep = brace + 1 if brace >= 0 else len(body)
            del buf[:keep]  # whatever lies between the brace and the header is parsed as headers
            self._emit(Body(body[:keep], n), out)
            return True
        if len(buf) < n:
            self._scanned = len(buf)
            return False
        if not _may_be_message(buf, n):
            # A body that cannot be a message: if the next frame's header begins inside it
            # (the length ran into that header), the body ends there, so no frame is lost.
            found = _header_inside(buf, n)
            if found is _WAIT:
                self._scanned = n
                return False  # the tail might begin a header: wait for its next bytes
            if isinstance(found, int):
                body = bytes(buf[:found])
                del buf[:found]
                self._emit(Body(body, n), out)
                return True
        with memoryview(buf) as view:  # one copy, not two (10 MB didOpen bodies)
            body = bytes(view[:n])
        del buf[:n]
        brace = body.rfind(b"}")
        tail = body[brace + 1 :] if brace >= 0 else b""
        if tail.strip() and len(tail) <= _MAX_HEADER_LINE and _HEADER_TAIL.fullmatch(tail.lstrip()):
            # Too large by less than a header: give the start of the next header back.
            buf[0:0] = tail
            body = body[: brace + 1]
        self._emit(Body(body, n), out)
        return True

    def _emit(self, event: Event, out: list[Event]) -> None:
        self._length = None
        out.append(event)


_NAME = b"content-length"
# Any start of a Content-Length header name (at least one letter), up to its colon, at the
# end of the bytes received so far.
_NAME_START = re.compile(
    b"".join(b"(?:" + re.escape(_NAME[i : i + 1]) for i in range(len(_NAME)))
    + rb"(?:[ \t]{0,16})?"
    + b")?" * (len(_NAME) - 1)
    + b")\\Z",
    re.IGNORECASE,
)
_NAME_REACH = len(_NAME) + 18  # the name, spaces and the colon
_WAIT = object()


def _may_be_message(buf: bytearray, n: int) -> bool:
    """Whether the n-byte body at the start of `buf` can hold a JSON-RPC message (an
    object or a batch array: it ends with a brace or a bracket)."""
    tail = bytes(buf[max(0, n - 64) : n]).rstrip()
    return tail.endswith((b"}", b"]"))


def _header_inside(buf: bytearray, n: int) -> int | object | None:
    """Where a Content-Length header starts inside the body buf[:n] (it may run past n),
    _WAIT when the body's end may begin one but the bytes after it are not here yet,
    else None."""
    end = min(len(buf), n + _NAME_REACH)
    m = _LENGTH_NAME.search(buf, 0, end)
    if m is not None and m.start() < n:
        return m.start()
    if len(buf) >= n + _NAME_REACH:
        return None
    part = _NAME_START.search(buf, max(0, n - _NAME_REACH))
    return _WAIT if part is not None and part.start() < n else None
