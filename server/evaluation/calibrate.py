"""`synconfroute calibrate`: pick the threshold from recorded generations, write it to settings.

The candidates lie between consecutive distinct local confidences (rounded to 4
decimals, then re-scored with the rounded value, so what is reported is what the
written threshold does). `--budget B` takes the candidate that escalates the most
without exceeding B (ties: the better pass@1); `--best` the best pass@1 (ties: the
lower escalation), which needs real remote results.

Writing edits only the `threshold` line of the `[routing]` table (or adds it), keeping
everything else in the file byte for byte; it then re-reads the file with
`server.settings.config.load` and restores the old content if the value did not come back.
"""

from __future__ import annotations

import itertools
import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs
import tomlkit

from ..routing.gate import SyntaxGate
from ..routing.rules import resolve_rules
from ..settings.config import ENV_PREFIX, Settings, load
from ..vocab.errors import UserError
from . import scoring
from .generate import refresh_all
from .records import RunFolder
from .scoring import Point, TaskOutcome

MAX_CANDIDATES = 400


class CalibrationError(UserError):
    """Calibration cannot answer; worded for the user."""


@attrs.frozen(kw_only=True)
class ThresholdChoice:
    threshold: float
    point: Point
    policy: str
    goal: str
    tasks: int
    model: str
    remote: str = ""  # the run's remote: "oracle" makes pass@1 an upper bound


def candidates(tasks: Sequence[TaskOutcome]) -> list[float]:
    confs = [o.confidence for o in tasks if o.confidence is not None]
    if not confs:
        raise CalibrationError("no local completion with log-probs in the records")
    return candidate_thresholds(confs)


def candidate_thresholds(confidences: Iterable[float]) -> list[float]:
    """The thresholds worth trying on these confidences (at least one): midway between
    neighbouring values (at most MAX_CANDIDATES, evenly spread), one below them all and
    one above (capped at 0). Used by calibrate on run records and on the ledger."""
    confs = sorted(set(confidences))
    cuts = [(a + b) / 2 for a, b in itertools.pairwise(confs)]
    if len(cuts) > MAX_CANDIDATES:
        step = (len(cuts) - 1) / (MAX_CANDIDATES - 1)
        cuts = [cuts[round(i * step)] for i in range(MAX_CANDIDATES)]
    # Below everything (escalate on confidence never) and above (always, as far as <= 0 allows).
    ends = [confs[0] - 0.01, min(0.0, confs[-1] + 0.01)]
    return sorted({round(c, 4) for c in [*cuts, *ends] if c <= 0.0})


def choose(
    folder: RunFolder,
    settings: Settings,
    *,
    budget: float | None = None,
    best: bool = False,
) -> ThresholdChoice:
    r = settings.routing
    if r.policy not in ("synconf", "confidence"):
        raise CalibrationError(
            f"routing.policy is {r.policy!r}, which uses no threshold: set it to 'synconf' "
            "or 'confidence' first"
        )
    if (budget is None) == (not best):
        raise CalibrationError("give either --budget RATE or --best")
    if budget is not None and not 0.0 <= budget <= 1.0:
        raise CalibrationError(f"--budget is a share of requests between 0 and 1, got {budget}")
    info = folder.info()
    remote = info.get("remote")
    if best and remote in ("oracle", "none"):
        raise CalibrationError(
            f"--best needs a real remote model's results; this run's remote is {remote!r} "
            "(with the oracle, escalating everything always wins): use --budget"
        )
    refresh_all(folder, settings)  # the texts the current pipeline would insert
    # The server's rules for the run's local model; the threshold is what is chosen here.
    rules = resolve_rules(settings, str(info.get("local_model", "")))
    # The server's gate mode: recorded verdicts are used, missing ones computed now.
    mode = r.syntax

    def replay(require_exec: bool) -> tuple[list[TaskOutcome], int]:
        return scoring.outcomes(
            folder,
            rules=rules,
            gate_mode=mode,
            gate=SyntaxGate(mode, r.syntax_budget_ms / 1000, r.compiler_budget_ms / 1000),
            require_exec=require_exec,
        )

    tasks, incomplete = replay(True)
    if incomplete and best:
        raise CalibrationError(
            f"{incomplete} records lack execution results: run the same `synconfroute eval` "
            "command again to finish them"
        )
    if incomplete:  # the budget needs no execution results; pass@1 is then unknown
        tasks, _ = replay(False)
    if not tasks:
        raise CalibrationError(f"no usable records in {folder.folder}")
    policy = "synconf" if r.policy == "synconf" else "confidence-only"
    points = [
        scoring.evaluate(tasks, attrs.evolve(rules, threshold=t), policy) for t in candidates(tasks)
    ]
    if incomplete:
        points = [attrs.evolve(p, passed=None) for p in points]
    if best:
        pick = max(points, key=lambda p: (p.pass_at_1 or 0.0, -p.escalation_rate))
        goal = "best pass@1"
    else:
        assert budget is not None
        found = scoring.within_budget(points, budget)
        if found is None:
            low = min(p.escalation_rate for p in points)
            raise CalibrationError(
                f"no threshold escalates {budget:.0%} or less: even the lowest escalates "
                f"{low:.1%} (completions that are empty or fail the syntax gate"
                + (" or use a name defined nowhere" if r.semantic == "names" else "")
                + " always go to the remote tier)"
            )
        pick = found
        goal = f"escalation budget {budget:.0%}"
    assert pick.threshold is not None
    return ThresholdChoice(
        threshold=pick.threshold,
        point=pick,
        policy=policy,
        goal=goal,
        tasks=len(tasks),
        model=str(info.get("local_model", "")),
        remote=str(remote or ""),
    )


def set_threshold(text: str, value: float) -> str:
    """`text` (a TOML settings file) with routing.threshold = value, all else untouched.

    tomlkit keeps the file's comments, order, quoting and line ends; a dotted
    `routing.threshold` key at the top level is updated where it stands.
    """
    doc = tomlkit.parse(text)
    routing = doc.get("routing")
    if routing is None:
        routing = tomlkit.table()
        doc["routing"] = routing
    routing["threshold"] = round(value, 4)
    return tomlkit.dumps(doc)


@attrs.frozen
class Written:
    path: Path
    value: float
    created: bool
    warnings: tuple[str, ...]


def write_threshold(path: Path, value: float, model: str = "") -> Written:
    """Write routing.threshold into the settings file at `path` and verify it reads back."""
    if value > 0 or not math.isfinite(value):
        raise CalibrationError(f"a threshold is a log-probability <= 0, got {value}")
    created = not path.exists()
    old = "" if created else path.read_text(encoding="utf-8")
    before = load(path, environ={})
    if any(i.key == "(file)" for i in before.issues):
        raise CalibrationError(
            f"{path} is not valid TOML ({before.issues[0].message}): fix it first, "
            "calibrate will not rewrite a file it cannot read"
        )
    new = set_threshold(old, value)
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, new)
    after = load(path, environ={})
    if not math.isclose(after.settings.routing.threshold, round(value, 4), abs_tol=1e-9):
        if created:
            path.unlink()
        else:
            _atomic_write(path, old)
        raise CalibrationError(
            f"wrote routing.threshold to {path} but it reads back as "
            f"{after.settings.routing.threshold}: the file was restored; set it by hand"
        )
    warnings = []
    env_name = f"{ENV_PREFIX}ROUTING_THRESHOLD"
    if env_name in os.environ:
        warnings.append(f"{env_name} is set and overrides the file: unset it")
    if model and model in after.settings.routing.thresholds:
        warnings.append(
            f"routing.thresholds has an entry for {model!r} that overrides this value: "
            "remove it or set it to the same value"
        )
    return Written(path=path, value=round(value, 4), created=created, warnings=tuple(warnings))


def _atomic_write(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=".calibrate-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def describe(choice: ThresholdChoice) -> str:
    p = choice.point
    parts = [
        f"policy {choice.policy}, {choice.goal}, {choice.tasks} recorded tasks"
        + (f" of {choice.model}" if choice.model else ""),
        f"threshold {choice.threshold:.4f}: escalates {p.escalation_rate:.1%} "
        f"({p.escalated}/{p.n}), kept-local precision "
        + ("–" if p.kept_local_precision is None else f"{p.kept_local_precision:.1%}"),
    ]
    if p.pass_at_1 is not None:
        bound = " (an upper bound: the remote was the oracle)" if choice.remote == "oracle" else ""
        parts.append(f"pass@1 {p.pass_at_1:.1%}{bound}")
    return "; ".join(parts)
