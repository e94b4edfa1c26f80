"""`routing.adaptive`: move the threshold, within bounds, by the user's own decisions.

Assumptions (the paper's premise, and what one ledger can tell): the chance that the
user accepts a local completion grows with its confidence; the remote model's does
not depend much on the local confidence. Then the best threshold is where the
local completions just above it are accepted as often as the remote ones just below
it. Every `every` resolved decisions (accepted, or dismissed by a newer request) the
controller compares the `near` local outcomes closest above the threshold with the
`near` remote outcomes closest below it: local clearly worse (by more than `z`
standard errors) raises the threshold one `step` (escalates more), clearly better
lowers it; never past [lo, hi]. Each outcome is what the user did with the route
that was actually shown, so no counterfactual is needed. Acceptance only: retention
arrives minutes later and is left to `calibrate --from-ledger`.
"""

from __future__ import annotations

import math
from collections import deque

import attrs


@attrs.frozen
class Move:
    old: float
    new: float
    why: str


class Adaptive:
    def __init__(
        self,
        start: float,
        lo: float,
        hi: float,
        *,
        step: float = 0.05,
        every: int = 50,
        near: int = 30,
        z: float = 1.0,
        memory: int = 2000,
    ) -> None:
        self.lo, self.hi = min(lo, hi), max(lo, hi)
        self.start = start
        self.current = min(max(start, self.lo), self.hi)
        self.step = step
        self.every = max(1, every)
        self.near = max(1, near)
        self.z = z
        self.since = 0  # resolved decisions since the last look
        self.seen = 0
        self._obs: deque[tuple[float, bool, bool]] = deque(maxlen=memory)  # conf, local?, ok
        self.why = (
            f"starts at {self.current:.2f}"
            + (
                f" (the configured {start:.2f} clamped into its bounds)"
                if self.current != start
                else ""
            )
            + f"; moves by {step:g} at most once per {self.every} decisions, "
            f"within [{self.lo:.2f}, {self.hi:.2f}]"
        )
        self.moves: list[Move] = []

    def resume(self, value: float, why: str, observed: list[tuple[float, str, bool]]) -> None:
        """Carry on from an earlier run (the ledger's last move and outcomes): the
        value clamped into today's bounds, the outcomes as evidence (no move from them)."""
        for conf, route, ok in observed:
            if route in ("local", "remote") and math.isfinite(conf):
                self._obs.append((conf, route == "local", ok))
        old = self.current
        if math.isfinite(value):  # NaN would pass the clamp and never escalate
            self.current = min(max(value, self.lo), self.hi)
        if self.current != old:
            self.why = f"resumed at {self.current:.2f} from an earlier session ({why})"

    def rebound(self, lo: float, hi: float) -> None:
        """New bounds (settings changed): the value is clamped into them."""
        self.lo, self.hi = min(lo, hi), max(lo, hi)
        old = self.current
        self.current = min(max(old, self.lo), self.hi)
        if self.current != old:
            self.why = f"clamped {old:.2f} -> {self.current:.2f} into new bounds"

    def observe(self, confidence: float, route: str, accepted: bool) -> Move | None:
        """One resolved decision; the move it causes, if any."""
        if route not in ("local", "remote") or not math.isfinite(confidence):
            return None
        self._obs.append((confidence, route == "local", accepted))
        self.since += 1
        self.seen += 1
        if self.since < self.every:
            return None
        t = self.current
        local = sorted((c, ok) for c, is_local, ok in self._obs if is_local and c >= t)
        remote = sorted((c, ok) for c, is_local, ok in self._obs if not is_local and c < t)
        local, remote = local[: self.near], remote[-self.near :]
        if len(local) < self.near or len(remote) < self.near:
            return None  # not enough evidence on both sides yet: look again next decision
        self.since = 0
        pl = sum(ok for _, ok in local) / len(local)
        pr = sum(ok for _, ok in remote) / len(remote)
        se = math.sqrt(pl * (1 - pl) / len(local) + pr * (1 - pr) / len(remote)) or 1e-9
        evidence = (
            f"local completions just above it accepted {pl:.0%} (n={len(local)}), "
            f"remote just below {pr:.0%} (n={len(remote)})"
        )
        if pl < pr - self.z * se:
            new, verb = min(self.hi, t + self.step), "raised"
        elif pl > pr + self.z * se:
            new, verb = max(self.lo, t - self.step), "lowered"
        else:
            self.why = f"held at {t:.2f} after {self.seen} decisions: {evidence}"
            return None
        if math.isclose(new, t):
            self.why = f"held at its bound {t:.2f} after {self.seen} decisions: {evidence}"
            return None
        self.current = round(new, 4)
        self.why = f"{verb} {t:.2f} -> {self.current:.2f} after {self.seen} decisions: {evidence}"
        move = Move(t, self.current, self.why)
        self.moves.append(move)
        return move

    def status(self) -> dict[str, object]:
        return {
            "threshold": self.current,
            "start": self.start,
            "bounds": [self.lo, self.hi],
            "step": self.step,
            "every": self.every,
            "decisions": self.seen,
            "why": self.why,
        }
