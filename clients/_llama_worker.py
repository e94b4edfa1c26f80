"""The embedded backend's worker process: llama.cpp behind a pipe.

`clients.embedded` starts it as `python -m <package>._llama_worker CONFIG_JSON`. It
reads one JSON request per line on stdin and writes one JSON event per line on the
protocol pipe (the original stdout; fd 1 then points at stderr, so a print from
llama.cpp or a library cannot corrupt the stream). It exits when stdin closes: the
server closed the pipe, or died.

Requests: {"op": "load"|"calibrate"|"generate"|"prefill"|"cancel"|"detokenize"|"head",
           "id": N, ...}.
Events:   {"id": N, "loaded": {...}} | {"id": N, "chunk": {...}} | {"id": N, "text": ...}
          | {"id": N, "error": {"type", "message", "hint"}} | {"id": N, "done": {stats}}
          | {"id": N, "prefilled": {stats}} | {"id": N, "rates": {prompt_tps, decode_tps}}.
A generate always ends with "done" (after its chunks, or after its error), carrying what
the generation did (tokens, cancel point, timings), so the server's record is exact.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import IO, Any

import attrs

from ._llama import GenerationStats, LlamaRunner
from .errors import BackendError, BackendUnavailable
from .types import Chunk, CompletionRequest


class _Server:
    def __init__(self, runner: LlamaRunner, out: IO[str]) -> None:
        self.runner = runner
        self._out = out
        self._write = threading.Lock()
        self.tasks: dict[int, asyncio.Task[None]] = {}

    def send(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, separators=(",", ":")) + "\n"
        with self._write:
            self._out.write(line)
            self._out.flush()

    def error(self, rid: int, exc: BaseException) -> None:
        if isinstance(exc, BackendError):
            kind, message, hint = type(exc).__name__, exc.message, exc.hint
        else:
            kind, message = "BackendUnavailable", f"llama.cpp worker error: {exc!r}"
            hint = "retry; if it persists, see the server log"
        self.send({"id": rid, "error": {"type": kind, "message": message, "hint": hint}})

    def handle(self, msg: dict[str, Any]) -> None:
        rid = int(msg.get("id", 0))
        op = msg.get("op")
        if op == "cancel":
            task = self.tasks.get(rid)
            if task is not None:
                task.cancel()
            return
        if op == "generate":
            self.tasks[rid] = asyncio.create_task(self._generate(rid, msg["request"]))
        elif op == "calibrate":
            self.tasks[rid] = asyncio.create_task(self._calibrate(rid))
        elif op == "prefill":
            self.tasks[rid] = asyncio.create_task(self._prefill(rid, msg["request"]))
        elif op == "load":
            self.tasks[rid] = asyncio.create_task(self._load(rid))
        elif op == "detokenize":
            self.tasks[rid] = asyncio.create_task(self._detokenize(rid, msg["ids"]))
        elif op == "head":
            self.tasks[rid] = asyncio.create_task(self._head(rid, msg["text"], int(msg["n"])))
        else:
            self.error(rid, BackendUnavailable(f"unknown worker request {op!r}"))

    async def _load(self, rid: int) -> None:
        try:
            load_s = await self.runner.load()
            self.send(
                {
                    "id": rid,
                    "loaded": {
                        "load_s": load_s,
                        "prompt_mode": self.runner.prompt_mode,
                        "template": self.runner.template,
                        "template_warning": self.runner.template_warning,
                        "pid": os.getpid(),
                    },
                }
            )
        except Exception as exc:
            self.error(rid, exc)
        finally:
            self.tasks.pop(rid, None)

    async def _detokenize(self, rid: int, ids: list[int]) -> None:
        try:
            self.send({"id": rid, "text": await self.runner.detokenize(ids)})
        except Exception as exc:
            self.error(rid, exc)
        finally:
            self.tasks.pop(rid, None)

    async def _head(self, rid: int, text: str, n: int) -> None:
        try:
            self.send({"id": rid, "text": await self.runner.head(text, n)})
        except Exception as exc:
            self.error(rid, exc)
        finally:
            self.tasks.pop(rid, None)

    async def _calibrate(self, rid: int) -> None:
        try:
            prompt, decode = await self.runner.calibrate()
            self.send({"id": rid, "rates": {"prompt_tps": prompt, "decode_tps": decode}})
        except Exception as exc:
            self.error(rid, exc)
        finally:
            self.tasks.pop(rid, None)

    async def _prefill(self, rid: int, fields: dict[str, Any]) -> None:
        try:
            stats = await self.runner.prefill(_request(fields))
            self.send({"id": rid, "prefilled": attrs.asdict(stats)})
        except Exception as exc:
            self.error(rid, exc)
        finally:
            self.tasks.pop(rid, None)

    async def _generate(self, rid: int, fields: dict[str, Any]) -> None:
        request = _request(fields)
        gen = GenerationStats()
        try:
            async with contextlib.aclosing(self.runner.stream(request, gen)) as chunks:
                async for chunk in chunks:
                    self.send({"id": rid, "chunk": _chunk(chunk)})
        except asyncio.CancelledError:
            pass  # the server stopped listening; the stream's close cancelled llama.cpp
        except Exception as exc:
            self.error(rid, exc)
        finally:
            # The engine stops within one token; wait for it so the counts are final. A
            # cancel that comes now (the generation ended by itself as the server closed
            # its stream) must not swallow the "done" the server waits for.
            ended = asyncio.ensure_future(asyncio.to_thread(gen.finished.wait, 120))
            while not ended.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(ended)
            self.send({"id": rid, "done": _stats(gen)})
            self.tasks.pop(rid, None)


def _request(fields: dict[str, Any]) -> CompletionRequest:
    predict = fields.get("max_predict_s")
    return CompletionRequest(
        prefix=fields["prefix"],
        suffix=fields.get("suffix", ""),
        max_tokens=int(fields.get("max_tokens", 64)),
        stop=tuple(fields.get("stop", ())),
        temperature=float(fields.get("temperature", 0.0)),
        max_predict_s=None if predict is None else float(predict),
        raw=bool(fields.get("raw", False)),
    )


def _chunk(chunk: Chunk) -> dict[str, Any]:
    return {
        "text": chunk.text,
        "tokens": [[t.text, t.logprob] for t in chunk.tokens],
        "finish": chunk.finish_reason,
    }


def _stats(gen: GenerationStats) -> dict[str, Any]:
    return {
        "prompt_ids": list(gen.prompt_ids),
        "cached_tokens": gen.cached_tokens,
        "evaluated_tokens": gen.evaluated_tokens,
        "eval_s": gen.eval_s,
        "tokens_generated": gen.tokens_generated,
        "tokens_at_cancel": gen.tokens_at_cancel,
        "prompt_s": gen.prompt_s,
        "decode_s": gen.decode_s,
        "finish_reason": gen.finish_reason or ("cancelled" if gen.cancelled else "error"),
        "slot": gen.slot,
        "held_tokens": gen.held_tokens,
    }


async def _serve(config: dict[str, Any], out: IO[str]) -> None:
    path = config.get("model_path")
    runner = LlamaRunner(
        Path(path) if path else None,
        explicit_path=bool(config.get("explicit_path")),
        template=config.get("template", "auto"),
        n_ctx=int(config.get("n_ctx", 2048)),
        n_threads=config.get("n_threads"),
        seed=int(config.get("seed", 0)),
    )
    server = _Server(runner, out)
    loop = asyncio.get_running_loop()
    eof = asyncio.Event()

    def read() -> None:  # a thread: stdin stays readable while llama.cpp computes
        for line in sys.stdin.buffer:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            loop.call_soon_threadsafe(server.handle, msg)
        loop.call_soon_threadsafe(eof.set)

    threading.Thread(target=read, name="llama-worker-stdin", daemon=True).start()
    await eof.wait()
    for task in list(server.tasks.values()):
        task.cancel()
    await asyncio.gather(*server.tasks.values(), return_exceptions=True)
    await runner.aclose()


def main(argv: list[str]) -> int:
    # Keep the protocol on its own descriptor: fd 1 goes to stderr from here on.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    config = json.loads(argv[1]) if len(argv) > 1 else {}
    asyncio.run(_serve(config, out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
