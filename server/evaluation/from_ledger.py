"""`synconfroute calibrate --from-ledger`: the threshold from the user's own decisions.

Goal: the most completions accepted AND retained (at the last retention check, at
least `min_retained` of the inserted characters still there; an acceptance whose
check never ran counts as retained) within an escalation budget.

What the ledger can and cannot tell. Each decision records the local confidence
(also when it went remote), the syntax verdict when the gate ran, the route shown
and what the user did with it. Replaying another threshold t:
- the route at t is known when the confidence is: c < t escalates; c >= t stays
  local unless the gate said invalid (policy synconf). Where the gate never ran (the
  request escalated on confidence), it is taken as invalid with the share of
  invalid verdicts seen among the checked ones (a weight, not a guess per request);
- the outcome at t is observed when the route at t is the route that was shown.
  Otherwise it is estimated: a local outcome by the acceptance of the `NEAR` local
  completions shown at the confidences closest to its own, all within `BIN`/2 of it
  (at least `MIN_BIN` of them), so
  the threshold cannot go below where local completions were ever shown (a fixed
  threshold shows none below itself; remote failures, local-only, an earlier or
  adaptive threshold do); a remote outcome by the remote acceptance in the same window,
  else the remote acceptance over all confidences (assumed: the large model's acceptance
  depends little on the small model's confidence).
Cache hits, other policies, decisions with no confidence and items never shown are
left out.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import attrs

from ..learning.stats import wilson
from .calibrate import CalibrationError, candidate_thresholds

BIN = 0.25
MIN_SAMPLE = 200
MIN_BIN = 5
NEAR = 10


@attrs.frozen
class Obs:
    confidence: float
    route: str  # local | remote: what was shown
    good: bool  # accepted and retained
    syntax: str | None  # the gate's verdict when it ran


@attrs.frozen
class Point:
    threshold: float
    value: float  # expected accepted-and-retained completions
    escalation: float  # expected share escalated
    observed_n: int  # decisions whose route at this threshold is the one shown
    observed_good: int


@attrs.frozen
class LedgerChoice:
    threshold: float
    point: Point
    current: Point | None  # the threshold the decisions were mostly made at
    current_threshold: float
    n: int
    goal: str
    model: str
    ci: tuple[float, float]
    skipped: dict[str, int]


def observations(
    decisions: Sequence[dict[str, Any]], min_retained: float
) -> tuple[list[Obs], Counter[str]]:
    out: list[Obs] = []
    skipped: Counter[str] = Counter()
    for d in decisions:
        conf = d.get("confidence")
        if d.get("task", "completion") != "completion":
            skipped["next-edit suggestion"] += 1
        elif d.get("cache_hit"):
            skipped["cache hit"] += 1
        elif d.get("policy") not in ("synconf", "confidence"):
            skipped["policy without a threshold"] += 1
        elif d.get("route") not in ("local", "remote") or not d.get("shown"):
            skipped["nothing shown"] += 1
        elif not isinstance(conf, int | float) or not math.isfinite(conf):
            skipped["no confidence"] += 1
        elif d.get("local_text") is False:  # nothing local to replay (older ledgers: unknown)
            skipped["no local text"] += 1
        else:
            kept = d.get("retained") or {}
            last = kept[max(kept)] if kept else None
            good = bool(d.get("accepted")) and (last is None or last >= min_retained)
            syntax = d.get("syntax") if d.get("syntax") in ("valid", "invalid") else None
            out.append(Obs(float(conf), str(d["route"]), good, syntax))
    return out, skipped


class Replay:
    """Every candidate threshold's expected outcome, from prefix sums over the decisions
    sorted by confidence (a decision's contribution depends only on which side of the
    threshold it falls)."""

    def __init__(
        self, obs: Sequence[Obs], synconf: bool, min_bin: int = MIN_BIN, near: int = NEAR
    ) -> None:
        # Per route: confidences sorted, with running counts of good outcomes, so the
        # acceptance in a window around any confidence is two bisections away.
        by_route: dict[str, tuple[list[float], list[int]]] = {}
        for route in ("local", "remote"):
            mine = sorted((o.confidence, o.good) for o in obs if o.route == route)
            goods = [0]
            for _, g in mine:
                goods.append(goods[-1] + g)
            by_route[route] = ([c for c, _ in mine], goods)
        remote_all = [o.good for o in obs if o.route == "remote"]
        checked = [o for o in obs if o.syntax is not None]
        q = sum(o.syntax == "invalid" for o in checked) / len(checked) if checked else 0.0
        q = q if synconf else 0.0

        def outcome(o: Obs, route: str) -> float | None:
            if route == o.route:
                return float(o.good)
            confs, goods = by_route[route]
            c = o.confidence
            # The `near` closest outcomes, all within BIN/2 (narrow where data is dense).
            lo = hi = bisect.bisect_left(confs, c)
            while hi - lo < near and (lo > 0 or hi < len(confs)):
                if hi >= len(confs) or (lo > 0 and c - confs[lo - 1] <= confs[hi] - c):
                    lo -= 1
                else:
                    hi += 1
            if hi - lo >= min_bin and c - confs[lo] <= BIN / 2 and confs[hi - 1] - c <= BIN / 2:
                return (goods[hi] - goods[lo]) / (hi - lo)
            if route == "remote" and len(remote_all) >= min_bin:
                return sum(remote_all) / len(remote_all)
            return None  # no evidence: this side of a threshold cannot be replayed

        self.n = len(obs)
        ordered = sorted(obs, key=lambda o: o.confidence)
        self.confs = [o.confidence for o in ordered]
        # Below the threshold: escalated. Above: local unless the gate said (or would
        # say, with weight q) invalid.
        below: list[tuple[float | None, int, int]] = []
        above: list[tuple[float | None, float, int, int]] = []
        for o in ordered:
            yr, yl = outcome(o, "remote"), outcome(o, "local")
            below.append((yr, int(o.route == "remote"), int(o.route == "remote" and o.good)))
            if not synconf or o.syntax == "valid":
                w = 0.0
            elif o.syntax == "invalid":
                w = 1.0
            else:
                w = q
            need = [(w, yr), (1.0 - w, yl)]
            val = (
                None
                if any(x > 0 and y is None for x, y in need)
                else sum(x * (y or 0.0) for x, y in need)
            )
            same = (w == 1.0 and o.route == "remote") or (w == 0.0 and o.route == "local")
            above.append((val, w, int(same), int(same and o.good)))
        n = self.n
        self.b_val, self.b_bad, self.b_seen, self.b_good = [0.0], [0], [0], [0]
        for v, seen, good in below:
            self.b_val.append(self.b_val[-1] + (v or 0.0))
            self.b_bad.append(self.b_bad[-1] + (v is None))
            self.b_seen.append(self.b_seen[-1] + seen)
            self.b_good.append(self.b_good[-1] + good)
        self.a_val, self.a_bad, self.a_esc = [0.0] * (n + 1), [0] * (n + 1), [0.0] * (n + 1)
        self.a_seen, self.a_good = [0] * (n + 1), [0] * (n + 1)
        for i in range(n - 1, -1, -1):
            v, w, seen, good = above[i]
            self.a_val[i] = self.a_val[i + 1] + (v or 0.0)
            self.a_bad[i] = self.a_bad[i + 1] + (v is None)
            self.a_esc[i] = self.a_esc[i + 1] + w
            self.a_seen[i] = self.a_seen[i + 1] + seen
            self.a_good[i] = self.a_good[i + 1] + good

    def at(self, t: float) -> Point | None:
        """The expected outcome of threshold `t`; None where the ledger has no evidence."""
        k = bisect.bisect_left(self.confs, t)  # decisions with confidence < t
        if self.b_bad[k] or self.a_bad[k]:
            return None
        return Point(
            t,
            self.b_val[k] + self.a_val[k],
            (k + self.a_esc[k]) / self.n,
            self.b_seen[k] + self.a_seen[k],
            self.b_good[k] + self.a_good[k],
        )


def choose(
    decisions: Sequence[dict[str, Any]],
    *,
    budget: float | None = None,
    best: bool = False,
    min_sample: int = MIN_SAMPLE,
    min_retained: float = 0.5,
) -> LedgerChoice:
    if (budget is None) == (not best):
        raise CalibrationError("give either --budget RATE or --best")
    obs, skipped = observations(decisions, min_retained)
    if len(obs) < min_sample:
        raise CalibrationError(
            f"{min_sample - len(obs)} more decisions needed: the ledger holds {len(obs)} "
            f"usable ones (shown, with a local confidence, policy synconf or confidence), "
            f"calibration wants {min_sample}"
        )
    policies = Counter(str(d.get("policy")) for d in decisions if d.get("policy"))
    synconf = policies.most_common(1)[0][0] == "synconf"
    limit = 1.0 if budget is None else budget
    replay = Replay(obs, synconf)
    tried = candidate_thresholds(o.confidence for o in obs)
    points = [p for t in tried if (p := replay.at(t)) is not None]
    if not points:
        raise CalibrationError(
            "the ledger has too few local completions shown in any confidence range to "
            "compare thresholds"
        )
    fits = [p for p in points if p.escalation <= limit + 1e-9]
    if not fits:
        low = min(p.escalation for p in points)
        raise CalibrationError(
            f"no threshold the ledger can speak for escalates {limit:.0%} or less: the "
            f"lowest escalates {low:.1%}"
        )
    pick = max(fits, key=lambda p: (round(p.value, 9), -p.escalation))
    used = Counter(float(d["threshold"]) for d in decisions if d.get("threshold") is not None)
    cur_t = used.most_common(1)[0][0] if used else pick.threshold
    current = replay.at(cur_t)
    models = Counter(str(d.get("local_model")) for d in decisions if d.get("local_model"))
    ci = wilson(pick.observed_good, pick.observed_n) or (0.0, 1.0)
    return LedgerChoice(
        threshold=pick.threshold,
        point=pick,
        current=current,
        current_threshold=cur_t,
        n=len(obs),
        goal="best accepted-and-retained" if best else f"escalation budget {limit:.0%}",
        model=models.most_common(1)[0][0] if models else "",
        ci=ci,
        skipped=dict(skipped),
    )


def describe(c: LedgerChoice) -> str:
    p = c.point
    lines = [
        f"from {c.n} of your decisions ({c.goal}"
        + (f", local model {c.model}" if c.model else "")
        + ")",
        f"threshold {c.threshold:.4f}: escalates {p.escalation:.1%}, "
        f"accepted and retained {p.value / c.n:.1%} of completions (modelled)",
        f"  observed where the route would not change: {p.observed_good}/{p.observed_n} "
        f"= {p.observed_good / max(p.observed_n, 1):.1%}, 95% CI "
        f"[{c.ci[0]:.1%}, {c.ci[1]:.1%}] (Wilson)",
    ]
    if c.current is not None:
        lines.append(
            f"  now (threshold {c.current_threshold:.4f}): escalates "
            f"{c.current.escalation:.1%}, accepted and retained {c.current.value / c.n:.1%}"
        )
    if c.skipped:
        lines.append("  left out: " + ", ".join(f"{v} {k}" for k, v in sorted(c.skipped.items())))
    return "\n".join(lines)
