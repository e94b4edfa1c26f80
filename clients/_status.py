"""HTTP status -> BackendError: one mapping for both HTTP backends, in their own words.

The status (and, for two cases, the server's message) decides the kind of failure and
with it the exception class; the backend only says, per kind, what went wrong and what
to do about it (`Words`). Which statuses start a backoff is `_backoff.kind_of_status`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from . import errors
from .errors import BackendError, ProtocolError

Failure = Literal[
    "auth",  # 401/403: the key (or a proxy) refuses us
    "model",  # 404 naming the model: the server does not have it
    "wrong_url",  # any other 404: the URL is not the API we speak
    "fim",  # 400 "does not support insert" (Ollama): no native fill-in-the-middle
    "cancelled",  # 499 (Ollama): aborted on the server
    "rate",  # 429: rate limit
    "busy",  # 503: overloaded, queue full
    "failed",  # any other 5xx
    "rejected",  # any other 4xx: a bad request (a bug or a bad setting)
    "unexpected",  # anything else (1xx, 3xx)
]

# A backend's (message, hint) for a kind of failure; the server's own message is in it.
Words = Callable[[Failure], tuple[str, str]]

_ERRORS: dict[Failure, type[BackendError]] = {
    "auth": errors.BadCredentials,
    "model": errors.ModelNotFound,
    "wrong_url": errors.ProtocolError,
    "fim": errors.FimUnsupported,
    "cancelled": errors.RequestCancelled,
    "rate": errors.BackendUnavailable,
    "busy": errors.BackendUnavailable,
    "failed": errors.BackendUnavailable,
    "rejected": errors.RequestRejected,
    "unexpected": errors.ProtocolError,
}


def failure_of(status: int, message: str) -> Failure:
    """What a non-2xx answer means; `message` is the server's error text."""
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "model" if "model" in message.lower() else "wrong_url"
    if status == 400 and "does not support insert" in message:
        return "fim"
    if status == 499:
        return "cancelled"
    if status == 429:
        return "rate"
    if status == 503:
        return "busy"
    if status >= 500:
        return "failed"
    if 400 <= status < 500:
        return "rejected"
    return "unexpected"


def status_error(
    status: int,
    message: str,
    words: Words,
    *,
    backend: str,
    wrong_url: type[BackendError] = ProtocolError,
) -> BackendError:
    """The exception for a non-2xx answer, worded by the backend's `words`.

    `wrong_url`: the class of a 404 that does not name the model. Ollama's ProtocolError
    says the server is not Ollama; the OpenAI backend's RequestRejected says its base
    URL (a setting) lacks /v1.
    """
    failure = failure_of(status, message)
    kind = wrong_url if failure == "wrong_url" else _ERRORS[failure]
    text, hint = words(failure)
    return kind(text, backend=backend, hint=hint)


__all__ = ["Failure", "Words", "failure_of", "status_error"]
