"""A small HTTP/1.1 server for test doubles, running in its own thread and loop.

Why not a framework: the fakes must notice the exact moment a client hangs up
mid-stream (to assert cancellation from the server's side) and must be able to
send deliberately broken answers. A few lines of asyncio give us both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

Handler = Callable[["Request", "Responder"], Awaitable[None]]

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    499: "Client Closed Request",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


@attrs.define
class TokenScript:
    """What a fake model generates for the next request(s).

    `tokens` are (text, logprob) pairs. `delay` is slept before every token
    (`first_delay` before the first one instead, if set). `error_after` sends a
    mid-stream error after that many tokens. `status`/`body` answer the request
    with an error (or raw bytes) before any token; with `retry_after` that answer
    carries a Retry-After header, and `echo_headers` makes its body a plain-text
    page that echoes the request's headers (Authorization included), as a
    misconfigured proxy does.
    """

    tokens: list[tuple[str, float]] = attrs.field(factory=list)
    delay: float = 0.0
    first_delay: float | None = None
    status: int | None = None
    body: Any = None  # JSON-able error body, or bytes sent raw
    error_after: int | None = None
    error_message: str = "model runner has unexpectedly stopped"
    logprobs: bool = True  # False: behave like a server that omits log-probs
    finish_reason: str = "stop"
    garbage: bool = False  # stream lines that are not JSON
    hang: bool = False  # accept the request, then never answer
    retry_after: str | None = None  # Retry-After header of a `status` answer
    echo_headers: bool = False  # a `status` answer's body echoes the request headers

    @classmethod
    def of(cls, *texts: str, logprob: float = -0.1, **kw: Any) -> TokenScript:
        return cls(tokens=[(t, logprob) for t in texts], **kw)


@attrs.define
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    arrived_at: float = attrs.field(factory=time.monotonic)  # when the request was read
    # Filled in while the answer streams:
    tokens_sent: int = 0
    disconnected: bool = False  # the client hung up before the answer ended
    finished: bool = False  # the whole answer was written

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class Responder:
    """Writes one HTTP response; notices when the client goes away."""

    def __init__(self, writer: asyncio.StreamWriter, gone: asyncio.Event) -> None:
        self._w = writer
        self._gone = gone
        self.completed = False  # the whole answer was written before any hang-up

    @property
    def client_gone(self) -> bool:
        return self._gone.is_set()

    async def send(
        self,
        status: int,
        body: Any,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n{extra}"
            "Connection: close\r\n\r\n"
        )
        self._w.write(head.encode() + data)
        await self._drain()
        self.completed = not self._gone.is_set()

    async def start_stream(self, content_type: str, status: int = 200) -> None:
        head = (
            f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}\r\n"
            f"Content-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n"
            "Connection: close\r\n\r\n"
        )
        self._w.write(head.encode())
        await self._drain()

    async def write(self, data: bytes) -> bool:
        """Send one chunk; False once the client has hung up."""
        if self._gone.is_set():
            return False
        self._w.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await self._drain()
        return not self._gone.is_set()

    async def end_stream(self) -> None:
        if not self._gone.is_set():
            self._w.write(b"0\r\n\r\n")
            await self._drain()
            self.completed = not self._gone.is_set()

    async def sleep(self, seconds: float) -> bool:
        """Sleep, waking early if the client hangs up; False if it did."""
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._gone.wait(), seconds)
        return not self._gone.is_set()

    async def _drain(self) -> None:
        try:
            await self._w.drain()
        except (ConnectionError, RuntimeError):
            self._gone.set()


class FakeHTTPServer:
    """Base of the fakes: routes (method, path) to async handlers, records requests.

    Use as a context manager (`with FakeOllama() as fake: fake.url`); it runs on
    127.0.0.1 on a free port, in a daemon thread with its own event loop, so it
    serves sync code, async tests and other processes alike.
    """

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.requests: list[Request] = []
        self.port = 0
        # Set before `start` to serve HTTPS (tests/test_deploy_tls.py wraps a fake in TLS).
        self.ssl_context: ssl.SSLContext | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------
    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> FakeHTTPServer:
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FakeHTTPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._server = loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", self.port, ssl=self.ssl_context)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    # -- inspection --------------------------------------------------------
    def received(self, path: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if path is None or r.path == path]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        """Poll until `predicate()` holds (e.g. a disconnect was seen)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if predicate():
                return True
            time.sleep(0.005)
        return predicate()

    # -- HTTP --------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        gone = asyncio.Event()
        try:
            line = await reader.readline()
            if not line:
                return
            method, target, _ = line.decode("latin-1").split(" ", 2)
            headers: dict[str, str] = {}
            while (h := await reader.readline()) not in (b"\r\n", b"\n", b""):
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            req = Request(method=method, path=target.split("?", 1)[0], headers=headers, body=body)
            with self._lock:
                self.requests.append(req)

            async def watch() -> None:  # the client closing its end = hang-up
                try:
                    while await reader.read(1024):
                        pass
                except ConnectionError:
                    pass
                gone.set()

            watcher = asyncio.ensure_future(watch())
            resp = Responder(writer, gone)
            handler = self.routes.get((method, req.path))
            try:
                if handler is None:
                    await resp.send(404, {"error": f"no route {method} {req.path}"})
                else:
                    await handler(req, resp)
                req.finished = resp.completed
                req.disconnected = not resp.completed
            finally:
                watcher.cancel()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            try:
                writer.close()
                await writer.wait_closed()
            except (ConnectionError, RuntimeError):
                pass


class ScriptedServer(FakeHTTPServer):
    """A fake model server: each generation takes the next queued TokenScript,
    or `default` once the queue is empty."""

    def __init__(self, default: TokenScript) -> None:
        super().__init__()
        self.default = default
        self._scripts: deque[TokenScript] = deque()

    def script(self, *scripts: TokenScript, always: bool = False) -> None:
        """Queue answers for the next generations; `always` replaces the default."""
        with self._lock:
            if always:
                self._scripts.clear()
                self.default = scripts[-1]
            else:
                self._scripts.extend(scripts)

    def _next_script(self) -> TokenScript:
        with self._lock:
            return self._scripts.popleft() if self._scripts else self.default

    def _script_for(self, prompt: str) -> TokenScript:
        """The script for a generation of `prompt`: `answer_for`'s, where it has one for
        that prompt (a model that answers each prompt's own text), else the next queued."""
        hook = getattr(self, "answer_for", None)
        found = hook(prompt) if hook is not None else None
        return found if found is not None else self._next_script()


async def send_status(req: Request, resp: Responder, script: TokenScript, body: Any) -> None:
    """Answer with the script's error status: `body`, or the echo page, plus Retry-After."""
    assert script.status is not None
    headers = {"Retry-After": script.retry_after} if script.retry_after is not None else None
    if not script.echo_headers:
        await resp.send(script.status, body, headers=headers)
        return
    # A proxy's plain-text page: what it objected to, then every request header.
    dump = "".join(f"{k}: {v}\n" for k, v in req.headers.items())
    page = (
        f"{script.status} {REASONS.get(script.status, '')}\n"
        f"rejected: authorization: {req.headers.get('authorization', '-')}\n\n"
        f"{req.method} {req.path}\n{dump}"
    )
    await resp.send(script.status, page.encode(), "text/plain", headers=headers)


def closed_port() -> int:
    """A loopback port with nothing listening (connection refused), for 'server down'."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
