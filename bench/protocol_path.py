"""The protocol path of one inlineCompletion, in process and without the session: frame
body in, the real handler (the session's `complete` answers at once), the route
notification and the response out, bytes caught by the real HoldingWriter.

    .venv/bin/python -m bench.protocol_path [--rounds 3000]

bench.lsp_stages times the same path end to end, across processes and with a 50 ms
backend, where every stage runs with cold caches and the machine's noise; this one runs
the path back to back (warm) and counts the thread's CPU time, so its figures are
steadier and smaller. It prints the p50 and p10 in µs of a didChange and of an
inlineCompletion (with its route notification). A figures-only script: it asserts
nothing, and the figures are this machine's.

Measured on the shared 2-core VM (Dec 2026), old and new runs alternated, p50 CPU µs:
inlineCompletion + route warm 191-254 -> 87-100, cold 815-835 -> 559-593; didChange
(with the session's own change) warm 217-276 -> 113-130.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.fault_suite import CAPABILITIES
from synconfroute.server.protocol import frames, lsp, transport
from synconfroute.server.session.session import Completed
from synconfroute.server.settings import config
from synconfroute.server.vocab.kinds import Reason
from synconfroute.server.vocab.record import RouteDecision

URI = "file:///bench/raw.py"
TEXT = "def g(x):\n    return \n"


def frame(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg).encode()


INLINE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "textDocument/inlineCompletion",
    "params": {
        "textDocument": {"uri": URI},
        "position": {"line": 1, "character": 11},
        "context": {"triggerKind": 1},
    },
}
DID_OPEN = {
    "jsonrpc": "2.0",
    "method": "textDocument/didOpen",
    "params": {"textDocument": {"uri": URI, "languageId": "python", "version": 1, "text": TEXT}},
}
DID_CHANGE = {
    "jsonrpc": "2.0",
    "method": "textDocument/didChange",
    "params": {
        "textDocument": {"uri": URI, "version": 2},
        "contentChanges": [
            {
                "range": {
                    "start": {"line": 1, "character": 11},
                    "end": {"line": 1, "character": 11},
                },
                "text": "x",
            }
        ],
    },
}


class Capture:
    """The stdio writer's stand-in: keeps the bytes, wakes whoever waits for a response."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.waiter: asyncio.Future[None] | None = None

    def write(self, data: bytes) -> None:
        self.chunks.append(data)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def close(self) -> None:
        pass


def decision() -> RouteDecision:
    return RouteDecision(
        completion="x + 1",
        route="local",
        reasons=(Reason.CONFIDENT,),
        policy="synconf",
        confidence=0.97,
        threshold=0.6,
        syntax=None,
        local_model="qwen2.5-coder:3b",
        remote_model=None,
    )


# The thread's CPU time, not wall time: other processes on a shared machine then show
# less (their cache pollution still does).
clock = time.thread_time_ns


def evict(junk: bytearray) -> None:
    """Touch every cache line of `junk` (larger than the CPU's caches): the next round
    starts cold, as a server's does after 50 ms of waiting for its backend."""
    junk[::64] = bytes(len(junk) // 64)


async def run(rounds: int, cold: bool = False) -> None:
    tmp = tempfile.mkdtemp()
    loaded = config.load(Path(tmp) / "none.toml", environ={})
    server = lsp.create_server(loaded, ledger_path=Path(tmp) / "ledger.jsonl")
    protocol = server.protocol
    assert isinstance(protocol, transport.TransportProtocol)
    capture = Capture()
    protocol.set_writer(transport.HoldingWriter(capture))
    done = Completed("c1", decision(), " x + 1", (1, 11), (1, 11), "")

    async def complete(*_: Any, **__: Any) -> Completed:
        return done

    server.session.complete = complete  # type: ignore[method-assign]

    async def call(msg: dict[str, Any]) -> None:
        capture.waiter = asyncio.get_running_loop().create_future()
        protocol.receive(frames.Body(frame(msg), len(frame(msg))))
        await capture.waiter

    init = {"processId": None, "rootUri": None, "capabilities": CAPABILITIES}
    await call({"jsonrpc": "2.0", "id": -1, "method": "initialize", "params": init})
    protocol.receive(frames.Body(frame(DID_OPEN), len(frame(DID_OPEN))))
    change_body = frame(DID_CHANGE)
    inline: list[float] = []
    change: list[float] = []
    loop = asyncio.get_running_loop()
    junk = bytearray(64 << 20) if cold else None
    for i in range(rounds):
        if junk is not None:
            evict(junk)
        INLINE["id"] = i
        inline_body = frame(INLINE)
        capture.chunks.clear()
        t0 = clock()
        protocol.receive(frames.Body(change_body, len(change_body)))
        await asyncio.sleep(0)  # its handler runs
        change.append((clock() - t0) / 1000)
        capture.waiter = loop.create_future()
        if junk is not None:
            evict(junk)
        t1 = clock()
        protocol.receive(frames.Body(inline_body, len(inline_body)))
        await capture.waiter
        inline.append((clock() - t1) / 1000)
    out = b"".join(capture.chunks)
    assert b'"synconfroute/route"' in out and b'"insertText"' in out, out[:300]
    print(f"in process, {'cold' if cold else 'warm'}, {rounds} rounds (CPU µs)")
    for name, xs in (("didChange", change), ("inlineCompletion + route", inline)):
        xs.sort()
        print(f"  {name:28} p50 {statistics.median(xs):7.1f}   p10 {xs[len(xs) // 10]:7.1f}")
    print("  the response bytes: " + out.decode()[-200:].replace("\r\n", " "))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3000)
    ap.add_argument("--cold", action="store_true", help="start each round with cold caches")
    args = ap.parse_args()
    asyncio.run(run(args.rounds, args.cold))
    return 0


if __name__ == "__main__":
    sys.exit(main())
