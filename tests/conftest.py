"""Fixtures several test files share: the fake tiers on 127.0.0.1 (real HTTP), and the
real vLLM (one per session)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests import vllm_server
from tests.fakes import FakeOllama, FakeOpenAI
from tests.vllm_server import VllmServer


@pytest.fixture
def local_fake() -> Iterator[FakeOllama]:
    """A fake Ollama for the local tier."""
    with FakeOllama() as fake:
        yield fake


@pytest.fixture
def remote_fake() -> Iterator[FakeOpenAI]:
    """A fake vLLM (OpenAI-compatible) for the remote tier."""
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def fakes(local_fake: FakeOllama, remote_fake: FakeOpenAI) -> tuple[FakeOllama, FakeOpenAI]:
    """Both tiers' fakes at once."""
    return local_fake, remote_fake


# -- the real vLLM (issue 23): one server per test session --------------------------
_vllm_started: list[VllmServer] = []


@pytest.fixture(scope="session")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """A real vLLM serving SmolLM2-135M on 127.0.0.1 (usage statistics off), started
    with `--scheduling-policy priority` and warmed up by one completion; stopped at the
    end of the session. Skips where `scripts/setup.sh --dev` has not installed it; CI
    must run it, so there a missing vLLM fails."""
    why = vllm_server.missing()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the real-vLLM tests: {why}")
        pytest.skip(why)
    running = vllm_server.attached()
    if running is not None:
        yield running
        return
    server = VllmServer(log_path=tmp_path_factory.mktemp("vllm") / "server.log")
    with server:
        _vllm_started.append(server)
        yield server


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for s in _vllm_started:
        terminalreporter.write_line(
            f"real vLLM: started in {s.start_s:.1f}s, first completion {s.warmup_s:.1f}s"
        )
