"""The completion sequence alone (issue 35): `sequence.run` orders the steps over frozen
values, with no backend, gate or clock of its own. Here the steps are given their
results, as a second sequence (next-edit suggestions) would give its own steps.
(On 8c2c157 there was no sequence apart from `Pipeline`: nothing to run alone.)"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from synconfroute.clients.errors import EgressRefused
from synconfroute.server.routing import sequence
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.routing.router import LocalEvidence, Reason, RemoteAccess, Ruling
from synconfroute.server.routing.rules import resolve_rules
from synconfroute.server.routing.steps import (
    Gated,
    LocalRun,
    LocalStep,
    Outcome,
    RemoteStep,
    decision,
)
from synconfroute.server.settings.config import Settings
from synconfroute.server.vocab.record import Problem, RouteDecision
from synconfroute.server.vocab.verdict import Verdict

CTX = CompletionContext(prefix="x = ", suffix="\n", language="python", path="/w/a.py")
RULES = resolve_rules(Settings(), "")


class Given:
    """Steps with fixed results; each call is logged by name."""

    def __init__(self, local: LocalStep, verdict: Verdict, remote: RemoteStep) -> None:
        self.calls: list[str] = []
        self._local, self._verdict, self._remote = local, verdict, remote

    def now(self) -> float:
        return 0.0

    def access(self, ctx: CompletionContext) -> RemoteAccess:
        return "ok"

    async def local_step(self, req: sequence.Req, access: RemoteAccess) -> LocalStep:
        self.calls.append("local")
        return self._local

    async def gate_step(self, req: sequence.Req, local: LocalStep, ev: LocalEvidence) -> Gated:
        self.calls.append("gate")
        judged = attrs.evolve(ev, syntax=self._verdict.status)
        return Gated(local.text, judged, self._verdict, 1.0, None)

    async def remote_step(self, req: sequence.Req, draft: str = "") -> RemoteStep:
        self.calls.append("remote")
        return self._remote

    def record(
        self,
        req: sequence.Req,
        outcome: Outcome,
        local: tuple[LocalStep, LocalStep, Gated | None],
        remote: RemoteStep | None,
        problems: Sequence[Problem],
        rerun_ms: float | None = None,
        *,
        tokens_of_last: bool = False,
        models: tuple[str | None, str | None] | None = None,
    ) -> RouteDecision:
        self.calls.append("record")
        first, last, gated = local
        return decision(
            req.ctx, req.rules, req.models, outcome, first=first, last=last, gated=gated,
            remote=remote, rerun_ms=rerun_ms, local_tokens=3, local_context=(),
            problems=problems, total_ms=1.0,
        )  # fmt: skip

    def escalated(self, confidence: float | None, sent: bool) -> None:
        self.calls.append("escalated")

    def held_by_load(self, req: sequence.Req, verdict: Ruling, ev: LocalEvidence) -> Reason | None:
        return None

    def load_text(self, held: Reason) -> str:
        return ""

    def may_escalate_broken(self, req: sequence.Req) -> bool:
        return True


def _req() -> sequence.Req:
    return sequence.Req(
        ctx=CTX, rules=RULES, models=("small", "large"), t0=0.0, deadline=1.0,
        local=None, multiline=False,
    )  # fmt: skip


async def test_confident_but_broken_escalates_and_the_gates_refusal_is_recorded() -> None:
    local = LocalStep(LocalRun(text="(1", logprobs=(-0.01,) * 3, finish_reason="stop"), "(1", None)
    broken = Verdict(valid=False, status="invalid", mode="tree-sitter")
    refused = EgressRefused("not sent", reason="gitignored (window)")
    remote = RemoteStep(
        "failed", problem=Problem.of("remote", refused), egress="refused: gitignored (window)"
    )
    steps = Given(local, broken, remote)
    rec, cacheable = await sequence.run(steps, _req(), "ok")
    assert steps.calls == ["local", "gate", "remote", "escalated", "record"]
    assert (rec.route, rec.completion) == ("none", "")
    assert rec.reasons == (Reason.SYNTAX_INVALID, Reason.REMOTE_FAILED)
    assert rec.egress == "refused: gitignored (window)" and rec.bytes_sent == 0
    assert cacheable


async def test_confident_and_valid_never_asks_the_remote() -> None:
    local = LocalStep(LocalRun(text="1", logprobs=(-0.01,) * 3, finish_reason="stop"), "1", None)
    valid = Verdict(valid=True, status="valid", mode="tree-sitter")
    steps = Given(local, valid, RemoteStep("ok", text="2"))
    rec, _ = await sequence.run(steps, _req(), "ok")
    assert steps.calls == ["local", "gate", "record"]
    assert (rec.route, rec.completion, rec.egress) == ("local", "1", "")
