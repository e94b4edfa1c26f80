"""The protocol path of one inlineCompletion, in process and without the session: frame
body in, the real handler (the session's `complete` answers at once), the response
and the route notification out, bytes caught in memory.

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

    .venv/bin/python -m bench.protocol_path --count [--rounds 20] [--instructions]
        [--root CHECKOUT]

counts instead of timing, for comparing two checkouts on a shared machine: the real
server process (`synconfroute serve` over pipes, its session completing from memory
after 5 ms, stdout buffered as when an editor starts it) answers didOpen +
inlineCompletion rounds, and `sys.setprofile` in it counts the Python and C calls of
each request by stage (COUNT_STAGES; SYNCONFROUTE_COUNT_LIST=1 lists them). With
--instructions, valgrind's callgrind counts the server's CPU instructions per
inlineCompletion (runs of 5 and 5 + rounds requests, minus the same runs without the
requests; garbage collector off, hash seed 0: repeatable to ~0.5 %). --root runs
another checkout's server code under this script's stub session.

Counted (Dec 2026), s5base 831122b -> session 5's protocol work, Python + C calls per
inlineCompletion: frame + json + structure 29 + 39 -> 17 + 32, dispatch -> handler
32 + 27 -> 29 + 24, result -> response bytes 12 + 15 -> 9 + 15, write + flush 0 + 2 ->
0 + 2, after the flush 25 + 33 -> 11 + 17; instructions per inlineCompletion (stub
session, route notification included) 529,513 and 532,332 -> 478,557 and 475,406.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
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

ROOT = Path(__file__).resolve().parent.parent
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
    protocol.set_writer(capture)
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


# -- counted: the real server process, its session answering at once ---------------------

TRACE_ENV = "SYNCONFROUTE_PATH_TRACE"  # a file: the server's calls per request, by stage
STUB_WAIT_S = 0.005  # the stub session's wait, as for a backend (the loop idles meanwhile)
COUNT_WARMUP = 5
# (name, the event that ends the stage): what `_Tracer` cuts a request's calls by.
COUNT_STAGES = [
    ("frame + json + structure", "read -> TransportProtocol.handle_message"),
    ("dispatch -> handler", "-> the handler's first line"),
    ("result -> response bytes", "the handler's return -> the stdout write"),
    ("write + flush", "the stdout write -> its flush's return"),
    ("after the flush", "-> the next read (Later, collector, task end)"),
]


def _c_name(fn: Any) -> str:
    owner = getattr(fn, "__self__", None)
    where = getattr(fn, "__module__", None) or type(owner).__name__
    return f"{where}.{getattr(fn, '__name__', '?')}"


class _Tracer:
    """`sys.setprofile` in the server: the Python and C calls of each inlineCompletion,
    cut into COUNT_STAGES by the calls that mark them, one JSON line a request."""

    def __init__(self, out: Any, root: str) -> None:
        self.out, self.root = out, root
        self.events: list[tuple[int, str]] = []  # (stage, name)
        self.stage = 0
        self.handler_frame: Any = None
        self.inline = False

    def _flush(self) -> None:
        if self.inline:
            self.out.write(json.dumps(self.events) + "\n")
            self.out.flush()
        self.events, self.stage, self.handler_frame, self.inline = [], 0, None, False

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event == "c_call":
            name = _c_name(arg)
            if name == "posix.read":
                self._flush()
            elif self.handler_frame is not None:
                return  # the handler's own work (and the loop's idle turns meanwhile)
            elif self.stage == 2 and name in _WRITES and self.inline:
                self.stage = 3
            self.events.append((self.stage, "C " + name))
        elif event == "c_return":
            if self.stage == 3 and _c_name(arg) in _FLUSHES:
                self.stage = 4
        elif event == "call":
            code = frame.f_code
            name = code.co_filename.split("site-packages/")[-1].replace(self.root, "")
            name = f"{name}:{code.co_qualname}"
            if self.handler_frame is not None:
                if code.co_name == "inline_list" and "server/protocol/lsp" in name:
                    self.handler_frame = frame  # its return ends the handler's work
                return
            if self.stage == 0 and code.co_name == "handle_message" and "transport" in name:
                self.stage = 1
            elif code.co_name == "inline_completion" and "server/protocol/lsp" in name:
                self.inline, self.handler_frame = True, frame
                self.stage = max(self.stage, 1)
                return
            self.events.append((self.stage, name))
        elif (
            event == "return"
            and frame is self.handler_frame
            and frame.f_code.co_name == "inline_list"
        ):
            self.stage, self.handler_frame = 2, None


# The stdout writes, and what ends them (a buffered stdout writes when flushed).
_WRITES = {"FileIO.write", "BufferedWriter.write", "posix.write"}
_FLUSHES = {"FileIO.write", "BufferedWriter.flush", "posix.write"}


def _serve_stub(argv: list[str]) -> int:
    """`synconfroute serve` whose session completes from memory after STUB_WAIT_S: the
    protocol path and the route notification are all the server does for a request."""
    import gc
    import os

    from synconfroute.server.commands import cli
    from synconfroute.server.session.session import Session

    done = Completed("c1", decision(), " x + 1", (1, 11), (1, 11), "")

    async def complete(self: Any, *_: Any, **__: Any) -> Completed:
        await asyncio.sleep(STUB_WAIT_S)
        return done

    setattr(Session, "complete", complete)  # noqa: B010
    if os.environ.get("SYNCONFROUTE_GC_OFF"):
        gc.disable()
    trace_to = os.environ.get(TRACE_ENV)
    if trace_to:
        out = open(trace_to, "w", encoding="utf-8")  # noqa: SIM115 (lives till exit)
        tracer = _Tracer(out, os.environ["PYTHONPATH"].rstrip("/") + "/")
        opened = [0]
        orig_open = Session.open

        def open_(self: Any, *a: Any, **kw: Any) -> Any:
            opened[0] += 1
            if opened[0] == COUNT_WARMUP:
                sys.setprofile(tracer)
            return orig_open(self, *a, **kw)

        setattr(Session, "open", open_)  # noqa: B010
    return cli.main(argv)


async def _drive(argv: list[str], env: dict[str, str], rounds: int, inline: bool) -> None:
    """Start the stub server, open a document and (with `inline`) complete in it
    `rounds` times, one message at a time, then shut it down."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def send(msg: dict[str, Any]) -> None:
        body = json.dumps(msg).encode()
        stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def answer(rid: int) -> dict[str, Any]:
        while True:
            header = await stdout.readuntil(b"\r\n\r\n")
            length = int(header.split(b"Content-Length: ")[1].split(b"\r\n")[0])
            msg: dict[str, Any] = json.loads(await stdout.readexactly(length))
            if msg.get("id") == rid:
                return msg

    init = {"processId": None, "rootUri": None, "capabilities": CAPABILITIES}
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    await asyncio.wait_for(answer(0), 600)
    send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    for i in range(rounds + COUNT_WARMUP):
        uri = f"file:///bench/raw{i}.py"
        doc = {"uri": uri, "languageId": "python", "version": 1, "text": TEXT}
        send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": doc}})
        await asyncio.sleep(0.02)
        if inline:
            msg = dict(INLINE, id=i + 1)
            msg["params"] = {**INLINE["params"], "textDocument": {"uri": uri}}  # type: ignore[dict-item]
            send(msg)
            got = await asyncio.wait_for(answer(i + 1), 600)
            assert got.get("result", {}).get("items"), got
            await asyncio.sleep(0.02)
    send({"jsonrpc": "2.0", "id": -1, "method": "shutdown", "params": None})
    await asyncio.wait_for(answer(-1), 600)
    send({"jsonrpc": "2.0", "method": "exit", "params": None})
    await proc.wait()


def count(rounds: int, instructions: bool, root: Path) -> None:
    import os
    import re
    import shutil

    from tests.fakes import FakeOllama
    from tests.lsp_harness import write_config

    with FakeOllama() as fake, tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "SYNCONFROUTE_CONFIG": str(write_config(Path(tmp), local_url=fake.url)),
            "PYTHONPATH": str(root),
            "PYTHONHASHSEED": "0",
            "PYTHONUNBUFFERED": "",  # stdout buffered, as an editor starts the server
            "XDG_STATE_HOME": str(Path(tmp) / "state"),
            "XDG_CACHE_HOME": str(Path(tmp) / "cache"),
        }
        # This file, run by path: its server side with `root`'s server code.
        serve = [sys.executable, str(Path(__file__).resolve()), "--serve-stub", "serve"]
        serve += ["--ledger", str(Path(tmp) / "ledger.jsonl")]
        trace = Path(tmp) / "trace.jsonl"
        asyncio.run(_drive(serve, {**env, TRACE_ENV: str(trace)}, rounds, True))
        records = [json.loads(line) for line in trace.read_text().splitlines()][-rounds:]
        print(f"calls per inlineCompletion in the server ({len(records)} requests, stub session)")
        per: dict[int, Any] = {}
        for rec in records:
            for stage, name in rec:
                per.setdefault(stage, collections.Counter())[name] += 1
        n = len(records)
        for k, (name, span) in enumerate(COUNT_STAGES):
            calls = per.get(k, collections.Counter())
            py = sum(v for key, v in calls.items() if not key.startswith("C "))
            c = sum(calls.values()) - py
            print(f"  {name:28} {py / n:6.1f} Python {c / n:6.1f} C   ({span})")
        if os.environ.get("SYNCONFROUTE_COUNT_LIST"):
            for k, (name, _) in enumerate(COUNT_STAGES):
                print(f"-- {name}")
                for key, v in per.get(k, collections.Counter()).most_common():
                    print(f"   {v / n:5.1f} {key}")
        if not instructions:
            return
        if shutil.which("valgrind") is None:
            print("valgrind is not installed (Debian: apt-get install valgrind)")
            return
        vg = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
        genv = {**env, "SYNCONFROUTE_GC_OFF": "1"}

        def instr(n: int, inline: bool) -> int:
            log = Path(tmp) / "vg.log"
            argv = [*vg, f"--log-file={log}", *serve]
            asyncio.run(_drive(argv, genv, n, inline))
            found = re.search(r"Collected : (\d+)", log.read_text())
            if found is None:
                raise RuntimeError(f"no instruction count:\n{log.read_text()[-2000:]}")
            return int(found.group(1))

        lo, hi = 5, 5 + rounds
        full = instr(hi, True) - instr(lo, True)
        opens = instr(hi, False) - instr(lo, False)
        print("CPU instructions in the server (callgrind), garbage collector off, hash seed 0:")
        print(
            f"  per inlineCompletion {(full - opens) / rounds:,.0f}"
            f"  (a didOpen: {opens / rounds:,.0f})"
        )


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-stub":
        return _serve_stub(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3000)
    ap.add_argument("--cold", action="store_true", help="start each round with cold caches")
    ap.add_argument(
        "--count", action="store_true", help="count the calls of the real server, by stage"
    )
    ap.add_argument("--instructions", action="store_true", help="with --count: callgrind too")
    ap.add_argument(
        "--root", type=Path, default=ROOT, help="with --count: the checkout whose server runs"
    )
    args = ap.parse_args()
    if args.count:
        count(min(args.rounds, 200), args.instructions, args.root.resolve())
        return 0
    asyncio.run(run(args.rounds, args.cold))
    return 0


if __name__ == "__main__":
    sys.exit(main())
