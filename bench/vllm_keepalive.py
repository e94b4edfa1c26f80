"""Single-line escalations against a real vLLM: TCP connections opened and remote latency,
with the line stop (the server ends the line, the connection is kept) against the old
hang-up after the first line, and against the line stop without keep-alive.

Arms (each a fresh OpenAIBackend; the request is what the pipeline sends for a
single-line escalation: `single_line=True`, no other stop strings, max_tokens 64):
- `hang-up` (before): no line stop; the client closes the stream after the first line,
  which aborts the request on the server and the connection with it;
- `keep-alive` (after): `stop: ["\\n"]` + `min_tokens: 1`; the stream ends cleanly and
  the next request reuses the connection;
- `no-keep-alive`: the same request over a client that keeps no idle connection, so
  every request pays a new connection (what each escalation paid before, minus the
  abort): the cost of the connection alone.

Connections are counted from the server's access log (one client port per connection;
each arm connects from its own loopback address), aborted requests from its request log.
The arms take turns request by request (A B C, then C B A), so drift on a loaded machine
hits all alike. Loopback has no TLS: on a real cluster a
new connection costs a TLS handshake (one or two round trips) more than here.

    .venv/bin/python -m bench.vllm_keepalive --n 100
    SYNCONFROUTE_TEST_VLLM=port:log .venv/bin/python -m bench.vllm_keepalive
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from synconfroute.clients.openai import LINE_STOP, OpenAIBackend
from synconfroute.clients.types import CompletionRequest
from tests.vllm_server import VllmServer, attached

KEY_ENV = "SYNCONFROUTE_BENCH_VLLM_KEY"
# Lines that end within a few tokens: a request that runs for seconds would leave the
# other arms' connections idle past vLLM's keep-alive timeout (5 s,
# VLLM_HTTP_TIMEOUT_KEEP_ALIVE), which closes them whatever the client does.
PROMPTS = (
    "def add(a, b):\n    return",
    "def square(x):\n    return x *",
    "def is_even(n):\n    return n %",
    "class Point:\n    def __init__(self, x, y):\n        self.x =",
    'print("Hello,',
    "if __name__ ==",
    "for i in range(",
)


class HangUp(OpenAIBackend):
    """The request as sent before: no line stop; `complete` hangs up after the line."""

    def payload(self, request: CompletionRequest) -> dict[str, Any]:
        body = super().payload(request)
        body["stop"] = [s for s in body["stop"] if s != LINE_STOP]
        body.pop("min_tokens", None)
        return body


ARMS = ("hang-up", "keep-alive", "no-keep-alive")


def client_address(arm: str) -> str:
    """Each arm connects from its own loopback address, so the server's access log
    tells the arms' connections apart while their requests interleave."""
    return f"127.0.0.{ARMS.index(arm) + 2}"


def make(arm: str, server: VllmServer) -> OpenAIBackend:
    keep = 0 if arm == "no-keep-alive" else 20
    transport = httpx.AsyncHTTPTransport(
        local_address=client_address(arm),
        limits=httpx.Limits(max_keepalive_connections=keep),
    )
    kind = HangUp if arm == "hang-up" else OpenAIBackend
    return kind(
        server.base_url, server.model, api_key_env=KEY_ENV, timeout=60.0, transport=transport
    )


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


async def run(server: VllmServer, n: int) -> dict[str, Any]:
    os.environ[KEY_ENV] = server.api_key
    backends = {arm: make(arm, server) for arm in ARMS}
    latency: dict[str, list[float]] = {arm: [] for arm in ARMS}
    try:
        # Warm every prompt once (vLLM's prefix cache would favour the first arm).
        for p in PROMPTS:
            await backends["keep-alive"].complete(
                CompletionRequest(prefix=p, max_tokens=64, single_line=True)
            )
        offset = server.log_offset()
        aborted0 = server.aborted_since(offset)
        aborted: dict[str, int] = {}
        for i in range(n):
            prefix = PROMPTS[i % len(PROMPTS)]
            req = CompletionRequest(prefix=prefix, max_tokens=64, single_line=True)
            order = ARMS if i % 2 == 0 else tuple(reversed(ARMS))
            for arm in order:
                t0 = time.perf_counter()
                await backends[arm].complete(req)
                latency[arm].append((time.perf_counter() - t0) * 1000)
        await asyncio.sleep(2.0)  # the logs are written as requests end
        total_aborted = server.aborted_since(offset) - aborted0
        # Only the hang-up arm closes streams early: every abort is its own.
        aborted = {arm: (total_aborted if arm == "hang-up" else 0) for arm in ARMS}
        logged = server.access_since(offset)
    finally:
        for b in backends.values():
            await b.aclose()
    return {
        arm: {
            "requests": sum(
                1 for a in logged if a.client == client_address(arm) and a.path == "/v1/completions"
            ),
            "connections": server.connections_since(offset, client=client_address(arm)),
            "aborted": aborted[arm],
            "p50_ms": round(pct(latency[arm], 50), 1),
            "p90_ms": round(pct(latency[arm], 90), 1),
        }
        for arm in ARMS
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100, help="single-line escalations per arm")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    server = attached()
    started = server is None
    if server is None:
        log = Path(tempfile.mkdtemp(prefix="bench-vllm-")) / "server.log"
        server = VllmServer(log_path=log).start()
        print(f"vLLM started in {server.start_s:.1f}s", file=sys.stderr)
    try:
        result = asyncio.run(run(server, args.n))
    finally:
        if started:
            server.stop()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.n} single-line escalations per arm, real vLLM on 127.0.0.1 (no TLS)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'arm':<15}{'requests':>9}{'connections':>13}{'aborted':>9}{'p50 ms':>9}{'p90 ms':>9}")
    for arm, r in result.items():
        print(
            f"{arm:<15}{r['requests']:>9}{r['connections']:>13}{r['aborted']:>9}"
            f"{r['p50_ms']:>9}{r['p90_ms']:>9}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
