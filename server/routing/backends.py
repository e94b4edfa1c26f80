"""Build the two tiers' backends from settings (the only place that knows both)."""

from __future__ import annotations

import importlib.util
import logging

import attrs
import httpx

from synconfroute.clients.types import Backend

from ..settings.config import LocalSettings, RemoteSettings, Settings
from .gated import GatedRemote

log = logging.getLogger(__name__)


@attrs.frozen
class LocalChoice:
    """Which local backend `auto` picked, and why (shown by doctor)."""

    kind: str
    reason: str


def embedded_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


async def ollama_answers(url: str, wait_s: float = 0.3) -> bool:
    """True when an Ollama server answers /api/version at `url` right now."""
    try:
        async with httpx.AsyncClient(timeout=wait_s, trust_env=False) as client:
            r = await client.get(url.rstrip("/") + "/api/version")
        return r.status_code == 200 and "version" in r.json()
    except (httpx.HTTPError, ValueError):
        return False


async def choose_local(local: LocalSettings) -> LocalChoice:
    if local.backend != "auto":
        return LocalChoice(local.backend, "set in local.backend")
    if await ollama_answers(local.url):
        return LocalChoice("ollama", f"auto: Ollama answers at {local.url}")
    return LocalChoice("embedded", f"auto: no Ollama at {local.url}, using the embedded llama.cpp")


def make_local(local: LocalSettings, kind: str) -> Backend:
    """The local backend of `kind` ("ollama" | "openai" | "embedded")."""
    template = local.template or None
    if kind == "ollama":
        from synconfroute.clients.ollama import OllamaBackend

        return OllamaBackend(
            local.url,
            local.model,
            template=template,
            num_ctx=local.num_ctx,
            keep_alive=local.keep_alive,
            timeout=local.timeout,
        )
    if kind == "openai":
        from synconfroute.clients.openai import OpenAIBackend

        return OpenAIBackend(
            local.url, local.model, api_key_env=None, template=template, timeout=local.timeout
        )
    from synconfroute.clients.embedded import EmbeddedBackend

    return EmbeddedBackend(local.model_path or None, template=local.template or "auto")


@attrs.frozen
class Tiers:
    """Both tiers' backends, built from one settings value, and how the local one was
    chosen. Whoever builds them closes them (`aclose`)."""

    local: Backend
    remote: Backend | None  # None: no remote tier configured (or not asked for)
    choice: LocalChoice

    async def aclose(self) -> None:
        await self.local.aclose()
        if self.remote is not None:
            await self.remote.aclose()


async def build_tiers(settings: Settings, *, remote: bool = True) -> Tiers:
    """The local tier (the one `auto` picks, or the one set) and, if `remote`, the remote
    tier as configured: the one place the session, `complete` and `eval` build them."""
    choice = await choose_local(settings.local)
    return Tiers(
        local=make_local(settings.local, choice.kind),
        remote=make_remote(settings.remote) if remote else None,
        choice=choice,
    )


async def warm(backend: Backend) -> None:
    """Start and load an in-process tier ahead of the first request, so that request's
    deadline is spent generating, not starting llama.cpp. A failure is left for the
    request to report."""
    from synconfroute.clients.embedded import EmbeddedBackend
    from synconfroute.clients.errors import BackendError
    from synconfroute.clients.ollama import OllamaBackend

    if isinstance(backend, OllamaBackend):
        # Its prompt rate: single lines close the stream before Ollama's final line,
        # which alone reports it, so a typing session would only learn it once its
        # prompts fit (`FirstTokenEstimate`); until then the character cap rules. One
        # short generation also loads the model. A failure leaves the rates unknown.
        await backend.calibrate()
    elif isinstance(backend, EmbeddedBackend):
        try:
            await backend.load()
            # The speed the first request's budget is sized from (`time_budget`).
            await backend.calibrate()
        except BackendError as exc:
            log.info("could not load the embedded model ahead of time: %s", exc)


def speculates(backend: Backend | None) -> bool:
    """Whether a request to `backend` may start before typing stops (editor.speculative):
    the in-process worker drops a cancelled generation at the next token. Ollama queues
    requests, and a cancelled one still holds the queue (measured against the fake: 15 of
    33 pauses got no answer in time when it speculated)."""
    from synconfroute.clients.embedded import EmbeddedBackend

    return isinstance(backend, EmbeddedBackend)


def make_remote(remote: RemoteSettings) -> GatedRemote | None:
    """The remote backend behind the egress gate, or None when no remote tier is
    configured. Until a pipeline holds it (with the live settings), only text from no
    workspace file (benchmarks, doctor) may be sent."""
    if not remote.configured:
        return None
    from synconfroute.clients.connection import Connection
    from synconfroute.clients.openai import OpenAIBackend

    backend = OpenAIBackend(
        remote.all_urls,
        remote.model,
        api_key_env=remote.api_key_env or None,
        template=remote.template or None,
        timeout=remote.timeout,
        connection=Connection(
            ca_file=remote.ca_file,
            client_cert=remote.client_cert,
            client_key=remote.client_key,
            proxy=remote.proxy,
            headers=dict(remote.headers),
        ),
        session_header=remote.session_header or None,
        metrics_url=remote.metrics_url,
    )
    return GatedRemote(backend)
