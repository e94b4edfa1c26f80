"""The escalation tier: an OpenAI-compatible `/v1/completions` server (vLLM; llama.cpp too).

Wire facts that shape this module (../shared/PROTOCOLS.md): vLLM rejects the
`suffix` key, so the FIM prompt is built here from the model family's template;
`max_tokens` defaults to 16 and sampling defaults come from the model, so both
are always sent; stop strings are matched on text decoded without special
tokens, so we ask for `skip_special_tokens: false` when a template's sentinels
are stops, and cut on stop strings again on our side. Several base URLs give
failover; the one that answered last is tried first next time.

The API key is read from an environment variable named in the settings and is
only ever put in the Authorization header: never in logs, reprs or messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import re
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

import attrs
import httpx

from . import _verify, templates
from ._backoff import Backoff, kind_of_status, retry_after
from ._status import Failure, failure_of, status_error
from ._stream import Sent, TokenCap, TokenStops, complete_streamed, next_before, within
from .connection import (
    Connection,
    ConnectionSetupError,
    describe_closed,
    describe_tls,
    remote_client_args,
)
from .errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    BadCredentials,
    ProtocolError,
    RequestRejected,
    excerpt,
    register_secret,
)
from .plan import EgressCheck, PromptPlan
from .replicas import ClusterLoad, MetricsError, parse_metrics, rendezvous, server_root
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

BACKEND = "openai"
DEFAULT_KEY_ENV = "SYNCONFROUTE_REMOTE_API_KEY"
# vLLM clamps -inf to this; we clamp anything lower (or -inf from other servers) too.
MIN_LOGPROB = -9999.0
# After the final chunk only `data: [DONE]` should follow; reading it keeps the
# connection reusable (no new TLS handshake next time), but never wait long for it.
DRAIN_S = 0.5
# A single-line completion asks the server to stop at the end of the line.
LINE_STOP = "\n"
# vLLM's 400 for a prompt over --max-model-len (also with stream: true).
_CONTEXT_LIMIT = re.compile(r"maximum context length is (\d+) tokens")
# The cluster's /metrics: read at most this often, and never waited for longer.
METRICS_EVERY_S = 2.0
METRICS_TIMEOUT_S = 1.0


@attrs.frozen
class _Piece:
    """One parsed answer fragment: a streamed chunk or a whole JSON answer."""

    text: str
    tokens: tuple[TokenLogprob, ...] | None  # None: the server gave no log-probs
    finish_reason: str | None


class _Retry(Exception):
    """This server failed before we yielded anything: try the next URL.

    `status` (429/503) or `connect` say whether the failure starts a backoff;
    `retry_after` is the server's Retry-After in seconds, if it sent one.
    """

    def __init__(
        self,
        reason: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        connect: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after
        self.connect = connect


class _Assembler:
    """Turns server pieces into our Chunks: stop strings cut, tokens kept aligned."""

    def __init__(self, stops: Sequence[str], max_tokens: int) -> None:
        # Servers may send a token before its text (llama.cpp holds back possible stop
        # strings); only tokens that make up the text handed out count.
        self.stops = TokenStops(stops)
        self.cap = TokenCap(max_tokens)
        self.logprobs = True

    @property
    def stopped(self) -> bool:
        return self.stops.stopped

    @property
    def capped(self) -> bool:
        return self.cap.reached

    def feed(self, piece: _Piece) -> Chunk | None:
        text, tokens = self.cap.take(piece.text, piece.tokens or ())
        if piece.tokens is None and text:
            self.logprobs = False
        out, tokens = self.stops.feed(text, tokens)
        if self.stops.stopped:
            return self._chunk(out, tokens, "stop")
        return self._chunk(out, tokens, None) if out or tokens else None

    def finish(self, reason: str | None) -> Chunk:
        return self._chunk(*self.stops.flush(), reason)

    def _chunk(self, out: str, tokens: tuple[TokenLogprob, ...], finish: str | None) -> Chunk:
        return Chunk(text=out, tokens=tokens, logprobs=self.logprobs, finish_reason=finish)


class OpenAIBackend:
    """Completions from an OpenAI-compatible server, with log-probs, streamed.

    `urls` are base URLs ending in /v1 (several = failover). `api_key_env` is the
    NAME of the environment variable holding the key (None: send no key).
    `template` is the setting `clients.templates.resolve` reads ("" / "auto": detected
    from `model`; "off"; a family); without a template the model sees only the prefix.
    A request's `affinity` key orders the URLs by rendezvous hashing (`replicas`) and is
    sent in the `session_header` (for a balancer in front), if one is named.
    `metrics_url`: where the cluster's load is read ("": each replica's /metrics where
    its URL is a server's own /v1, else none; "off": never).
    """

    def __init__(
        self,
        urls: str | Sequence[str],
        model: str,
        *,
        api_key_env: str | None = DEFAULT_KEY_ENV,
        template: str | None = None,
        stream: bool = True,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        connection: Connection | None = None,
        session_header: str | None = None,
        metrics_url: str = "",
    ) -> None:
        raw = [urls] if isinstance(urls, str) else list(urls)
        self._urls = tuple(u.strip().rstrip("/") for u in raw if u.strip())
        if not self._urls:
            raise ValueError("OpenAIBackend needs at least one base URL (e.g. http://host:8000/v1)")
        self._model = model
        self._key_env = api_key_env
        key = os.environ.get(api_key_env, "").strip() if api_key_env else ""
        self._key = key or None
        register_secret(self._key)  # scrubbed from every error text from now on
        self._setting = templates.resolve(template, model)
        self._template = self._setting.template
        self._stream = stream
        self._timeout = timeout
        # TLS, proxy and headers (clients/connection.py); None: a server on this machine,
        # reached directly (no proxy from the environment, ever).
        self._setup_error: BackendUnavailable | None = None
        self._cert = connection is not None and bool(connection.client_cert)
        conn_args: dict[str, Any] = {"trust_env": False}
        if connection is not None:
            try:
                conn_args = remote_client_args(connection, self._urls)
            except ConnectionSetupError as exc:
                self._setup_error = BackendUnavailable(
                    str(exc),
                    backend=BACKEND,
                    hint="fix the remote connection settings; until then completions stay local",
                    sent_nothing=True,
                )
        if transport is not None:
            conn_args.pop("mounts", None)
        self._client = httpx.AsyncClient(
            transport=transport,
            # Connecting is quick or not at all: fail over early instead of waiting.
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            **conn_args,
        )
        self._preferred = self._urls[0]
        # Per base URL; a settings change builds a new backend, which ends every hold.
        self._backoff = Backoff(BACKEND, log)
        self._ctx: int | None = None
        self._ctx_known = False
        # The remote tier's egress check (server/egress.py): with one set, no request
        # leaves without its prompt plan passing it. None: a local server.
        self._egress: EgressCheck | None = None
        self._session_header = session_header or None
        self._metrics_url = metrics_url.strip()
        # The last reading of each metrics URL, and the refresh under way (one at a time).
        self._loads: dict[str, ClusterLoad] = {}
        self._polls: dict[str, asyncio.Task[None]] = {}
        # Whether the server scores prompts (`echo` + `logprobs`), for verified
        # escalations: None until asked (once), False once it answered without them.
        self._verifies: bool | None = None

    # -- identity ----------------------------------------------------------
    @property
    def name(self) -> str:
        return BACKEND

    @property
    def model(self) -> str:
        return self._model

    @property
    def urls(self) -> tuple[str, ...]:
        return self._urls

    @property
    def template(self) -> templates.FimTemplate | None:
        return self._template

    @property
    def has_key(self) -> bool:
        return self._key is not None

    def __repr__(self) -> str:
        key = "set" if self._key else "not set"
        return (
            f"OpenAIBackend(urls={list(self._urls)!r}, model={self._model!r}, "
            f"api_key_env={self._key_env!r} ({key}), "
            f"template={self._template.name if self._template else None!r})"
        )

    __str__ = __repr__

    async def aclose(self) -> None:
        for task in self._polls.values():
            task.cancel()
        await asyncio.gather(*self._polls.values(), return_exceptions=True)
        await self._client.aclose()

    def set_egress(self, check: EgressCheck) -> None:
        """Make every completion request pass `check(body, plan)` before it is sent."""
        self._egress = check

    async def _send(
        self, req: httpx.Request, data: bytes, plan: PromptPlan | None
    ) -> httpx.Response:
        """The one place a completion request is sent: the egress check first, on the
        final body and the request's prompt plan (it raises EgressRefused)."""
        if self._egress is not None:
            self._egress(data, plan)
        return await self._client.send(req, stream=True)

    # -- requests ----------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._key}"} if self._key else {}

    def _session(self, request: CompletionRequest) -> dict[str, str]:
        """The stable session header a balancer keys its affinity on (a hash, nothing
        that names the user or the repository)."""
        if self._session_header is None or not request.affinity:
            return {}
        return {self._session_header: request.affinity}

    def _order(self, affinity: str = "") -> list[str]:
        """The URLs to try, in order: the workspace's own (rendezvous) order when the
        request names its workspace, else the one that answered last first."""
        if affinity and len(self._urls) > 1:
            return rendezvous(affinity, self._urls)
        i = self._urls.index(self._preferred)
        return [*self._urls[i:], *self._urls[:i]]

    # -- the cluster's own load signal ----------------------------------------
    def metrics_target(self, affinity: str = "") -> str | None:
        """The metrics URL that speaks for the replica this workspace escalates to."""
        if self._metrics_url == "off":
            return None
        if self._metrics_url:
            return self._metrics_url
        root = server_root(self._order(affinity)[0])
        return None if root is None else f"{root}/metrics"

    def cluster_load(self, now: float, affinity: str = "") -> ClusterLoad | None:
        """The latest reading of the cluster's load for this workspace's replica, at once
        (never waits): a reading older than METRICS_EVERY_S starts a background refresh
        with a short timeout, which the next call sees. `now` is the caller's clock.
        The poll carries no code and no key (vLLM's /metrics needs none)."""
        url = self.metrics_target(affinity)
        if url is None:
            return None
        last = self._loads.get(url)
        if (last is None or now - last.at >= METRICS_EVERY_S) and url not in self._polls:
            task = asyncio.get_running_loop().create_task(self._poll(url, now))
            self._polls[url] = task
            task.add_done_callback(lambda _t: self._polls.pop(url, None))
        return last

    async def _poll(self, url: str, started: float) -> None:
        """Read `url` once; the reading is dated `started` (the caller's clock)."""
        try:
            resp = await self._client.get(url, timeout=METRICS_TIMEOUT_S)
            text = resp.text if resp.is_success else ""
            self._loads[url] = parse_metrics(text, url, started)
        except (httpx.HTTPError, MetricsError) as exc:
            # No reading: the signal just stays silent (the answers' own signal still
            # works); stale readings are dropped so nothing acts on an old queue.
            self._loads.pop(url, None)
            log.debug("openai: no load reading from %s: %s", url, _describe(exc))

    def payload(self, request: CompletionRequest) -> dict[str, Any]:
        """The JSON body for `request` (public so tests and `doctor` can show it)."""
        stops: list[str] = []
        template = None if request.raw else self._template
        if request.raw:  # a prompt of its own, sent as it is
            prompt = request.prefix
        elif template is not None:
            prompt = template.render(
                request.prefix, request.suffix, **templates.context_args(request)
            )
            stops.extend(template.stop)
        else:
            prompt = templates.with_context(request)
        stops.extend(s for s in request.stop if s and s not in stops)
        body: dict[str, Any] = {
            "model": request.model or self._model,
            "prompt": prompt,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "logprobs": 1,
            "stop": stops,
            "stream": self._stream,
        }
        if request.priority is not None:
            body["priority"] = request.priority
        if request.single_line:
            # The server ends the line itself, so the stream ends cleanly and the
            # connection is reused; hanging up after the first line aborts the request
            # and costs a new connection (a TLS handshake) per escalation. vLLM checks
            # stop strings only after `min_tokens`: a first token "\n" still starts
            # the line below, as `line_end` allows (servers without the field ignore it).
            if LINE_STOP not in stops:
                stops.append(LINE_STOP)
            body["min_tokens"] = 1
        if template is not None:
            # The template's stops are special tokens: vLLM only sees them (and
            # stops on them) when it does not decode them away.
            body["skip_special_tokens"] = False
        return body

    def stream(self, request: CompletionRequest) -> AsyncGenerator[Chunk, None]:
        return self._generate(request, Sent())

    async def complete(self, request: CompletionRequest) -> Completion:
        if request.draft and self._verifies is not False and self._setup_error is None:
            return await _verify.complete(self, request)
        return await self.plain(request)

    async def plain(self, request: CompletionRequest) -> Completion:
        """An escalation that generates every token (no draft verified)."""
        model = request.model or self._model
        return await complete_streamed(self._generate, request, backend=BACKEND, model=model)

    # -- verified escalation (clients/_verify.py) ----------------------------
    async def verify_supported(self, request: CompletionRequest) -> bool:
        """Does the server score prompts? Asked once: vLLM (which has `echo` with
        `logprobs`) answers POST /tokenize with `count` and `max_model_len`; a server
        without it (llama.cpp's answers otherwise, the fake not at all) is not asked to
        verify. No code of the user goes into this probe."""
        if self._verifies is not None:
            return self._verifies
        url = self._order(request.affinity)[0]
        left = request.remaining()
        limit = min(self._timeout, 3.0, left if left is not None else 3.0)
        data = json.dumps({"model": self._model, "prompt": "def"}).encode()
        headers = {**self._headers(), "Content-Type": "application/json"}
        req = self._client.build_request(
            "POST", f"{_root(url)}/tokenize", content=data, headers=headers
        )
        try:
            # The one send path: only a request whose plan may leave asks anything.
            async with asyncio.timeout(max(0.05, limit)):
                resp = await self._send(req, data, request.plan)
                try:
                    answer = json.loads(await resp.aread()) if resp.is_success else None
                finally:
                    await resp.aclose()
        except (httpx.HTTPError, ValueError, TimeoutError):
            return False  # not known: a plain escalation now, asked again next time
        if answer is None and resp.status_code not in (404, 405):
            return False  # busy, or a key problem: the same, and asked again next time
        self._verifies = isinstance(answer, dict) and "max_model_len" in answer
        return self._verifies

    def unverifiable(self) -> None:
        self._verifies = False

    async def score(
        self, request: CompletionRequest, body: dict[str, Any], sent: Sent
    ) -> dict[str, Any] | None:
        """One scoring request (whole JSON answer) to the server that answered last,
        through the egress check with the request's plan; None if it failed in a way a
        plain escalation handles (that one fails over and words the error)."""
        url = self._order(request.affinity)[0]
        if self._backoff.held(url) is not None:
            return None
        data = json.dumps(body).encode()
        try:
            resp = await self._open(url, data, request, sent)
        except _Retry:
            return None
        try:

            async def read() -> bytes:
                return await resp.aread()

            raw = await within(
                request.deadline, read, BACKEND, before="the answer", late="no answer in time"
            )
        except httpx.HTTPError:
            return None
        finally:
            await resp.aclose()
        try:
            obj = json.loads(raw)
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None

    def continuation(
        self, request: CompletionRequest, sent: Sent, body: dict[str, Any]
    ) -> AsyncGenerator[Chunk, None]:
        return self._generate(request, sent, body)

    async def _generate(
        self, request: CompletionRequest, sent: Sent, body: dict[str, Any] | None = None
    ) -> AsyncGenerator[Chunk, None]:
        if self._setup_error is not None:
            raise self._setup_error  # nothing is sent while the connection cannot work
        body = self.payload(request) if body is None else body
        data = json.dumps(body).encode()
        failures: list[str] = []
        held: list[BackendError] = []
        cause: BaseException | None = None
        order = self._order(request.affinity)
        for i, url in enumerate(order):
            if (err := self._backoff.held(url)) is not None:
                held.append(err)
                failures.append(err.message)  # it names the URL already
                continue
            try:
                resp = await self._open(url, data, request, sent)
            except _Retry as exc:
                self._failed(url, exc, order[i + 1 :])
                failures.append(f"{url}: {exc.reason}")
                cause = exc.__cause__ or exc
                continue
            self._backoff.succeeded(url)
            yielded = False
            try:
                async with aclosing(self._pieces(resp, url)) as pieces:
                    asm = _Assembler(_client_stops(body, request), request.max_tokens)
                    finish: str | None = None
                    while True:
                        try:
                            piece = await next_before(pieces, request.deadline, BACKEND)
                        except StopAsyncIteration:
                            break
                        chunk = asm.feed(piece)
                        if asm.stopped:
                            # Cut on our side: hang up so the server stops generating.
                            self._preferred = url
                            if chunk is not None:
                                yield chunk
                            return
                        if chunk is not None:
                            yielded = True
                            yield chunk
                        if piece.finish_reason is not None:
                            # A whole answer longer than max_tokens was cut by us.
                            finish = "length" if asm.cap.cut else piece.finish_reason
                            await self._drain(pieces, request)
                            break
                        if asm.capped:
                            # max_tokens reached and the server goes on (it ignores
                            # max_tokens): hang up, which stops the generation.
                            finish = "length"
                            break
                    self._preferred = url
                    yield asm.finish(finish)
                    return
            except _Retry as exc:
                if yielded:
                    raise BackendUnavailable(
                        f"{url} failed in the middle of a completion: {exc.reason}",
                        backend=BACKEND,
                        hint="retry; if it keeps happening, check the server's log",
                    ) from exc
                if order[i + 1 :]:
                    log.warning("openai: %s failed (%s); trying the next URL", url, exc.reason)
                failures.append(f"{url}: {exc.reason}")
                cause = exc.__cause__ or exc
            finally:
                await resp.aclose()
        if len(held) == len(order):
            # Every server is backing off: fail at once with the tier's own error.
            kinds = {type(e) for e in held}
            kind = kinds.pop() if len(kinds) == 1 else BackendUnavailable
            if len(held) == 1:
                raise held[0]
            raise kind(
                "no OpenAI-compatible server asked: " + "; ".join(failures),
                backend=BACKEND,
                hint=held[0].hint,
                sent_nothing=True,
            )
        err = BackendUnavailable(
            "no OpenAI-compatible server answered: " + "; ".join(failures),
            backend=BACKEND,
            hint="check that the vLLM server(s) are up and the remote URL(s) are right",
            sent_nothing=sent.n == 0,
        )
        if isinstance(cause, _Retry):  # the last server refused: say how, for backpressure
            err.status, err.retry_after_s = cause.status, cause.retry_after
        raise err from cause

    def _failed(self, url: str, exc: _Retry, rest: Sequence[str]) -> None:
        """Back off from `url` when the failure will repeat; say so once, not per request."""
        kind = "connect" if exc.connect else kind_of_status(exc.status or 0)
        started = False
        if kind is not None:
            hint = (
                "the server is down or unreachable; requests resume by themselves"
                if kind == "connect"
                else "the server asked us to wait (rate limit or overload); requests resume"
                " by themselves"
            )
            err = BackendUnavailable(f"{url}: {exc.reason}", backend=BACKEND, hint=hint)
            started = self._backoff.failed(url, err, kind, seconds=exc.retry_after)
        if rest and not started:
            log.warning("openai: %s failed (%s); trying the next URL", url, exc.reason)

    async def _drain(self, pieces: AsyncIterator[_Piece], request: CompletionRequest) -> None:
        left = request.remaining()
        wait = DRAIN_S if left is None else min(DRAIN_S, left)
        # The answer is complete: whatever goes wrong while reading the trailer is moot.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(wait):
                async for _ in pieces:
                    pass

    async def _open(
        self, url: str, data: bytes, request: CompletionRequest, sent: Sent
    ) -> httpx.Response:
        """POST the request; a 2xx response (unread), or _Retry / a BackendError."""
        headers = {**self._headers(), **self._session(request), "Content-Type": "application/json"}
        req = self._client.build_request(
            "POST", f"{url}/completions", content=data, headers=headers
        )
        asked = False  # the deadline had not passed: the request went out (or began to)
        got: list[httpx.Response] = []

        async def exchange() -> bytes | None:
            """Send; None for a 2xx answer, else its (read) body."""
            nonlocal asked
            asked = True
            try:
                got.append(await self._send(req, data, request.plan))
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                raise _Retry(f"cannot connect ({_describe(exc)})", connect=True) from exc
            sent.n += len(data)
            return None if got[0].is_success else await got[0].aread()

        try:
            raw = await within(
                request.deadline,
                exchange,
                BACKEND,
                before="the request was sent",
                late=f"{url} did not answer before the deadline",
            )
        except BackendTimeout:
            if asked and not got:
                sent.n += len(data)  # most likely on the wire already
            raise
        except httpx.TimeoutException as exc:
            if not got:
                sent.n += len(data)
            raise BackendTimeout(
                f"{url} did not answer within {self._timeout:g}s",
                backend=BACKEND,
                hint="the server is overloaded or the timeout is too short",
            ) from exc
        except httpx.TransportError as exc:
            if not got:
                sent.n += len(data)
            closed = url.startswith("https:") and describe_closed(exc, client_cert=self._cert)
            raise _Retry(f"connection failed ({closed or _describe(exc)})") from exc
        finally:
            if got and not got[0].is_success:
                await got[0].aclose()
        resp = got[0]
        if raw is None:
            return resp
        status = resp.status_code
        message = _error_message(raw)
        if status >= 500 or status in (408, 429):
            wait = retry_after(resp.headers.get("retry-after"))
            raise _Retry(f"HTTP {status}: {message}", status=status, retry_after=wait)
        err = await self._http_error(url, status, message, request.model or self._model)
        if isinstance(err, BadCredentials):
            # The same key will be refused again: stop asking until the settings change.
            self._backoff.failed(url, err, "auth")
        raise err

    async def _http_error(self, url: str, status: int, message: str, model: str) -> BackendError:
        """A 4xx answer (5xx, 408 and 429 fail over instead) as the shared mapping says."""
        served = await self._list_models(url) if failure_of(status, message) == "model" else []

        def words(failure: Failure) -> tuple[str, str]:
            if failure == "auth":
                if self._key_env is None:
                    hint = "the server wants an API key: configure the environment variable "
                    hint += "holding it"
                elif self._key is None:
                    hint = f"set {self._key_env} to the server's API key"
                else:
                    hint = f"check the key in {self._key_env}: the server refused it"
                return f"{url} refused the request: bad or missing API key (HTTP {status})", hint
            if failure == "model":
                if served:
                    hint = f"the server serves: {', '.join(served)}; set the remote model to "
                    hint += "one of them"
                else:
                    hint = f"check the remote model name (GET {url}/models lists what the "
                    hint += "server has)"
                return f"{url} has no model {model!r}: {message}", hint
            if failure in ("wrong_url", "unexpected"):
                return (
                    f"{url}/completions answered HTTP {status} ({message})"
                    if failure == "unexpected"
                    else f"{url}/completions does not exist (HTTP 404: {message})",
                    "the remote URL must be the server's base URL ending in /v1",
                )
            if (ctx := _CONTEXT_LIMIT.search(message)) is not None:
                # Not retried with a shorter prompt: the retry would double the latency
                # of an escalation that is late already, and the fix is one setting.
                return (
                    f"the prompt is longer than {self._model!r}'s context of {ctx[1]} "
                    f"tokens at {url} (HTTP {status}): {message}",
                    "lower the remote tier's max_prompt_chars (about 3 characters a "
                    "token), or serve the model with a longer --max-model-len",
                )
            return (
                f"{url} rejected the request (HTTP {status}): {message}",
                "a bad setting (e.g. max_tokens beyond the model's context) or a bug: "
                "see the server's message",
            )

        return status_error(status, message, words, backend=BACKEND, wrong_url=RequestRejected)

    # -- answers -----------------------------------------------------------
    async def _pieces(self, resp: httpx.Response, url: str) -> AsyncGenerator[_Piece, None]:
        """Parse an SSE stream (or a whole JSON answer) into pieces; raise on errors."""
        try:
            if "text/event-stream" in resp.headers.get("content-type", ""):
                done = False
                async for event in _sse_events(resp.aiter_lines()):
                    # Read on to the end of the body after [DONE]: a fully read
                    # response leaves its (keep-alive) connection reusable.
                    done = done or event == "[DONE]"
                    if not done:
                        yield self._piece(_loads(event, url), url)
                if done:
                    return
                raise ProtocolError(
                    f"{url} ended the stream without `data: [DONE]`",
                    backend=BACKEND,
                    hint="a proxy may be cutting the connection; retry",
                )
            # A whole answer (stream=False, or a server that ignores `stream`).
            raw = await resp.aread()
            yield self._piece(_loads(raw.decode("utf-8", "replace"), url), url)
        except httpx.TimeoutException as exc:
            raise BackendTimeout(
                f"{url} sent nothing for {self._timeout:g}s",
                backend=BACKEND,
                hint="the server is overloaded or the timeout is too short",
            ) from exc
        except httpx.TransportError as exc:
            raise _Retry(f"the connection broke ({_describe(exc)})") from exc

    def _piece(self, obj: Any, url: str) -> _Piece:
        if not isinstance(obj, dict):
            raise _shape(url, "an answer that is not a JSON object")
        err = _error_in(obj)
        if err is not None:
            raise _Retry(f"server error: {excerpt(err, 500)}")
        choices = obj.get("choices")
        if not isinstance(choices, list):
            raise _shape(url, "an answer without `choices`")
        if not choices:  # e.g. a usage-only chunk
            return _Piece("", (), None)
        choice = choices[0]
        if not isinstance(choice, dict):
            raise _shape(url, "a choice that is not an object")
        text = choice.get("text", "")
        finish = choice.get("finish_reason")
        if not isinstance(text, str) or not (finish is None or isinstance(finish, str)):
            raise _shape(url, "a choice whose `text` or `finish_reason` is not a string")
        return _Piece(text, _tokens(choice.get("logprobs")), finish)

    # -- models ------------------------------------------------------------
    async def _get(self, url: str, *, limit_s: float | None = None) -> httpx.Response:
        t = httpx.Timeout(limit_s) if limit_s is not None else httpx.USE_CLIENT_DEFAULT
        return await self._client.get(url, headers=self._headers(), timeout=t)

    def _remember_models(self, data: Any) -> list[str]:
        """Model ids from a /v1/models answer; also caches our model's context length."""
        entries = data.get("data") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            return []
        ids: list[str] = []
        for entry in entries:
            if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                ids.append(entry["id"])
                if entry["id"] == self._model:
                    n = entry.get("max_model_len")
                    self._ctx = n if isinstance(n, int) and not isinstance(n, bool) else None
                    self._ctx_known = True
        return ids

    async def _list_models(self, url: str) -> list[str]:
        """The ids `url` serves; [] if that cannot be found out quickly."""
        try:
            resp = await self._get(f"{url}/models", limit_s=min(self._timeout, 3.0))
            return self._remember_models(resp.json()) if resp.is_success else []
        except (httpx.HTTPError, ValueError):
            return []

    async def context_length(self) -> int | None:
        """Our model's `max_model_len` from /v1/models (cached); None if unknown."""
        if self._ctx_known or self._setup_error is not None:
            return self._ctx
        for url in self._order():
            try:
                resp = await self._get(f"{url}/models")
                if not resp.is_success:
                    continue
                self._remember_models(resp.json())
            except (httpx.HTTPError, ValueError):
                continue
            self._ctx_known = True  # the server answered: absent means it does not say
            return self._ctx
        return None

    # -- doctor ------------------------------------------------------------
    async def discover(self) -> ProbeReport:
        """Which server answers, its version, whether it serves our model and takes our
        key, the prompt mode; `server.commands.doctor` adds the tiny generation."""
        problems: list[Problem] = []
        mode: PromptMode = "fim-template" if self._template is not None else "prefix-only"
        if self._template is None and self._setting.mode != "off":
            names = ", ".join(sorted(templates.TEMPLATES))
            problems.append(
                Problem(
                    "warning",
                    f"no FIM template is known for model {self._model!r}: the remote model "
                    "will only see the text before the cursor. Routing is unchanged (the "
                    "local answer decides what escalates), but every escalated completion "
                    "is written blind to the code after the cursor and shown without a "
                    "syntax check: inside a line or block it may repeat or clash with "
                    "that code, so escalations may be worse than the local answer they "
                    "replace",
                    fix=f"set the remote template explicitly (one of: {names}), or use a "
                    "FIM-trained remote model",
                )
            )
        base = ProbeReport(
            backend=BACKEND,
            target=", ".join(self._urls),
            model=self._model,
            reachable=False,
            prompt_mode=mode,
            template=self._template.name if self._template else None,
        )
        if self._setup_error is not None:
            problems.insert(0, Problem("error", self._setup_error.message, self._setup_error.hint))
            return attrs.evolve(base, problems=tuple(problems))

        # 1. Which servers answer at all (/version needs no key; a 404 still answers).
        target: str | None = None
        version: str | None = None
        down: list[str] = []
        for url in self._order():
            try:
                resp = await self._client.get(f"{_root(url)}/version")
            except httpx.HTTPError as exc:
                down.append(f"{url} ({_describe(exc)})")
                continue
            if target is None:
                target = url
                with contextlib.suppress(ValueError, AttributeError):
                    v = resp.json().get("version") if resp.is_success else None
                    version = v if isinstance(v, str) else None
        if target is None:
            problems.insert(
                0,
                Problem(
                    "error",
                    "cannot reach the OpenAI-compatible server: " + "; ".join(down),
                    fix="start the vLLM server, or fix the remote URL(s) (base URL ending in /v1)",
                ),
            )
            return attrs.evolve(base, problems=tuple(problems))
        if down:
            problems.append(
                Problem(
                    "warning",
                    "failover server(s) unreachable: " + "; ".join(down),
                    fix="start them or remove them from the remote URLs",
                )
            )
        base = attrs.evolve(base, target=target, reachable=True, version=version)

        # 2. Does it serve our model (and accept our key)?
        try:
            resp = await self._get(f"{target}/models")
        except httpx.HTTPError as exc:
            problems.append(
                Problem("error", f"{target}/models failed: {_describe(exc)}", "check the server")
            )
            return attrs.evolve(base, problems=tuple(problems))
        if resp.status_code in (401, 403):
            problems.append(self._key_problem(target))
            return attrs.evolve(base, problems=tuple(problems))
        if not resp.is_success:
            problems.append(
                Problem(
                    "warning",
                    f"{target}/models answered HTTP {resp.status_code}: the model list is unknown",
                    fix="make sure the URL is the server's base URL ending in /v1",
                )
            )
            served: list[str] | None = None
        else:
            try:
                served = self._remember_models(resp.json())
            except ValueError:
                served = []
        present = None if served is None else self._model in served
        base = attrs.evolve(base, model_present=present)
        if present is False:
            problems.append(
                Problem(
                    "error",
                    f"{target} does not serve model {self._model!r}"
                    + (f"; it serves: {', '.join(served or [])}" if served else ""),
                    fix="set the remote model to one the server lists",
                )
            )
        return attrs.evolve(base, problems=tuple(problems))

    def _key_problem(self, url: str) -> Problem:
        if self._key_env is None:
            return Problem(
                "error",
                f"{url} wants an API key, but none is configured",
                fix="configure the environment variable that holds the remote API key",
            )
        if self._key is None:
            return Problem(
                "error",
                f"{url} wants an API key, but {self._key_env} is not set",
                fix=f"export {self._key_env}=<the server's API key>",
            )
        return Problem(
            "error",
            f"{url} refused the API key in {self._key_env}",
            fix=f"put the key the server was started with (--api-key) in {self._key_env}",
        )


def _client_stops(body: dict[str, Any], request: CompletionRequest) -> list[str]:
    """The stop strings we cut on again on our side: the line stop is left to
    `collect`'s `line_end`, which lets a line start after a leading newline."""
    stops: list[str] = body["stop"]
    return [s for s in stops if s != LINE_STOP] if request.single_line else stops


# -- parsing helpers --------------------------------------------------------
async def _sse_events(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The data of each server-sent event (data lines joined, per the SSE spec)."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
        elif field not in ("", "event", "id", "retry"):
            raise ProtocolError(
                f"not a server-sent event stream (line {excerpt(line, 80)!r})",
                backend=BACKEND,
                hint="the URL may point at something other than an OpenAI-compatible server",
            )
    if data:
        yield "\n".join(data)


def _loads(text: str, url: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ProtocolError(
            f"{url} sent something that is not JSON: {excerpt(text, 80)!r}",
            backend=BACKEND,
            hint="the URL may point at something other than an OpenAI-compatible server",
        ) from exc


def _shape(url: str, what: str) -> ProtocolError:
    return ProtocolError(
        f"{url} sent {what}",
        backend=BACKEND,
        hint="the server does not speak the OpenAI completions protocol as expected",
    )


def _tokens(lp: Any) -> tuple[TokenLogprob, ...] | None:
    """Per-token log-probs from vLLM/llama.cpp `{tokens, token_logprobs}` or the
    chat-style `{content: [{token, logprob}]}` (Ollama's /v1); None if absent."""
    pairs: list[tuple[Any, Any]]
    if not isinstance(lp, dict):
        return None
    if isinstance(lp.get("tokens"), list) and isinstance(lp.get("token_logprobs"), list):
        if len(lp["tokens"]) != len(lp["token_logprobs"]):
            return None
        pairs = list(zip(lp["tokens"], lp["token_logprobs"], strict=True))
    elif isinstance(lp.get("content"), list):
        pairs = [(c.get("token"), c.get("logprob")) for c in lp["content"] if isinstance(c, dict)]
    else:
        return None
    out: list[TokenLogprob] = []
    for tok, value in pairs:
        if not isinstance(tok, str) or isinstance(value, bool):
            return None
        if not isinstance(value, int | float) or math.isnan(value):
            return None
        out.append(TokenLogprob(tok, max(MIN_LOGPROB, min(0.0, float(value)))))
    return tuple(out)


def _error_in(obj: dict[str, Any]) -> str | None:
    """The message of an error object in either vLLM shape, or None."""
    err = obj.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err)
    if isinstance(err, str):
        return err
    if obj.get("object") == "error":
        return str(obj.get("message") or "unknown error")
    return None


def _error_message(raw: bytes) -> str:
    """A short human message from an error body, whatever its shape."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        obj = json.loads(text)
    except ValueError:
        return excerpt(text, 200) or "(empty body)"
    if isinstance(obj, dict):
        msg = _error_in(obj)
        if msg is None and "detail" in obj:  # FastAPI's default error shape
            msg = str(obj["detail"])
        if msg is None and "message" in obj:
            msg = str(obj["message"])
        if msg is not None:
            return excerpt(msg, 500)
    return excerpt(text, 200)


def _describe(exc: BaseException) -> str:
    """A short reason; httpx hides "connection refused" behind its own wording, and a
    TLS failure is said with the setting that fixes it."""
    if (tls := describe_tls(exc)) is not None:
        return tls
    seen: BaseException | None = exc
    for _ in range(8):  # the chain is short; the bound guards against cycles
        if seen is None:
            break
        if isinstance(seen, ConnectionRefusedError) or "refused" in str(seen).lower():
            return "connection refused"
        seen = seen.__cause__ or seen.__context__
    return str(exc) or type(exc).__name__


def _root(url: str) -> str:
    """The server root (where /version and /health live) of a .../v1 base URL."""
    return url[: -len("/v1")] if url.endswith("/v1") else url


__all__ = ["DEFAULT_KEY_ENV", "OpenAIBackend"]
