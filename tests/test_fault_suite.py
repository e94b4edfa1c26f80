"""The fault suite (bench/fault_suite.py) in a short configuration, and its doubles.

The suite drives the real server over stdio through every fault phase under each
privacy mode; these tests hold its hard invariants: every request answered, no
crash, no remote request under privacy, the API key never shown. The figures
(late answers, empty answers, RSS) are printed by the script, not asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.faulty import FaultyOllama, FaultyOpenAI

ROOT = Path(__file__).resolve().parent.parent
SUITE = ["-m", "bench.fault_suite"]  # run from the repository root (cwd=ROOT)
MODEL = "qwen2.5-coder:3b"
REMOTE_MODEL = "Qwen/Qwen2.5-Coder-32B-Instruct"


# -- the doubles ---------------------------------------------------------------
def _generate(fake: FaultyOllama, num_predict: int = 3) -> httpx.Response:
    body = {
        "model": MODEL,
        "prompt": "def f():\n    return ",
        "suffix": "\n",
        "stream": True,
        "logprobs": True,
        "options": {"num_predict": num_predict},
    }
    return httpx.post(f"{fake.url}/api/generate", json=body, timeout=2)


def test_down_refuses_connections_then_listens_again_on_the_same_port() -> None:
    with FaultyOllama() as fake:
        fake.set_fault("down", "p1")
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{fake.url}/api/version", timeout=2)
        fake.set_fault("ok", "p2")
        assert httpx.get(f"{fake.url}/api/version", timeout=2).status_code == 200
        assert _generate(fake).status_code == 200
        assert fake.faults.requests("p1") == 0 and fake.faults.requests("p2") == 1


def test_429_carries_retry_after_and_requests_are_counted_per_phase() -> None:
    with FaultyOpenAI() as fake:
        fake.set_fault("429", "busy")
        for _ in range(3):
            r = httpx.post(f"{fake.url}/v1/completions", json={"prompt": "x"}, timeout=2)
            assert r.status_code == 429 and r.headers["retry-after"] == "30"
        assert fake.faults.requests("busy") == 3


def test_runaway_ignores_num_predict() -> None:
    with FaultyOllama() as fake:
        fake.set_fault("runaway", "runaway")
        lines = 0
        body = {"model": MODEL, "prompt": "x", "suffix": "\n", "options": {"num_predict": 2}}
        with httpx.stream("POST", f"{fake.url}/api/generate", json=body, timeout=2) as r:
            for line in r.iter_lines():
                assert json.loads(line)["done"] is False
                lines += 1
                if lines == 50:
                    break
        assert lines == 50


@pytest.mark.parametrize("body", [b'{"prompt": "a"}', b'{"prompt": "ab"}'])
def test_echo_auth_shows_the_key_whole_or_across_character_200(body: bytes) -> None:
    key = "sk-test-0123456789abcdef0123456789"
    with FaultyOpenAI(api_key=key) as fake:
        fake.set_fault("echo-auth", "echo")
        r = httpx.post(
            f"{fake.url}/v1/completions",
            content=body,
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            timeout=2,
        )
        assert r.status_code == 502 and "text/html" in r.headers["content-type"]
        assert key in r.text and key[8:20] in r.text[:200]


@pytest.mark.parametrize("fault", ["hung-headers", "hung-body"])
def test_hung_doubles_never_answer(fault: str) -> None:
    with FaultyOpenAI() as fake:
        fake.set_fault(fault, fault)  # type: ignore[arg-type]
        with (
            pytest.raises(httpx.ReadTimeout),
            httpx.stream(
                "POST",
                f"{fake.url}/v1/completions",
                json={"model": REMOTE_MODEL, "prompt": "x", "stream": True},
                timeout=0.3,
            ) as r,
        ):
            assert r.status_code == 200  # hung-body: the headers came, the body never does
            r.read()
        assert fake.wait_for(lambda: fake.received()[0].disconnected, 2)  # let go at once


@pytest.mark.parametrize("fault", ["garbage", "cut"])
def test_broken_streams(fault: str) -> None:
    with FaultyOllama() as fake:
        fake.set_fault(fault, fault)  # type: ignore[arg-type]
        try:
            text = _generate(fake).text
        except httpx.RemoteProtocolError:
            assert fault == "cut"  # the stream ended mid-chunk
            return
        assert fault == "garbage"
        with pytest.raises(ValueError):
            for line in text.splitlines():
                json.loads(line)


# -- the suite against the real server ---------------------------------------------
@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One short run of every phase in every privacy mode (about 30 s here)."""
    out = tmp_path_factory.mktemp("faults") / "figures.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, *SUITE, "--requests", "4", "--concurrency", "4"]
    cmd += ["--deadline-ms", "600", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=280)
    assert out.exists(), f"the suite did not finish:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    data: dict[str, Any] = json.loads(out.read_text())
    data["output"] = proc.stdout
    data["returncode"] = proc.returncode
    return data


def _broken(suite: dict[str, Any], figure: str) -> dict[str, Any]:
    return {f"{p['mode']}/{p['phase']}": p[figure] for p in suite["phases"] if p[figure]}


def test_suite_covers_every_phase_in_every_mode(suite: dict[str, Any]) -> None:
    rows = suite["phases"]
    assert {p["mode"] for p in rows} == {"open", "never_send", "local_only"}
    assert len(rows) == 3 * len({p["phase"] for p in rows}) >= 3 * 19
    assert all(p["requests"] == 4 for p in rows)


@pytest.mark.parametrize("figure", ["unanswered", "crashes", "remote_under_privacy", "key_leaks"])
def test_hard_invariant(suite: dict[str, Any], figure: str) -> None:
    assert _broken(suite, figure) == {}, suite["output"]


def test_no_key_in_log_file_or_ledger(suite: dict[str, Any]) -> None:
    assert [p for p in suite["problems"] if "API key is in" in p] == [], suite["output"]


def test_exit_status_says_whether_invariants_held(suite: dict[str, Any]) -> None:
    assert suite["returncode"] == (1 if suite["problems"] else 0)


def test_short_soak_answers_every_request(tmp_path: Path) -> None:
    """The soak mode in miniature (the 10,000-run figures are printed, not asserted)."""
    out = tmp_path / "soak.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, *SUITE, "--soak", "240", "--concurrency", "6"]
    cmd += ["--deadline-ms", "400", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=200)
    soak = json.loads(out.read_text())["soak"]
    assert soak["requests"] == 240, proc.stdout
    assert soak["unanswered"] == 0 and soak["crashes"] == 0, proc.stdout
    assert "RSS after warm-up" in proc.stdout and "RSS at the end" in proc.stdout


def test_hostile_phases_hold_the_invariants(tmp_path: Path) -> None:
    """`--hostile` in miniature: worker pipe garbage, a hostile ledger at start and while
    running, NaN and extreme settings, special files in the workspace, lone surrogates,
    extreme positions: every request answered, no crash, no traceback sent to the client
    or printed by the CLI (issues 20, 36)."""
    out = tmp_path / "hostile.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, *SUITE, "--hostile", "--requests", "2", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert out.exists(), f"the suite did not finish:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    data = json.loads(out.read_text())
    rows = {r["phase"]: r for r in data["hostile"]}
    assert set(rows) >= {
        "ledger-at-start",
        "ledger-while-running",
        "settings-nan-extreme",
        "special-files",
        "lone-surrogates",
        "extreme-positions",
    }
    assert data["problems"] == [] and proc.returncode == 0, proc.stdout
    for r in rows.values():
        assert r["answered"] == r["requests"] and r["crashes"] == 0, r
        assert r["client_tracebacks"] == 0, r
