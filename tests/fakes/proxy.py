"""A forward proxy on 127.0.0.1 that speaks CONNECT over a real socket, as corporate
proxies do for https: it reads `CONNECT host:port HTTP/1.1`, connects there, answers
`200 Connection established` and pipes the bytes both ways (the TLS inside is between
the client and the target; the proxy sees none of it). It records every request line,
so a test can tell which requests went through it. A plain-HTTP request in absolute
form (`POST http://...`) is recorded and refused with 502: a tier that should never use
the proxy shows up there.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading


class ConnectProxy:
    def __init__(self) -> None:
        self.port = 0
        self.lines: list[str] = []  # every request line, in order
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def connects(self) -> list[str]:
        """The targets (host:port) of the CONNECT requests seen."""
        with self._lock:
            return [line.split()[1] for line in self.lines if line.startswith("CONNECT ")]

    def plain(self) -> list[str]:
        with self._lock:
            return [line for line in self.lines if not line.startswith("CONNECT ")]

    def __enter__(self) -> ConnectProxy:
        self._thread = threading.Thread(target=self._run, name="ConnectProxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = (await reader.readline()).decode("latin-1").strip()
            while await reader.readline() not in (b"\r\n", b"\n", b""):
                pass
            with self._lock:
                self.lines.append(line)
            parts = line.split()
            if len(parts) != 3 or parts[0] != "CONNECT":
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                return
            host, _, port = parts[1].rpartition(":")
            try:
                up_r, up_w = await asyncio.open_connection(host.strip("[]"), int(port))
            except (OSError, ValueError):
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                return
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await asyncio.gather(_pipe(reader, up_w), _pipe(up_r, writer))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(ConnectionError, RuntimeError):
                writer.close()


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, RuntimeError, OSError):
            dst.close()
