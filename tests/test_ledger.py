"""The ledger (no code in it) and `synconfroute stats`, fed by a real server session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lsprotocol import types as t

from synconfroute.server.commands.cli import main
from synconfroute.server.learning.ledger import Ledger, read, summarize
from synconfroute.server.vocab.kinds import Reason
from synconfroute.server.vocab.record import Latency, RouteDecision
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import (
    capabilities,
    inline_request,
    open_doc,
    start,
    stop,
    write_config,
)

SECRET_CODE = "password_hash = 'do-not-log-me'"


def decision(route: str, reasons: list[str], sent: int = 0) -> RouteDecision:
    """A decision as the pipeline records it (reasons are `Reason`s)."""
    return RouteDecision(
        completion=SECRET_CODE,
        local_completion=SECRET_CODE,
        route=route,  # type: ignore[arg-type]
        reasons=tuple(Reason(r) for r in reasons),
        policy="synconf",
        confidence=-0.2,
        threshold=-0.5,
        syntax=None,
        local_model="m",
        remote_model="r",
        latency=Latency(total=10.0),
        bytes_sent=sent,
        path="/secret/project/file.py",
    )


def test_summary_on_known_entries(tmp_path: Path) -> None:
    led = Ledger(tmp_path / "l.jsonl")
    led.decision("c1", decision("local", ["confident-and-valid"]))
    led.decision("c2", decision("remote", ["low-confidence", "remote-ok"], sent=300))
    led.decision("c3", decision("none", ["syntax-invalid", "remote-failed"], sent=200))
    led.decision("c4", decision("local", ["confident-and-valid"]))
    led.accepted("c1")
    led.accepted("c2")
    raw = (tmp_path / "l.jsonl").read_text()
    assert "do-not-log-me" not in raw and "/secret/project" not in raw
    decisions, accepted, bad = read(tmp_path / "l.jsonl")
    s = summarize(decisions, accepted)
    assert bad == 0 and s["completions"] == 4
    assert s["routes"] == {"local": 2, "remote": 1, "none": 1}
    assert s["escalation_rate"] == 0.5 and s["stayed_on_machine"] == 0.5
    assert s["accepted"] == {"local": 1, "remote": 1}
    assert s["acceptance_rate"] == {"local": 0.5, "remote": 1.0}
    assert s["bytes_sent"] == 500 and s["latency_ms_p50"] == 10.0


def test_unwritable_ledger_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    led = Ledger(blocker / "sub" / "l.jsonl")  # a file where a folder should be
    led.decision("c1", decision("local", []))
    led.accepted("c1")


async def test_server_session_feeds_stats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOllama() as local, FakeOpenAI() as remote:
        local.script(TokenScript.of(" a", " +", " b", logprob=-0.05), always=True)
        cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
        client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
        try:
            uri = "file:///work/p/a.py"
            open_doc(client, uri, "def add(a, b):\n    return \n")
            r = await client.text_document_inline_completion_async(
                inline_request(uri, t.Position(1, 11))
            )
            assert isinstance(r, t.InlineCompletionList) and r.items[0].command is not None
            cmd = r.items[0].command
            await client.workspace_execute_command_async(
                t.ExecuteCommandParams(cmd.command, cmd.arguments)
            )
        finally:
            await stop(client)
    ledger = tmp_path / "ledger.jsonl"
    assert main(["stats", "--ledger", str(ledger), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["completions"] == 1 and s["routes"] == {"local": 1}
    assert s["accepted"]["local"] == 1 and s["bytes_sent"] == 0
    assert main(["stats", "--ledger", str(ledger)]) == 0
    assert "stayed on machine 100.0%" in capsys.readouterr().out


def test_stats_without_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "--ledger", str(tmp_path / "none.jsonl")]) == 1
    assert "no ledger" in capsys.readouterr().err
