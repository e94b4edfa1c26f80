"""Human text for a decision: the Markdown route card (hover, documentation) and one-liners."""

from __future__ import annotations

from .record import RouteDecision

_ROUTE_TITLE = {
    "local": "stayed on this machine",
    "remote": "escalated to the remote model",
    "none": "no completion",
}
# One plain sentence per reason the router can give (keys: the `Reason` values; a test
# checks that every reason has one). The card shows the code too: it is what
# `stats`, the ledger and the settings speak.
WHY = {
    "confident-and-valid": "the local model was confident and its code parses",
    "confident": "the local model was confident (policy `confidence`: no syntax check)",
    "syntax-valid": "the local code parses (policy `syntax`: confidence not used)",
    "syntax-unchecked": "no syntax checker for this language: kept on confidence alone",
    "low-confidence": "the local model was unsure (confidence below the threshold)",
    "no-logprobs": "the local server gave no token probabilities, so confidence is unknown",
    "empty-local": "the local model wrote nothing",
    "no-edit": "the local model rewrote the region unchanged, confidently: nothing to "
    "suggest, nothing escalated",
    "local-too-slow": "the local model cannot rewrite a region within next_edit.local_ms, so "
    "next edits are off for now and nothing was sent (next_edit.only_in_time)",
    "syntax-invalid": "the local code would break the file's syntax",
    "syntax-timeout": "the syntax check ran out of time",
    "syntax-skipped": "the file is larger than routing.syntax_max_bytes: syntax not checked",
    "undefined-name": "the local code uses a name nothing in the file defines where it is used",
    "policy-local": "routing.policy keeps every completion local",
    "policy-remote": "routing.policy sends every completion to the remote model",
    "local-unavailable": "the local model could not answer (see the problem below)",
    "local-timeout": "the local model did not answer within its time budget",
    "remote-ok": "the remote model answered",
    "verified-draft": "the remote model checked the local answer and would have written "
    "it itself, token by token (remote.verify_draft)",
    "remote-failed": "the remote model failed (see the problem below)",
    "remote-failed-kept-local": "the remote model failed, so the local answer was kept",
    "remote-empty": "the remote model wrote nothing",
    "no-remote-configured": "no remote model is configured: nothing leaves this machine",
    "local-only": "privacy.local_only is on: nothing leaves this machine",
    "privacy-blocked": "privacy settings forbid sending this file off the machine",
    "kept-local-unconfirmed": "it would have escalated but could not, so the local answer "
    "was kept unconfirmed",
    "cache-hit": "the same request was answered a moment ago (no model asked)",
    "cluster-busy": "the cluster is queueing, slow or shedding load, so the bar for escalating is "
    "higher for now (routing.backpressure)",
    "escalation-budget": "this machine used its share of escalations for the last minutes "
    "(routing.escalation_budget)",
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

_ORDER = {k: i for i, k in enumerate(_STAGES)}


def _stage_order(item: tuple[str, float]) -> int:
    return _ORDER.get(item[0], len(_ORDER))


def summary(rec: RouteDecision) -> str:
    """One line: route, reasons, confidence (status bars, diagnostics, completion labels)."""
    conf = "" if rec.confidence is None else f", confidence {rec.confidence:.2f}"
    return f"synconfroute: {rec.route} ({', '.join(rec.reasons)}{conf})"


def route_card(rec: RouteDecision, *, markdown: bool = True) -> str:
    """The card shown on hover over the line of the last completion: Markdown, or plain
    text (`synconfroute complete` prints it under the completion)."""
    lines = [f"**synconfroute**: {rec.route}, {_ROUTE_TITLE.get(rec.route, rec.route)}", ""]
    if rec.reasons:
        lines.append("- why:")
        lines += [f"  - `{r}`: {WHY[r]}" if r in WHY else f"  - `{r}`" for r in rec.reasons]
    else:
        lines.append("- why: -")
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
        # The mode once; the checker only when another tool decided (compiler, confirm).
        by = s.mode if s.checker in ("", "none", s.mode) else f"{s.mode}: {s.checker}"
        if s.undefined:
            lines.append(f"- syntax: {s.status} ({by})")
            names = ", ".join(f"`{n}`" for n in s.undefined)
            what = (
                "not declared in scope"  # C/C++: by scope, see syntax/_cscope
                if "in scope" in s.message
                else "defined nowhere in the file"
            )
            lines.append(f"- names: {names} {what}{where}")
        else:
            lines.append(f"- syntax: {s.status} ({by}){where}{msg}")
    else:
        lines.append("- syntax: not checked")
    lines.append(f"- models: local `{rec.local_model or '-'}`, remote `{rec.remote_model or '-'}`")
    if rec.latency_ms:
        # In the order things happen (the record keeps them in the order they were timed).
        timed = sorted(rec.latency_ms.items(), key=_stage_order)
        stages = ", ".join(f"{_STAGES.get(k, k)} {v:.0f} ms" for k, v in timed)
        lines.append(f"- latency: {stages}")
    for tier, cut in rec.truncated.items():
        what = f"{cut.lines} line{'s' if cut.lines != 1 else ''} ({cut.chars:,} characters)"
        how = {
            "gate": "to keep whole lines the syntax gate accepts, with no block left open",
            "nothing": "and nothing shown: no run of whole lines was complete code",
        }.get(cut.kept, "to keep whole lines")
        lines.append(
            f"- truncated: the {tier} model hit its token budget (max_tokens); {what} dropped {how}"
        )
    if rec.draft_tokens:
        share = rec.draft_kept / rec.draft_tokens
        lines.append(
            f"- local draft: the remote model kept {rec.draft_kept} of its "
            f"{rec.draft_tokens} tokens ({100 * share:.0f}%) and generated the rest"
        )
    lines.append(f"- sent off this machine: {rec.bytes_sent:,} bytes")
    if rec.egress:
        lines.append(f"- egress gate: {rec.egress}")
    if rec.context_files:
        fed: dict[str, tuple[int, list[str]]] = {}
        for path, size, tier in rec.context_files:
            n, tiers = fed.get(path, (0, []))
            fed[path] = (max(n, size), [*tiers, tier])
        shown = ", ".join(f"`{p}` {n:,} B ({'+'.join(t)})" for p, (n, t) in fed.items())
        lines.append(f"- context from other files: {shown}")
    if rec.context_sharing:
        lines.append(f"- other files' code goes to: {rec.context_sharing}")
    if rec.load:
        lines.append(f"- cluster: {rec.load}")
    if rec.cache_hit:
        lines.append("- served from the cache (no model asked)")
    if rec.route == "remote" and rec.local_completion:
        first = rec.local_completion.split("\n", 1)[0][:80]
        lines.append(f"- the local model had offered: `{first}`")
    for err in rec.errors:
        lines.append(f"- problem: {err}")
    text = "\n".join(lines)
    return text if markdown else text.replace("**", "").replace("`", "")
