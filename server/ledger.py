"""The ledger: one JSON line per completion decision, and `synconfroute stats` over it.

It records how requests were routed, never code: no completion text, no prefix,
no file path (only the language), so it can be shared with an admin as it is.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import platformdirs

from .config import APP
from .record import RouteDecision

log = logging.getLogger(__name__)


def default_path() -> Path:
    return Path(platformdirs.user_state_dir(APP)) / "ledger.jsonl"


def entry(did: str, rec: RouteDecision) -> dict[str, Any]:
    return {
        "t": round(time.time(), 3),
        "id": did,
        "route": rec.route,
        "reasons": rec.reasons,
        "policy": rec.policy,
        "confidence": rec.confidence,
        "threshold": rec.threshold,
        "syntax": rec.syntax.status if rec.syntax else None,
        "local_model": rec.local_model,
        "remote_model": rec.remote_model,
        "language": rec.language,
        "latency_ms": {k: round(v, 2) for k, v in rec.latency_ms.items()},
        "bytes_sent": rec.bytes_sent,
        "context_bytes": rec.context_bytes_sent,  # a count only: no paths, no code
        "cache_hit": rec.cache_hit,
        "early": rec.local_cancelled_early,
    }


class Ledger:
    """Appends to a JSONL file; a write failure is logged once and never raised."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._failed = False

    def _append(self, obj: dict[str, Any]) -> None:
        if self.path is None or self._failed:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(obj, separators=(",", ":")) + "\n")
        except OSError as exc:
            self._failed = True
            log.warning("ledger disabled: cannot write %s: %s", self.path, exc)

    def decision(self, did: str, rec: RouteDecision) -> None:
        self._append(entry(did, rec))

    def accepted(self, did: str) -> None:
        self._append({"t": round(time.time(), 3), "accepted": did})


def read(path: Path) -> tuple[list[dict[str, Any]], set[str], int]:
    """(decisions, accepted ids, unreadable lines) from a ledger file."""
    decisions: list[dict[str, Any]] = []
    accepted: set[str] = set()
    bad = 0
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                obj = json.loads(line)
            except ValueError:
                bad += 1
                continue
            if isinstance(obj, dict) and "accepted" in obj:
                accepted.add(str(obj["accepted"]))
            elif isinstance(obj, dict) and "route" in obj:
                decisions.append(obj)
            else:
                bad += 1
    return decisions, accepted, bad


def summarize(decisions: list[dict[str, Any]], accepted: set[str]) -> dict[str, Any]:
    """The sums `synconfroute stats` prints."""
    n = len(decisions)
    routes = Counter(d["route"] for d in decisions)
    reasons = Counter(r for d in decisions for r in d.get("reasons", []))
    shown = [d for d in decisions if d["route"] != "none"]
    acc = Counter(d["route"] for d in shown if d.get("id") in accepted)
    totals = [d["latency_ms"].get("total", 0.0) for d in decisions if d.get("latency_ms")]
    asked_remote = sum(
        1 for d in decisions if any(r.startswith("remote-") for r in d.get("reasons", []))
    )
    return {
        "completions": n,
        "routes": dict(routes),
        "stayed_on_machine": (n - asked_remote) / n if n else None,
        "escalation_rate": asked_remote / n if n else None,
        "accepted": {r: acc[r] for r in ("local", "remote")},
        "acceptance_rate": {
            r: (acc[r] / routes[r] if routes[r] else None) for r in ("local", "remote")
        },
        "bytes_sent": sum(int(d.get("bytes_sent", 0)) for d in decisions),
        "latency_ms_p50": statistics.median(totals) if totals else None,
        "cache_hits": sum(1 for d in decisions if d.get("cache_hit")),
        "reasons": dict(reasons.most_common()),
    }


def format_summary(s: dict[str, Any], path: Path) -> str:
    if not s["completions"]:
        return f"no completions recorded in {path}"

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    r = s["routes"]
    lines = [
        f"ledger {path}",
        f"completions       {s['completions']}  (local {r.get('local', 0)}, "
        f"remote {r.get('remote', 0)}, none {r.get('none', 0)}; cache hits {s['cache_hits']})",
        f"stayed on machine {pct(s['stayed_on_machine'])}   escalated "
        f"{pct(s['escalation_rate'])}   bytes sent {s['bytes_sent']:,}",
        f"accepted          local {s['accepted']['local']} "
        f"({pct(s['acceptance_rate']['local'])}), remote {s['accepted']['remote']} "
        f"({pct(s['acceptance_rate']['remote'])})",
        f"latency p50       {s['latency_ms_p50']:.0f} ms"
        if s["latency_ms_p50"] is not None
        else "latency p50       -",
        "reasons           " + ", ".join(f"{k} {v}" for k, v in s["reasons"].items()),
    ]
    return "\n".join(lines)
