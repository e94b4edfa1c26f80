"""Where the server's added time per completion goes: bench.lsp's plain JSON-RPC round
trip, with the real server over stdio timed stage by stage.

    .venv/bin/python -m bench.lsp_stages [--latency-ms 50] [--rounds 100] [--file PATH] [--gap-ms 0]

The server runs as `python -m bench.lsp_stages --serve ...`: `synconfroute serve` with
timing wrappers put around a few functions first (nothing in the server changes; each
wrapper costs a few µs). Every stamp is `time.perf_counter_ns()`, one monotonic clock
for both processes on Linux, so the client's stamps and the server's can be subtracted.
It prints, per inlineCompletion, the p50 and p90 in µs of each stage (`STAGES`: from the
client's write through the server's read, parsing, dispatch, the session's steps, the
backend and the response, to the client's parse; then the route notification, sent
after the response), and the added
time the way bench.lsp counts it: the round trip minus the backend called directly from
the client (an httpx call in the client's process), with its spread over the rounds;
and the round trip minus the server's own backend span, which leaves the client's
direct call (and its noise) out.

With SYNCONFROUTE_STAGES_PROFILE=PATH the server also writes a cProfile of its CPU time
(not wall time) there, for `python -m pstats PATH`. A figures-only script: it asserts
nothing, and the figures are this machine's (quote them with the machine's load).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STAGES_ENV = "SYNCONFROUTE_STAGES_FILE"
PROFILE_ENV = "SYNCONFROUTE_STAGES_PROFILE"  # a path: the server's CPU profile (cProfile)
now = time.perf_counter_ns


# -- the server side: timing wrappers, then `synconfroute serve` --------------------------


def _serve_instrumented(argv: list[str]) -> int:
    from synconfroute.clients.ollama import OllamaBackend
    from synconfroute.server.commands import cli
    from synconfroute.server.learning import decision_log
    from synconfroute.server.protocol import frames, lsp, serve, transport
    from synconfroute.server.routing import pipeline, sequence
    from synconfroute.server.session import context_builder
    from synconfroute.server.session.session import Session

    out = open(os.environ[STAGES_ENV], "a", encoding="utf-8")  # noqa: SIM115 (lives till exit)
    cur: dict[str, int] = {}  # one request in flight at a time (the client waits for each)

    def stamp(key: str) -> None:
        # The latest message's arrival: a didOpen comes before each request.
        if "handler" not in cur or key == "write":
            cur[key] = now()

    class _Os:  # the transport's os.read of stdin (in the loop, or a thread), stamped
        def __getattr__(self, name: str) -> Any:
            return getattr(os, name)

        @staticmethod
        def read(fd: int, n: int) -> bytes:
            data = os.read(fd, n)
            stamp("read")
            return data

    setattr(serve, "os", _Os())  # noqa: B010 (a module attribute, replaced)

    # The cyclic garbage collector's passes while a completion's handler runs (till its
    # response is written): each one is time the request waits.
    gc_started = [0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = now()
        else:  # in the handler, or once its response is written (counted with it)
            where = "gc" if "handler" in cur and "write" not in cur else "idle_gc"
            cur[f"{where}_n"] = cur.get(f"{where}_n", 0) + 1
            cur[f"{where}_ns"] = cur.get(f"{where}_ns", 0) + now() - gc_started[0]

    gc.callbacks.append(on_gc)

    def stamp_before(cls: Any, name: str, key: str) -> None:
        orig = getattr(cls, name)

        @functools.wraps(orig)
        def wrapper(*a: Any, **kw: Any) -> Any:
            stamp(key)
            return orig(*a, **kw)

        setattr(cls, name, wrapper)

    stamp_before(frames.FrameParser, "feed", "feed")
    stamp_before(transport.TransportProtocol, "handle_message", "handle")

    orig_inline = lsp.inline_completion

    # CPU time (not wall time) of the server's loop thread over the whole run.
    profile_to = os.environ.get(PROFILE_ENV)
    profiler = cProfile.Profile(time.process_time) if profile_to else None
    if profiler is not None:
        profiler.enable()

    async def inline_completion(ls: Any, params: Any) -> Any:
        cur["handler"] = now()
        result = await orig_inline(ls, params)
        cur["handler_end"] = now()
        return result

    lsp.inline_completion = inline_completion  # create_server reads the module global

    orig_complete = Session.complete

    async def complete(self: Any, *a: Any, **kw: Any) -> Any:
        result = await orig_complete(self, *a, **kw)
        cur["complete_end"] = now()
        return result

    setattr(Session, "complete", complete)  # noqa: B010

    orig_stream = OllamaBackend.stream

    async def stream(self: Any, request: Any) -> Any:
        cur["backend"] = now()
        inner = orig_stream(self, request)
        try:
            async for chunk in inner:
                cur.setdefault("first_chunk", now())
                cur["backend_end"] = now()
                yield chunk
        finally:
            await inner.aclose()  # as run_local closes the stream it was given

    setattr(OllamaBackend, "stream", stream)  # noqa: B010

    def stamp_after(cls: Any, name: str, key: str) -> None:
        orig = getattr(cls, name)
        if asyncio.iscoroutinefunction(orig):

            @functools.wraps(orig)
            async def awrapper(*a: Any, **kw: Any) -> Any:
                result = await orig(*a, **kw)
                cur[key] = now()
                return result

            setattr(cls, name, awrapper)
            return

        @functools.wraps(orig)
        def wrapper(*a: Any, **kw: Any) -> Any:
            result = orig(*a, **kw)
            cur[key] = now()
            return result

        setattr(cls, name, wrapper)

    # The request's task made (it runs on the event loop's next turn).
    stamp_after(transport.TransportProtocol, "_execute_handler", "task")
    stamp_after(context_builder.ContextBuilder, "build", "context")
    stamp_after(sequence, "plan", "planned")
    stamp_after(pipeline.Pipeline, "gate_step", "gated")
    stamp_after(decision_log.DecisionLog, "record", "recorded")
    # The response's bytes handed to stdout and flushed: the first write once the
    # handler has run (the route notification is written after it). (Before, the
    # stamps were on pygls' StdoutWriter.write, one layer further in: the server writes
    # to stdout without it now.)
    orig_write = transport.StdoutWriter.write

    def write(self: Any, data: bytes) -> None:
        first = "handler_end" in cur and "write" not in cur
        if first:
            cur["write"] = now()
        orig_write(self, data)
        if first:
            cur["written"] = now()

    setattr(transport.StdoutWriter, "write", write)  # noqa: B010

    orig_notify = lsp._notify_route

    def notify_route(*a: Any, **kw: Any) -> None:
        cur["notify"] = now()
        orig_notify(*a, **kw)
        cur["notify_end"] = now()

    lsp._notify_route = notify_route

    orig_result = transport.TransportProtocol._send_handler_result

    def send_handler_result(self: Any, future: Any, *, msg_id: Any) -> None:
        cur["callback"] = now()
        orig_result(self, future, msg_id=msg_id)  # the response, then the work after it
        if profiler is not None:
            profiler.dump_stats(str(profile_to))  # the server ends with os._exit: no atexit
            profiler.enable()  # dump_stats disabled it
        if "handler" in cur:  # an inlineCompletion: one line of stamps
            out.write(json.dumps(cur) + "\n")
            out.flush()
        cur.clear()

    setattr(transport.TransportProtocol, "_send_handler_result", send_handler_result)  # noqa: B010

    return cli.main(argv)


# -- the client side: bench.lsp's plain client -------------------------------------------


STAGES: list[tuple[str, str, str]] = [
    ("client write -> server reads", "sent", "read"),
    ("read -> frame parser (in the loop)", "read", "feed"),
    ("frame + json + structure", "feed", "handle"),
    ("dispatch -> handler", "handle", "handler"),
    ("  dispatch -> its task made", "handle", "task"),
    ("  task made -> handler (a loop turn)", "task", "handler"),
    ("session: window, context built", "handler", "context"),
    ("plan", "context", "planned"),
    ("planned -> backend stream starts", "planned", "backend"),
    ("backend: first chunk (the delay)", "backend", "first_chunk"),
    ("backend: first -> last chunk", "first_chunk", "backend_end"),
    # (the stream is closed after the response: `learning.later`)
    ("last chunk -> gated", "backend_end", "gated"),
    ("decide, record, ledger", "gated", "recorded"),
    ("recorded -> complete returns", "recorded", "complete_end"),
    ("result -> callback hop", "handler_end", "callback"),
    ("response unstructure + json.dumps", "callback", "write"),
    ("write + flush", "write", "written"),
    ("server write -> client parsed", "written", "parsed"),
    ("route notification, after the response", "notify", "notify_end"),
]


async def run(args: argparse.Namespace) -> None:
    from bench import fault_suite
    from bench._rounds import WARMUP, plain_round
    from synconfroute.clients.ollama import OllamaBackend
    from tests.fakes import FakeOllama, TokenScript
    from tests.lsp_harness import write_config

    source = args.file.read_text(encoding="utf-8") if args.file else None
    gap = args.gap_ms / 1000
    # (with a gap, an empty last token: the fake sleeps the gap and sends no text, then
    # its done line, one decode step after the last text, as a real Ollama does)
    texts = (" x", " +", " 1", "") if gap else (" x", " +", " 1")
    script = TokenScript.of(*texts, logprob=-0.01, first_delay=args.latency_ms / 1000, delay=gap)
    with FakeOllama(default=script) as fake, tempfile.TemporaryDirectory() as tmp:
        stages_file = Path(tmp) / "stages.jsonl"
        os.environ[STAGES_ENV] = str(stages_file)
        cfg = write_config(Path(tmp), local_url=fake.url)
        server = fault_suite.LspServer(cfg, Path(tmp), "no-key-in-this-bench", ROOT)
        # The same server process, started through this module's wrappers.
        spawn = asyncio.create_subprocess_exec

        async def instrumented(*argv: Any, **kw: Any) -> Any:
            argv = tuple(a if a != "synconfroute" else "bench.lsp_stages" for a in argv)
            return await spawn(*argv[:3], "--serve", *argv[3:], **kw)

        fault_suite.asyncio.create_subprocess_exec = instrumented  # type: ignore[attr-defined]
        try:
            await server.start()
        finally:
            fault_suite.asyncio.create_subprocess_exec = spawn  # type: ignore[attr-defined]
        parsed: dict[int, int] = {}
        dispatch = server._dispatch

        def stamped_dispatch(msg: dict[str, Any]) -> None:
            if "result" in msg and isinstance(msg.get("id"), int):
                parsed[msg["id"]] = now()
            dispatch(msg)

        server._dispatch = stamped_dispatch  # type: ignore[method-assign]
        backend = OllamaBackend(fake.url, "qwen2.5-coder:3b")
        rows: list[dict[str, int]] = []
        direct: list[float] = []
        via_lsp: list[float] = []
        try:
            for i in range(args.rounds + WARMUP):
                d, v, sent = await plain_round(server, backend, i, source)
                rid = server._ids  # the request's id
                if i >= WARMUP:
                    direct.append(d)
                    via_lsp.append(v)
                    rows.append({"sent": sent, "parsed": parsed.get(rid, 0), "rid": rid})
        finally:
            await backend.aclose()
            await server.stop()
        lines = stages_file.read_text(encoding="utf-8").splitlines()
    served = [json.loads(line) for line in lines][-len(rows) :]
    for row, stamps in zip(rows, served, strict=True):
        row.update(stamps)
    report(args, rows, direct, via_lsp)


def _p(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def _minus_backend(rows: list[dict[str, int]], a: str, b: str) -> list[float]:
    return [(r[b] - r[a] - (r["backend_end"] - r["backend"])) / 1000 for r in rows]


def report(
    args: argparse.Namespace, rows: list[dict[str, int]], direct: list[float], via: list[float]
) -> None:
    gap = f", tokens {args.gap_ms:g} ms apart" if args.gap_ms else ""
    backend = f"backend {args.latency_ms:.0f} ms{gap}"
    print(f"stages of one inlineCompletion, {len(rows)} rounds, {backend}")
    print(f"  {'stage':36} {'p50 µs':>9} {'p90 µs':>9}")

    def line(name: str, xs: list[float]) -> None:
        print(f"  {name:36} {_p(xs, 0.5):9.0f} {_p(xs, 0.9):9.0f}")

    for name, a, b in STAGES:
        line(name, [(r[b] - r[a]) / 1000 for r in rows if r.get(a) and r.get(b)])
    line("server: read -> written", [(r["written"] - r["read"]) / 1000 for r in rows])
    for where, what in (("gc", "in the handler"), ("idle_gc", "between requests")):
        passes = [r.get(f"{where}_n", 0) for r in rows]
        paused = [r.get(f"{where}_ns", 0) / 1000 for r in rows]
        print(
            f"  garbage collector passes {what}: {sum(passes) / len(rows):.2f} a request,"
            f" {sum(paused) / len(rows):.0f} µs a request on average"
            f" (p90 {_p(paused, 0.9):.0f} µs, max {max(paused):.0f} µs)"
        )
    line("client: sent -> parsed", [(r["parsed"] - r["sent"]) / 1000 for r in rows])
    # What the server adds, without the client's own call to the backend: its backend
    # span (first byte asked to last chunk) taken out of each round trip.
    print("the round trip minus the server's own backend span (first request byte to last chunk)")
    line("server: read -> response write", _minus_backend(rows, "read", "write"))
    line("client: sent -> response parsed", _minus_backend(rows, "sent", "parsed"))
    md, ml = statistics.median(direct), statistics.median(via)
    added = [v - d for v, d in zip(via, direct, strict=True)]
    print("as bench.lsp counts it (plain JSON-RPC client)")
    print(f"  backend direct   p50 {md:7.2f} ms   through the LSP p50 {ml:7.2f} ms")
    print(
        f"  added {ml - md:+.2f} ms (difference of the medians), ratio {ml / md:.3f}; "
        f"per round p10 {_p(added, 0.1):+.2f}, p50 {_p(added, 0.5):+.2f}, "
        f"p90 {_p(added, 0.9):+.2f} ms"
    )


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        return _serve_instrumented(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument(
        "--gap-ms",
        type=float,
        default=0.0,
        help="ms between the fake model's tokens and before its done line (a decode step; "
        "0: all at once after the latency)",
    )
    ap.add_argument("--file", type=Path, help="a real source file (bench.lsp_floor's --file)")
    asyncio.run(run(ap.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
