"""What the session decided and what the user did with it: recent routing decisions,
acceptances, the ledger, retention of accepted text, the adaptive threshold, and the
status record the `synconfroute.status` command returns."""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from cachetools import LRUCache

from synconfroute.clients.urls import mask_url

from ..settings import config
from ..vocab.card import summary
from ..vocab.record import RouteDecision
from .adaptive import Adaptive, Move
from .ledger import Ledger
from .ledger import load as load_ledger
from .retention import DEFAULT_DELAYS, Retention

log = logging.getLogger(__name__)

_DECISIONS_KEPT = 256


@attrs.frozen
class WorkerStatus:
    """The embedded tier's worker process (llama.cpp runs there, not in the server)."""

    pid: int
    rss_mb: float | None
    restarts: int
    # Measured speed (tokens/s) and the prompt tokens of the generations so far, of which
    # reused from the KV cache (typing, prefill): what the time budget works with.
    prompt_tps: float | None = None
    decode_tps: float | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    generations: int = 0  # generations those prompt tokens came from
    prefills: int = 0  # background prefills handed to the worker (cursor rests)
    protocol_errors: int = 0  # malformed messages read from its pipe, each skipped


@attrs.frozen
class Status:
    """The `synconfroute.status` answer (editors and tests read its JSON keys)."""

    local_only: bool
    local: str  # the local tier chosen, or the configured backend before the choice
    remote: str  # its URLs, or "not configured"
    policy: str
    threshold: float  # the one the router uses now (the request's `Rules`)
    adaptive: dict[str, object] | None
    completions: int  # decisions kept (the most recent ones)
    routes: dict[str, int]  # of those, per route: local, remote, none
    accepted: int
    last: str | None  # summary of the latest decision
    pid: int
    local_worker: WorkerStatus | None
    # The cluster's load as the router sees it (routing.backpressure / escalation_budget):
    # state ("ok", "slow", "shedding", "down"), why, lift of the bar, budget used.
    cluster: dict[str, object] | None = None
    # The workspace index (completion.context "workspace"): files indexed, skipped by a
    # limit, special files (FIFOs, devices, sockets) skipped unread, build state.
    workspace: dict[str, object] | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


class DecisionLog:
    def __init__(
        self,
        settings: Callable[[], config.Settings],
        ledger: Ledger | None = None,
        retention_delays: Sequence[float] | None = None,  # None: DEFAULT_DELAYS
    ) -> None:
        self._settings = settings  # the session's current settings
        self.decisions: LRUCache[str, RouteDecision] = LRUCache(_DECISIONS_KEPT)
        self.accepted: set[str] = set()
        self._ids = itertools.count(1)
        self.ledger = ledger or Ledger(None)
        delays = DEFAULT_DELAYS if retention_delays is None else retention_delays
        self.retention = Retention(self._retained, delays)
        self.adaptive: Adaptive | None = None  # the owner calls sync_adaptive

    @property
    def _ledger_on(self) -> bool:
        return self._settings().editor.ledger

    def record(self, rec: RouteDecision, *, task: str = "completion") -> str:
        """Keep a new decision (`task`: "completion" or "next-edit"); its id."""
        did = f"c{next(self._ids)}"
        self.decisions[did] = rec
        if self._ledger_on:
            self.ledger.decision(did, rec, task)
        return did

    def shown(self, did: str) -> None:
        if self._ledger_on:
            self.ledger.event("shown", did)

    def resolve(self, did: str, *, accepted: bool) -> Move | None:
        """A shown item was accepted, or dismissed by a newer request; the adaptive
        threshold's move, if this outcome moved it."""
        if self._ledger_on:
            self.ledger.event("accepted" if accepted else "dismissed", did)
        rec = self.decisions.get(did)
        if self.adaptive is None or rec is None or rec.confidence is None or rec.cache_hit:
            return None
        move = self.adaptive.observe(rec.confidence, rec.route, accepted)
        if move is not None:
            log.info("adaptive threshold %s", move.why)
            if self._ledger_on:
                self.ledger.adaptive(move.old, move.new, move.why, self.adaptive.start)
        return move

    def track(self, key: str, did: str, end: int, text: Callable[[], str]) -> None:
        """Watch the accepted completion `did`, inserted to end at offset `end` of `key`."""
        if self._ledger_on:
            inserted = self.decisions[did].completion
            self.retention.track(key, did, end - len(inserted), inserted, text)

    def _retained(self, did: str, after: float, ratio: float, chars: int, closed: bool) -> None:
        if self._ledger_on:
            self.ledger.retained(did, after, ratio, chars, closed)

    @property
    def adaptive_threshold(self) -> float | None:
        """Adaptive mode's current threshold, None when it is off (an input of the rules)."""
        return self.adaptive.current if self.adaptive else None

    def sync_adaptive(self, start: float) -> None:
        """Adaptive mode follows the settings: built when turned on, re-bounded when its
        bounds change (a workspace may have lowered them), dropped when turned off.
        `start` is the configured threshold of the model the local tier runs (the rules
        without adaptive mode); a new one starts afresh, as after a new calibration."""
        r = self._settings().routing
        if not r.adaptive or r.policy not in ("synconf", "confidence"):
            self.adaptive = None
        elif self.adaptive is None or not math.isclose(self.adaptive.start, start):
            self.adaptive = Adaptive(
                start, r.adaptive_min, r.adaptive_max, step=r.adaptive_step, every=r.adaptive_every
            )
            self._resume_adaptive(self.adaptive)
        else:
            self.adaptive.rebound(r.adaptive_min, r.adaptive_max)
            self.adaptive.step, self.adaptive.every = r.adaptive_step, r.adaptive_every

    def _resume_adaptive(self, a: Adaptive) -> None:
        """Carry on from the ledger's last move, if it began from today's configured
        threshold (a new one, e.g. from `calibrate`, starts afresh), and take the recent
        outcomes as evidence. Reads only the end of the file."""
        path = self.ledger.path
        if path is None or not self._ledger_on:
            return
        self.ledger.flush()  # lines still waiting for their turn are part of it
        try:
            decisions, moves, _ = load_ledger(path, tail_bytes=2_000_000)
        except OSError:
            return  # no ledger yet
        observed = [
            (float(d["confidence"]), str(d["route"]), bool(d["accepted"]))
            for d in decisions
            if (d["accepted"] or d["dismissed"])
            and isinstance(d.get("confidence"), int | float)
            and not d.get("cache_hit")
        ]
        last = moves[-1] if moves else None
        if last is not None and last.get("start") == round(a.start, 4):
            a.resume(float(last["adaptive"]), str(last.get("why", "")), observed)
        else:
            a.resume(a.current, "", observed)

    def status(
        self,
        policy: str,
        threshold: float,
        local: str,
        pid: int,
        worker: WorkerStatus | None,
        cluster: dict[str, object] | None = None,
        workspace: dict[str, object] | None = None,
    ) -> Status:
        """The session's state; `policy` and `threshold` from the rules the next request
        routes by (the session resolves them)."""
        settings = self._settings()
        recent = list(self.decisions.values())  # oldest first (insertion order)
        routes = {r: sum(1 for d in recent if d.route == r) for r in ("local", "remote", "none")}
        last = recent[-1] if recent else None
        return Status(
            local_only=settings.privacy.local_only,
            local=local or settings.local.backend,
            remote=(
                ", ".join(mask_url(u) for u in settings.remote.all_urls)
                if settings.remote.configured
                else "not configured"
            ),
            policy=policy,
            threshold=threshold,
            adaptive=self.adaptive.status() if self.adaptive else None,
            completions=len(recent),
            routes=routes,
            accepted=len(self.accepted),
            last=summary(last) if last else None,
            pid=pid,
            local_worker=worker,
            cluster=cluster,
            workspace=workspace,
        )
