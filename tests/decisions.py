"""Route decisions for tests of what the protocol layer makes of them."""

from __future__ import annotations

from synconfroute.server.vocab.kinds import Reason
from synconfroute.server.vocab.record import RouteDecision


def route_decision(route: str, reasons: tuple[str, ...], confidence: float | None) -> RouteDecision:
    """A decision with `route`, `reasons` and `confidence` (threshold 0.6, no syntax)."""
    return RouteDecision(
        completion="x",
        route=route,  # type: ignore[arg-type]
        reasons=tuple(Reason(r) for r in reasons),
        policy="synconf",
        confidence=confidence,
        threshold=0.6,
        syntax=None,
        local_model="m",
        remote_model=None,
    )
