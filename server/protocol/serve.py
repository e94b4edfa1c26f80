"""Running the language server: one client over stdio (or TCP, for debugging), bytes
read in the event loop, framed, handled, until `exit` or the end of input.

pygls' `exit` waits for a thread blocked on stdin; here the read loop ends with the
exit code instead (`run_until_exit`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, BinaryIO

from pygls.lsp.server import LanguageServer

from . import collector
from .frames import FrameParser
from .transport import StdoutWriter, TransportProtocol

log = logging.getLogger(__name__)

_READ_SIZE = 1 << 16


class _Reception:
    """What `_serve` and `_serve_fd` share: bytes in, events handled, until exit."""

    def __init__(self, protocol: TransportProtocol) -> None:
        self.protocol = protocol
        self.parser = FrameParser()

    def take(self, data: bytes) -> bool:
        """Handle `data` (b"": the end of input); whether to go on reading."""
        if not data:
            log.info("synconfroute: the client closed the connection")
            return False
        protocol = self.protocol
        for event in self.parser.feed(data):
            protocol.receive(event)
            if protocol.exit_code is not None:
                return False
        return True


async def _serve(protocol: TransportProtocol, read: Callable[[], Awaitable[bytes]]) -> int:
    reception = _Reception(protocol)
    try:
        while protocol.exit_code is None and reception.take(await read()):
            pass
    except BrokenPipeError:
        log.error("synconfroute: the connection to the client is lost")
    return protocol.exit_code or 0


_EXIT_GRACE_S = 2.0  # tasks still running at exit get this long to end once cancelled


def run_until_exit(main: Coroutine[Any, Any, int]) -> int:
    """`asyncio.run(main)`, except at the end: tasks left are cancelled and given
    `_EXIT_GRACE_S`, and the loop's worker threads are not waited for (asyncio.run joins
    them, so a thread blocked in a read would hold the process after `exit`). The caller
    ends the process (`os._exit`) once its output is flushed."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main)
    finally:
        try:
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.wait(left, timeout=_EXIT_GRACE_S))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()  # shuts the default executor down without waiting for it


def _protocol(server: LanguageServer) -> TransportProtocol:
    protocol = server.protocol
    if not isinstance(protocol, TransportProtocol):
        raise TypeError("the server's protocol_cls must derive from TransportProtocol")
    return protocol


def serve_stdio(
    server: LanguageServer, stdin_fd: int | None = None, stdout: BinaryIO | None = None
) -> int:
    """Serve one client over stdio until exit or end of input; the process exit code."""
    protocol = _protocol(server)
    protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
    fd = sys.stdin.fileno() if stdin_fd is None else stdin_fd

    async def main() -> int:
        loop = asyncio.get_running_loop()
        try:
            loop.add_reader(fd, lambda: None)
            loop.remove_reader(fd)
        except (OSError, ValueError, NotImplementedError):
            # Not pollable (a regular file), or a loop without add_reader (Windows'
            # proactor): a reading thread.
            return await _serve(protocol, _thread_reader(loop, fd))
        return await _serve_fd(protocol, loop, fd)

    with collector.serving():
        return run_until_exit(main())


async def _serve_fd(protocol: TransportProtocol, loop: asyncio.AbstractEventLoop, fd: int) -> int:
    """Serve what comes in on `fd` (a pipe, a socket, a terminal), read in the event loop
    itself when it is readable and handled in that same turn of the loop: no thread to hand
    each message over (that hop cost 0.3-0.5 ms a request on a shared 2-core machine), and
    no task to wake (one more turn of the loop, 50-70 µs cold; bench/lsp_stages.py).
    The fd stays as it is (blocking): a read after readiness returns what is there. Each
    read is handled whole before the next, so a client that writes faster than we parse
    waits in its pipe, not in our RAM."""
    reception = _Reception(protocol)
    ended: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if ended.done():
            return
        try:
            data = os.read(fd, _READ_SIZE)
        except BlockingIOError:  # readiness was spurious: nothing lost, wait again
            return
        except OSError:
            data = b""
        try:
            going_on = reception.take(data)
        except BrokenPipeError:
            log.error("synconfroute: the connection to the client is lost")
            going_on = False
        except Exception as exc:  # raised by serve_stdio, as a serving coroutine's would be
            ended.set_exception(exc)
            return
        if not going_on:
            ended.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await ended
    finally:
        loop.remove_reader(fd)
    return protocol.exit_code or 0


def _thread_reader(loop: asyncio.AbstractEventLoop, fd: int) -> Callable[[], Awaitable[bytes]]:
    """Reads of `fd` in a daemon thread, for what epoll cannot watch (a regular file)."""
    # Bounded: a client that writes faster than we parse waits in its pipe, not in our RAM.
    chunks: asyncio.Queue[bytes] = asyncio.Queue(maxsize=16)

    def pump() -> None:
        # A daemon thread on the raw fd: a blocked read never delays the exit.
        while not loop.is_closed():
            try:
                data = os.read(fd, _READ_SIZE)
            except OSError:
                data = b""
            try:
                asyncio.run_coroutine_threadsafe(chunks.put(data), loop).result()
            except BaseException:  # the loop has ended (closed, or the put cancelled)
                return
            if not data:
                return

    threading.Thread(target=pump, name="synconfroute-stdin", daemon=True).start()
    return chunks.get


def serve_tcp(server: LanguageServer, host: str, port: int) -> int:
    """Serve the first client that connects (debugging), with the same reader as stdio."""
    protocol = _protocol(server)

    async def main() -> int:
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        busy = False

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal busy
            if busy:  # one client per server, as over stdio
                writer.close()
                return
            busy = True
            protocol.set_writer(writer)
            code = await _serve(protocol, lambda: reader.read(_READ_SIZE))
            writer.close()
            if not done.done():
                done.set_result(code)

        tcp = await asyncio.start_server(connection, host, port)
        log.info("synconfroute: serving on %s:%s", host, port)
        async with tcp:
            return await done

    with collector.serving():
        return run_until_exit(main())
