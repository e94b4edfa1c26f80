"""The Ollama backend: fill-in-the-middle over the native `/api/generate`, streamed as NDJSON.

Ollama's FIM has traps (../shared/PROTOCOLS.md): `suffix` works only for models
with the `insert` capability; an EMPTY suffix makes Ollama use the chat
template, and an EMPTY prompt only loads the model. So we ask `/api/show` once
and choose per request between native FIM (`prompt` + `suffix`) and `raw: true`
with our own FIM template, never combining `raw` with `suffix`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import re
import time
from collections.abc import AsyncGenerator
from typing import Any

import attrs
import httpx

from . import templates
from ._backoff import Backoff, Kind, kind_of_status, retry_after
from ._speed import CALIBRATION_TEXT, FirstTokenEstimate, Rates, SpeedMeter
from ._status import Failure, status_error
from ._stream import Sent, TokenCap, TokenStops, complete_streamed, next_before, within
from .errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    FimUnsupported,
    ModelNotFound,
    ProtocolError,
    excerpt,
)
from .templates import FimTemplate
from .types import (
    Chunk,
    Completion,
    CompletionRequest,
    ProbeReport,
    Problem,
    PromptMode,
    TokenLogprob,
)

log = logging.getLogger(__name__)

BACKEND = "ollama"
DEFAULT_URL = "http://127.0.0.1:11434"
DEFAULT_MODEL = "qwen2.5-coder:3b"
LOGPROBS_SINCE = (0, 12, 11)  # first Ollama release that returns log-probs
NO_LOGPROBS = "this Ollama returns no log-probs"
NO_LOGPROBS_FIX = "upgrade to 0.12.11 or newer"
NOT_OLLAMA_HINT = "check that local.url points at Ollama itself (default http://127.0.0.1:11434)"
DEADLINE_HINT = (
    "the local model is slow or still loading; raise the latency budget or use a smaller model"
)
SERVER_LOG_HINT = "see the Ollama server log (`journalctl -u ollama`, or ~/.ollama/logs/server.log)"


@attrs.frozen(kw_only=True)
class _Plan:
    """How one request goes on the wire."""

    mode: PromptMode
    prompt: str
    raw: bool
    suffix: str | None = None  # None: the key is not sent at all
    stop: tuple[str, ...] = ()
    sent_at: float = 0.0  # when the request went out (time.monotonic)

    @property
    def laid_out(self) -> str:
        """The prompt as the server reads it, for its KV cache: the suffix after it."""
        return f"{self.prompt}\x00{self.suffix or ''}"


@functools.lru_cache(maxsize=64)  # a pure function of two short tuples, asked per request
def _stops(template: tuple[str, ...], request: tuple[str, ...]) -> tuple[str, ...]:
    """The stop strings sent: the template's, then the request's, each once, none empty."""
    return tuple(dict.fromkeys(s for s in (*template, *request) if s))


def _version_tuple(version: str) -> tuple[int, int, int] | None:
    m = re.match(r"v?(\d+)\.(\d+)\.(\d+)", version.strip())
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def _is_timing(key: str, value: object) -> bool:
    """The figures of Ollama's final line: *_duration (ns) and *_count."""
    return key.endswith(("_duration", "_count")) and isinstance(value, int)


def _error_text(resp: httpx.Response) -> str:
    """Ollama's `{"error": "..."}` message, or the start of whatever else came back."""
    try:
        data = resp.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return str(data["error"])
    return excerpt(resp.text.strip(), 200) or resp.reason_phrase or f"HTTP {resp.status_code}"


def _template_from_show(text: str) -> FimTemplate | None:
    """The FIM family whose sentinels appear in the model's Ollama template.

    Qwen2.5-Coder and CodeGemma share sentinels; their stop tokens tell them apart.
    """
    found = [t for t in templates.TEMPLATES.values() if all(s in text for s in t.sentinels)]
    for t in found:
        if any(s in text for s in t.stop if s not in t.sentinels):
            return t
    return found[0] if found else None


class OllamaBackend:
    """A local model served by Ollama (https://ollama.com), with per-token log-probs.

    `template` is the setting `clients.templates.resolve` reads: "" / "auto" (the
    model's name, else its Ollama template; native FIM where the model has `insert`),
    "off" (prefix only) or a family.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        model: str = DEFAULT_MODEL,
        *,
        template: str | None = None,
        num_ctx: int = 4096,
        keep_alive: str | int = "30m",
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = url.rstrip("/")
        self._model = model
        self._setting = templates.resolve(template, model)
        self._num_ctx = num_ctx
        self._keep_alive = keep_alive
        self._timeout = timeout
        self._client = httpx.AsyncClient(
            base_url=self._url,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            transport=transport,
            trust_env=False,  # on this machine: never through a proxy from the environment
        )
        self._info: dict[str, Any] | None = None  # /api/show, asked once
        self._insert_rejected = False  # the server refused `suffix` despite /api/show
        self._logprobs: bool | None = None
        # A settings change builds a new backend, which ends an "until the settings change" hold.
        self._backoff = Backoff(BACKEND, log)
        self.last_timings: dict[str, int] = {}  # the last generation's server figures (ns)
        # Prompt-evaluation and decode rates from those figures: the server sizes the
        # local prompt and prediction from them (`server.routing.time_budget`).
        self.speed = SpeedMeter()
        self._timed = False  # the current stream's final line gave the timings
        # Streams closed before that line (single lines): the prompt rate from the time
        # to their first token instead.
        self._first_token = FirstTokenEstimate()

    # -- identity ----------------------------------------------------------
    @property
    def name(self) -> str:
        return BACKEND

    @property
    def model(self) -> str:
        return self._model

    @property
    def url(self) -> str:
        return self._url

    @property
    def logprobs_supported(self) -> bool | None:
        """Whether the last generation came with log-probs (None: nothing generated yet).

        False means an Ollama older than 0.12.11: confidence cannot be measured.
        """
        return self._logprobs

    @property
    def template(self) -> FimTemplate | None:
        """Our FIM template: the setting, else the model's name, else its Ollama template."""
        if self._setting.template is not None:
            return self._setting.template
        if self._setting.mode == "auto" and self._info is not None:
            return _template_from_show(str(self._info.get("template", "")))
        return None

    def _native_insert(self, info: dict[str, Any]) -> bool:
        if self._insert_rejected or self._setting.mode == "off":
            return False
        caps = info.get("capabilities")
        if isinstance(caps, list):
            return "insert" in caps
        # Servers before `capabilities` existed: FIM iff the template uses .Suffix.
        return ".Suffix" in str(info.get("template", ""))

    def _mode(self, info: dict[str, Any]) -> PromptMode:
        if self._native_insert(info):
            return "fim-native"
        return "fim-template" if self.template is not None else "prefix-only"

    # -- HTTP helpers --------------------------------------------------------
    def _transport_error(self, exc: httpx.TransportError) -> BackendError:
        err = self._transport_error_of(exc)
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            # Down or restarting: a short exponential backoff, not a request per keystroke.
            self._backoff.failed(self._url, err, "connect")
        return err

    def _transport_error_of(self, exc: httpx.TransportError) -> BackendError:
        if isinstance(exc, httpx.TimeoutException):
            return BackendTimeout(
                f"Ollama at {self._url} did not answer within {self._timeout:g}s",
                backend=BACKEND,
                hint="the model may still be loading; retry, or raise local.timeout",
            )
        if isinstance(exc, httpx.ConnectError):
            return BackendUnavailable(
                f"cannot reach Ollama at {self._url}",
                backend=BACKEND,
                hint="start it with `ollama serve`, or set local.url",
            )
        return BackendUnavailable(
            f"the connection to Ollama at {self._url} broke: {exc or type(exc).__name__}",
            backend=BACKEND,
            hint="check that Ollama is still running (`ollama ps`)",
        )

    def _status_error(self, status: int, msg: str, path: str, asked: str = "") -> BackendError:
        model = asked or self._model

        def words(failure: Failure) -> tuple[str, str]:
            said: dict[Failure, tuple[str, str]] = {
                "auth": (
                    f"Ollama at {self._url} refused the request ({status}): {msg}",
                    "a proxy in front of Ollama wants credentials; point local.url at Ollama",
                ),
                "model": (
                    f"Ollama has no model {model!r}",
                    f"run `ollama pull {model}`, or set local.model",
                ),
                "wrong_url": (
                    f"{self._url}{path} answered 404 ({msg}): this is not an Ollama server",
                    NOT_OLLAMA_HINT,
                ),
                "fim": (
                    f"Ollama cannot fill in the middle with {model}: {msg}",
                    "set local.template to the model's FIM family, or use a FIM model"
                    " whose `ollama show` lists the insert capability",
                ),
                "cancelled": (
                    f"Ollama cancelled the request: {msg}",
                    "it was aborted on the server (shutdown or model unload); retry",
                ),
                "rate": (
                    f"Ollama (or a proxy in front of it) is rate-limiting us: {msg}",
                    "requests resume by themselves after the server's Retry-After",
                ),
                "busy": (
                    f"Ollama is busy: {msg}",
                    "its request queue is full; retry, or raise OLLAMA_MAX_QUEUE"
                    " / OLLAMA_NUM_PARALLEL",
                ),
                "failed": (f"Ollama failed ({status}): {msg}", SERVER_LOG_HINT),
                "rejected": (
                    f"Ollama rejected the request ({status}): {msg}",
                    "check the local.* settings (model, num_ctx); if they look right,"
                    " report a synconfroute bug",
                ),
                "unexpected": (
                    f"unexpected HTTP {status} from {self._url}{path}: {msg}",
                    NOT_OLLAMA_HINT,
                ),
            }
            return said[failure]

        return status_error(status, msg, words, backend=BACKEND)

    async def _check(self, resp: httpx.Response, path: str, model: str = "") -> None:
        """Raise the mapped error unless the answer is 200 (`model`: the one asked)."""
        if resp.status_code == 200:
            self._backoff.succeeded(self._url)
            return
        await resp.aread()
        err = self._status_error(resp.status_code, _error_text(resp), path, model)
        kind: Kind | None = kind_of_status(resp.status_code)
        if kind is not None:
            wait = retry_after(resp.headers.get("retry-after"))
            self._backoff.failed(self._url, err, kind, seconds=wait)
        cause = httpx.HTTPStatusError(
            f"HTTP {resp.status_code} from {path}", request=resp.request, response=resp
        )
        raise err from cause

    async def _call(self, method: str, path: str, payload: Any = None) -> Any:
        """One small JSON request/answer (version, show, tags)."""
        try:
            resp = await self._client.request(method, path, json=payload)
        except httpx.TransportError as exc:
            raise self._transport_error(exc) from exc
        await self._check(resp, path)
        try:
            return resp.json()
        except ValueError as exc:
            raise ProtocolError(
                f"{self._url}{path} answered something that is not JSON",
                backend=BACKEND,
                hint=NOT_OLLAMA_HINT,
            ) from exc

    async def _show(self, deadline: float | None = None) -> dict[str, Any]:
        if self._info is None:
            data = await within(
                deadline,
                lambda: self._call("POST", "/api/show", {"model": self._model}),
                BACKEND,
                before="/api/show",
                late="Ollama did not answer /api/show within the deadline",
                hint=DEADLINE_HINT,
            )
            if not isinstance(data, dict):
                raise ProtocolError(
                    "/api/show answered something that is not a JSON object",
                    backend=BACKEND,
                    hint=NOT_OLLAMA_HINT,
                )
            self._info = data
        return self._info

    # -- generation ------------------------------------------------------------
    async def _plan(self, request: CompletionRequest) -> _Plan | None:
        """The prompt layout for `request`; None when there is nothing to ask."""
        prefix, suffix = request.prefix, request.suffix
        if not prefix and not suffix:
            return None
        if request.raw:  # a prompt of its own: no template, no insert check
            return _Plan(mode="prefix-only", prompt=prefix, raw=True, stop=request.stop)
        if request.context_files:  # native FIM and prefix-only: context as comment headers
            prefix = templates.with_context(request)
        info = await self._show(request.deadline)
        tpl = self.template
        stop = _stops(tuple(tpl.stop) if tpl else (), tuple(request.stop))
        if self._native_insert(info):
            if prefix and suffix:
                return _Plan(mode="fim-native", prompt=prefix, suffix=suffix, raw=False, stop=stop)
            if tpl is None and prefix:
                # Empty suffix would select the chat template; a newline keeps Ollama on FIM.
                return _Plan(mode="fim-native", prompt=prefix, suffix="\n", raw=False, stop=stop)
        if tpl is not None:
            return _Plan(
                mode="fim-template",
                prompt=tpl.render(request.prefix, suffix, **templates.context_args(request)),
                raw=True,
                stop=stop,
            )
        # No FIM at all: continue the prefix. An empty prompt would only load the model.
        return _Plan(mode="prefix-only", prompt=prefix, raw=True, stop=stop) if prefix else None

    def _body(self, plan: _Plan, request: CompletionRequest) -> bytes:
        payload: dict[str, Any] = {"model": request.model or self._model, "prompt": plan.prompt}
        if plan.suffix is not None:
            payload["suffix"] = plan.suffix
        if plan.raw:
            payload["raw"] = True
        payload.update(
            stream=True,
            logprobs=True,
            keep_alive=self._keep_alive,
            # The same option keys on every request: a changed num_ctx reloads the model.
            options={
                "temperature": request.temperature,
                "num_predict": request.max_tokens,
                "stop": list(plan.stop),
                "num_ctx": self._num_ctx,
            },
        )
        return json.dumps(payload, ensure_ascii=False).encode()

    def stream(self, request: CompletionRequest) -> AsyncGenerator[Chunk, None]:
        """Stream the completion; `aclose()` or cancelling the task aborts it on the server."""
        return self._stream(request, Sent())

    async def complete(self, request: CompletionRequest) -> Completion:
        model = request.model or self._model
        return await complete_streamed(self._stream, request, backend=BACKEND, model=model)

    async def _stream(self, request: CompletionRequest, sent: Sent) -> AsyncGenerator[Chunk, None]:
        if (held := self._backoff.held(self._url)) is not None:
            raise held  # backing off: fail at once, nothing is sent
        try:
            async with contextlib.AsyncExitStack() as stack:
                opened = await self._open(stack, request, sent)
                if opened is None:
                    yield Chunk(text="", finish_reason="stop")
                    return
                resp, plan = opened
                async for chunk in self._chunks(resp, plan, request):
                    yield chunk
        except httpx.TransportError as exc:
            raise self._transport_error(exc) from exc

    async def _open(
        self, stack: contextlib.AsyncExitStack, request: CompletionRequest, sent: Sent
    ) -> tuple[httpx.Response, _Plan] | None:
        """Start the generation; retry once on the template path if `suffix` is refused."""
        plan = await self._plan(request)
        retried = False
        while plan is not None:
            body = self._body(plan, request)
            sent.n += len(body)
            plan = _Plan(  # `attrs.evolve`, without its walk over the fields
                mode=plan.mode,
                prompt=plan.prompt,
                raw=plan.raw,
                suffix=plan.suffix,
                stop=plan.stop,
                sent_at=time.monotonic(),
            )
            stream = self._client.stream(
                "POST",
                "/api/generate",
                content=body,
                headers={"Content-Type": "application/json"},
            )
            resp = await within(
                request.deadline,
                functools.partial(stack.enter_async_context, stream),
                BACKEND,
                before="/api/generate",
                late="Ollama did not answer /api/generate within the deadline",
                hint=DEADLINE_HINT,
            )
            try:
                await self._check(resp, "/api/generate", request.model)
            except FimUnsupported:
                if retried or plan.suffix is None:
                    raise
                # /api/show promised `insert`, the server disagrees: use our template.
                await resp.aclose()
                self._insert_rejected = True
                retried = True
                plan = await self._plan(request)
                continue
            return resp, plan
        return None

    async def _chunks(
        self, resp: httpx.Response, plan: _Plan, request: CompletionRequest
    ) -> AsyncGenerator[Chunk, None]:
        """One Chunk per NDJSON line, cut client-side at the stop strings and max_tokens
        too. Ollama's timings come in its final line only: a stream closed before it
        (a single line ends, a time cap) still tells the decode rate, measured here."""
        seen = [0, 0.0, 0.0]  # tokens, first and last arrival
        try:
            async with contextlib.aclosing(self._lines(resp, plan, request)) as lines:
                async for chunk in lines:
                    if chunk.text:
                        now = time.monotonic()
                        seen = [seen[0] + 1, seen[1] or now, now]
                    yield chunk
        finally:
            n, first, last = seen
            prompt = self._first_token.sample(
                plan.laid_out, first - plan.sent_at if n else None, self.speed.rates.decode_tps
            )
            if n and not self._timed:
                self.speed.observe(decode_tokens=int(n) - 1, decode_s=last - first)
                if prompt is not None:
                    self.speed.observe(prompt_tokens=prompt[0], prompt_s=prompt[1])

    async def _lines(
        self, resp: httpx.Response, plan: _Plan, request: CompletionRequest
    ) -> AsyncGenerator[Chunk, None]:
        self._timed = False
        deadline = request.deadline
        lines = resp.aiter_lines()
        stops = TokenStops(plan.stop)
        cap = TokenCap(request.max_tokens)
        while True:
            try:
                line = await next_before(lines, deadline, BACKEND, hint=DEADLINE_HINT)
            except StopAsyncIteration as exc:
                raise ProtocolError(
                    "Ollama ended the stream without its final `done` line",
                    backend=BACKEND,
                    hint=SERVER_LOG_HINT,
                ) from exc
            if not line.strip():
                continue
            obj = self._parse_line(line)
            text, toks = cap.take(obj.get("response", ""), self._parse_logprobs(obj))
            has_lp = not text or bool(toks)
            if text:
                self._logprobs = has_lp
            out, tokens = stops.feed(text, toks)
            if stops.stopped:
                # Leaving the `async with` closes the response: the server stops generating.
                yield Chunk(text=out, tokens=tokens, logprobs=has_lp, finish_reason="stop")
                return
            done = obj.get("done") is True
            if done or cap.reached:
                # At max_tokens the server may go on (some ignore num_predict): stop
                # reading; leaving the `async with` closes the response.
                rest, more = stops.flush()
                reason = obj.get("done_reason") if done else "length"
                if done:
                    self.last_timings = {k: v for k, v in obj.items() if _is_timing(k, v)}
                    self._observe_speed(self.last_timings)
                    self._timed = True
                yield Chunk(
                    text=out + rest,
                    tokens=tokens + more,
                    logprobs=has_lp,
                    finish_reason=reason if isinstance(reason, str) and reason else "stop",
                )
                return
            if out or tokens or not has_lp:
                yield Chunk(text=out, tokens=tokens, logprobs=has_lp)

    @property
    def rates(self) -> Rates:
        """Prompt-evaluation and decode rates measured so far (from Ollama's timings)."""
        return self.speed.rates

    async def calibrate(self) -> Rates:
        """One short generation run to its end (not streamed, so its final figures
        come): Ollama's timings give the prompt-evaluation and decode rates, and the
        model is loaded by then. Streams of real requests rarely reach Ollama's final
        line (a single line ends early); a failure leaves the rates as they were."""
        payload = {
            "model": self._model,
            "prompt": CALIBRATION_TEXT,
            "raw": True,
            "stream": False,
            "keep_alive": self._keep_alive,
            # The same option keys as every request: a changed num_ctx reloads the model.
            "options": {"temperature": 0.0, "num_predict": 8, "stop": [], "num_ctx": self._num_ctx},
        }
        try:
            resp = await self._client.post("/api/generate", json=payload)
            data = resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError) as exc:
            log.info("could not measure Ollama's speed: %s", exc)
            return self.speed.rates
        if isinstance(data, dict) and data.get("done") is True:
            self._observe_speed({k: v for k, v in data.items() if _is_timing(k, v)})
        return self.speed.rates

    def _observe_speed(self, t: dict[str, int]) -> None:
        # prompt_eval_count counts only the tokens Ollama evaluated (not its cached ones).
        self.speed.observe(
            prompt_tokens=t.get("prompt_eval_count", 0),
            prompt_s=t.get("prompt_eval_duration", 0) / 1e9,
            decode_tokens=t.get("eval_count", 0),
            decode_s=t.get("eval_duration", 0) / 1e9,
        )

    @staticmethod
    def _parse_line(line: str) -> dict[str, Any]:
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise ProtocolError(
                f"Ollama sent a line that is not JSON: {excerpt(line, 80)!r}",
                backend=BACKEND,
                hint=NOT_OLLAMA_HINT,
            ) from exc
        if not isinstance(obj, dict):
            raise ProtocolError(
                f"Ollama sent a JSON {type(obj).__name__} where an object was expected",
                backend=BACKEND,
                hint=NOT_OLLAMA_HINT,
            )
        if "error" in obj:
            raise BackendUnavailable(
                f"Ollama failed during the generation: {obj['error']}",
                backend=BACKEND,
                hint=f"the model runner may have crashed or run out of memory; {SERVER_LOG_HINT}",
            )
        if not isinstance(obj.get("response", ""), str) or not isinstance(
            obj.get("done", False), bool
        ):
            raise ProtocolError(
                f"Ollama sent a line of an unexpected shape: {excerpt(line, 80)!r}",
                backend=BACKEND,
                hint=NOT_OLLAMA_HINT,
            )
        return obj

    @staticmethod
    def _parse_logprobs(obj: dict[str, Any]) -> tuple[TokenLogprob, ...]:
        items = obj.get("logprobs")
        if items is None:  # servers before 0.12.11 leave the key out
            return ()
        out: list[TokenLogprob] = []
        if isinstance(items, list):
            for item in items:
                if not isinstance(item, dict):
                    break
                tok, lp = item.get("token"), item.get("logprob")
                if not isinstance(tok, str) or isinstance(lp, bool):
                    break
                if not isinstance(lp, int | float):
                    break
                out.append(TokenLogprob(tok, float(lp)))
            else:
                return tuple(out)
        raise ProtocolError(
            f"Ollama sent log-probs of an unexpected shape: {excerpt(str(items), 80)}",
            backend=BACKEND,
            hint=NOT_OLLAMA_HINT,
        )

    # -- doctor ------------------------------------------------------------------
    async def _installed(self) -> list[str]:
        try:
            data = await self._call("GET", "/api/tags")
        except BackendError:
            return []
        models = data.get("models") if isinstance(data, dict) else None
        if not isinstance(models, list):
            return []
        return [str(m["name"]) for m in models if isinstance(m, dict) and "name" in m]

    async def discover(self) -> ProbeReport:
        """Server, version, model and FIM mode; `commands.doctor` adds the tiny generation."""

        def report(**kw: Any) -> ProbeReport:
            return ProbeReport(backend=BACKEND, target=self._url, model=self._model, **kw)

        try:
            data = await self._call("GET", "/api/version")
        except (BackendUnavailable, BackendTimeout) as exc:
            return report(reachable=False, problems=(Problem("error", exc.message, exc.hint),))
        except BackendError as exc:
            problem = Problem("error", f"{self._url} does not answer like Ollama", exc.hint)
            return report(reachable=True, problems=(problem,))
        version = data.get("version") if isinstance(data, dict) else None
        if not isinstance(version, str):
            problem = Problem("error", "/api/version has no version: not Ollama?", NOT_OLLAMA_HINT)
            return report(reachable=True, problems=(problem,))
        vt = _version_tuple(version)
        old = vt is not None and vt != (0, 0, 0) and vt < LOGPROBS_SINCE  # 0.0.0: a dev build

        try:
            info = await self._show()
        except ModelNotFound:
            names = await self._installed()
            have = f"installed: {', '.join(names)}" if names else "no models installed"
            problem = Problem(
                "error",
                f"Ollama has no model {self._model!r} ({have})",
                f"run `ollama pull {self._model}`, or set local.model to an installed model",
            )
            return report(reachable=True, version=version, model_present=False, problems=(problem,))
        except BackendError as exc:
            problem = Problem("error", exc.message, exc.hint)
            return report(reachable=True, version=version, problems=(problem,))

        problems: list[Problem] = []
        mode = self._mode(info)
        if mode == "prefix-only" and self._setting.mode != "off":
            known = ", ".join(sorted(templates.TEMPLATES))
            problems.append(
                Problem(
                    "warning",
                    f"{self._model} has no insert capability and no known FIM template:"
                    " completions will ignore the code after the cursor",
                    f"set local.template to the model's family ({known}), or use a FIM model"
                    f" such as {DEFAULT_MODEL}",
                )
            )
        if old:  # known without generating: these versions never return log-probs
            problems.append(
                Problem("warning", f"{NO_LOGPROBS} (version {version})", NO_LOGPROBS_FIX)
            )
        tpl = self.template
        return report(
            reachable=True,
            version=version,
            model_present=True,
            prompt_mode=mode,
            template=tpl.name if tpl is not None else None,
            logprobs=False if old else None,
            problems=tuple(problems),
        )

    async def aclose(self) -> None:
        await self._client.aclose()


__all__ = ["DEFAULT_MODEL", "DEFAULT_URL", "OllamaBackend"]
