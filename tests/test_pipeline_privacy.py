"""The pipeline under slow tiers and changing privacy, against the fake Ollama and vLLM.

- the local tier has its own budget (first token, total) when the request may escalate;
- privacy is checked again at the moment of escalation, and a remote call in flight is
  cancelled when it is no longer allowed;
- bytes_sent counts only what reached the remote.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.settings.config import PrivacySettings, Settings, with_values
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript, closed_port
from tests.files import existing

CTX = CompletionContext(
    prefix="def add(a, b):\n    return ",
    suffix="\n\n\nprint(add(1, 2))\n",
    language="python",
    path=existing("/repo/app/calc.py"),
)
VALID = TokenScript.of(" a", " +", " b", logprob=-0.05)
INVALID = TokenScript.of(" a", " +", " (b", logprob=-0.05)
REMOTE = TokenScript.of(" a", " + ", "b", logprob=-0.01)

pytestmark = pytest.mark.timeout(60)


def settings(**local: float) -> Settings:
    return with_values(Settings(), {"completion": {"deadline_ms": 3000}, "local": local})


def pipeline(local_url: str, remote_url: str, s: Settings) -> Pipeline:
    local = OllamaBackend(local_url, "qwen2.5-coder:3b", timeout=5)
    remote = OpenAIBackend([remote_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None)
    return Pipeline(s, local, remote, make_gate(s.routing))


def remote_calls(fake: FakeOpenAI) -> int:
    return len(fake.received("/v1/completions"))


# -- item 5: the local tier's own budget ----------------------------------------


async def test_hung_local_escalates_when_its_first_token_budget_runs_out(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.script(TokenScript(hang=True))
    remote_fake.script(REMOTE)
    p = pipeline(local_fake.url, remote_fake.base_url, settings(first_token_ms=300))
    t0 = time.monotonic()
    rec = await p.complete(CTX)
    took = time.monotonic() - t0
    assert rec.route == "remote" and rec.completion == " a + b"
    assert rec.reasons == ("local-timeout", "remote-ok")
    assert "local.first_token_ms" in rec.errors[0]
    assert took < 2.0, took  # well inside the 3 s deadline
    gen = local_fake.received("/api/generate")[0]
    assert await asyncio.to_thread(local_fake.wait_for, lambda: gen.disconnected)


async def test_slow_local_escalates_when_its_total_budget_runs_out(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.script(TokenScript.of(*[f" t{i}" for i in range(40)], logprob=-0.01, delay=0.1))
    remote_fake.script(REMOTE)
    p = pipeline(local_fake.url, remote_fake.base_url, settings(total_ms=600))
    rec = await p.complete(CTX)
    assert rec.route == "remote" and rec.reasons == ("local-timeout", "remote-ok")
    assert "local.total_ms" in rec.errors[0]
    assert 0 < rec.local_tokens < 40


async def test_without_escalation_the_local_tier_has_the_whole_deadline(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    # First token after 0.5 s: past the budget, but nothing may leave the machine, so
    # the budget does not apply and the local answer is kept.
    local_fake.script(TokenScript.of(" a", " +", " b", logprob=-0.05, first_delay=0.5))
    s = with_values(settings(first_token_ms=100), {"privacy": {"local_only": True}})
    rec = await pipeline(local_fake.url, remote_fake.base_url, s).complete(CTX)
    assert rec.route == "local" and rec.completion == " a + b"
    assert remote_calls(remote_fake) == 0 and rec.bytes_sent == 0


# -- item 5: bytes_sent counts what reached the remote ----------------------------


async def test_nothing_sent_counts_zero_bytes(local_fake: FakeOllama) -> None:
    local_fake.script(INVALID)
    p = pipeline(local_fake.url, f"http://127.0.0.1:{closed_port()}/v1", settings())
    rec = await p.complete(CTX)
    assert rec.route == "none" and "remote-failed" in rec.reasons
    assert rec.bytes_sent == 0


async def test_a_failed_remote_that_got_the_request_counts_it(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.script(INVALID)
    remote_fake.script(TokenScript(status=400))
    rec = await pipeline(local_fake.url, remote_fake.base_url, settings()).complete(CTX)
    assert "remote-failed" in rec.reasons
    assert rec.bytes_sent == len(remote_fake.received("/v1/completions")[0].body)


# -- item 4: privacy checked again at escalation, remote calls cancelled ------------


async def test_local_only_switched_on_during_the_local_run_stops_the_escalation(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.script(TokenScript.of(" a", " +", " (b", logprob=-0.05, delay=0.2))
    p = pipeline(local_fake.url, remote_fake.base_url, settings())
    task = asyncio.ensure_future(p.complete(CTX))
    await asyncio.sleep(0.15)
    p.update_privacy(PrivacySettings(local_only=True))
    rec = await task
    assert remote_calls(remote_fake) == 0 and rec.bytes_sent == 0
    assert rec.route == "none" and rec.reasons == ("syntax-invalid", "local-only")
    assert rec.remote_model is None


async def test_local_only_switched_on_during_the_remote_call_cancels_it(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.script(VALID)
    remote_fake.script(TokenScript(hang=True))
    s = with_values(settings(), {"routing": {"policy": "remote"}})
    p = pipeline(local_fake.url, remote_fake.base_url, s)
    task = asyncio.ensure_future(p.complete(CTX))
    assert await asyncio.to_thread(remote_fake.wait_for, lambda: remote_calls(remote_fake) == 1)
    t0 = time.monotonic()
    p.update_privacy(PrivacySettings(local_only=True))
    rec = await task
    assert time.monotonic() - t0 < 1.0
    call = remote_fake.received("/v1/completions")[0]
    assert await asyncio.to_thread(remote_fake.wait_for, lambda: call.disconnected)
    # Kept local (the gate passed it), marked as unconfirmed: it never got its second opinion.
    assert rec.route == "local" and rec.completion == " a + b"
    assert rec.reasons == ("policy-remote", "local-only", "kept-local-unconfirmed")
    assert any("privacy settings changed" in e for e in rec.errors)
