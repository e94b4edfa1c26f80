"""The exception tree every backend raises.

Callers catch `BackendError` (or one of its kinds) and show `str(exc)`, which is
written for the user: what went wrong and what to do about it. Backends raise
these `from` the underlying cause (httpx, llama.cpp), so logs keep the chain.
"""

from __future__ import annotations

import json
import re
import threading

from .urls import mask_urls_in

# Every API key a backend was given. A server or proxy may echo our request
# headers back in an error page; every error text we build passes `scrub`, so
# the key never reaches a hover card, an LSP message, a log or `doctor`.
_secrets: set[str] = set()
_secrets_lock = threading.Lock()
# Header values that are credentials whatever they are (a proxy's own, say).
_AUTH_HEADER = re.compile(
    r"""(?i)\b((?:proxy-)?authorization|api-key)(["']?\s*[:=]\s*["']?)[^\r\n"'<>,;]+"""
)
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}")
REDACTED = "***"


def register_secret(value: str | None) -> None:
    """Remember a credential so that `scrub` removes it from every error text."""
    if value:
        with _secrets_lock:
            _secrets.add(value)


def scrub(text: str) -> str:
    """`text` without any registered secret or Authorization header value, and with
    the userinfo and query secrets of every URL in it masked."""
    with _secrets_lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        # Also the JSON-escaped spelling, as a JSON echo of our headers would carry it.
        for form in {secret, json.dumps(secret)[1:-1]}:
            text = text.replace(form, REDACTED)
    text = mask_urls_in(text)
    text = _AUTH_HEADER.sub(rf"\1\2{REDACTED}", text)
    return _BEARER.sub(rf"\1 {REDACTED}", text)


def excerpt(text: str, limit: int) -> str:
    """The start of a server's text for a message: scrubbed BEFORE it is cut, so that
    a cut through the middle of a key cannot leave its first half behind."""
    return scrub(text)[:limit]


class BackendError(Exception):
    """Base of every error a model backend raises.

    `backend` names the tier ("ollama", "openai", "embedded"); `hint` is the fix
    we suggest, already part of the message. Both are scrubbed of credentials.
    `sent_nothing` is True when the request never left this process (e.g. the
    tier is backing off), so callers need not count it as sent.
    """

    def __init__(
        self, message: str, *, backend: str = "", hint: str = "", sent_nothing: bool = False
    ) -> None:
        message, hint = scrub(message), scrub(hint)
        full = f"{message} ({hint})" if hint else message
        super().__init__(full)
        self.message = message
        self.backend = backend
        self.hint = hint
        # Request bytes that left the process before the failure (a remote backend's
        # `complete()` fills it in), so the ledger counts only what was really sent.
        self.bytes_sent = 0
        self.sent_nothing = sent_nothing
        # The server's HTTP status and Retry-After (seconds) when it refused (429/503):
        # what the router's backpressure watches.
        self.status: int | None = None
        self.retry_after_s: float | None = None


class BackendUnavailable(BackendError):
    """The server cannot be reached, is overloaded (503) or failed (5xx)."""


class BackendTimeout(BackendError):
    """No answer (or no next token) within the deadline."""


class ModelNotFound(BackendError):
    """The server runs, but does not have the model we asked for."""


class BadCredentials(BackendError):
    """The server refused our API key (401/403)."""


class FimUnsupported(BackendError):
    """The model cannot fill in the middle the way we asked (Ollama: no `insert`)."""


class RequestRejected(BackendError):
    """The server refused the request as invalid (400/422): a bug or a bad setting."""


class RequestCancelled(BackendError):
    """The server reports the request as cancelled (Ollama 499)."""


class ProtocolError(BackendError):
    """The server answered something we cannot understand (bad JSON, wrong shape)."""


class EgressRefused(BackendError):
    """The egress check refused to send the request: a source of its prompt is private
    (or cannot be resolved) under the privacy settings of this moment. Nothing was sent."""

    def __init__(self, message: str, *, backend: str = "", reason: str = "") -> None:
        super().__init__(message, backend=backend, sent_nothing=True)
        self.reason = reason


__all__ = [
    "REDACTED",
    "BackendError",
    "BackendTimeout",
    "BackendUnavailable",
    "BadCredentials",
    "EgressRefused",
    "FimUnsupported",
    "ModelNotFound",
    "ProtocolError",
    "RequestCancelled",
    "RequestRejected",
    "excerpt",
    "register_secret",
    "scrub",
]
