"""The routing rules of one request, resolved in one place.

The threshold has three inputs: `routing.threshold`, a per-model value in
`routing.thresholds` for the model the local tier actually runs (the embedded tier's
model is its GGUF file's stem, not `local.model`), and adaptive mode's current value.
`resolve_rules` is the only function that combines them, and the only place a `Rules`
is built from settings: the router, `status`, the hover card, adaptive mode's starting
point, `eval` and `calibrate` all read the `Rules` it returns.
"""

from __future__ import annotations

from ..settings.config import Settings
from .router import Rules


def resolve_rules(settings: Settings, local_model: str, adaptive: float | None = None) -> Rules:
    """The rules for a request whose local tier runs `local_model`; `adaptive` is adaptive
    mode's current threshold (None when it is off), or a threshold the evaluation was
    given (`eval --threshold`), which replaces the configured one."""
    r = settings.routing
    return Rules(
        policy=r.policy,
        threshold=r.threshold_for(local_model) if adaptive is None else adaptive,
        k=r.confidence_tokens,
        missing_logprobs=r.missing_logprobs,
        semantic=r.semantic,
    )
