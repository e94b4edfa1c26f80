"""A fake Ollama speaking the native API (/api/generate, /api/show, /api/tags, /api/version).

It validates requests the way Ollama does (unknown model -> 404, `suffix` for a
model without the `insert` capability -> 400, empty prompt -> "load" only) and
records which prompt path each generation took in `modes`, so tests can show
the traps of ../shared/PROTOCOLS.md, not just our side of them.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from synconfroute.clients._speed import CALIBRATION_TEXT

from .http import Request, Responder, ScriptedServer, TokenScript, send_status

# What the fake answers the backend's speed calibration (`OllamaBackend.calibrate`, sent
# when the server warms its tier): outside the scripts and the request log, so a test's
# scripted answers and counted requests are its own.
CALIBRATION_ANSWER = TokenScript.of(" return", " args", "\n", logprob=-0.1)

DEFAULT_MODEL = "qwen2.5-coder:3b"

# The shape of Ollama's qwen2.5-coder template: FIM only when .Suffix is set,
# the chat layout otherwise (the "empty suffix" trap).
QWEN_CODER_TEMPLATE = (
    "{{- if .Suffix }}<|fim_prefix|>{{ .Prompt }}<|fim_suffix|>{{ .Suffix }}<|fim_middle|>\n"
    "{{- else }}<|im_start|>user\n{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n{{ end }}"
)
CHAT_TEMPLATE = "<|im_start|>user\n{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n"

ERRORS = {
    499: "context canceled",
    500: "model runner has unexpectedly stopped",
    503: "server busy, please try again.  maximum pending requests exceeded",
}


def canonical(name: str) -> str:
    """Ollama's name normalisation: a name without a tag means `:latest`."""
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _logprob(text: str, lp: float, top: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"token": text, "logprob": lp, "bytes": list(text.encode())}
    # Only the sampled token as its own alternative: enough for the shape.
    entry["top_logprobs"] = [dict(entry)] if top > 0 else []
    return entry


class FakeOllama(ScriptedServer):
    """Ollama's native API over a real socket.

    `models` maps a model name to its info: `capabilities` (list, or None to
    omit the key like servers older than 0.6), `template`, `details`,
    `model_info`. `script()` queues what the next generations answer; once the
    queue is empty, `default` answers every generation.
    """

    def __init__(
        self,
        models: dict[str, dict[str, Any]] | None = None,
        version: str = "0.13.0",
        default: TokenScript | None = None,
    ) -> None:
        super().__init__(default if default is not None else TokenScript.of("a", " +", " b"))
        if models is None:
            models = {DEFAULT_MODEL: {"capabilities": ["completion", "insert"]}}
        self.models = {canonical(k): self._complete_info(v) for k, v in models.items()}
        self.version = version
        self.honour_stop = True  # False: ignore `options.stop`, as a buggy server might
        self.honour_num_predict = True  # False: ignore `options.num_predict` (seen in the wild)
        self.modes: list[str] = []  # per generation: "fim" | "raw" | "chat" | "load"
        # Realistic timings (None: the script's delays alone): (prompt tokens/s, decode
        # tokens/s), with a KV cache like Ollama's runner: the prompt's start shared with
        # what was evaluated before costs nothing, what a cancel interrupted stays
        # evaluated. A token is taken as 4 characters.
        self.speed: tuple[float, float] | None = None
        self._cached = ""  # the text the fake's "KV cache" holds
        self.prompt_chars_total = 0  # prompt characters of the timed generations
        self.cached_chars_total = 0  # of them found in the "KV cache"
        self.prompts_timed = 0  # the timed generations
        self.calibrations = 0  # speed calibrations answered (not in `requests`)
        self.routes.update(
            {
                ("POST", "/api/generate"): self._generate,
                ("POST", "/api/show"): self._show,
                ("GET", "/api/tags"): self._tags,
                ("GET", "/api/version"): self._version,
            }
        )

    def __enter__(self) -> FakeOllama:
        self.start()
        return self

    @staticmethod
    def _complete_info(info: dict[str, Any]) -> dict[str, Any]:
        caps = info.get("capabilities", ["completion"])
        out = {
            "capabilities": caps,
            "template": QWEN_CODER_TEMPLATE if caps and "insert" in caps else CHAT_TEMPLATE,
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": "qwen2",
                "families": ["qwen2"],
                "parameter_size": "3.1B",
                "quantization_level": "Q4_K_M",
            },
            "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
        }
        out.update({k: v for k, v in info.items() if k != "capabilities"})
        return out

    @staticmethod
    def supports_insert(info: dict[str, Any]) -> bool:
        caps = info.get("capabilities")
        if caps is None:  # old servers decide by the template alone
            return ".Suffix" in str(info.get("template", ""))
        return "insert" in caps

    # -- routes ------------------------------------------------------------
    async def _version(self, req: Request, resp: Responder) -> None:
        await resp.send(200, {"version": self.version})

    async def _tags(self, req: Request, resp: Responder) -> None:
        models = [
            {
                "name": name,
                "model": name,
                "modified_at": "2026-01-01T00:00:00Z",
                "size": 1_929_912_432,
                "digest": f"{abs(hash(name)):064x}"[:64],
                "details": info["details"],
            }
            for name, info in self.models.items()
        ]
        await resp.send(200, {"models": models})

    async def _show(self, req: Request, resp: Responder) -> None:
        body = self._body(req)
        name = body.get("model") if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            await resp.send(400, {"error": "model is required"})
            return
        info = self.models.get(canonical(name))
        if info is None:
            await resp.send(404, {"error": f"model '{name}' not found"})
            return
        out = {
            "modelfile": f"FROM {name}\n",
            "parameters": "",
            "template": info["template"],
            "details": info["details"],
            "model_info": info["model_info"],
            "modified_at": "2026-01-01T00:00:00Z",
        }
        if info["capabilities"] is not None:
            out["capabilities"] = info["capabilities"]
        await resp.send(200, out)

    @staticmethod
    def _body(req: Request) -> Any:
        try:
            return req.json()
        except ValueError:
            return None

    async def _generate(self, req: Request, resp: Responder) -> None:
        body = self._body(req)
        if not isinstance(body, dict):
            await resp.send(400, {"error": "invalid request body"})
            return
        name = body.get("model")
        if not isinstance(name, str) or not name:
            await resp.send(400, {"error": "model is required"})
            return
        info = self.models.get(canonical(name))
        if info is None:
            await resp.send(404, {"error": f'model "{name}" not found, try pulling it first'})
            return
        prompt = body.get("prompt") or ""
        suffix = body.get("suffix") or ""
        raw = bool(body.get("raw", False))
        # Ollama checks the insert capability even when raw is set.
        if suffix and not self.supports_insert(info):
            msg = f"registry.ollama.ai/library/{canonical(name)} does not support insert"
            await resp.send(400, {"error": msg})
            return
        if prompt == CALIBRATION_TEXT and raw and not suffix:
            with self._lock:
                self.requests.remove(req)
            self.calibrations += 1
            await self._answer(req, resp, body, name, CALIBRATION_ANSWER)
            return
        if not prompt:
            self.modes.append("load")
            loaded = {"model": name, "created_at": _now(), "response": "", "done": True}
            await resp.send(200, {**loaded, "done_reason": "load"})
            return
        self.modes.append("raw" if raw else "fim" if suffix else "chat")
        await self._answer(req, resp, body, name, self._script_for(prompt))

    async def _answer(
        self, req: Request, resp: Responder, body: dict[str, Any], name: str, script: TokenScript
    ) -> None:
        if script.status is not None:
            err = script.body if script.body is not None else {"error": ERRORS.get(script.status)}
            await send_status(req, resp, script, err)
            return
        streaming = body.get("stream", True) is not False
        # Servers before 0.12.11 silently ignore `logprobs`: script.logprobs=False.
        want_lp = bool(body.get("logprobs")) and script.logprobs
        top = int(body.get("top_logprobs") or 0)
        options = body.get("options") or {}
        stops = [s for s in options.get("stop") or [] if s] if self.honour_stop else []
        num_predict = int(options.get("num_predict", -1)) if self.honour_num_predict else -1
        started = time.monotonic_ns()
        if streaming and not script.hang:
            await resp.start_stream("application/x-ndjson")
        prompt_eval: tuple[int, int] | None = None  # (tokens, ns) when self.speed is set
        if self.speed is not None and not script.hang:
            prompt_eval = await self._evaluate(
                resp, f"{body.get('prompt', '')}{body.get('suffix', '')}"
            )
            if prompt_eval is None:
                return  # the client left during the prompt's evaluation

        async def line(obj: dict[str, Any]) -> bool:
            return await resp.write(json.dumps(obj).encode() + b"\n")

        if script.hang:  # accepted, never answered: wait for the client to leave
            while await resp.sleep(0.5):
                pass
            return

        text = ""
        logprobs: list[dict[str, Any]] = []
        reason = script.finish_reason
        failed = script.error_after is not None
        for i, (tok, lp) in enumerate(script.tokens):
            if script.error_after is not None and i >= script.error_after:
                break
            delay = (
                script.first_delay if i == 0 and script.first_delay is not None else script.delay
            )
            if self.speed is not None:
                delay = 1 / self.speed[1]
            if not await resp.sleep(delay):
                return
            if script.garbage:
                if not await resp.write(f"<token {i}: {tok}>\n".encode()):
                    return
                req.tokens_sent += 1
                continue
            # Ollama cuts at a stop string and ends the generation there.
            piece, hit = tok, False
            cut = min((j for j in (f"{text}{tok}".find(s) for s in stops) if j >= 0), default=-1)
            if cut >= 0:
                piece, hit = f"{text}{tok}"[len(text) : max(cut, len(text))], True
            if piece:
                entry = [_logprob(piece, lp, top)] if want_lp else []
                obj: dict[str, Any] = {
                    "model": name,
                    "created_at": _now(),
                    "response": piece,
                    "done": False,
                }
                if want_lp:
                    obj["logprobs"] = entry
                if streaming and not await line(obj):
                    return
                req.tokens_sent += 1
                text += piece
                logprobs += entry
            if hit or (num_predict > 0 and req.tokens_sent >= num_predict):
                reason = "stop" if hit else "length"
                failed = False
                break
        if script.garbage:
            if streaming:
                await resp.end_stream()
            else:
                await resp.send(200, b"<html>not json</html>", "text/html")
            return
        if failed:
            if streaming:
                await line({"error": script.error_message})
                await resp.end_stream()
            else:
                await resp.send(500, {"error": script.error_message})
            return
        elapsed = time.monotonic_ns() - started
        prompt = str(body.get("prompt", ""))
        final: dict[str, Any] = {
            "model": name,
            "created_at": _now(),
            "response": "" if streaming else text,
            "done": True,
            "done_reason": reason,
            "total_duration": elapsed + 1_500_000,
            "load_duration": 1_000_000,
            "prompt_eval_count": max(1, len(prompt) // 4)
            if prompt_eval is None
            else prompt_eval[0],
            "prompt_eval_duration": 500_000 if prompt_eval is None else prompt_eval[1],
            "eval_count": req.tokens_sent,
            "eval_duration": elapsed,
        }
        if prompt_eval is not None:
            final["eval_duration"] = max(1, elapsed - prompt_eval[1])
        if not streaming:
            if want_lp:
                final["logprobs"] = logprobs
            await resp.send(200, final)
            return
        if await line(final):
            await resp.end_stream()

    async def _evaluate(self, resp: Responder, text: str) -> tuple[int, int] | None:
        """Take the time `self.speed` gives the part of `text` not cached yet; None when
        the client left meanwhile (what was evaluated stays cached)."""
        assert self.speed is not None
        common = 0
        for a, b in zip(self._cached, text, strict=False):
            if a != b:
                break
            common += 1
        todo = len(text) - common
        self.prompts_timed += 1
        self.prompt_chars_total += len(text)
        self.cached_chars_total += common
        chars_per_s = self.speed[0] * 4
        t0 = time.monotonic()
        done = 0
        while done < todo:
            step = min(todo - done, max(1, int(chars_per_s * 0.02)))
            if not await resp.sleep(step / chars_per_s):
                self._cached = text[: common + done]
                return None
            done += step
        self._cached = text
        return max(1, todo // 4), int((time.monotonic() - t0) * 1e9)


__all__ = ["DEFAULT_MODEL", "FakeOllama", "canonical"]
