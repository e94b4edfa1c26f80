"""Fixtures several test files share: the fake tiers on 127.0.0.1 (real HTTP), and the
real vLLM (one per session)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

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
# Started in a thread as soon as the collected tests show one will be needed: its start-up
# (25-100 s, mostly loading and waiting) overlaps the tests that run before the first
# real-vLLM test instead of adding to the session's time.
_early: dict[str, tuple[VllmServer, Future[VllmServer]]] = {}
_vllm_started: list[VllmServer] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    wanted = any("vllm" in getattr(item, "fixturenames", ()) for item in items)
    if not wanted or vllm_server.missing() is not None or vllm_server.attached() is not None:
        return
    log = Path(tempfile.mkdtemp(prefix="pytest-vllm-")) / "server.log"
    server = VllmServer(log_path=log)
    pool = ThreadPoolExecutor(1, thread_name_prefix="vllm-start")
    _early["server"] = (server, pool.submit(server.start))
    pool.shutdown(wait=False)


def pytest_sessionfinish() -> None:
    if "server" in _early:
        server, started = _early.pop("server")
        with contextlib.suppress(Exception):
            started.result(timeout=vllm_server.START_TIMEOUT_S)
        server.stop()


@pytest.fixture(scope="session")
def vllm() -> Iterator[VllmServer]:
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
    if "server" not in _early:  # e.g. a test asked for it without naming the fixture
        log = Path(tempfile.mkdtemp(prefix="pytest-vllm-")) / "server.log"
        server = VllmServer(log_path=log)
        _early["server"] = (server, ThreadPoolExecutor(1).submit(server.start))
    server, started = _early["server"]
    started.result(timeout=vllm_server.START_TIMEOUT_S)  # raises why it did not start
    _vllm_started.append(server)
    yield server  # stopped in pytest_sessionfinish


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for s in _vllm_started:
        terminalreporter.write_line(
            f"real vLLM: started in {s.start_s:.1f}s (in the background, from collection), "
            f"first completion {s.warmup_s:.1f}s; log {s.log_path}"
        )
