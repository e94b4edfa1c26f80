"""Human text for a decision: the Markdown route card (hover, documentation) and one-liners."""

from __future__ import annotations

from .record import RouteDecision

_ROUTE_TITLE = {
    "local": "stayed on this machine",
    "remote": "escalated to the remote model",
    "none": "no completion",
}
_STAGES = {
    "local_first_token": "local first token",
    "local_total": "local total",
    "local_rerun": "local rerun",
    "gate": "syntax gate",
    "remote_first_token": "remote first token",
    "remote_total": "remote total",
    "remote_gate": "syntax gate on the remote's cut text",
    "total": "total",
}


def summary(rec: RouteDecision) -> str:
    """One line: route, reasons, confidence (status bars, diagnostics, completion labels)."""
    conf = "" if rec.confidence is None else f", confidence {rec.confidence:.2f}"
    return f"synconfroute: {rec.route} ({', '.join(rec.reasons)}{conf})"


def route_card(rec: RouteDecision) -> str:
    """The Markdown card shown on hover over the line of the last completion."""
    lines = [f"**synconfroute**: {rec.route}, {_ROUTE_TITLE.get(rec.route, rec.route)}", ""]
    lines.append(f"- reasons: {', '.join(f'`{r}`' for r in rec.reasons) or '-'}")
    if rec.confidence is not None:
        cmp = "≥" if rec.confidence >= rec.threshold else "<"
        lines.append(
            f"- confidence: {rec.confidence:.3f} {cmp} threshold {rec.threshold:.3f} "
            f"(policy `{rec.policy}`)"
        )
    else:
        lines.append(f"- confidence: not measured (threshold {rec.threshold:.3f})")
    if rec.syntax is not None:
        s = rec.syntax
        where = "" if s.line is None else f" at line {s.line + 1}, column {(s.column or 0) + 1}"
        msg = f": {s.message}" if s.message and s.status != "valid" else ""
        if s.undefined:
            lines.append(f"- syntax: {s.status} ({s.mode}, {s.checker or '-'})")
            names = ", ".join(f"`{n}`" for n in s.undefined)
            lines.append(f"- names: {names} defined nowhere in the file{where}")
        else:
            lines.append(f"- syntax: {s.status} ({s.mode}, {s.checker or '-'}){where}{msg}")
    else:
        lines.append("- syntax: not checked")
    lines.append(f"- models: local `{rec.local_model or '-'}`, remote `{rec.remote_model or '-'}`")
    if rec.latency_ms:
        stages = ", ".join(f"{_STAGES.get(k, k)} {v:.0f} ms" for k, v in rec.latency_ms.items())
        lines.append(f"- latency: {stages}")
    for tier, cut in rec.truncated.items():
        what = f"{cut.lines} line{'s' if cut.lines != 1 else ''} ({cut.chars:,} characters)"
        lines.append(
            f"- truncated: the {tier} model hit its token budget (max_tokens); "
            f"{what} dropped to keep whole lines"
        )
    lines.append(f"- sent off this machine: {rec.bytes_sent:,} bytes")
    if rec.context_files:
        fed: dict[str, tuple[int, list[str]]] = {}
        for path, size, tier in rec.context_files:
            n, tiers = fed.get(path, (0, []))
            fed[path] = (max(n, size), [*tiers, tier])
        shown = ", ".join(f"`{p}` {n:,} B ({'+'.join(t)})" for p, (n, t) in fed.items())
        lines.append(f"- context from other files: {shown}")
    if rec.context_sharing:
        lines.append(f"- other files' code goes to: {rec.context_sharing}")
    if rec.cache_hit:
        lines.append("- served from the cache (no model asked)")
    if rec.route == "remote" and rec.local_completion:
        first = rec.local_completion.split("\n", 1)[0][:80]
        lines.append(f"- the local model had offered: `{first}`")
    for err in rec.errors:
        lines.append(f"- problem: {err}")
    return "\n".join(lines)
