"""Fixtures several test files share: the fake tiers on 127.0.0.1 (real HTTP)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes import FakeOllama, FakeOpenAI


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
