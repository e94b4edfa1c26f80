"""The gate's check while the local stream is quiet (`gating.AheadCheck`): a local model
sends its end one decode step after its last text, so the text so far is checked in
that gap and the gate step reuses the verdict when the stream ends with that text. The
reused verdict is the one the gate step would reach itself; a changed document, another
text, or a check cut short by its budget gets a check of its own; the checks ahead take
a bounded share of the stream's time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.server.routing import gating
from synconfroute.server.routing.gate import SyntaxGate, make_gate
from synconfroute.server.routing.gating import AHEAD_SHARE, AheadCheck, Gating, check_ahead
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import Anchor, CompletionContext
from synconfroute.server.routing.router import LocalEvidence
from synconfroute.server.routing.steps import LocalRun, LocalStep
from synconfroute.server.session.session import Session
from synconfroute.server.settings import config
from synconfroute.server.syntax import SyntaxDocument
from synconfroute.server.vocab.positions import Text
from synconfroute.server.vocab.verdict import Verdict
from tests.fakes import FakeOllama, TokenScript

Pos = tuple[int, int]

# (text, cursor, completion): valid, invalid, an undefined name, a multi-line block, a
# file broken near the cursor (the window judges), a string left open above.
CASES: list[tuple[str, Pos, str]] = [
    ("def g(x):\n    return \n", (1, 11), " x + 1"),
    ("def g(x):\n    return \n", (1, 11), " (x + 1"),
    ("def g(x):\n    return \n", (1, 11), " y + 1"),
    ("def g(x):\n    \n", (1, 4), "if x:\n        return x\n    return 0"),
    ("def g(x):\n    \n", (1, 4), "if x:\n    return x"),
    ("def f():\n    y = (2\n    x = 1\n    \n", (3, 4), "if x:\n        pass\n"),
    ('def f():\n    """x = 1\n    \n', (2, 4), "return x"),
    ("class A:\n    def m(self):\n        return \n", (2, 15), " self.m()"),
]


def _seen(v: Verdict) -> tuple[object, ...]:
    return (
        v.valid,
        v.status,
        v.mode,
        v.checker,
        v.line,
        v.column,
        v.message,
        v.detail,
        v.undefined,
    )


def _ctx(doc: SyntaxDocument, at: Pos) -> CompletionContext:
    return CompletionContext(prefix="", suffix="", document=Anchor(doc, at), language="python")


def _gate() -> SyntaxGate:
    return SyntaxGate("tree-sitter", 0.05, 3.0)


def _counting(gate: SyntaxGate) -> list[str]:
    checked: list[str] = []
    real = gate.check

    def check(ctx: CompletionContext, completion: str) -> Verdict:
        checked.append(completion)
        return real(ctx, completion)

    gate.check = check  # type: ignore[method-assign]
    return checked


def _step(text: str, ahead: AheadCheck | None) -> LocalStep:
    run = LocalRun(text=text, logprobs=(-0.01,), finish_reason="stop")
    return LocalStep(run, text, None, None if ahead is None else ahead.found)


async def _gated(gate: SyntaxGate, ctx: CompletionContext, step: LocalStep) -> Verdict:
    g = Gating(gate, float("inf"), lambda: 0.0)
    gated = await gating.gate_local(g, ctx, step, LocalEvidence(text=step.text), True)
    assert gated.verdict is not None
    return gated.verdict


@pytest.mark.parametrize(("text", "at", "completion"), CASES)
async def test_the_verdict_checked_ahead_is_the_gate_steps_own(
    text: str, at: Pos, completion: str
) -> None:
    gate = _gate()
    doc = SyntaxDocument(Text(text, "utf-16"), "python", lazy=True)
    ctx = _ctx(doc, at)
    ahead = check_ahead(gate, ctx, True, lambda: 0.0)
    assert ahead is not None
    ahead.quiet(completion)
    assert ahead.found is not None and ahead.found.text == completion
    checked = _counting(gate)
    reused = await _gated(gate, ctx, _step(completion, ahead))
    assert checked == []  # the gate step checked nothing itself
    # the general way: a fresh document, no head start, no check ahead
    fresh = SyntaxDocument(Text(text, "utf-16"), "python", lazy=True)
    assert _seen(reused) == _seen(_gate().check(_ctx(fresh, at), completion))


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(CASES), st.data())
def test_every_text_the_stream_passes_through_gets_the_general_verdict(
    case: tuple[str, Pos, str], data: st.DataObject
) -> None:
    """The texts a stream goes quiet on are its prefixes (mostly broken code): checked
    ahead, one after another on one document, each verdict kept is the general one."""
    text, at, completion = case
    cuts = sorted(set(data.draw(st.lists(st.integers(1, len(completion)), max_size=4))))
    gate = _gate()
    doc = SyntaxDocument(Text(text, "utf-16"), "python", lazy=True)
    ahead = check_ahead(gate, _ctx(doc, at), True, lambda: 0.0)
    assert ahead is not None
    for cut in cuts:
        ahead.quiet(completion[:cut])
        found = ahead.found
        if found is None:
            continue
        fresh = SyntaxDocument(Text(text, "utf-16"), "python", lazy=True)
        assert _seen(found.verdict) == _seen(_gate().check(_ctx(fresh, at), found.text))


def test_the_cases_cover_valid_invalid_and_names() -> None:
    seen = {
        (v.status, bool(v.undefined))
        for v in (_gate().check(_ctx(SyntaxDocument(t, "python"), at), c) for t, at, c in CASES)
    }
    assert {("valid", False), ("invalid", False), ("valid", True)} <= seen


async def test_an_edit_after_the_check_ahead_gets_a_check_of_its_own() -> None:
    gate = _gate()
    doc = SyntaxDocument(Text("def g(x):\n    return \n", "utf-16"), "python", lazy=True)
    ctx = _ctx(doc, (1, 11))
    ahead = check_ahead(gate, ctx, True, lambda: 0.0)
    assert ahead is not None
    ahead.quiet(" y")
    assert ahead.found is not None and ahead.found.verdict.undefined == ("y",)
    doc.edit((0, 0), (0, 0), "y = 1\n")  # the user types above while the model ends
    checked = _counting(gate)
    verdict = await _gated(gate, _ctx(doc, (2, 11)), _step(" y", ahead))
    assert checked == [" y"]
    assert verdict.valid and verdict.undefined == ()


async def test_another_final_text_gets_a_check_of_its_own() -> None:
    gate = _gate()
    doc = SyntaxDocument(Text("def g(x):\n    return \n", "utf-16"), "python", lazy=True)
    ctx = _ctx(doc, (1, 11))
    ahead = check_ahead(gate, ctx, True, lambda: 0.0)
    assert ahead is not None
    ahead.quiet(" x +")  # then the stream went on: " 1"
    checked = _counting(gate)
    verdict = await _gated(gate, ctx, _step(" x + 1", ahead))
    assert checked == [" x + 1"] and verdict.valid


def test_a_verdict_reached_against_the_budget_is_not_kept() -> None:
    """A check near its deadline may skip a step for time (the names: "no time left"):
    only a decision well within the budget is the gate step's for sure."""
    gate = _gate()
    doc = SyntaxDocument(Text("def g(x):\n    return \n", "utf-16"), "python", lazy=True)
    ctx = _ctx(doc, (1, 11))
    real = gate.check

    def slow(c: CompletionContext, completion: str) -> Verdict:
        return attrs.evolve(real(c, completion), elapsed_s=gate.budget_s)

    gate.check = slow  # type: ignore[method-assign, assignment]
    ahead = check_ahead(gate, ctx, True, lambda: 0.0)
    assert ahead is not None
    ahead.quiet(" x")
    assert ahead.checks == 1 and ahead.found is None


def test_no_check_ahead_without_an_open_document_or_on_a_blocking_gate() -> None:
    doc = SyntaxDocument(Text("def g(x):\n    return \n", "utf-16"), "python", lazy=True)
    plain = CompletionContext(prefix="def g(x):\n    return ", suffix="\n", language="python")
    assert check_ahead(_gate(), plain, True, lambda: 0.0) is None
    compiler = SyntaxGate("compiler", 0.05, 3.0)
    assert check_ahead(compiler, _ctx(doc, (1, 11)), True, lambda: 0.0) is None
    assert check_ahead(None, _ctx(doc, (1, 11)), True, lambda: 0.0) is None


class _Clock:
    """Seconds that pass only when told: each check takes `cost`."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_checks_ahead_stay_within_their_share_of_the_streams_time() -> None:
    clock = _Clock()
    gate = _gate()
    real = gate.check
    cost = 0.010

    def check(c: CompletionContext, completion: str) -> Verdict:
        clock.now += cost
        return real(c, completion)

    gate.check = check  # type: ignore[method-assign, assignment]
    doc = SyntaxDocument(Text("def g(x):\n    return \n", "utf-16"), "python", lazy=True)
    ahead = check_ahead(gate, _ctx(doc, (1, 11)), True, clock)
    assert ahead is not None
    text = ""
    for i in range(100):  # a token every 30 ms, each gap quiet
        clock.now += 0.030
        text += f" x{i % 10}"
        ahead.quiet(text)
        ahead.quiet(text)  # (one check per text however often it is told)
    assert ahead.checks >= 1
    assert ahead.checks * cost <= AHEAD_SHARE * clock.now + cost
    # a check every token would have taken a quarter of the time
    assert ahead.checks < 100 // 4


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    # the completion in one chunk, its end 60 ms later (a CPU's decode step, generous)
    with FakeOllama(
        default=TokenScript.of(" x + 1", "", logprob=-0.01, first_delay=0.02, delay=0.06)
    ) as f:
        yield f


async def test_through_the_server_the_gate_step_reuses_the_check_in_the_gap(
    fake: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    reused: list[Verdict | None] = []
    real = gating._checked_ahead

    def spy(*a: Any) -> Verdict | None:
        found = real(*a)
        reused.append(found)
        return found

    monkeypatch.setattr(gating, "_checked_ahead", spy)
    settings = config.with_values(config.Settings(), {"editor": {"debounce_ms": 0}})

    def make(s: config.Settings) -> Pipeline:
        return Pipeline(s, OllamaBackend(fake.url, "qwen2.5-coder:3b"), None, make_gate(s.routing))

    session = Session(
        config.Loaded(settings, (), config.default_config_path(), False), make_pipeline=make
    )
    try:
        for i, (completion, valid) in enumerate(((" x + 1", True), (" (x + 1", False))):
            fake.default = TokenScript.of(
                completion, "", logprob=-0.01, first_delay=0.02, delay=0.06
            )
            uri = f"file:///ahead/g{i}.py"
            text = f"def g{i}(x):\n    return \n"  # (another text: no cache hit)
            session.open(uri, text, "python", None)
            done = await session.complete(uri, 1, 11, invoked=True)
            assert done is not None
            verdict = done.decision.syntax
            assert verdict is not None and verdict.valid == valid, verdict
            assert reused and reused[-1] is not None, f"no verdict checked ahead: {reused}"
            fresh = SyntaxDocument(Text(text, "utf-16"), "python", lazy=True)
            general = make_gate(settings.routing).check(_ctx(fresh, (1, 11)), completion)
            assert _seen(verdict) == _seen(general)
    finally:
        await session.shutdown()


async def test_run_local_tells_each_quiet_gap_and_nothing_after_the_end() -> None:
    """The quiet callback gets the text so far once per gap (60 ms between the fake's
    chunks, its done line 60 ms after the last), and nothing once the stream ended."""
    from synconfroute.clients.types import CompletionRequest
    from synconfroute.server.routing.local_run import QUIET_S, LocalLimits, run_local
    from synconfroute.server.routing.planner import TierRequest
    from synconfroute.server.routing.router import Rules

    heard: list[str] = []
    script = TokenScript.of(" x", " +", " 1", "", logprob=-0.01, first_delay=0.02, delay=0.06)
    with FakeOllama(default=script) as fake:
        backend = OllamaBackend(fake.url, "qwen2.5-coder:3b")
        lim = LocalLimits(
            settings=config.Settings().local,
            deadline=float("inf"),
            rules=Rules(
                policy="synconf", threshold=0.5, k=3, missing_logprobs="escalate", semantic="names"
            ),
            access="ok",
            multiline=True,
            early_escalation=False,
            clock=time.monotonic,
        )
        treq = TierRequest("local", CompletionRequest(prefix="y = ", suffix=""), (), 0, None)
        try:
            run = await run_local(backend, treq, lim, heard.append)
            assert run.text == " x + 1" and run.error is None, run
            seen = list(heard)
            await asyncio.sleep(QUIET_S * 20)  # a timer still set does nothing now
        finally:
            await backend.aclose()
    # (a machine paused over a gap merges it with the next: fewer calls, never others)
    assert seen and seen[-1] == " x + 1", seen
    assert all(t in (" x", " x +", " x + 1") for t in seen) and len(set(seen)) == len(seen)
    assert heard == seen
