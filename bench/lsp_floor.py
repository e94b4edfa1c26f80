"""The floor under bench.lsp's figure: what any language server in Python adds when it
stands between the editor and the model, measured beside `synconfroute serve`.

    .venv/bin/python -m bench.lsp_floor [--latency-ms 50] [--rounds 60] [--file PATH]

The floor is a second stdio JSON-RPC server with no routing at all: it reads frames in
its event loop (as our transport does), keeps the open documents' text, and answers
inlineCompletion with one `OllamaBackend.complete` of the text around the cursor, then
writes the response. What it adds is the price of one more process on the path (two
more wake-ups: the request reaching it, the model's answer reaching it) and of JSON-RPC
in Python; what `synconfroute serve` adds past it is our own work. Both are driven by
bench.lsp's plain client in one run, rounds interleaved with the backend called
directly, and each is reported as bench.lsp counts it (through the server minus the
backend alone, difference of the medians). Figures only: it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


# -- the floor server ---------------------------------------------------------------------


async def _floor_serve(url: str) -> None:
    from synconfroute.clients.ollama import OllamaBackend
    from synconfroute.clients.types import CompletionRequest

    loop = asyncio.get_running_loop()
    backend = OllamaBackend(url, "qwen2.5-coder:3b")
    docs: dict[str, str] = {}
    buf = bytearray()
    done = asyncio.Event()
    tasks: set[asyncio.Task[None]] = set()

    def send(msg: dict[str, Any]) -> None:
        body = json.dumps(msg).encode()
        os.write(1, b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def complete(rid: Any, params: dict[str, Any]) -> None:
        text = docs.get(params["textDocument"]["uri"], "")
        line, char = params["position"]["line"], params["position"]["character"]
        lines = text.split("\n")
        offset = sum(len(x) + 1 for x in lines[:line]) + char
        got = await backend.complete(CompletionRequest(prefix=text[:offset], suffix=text[offset:]))
        send({"jsonrpc": "2.0", "id": rid, "result": {"items": [{"insertText": got.text}]}})

    def handle(msg: dict[str, Any]) -> None:
        method, rid = msg.get("method"), msg.get("id")
        if method == "textDocument/didOpen":
            doc = msg["params"]["textDocument"]
            docs[doc["uri"]] = doc["text"]
        elif method == "textDocument/inlineCompletion":
            task = loop.create_task(complete(rid, msg["params"]))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        elif method == "exit":
            done.set()
        elif rid is not None and method is not None:
            result = {"capabilities": {"textDocumentSync": 1}} if method == "initialize" else None
            send({"jsonrpc": "2.0", "id": rid, "result": result})

    def readable() -> None:
        data = os.read(0, 1 << 16)
        if not data:
            done.set()
            return
        buf.extend(data)
        while (head := buf.find(b"\r\n\r\n")) >= 0:
            length = int(bytes(buf[:head]).split(b":")[1])
            if len(buf) < head + 4 + length:
                break
            body = bytes(buf[head + 4 : head + 4 + length])
            del buf[: head + 4 + length]
            handle(json.loads(body))

    os.set_blocking(0, False)
    loop.add_reader(0, readable)
    await done.wait()
    await backend.aclose()


# -- the client side ----------------------------------------------------------------------


async def _measure(
    fake_url: str, tmp: Path, rounds: int, floor: bool, source: str | None
) -> tuple[list[float], ...]:
    """(backend direct, through the server) per round, ms, rounds interleaved."""
    from bench import fault_suite
    from bench._rounds import plain_rounds
    from synconfroute.clients.ollama import OllamaBackend
    from tests.lsp_harness import write_config

    cfg = write_config(tmp, local_url=fake_url)
    server = fault_suite.LspServer(cfg, tmp, "no-key-in-this-bench", ROOT)
    spawn = asyncio.create_subprocess_exec

    async def floor_server(*argv: Any, **kw: Any) -> Any:
        return await spawn(argv[0], "-m", "bench.lsp_floor", "--serve", fake_url, **kw)

    if floor:
        fault_suite.asyncio.create_subprocess_exec = floor_server  # type: ignore[attr-defined]
    try:
        await server.start()
    finally:
        fault_suite.asyncio.create_subprocess_exec = spawn  # type: ignore[attr-defined]
    backend = OllamaBackend(fake_url, "qwen2.5-coder:3b")
    try:
        return await plain_rounds(server, backend, rounds, source)
    finally:
        await backend.aclose()
        await server.stop()


async def run(args: argparse.Namespace) -> None:
    from tests.fakes import FakeOllama, TokenScript

    script = TokenScript.of(" x", " +", " 1", logprob=-0.01, first_delay=args.latency_ms / 1000)
    source = args.file.read_text(encoding="utf-8") if args.file else None
    added: dict[str, list[float]] = {"floor": [], "serve": []}
    with FakeOllama(default=script) as fake:
        for rep in range(args.repeats):
            for name in ("floor", "serve"):
                with tempfile.TemporaryDirectory() as tmp:
                    direct, via = await _measure(
                        fake.url, Path(tmp), args.rounds, name == "floor", source
                    )
                md, mv = statistics.median(direct), statistics.median(via)
                added[name].append(mv - md)
                print(
                    f"  run {rep + 1} {name:5}  backend direct p50 {md:6.2f} ms  "
                    f"through the server p50 {mv:6.2f} ms  added {mv - md:+.2f} ms",
                    flush=True,
                )
    floor, serve = statistics.median(added["floor"]), statistics.median(added["serve"])
    doc = f"{args.file} ({source.count(chr(10)) + 1} lines)" if source else "a two-line function"
    print(
        f"added time at a {args.latency_ms:.0f} ms backend, median of {args.repeats} runs "
        f"of {args.rounds} rounds (plain JSON-RPC client), in {doc}"
    )
    print(f"  floor (a Python stdio proxy, no routing)  {floor:+.2f} ms")
    print(f"  synconfroute serve                        {serve:+.2f} ms")
    print(f"  synconfroute's own work past the floor    {serve - floor:+.2f} ms")


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        asyncio.run(_floor_serve(sys.argv[2]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each, alternating")
    ap.add_argument(
        "--file",
        type=Path,
        help="a real source file: each round types a line into its middle (default: a"
        " two-line function)",
    )
    asyncio.run(run(ap.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
