"""The local tier's `PromptPlan` is resolved only when asked for: it exists for the
egress gate, which only remote requests pass, and resolving every source's real path
was a third of planning. The remote tier's plan is resolved while planning, as before,
and carried by its request to the gate.

Fails on bf1b0db: the planner resolved the local tier's plan with every request
(`egress.make_plan("local", ...)` once per request and per KV size tried).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.clients.plan import PromptPlan
from synconfroute.server.routing import planner
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.gated import GatedRemote
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.settings.config import Settings
from synconfroute.server.workspace import egress, prompt_split
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.files import existing

CTX = CompletionContext(
    prefix="import os\n" * 40 + "def add(a, b):\n    return ",
    suffix="\n\nprint(add(1, 2))\n",
    language="python",
    path=existing("/repo/lazy/calc.py"),
    roots=(existing("/repo/lazy/calc.py").rsplit("/", 1)[0],),
)
INVALID = TokenScript.of(" a", " +", " (b", logprob=-0.05)  # confident, broken: escalates
REMOTE = TokenScript.of(" a", " + ", "b", logprob=-0.01)


@pytest.fixture
def plans_made(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many plans were resolved, per tier."""
    made: Counter[str] = Counter()
    real = egress.make_plan

    def counting(tier: str, *a: Any, **kw: Any) -> PromptPlan:
        made[tier] += 1
        return real(tier, *a, **kw)

    monkeypatch.setattr(egress, "make_plan", counting)
    return made


async def test_an_escalated_request_resolves_the_remote_plan_only(
    plans_made: Counter[str], local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.script(INVALID)
    remote_fake.script(REMOTE)
    s = Settings()
    local = OllamaBackend(local_fake.url, "qwen2.5-coder:3b", timeout=5)
    model = "Qwen/Qwen2.5-Coder-32B-Instruct"
    remote = OpenAIBackend([remote_fake.base_url], model, api_key_env=None)
    p = Pipeline(s, local, remote, make_gate(s.routing))
    rec = await p.complete(CTX)
    assert rec.route == "remote", rec.failures
    assert isinstance(p.remote, GatedRemote) and p.remote.checked == 1, p.remote
    assert plans_made["local"] == 0, plans_made
    assert plans_made["remote"] >= 1, plans_made  # the gate's plan (and access's own)


def test_the_local_plan_resolves_when_asked_as_it_would_have_been(
    plans_made: Counter[str],
) -> None:
    env = planner.Planning(Settings(), None, prompt_split.Sticky())
    budget = planner.cold_budget(env)
    t = planner.plan_tier(CTX, "local", budget, env, deadline=None, single_line=True)
    assert t.request.plan is None and plans_made["local"] == 0  # nothing resolved yet
    window = len(t.request.prefix) + len(t.request.suffix)
    want = egress.make_plan("local", CTX.path, CTX.roots, window_chars=window)
    assert t.plan == want and t.plan.window is not None and t.plan.real_roots
    # The remote tier's plan is part of its request, resolved while planning.
    r = planner.plan_tier(CTX, "remote", None, env, deadline=None, single_line=True)
    assert r.request.plan is not None and r.plan is r.request.plan
    assert r.plan.tier == "remote" and r.plan.window == want.window
