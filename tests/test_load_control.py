"""Backpressure and the escalation budget in the real pipeline, against the fake vLLM:
the bar rises under a slow or shedding remote and comes back down after recovery; the
budget holds over its window; a held request keeps its valid local answer and says why."""

from __future__ import annotations

import asyncio
import time

import attrs
import pytest

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.settings.config import Settings, merge
from synconfroute.server.vocab.card import route_card
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.files import existing

_N = iter(range(10**6))


def ctx() -> CompletionContext:
    """A new request each time (the same one would be answered from the cache)."""
    n = next(_N)
    return CompletionContext(
        prefix=f"def add{n}(a, b):\n    return ",
        suffix=f"\n\n\nprint(add{n}(1, 2))\n",
        language="python",
        path=existing("/repo/app/calc.py"),
    )


# Unsure but valid (confidence -0.8 < -0.5): the rule escalates it, a raised bar keeps it.
UNSURE = TokenScript.of(" a", " +", " b", logprob=-0.8)
VERY_UNSURE = TokenScript.of(" a", " +", " b", logprob=-2.5)  # under any raised bar
BROKEN = TokenScript.of(" a", " +", " (b", logprob=-0.05)
REMOTE = TokenScript.of(" a", " + ", "b", logprob=-0.01)


class Clock:
    """The monotonic clock, moved forward by hand (`t += s`) to let minutes pass. (The
    backends compare deadlines with the real clock: a skew forward only gives more time.)"""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.t


def pipeline(
    local: FakeOllama,
    remote: FakeOpenAI,
    clock: Clock,
    completion: dict[str, object] | None = None,
    **routing: object,
) -> Pipeline:
    s, issues = merge(
        Settings(), {"routing": {"ttft_target_ms": 200, **routing}, "completion": completion or {}}
    )
    assert not issues
    return Pipeline(
        s,
        OllamaBackend(local.url, "qwen2.5-coder:3b", timeout=5),
        OpenAIBackend(
            [remote.base_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None, timeout=5
        ),
        make_gate(s.routing),
        clock=clock,
    )


def sent(remote: FakeOpenAI) -> int:
    return len(remote.received("/v1/completions"))


async def test_a_slow_cluster_raises_the_bar_and_recovery_lowers_it(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    clock = Clock()
    p = pipeline(local_fake, remote_fake, clock)
    # The cluster is slow: the first token takes 0.4 s, over the 0.2 s target.
    for _ in range(2):
        local_fake.script(VERY_UNSURE)
        remote_fake.script(TokenScript.of(" a", " + ", "b", first_delay=0.4))
        rec = await p.complete(ctx())
        assert rec.route == "remote"
        clock.t += 1
    pressure = p.pressure()
    assert pressure is not None and pressure.state == "slow" and pressure.lift > 0.8
    # Now an unsure-but-valid answer stays on the machine, and says why.
    local_fake.script(UNSURE, always=True)
    before = sent(remote_fake)
    rec = await p.complete(ctx())
    assert rec.route == "local" and rec.completion == " a + b"
    assert rec.reasons == ("low-confidence", "cluster-busy")
    assert sent(remote_fake) == before  # nothing left the machine
    card = route_card(rec)
    assert "`cluster-busy`" in card and "- cluster: cluster slow: first token" in card
    status = p.load_status()
    assert status is not None and status["state"] == "slow" and status["lift"] > 0.8
    # A broken local answer still escalates under the raised bar.
    local_fake.script(BROKEN)
    remote_fake.script(REMOTE)
    rec = await p.complete(ctx())
    assert rec.route == "remote" and "syntax-invalid" in rec.reasons
    # The cluster recovers: answers in time take the lift off step by step.
    for _ in range(4):
        local_fake.script(BROKEN)
        remote_fake.script(REMOTE)
        await p.complete(ctx())
        clock.t += 1
    pressure = p.pressure()
    assert pressure is not None and pressure.lift == 0.0 and pressure.state == "ok"
    local_fake.script(UNSURE, always=True)
    remote_fake.script(REMOTE)
    rec = await p.complete(ctx())
    assert rec.route == "remote" and rec.reasons == ("low-confidence", "remote-ok")


async def test_a_local_tier_that_eats_the_deadline_says_nothing_about_the_cluster(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    """A hung local tier leaves its escalation no time, and that escalation's timeout is
    not the cluster's. (The fault suite found a hung local tier holding every later
    escalation home for minutes, a garbled local tier's requests among them.)"""
    clock = Clock()
    p = pipeline(local_fake, remote_fake, clock, completion={"deadline_ms": 300})
    local_fake.script(TokenScript.of(" a", " +", " b", logprob=-0.05, first_delay=1.0))
    rec = await p.complete(ctx())
    assert rec.route == "none" and "local-timeout" in rec.reasons
    pressure = p.pressure()
    assert pressure is not None and pressure.state == "ok" and pressure.lift == 0.0, pressure
    # The local tier answers again, broken: the escalation goes out.
    local_fake.script(BROKEN)
    remote_fake.script(REMOTE)
    rec = await p.complete(ctx())
    assert rec.route == "remote" and "syntax-invalid" in rec.reasons, rec.reasons


async def test_429_with_retry_after_holds_escalation_until_it_passes(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    clock = Clock()
    p = pipeline(local_fake, remote_fake, clock)
    local_fake.script(UNSURE, always=True)
    remote_fake.script(TokenScript(status=429, retry_after="2"))
    rec = await p.complete(ctx())
    assert rec.route == "local" and "remote-failed" in rec.reasons  # the 429 itself
    pressure = p.pressure()
    assert pressure is not None and pressure.state == "shedding" and "429" in pressure.why
    # Within the 2 s, even a broken answer is not sent: it answers empty at once.
    local_fake.script(BROKEN)
    before = sent(remote_fake)
    rec = await p.complete(ctx())
    assert rec.route == "none" and rec.reasons == ("syntax-invalid", "cluster-busy")
    assert sent(remote_fake) == before
    # After it, requests go out again (the client's own backoff keeps real time).
    await asyncio.sleep(2.1)
    local_fake.script(BROKEN)
    remote_fake.script(REMOTE)
    rec = await p.complete(ctx())
    assert rec.route == "remote"


async def test_the_escalation_budget_holds_over_its_window(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    clock = Clock()
    p = pipeline(local_fake, remote_fake, clock, escalation_budget=0.25, backpressure=False)
    routes = []
    for _ in range(12):
        local_fake.script(UNSURE, always=True)
        remote_fake.script(REMOTE)
        rec = await p.complete(ctx())
        routes.append(rec.route)
        clock.t += 5
    escalated = routes.count("remote")
    assert escalated == sent(remote_fake)
    assert 2 <= escalated <= 0.25 * len(routes) + 1, routes
    held = [r for r in routes if r == "local"]
    assert held  # the rest kept their valid local answer
    # Past the window, escalations go out again.
    clock.t += 400
    local_fake.script(UNSURE, always=True)
    remote_fake.script(REMOTE)
    assert (await p.complete(ctx())).route == "remote"


@pytest.mark.parametrize("value", [1.5, -0.1])
def test_budget_out_of_range_is_refused(value: float) -> None:
    _, issues = merge(Settings(), {"routing": {"escalation_budget": value}})
    assert issues and "escalation_budget" in str(issues[0])


def test_a_workspace_may_lower_the_budget_never_raise_it() -> None:
    from synconfroute.server.settings.config import merge_workspace

    user, _ = merge(Settings(), {"routing": {"escalation_budget": 0.3}})
    lower, issues = merge_workspace(user, {"routing": {"escalation_budget": 0.1}})
    assert not issues and lower.routing.escalation_budget == 0.1
    higher, issues = merge_workspace(user, {"routing": {"escalation_budget": 0.9}})
    assert issues and higher.routing.escalation_budget == 0.3
    off, issues = merge_workspace(user, {"routing": {"backpressure": False}})
    assert issues and off.routing.backpressure is True


async def test_the_users_own_request_ranks_above_typing_and_background(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    """vLLM serves lower `priority` first (--scheduling-policy priority; the real server's
    ordering is tested in test_vllm.py): invoked 5, typing 6, background (eval) 15."""
    s, _ = merge(Settings(), {"remote": {"priority": 5}})
    p = Pipeline(
        s,
        OllamaBackend(local_fake.url, "qwen2.5-coder:3b", timeout=5),
        OpenAIBackend(
            [remote_fake.base_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None, timeout=5
        ),
        make_gate(s.routing),
    )
    for invoked in (True, False):
        local_fake.script(BROKEN)
        remote_fake.script(REMOTE)
        c = ctx()
        await p.complete(attrs.evolve(c, invoked=invoked))
    sent_priorities = [r.json()["priority"] for r in remote_fake.received("/v1/completions")]
    assert sent_priorities == [5, 6]
    assert s.remote.request_priority(background=True) == 15
