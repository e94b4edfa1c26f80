"""Learning from the user: `stats` per route/language/confidence, `calibrate --from-ledger`
on generated ledgers whose answer is known, adaptive mode, and its settings rules."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from synconfroute.server.commands.cli import main
from synconfroute.server.evaluation.calibrate import CalibrationError
from synconfroute.server.evaluation.from_ledger import choose
from synconfroute.server.learning import later
from synconfroute.server.learning.adaptive import Adaptive
from synconfroute.server.learning.ledger import Ledger, load
from synconfroute.server.learning.stats import bucket, compute, wilson
from synconfroute.server.settings import config
from synconfroute.server.vocab.kinds import Reason as R
from synconfroute.server.vocab.record import Latency, RouteDecision

STEP = -1.0  # local completions at or above this confidence are good, below bad
P_GOOD, P_BAD, P_REMOTE = 0.9, 0.2, 0.6


def rec(route: str, conf: float, threshold: float, language: str = "python") -> RouteDecision:
    return RouteDecision(
        completion="secret_value = compute()",
        local_completion="secret_value = compute()",
        route=route,  # type: ignore[arg-type]
        reasons=(R.CONFIDENT_AND_VALID,) if route == "local" else (R.LOW_CONFIDENCE, R.REMOTE_OK),
        policy="synconf",
        confidence=conf,
        threshold=threshold,
        syntax=None,
        local_model="qwen2.5-coder:3b",
        remote_model="big",
        latency=Latency(total=100.0 if route == "local" else 400.0),
        bytes_sent=0 if route == "local" else 1000,
        language=language,
        path="/home/me/secret/a.py",
    )


def every(k: int, n: int) -> list[bool]:
    """A deterministic pattern with exactly round(rate * n) successes (k of each n)."""
    return [(i * k) % n < k for i in range(n)]


def synthetic_ledger(path: Path, n: int = 400) -> None:
    """Confidences spread evenly over [-2, 0); half the decisions under a threshold that
    keeps everything local, half under one that escalates everything, so both routes are
    seen at every confidence. Local acceptance is 90% at or above -1, 20% below; remote
    60% everywhere: the best threshold is -1 (escalation 50%)."""
    led = Ledger(path)
    pattern = {True: every(9, 10), False: every(2, 10)}
    remote_pattern = every(6, 10)
    for i in range(n):
        conf = -2.0 + 2.0 * (i // 2) / (n // 2) + 0.001
        local = i % 2 == 0
        did = f"c{i}"
        led.decision(did, rec("local" if local else "remote", conf, -9.0 if local else 0.0))
        led.event("shown", did)
        j = (i // 2) % 10
        ok = pattern[conf >= STEP][j] if local else remote_pattern[j]
        led.event("accepted" if ok else "dismissed", did)
        if ok:
            led.retained(did, 30, 1.0, 24, False)
            led.retained(did, 300, 0.9, 24, False)


def test_calibrate_from_ledger_finds_the_known_threshold(tmp_path: Path) -> None:
    synthetic_ledger(tmp_path / "l.jsonl")
    decisions, _, bad = load(tmp_path / "l.jsonl")
    assert bad == 0
    c = choose(decisions, best=True)
    assert STEP - 0.02 <= c.threshold <= STEP + 0.02
    assert c.point.escalation == pytest.approx(0.5, abs=0.01)
    lo, hi = c.ci
    assert lo < (P_GOOD + P_REMOTE) / 2 < hi and hi - lo < 0.2
    # A budget below 50% escalates as much as it may: the highest threshold within it.
    c30 = choose(decisions, budget=0.3)
    assert c30.point.escalation <= 0.3 and c30.point.escalation > 0.28
    assert c30.threshold < STEP


def test_retention_counts_in_the_goal(tmp_path: Path) -> None:
    """Local completions above the step are accepted but then rewritten: not retained.
    Then escalating everything wins."""
    path = tmp_path / "l.jsonl"
    synthetic_ledger(path)
    decisions, _, _ = load(path)
    for d in decisions:
        if d["route"] == "local" and d["accepted"]:
            d["retained"] = {30.0: 0.1, 300.0: 0.0}
    c = choose(decisions, best=True)
    assert c.point.escalation == pytest.approx(1.0)


def test_calibrate_refuses_a_small_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "l.jsonl"
    synthetic_ledger(path, n=120)
    decisions, _, _ = load(path)
    with pytest.raises(CalibrationError, match="80 more decisions needed"):
        choose(decisions, best=True)
    cfg = tmp_path / "c.toml"
    code = main(["--config", str(cfg), "calibrate", "--from-ledger", str(path), "--best"])
    assert code == 1 and "80 more decisions needed" in capsys.readouterr().err
    assert not cfg.exists()


def test_calibrate_cli_writes_the_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "l.jsonl"
    synthetic_ledger(path)
    cfg = tmp_path / "c.toml"
    cfg.write_text("# mine\n[routing]\nthreshold = -0.5  # keep this comment\n")
    assert main(["--config", str(cfg), "calibrate", "--from-ledger", str(path), "--best"]) == 0
    out = capsys.readouterr().out
    assert "95% CI" in out and "Wilson" in out
    loaded = config.load(cfg, environ={})
    assert STEP - 0.02 <= loaded.settings.routing.threshold <= STEP + 0.02
    assert "# keep this comment" in cfg.read_text()


def test_no_local_evidence_below_a_fixed_threshold(tmp_path: Path) -> None:
    """Under one fixed threshold the ledger never shows a local completion below it:
    calibration may not lower the threshold past that (it cannot know)."""
    led = Ledger(tmp_path / "l.jsonl")
    for i in range(300):
        conf = -2.0 + 2.0 * i / 300
        route = "local" if conf >= -0.5 else "remote"
        led.decision(f"c{i}", rec(route, conf, -0.5))
        led.event("shown", f"c{i}")
        led.event("accepted" if i % 3 else "dismissed", f"c{i}")
    decisions, _, _ = load(tmp_path / "l.jsonl")
    c = choose(decisions, best=True)
    assert c.threshold >= -0.5 - 0.25  # one bin of slack: bins are 0.25 wide


def test_stats_text_json_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "l.jsonl"
    synthetic_ledger(path, n=40)
    led = Ledger(path)
    led.decision("j1", rec("local", -0.05, -0.5, language="java"))
    led.event("shown", "j1")
    assert main(["stats", "--ledger", str(path), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["by_route"]["local"]["shown"] == 21 and s["by_route"]["remote"]["shown"] == 20
    assert s["by_language"]["java"]["completions"] == 1
    assert s["by_route"]["remote"]["acceptance_rate"] == pytest.approx(0.6)
    assert s["by_route"]["remote"]["bytes_sent"] == 20_000
    assert s["by_route"]["local"]["latency_ms_p95"] == 100.0
    assert s["by_route"]["remote"]["retention"]["300s"]["mean"] == pytest.approx(0.9)
    top = s["by_confidence"]["local"]["[-0.25, -0.1)"]
    assert top["acceptance_rate"] == pytest.approx(0.9, abs=0.11)
    assert main(["stats", "--ledger", str(path)]) == 0
    text = capsys.readouterr().out
    assert "ret 300s" in text and "local confidence" in text and "java" in text
    png = tmp_path / "acc.png"
    assert main(["stats", "--ledger", str(path), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_stats_plot_without_matplotlib(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.jsonl"
    synthetic_ledger(path, n=10)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if absent
    assert main(["stats", "--ledger", str(path), "--plot", str(tmp_path / "x.png")]) == 1
    assert "matplotlib is not installed" in capsys.readouterr().err


def test_buckets_and_wilson() -> None:
    assert bucket(None) == "unmeasured"
    assert bucket(-3.0) == "[-inf, -2)"
    assert bucket(-0.3) == "[-0.5, -0.25)"
    assert bucket(0.0) == "[-0.1, 0)"
    lo, hi = wilson(45, 50) or (0, 0)
    assert lo == pytest.approx(0.7864, abs=1e-3) and hi == pytest.approx(0.9565, abs=1e-3)
    assert wilson(0, 0) is None
    assert compute([], [])["completions"] == 0


# -- adaptive ------------------------------------------------------------------------


def p_local(c: float, star: float) -> float:
    """Local acceptance grows with confidence; it equals the remote's 0.6 at `star`."""
    return min(0.95, max(0.05, P_REMOTE + 0.8 * (c - star)))


def simulate(a: Adaptive, star: float, n: int, seed: int = 1) -> list[float]:
    rnd = random.Random(seed)
    seen = []
    for _ in range(n):
        c = rnd.uniform(-2.5, 0.0)
        route = "local" if c >= a.current else "remote"
        p = p_local(c, star) if route == "local" else P_REMOTE
        a.observe(c, route, rnd.random() < p)
        assert a.lo <= a.current <= a.hi
        seen.append(a.current)
    return seen


@pytest.mark.parametrize("start", [-0.2, -1.5])
def test_adaptive_converges_from_either_side(start: float) -> None:
    a = Adaptive(start, -1.8, -0.1, step=0.05, every=50)
    trace = simulate(a, star=-0.8, n=30_000)
    tail = trace[-10_000:]
    assert abs(sum(tail) / len(tail) - (-0.8)) < 0.15
    assert a.moves and all(abs(m.new - m.old) <= 0.05 + 1e-9 for m in a.moves)
    # At most one move per 50 decisions.
    assert len(a.moves) <= 30_000 // 50


def test_adaptive_never_leaves_its_bounds() -> None:
    a = Adaptive(-0.3, -0.6, -0.2, step=0.05, every=50)  # the optimum (-0.8) is outside
    trace = simulate(a, star=-0.8, n=10_000)
    assert min(trace) >= -0.6 and max(trace) <= -0.2
    assert trace[-1] == pytest.approx(-0.6)
    assert "bound" in a.why
    b = Adaptive(-5.0, -1.0, -0.5)  # a configured value outside the bounds is clamped
    assert b.current == -1.0 and "clamped" in b.why


def test_adaptive_waits_for_evidence() -> None:
    a = Adaptive(-0.5, -1.5, -0.1, every=50, near=30)
    for _ in range(200):  # only local outcomes: nothing to compare with
        assert a.observe(-0.2, "local", False) is None
    assert a.current == -0.5


# -- adaptive settings and the workspace rule ----------------------------------------


def test_workspace_cannot_turn_adaptive_on_nor_widen_its_bounds() -> None:
    user = config.Settings()
    ws, issues = config.merge_workspace(
        user, {"routing": {"adaptive": True, "adaptive_max": -0.01, "adaptive_min": -0.3}}
    )
    refused = {i.key for i in issues if i.message.startswith("refused")}
    assert refused == {"routing.adaptive", "routing.adaptive_max", "routing.adaptive_min"}
    assert not ws.routing.adaptive and ws.routing.adaptive_max == user.routing.adaptive_max


def test_workspace_may_tighten_adaptive_and_its_lowered_threshold_caps_it() -> None:
    user, _ = config.merge(config.Settings(), {"routing": {"adaptive": True}})
    ws, issues = config.merge_workspace(user, {"routing": {"threshold": -0.9}})
    assert not [i for i in issues if i.message.startswith("refused")]
    assert ws.routing.adaptive and ws.routing.adaptive_max == -0.9
    off, issues = config.merge_workspace(user, {"routing": {"adaptive": False}})
    assert not off.routing.adaptive and not issues


async def test_session_adaptive_moves_show_in_status_hover_ledger_and_routing(
    tmp_path: Path,
) -> None:
    from synconfroute.server.routing.pipeline import Pipeline
    from synconfroute.server.session.session import Session

    settings, _ = config.merge(
        config.Settings(),
        {"routing": {"adaptive": True, "adaptive_every": 5, "adaptive_max": -0.3}},
    )
    loaded = config.Loaded(settings, (), tmp_path / "c.toml", False)
    s = Session(
        loaded,
        ledger=Ledger(tmp_path / "l.jsonl"),
        make_pipeline=lambda st: Pipeline(st, None, None),
    )
    assert s.status().threshold == -0.5 and s.status().adaptive["decisions"] == 0
    rnd = random.Random(3)
    for i in range(400):  # local completions always dismissed, remote ones accepted
        conf = rnd.uniform(-1.5, 0.0)
        route = "local" if conf >= s.status().threshold else "remote"
        s.decision_log.decisions[f"c{i}"] = rec(route, conf, s.status().threshold)
        s._resolve(f"c{i}", accepted=route == "remote")
    st = s.status()
    assert st.threshold == -0.3  # raised to its bound, never past it
    assert "raised" in " ".join(m.why for m in s.decision_log.adaptive.moves)  # type: ignore[union-attr]
    assert "bound" in st.adaptive["why"]
    await s.pipeline()
    assert s.rules().threshold == -0.3  # the routing uses it
    await later.settle()  # the ledger's lines are written after the response: now
    moves = load(tmp_path / "l.jsonl")[1]
    assert [m["adaptive"] for m in moves] == [-0.45, -0.4, -0.35, -0.3]
    uri = "file:///p/a.py"
    s.open(uri, "x = 1\n", "python")
    doc = s.document(uri)
    assert doc is not None
    doc.last = ("c399", 0, 0)
    card = s.hover(uri, 0)
    assert card is not None and "adaptive threshold now -0.300" in card
    # A new server run carries on from the ledger's last move ...
    again = Session(loaded, ledger=Ledger(tmp_path / "l.jsonl"))
    assert again.status().threshold == -0.3
    assert "resumed" in again.status().adaptive["why"]
    # ... unless the configured threshold changed since (e.g. a new calibration).
    fresh_settings, _ = config.merge(settings, {"routing": {"threshold": -0.6}})
    fresh = Session(
        config.Loaded(fresh_settings, (), tmp_path / "c.toml", False),
        ledger=Ledger(tmp_path / "l.jsonl"),
    )
    assert fresh.status().threshold == -0.6
