"""The planner (issue 35): each tier's prompt of one request is built once, as a frozen
`TierRequest`; the KV-aware sizing is part of planning, and the window it chooses is
the one sent (not built again).

The counter tests fail on 8c2c157: the pipeline built the local prompt once for the
decision record's context notes and again for the local run (and once more per KV
probe), so the local tier's prompt at one size was assembled twice or more per request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from synconfroute.clients._speed import Rates
from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.clients.types import Chunk, CompletionRequest
from synconfroute.server.routing import planner
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.settings.config import Settings
from synconfroute.server.workspace import prompt_split
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.files import existing

CTX = CompletionContext(
    prefix="import os\n" * 400 + "def add(a, b):\n    return ",
    suffix="\n\n\nprint(add(1, 2))\n",
    language="python",
    path=existing("/repo/app/calc.py"),
)
INVALID = TokenScript.of(" a", " +", " (b", logprob=-0.05)  # confident, broken: escalates
REMOTE = TokenScript.of(" a", " + ", "b", logprob=-0.01)


@pytest.fixture
def assembled(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times each (tier, size) prompt is assembled."""
    seen: Counter[str] = Counter()
    real = prompt_split.assemble

    def counting(**kw: Any) -> prompt_split.TierPrompt:
        seen[kw["key"][1]] += 1
        return real(**kw)

    monkeypatch.setattr(prompt_split, "assemble", counting)
    return seen


class KvOllama(OllamaBackend):
    """The Ollama client with a measured prompt rate (so the cold window is below the
    cap) and a KV cache view that holds nothing (every window costs what it is long):
    the sizing probes the larger windows and keeps the cold one."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.probed: list[CompletionRequest] = []
        self.streamed: list[CompletionRequest] = []

    @property
    def rates(self) -> Rates:
        return Rates(prompt_tps=100.0, decode_tps=25.0)

    def uncached_chars(self, request: CompletionRequest) -> int:
        self.probed.append(request)
        return len(request.prefix) + len(request.suffix)

    def stream(self, request: CompletionRequest) -> AsyncGenerator[Chunk, None]:
        self.streamed.append(request)
        return super().stream(request)


def _pipeline(local: OllamaBackend, remote_url: str) -> Pipeline:
    s = Settings()
    remote = OpenAIBackend([remote_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None)
    return Pipeline(s, local, remote, make_gate(s.routing))


async def test_each_tiers_prompt_is_built_once_per_request(
    assembled: Counter[str], local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.script(INVALID)
    remote_fake.script(REMOTE)
    p = _pipeline(
        OllamaBackend(local_fake.url, "qwen2.5-coder:3b", timeout=5), remote_fake.base_url
    )
    rec = await p.complete(CTX)
    assert rec.route == "remote", rec
    tiers = Counter(key.split("@")[0] for key in assembled.elements())
    assert tiers == {"local": 1, "remote": 1}, assembled
    # What the local tier was sent is the prompt that was planned: its window as cut.
    sent = local_fake.received("/api/generate")[0].json()
    assert sent["prompt"].endswith("    return ")


async def test_kv_sizing_builds_each_window_once_and_sends_the_one_it_chose(
    assembled: Counter[str], local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.script(INVALID)
    remote_fake.script(REMOTE)
    local = KvOllama(local_fake.url, "qwen2.5-coder:3b", timeout=5)
    p = _pipeline(local, remote_fake.base_url)
    await p.complete(CTX)
    local_sizes = [k for k in assembled if k.startswith("local@")]
    assert len(local_sizes) >= 2, assembled  # the cold window and a larger one were tried
    assert all(assembled[k] == 1 for k in local_sizes), assembled
    # The request streamed is the very one the sizing built and probed at the cold size
    # (nothing is cached, so the cold window stays): not a second build of it.
    assert len(local.streamed) == 1
    assert any(r is local.streamed[0] for r in local.probed)
    cold = min(int(k.split("@")[1]) for k in local_sizes)
    assert len(local.streamed[0].prefix) + len(local.streamed[0].suffix) <= cold


def test_a_tier_request_is_frozen_and_carries_its_plan_and_notes() -> None:
    s = Settings()
    env = planner.Planning(s, None, prompt_split.Sticky())
    t = planner.plan_tier(CTX, "remote", None, env, deadline=None, single_line=True)
    assert t.plan is not None and t.plan.tier == "remote" and t.plan.window is not None
    assert t.prompt_chars == s.remote.max_prompt_chars
    assert len(t.request.prefix) + len(t.request.suffix) <= t.prompt_chars
    assert t.notes == () and t.budget is None
    with pytest.raises(AttributeError):
        t.tier = "local"  # type: ignore[misc]
