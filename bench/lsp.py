"""LSP overhead and memory: round trip through `synconfroute serve` vs the backend alone.

    .venv/bin/python -m bench.lsp [--latency-ms 50] [--rounds 40] [--docs 100]

1. Latency: a fake Ollama answers every generation after a fixed delay. We time
   (a) OllamaBackend.complete() called directly and (b) a textDocument/inlineCompletion
   round trip through the server (stdio, debounce 0, cache off by distinct prefixes),
   interleaved in one run, and print p50/p90 and the ratio of medians (goal < 1.05 at
   50 ms).
2. Memory: the server's resident set size (from /proc) before and after opening
   `--docs` documents of 2,000 lines each, and after one completion in each.
3. The same latency with a plain JSON-RPC client (no pygls on the client side).
4. With --embedded: the server on the embedded default after one completion, its RSS
   and its llama.cpp worker's (the model lives in the worker, not in the server).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from lsprotocol import types as t

from bench._rounds import plain_rounds
from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.types import CompletionRequest
from tests.fakes import FakeOllama, TokenScript
from tests.lsp_harness import (
    capabilities,
    inline_request,
    open_doc,
    start,
    stop,
    write_config,
)

ROOT = Path(__file__).resolve().parent.parent


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def server_pid(client: object) -> int:
    proc = getattr(client, "_server", None)
    pid = getattr(proc, "pid", None)
    if pid is None:
        raise RuntimeError("cannot find the server process id")
    return int(pid)


def big_file(i: int, lines: int) -> str:
    body = [
        f"def func_{i}_{n}(x: int) -> int:\n    return x * {n} + {i}\n" for n in range(lines // 2)
    ]
    return "".join(body)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--embedded", action="store_true", help="also measure the embedded default")
    args = ap.parse_args()

    script = TokenScript.of(" x", " +", " 1", logprob=-0.01, first_delay=args.latency_ms / 1000)
    with FakeOllama(default=script) as fake, tempfile.TemporaryDirectory() as tmp:
        cfg = write_config(Path(tmp), local_url=fake.url)
        client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
        # As the VS Code extension does: take the route notification sent after each
        # response (unhandled, pygls' client logs a warning for each one).
        client.feature("synconfroute/route")(lambda params: None)
        backend = OllamaBackend(fake.url, "qwen2.5-coder:3b")
        try:
            direct: list[float] = []
            via_lsp: list[float] = []
            for i in range(args.rounds + 3):
                text = f"def f{i}(x):\n    return \n"
                uri = f"file:///bench/lat{i}.py"
                open_doc(client, uri, text)
                t0 = time.perf_counter()
                await backend.complete(CompletionRequest(prefix=text[:25], suffix="\n"))
                d = time.perf_counter() - t0
                t0 = time.perf_counter()
                await client.text_document_inline_completion_async(
                    inline_request(uri, t.Position(1, 11))
                )
                lsp = time.perf_counter() - t0
                if i >= 3:  # warm-up: connection set-up, first /api/show
                    direct.append(d * 1000)
                    via_lsp.append(lsp * 1000)
            md, ml = statistics.median(direct), statistics.median(via_lsp)
            print(
                f"latency, fake backend at {args.latency_ms:.0f} ms, "
                f"{args.rounds} rounds interleaved"
            )
            print(f"  backend direct   p50 {md:7.2f} ms  p90 {pct(direct, 0.9):7.2f} ms")
            print(f"  through the LSP  p50 {ml:7.2f} ms  p90 {pct(via_lsp, 0.9):7.2f} ms")
            print(f"  ratio of medians {ml / md:.3f}  (goal < 1.05)")

            pid = server_pid(client)
            before = rss_mb(pid)
            t0 = time.perf_counter()
            for i in range(args.docs):
                open_doc(client, f"file:///bench/big{i}.py", big_file(i, args.lines))
            await client.text_document_hover_async(  # a round trip: all opens are processed
                t.HoverParams(t.TextDocumentIdentifier("file:///bench/big0.py"), t.Position(0, 0))
            )
            opened = rss_mb(pid)
            open_s = time.perf_counter() - t0
            print(f"memory, {args.docs} documents x {args.lines} lines (server RSS)")
            print(
                f"  before {before:7.1f} MB   after opening {opened:7.1f} MB "
                f"(+{(opened - before) / args.docs:.2f} MB per document; opened in {open_s:.1f} s)"
            )
        finally:
            await backend.aclose()
            await stop(client)
    await raw_client_latency(args)
    if args.embedded:
        await embedded_memory()


async def raw_client_latency(args: argparse.Namespace) -> None:
    """The same round trip with a plain JSON-RPC client (bench/fault_suite.py's): what
    the server adds, without pygls' client handling each message on the other side (it
    costs about 1 ms for the route notification that follows every response)."""
    from bench.fault_suite import LspServer

    script = TokenScript.of(" x", " +", " 1", logprob=-0.01, first_delay=args.latency_ms / 1000)
    with FakeOllama(default=script) as fake, tempfile.TemporaryDirectory() as tmp:
        cfg = write_config(Path(tmp), local_url=fake.url)
        server = LspServer(cfg, Path(tmp), "no-key-in-this-bench", ROOT)
        await server.start()
        backend = OllamaBackend(fake.url, "qwen2.5-coder:3b")
        try:
            direct, via_lsp = await plain_rounds(server, backend, args.rounds)
        finally:
            await backend.aclose()
            await server.stop()
    md, ml = statistics.median(direct), statistics.median(via_lsp)
    print(f"latency, plain JSON-RPC client, {args.rounds} rounds interleaved")
    print(f"  backend direct   p50 {md:7.2f} ms  p90 {pct(direct, 0.9):7.2f} ms")
    print(f"  through the LSP  p50 {ml:7.2f} ms  p90 {pct(via_lsp, 0.9):7.2f} ms")
    print(f"  ratio of medians {ml / md:.3f}  (goal < 1.05)")


async def embedded_memory() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = write_config(Path(tmp), local_backend="embedded")
        client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
        try:
            uri = "file:///bench/add.py"
            open_doc(client, uri, "def add(a, b):\n    return\n")
            await client.text_document_inline_completion_async(
                inline_request(uri, t.Position(1, 10))
            )
            status = await client.workspace_execute_command_async(
                t.ExecuteCommandParams("synconfroute.status", [])
            )
            worker = status["local_worker"] or {}
            print("memory, embedded default after one completion")
            print(
                f"  server RSS {rss_mb(status['pid']):7.1f} MB   "
                f"llama.cpp worker RSS {worker.get('rss_mb') or 0:7.1f} MB"
            )
        finally:
            await stop(client)


if __name__ == "__main__":
    asyncio.run(main())
