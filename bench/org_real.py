"""A small organisation for real: several developers' servers on one real vLLM.

Starts the real vLLM (tests/vllm_server.py) and N `synconfroute serve` processes, one per
simulated developer, each with the embedded SmolLM2 tier and vLLM as its remote. Each
developer opens a real file (click's modules, from $SYNCONFROUTE_DATA/repos) and, at
Poisson times, clears a random line and asks for an inline completion at its start, as a
developer who pauses at a line start would. Prints time to an answer p50/p95, the share
answered within the deadline, the share escalated (from the `synconfroute/route`
notifications) and what the simulator needs to predict the same run
(`studies.org_load --developers N --replicas 1 ...`, printed at the end).

    .venv/bin/python -m bench.org_real [--developers 3] [--seconds 120] [--rate 6]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import random
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as t

ROOT = Path(__file__).resolve().parent.parent


def click_files() -> list[tuple[str, str]]:
    data = Path(os.environ.get("SYNCONFROUTE_DATA") or ROOT.parent / "shared" / "data")
    out = []
    with tarfile.open(data / "repos" / "click-src.tar.gz") as tar:
        for m in tar.getmembers():
            if m.isfile() and m.name.endswith(".py"):
                f = tar.extractfile(m)
                assert f is not None
                text = io.TextIOWrapper(f, encoding="utf-8").read()
                if text.count("\n") > 100:
                    out.append((Path(m.name).name, text))
    return out


async def developer(
    n: int,
    folder: Path,
    vllm: Any,
    files: list[tuple[str, str]],
    a: argparse.Namespace,
    stats: dict[str, list[Any]],
) -> None:
    from tests.lsp_harness import capabilities, inline_request, open_doc, start, stop

    key_env = "SYNCONFROUTE_BENCH_VLLM_KEY"
    cfg = folder / f"dev{n}.toml"
    cfg.write_text(
        "\n".join(
            [
                "[local]",
                'backend = "embedded"',
                "[remote]",
                f'url = "{vllm.base_url}"',
                f'model = "{vllm.model}"',
                f'api_key_env = "{key_env}"',
                "[completion]",
                f"deadline_ms = {a.deadline_ms}",
                "[editor]",
                "debounce_ms = 0",
                "adaptive_debounce = false",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    client, _ = await start(
        cfg,
        capabilities("visual_studio_code", inline=True),
        env={key_env: vllm.api_key},
        root=folder,
    )
    routes: dict[str, Any] = {}

    @client.feature("synconfroute/route")
    def on_route(params: Any) -> None:
        routes["last"] = params

    rng = random.Random(n)
    name, text = files[n % len(files)]
    uri = (folder / f"dev{n}_{name}").as_uri()
    lines = text.split("\n")
    open_doc(client, uri, text)
    version = 1
    try:
        await asyncio.sleep(a.warmup)  # the model loads; prefill on open
        end = time.monotonic() + a.seconds
        while time.monotonic() < end:
            await asyncio.sleep(rng.expovariate(a.rate / 60))
            i = rng.randrange(10, len(lines) - 1)
            if not lines[i].strip():
                continue
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            masked = [*lines[:i], indent, *lines[i + 1 :]]
            version += 1
            client.text_document_did_change(
                t.DidChangeTextDocumentParams(
                    text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
                    content_changes=[t.TextDocumentContentChangeWholeDocument("\n".join(masked))],
                )
            )
            routes.pop("last", None)
            t0 = time.perf_counter()
            await client.text_document_inline_completion_async(
                inline_request(uri, t.Position(line=i, character=len(indent)), invoked=False)
            )
            took = time.perf_counter() - t0
            r = routes.get("last")
            reasons = [str(x) for x in (getattr(r, "reasons", None) or [])] if r else []
            stats["ms"].append(1000 * took)
            stats["escalated"].append(any(x.startswith("remote-") for x in reasons))
            stats["route"].append(getattr(r, "route", "?") if r else "?")
    finally:
        await stop(client)


async def run(a: argparse.Namespace) -> int:
    from tests.vllm_server import VllmServer, missing

    why = missing()
    if why:
        print(f"org_real: {why}", file=sys.stderr)
        return 2
    files = click_files()
    stats: dict[str, list[Any]] = {"ms": [], "escalated": [], "route": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        server = VllmServer(log_path=folder / "vllm.log", policy="fcfs", max_num_seqs=4)
        with server:
            print(f"vLLM up in {server.start_s:.1f} s", flush=True)
            await asyncio.gather(
                *(developer(n, folder, server, files, a, stats) for n in range(a.developers))
            )
    ms = sorted(stats["ms"])
    if not ms:
        print("no completion was asked")
        return 1
    n = len(ms)
    in_time = sum(1 for x in ms if x <= a.deadline_ms) / n
    esc = sum(stats["escalated"]) / n
    p = lambda q: ms[max(0, -(-q * n // 100) - 1)]  # noqa: E731 - nearest rank
    print(
        f"{a.developers} developers, {n} completions: answer p50 {p(50):.0f} ms, p95 "
        f"{p(95):.0f} ms; within the {a.deadline_ms:.0f} ms deadline {100 * in_time:.1f}%; "
        f"escalated {100 * esc:.1f}%; routes "
        + ", ".join(f"{r} {stats['route'].count(r)}" for r in sorted(set(stats["route"])))
    )
    local = [x for x, e in zip(stats["ms"], stats["escalated"], strict=True) if not e]
    if local:
        print(f"kept-local answers: p50 {statistics.median(local):.0f} ms (the local tier alone)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--developers", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--rate", type=float, default=6.0, help="requests a developer-minute")
    ap.add_argument("--deadline-ms", type=float, default=4000.0)
    ap.add_argument("--warmup", type=float, default=10.0)
    a = ap.parse_args(argv)
    return asyncio.run(run(a))


if __name__ == "__main__":
    sys.exit(main())
