"""Every PNG the product draws, rendered at the size users get, with nothing clipped.

The summaries are real: synthetic task outcomes scored by the evaluation's own `summarize`
(1, 2 and 8 panels; 2 tasks and 2,000), and ledgers summed by `stats`.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from synconfroute.server.evaluation import report, scoring  # noqa: E402
from synconfroute.server.learning import figures, stats  # noqa: E402
from synconfroute.server.routing.router import LocalEvidence  # noqa: E402
from synconfroute.server.routing.rules import resolve_rules  # noqa: E402
from synconfroute.server.settings.config import Settings  # noqa: E402

LANGS = ["python", "java", "cpp"]


@contextlib.contextmanager
def checked_savefig() -> Iterator[list[list[str]]]:
    """Every figure saved inside is checked first (`figures.problems`), as users get it."""
    seen: list[list[str]] = []
    real_savefig = plt.Figure.savefig

    def checked(fig: Any, *args: Any, **kw: Any) -> None:
        seen.append(figures.problems(fig))
        real_savefig(fig, *args, **kw)

    mp = pytest.MonkeyPatch()
    mp.setattr(plt.Figure, "savefig", checked)
    try:
        yield seen
    finally:
        mp.undo()


def _tasks(n: int, seed: int) -> list[scoring.TaskOutcome]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        conf = rng.uniform(-3.0, 0.0)
        valid = rng.random() < 0.8
        local_pass = valid and rng.random() < 0.3 + 0.2 * (conf > -1)
        ev = LocalEvidence(
            text="x", logprobs=(conf, conf, conf), syntax="valid" if valid else "invalid"
        )
        out.append(
            scoring.TaskOutcome(
                key=f"t{i}",
                dataset="humaneval",
                language="python",
                evidence=ev,
                confidence=conf,
                local_pass=local_pass,
                remote=True,
                remote_ok=True,
                remote_text="y",
                remote_pass=rng.random() < 0.7,
            )
        )
    return out


def _summary(panels: int, n: int, remote: str = "oracle") -> dict[str, Any]:
    groups = {}
    for p in range(panels):
        name = f"safim-block/{LANGS[p % 3]}{p // 3 or ''}" if p else "humaneval/python"
        groups[name] = scoring.summarize(_tasks(n, p), rules=resolve_rules(Settings(), ""))
    return {
        "run": {"local_model": "SmolLM2-135M-Instruct.Q4_1", "remote_model": "x"},
        "remote": remote,
        "groups": groups,
    }


@pytest.mark.parametrize("panels", [1, 2, 8])
@pytest.mark.parametrize("n", [2, 2000])
def test_eval_plots_hold_for_any_panel_count(tmp_path: Path, panels: int, n: int) -> None:
    with checked_savefig() as seen:
        written = report.plot(_summary(panels, n), tmp_path)
    assert [p.name for p in written] == ["pass_at_1.png", "kept_local_precision.png"]
    assert seen == [[], []]
    assert all(p.stat().st_size > 10_000 for p in written)


def test_the_check_fails_on_the_old_layout() -> None:
    """The layout eval used before (tight_layout, a 4.2-inch figure for one panel, an
    8-column legend at the bottom, a long title): the check must see what the user saw."""
    fig, axes = plt.subplots(1, 1, figsize=(4.2, 3.6), squeeze=False)
    ax = axes[0][0]
    for i in range(8):
        ax.plot([0, 1], [0, i], label=f"policy number {i}")
    ax.set_xlabel("escalation rate")
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=8, fontsize=8)
    fig.suptitle(
        "pass@1 against escalation rate — local SmolLM2-135M-Instruct.Q4_1, remote oracle "
        "(the ground truth: an UPPER BOUND, not a model)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    found = figures.problems(fig)
    plt.close(fig)
    assert any(p.startswith("title outside") for p in found), found
    assert any(p.startswith("legend 0 outside") for p in found), found

    # A legend laid over the axis label (tight_layout leaves it no room of its own).
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot([0, 1], [0, 1], label="SynConfRoute")
    ax.set_xlabel("escalation rate")
    fig.tight_layout()
    fig.legend(loc="lower center")
    found = figures.problems(fig)
    plt.close(fig)
    assert any("overlaps panel 0's x label" in p for p in found), found


def _ledger_summary(n: int, buckets: int) -> dict[str, Any]:
    rng = random.Random(n)
    decisions = []
    accepted = set()
    for i in range(n):
        conf = -0.05 - rng.random() * (0.5 * buckets)
        d = {
            "id": f"d{i}",
            "route": "local" if conf > -1 else "remote",
            "reasons": ["confident-and-valid"],
            "confidence": conf,
            "latency_ms": {"total": 100.0},
            "bytes_sent": 0,
            "shown": True,
            "retained": {},
        }
        decisions.append(d)
        if rng.random() < 0.4:
            accepted.add(d["id"])
    for d in decisions:
        d["accepted"] = d["id"] in accepted
        d["dismissed"] = not d["accepted"]
    return stats.compute(decisions, [])


@pytest.mark.parametrize(("n", "buckets"), [(1, 1), (3, 2), (5000, 12)])
def test_stats_plot_holds_for_few_and_many_points(tmp_path: Path, n: int, buckets: int) -> None:
    with checked_savefig() as seen:
        out = stats.plot(_ledger_summary(n, buckets), tmp_path / "s.png")
    assert out.exists()
    assert seen == [[]]
