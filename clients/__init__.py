"""Model backends: stream fill-in-the-middle completions with per-token log-probs."""

if __name__ != "synconfroute.clients":
    # One import package: loaded as top-level `clients` (e.g. `python -m clients` from a
    # checkout), its modules would exist twice under two names. Say so instead.
    raise ImportError(f"import synconfroute.clients (not {__name__}); run `python -m synconfroute`")


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
