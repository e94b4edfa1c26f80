"""The egress gate's cost per remote request: with and without it, side by side.

Each remote request goes through the real OpenAI-compatible client to a fake vLLM on
127.0.0.1 (tests.fakes). "with": the request carries its prompt plan (the window and
context files resolved to real paths, built as the pipeline builds it) and the client runs
the egress gate (privacy settings of the moment, .gitignore, workspace folders) before
sending; "without": no plan is built and no gate is installed. The two alternate, request
by request, so the machine's load hits both alike. Also printed: the plan plus gate alone.

    python -m bench.egress [--requests 300] [--context-files 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import attrs

from synconfroute.clients.openai import OpenAIBackend
from synconfroute.clients.types import CompletionRequest
from synconfroute.server.settings.config import PrivacySettings, Settings
from synconfroute.server.workspace import egress
from tests import privacy_workspace as pw
from tests.fakes import FakeOpenAI, TokenScript


def p50(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


async def run(requests: int, n_context: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI() as fake:
        fake.script(TokenScript.of(" value", " + 1", logprob=-0.01), always=True)
        ws = pw.build(Path(tmp) / "base")
        files = [ws / "lib" / f"mod{i}.py" for i in range(n_context)]
        for f in files:
            f.write_text(pw.body(f.stem, "x"), encoding="utf-8")
        settings = Settings(privacy=PrivacySettings(never_send=list(pw.NEVER_SEND)))
        gated = OpenAIBackend([fake.base_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None)
        gate = egress.EgressGate(lambda: settings)
        gated.set_egress(gate)
        bare = OpenAIBackend([fake.base_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None)
        base = CompletionRequest(
            prefix=pw.APP.rsplit("return ", 1)[0] + "return ",
            suffix="\n",
            path=str(ws / "app.py"),
            context_files=tuple((f.name, pw.body(f.stem, "x")) for f in files),
            max_tokens=8,
        )
        roots = [str(ws)]
        context = [(str(f), 100) for f in files]

        def planned() -> CompletionRequest:
            plan = egress.make_plan(
                "remote", str(ws / "app.py"), roots, window_chars=300, context=context
            )
            return attrs.evolve(base, plan=plan)

        with_s: list[float] = []
        without_s: list[float] = []
        alone_s: list[float] = []
        for i in range(requests + 20):
            order = (True, False) if i % 2 else (False, True)
            for use_gate in order:
                t0 = time.perf_counter()
                if use_gate:
                    await gated.complete(planned())
                else:
                    await bare.complete(base)
                dt = time.perf_counter() - t0
                if i >= 20:  # warm-up: connections, caches
                    (with_s if use_gate else without_s).append(dt)
            t0 = time.perf_counter()
            gate(b"{}", planned().plan)
            if i >= 20:
                alone_s.append(time.perf_counter() - t0)
        await gated.aclose()
        await bare.aclose()
    load = os.getloadavg()[0]
    print(f"egress gate, {requests} remote requests each, {n_context} context files + window")
    print(f"  p50 per remote request without the gate: {p50(without_s):.3f} ms")
    print(f"  p50 per remote request with the gate:    {p50(with_s):.3f} ms")
    print(f"  difference of p50s: {p50(with_s) - p50(without_s):+.3f} ms")
    print(f"  plan + gate alone, p50: {p50(alone_s) * 1000:.1f} us")
    print(f"  machine load (1 min): {load:.2f} on {os.cpu_count()} cores (shared: noisy)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--context-files", type=int, default=8)
    args = parser.parse_args(argv)
    asyncio.run(run(args.requests, args.context_files))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
