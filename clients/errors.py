"""The exception tree every backend raises.

Callers catch `BackendError` (or one of its kinds) and show `str(exc)`, which is
written for the user: what went wrong and what to do about it. Backends raise
these `from` the underlying cause (httpx, llama.cpp), so logs keep the chain.
"""

from __future__ import annotations


class BackendError(Exception):
    """Base of every error a model backend raises.

    `backend` names the tier ("ollama", "openai", "embedded"); `hint` is the fix
    we suggest, already part of the message.
    """

    def __init__(self, message: str, *, backend: str = "", hint: str = "") -> None:
        full = f"{message} ({hint})" if hint else message
        super().__init__(full)
        self.message = message
        self.backend = backend
        self.hint = hint
        # Request bytes that left the process before the failure (a remote backend's
        # `complete()` fills it in), so the ledger counts only what was really sent.
        self.bytes_sent = 0


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


__all__ = [
    "BackendError",
    "BackendTimeout",
    "BackendUnavailable",
    "BadCredentials",
    "FimUnsupported",
    "ModelNotFound",
    "ProtocolError",
    "RequestCancelled",
    "RequestRejected",
]
