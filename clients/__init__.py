"""Model backends: stream fill-in-the-middle completions with per-token log-probs."""

from ._stream import trim_tokens
from .errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    BadCredentials,
    FimUnsupported,
    ModelNotFound,
    ProtocolError,
    RequestCancelled,
    RequestRejected,
)
from .types import (
    Backend,
    Chunk,
    Completion,
    CompletionRequest,
    ProbeReport,
    Problem,
    TokenLogprob,
)

__all__ = [
    "Backend",
    "BackendError",
    "BackendTimeout",
    "BackendUnavailable",
    "BadCredentials",
    "Chunk",
    "Completion",
    "CompletionRequest",
    "FimUnsupported",
    "ModelNotFound",
    "ProbeReport",
    "Problem",
    "ProtocolError",
    "RequestCancelled",
    "RequestRejected",
    "TokenLogprob",
    "trim_tokens",
]
