"""What a newcomer reads: the route card for every reason, and the text of `stats`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from synconfroute.server.learning.ledger import Ledger
from synconfroute.server.routing.router import Reason
from synconfroute.server.vocab.card import WHY, route_card
from synconfroute.server.vocab.record import Latency, RouteDecision
from synconfroute.server.vocab.verdict import Verdict


def _rec(reasons: list[str], **kw: object) -> RouteDecision:
    base: dict[str, object] = {
        "completion": "a + b",
        "route": "local",
        "reasons": reasons,
        "policy": "synconf",
        "confidence": -0.2,
        "threshold": -0.5,
        "syntax": Verdict(valid=True, status="valid", mode="tree-sitter", checker="tree-sitter"),
        "local_model": "smollm2",
        "remote_model": None,
    }
    base.update(kw)
    return RouteDecision(**base)  # type: ignore[arg-type]


def test_every_reason_the_router_gives_is_explained() -> None:
    missing = [r.value for r in Reason if r.value not in WHY]
    assert missing == []
    stale = sorted(set(WHY) - {r.value for r in Reason})
    assert stale == []


@pytest.mark.parametrize("reason", [r.value for r in Reason])
def test_card_for_each_reason_says_why_in_words(reason: str) -> None:
    card = route_card(_rec([reason]))
    assert f"`{reason}`: {WHY[reason]}" in card
    assert "None" not in card and "nan" not in card


def test_card_names_the_mode_once_and_the_checker_only_when_it_differs() -> None:
    bad = Verdict(
        valid=False,
        status="invalid",
        mode="tree-sitter",
        checker="tree-sitter",
        line=1,
        column=11,
        message="missing ')'",
    )
    card = route_card(_rec(["syntax-invalid", "remote-ok"], route="remote", syntax=bad))
    assert "- syntax: invalid (tree-sitter) at line 2, column 12: missing ')'" in card
    assert "tree-sitter, tree-sitter" not in card
    confirmed = Verdict(valid=False, status="invalid", mode="confirm", checker="g++", message="x")
    assert "- syntax: invalid (confirm: g++): x" in route_card(
        _rec(["syntax-invalid"], syntax=confirmed)
    )


def test_stats_prints_latency_percentiles_on_one_line(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.jsonl")
    for i, ms in enumerate((10.0, 20.0, 30.0, 400.0)):
        rec = _rec(["confident-and-valid"], latency=Latency(total=ms))
        led.decision(f"c{i}", rec)
    out = subprocess.run(
        [sys.executable, "-m", "synconfroute", "stats", "--ledger", str(tmp_path / "l.jsonl")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = out.splitlines()
    (lat,) = [ln for ln in lines if ln.startswith("latency")]
    assert lat.split() == ["latency", "p50", "20", "ms", "p95", "400", "ms"]
    # The reasons line comes after it, not between two latency lines.
    assert lines.index(lat) < next(i for i, ln in enumerate(lines) if ln.startswith("reasons"))


def test_stats_into_a_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.jsonl")
    for i in range(1500):  # more than a pipe buffer of text
        led.decision(f"c{i}", _rec(["confident-and-valid"], language=f"lang{i}"))
    r = subprocess.run(
        f"'{sys.executable}' -m synconfroute stats --ledger '{tmp_path / 'l.jsonl'}' | head -1",
        shell=True,
        capture_output=True,
        text=True,
    )
    assert r.stdout.startswith("ledger ")
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr


def test_settings_reads_as_text_with_sources(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[routing]\nthreshold = -0.8\n[privacy]\nnever_send = ["secrets/**"]\n')
    env = {
        "SYNCONFROUTE_CONFIG": str(cfg),
        "SYNCONFROUTE_REMOTE_URL": "http://gpu:8000/v1",
        "SYNCONFROUTE_REMOTE_MODEL": "big",
        "PATH": "/usr/bin:/bin",
    }
    r = subprocess.run(
        [sys.executable, "-m", "synconfroute", "settings"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    text = r.stdout
    rows, section = {}, ""
    for ln in text.splitlines():  # keys by section: [next_edit] has a threshold too
        if ln.startswith("["):
            section = ln.strip("[] ")
        elif ln.startswith("  "):
            rows[f"{section}.{ln.split()[0]}"] = ln.split()[1:]
    assert rows["routing.threshold"] == ["-0.8", "file"]
    (remote_url,) = [ln for ln in text.splitlines() if '"http://gpu:8000/v1"' in ln]
    assert remote_url.split() == ["url", '"http://gpu:8000/v1"', "environment"]
    assert "escalated completions go to http://gpu:8000/v1 (model big)" in text
    assert "never sent: secrets/**" in text
    assert max(len(ln) for ln in text.splitlines()) <= 100
    j = subprocess.run(
        [sys.executable, "-m", "synconfroute", "settings", "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert '"threshold": -0.8' in j.stdout


def test_card_lists_latency_in_the_order_things_happen() -> None:
    rec = _rec(
        ["confident-and-valid"],
        latency=Latency(total=9.0, gate=1.0, local_total=8.0, local_first_token=3.0),
    )
    (line,) = [ln for ln in route_card(rec).splitlines() if ln.startswith("- latency")]
    assert line == (
        "- latency: local first token 3 ms, local total 8 ms, syntax gate 1 ms, total 9 ms"
    )


def test_the_gate_points_at_the_bracket_the_completion_never_closes() -> None:
    """The VS Code card used to say "unexpected 'a'" at the start of `a + (b`."""
    from synconfroute.server.syntax import SyntaxDocument

    doc = SyntaxDocument("def add(a, b):\n    return \n\n\nprint(add(1, 2))\n", "python")
    v = doc.check("a + (b", at=(1, 11))
    assert (v.status, v.line, v.column, v.message) == ("invalid", 1, 15, "'(' is never closed")
    card = route_card(_rec(["syntax-invalid"], route="remote", syntax=v))
    assert "- syntax: invalid (tree-sitter) at line 2, column 16: '(' is never closed" in card
    # A completion that closes what it opens keeps tree-sitter's own site.
    assert doc.check("a + (b", at=(1, 11)).message != doc.check("a +", at=(1, 11)).message
