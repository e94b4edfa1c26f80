"""A hostile or damaged ledger (issue 20): each line is checked against its schema, a bad
line is counted as unreadable and skipped. `serve` starts, `stats`, `stats --json` and
`calibrate --from-ledger` work and report the count; nothing raises."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from lsprotocol import types as t

from synconfroute.server.commands.cli import main
from synconfroute.server.learning.ledger import Ledger, entry, load
from synconfroute.server.vocab.kinds import Reason
from synconfroute.server.vocab.record import Latency, RouteDecision
from tests.lsp_harness import capabilities, start, stop, write_config

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJ = '{"route":"local","id":"x:1","reasons":' + "[" * 50_000 + "]" * 50_000 + "}"


def _decision(**changes: object) -> str:
    good = {
        "t": 1.0,
        "id": "bad:c1",
        "route": "local",
        "reasons": ["confident-and-valid"],
        "policy": "synconf",
        "confidence": -0.1,
        "threshold": -0.5,
        "syntax": "valid",
        "local_model": "m",
        "remote_model": "r",
        "language": "python",
        "latency_ms": {"total": 12.0},
        "bytes_sent": 0,
        "context_bytes": 0,
        "cache_hit": False,
        "early": False,
        "local_text": True,
        "chars": 3,
    }
    good.update(changes)
    return json.dumps(good)


HOSTILE = {
    "list route": _decision(route=["local"]),
    "unknown route": _decision(route="elsewhere"),
    "int reasons": _decision(reasons=7),
    "int in reasons": _decision(reasons=[1, 2]),
    "string latency": _decision(latency_ms="fast"),
    "string latency value": _decision(latency_ms={"total": "12"}),
    "null bytes": _decision(language="py\u0000thon", id="\u0000"),
    "string confidence": _decision(confidence="-0.1"),
    "NaN confidence": _decision(confidence=math.nan),
    "null route": _decision(route=None),
    "string bytes": _decision(bytes_sent="300"),
    "deep list": DEEP,
    "deep field": DEEP_OBJ,
    "adaptive string": '{"adaptive":"x","from":-0.5,"start":-0.5,"why":"w"}',
    "adaptive null": '{"adaptive":null,"from":-0.5,"start":-0.5,"why":"w"}',
    "adaptive NaN": '{"adaptive":NaN,"from":-0.5,"start":-0.5,"why":"w"}',
    "adaptive inf": '{"adaptive":-Infinity,"from":-0.5,"start":-0.5,"why":"w"}',
    "retained strings": '{"retained":"bad:c1","after_s":"30","ratio":"x"}',
    "accepted object": '{"accepted":{"id":1}}',
    "list line": "[1, 2, 3]",
    "null line": "null",
}


def _rec(route: str, conf: float) -> RouteDecision:
    return RouteDecision(
        completion="x",
        local_completion="x",
        route=route,  # type: ignore[arg-type]
        reasons=(Reason("confident-and-valid"),),
        policy="synconf",
        confidence=conf,
        threshold=-0.5,
        syntax=None,
        local_model="m",
        remote_model="r",
        latency=Latency(total=10.0),
    )


def _ledger(path: Path, hostile: str) -> Path:
    led = Ledger(path)
    for i in range(6):
        did = f"c{i}"
        led.decision(did, _rec("local" if i % 2 else "remote", -0.1 * i))
        led.event("shown", did)
        led.event("accepted" if i % 3 else "dismissed", did)
        led.retained(did, 30, 1.0, 3, False)
    with path.open("a") as f:
        f.write(hostile + "\n")
    return path


def test_every_field_a_decision_writes_is_in_the_schema() -> None:
    d = json.loads(json.dumps(entry("run:c1", _rec("local", -0.2))))
    (decisions, _, bad) = _load_lines([json.dumps(d)])
    assert bad == 0 and set(d) <= set(decisions[0])


def _load_lines(lines: list[str]) -> tuple[list[dict[str, object]], list[dict[str, object]], int]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "l.jsonl"
        p.write_text("\n".join(lines) + "\n")
        return load(p)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_line_is_counted_and_skipped(name: str, tmp_path: Path) -> None:
    path = _ledger(tmp_path / "l.jsonl", HOSTILE[name])
    decisions, moves, bad = load(path)
    assert bad == 1, (name, bad)
    assert len(decisions) == 6 and not moves
    assert all(isinstance(d["route"], str) for d in decisions)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_stats_and_calibrate_survive_a_hostile_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _ledger(tmp_path / "l.jsonl", HOSTILE[name])
    cfg = tmp_path / "c.toml"
    assert main(["--config", str(cfg), "stats", "--ledger", str(path)]) == 0
    out = capsys.readouterr()
    assert "unreadable" in out.out and "1" in out.out, out.out
    assert main(["--config", str(cfg), "stats", "--json", "--ledger", str(path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["unreadable_lines"] == 1 and summary["completions"] == 6
    code = main(
        ["--config", str(cfg), "calibrate", "--from-ledger", str(path), "--best", "--dry-run"]
    )
    assert code in (0, 1)  # 1: too few decisions, said in words
    err = capsys.readouterr().err
    assert "skipped 1 unreadable" in err, err


@pytest.mark.parametrize("name", ["adaptive string", "adaptive null", "adaptive NaN", "deep list"])
async def test_serve_starts_with_a_hostile_ledger(name: str, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, extra="[routing]\nadaptive = true\nthreshold = -0.5\n")
    _ledger(tmp_path / "ledger.jsonl", HOSTILE[name])
    client, result = await start(cfg, capabilities("visual-studio-code", inline=True))
    try:
        assert result.capabilities.inline_completion_provider is not None
        status = await client.workspace_execute_command_async(
            t.ExecuteCommandParams("synconfroute.status", [])
        )
        assert math.isfinite(status["threshold"]) and status["threshold"] == -0.5, status
    finally:
        await stop(client)


def test_adaptive_resume_ignores_a_value_that_is_not_finite() -> None:
    from synconfroute.server.learning.adaptive import Adaptive

    a = Adaptive(-0.5, -1.5, -0.2)
    for value in (math.nan, math.inf, -math.inf):
        a.resume(value, "from a damaged ledger", [])
        assert a.current == -0.5
