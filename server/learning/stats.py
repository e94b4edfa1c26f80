"""`synconfroute stats`: the ledger per route, per language and per confidence bucket.

For each group: completions, shown, accepted (rate over shown, with a 95% Wilson
interval), dismissed, mean retention after each check (30 s, 5 min: the share of
the inserted characters still there, over accepted completions whose check ran),
latency p50/p95 (total), bytes sent. Plus the overall sums of `ledger.summarize`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import ledger

# Upper edges of the confidence buckets (mean log-prob of the first tokens, <= 0).
BUCKETS = (-2.0, -1.0, -0.5, -0.25, -0.1, 0.0)
PLOT_HINT = "pip install 'synconfroute[eval]' (matplotlib) to get the plot"


def bucket(conf: float | None) -> str:
    if conf is None:
        return "unmeasured"
    lo = -math.inf
    for hi in BUCKETS:
        if conf < hi or hi == BUCKETS[-1]:
            return f"[{'-inf' if lo == -math.inf else f'{lo:g}'}, {hi:g})"
        lo = hi
    return "unmeasured"  # pragma: no cover


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion k/n (None for n = 0)."""
    if n <= 0:
        return None
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def group(decisions: Iterable[dict[str, Any]]) -> dict[str, Any]:
    ds = list(decisions)
    shown = [d for d in ds if d["shown"]]
    acc = sum(1 for d in shown if d["accepted"])
    totals = [float(d["latency_ms"].get("total", 0.0)) for d in ds if d.get("latency_ms")]
    checks = sorted({a for d in ds for a in d["retained"]})
    retention: dict[str, Any] = {}
    for a in checks:
        vals = [d["retained"][a] for d in ds if d["accepted"] and a in d["retained"]]
        retention[f"{a:g}s"] = {"mean": sum(vals) / len(vals) if vals else None, "n": len(vals)}
    ci = wilson(acc, len(shown))
    return {
        "completions": len(ds),
        "shown": len(shown),
        "accepted": acc,
        "dismissed": sum(1 for d in shown if d["dismissed"]),
        "acceptance_rate": acc / len(shown) if shown else None,
        "acceptance_ci95": list(ci) if ci else None,
        "retention": retention,
        "latency_ms_p50": ledger.percentile(totals, 50),
        "latency_ms_p95": ledger.percentile(totals, 95),
        "bytes_sent": sum(int(d.get("bytes_sent", 0)) for d in ds),
        **drafts(ds),
    }


def drafts(ds: list[dict[str, Any]]) -> dict[str, Any]:
    """Verified escalations (remote.verify_draft): local draft tokens the cluster scored,
    those it kept as its own answer, and the kept share."""
    scored = sum(int(d.get("draft_tokens", 0)) for d in ds)
    kept = sum(int(d.get("draft_kept", 0)) for d in ds)
    return {
        "draft_tokens": scored,
        "draft_kept": kept,
        "draft_kept_share": kept / scored if scored else None,
        "verified": sum(1 for d in ds if d.get("draft_tokens", 0)),
    }


def _by(decisions: list[dict[str, Any]], key: Any) -> dict[str, Any]:
    keys: dict[str, list[dict[str, Any]]] = {}
    for d in decisions:
        keys.setdefault(key(d), []).append(d)
    return {k: group(v) for k, v in keys.items()}


def _bucket_order(name: str) -> float:
    if name == "unmeasured":
        return math.inf
    return float(name.split(",")[0].strip("[").replace("-inf", "-1e9"))


def compute(
    decisions: list[dict[str, Any]], moves: list[dict[str, Any]], unreadable: int = 0
) -> dict[str, Any]:
    """The figures `stats` prints; `unreadable`: the ledger lines `ledger.load` skipped."""
    accepted_ids = {str(d.get("id")) for d in decisions if d["accepted"]}
    overall = ledger.summarize(decisions, accepted_ids)
    by_conf: dict[str, Any] = {}
    for route in ("local", "remote"):
        rows = _by([d for d in decisions if d["route"] == route], lambda d: bucket(d["confidence"]))
        by_conf[route] = dict(sorted(rows.items(), key=lambda kv: _bucket_order(kv[0])))
    return {
        **overall,
        "unreadable_lines": unreadable,
        "by_route": _by(decisions, lambda d: str(d["route"])),
        "by_language": _by(decisions, lambda d: str(d.get("language") or "unknown")),
        "by_confidence": by_conf,
        "adaptive_moves": [
            {"t": m.get("t"), "from": m.get("from"), "to": m.get("adaptive"), "why": m.get("why")}
            for m in moves
        ],
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def _table(title: str, rows: dict[str, Any], checks: list[str]) -> list[str]:
    head = f"{title:<18}{'n':>6}{'shown':>7}{'acc':>6}{'rate':>8}{'dism':>6}"
    head += "".join(f"{'ret ' + c:>10}" for c in checks)
    head += f"{'p50 ms':>8}{'p95 ms':>8}{'bytes':>10}"
    out = [head]
    for name, g in rows.items():
        line = (
            f"{name:<18}{g['completions']:>6}{g['shown']:>7}{g['accepted']:>6}"
            f"{_pct(g['acceptance_rate']):>8}{g['dismissed']:>6}"
        )
        for c in checks:
            r = g["retention"].get(c)
            line += f"{(_pct(r['mean']) if r else '-'):>10}"
        line += f"{_ms(g['latency_ms_p50']):>8}{_ms(g['latency_ms_p95']):>8}{g['bytes_sent']:>10,}"
        out.append(line)
    return out


def format_text(s: dict[str, Any], path: Path) -> str:
    base = ledger.format_summary(s, path)
    if s.get("unreadable_lines"):
        base += f"\nunreadable lines  {s['unreadable_lines']} (skipped: not in the ledger's format)"
    if not s["completions"]:
        return base
    groups = [*s["by_route"].values(), *s["by_language"].values()]
    checks = sorted({c for g in groups for c in g["retention"]}, key=lambda c: float(c[:-1]))
    lines = [base, ""]
    lines += [*_table("route", s["by_route"], checks), ""]
    lines += _table("language", s["by_language"], checks)
    for route, rows in s["by_confidence"].items():
        if rows:
            lines += ["", *_table(f"{route} confidence", rows, checks)]
    verified = {k: g for k, g in s["by_language"].items() if g["draft_tokens"]}
    if verified:
        lines += ["", f"{'verified drafts':<18}{'n':>6}{'tokens':>8}{'kept':>8}{'share':>8}"]
        for name, g in verified.items():
            lines.append(
                f"{name:<18}{g['verified']:>6}{g['draft_tokens']:>8}{g['draft_kept']:>8}"
                f"{_pct(g['draft_kept_share']):>8}"
            )
    for m in s["adaptive_moves"][-5:]:
        lines.append(f"adaptive threshold {m['from']} -> {m['to']}: {m['why']}")
    return "\n".join(lines)


def plot(s: dict[str, Any], out: Path) -> Path:
    """PNG of acceptance against confidence bucket, local and remote (Wilson 95% bars).
    ImportError (worded for the user) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(f"matplotlib is not installed: {PLOT_HINT}") from exc
    from . import figures

    fig, (ax,) = figures.panels(1, panel_w=7, panel_h=4)
    names = sorted(
        {b for rows in s["by_confidence"].values() for b in rows if b != "unmeasured"},
        key=_bucket_order,
    )
    for i, route in enumerate(("local", "remote")):
        rows = s["by_confidence"].get(route, {})
        xs, ys, lo, hi = [], [], [], []
        for j, b in enumerate(names):
            g = rows.get(b)
            if g is None or g["acceptance_rate"] is None:
                continue
            xs.append(j + (i - 0.5) * 0.1)
            ys.append(g["acceptance_rate"])
            ci = g["acceptance_ci95"]
            lo.append(g["acceptance_rate"] - ci[0])
            hi.append(ci[1] - g["acceptance_rate"])
            # How many were shown: a point of 3 and a point of 3,000 look alike otherwise.
            ax.annotate(
                f"n={g['shown']:,}",
                # under the interval, clear of the line; above it near the axis
                (xs[-1], ci[0] if ci[0] > 0.08 else ci[1]),
                textcoords="offset points",
                xytext=(0, -11 if ci[0] > 0.08 else 4),
                ha="center",
                fontsize=7,
                color="dimgray",
            )
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=route)
    ax.set_xticks(range(len(names)), names, rotation=20)
    ax.set_xlim(-0.5, max(len(names), 1) - 0.5)
    ax.set_xlabel("local confidence (mean log-prob of the first tokens)")
    ax.set_ylabel("accepted / shown")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    figures.finish(fig, [ax], "Acceptance against confidence (95% Wilson intervals)")
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
