"""Fault-injecting doubles of Ollama and vLLM, switchable between phases.

They are the ordinary fakes (real HTTP on 127.0.0.1, the real wire protocols)
with one knob, `fault`: what the next generation requests get. Only the
generation endpoints (`/api/generate`, `/v1/completions`) misbehave; the
metadata endpoints (`/api/show`, `/api/tags`, `/api/version`, `/v1/models`)
stay healthy, except in `down`, where the port itself is closed (connection
refused) until the fault changes. Every generation request is counted under the
current `phase` label, with whether its body carried a marker (so the fault
suite can tell which code left the machine).

Faults:
    ok            the scripted answer (confident or not, see `confident`)
    down          nothing listens on the port
    slow          `slow_s` of silence before the first byte, then a normal answer
    hung-headers  the request is read, nothing is ever answered
    hung-body     the 200 headers are sent, then nothing
    garbage       200 with the right content type and a body that is not the protocol
    cut           a few tokens, then the connection drops mid-line (no final chunk)
    401           401 Unauthorized
    429           429 Too Many Requests with `Retry-After: 30`
    runaway       ignores num_predict / max_tokens: streams tokens until the client leaves
    echo-auth     a proxy's 502 whose HTML body echoes the request's Authorization header

A weighted mix (`set_mix`) picks a fault per request (seeded), for the soak.
`down` cannot be per request; in a mix it is played as a connection dropped
before any answer.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any, Literal, get_args

from .http import REASONS, FakeHTTPServer, Request, Responder, TokenScript
from .ollama import FakeOllama, _now
from .openai import FakeOpenAI

Fault = Literal[
    "ok",
    "down",
    "slow",
    "hung-headers",
    "hung-body",
    "garbage",
    "cut",
    "401",
    "429",
    "runaway",
    "echo-auth",
]
FAULTS: tuple[Fault, ...] = get_args(Fault)

CONFIDENT = -0.05  # log-prob of every token of a confident answer
UNSURE = -3.0  # ... of an answer the router must escalate
RUNAWAY_TOKEN_S = 0.004  # pace of a server that never stops
HANG_S = 3600.0


async def _send_raw(resp: Responder, status: int, headers: Mapping[str, str], body: bytes) -> None:
    """One whole response with extra headers (Retry-After) and any body bytes."""
    head = f"HTTP/1.1 {status} {REASONS.get(status, 'Too Many Requests')}\r\n"
    for k, v in {
        "Content-Length": str(len(body)),
        "Connection": "close",
        **headers,
    }.items():
        head += f"{k}: {v}\r\n"
    # The Responder has no header parameter; write through its stream (same package).
    resp._w.write(head.encode() + b"\r\n" + body)
    await resp._drain()
    resp.completed = not resp.client_gone


async def _hang(resp: Responder) -> None:
    """Hold the connection open until the client gives up."""
    await resp.sleep(HANG_S)


class _Faults:
    """The fault knob and the per-phase counters, shared by both doubles."""

    def __init__(self, markers: tuple[str, ...]) -> None:
        self.phase = "start"
        self.fault: Fault = "ok"
        self.confident = True  # "ok" answers are confident (keep local) or not (escalate)
        self.alternate = False  # "ok": confident and unsure in turn
        self.slow_s = 0.5
        self.markers = markers
        # per phase: generation requests, and per marker the requests that carried it
        self.counts: Counter[str] = Counter()
        self.marked: Counter[tuple[str, str]] = Counter()
        self.faults_played: Counter[tuple[str, str]] = Counter()
        self._mix: list[tuple[Fault, float]] | None = None
        self._rng = random.Random(0)
        self._n = 0
        self._mu = threading.Lock()

    def set_mix(self, weights: Mapping[Fault, float], seed: int = 0) -> None:
        """Pick the fault of each request at random with these weights."""
        self._mix = [(f, w) for f, w in weights.items() if w > 0]
        self._rng = random.Random(seed)

    def clear_mix(self) -> None:
        self._mix = None

    def take(self, req: Request) -> tuple[Fault, bool]:
        """Count the request; the fault it gets and whether an `ok` answer is confident."""
        with self._mu:
            self._n += 1
            self.counts[self.phase] += 1
            body = req.body.decode("utf-8", "replace")
            for m in self.markers:
                if m in body:
                    self.marked[(self.phase, m)] += 1
            fault = self.fault
            if self._mix is not None:
                faults, weights = zip(*self._mix, strict=True)
                fault = self._rng.choices(faults, weights)[0]
            confident = self.confident if not self.alternate else self._n % 2 == 0
            self.faults_played[(self.phase, fault)] += 1
            return fault, confident

    def requests(self, phase: str) -> int:
        with self._mu:
            return self.counts[phase]

    def carried(self, phase: str, marker: str) -> int:
        with self._mu:
            return self.marked[(phase, marker)]


def _listen(fake: FakeHTTPServer, on: bool) -> None:
    """Close or reopen the listening socket on the same port (`down` = refused)."""
    loop = fake._loop
    assert loop is not None, "start the double first"

    async def switch() -> None:
        if on and (fake._server is None or not fake._server.is_serving()):
            fake._server = await asyncio.start_server(fake._handle, "127.0.0.1", fake.port)
        elif not on and fake._server is not None and fake._server.is_serving():
            fake._server.close()  # refuses new connections; open ones run on

    asyncio.run_coroutine_threadsafe(switch(), loop).result(10)


class FaultyOllama(FakeOllama):
    """Ollama's native API with injectable faults (see the module docstring)."""

    def __init__(self, *, markers: tuple[str, ...] = (), **kw: Any) -> None:
        super().__init__(**kw)
        self.faults = _Faults(markers)

    def __enter__(self) -> FaultyOllama:
        self.start()
        return self

    def set_fault(self, fault: Fault, phase: str, *, confident: bool = True) -> None:
        self.faults.phase, self.faults.fault, self.faults.confident = phase, fault, confident
        _listen(self, fault != "down")

    def _script(self, confident: bool) -> TokenScript:
        lp = CONFIDENT if confident else UNSURE
        return TokenScript.of("a", " +", " b", logprob=lp)

    async def _answer(
        self, req: Request, resp: Responder, body: dict[str, Any], name: str, script: TokenScript
    ) -> None:
        fault, confident = self.faults.take(req)
        ok = self._script(confident)
        if fault == "ok":
            await super()._answer(req, resp, body, name, ok)
        elif fault == "slow":
            if await resp.sleep(self.faults.slow_s):
                await super()._answer(req, resp, body, name, ok)
        elif fault == "down":  # in a mix: the connection drops before any answer
            return
        elif fault == "hung-headers":
            await _hang(resp)
        elif fault == "hung-body":
            await resp.start_stream("application/x-ndjson")
            await _hang(resp)
        elif fault == "garbage":
            await resp.start_stream("application/x-ndjson")
            await resp.write(b"<html><body>502 upstream</body></html>\n")
            await resp.write(bytes(random.Random(len(req.body)).randbytes(200)) + b"\n")
            await resp.end_stream()
        elif fault == "cut":
            await resp.start_stream("application/x-ndjson")
            line = {"model": name, "created_at": _now(), "response": "a", "done": False}
            await resp.write(json.dumps(line).encode() + b"\n")
            await resp.write(b'{"model": "' + name.encode() + b'", "resp')
            # Return without the last chunk: the connection closes mid-line.
        elif fault in ("401", "429", "echo-auth"):
            await _status(resp, fault, req, ollama=True)
        elif fault == "runaway":
            await resp.start_stream("application/x-ndjson")
            lp = CONFIDENT if confident else UNSURE
            while True:
                obj: dict[str, Any] = {
                    "model": name,
                    "created_at": _now(),
                    "response": " x",
                    "done": False,
                }
                if body.get("logprobs"):
                    obj["logprobs"] = [{"token": " x", "logprob": lp, "bytes": [32, 120]}]
                if not await resp.sleep(RUNAWAY_TOKEN_S):
                    return
                if not await resp.write(json.dumps(obj).encode() + b"\n"):
                    return
                req.tokens_sent += 1


class FaultyOpenAI(FakeOpenAI):
    """vLLM's OpenAI-compatible server with injectable faults (module docstring)."""

    def __init__(self, *, markers: tuple[str, ...] = (), **kw: Any) -> None:
        super().__init__(**kw)
        self.faults = _Faults(markers)
        self._answer_with = self.default

    def __enter__(self) -> FaultyOpenAI:
        self.start()
        return self

    def set_fault(self, fault: Fault, phase: str, *, confident: bool = True) -> None:
        self.faults.phase, self.faults.fault, self.faults.confident = phase, fault, confident
        _listen(self, fault != "down")

    async def _completions(self, req: Request, resp: Responder) -> None:
        fault, confident = self.faults.take(req)
        lp = CONFIDENT if confident else UNSURE
        ok = TokenScript.of("a", " +", " b", logprob=lp)
        if fault == "ok":
            await self._healthy(req, resp, ok)
        elif fault == "slow":
            if await resp.sleep(self.faults.slow_s):
                await self._healthy(req, resp, ok)
        elif fault == "down":
            return
        elif fault == "hung-headers":
            await _hang(resp)
        elif fault == "hung-body":
            await resp.start_stream("text/event-stream; charset=utf-8")
            await _hang(resp)
        elif fault == "garbage":
            await resp.start_stream("text/event-stream; charset=utf-8")
            await resp.write(b"data: {this is not json\n\n")
            await resp.write(b"\x00\xff\xfe garbage \x80\x81\n\n")
            await resp.end_stream()
        elif fault == "cut":
            await resp.start_stream("text/event-stream; charset=utf-8")
            chunk = {
                "id": "cmpl-cut",
                "object": "text_completion",
                "model": self.models[0],
                "choices": [{"index": 0, "text": "return", "logprobs": None}],
            }
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await resp.write(b'data: {"id": "cmpl-cut", "choi')
        elif fault in ("401", "429", "echo-auth"):
            await _status(resp, fault, req, ollama=False)
        elif fault == "runaway":
            await self._runaway(req, resp, lp)

    async def _healthy(self, req: Request, resp: Responder, script: TokenScript) -> None:
        # The base class takes its script from _next_script() before its first await.
        self._answer_with = script
        await super()._completions(req, resp)

    def _next_script(self) -> TokenScript:
        return self._answer_with

    async def _runaway(self, req: Request, resp: Responder, lp: float) -> None:
        body = req.json() or {}
        want_lp = body.get("logprobs") is not None
        await resp.start_stream("text/event-stream; charset=utf-8")
        offset = 0
        while True:
            lps = None
            if want_lp:
                lps = {
                    "tokens": [" x"],
                    "token_logprobs": [lp],
                    "top_logprobs": [{" x": lp}],
                    "text_offset": [offset],
                }
            chunk = {
                "id": "cmpl-runaway",
                "object": "text_completion",
                "model": self.models[0],
                "choices": [{"index": 0, "text": " x", "logprobs": lps, "finish_reason": None}],
            }
            if not await resp.sleep(RUNAWAY_TOKEN_S):
                return
            if not await resp.write(f"data: {json.dumps(chunk)}\n\n".encode()):
                return
            offset += 2
            req.tokens_sent += 1


async def _status(resp: Responder, fault: Fault, req: Request, *, ollama: bool) -> None:
    if fault == "401":
        body: Any = {"error": "Unauthorized"}
        await _send_raw(resp, 401, {"Content-Type": "application/json"}, json.dumps(body).encode())
    elif fault == "429":
        msg = "server busy, please try again." if ollama else "Too many requests"
        body = {"error": msg} if ollama else {"error": {"message": msg, "type": "RateLimit"}}
        headers = {"Content-Type": "application/json", "Retry-After": "30"}
        await _send_raw(resp, 429, headers, json.dumps(body).encode())
    else:  # echo-auth: a misconfigured proxy dumping the request headers
        auth = req.headers.get("authorization", "(none)")
        head = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1>"
        head += "<p>upstream rejected the request</p>"
        if len(req.body) % 2:
            # Every other echo puts the key across character 200: a client that keeps
            # the first 200 characters of an error body then holds part of the key,
            # which a scrubber looking for the whole key misses.
            at = 200 - 20 - len("<pre>authorization: Bearer ")
            head = head.ljust(at, ".")[:at]
        html = f"{head}<pre>authorization: {auth}\nhost: {req.headers.get('host', '')}</pre>"
        await _send_raw(
            resp, 502, {"Content-Type": "text/html"}, (html + "</body></html>").encode()
        )


__all__ = ["CONFIDENT", "FAULTS", "UNSURE", "Fault", "FaultyOllama", "FaultyOpenAI"]
