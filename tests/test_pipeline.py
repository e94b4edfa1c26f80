"""The pipeline end to end against the fake Ollama and fake vLLM, with the real gate.

Each scenario is asserted from the servers' side too: what reached the remote
(nothing, when the code must stay local) and when the local stream was cut.
"""

from __future__ import annotations

import asyncio

import attrs
import pytest

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.settings.config import Settings, with_values
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript, closed_port
from tests.files import existing

LOCAL_MODEL = "qwen2.5-coder:3b"
REMOTE_MODEL = "Qwen/Qwen2.5-Coder-32B-Instruct"
CTX = CompletionContext(
    prefix="def add(a, b):\n    return ",
    suffix="\n\n\nprint(add(1, 2))\n",
    language="python",
    path=existing("/repo/app/calc.py"),
)
VALID = TokenScript.of(" a", " +", " b", logprob=-0.05)
INVALID = TokenScript.of(" a", " +", " (b", logprob=-0.05)
REMOTE = TokenScript.of(" a", " + ", "b", logprob=-0.01)


def completions(fake: FakeOpenAI) -> int:
    return len(fake.received("/v1/completions"))


def pipeline(local_url: str, remote_url: str | None, settings: Settings | None = None) -> Pipeline:
    s = settings or Settings()
    local = OllamaBackend(local_url, LOCAL_MODEL, timeout=5)
    remote = (
        OpenAIBackend([remote_url], REMOTE_MODEL, api_key_env=None, timeout=5)
        if remote_url
        else None
    )
    return Pipeline(s, local, remote, make_gate(s.routing))


async def test_confident_and_valid_stays_local(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.script(VALID)
    rec = await pipeline(local_fake.url, remote_fake.base_url).complete(CTX)
    assert (rec.route, rec.reasons, rec.completion) == ("local", ("confident-and-valid",), " a + b")
    assert rec.syntax is not None and rec.syntax.status == "valid"
    assert rec.confidence == pytest.approx(-0.05)
    assert rec.bytes_sent == 0 and completions(remote_fake) == 0
    assert {"local_first_token", "local_total", "gate", "total"} <= rec.latency_ms.keys()


async def test_confident_but_invalid_escalates(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.script(INVALID)
    remote_fake.script(REMOTE)
    rec = await pipeline(local_fake.url, remote_fake.base_url).complete(CTX)
    assert rec.route == "remote" and rec.reasons == ("syntax-invalid", "remote-ok")
    assert rec.completion == " a + b" and rec.local_completion == " a + (b"
    assert rec.syntax is not None and rec.syntax.status == "invalid"
    assert rec.syntax.line is not None
    assert completions(remote_fake) == 1 and rec.bytes_sent > len(CTX.prefix)
    assert "suffix" not in remote_fake.received("/v1/completions")[0].json()


async def test_low_confidence_cancels_local_after_k_tokens(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    slow = TokenScript.of(*[f" t{i}" for i in range(40)], logprob=-3.0, delay=0.03)
    local_fake.script(slow)
    remote_fake.script(REMOTE)
    rec = await pipeline(local_fake.url, remote_fake.base_url).complete(CTX)
    assert rec.route == "remote" and rec.reasons == ("low-confidence", "remote-ok")
    assert rec.local_cancelled_early and rec.local_tokens == 3
    gen = local_fake.received("/api/generate")[-1]
    assert await asyncio.to_thread(local_fake.wait_for, lambda: gen.disconnected)
    assert gen.tokens_sent <= 5, gen.tokens_sent  # the fake saw the client leave
    assert rec.syntax is None  # no gate for a completion we threw away


async def test_remote_down_keeps_valid_local(local_fake: FakeOllama) -> None:
    # Low confidence escalates, the remote is down: the local stream is finished
    # after all and kept because it passes the gate.
    local_fake.script(TokenScript.of(" a", " +", " b", logprob=-2.0), always=True)
    p = pipeline(local_fake.url, f"http://127.0.0.1:{closed_port()}/v1")
    rec = await p.complete(CTX)
    assert rec.route == "local" and rec.completion == " a + b"
    assert rec.reasons == ("low-confidence", "remote-failed", "remote-failed-kept-local")
    assert rec.errors and rec.errors[0].startswith("remote:")
    assert len(local_fake.received("/api/generate")) == 2  # cut early, then finished
    assert "local_rerun" in rec.latency_ms


async def test_remote_down_and_local_invalid_gives_nothing(local_fake: FakeOllama) -> None:
    local_fake.script(INVALID)
    rec = await pipeline(local_fake.url, f"http://127.0.0.1:{closed_port()}/v1").complete(CTX)
    assert rec.route == "none" and rec.completion == ""
    assert rec.reasons == ("syntax-invalid", "remote-failed")


async def test_remote_too_slow_keeps_valid_local(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    s = with_values(Settings(), {"completion": {"deadline_ms": 600}})
    local_fake.script(TokenScript.of(" a", " +", " b", logprob=-2.0))
    remote_fake.script(TokenScript(hang=True))
    rec = await pipeline(local_fake.url, remote_fake.base_url, s).complete(CTX)
    # The hung remote ate the deadline; nothing was left for a local rerun.
    # The remote gives up at the deadline; the fast local rerun still fits in it.
    assert rec.route == "local", (rec.reasons, rec.errors)
    assert rec.reasons == ("low-confidence", "remote-failed", "remote-failed-kept-local")
    assert "deadline" in rec.errors[0]
    assert 500 <= rec.latency_ms["total"] < 1500


async def test_local_down_escalates(remote_fake: FakeOpenAI) -> None:
    remote_fake.script(REMOTE)
    rec = await pipeline(f"http://127.0.0.1:{closed_port()}", remote_fake.base_url).complete(CTX)
    assert rec.route == "remote" and rec.reasons == ("local-unavailable", "remote-ok")
    assert rec.errors and "ollama" in rec.errors[0].lower()


async def test_privacy_blocked_sends_nothing(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    s = with_values(Settings(), {"privacy": {"never_send": ["**/app/*.py"]}})
    local_fake.script(TokenScript.of(" a", " +", " b", logprob=-2.0))
    rec = await pipeline(local_fake.url, remote_fake.base_url, s).complete(CTX)
    assert rec.route == "local"
    assert rec.reasons == ("low-confidence", "privacy-blocked", "kept-local-unconfirmed")
    assert rec.bytes_sent == 0 and rec.remote_model is None
    assert remote_fake.received() == []  # not even a health check


async def test_local_only_mode_with_invalid_local(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    s = with_values(Settings(), {"privacy": {"local_only": True}})
    local_fake.script(INVALID)
    rec = await pipeline(local_fake.url, remote_fake.base_url, s).complete(CTX)
    assert rec.route == "none" and rec.reasons == ("syntax-invalid", "local-only")
    assert remote_fake.received() == []


async def test_no_remote_configured(local_fake: FakeOllama) -> None:
    local_fake.script(TokenScript.of(" a", " +", " b", logprob=-2.0))
    rec = await pipeline(local_fake.url, None).complete(CTX)
    assert rec.route == "local" and "no-remote-configured" in rec.reasons


async def test_cache_and_typing_through(local_fake: FakeOllama, remote_fake: FakeOpenAI) -> None:
    local_fake.script(VALID)
    p = pipeline(local_fake.url, remote_fake.base_url)
    first = await p.complete(CTX)
    again = await p.complete(CTX)
    typed = await p.complete(
        CompletionContext(prefix=CTX.prefix + " a +", suffix=CTX.suffix, language="python")
    )
    assert first.completion == " a + b" and not first.cache_hit
    assert again.cache_hit and again.completion == " a + b" and again.reasons[0] == "cache-hit"
    assert again.confidence == first.confidence and again.syntax == first.syntax
    assert typed.cache_hit and typed.completion == " b" and typed.route == "local"
    assert len(local_fake.received("/api/generate")) == 1  # one real generation for three


@pytest.mark.parametrize(
    ("policy", "script", "route"),
    [
        ("confidence", INVALID, "local"),  # no gate: the broken code is shown
        ("syntax", TokenScript.of(" a", " +", " b", logprob=-4.0), "local"),
        ("local", INVALID, "local"),
        ("remote", VALID, "remote"),
    ],
)
async def test_other_policies(
    local_fake: FakeOllama, remote_fake: FakeOpenAI, policy: str, script: TokenScript, route: str
) -> None:
    s = with_values(Settings(), {"routing": {"policy": policy}})
    local_fake.script(script)
    remote_fake.script(REMOTE)
    rec = await pipeline(local_fake.url, remote_fake.base_url, s).complete(CTX)
    assert rec.route == route, rec.reasons
    assert completions(remote_fake) == (1 if route == "remote" else 0)


async def test_escalation_carries_the_remote_priority(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    s = with_values(Settings(), {"remote": {"priority": -2}})
    local_fake.script(INVALID)
    remote_fake.script(REMOTE)
    rec = await pipeline(local_fake.url, remote_fake.base_url, s).complete(
        attrs.evolve(CTX, invoked=True)
    )
    assert rec.route == "remote"
    assert remote_fake.received("/v1/completions")[0].json()["priority"] == -2
    assert "priority" not in local_fake.received("/api/generate")[0].json()


async def test_the_remote_tier_waits_until_typing_has_settled(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    """editor.speculative: the local tier runs while the debounce waits; the cluster is
    asked only once it is over (`settled` True), and never when typing went on (False)."""
    local_fake.script(INVALID, always=True)  # the local answer breaks the syntax: escalate
    remote_fake.script(REMOTE, always=True)
    pipe = pipeline(local_fake.url, remote_fake.base_url)
    loop = asyncio.get_running_loop()
    settled: asyncio.Future[bool] = loop.create_future()
    task = asyncio.ensure_future(pipe.complete(attrs.evolve(CTX, settled=settled)))
    await asyncio.sleep(0.3)
    assert len(local_fake.received("/api/generate")) >= 1  # the local tier has run
    assert completions(remote_fake) == 0 and not task.done()
    settled.set_result(True)
    rec = await task
    assert (rec.route, rec.completion, completions(remote_fake)) == ("remote", " a + b", 1)

    other = attrs.evolve(CTX, settled=loop.create_future())
    pipe = pipeline(local_fake.url, remote_fake.base_url)  # (a new cache)
    task = asyncio.ensure_future(pipe.complete(other))
    await asyncio.sleep(0.3)
    assert other.settled is not None
    other.settled.set_result(False)  # type: ignore[attr-defined]
    try:
        rec = await task
    except asyncio.CancelledError:
        pass
    else:
        assert rec.route != "remote" and rec.bytes_sent == 0, rec
    assert completions(remote_fake) == 1  # nothing more left
