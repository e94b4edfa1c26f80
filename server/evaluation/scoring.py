"""Replay recorded generations through the router: policies, thresholds and metrics.

Every routing decision here is `server.routing.router.decide` (and `after_remote` for the
escalated ones) on the same `LocalEvidence` the pipeline builds, so the evaluation and
the server cannot disagree. Nothing is generated or run again: a task's outcome is its
recorded completions plus their recorded execution results.

Terms:
- escalation rate: share of tasks the router sends to the remote tier;
- kept-local precision: share of the tasks kept local whose local completion passes;
- gate false reject: a local completion that passes its tests but the gate calls invalid;
- CPT(50%): the smallest escalation rate at which a policy recovers half of the gap
  between the local model alone and the remote model alone; APGR: the average share of
  that gap recovered over escalation rates 0..1 (RouteLLM; a random router scores 0.5).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from ..routing import router
from ..routing.gate import SyntaxGate
from ..routing.request import CompletionContext
from ..routing.router import LocalEvidence, Rules, SyntaxStatus
from ..syntax import check_completion
from ..syntax.names import LANGUAGES as NAMES_LANGUAGES
from ..vocab.errors import UserError
from ..vocab.kinds import GateMode, Policy
from ..vocab.verdict import Verdict
from .execute import exec_key
from .records import Record, RunFolder

_STATUSES: dict[str, SyntaxStatus] = {
    s: s for s in ("valid", "invalid", "timeout", "unsupported-language", "error")
}
SWEPT = ("confidence-only", "synconf", "synconf+names")
POLICY_RULES: dict[str, Policy] = {
    "always-local": "local",
    "always-remote": "remote",
    "syntax-only": "syntax",
    "confidence-only": "confidence",
    "synconf": "synconf",
    "synconf+names": "synconf",  # with the names gate (routing.semantic = "names")
}
# Only the "+names" policies look at the names gate's verdict.
NAMES_POLICIES = frozenset({"synconf+names"})


def policy_rules(base: Rules, policy: str, threshold: float | None = None) -> Rules:
    """The resolved rules `base` (`resolve_rules`) under one evaluated policy, at
    `threshold` (None: base's own)."""
    return attrs.evolve(
        base,
        policy=POLICY_RULES[policy],
        threshold=base.threshold if threshold is None else threshold,
        semantic="names" if policy in NAMES_POLICIES else "off",
    )


BUDGETS = (0.2, 0.4, 0.6)


@attrs.frozen(kw_only=True)
class TaskOutcome:
    """What scoring needs of one task."""

    key: str
    dataset: str
    language: str
    evidence: LocalEvidence  # as the pipeline builds it, syntax verdict included
    confidence: float | None  # of the first k local tokens (None: no tokens/log-probs)
    local_pass: bool
    remote: bool  # a remote tier (real or oracle) answered in this run
    remote_ok: bool
    remote_text: str
    remote_pass: bool


@attrs.frozen(kw_only=True)
class Point:
    """One policy (at one threshold) on one group of tasks."""

    policy: str
    threshold: float | None
    n: int
    escalated: int
    kept_local: int
    kept_local_pass: int
    passed: int | None  # None: escalated tasks have no remote answer (--remote none)

    @property
    def escalation_rate(self) -> float:
        return self.escalated / self.n if self.n else 0.0

    @property
    def pass_at_1(self) -> float | None:
        return None if self.passed is None or not self.n else self.passed / self.n

    @property
    def kept_local_precision(self) -> float | None:
        return self.kept_local_pass / self.kept_local if self.kept_local else None

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "threshold": self.threshold,
            "n": self.n,
            "escalated": self.escalated,
            "escalation_rate": _r(self.escalation_rate),
            "kept_local": self.kept_local,
            "kept_local_pass": self.kept_local_pass,
            "kept_local_precision": _r(self.kept_local_precision),
            "passed": self.passed,
            "pass_at_1": _r(self.pass_at_1),
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


class ScoringError(UserError):
    """The records cannot be scored as asked; worded for the user."""


def outcomes(
    folder: RunFolder,
    *,
    rules: Rules,
    gate_mode: GateMode,
    gate: SyntaxGate | None = None,
    require_exec: bool = True,
    regate: bool = False,
) -> tuple[list[TaskOutcome], int]:
    """The scorable tasks of `folder`, and how many records lack execution results; each
    task's confidence as `rules` (k, missing log-probs) judge it.

    A gate verdict missing for `gate_mode` (every one, with `regate`) is computed now with
    `gate`; it is not written back.
    """
    out: list[TaskOutcome] = []
    incomplete = 0
    for rec in folder.records.values():
        loc, rem = rec.local, rec.remote
        local_key = exec_key(rec.task, loc.text)
        local_res = folder.execs.get(local_key)
        remote_res = folder.execs.get(exec_key(rec.task, rem.text)) if rem and rem.ok else None
        if require_exec and (local_res is None or (rem and rem.ok and remote_res is None)):
            incomplete += 1
            continue
        verdict = _gate(rec, gate_mode, gate, regate)
        syntax = _STATUSES.get(verdict.status, "error") if verdict else None
        ev = LocalEvidence(
            available=loc.ok,
            text=loc.text,
            logprobs=loc.logprob_values,
            has_logprobs=loc.logprobs,
            syntax=syntax,
            undefined=undefined_in(rec) if syntax == "valid" else (),
        )
        conf = router.is_confident(ev, rules)[1] if loc.text else None
        out.append(
            TaskOutcome(
                key=rec.key,
                dataset=rec.task.dataset,
                language=rec.task.language,
                evidence=ev,
                confidence=conf,
                local_pass=bool(local_res and local_res.passed),
                remote=rem is not None,
                remote_ok=bool(rem and rem.ok),
                remote_text=rem.text if rem and rem.ok else "",
                remote_pass=bool(remote_res and remote_res.passed),
            )
        )
    return out, incomplete


def _gate(rec: Record, mode: GateMode, gate: SyntaxGate | None, regate: bool) -> Verdict | None:
    if not rec.local.ok or not rec.local.text:
        return None
    if mode in rec.gate and not (regate and gate is not None):
        return rec.gate[mode]
    if gate is None:
        raise ScoringError(
            f"the records hold no {mode!r} gate verdicts; score with the mode they were "
            f"recorded with ({', '.join(rec.gate) or 'none'})"
        )
    ctx = CompletionContext(
        prefix=rec.task.prefix, suffix=rec.task.suffix, language=rec.task.language
    )
    return gate.check(ctx, rec.local.text)


def undefined_in(rec: Record) -> tuple[str, ...]:
    """The names gate on a record's local completion, in the whole task file (as the
    server's gate sees an open document); computed at scoring time, not recorded."""
    if rec.task.language not in NAMES_LANGUAGES or not rec.local.text:
        return ()
    v = check_completion(
        rec.task.prefix,
        rec.local.text,
        rec.task.suffix,
        rec.task.language,
        names=True,
        budget_s=5.0,  # offline: no reason to let a busy machine decide
    )
    return v.undefined if v.valid else ()


# -- policies -------------------------------------------------------------------------


def evaluate(tasks: Sequence[TaskOutcome], rules: Rules, name: str) -> Point:
    """Route every task with `rules` (as the server would, remote reachable) and count."""
    escalated = kept = kept_pass = passed = 0
    missing_remote = False
    for o in tasks:
        verdict = router.decide(o.evidence, rules, "ok")
        if verdict.action == "keep-local":
            kept += 1
            kept_pass += o.local_pass
            passed += o.local_pass
            continue
        escalated += 1
        if not o.remote:
            missing_remote = True
            continue
        final = router.after_remote(
            verdict, o.evidence, remote_ok=o.remote_ok, remote_text=o.remote_text
        )
        if final.route == "remote":
            passed += o.remote_pass
        elif final.route == "local":
            passed += o.local_pass
    threshold = rules.threshold if rules.policy in ("confidence", "synconf") else None
    return Point(
        policy=name,
        threshold=threshold,
        n=len(tasks),
        escalated=escalated,
        kept_local=kept,
        kept_local_pass=kept_pass,
        passed=None if missing_remote else passed,
    )


def local_alone(tasks: Sequence[TaskOutcome]) -> Point:
    """The local model answers everything (no router): the weak end of the gap."""
    p = sum(o.local_pass for o in tasks)
    return Point(
        policy="local-alone",
        threshold=None,
        n=len(tasks),
        escalated=0,
        kept_local=len(tasks),
        kept_local_pass=p,
        passed=p,
    )


def oracle(tasks: Sequence[TaskOutcome]) -> Point:
    """Escalate exactly the tasks the local model fails and the remote passes."""
    esc = sum(1 for o in tasks if not o.local_pass and o.remote_pass)
    lp = sum(o.local_pass for o in tasks)
    remote = all(o.remote for o in tasks)
    return Point(
        policy="oracle",
        threshold=None,
        n=len(tasks),
        escalated=esc,
        kept_local=len(tasks) - esc,
        kept_local_pass=lp,
        passed=lp + esc if remote else None,
    )


def thresholds(tasks: Sequence[TaskOutcome], reference: float, steps: int = 40) -> list[float]:
    """Quantiles of the local confidences, the reference, and both ends."""
    confs = sorted(o.confidence for o in tasks if o.confidence is not None)
    if not confs:
        return [reference]
    picks = {
        confs[min(len(confs) - 1, round(i * (len(confs) - 1) / steps))] for i in range(steps + 1)
    }
    # Just above each pick, so that confidence == pick is escalated at this threshold ...
    grid = {math.nextafter(c, math.inf) for c in picks}
    # ... and the two ends: nothing escalated on confidence, everything.
    grid |= {confs[0] - 1e-3, confs[-1] + 1e-3, reference}
    return sorted(grid)


def sweep(
    tasks: Sequence[TaskOutcome], policy: str, grid: Iterable[float], rules: Rules
) -> list[Point]:
    return [evaluate(tasks, policy_rules(rules, policy, t), policy) for t in grid]


# -- RouteLLM summary ---------------------------------------------------------------------


def routellm(
    curve: Sequence[Point], weak: float | None, strong: float | None
) -> dict[str, float | None]:
    """CPT(50%) and APGR of a threshold curve (see the module doc).

    The curve is joined to (0, weak) and (1, strong) where it does not reach them: a
    random mix of two operating points realises every point on the segment between them.
    """
    empty: dict[str, float | None] = {"cpt50": None, "apgr": None}
    if weak is None or strong is None or strong - weak <= 0:
        return empty
    pts = sorted((p.escalation_rate, p.pass_at_1) for p in curve if p.pass_at_1 is not None)
    if not pts:
        return empty
    if pts[0][0] > 0:
        pts.insert(0, (0.0, weak))
    if pts[-1][0] < 1:
        pts.append((1.0, strong))
    gap = strong - weak
    pgr = [(x, (y - weak) / gap) for x, y in pts]
    apgr = sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in itertools.pairwise(pgr))
    cpt: float | None = None
    if pgr[0][1] >= 0.5:
        cpt = pgr[0][0]
    else:
        for (x0, y0), (x1, y1) in itertools.pairwise(pgr):
            if y1 >= 0.5 > y0:
                cpt = x0 + (x1 - x0) * (0.5 - y0) / (y1 - y0)
                break
    return {"cpt50": _r(cpt), "apgr": _r(apgr)}


def within_budget(curve: Sequence[Point], budget: float) -> Point | None:
    """The operating point that escalates the most without exceeding `budget` (ties: the
    better pass@1, then the lower threshold)."""
    ok = [p for p in curve if p.escalation_rate <= budget + 1e-12]
    if not ok:
        return None
    return max(ok, key=lambda p: (p.escalation_rate, p.pass_at_1 or 0.0, -(p.threshold or 0.0)))


# -- local-side metrics -------------------------------------------------------------------


def gate_stats(tasks: Sequence[TaskOutcome]) -> dict[str, Any]:
    """How the gate judged the local completions against what execution found."""
    checked = [o for o in tasks if o.evidence.syntax is not None]
    status: dict[str, int] = {}
    for o in checked:
        s = str(o.evidence.syntax)
        status[s] = status.get(s, 0) + 1
    correct = [o for o in checked if o.local_pass]
    wrong = [o for o in checked if not o.local_pass]
    rejects = [o for o in correct if o.evidence.syntax == "invalid"]
    caught = [o for o in wrong if o.evidence.syntax == "invalid"]
    # The names gate looks at valid completions only.
    named = [o for o in correct if o.evidence.undefined]
    return {
        "correct_valid": sum(1 for o in correct if o.evidence.syntax == "valid"),
        "names_false_rejects": len(named),
        "names_false_reject_tasks": [o.key for o in named[:10]],
        "wrong_valid": sum(1 for o in wrong if o.evidence.syntax == "valid"),
        "wrong_undefined": sum(1 for o in wrong if o.evidence.undefined),
        "checked": len(checked),
        "status": status,
        "correct": len(correct),
        "false_rejects": len(rejects),
        "false_reject_tasks": [o.key for o in rejects[:10]],
        "wrong": len(wrong),
        "wrong_invalid": len(caught),
        "wrong_invalid_share": _r(len(caught) / len(wrong)) if wrong else None,
    }


def confident_wrong(tasks: Sequence[TaskOutcome], rules: Rules) -> dict[str, Any]:
    """Local completions confident under `rules` (as the router judges) that fail their
    tests, split by the gate's verdict: the paper found 46% syntax-invalid, 54% valid."""
    threshold = rules.threshold
    wrong = [
        o
        for o in tasks
        if o.evidence.text and not o.local_pass and router.is_confident(o.evidence, rules)[0]
    ]
    invalid = sum(1 for o in wrong if o.evidence.syntax == "invalid")
    valid = sum(1 for o in wrong if o.evidence.syntax == "valid")
    n = len(wrong)
    return {
        "threshold": threshold,
        "confident_wrong": n,
        "syntax_invalid": invalid,
        "valid_but_wrong": valid,
        "undecided": n - invalid - valid,
        "syntax_invalid_share": _r(invalid / n) if n else None,
        "valid_but_wrong_share": _r(valid / n) if n else None,
    }


# -- putting it together ---------------------------------------------------------------------


def groups(tasks: Sequence[TaskOutcome]) -> dict[str, list[TaskOutcome]]:
    """dataset/language, each dataset with several languages, and "all" (if > 1 group)."""
    by_pair: dict[str, list[TaskOutcome]] = {}
    by_ds: dict[str, list[TaskOutcome]] = {}
    for o in tasks:
        by_pair.setdefault(f"{o.dataset}/{o.language}", []).append(o)
        by_ds.setdefault(o.dataset, []).append(o)
    out = dict(sorted(by_pair.items()))
    for ds, items in sorted(by_ds.items()):
        if len({o.language for o in items}) > 1:
            out[ds] = items
    if len(by_pair) > 1:
        out["all"] = list(tasks)
    return out


def summarize(
    tasks: Sequence[TaskOutcome],
    *,
    rules: Rules,
    progress: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Every metric for one group of tasks (JSON-ready), under the resolved `rules`
    (their threshold, k and missing log-probs; each policy its own)."""
    threshold = rules.threshold
    weak = local_alone(tasks)
    by_policy = {name: policy_rules(rules, name) for name in POLICY_RULES}
    points = {name: evaluate(tasks, r, name) for name, r in by_policy.items()}
    points["oracle"] = oracle(tasks)
    strong = points["always-remote"].pass_at_1
    grid = thresholds(tasks, threshold)
    curves = {p: sweep(tasks, p, grid, rules) for p in SWEPT}
    if progress:
        progress()
    summary: dict[str, Any] = {
        "n": len(tasks),
        "local_alone": weak.to_json(),
        "policies": {name: p.to_json() for name, p in points.items()},
        "curves": {name: [p.to_json() for p in c] for name, c in curves.items()},
        "routellm": {name: routellm(c, weak.pass_at_1, strong) for name, c in curves.items()},
        "budgets": {
            str(b): {
                name: (pt.to_json() if (pt := within_budget(c, b)) else None)
                for name, c in curves.items()
            }
            for b in BUDGETS
        },
        "gate": gate_stats(tasks),
        "confident_wrong": confident_wrong(tasks, rules),
        "wrong_by_gate": confident_wrong(
            tasks, attrs.evolve(rules, threshold=-math.inf, missing_logprobs="trust")
        ),
    }
    summary["confident_wrong"]["threshold"] = threshold
    summary["wrong_by_gate"]["threshold"] = None
    return summary
