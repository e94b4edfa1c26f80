"""Show a scored run: Markdown tables for the terminal, PNG plots (matplotlib, optional)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PLOT_HINT = "pip install 'synconfroute[eval]' (matplotlib) to get the plots"

LABELS = {
    "local-alone": "local model alone",
    "always-local": "always-local (router)",
    "always-remote": "always-remote",
    "syntax-only": "syntax-only",
    "confidence-only": "confidence-only",
    "synconf": "SynConfRoute",
    "synconf+names": "SynConfRoute + names",
    "oracle": "oracle router",
}
ORDER = (
    "local-alone",
    "always-local",
    "syntax-only",
    "confidence-only",
    "synconf",
    "synconf+names",
    "always-remote",
    "oracle",
)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def remote_label(summary: dict[str, Any]) -> str:
    kind = summary.get("remote")
    if kind == "oracle":
        return "oracle (the ground truth: an UPPER BOUND, not a model)"
    if kind == "none":
        return "none (pass@1 of escalating policies cannot be measured)"
    return str(summary.get("run", {}).get("remote_model") or "configured remote")


def group_markdown(name: str, g: dict[str, Any], summary: dict[str, Any]) -> str:
    upper = summary.get("remote") == "oracle"
    star = "*" if upper else ""
    rows = [
        f"### {name} ({g['n']} tasks)",
        "",
        "| policy | threshold | pass@1 | escalation | kept local | kept-local precision |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    points = {"local-alone": g["local_alone"], **g["policies"]}
    for key in ORDER:
        if key not in points:  # a summary written before the policy existed
            continue
        p = points[key]
        escalates = key != "local-alone" and p["escalated"] > 0
        rows.append(
            f"| {LABELS[key]} | {_num(p['threshold'])} | "
            f"{_pct(p['pass_at_1'])}{star if escalates else ''} | {_pct(p['escalation_rate'])} | "
            f"{p['kept_local']} | {_pct(p['kept_local_precision'])} |"
        )
    rows.append("")
    rl = g["routellm"]
    if any(v["apgr"] is not None for v in rl.values()):
        parts = [
            f"{LABELS[k]} CPT(50%) {_pct(v['cpt50'])}, APGR {_num(v['apgr'], '{:.3f}')}"
            for k, v in rl.items()
        ]
        rows.append("RouteLLM summary: " + "; ".join(parts) + " (random router: APGR 0.5).")
    gate = g["gate"]
    mode = summary.get("gate_mode", "")
    rows.append(
        f"Gate ({mode}) on {gate['checked']} local completions: {gate['false_rejects']} of "
        f"{gate['correct']} correct ones rejected (false rejects); {gate['wrong_invalid']} of "
        f"{gate['wrong']} wrong ones called invalid ({_pct(gate['wrong_invalid_share'])})."
    )
    if "names_false_rejects" in gate:
        rows.append(
            f"Names gate on the valid ones: {gate['names_false_rejects']} of "
            f"{gate['correct_valid']} correct ones flagged (false rejects); "
            f"{gate['wrong_undefined']} of {gate['wrong_valid']} wrong ones use a name "
            "defined nowhere."
        )
    cw = g["confident_wrong"]
    rows.append(
        f"Confident but wrong at t = {cw['threshold']:.2f}: {cw['confident_wrong']} = "
        f"{cw['syntax_invalid']} syntax-invalid ({_pct(cw['syntax_invalid_share'])}) + "
        f"{cw['valid_but_wrong']} valid-but-wrong ({_pct(cw['valid_but_wrong_share'])})"
        + (f" + {cw['undecided']} undecided" if cw["undecided"] else "")
        + " (paper: 46% / 54%)."
    )
    budgets = g["budgets"]
    swept = [k for k in ("confidence-only", "synconf", "synconf+names") if k in g["curves"]]
    rows += [
        "",
        "| escalation budget | "
        + " | ".join(f"{LABELS[k]}: escalation, pass@1, kept-local precision" for k in swept)
        + " |",
        "|---:|" + "---|" * len(swept),
    ]
    for b, pair in budgets.items():
        cells = []
        for key in swept:
            p = pair.get(key)
            cells.append(
                "–"
                if p is None
                else f"{_pct(p['escalation_rate'])}, {_pct(p['pass_at_1'])}{star}, "
                f"{_pct(p['kept_local_precision'])} (t = {p['threshold']:.2f})"
            )
        rows.append(f"| ≤ {float(b) * 100:.0f}% | " + " | ".join(cells) + " |")
    if upper:
        rows += ["", "\\* upper bound: escalated tasks are answered by the ground truth."]
    return "\n".join(rows) + "\n"


def markdown(summary: dict[str, Any]) -> str:
    run = summary.get("run", {})
    head = [
        "## synconfroute eval",
        "",
        f"- local: {run.get('local_backend', '?')} {run.get('local_model', '?')} "
        f"({run.get('local_prompt_mode') or 'prompt mode unknown'})",
        f"- remote: {remote_label(summary)}",
        f"- threshold t = {summary['threshold']:.3f} on the mean log-prob of the first "
        f"{summary['k']} tokens; gate mode {summary['gate_mode']}",
    ]
    if run.get("sandbox"):
        head.append(f"- test programs ran in a sandbox: {run['sandbox']}")
    if summary.get("incomplete"):
        head.append(
            f"- {summary['incomplete']} recorded tasks lack execution results and are left out"
        )
    head.append("")
    return (
        "\n".join(head)
        + "\n"
        + ceiling_markdown(summary.get("ceiling") or {})
        + "\n".join(group_markdown(name, g, summary) for name, g in summary["groups"].items())
    )


def ceiling_markdown(ceiling: dict[str, Any]) -> str:
    """The pipeline's ceiling table (see server.evaluation.ceiling); empty without one."""
    if not ceiling:
        return ""
    rows = [
        "### Pipeline ceiling: each ground truth as the server would insert it",
        "",
        "| dataset/language | tasks | intact | pass (ceiling) | gate rejects | causes of losses |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, g in ceiling.items():
        causes = "; ".join(f"{c}: {k}" for c, k in g["causes"].items()) or "–"
        rejects = "–" if g["gate_rejects"] is None else str(g["gate_rejects"])
        rows.append(
            f"| {name} | {g['n']} | {_pct(g['intact'] / g['n'])} | "
            f"{_pct(g['ceiling'])} | {rejects} | {causes} |"
        )
    rows += [
        "",
        "No model can score above the ceiling through this pipeline; the oracle rows are "
        "bounded by it. Gate rejects: correct ground truths the gate calls invalid (a local "
        "model that wrote them would be escalated).",
        "",
    ]
    return "\n".join(rows) + "\n"


def _plot_groups(summary: dict[str, Any]) -> list[str]:
    names = list(summary["groups"])
    # Per-language panels and the overall one; datasets pooled over languages are left out.
    picked = [n for n in names if "/" in n or n == "all"]
    return picked or names


def plot(summary: dict[str, Any], out: Path) -> list[Path]:
    """pass_at_1.png and kept_local_precision.png in `out`; ImportError if no matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(f"matplotlib is not installed: {PLOT_HINT}") from exc

    from ..learning import figures

    names = _plot_groups(summary)
    upper = summary.get("remote") == "oracle"
    written: list[Path] = []
    styles = {
        "confidence-only": ("tab:blue", "o"),
        "synconf": ("tab:red", "s"),
        "synconf+names": ("tab:olive", "^"),
    }
    fixed = {
        "always-local": ("tab:gray", "v"),
        "syntax-only": ("tab:green", "D"),
        "always-remote": ("black", "^"),
        "oracle": ("tab:purple", "*"),
    }
    for metric, fname, ylabel in (
        ("pass_at_1", "pass_at_1.png", "pass@1"),
        ("kept_local_precision", "kept_local_precision.png", "kept-local precision"),
    ):
        if metric == "pass_at_1" and summary.get("remote") == "none":
            continue
        fig, axes = figures.panels(len(names))
        for ax, name in zip(axes, names, strict=True):
            g = summary["groups"][name]
            for key, (color, marker) in styles.items():
                if key not in g["curves"]:  # a summary written before the policy existed
                    continue
                pts = [
                    (p["escalation_rate"], p[metric])
                    for p in g["curves"][key]
                    if p[metric] is not None
                ]
                if pts:
                    xs, ys = zip(*pts, strict=True)
                    ax.plot(xs, ys, color=color, marker=marker, ms=3, lw=1.2, label=LABELS[key])
            if metric == "pass_at_1":
                weak = g["local_alone"]["pass_at_1"]
                strong = g["policies"]["always-remote"]["pass_at_1"]
                if weak is not None and strong is not None:
                    ax.plot([0, 1], [weak, strong], ls=":", color="gray", lw=1, label="random")
                for key, (color, marker) in fixed.items():
                    p = g["policies"][key]
                    if p[metric] is not None:
                        ax.plot(
                            p["escalation_rate"],
                            p[metric],
                            marker=marker,
                            color=color,
                            ls="none",
                            ms=7,
                            label=LABELS[key],
                        )
                if weak is not None:
                    ax.plot(
                        0,
                        weak,
                        marker="o",
                        color="tab:orange",
                        ls="none",
                        ms=6,
                        label=LABELS["local-alone"],
                    )
            ax.set_title(f"{name} (n={g['n']})", fontsize=9)
            ax.set_xlim(-0.02, 1.02)
            ax.set_xlabel("escalation rate", fontsize=8)
            ax.set_ylabel(
                ylabel
                + (" (oracle remote: upper bound)" if upper and metric == "pass_at_1" else ""),
                fontsize=8,
            )
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
        run = summary.get("run", {})
        figures.finish(
            fig,
            axes,
            f"{ylabel} against escalation rate — local {run.get('local_model', '?')}, "
            f"remote {remote_label(summary)}",
        )
        path = out / fname
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
