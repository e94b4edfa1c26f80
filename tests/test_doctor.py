"""`synconfroute doctor` against a healthy, a down and a misconfigured tier (fake servers)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from synconfroute.server.commands.cli import main
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript, closed_port


@pytest.fixture
def fakes() -> Iterator[tuple[FakeOllama, FakeOpenAI]]:
    with FakeOllama() as local, FakeOpenAI(api_key="s3cret-key") as remote:
        yield local, remote


def settings_file(tmp_path: Path, body: str) -> str:
    p = tmp_path / "config.toml"
    p.write_text(body, encoding="utf-8")
    return str(p)


def run(capsys: pytest.CaptureFixture[str], cfg: str, *extra: str) -> tuple[int, str]:
    code = main(["--config", cfg, "doctor", *extra])
    return code, capsys.readouterr().out


def healthy(local: FakeOllama, remote: FakeOpenAI, model: str = "qwen2.5-coder:3b") -> str:
    return f"""
[local]
backend = "ollama"
url = "{local.url}"
model = "{model}"
[remote]
url = "{remote.base_url}"
model = "Qwen/Qwen2.5-Coder-32B-Instruct"
api_key_env = "TEST_DOCTOR_KEY"
"""


def test_healthy_tiers(
    tmp_path: Path,
    fakes: tuple[FakeOllama, FakeOpenAI],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local, remote = fakes
    monkeypatch.setenv("TEST_DOCTOR_KEY", "s3cret-key")
    code, out = run(capsys, settings_file(tmp_path, healthy(local, remote)))
    assert code == 0, out
    assert out.count("=> usable") == 2
    assert "ok   reachable (version 0.13.0)" in out
    assert "prompt: fill-in-the-middle (the server's own)" in out
    assert "prompt: fill-in-the-middle (our template), template qwen2.5-coder" in out
    assert "log-probs returned" in out and "tiny generation" in out
    assert "s3cret-key" not in out  # the key never shows


def test_down_local_is_an_error_with_its_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = settings_file(
        tmp_path, f'[local]\nbackend = "ollama"\nurl = "http://127.0.0.1:{closed_port()}"\n'
    )
    code, out = run(capsys, cfg)
    assert code == 1
    assert "FAIL not reachable" in out and "ollama serve" in out and "NOT usable" in out
    assert "remote    not configured" in out


def test_misconfigured_model_and_key(
    tmp_path: Path,
    fakes: tuple[FakeOllama, FakeOpenAI],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    local, remote = fakes
    monkeypatch.setenv("TEST_DOCTOR_KEY", "wrong-key")
    cfg = settings_file(tmp_path, healthy(local, remote, model="codellama:7b-code"))
    code, out = run(capsys, cfg, "--json")
    assert code == 1
    report = json.loads(out)
    tiers = {t["tier"]: t for t in report["tiers"]}
    assert not tiers["local"]["usable"] and not tiers["remote"]["usable"]
    local_problems = " ".join(p["fix"] for p in tiers["local"]["report"]["problems"])
    assert "ollama pull codellama:7b-code" in local_problems
    remote_text = json.dumps(tiers["remote"])
    assert "TEST_DOCTOR_KEY" in remote_text and "wrong-key" not in remote_text


def test_old_ollama_without_logprobs_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOllama(version="0.11.4", default=TokenScript.of("a", logprobs=False)) as old:
        cfg = settings_file(tmp_path, f'[local]\nbackend = "ollama"\nurl = "{old.url}"\n')
        code, out = run(capsys, cfg)
    # Usable (routing.missing_logprobs decides what happens), but said loudly.
    assert code == 0
    assert "FAIL log-probs returned" in out and "0.12.11" in out, out


def test_settings_problems_are_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, _ = fakes
    cfg = settings_file(
        tmp_path, f'[local]\nbackend = "ollama"\nurl = "{local.url}"\n[routing]\nthreshold = 3\n'
    )
    code, out = run(capsys, cfg)
    assert code == 0
    assert "routing.threshold: must be at most 0.0" in out
