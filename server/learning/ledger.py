"""The ledger: one JSON line per completion decision, and `synconfroute stats` over it.

It records how requests were routed, never code: no completion text, no prefix,
no file path (only the language), so it can be shared with an admin as it is.

Lines: a decision (`route`, ...); then events naming its id: `shown` (the item went
to the editor), `accepted`, `dismissed` (a newer request replaced it unaccepted),
`retained` (after `after_s` seconds, `ratio` of the `chars` inserted is still there;
`closed` when the document closed first: the last value seen), and `adaptive` (the
adaptive threshold moved: `from`, `to`, `why`). Ids carry a random token per server
run (`3fa9c1:c12`), so several editors can share one ledger.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import platformdirs

from ..settings.config import APP
from ..vocab.record import RouteDecision
from . import ledger_schema as schema
from .later import after_response

log = logging.getLogger(__name__)


def default_path() -> Path:
    return Path(platformdirs.user_state_dir(APP)) / "ledger.jsonl"


def entry(
    did: str, rec: RouteDecision, task: str = "completion", t: float | None = None
) -> dict[str, Any]:
    """A decision's line (made at `t`, by default now); `task` named only when it is
    not a completion (a next-edit suggestion's confidence is another measure:
    calibration leaves it out)."""
    return {
        "t": round(time.time() if t is None else t, 3),
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
        # Whether the local model wrote a text (a remote decision's local confidence is
        # known; calibration replays other thresholds from these two fields).
        "local_text": bool(rec.local_completion),
        "chars": len(rec.completion),
        # A verified escalation: the local draft's tokens the cluster scored and kept.
        "draft_tokens": rec.draft_tokens,
        "draft_kept": rec.draft_kept,
        **({"task": task} if task != "completion" else {}),
    }


class Ledger:
    """Appends to a JSONL file; a write failure is logged once and never raised.

    Lines are written after the response that made them (`after_response`): in the
    order they came, several in one write; `flush()` writes what waits now."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._failed = False
        self.run = secrets.token_hex(3)  # ids are unique across servers sharing the file
        self._waiting: list[dict[str, Any] | Callable[[], dict[str, Any]]] = []

    def _append(self, line: dict[str, Any] | Callable[[], dict[str, Any]]) -> None:
        """A line, or what makes it (after the response, as the write)."""
        if self.path is None or self._failed:
            return
        self._waiting.append(line)
        if len(self._waiting) == 1:
            after_response(self.flush)

    def flush(self) -> None:
        lines, self._waiting = self._waiting, []
        if not lines or self.path is None or self._failed:
            return
        objs = (line() if callable(line) else line for line in lines)
        text = "".join(json.dumps(obj, separators=(",", ":")) + "\n" for obj in objs)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            self._failed = True
            log.warning("ledger disabled: cannot write %s: %s", self.path, exc)

    def key(self, did: str) -> str:
        return f"{self.run}:{did}"

    def decision(self, did: str, rec: RouteDecision, task: str = "completion") -> None:
        key, t = self.key(did), time.time()
        self._append(lambda: entry(key, rec, task, t))

    def accepted(self, did: str) -> None:
        self.event("accepted", did)

    def event(self, kind: str, did: str, **numbers: float | int | bool) -> None:
        """shown / accepted / dismissed / retained (with numbers only, never text)."""
        self._append({"t": round(time.time(), 3), kind: self.key(did), **numbers})

    def retained(self, did: str, after_s: float, ratio: float, chars: int, closed: bool) -> None:
        self.event("retained", did, after_s=after_s, ratio=ratio, chars=chars, closed=closed)

    def adaptive(self, old: float, new: float, why: str, start: float) -> None:
        """The adaptive threshold moved (`why` is the server's own wording, no code);
        `start` is the configured threshold it began from (a new one restarts it)."""
        self._append(
            {
                "t": round(time.time(), 3),
                "adaptive": round(new, 4),
                "from": round(old, 4),
                "start": round(start, 4),
                "why": why,
            }
        )


EVENTS = schema.EVENTS


def _lines(raw: str) -> Iterator[dict[str, Any] | None]:
    """Each non-blank line as a JSON object, or None for one that is not (broken JSON,
    another JSON value, nesting deep enough to exhaust the recursion limit)."""
    for line in raw.split("\n"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            yield None
            continue
        yield obj if isinstance(obj, dict) else None


def load(
    path: Path, *, tail_bytes: int | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """(decisions, adaptive moves, unreadable lines). Each line is checked against its
    schema (`ledger_schema`): one that does not fit is counted and skipped. Each decision
    gets its events: `shown`, `accepted`, `dismissed` (bools) and `retained`
    ({after_s: ratio}); an event joins the latest decision with its id (older ledgers
    reused ids across runs). `tail_bytes`: read only the end of the file (the server,
    at start)."""
    decisions: list[dict[str, Any]] = []
    moves: list[dict[str, Any]] = []
    latest: dict[str, dict[str, Any]] = {}
    bad = 0
    with path.open("rb") as fb:
        if tail_bytes is not None and fb.seek(0, 2) > tail_bytes:
            fb.seek(-tail_bytes, 2)
            fb.readline()  # the first line is cut
        else:
            fb.seek(0)
        raw = fb.read().decode("utf-8", errors="replace")
    for obj in _lines(raw):
        kind = None if obj is None else _kind(obj)
        try:
            if obj is None or kind is None:
                raise schema.BadLine("not a ledger line")
            if kind == "route":
                d = schema.decision(obj)
                d.update(shown=False, accepted=False, dismissed=False, retained={})
                decisions.append(d)
                latest[d["id"]] = d
            elif kind == "adaptive":
                moves.append(schema.adaptive(obj))
            else:
                ev = schema.event(kind, obj)
                target = latest.get(ev["id"])
                if target is None:
                    continue  # its decision was in a rotated-away part of the file
                if kind == "retained":
                    target["retained"][ev["after_s"]] = ev["ratio"]
                else:
                    target[kind] = True
        except schema.BadLine:
            bad += 1
    if not any(d["shown"] for d in decisions):
        for d in decisions:  # a ledger from before `shown` was recorded
            d["shown"] = d["route"] != "none"
    return decisions, moves, bad


def _kind(obj: dict[str, Any]) -> str | None:
    if "route" in obj:
        return "route"
    if "adaptive" in obj:
        return "adaptive"
    return next((k for k in EVENTS if k in obj), None)


def read(path: Path) -> tuple[list[dict[str, Any]], set[str], int]:
    """(decisions, accepted ids, unreadable lines) from a ledger file, each line checked
    as `load` does."""
    decisions: list[dict[str, Any]] = []
    accepted: set[str] = set()
    bad = 0
    for obj in _lines(path.read_text(encoding="utf-8", errors="replace")):
        kind = None if obj is None else _kind(obj)
        try:
            if obj is None or kind not in ("route", "accepted"):
                raise schema.BadLine("not a decision or an acceptance")
            if kind == "accepted":
                accepted.add(schema.event("accepted", obj)["id"])
            else:
                decisions.append(schema.decision(obj))
        except schema.BadLine:
            bad += 1
    return decisions, accepted, bad


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100): every latency figure `stats` prints."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


def summarize(decisions: list[dict[str, Any]], accepted: set[str]) -> dict[str, Any]:
    """The sums `synconfroute stats` prints (completions; next-edit suggestions apart)."""
    edits = [d for d in decisions if d.get("task", "completion") == "next-edit"]
    decisions = [d for d in decisions if d.get("task", "completion") == "completion"]
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
        "latency_ms_p50": percentile(totals, 50),
        "latency_ms_p95": percentile(totals, 95),
        "cache_hits": sum(1 for d in decisions if d.get("cache_hit")),
        "reasons": dict(reasons.most_common()),
        "next_edits": {
            "suggestions": len(edits),
            "routes": dict(Counter(d["route"] for d in edits)),
            "accepted": sum(1 for d in edits if d.get("id") in accepted),
        },
    }


def format_summary(s: dict[str, Any], path: Path) -> str:
    if not s["completions"]:
        return f"no completions recorded in {path}"

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x:.0f} ms"

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
        f"latency           p50 {ms(s['latency_ms_p50'])}   p95 {ms(s.get('latency_ms_p95'))}",
        "reasons           " + ", ".join(f"{k} {v}" for k, v in s["reasons"].items()),
    ]
    ne = s.get("next_edits") or {}
    if ne.get("suggestions"):
        er = ne["routes"]
        lines.append(
            f"next edits        {ne['suggestions']}  (local {er.get('local', 0)}, remote "
            f"{er.get('remote', 0)}, none {er.get('none', 0)}); accepted {ne['accepted']}"
        )
    return "\n".join(lines)
