"""Every evaluation metric on hand-made records whose answers are worked out by hand.

The records go through the real files (records.jsonl, exec.jsonl) and the real replay
(`scoring.outcomes` -> `server.routing.router`), so these tests also pin the record format.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import attrs
import pytest

from synconfroute.server.evaluation import calibrate, datasets, download, scoring
from synconfroute.server.evaluation.datasets import IOTest, Task
from synconfroute.server.evaluation.execute import (
    ExecResult,
    exec_key,
    output_matches,
    syntax_match,
)
from synconfroute.server.evaluation.records import Generation, Record, RunFolder
from synconfroute.server.evaluation.scoring import Point
from synconfroute.server.routing.rules import resolve_rules
from synconfroute.server.settings.config import Settings, load, with_values
from synconfroute.server.vocab.verdict import Verdict

K = 3
T = -0.5
# The server's rules at the default settings (threshold T, K tokens, missing escalates).
RULES = resolve_rules(Settings(), "")

# name: (local confidence or None for an empty completion, gate verdict, local passes,
#        remote passes)
SCENARIO: dict[str, tuple[float | None, str | None, bool, bool]] = {
    "A": (-0.1, "valid", True, True),
    "B": (-0.1, "valid", False, True),  # confident, valid, wrong: no static router sees it
    "C": (-0.1, "invalid", False, True),  # confident, invalid, wrong: the gate catches it
    "D": (-0.2, "invalid", False, False),
    "E": (-1.0, "valid", True, True),  # unconfident but right
    "F": (-1.0, "valid", False, True),
    "G": (-2.0, "invalid", False, True),
    "H": (-0.1, "valid", True, False),  # the remote would break a good local answer
    "I": (None, None, False, True),  # empty local completion
    "J": (-0.3, "valid", False, False),
}


def make_folder(
    path: Path,
    scenario: dict[str, tuple[float | None, str | None, bool, bool]],
    *,
    remote: str = "oracle",
) -> RunFolder:
    folder = RunFolder(path)
    for name, (conf, syntax, local_ok, remote_ok) in scenario.items():
        # the suffix defines the completions' names (the names gate stays quiet)
        suffix = f"\nlocal_{name} = remote_{name} = None\n"
        task = Task(dataset="hand", task_id=name, language="python", prefix="x = ", suffix=suffix)
        tokens = () if conf is None else tuple((f"t{i}", conf) for i in range(K + 2))
        local = Generation(
            backend="embedded",
            model="m",
            raw=f"local_{name}" if conf is not None else "",
            text=f"local_{name}" if conf is not None else "",
            tokens=tokens,
        )
        rem = Generation(
            backend="oracle",
            model="truth",
            raw=f"remote_{name}",
            text=f"remote_{name}",
            oracle=True,
        )
        gate = (
            {"tree-sitter": Verdict(valid=syntax == "valid", status=syntax, mode="tree-sitter")}
            if syntax
            else {}
        )
        folder.add_record(Record(task=task, local=local, remote=rem, gate=gate))
        for text, ok in ((local.text, local_ok), (rem.text, remote_ok)):
            outcome = "passed" if ok else "wrong-answer"
            folder.add_exec(exec_key(task, text), task.key, ExecResult(passed=ok, outcome=outcome))
    folder.write_info({"remote": remote, "local_model": "m"})
    folder.close()
    return RunFolder(path)  # read back from the files


@pytest.fixture
def tasks(tmp_path: Path) -> list[scoring.TaskOutcome]:
    out, incomplete = scoring.outcomes(
        make_folder(tmp_path, SCENARIO), rules=RULES, gate_mode="tree-sitter"
    )
    assert incomplete == 0
    return sorted(out, key=lambda o: o.key)


def point(tasks: list[scoring.TaskOutcome], policy: str, threshold: float = T) -> Point:
    rules = scoring.policy_rules(RULES, policy, threshold)
    return scoring.evaluate(tasks, rules, policy)


def test_replay_rebuilds_the_evidence(tasks: list[scoring.TaskOutcome]) -> None:
    a = tasks[0]
    assert a.key == "hand/A" and a.confidence == pytest.approx(-0.1)
    assert a.evidence.syntax == "valid" and a.local_pass and a.remote_pass
    i = tasks[8]
    assert i.key == "hand/I" and i.confidence is None and i.evidence.text == ""


def test_local_alone_and_always_remote(tasks: list[scoring.TaskOutcome]) -> None:
    weak = scoring.local_alone(tasks)
    assert (weak.passed, weak.pass_at_1, weak.escalation_rate) == (3, 0.3, 0.0)
    strong = point(tasks, "always-remote")
    assert (strong.passed, strong.escalated, strong.kept_local) == (7, 10, 0)
    assert strong.kept_local_precision is None


def test_always_local_escalates_only_empty_completions(tasks: list[scoring.TaskOutcome]) -> None:
    p = point(tasks, "always-local")
    assert (p.escalated, p.kept_local, p.kept_local_pass, p.passed) == (1, 9, 3, 4)
    assert p.kept_local_precision == pytest.approx(1 / 3)


def test_syntax_only(tasks: list[scoring.TaskOutcome]) -> None:
    p = point(tasks, "syntax-only")  # escalates C, D, G (invalid) and I (empty)
    assert (p.escalated, p.kept_local, p.kept_local_pass, p.passed) == (4, 6, 3, 6)
    assert p.kept_local_precision == 0.5 and p.threshold is None


def test_confidence_only(tasks: list[scoring.TaskOutcome]) -> None:
    p = point(tasks, "confidence-only")  # escalates E, F, G (< -0.5) and I (empty)
    assert (p.escalated, p.kept_local, p.kept_local_pass, p.passed) == (4, 6, 2, 6)
    assert p.escalation_rate == 0.4 and p.pass_at_1 == 0.6 and p.threshold == T


def test_synconf(tasks: list[scoring.TaskOutcome]) -> None:
    p = point(tasks, "synconf")  # confidence-only's four plus C and D (confident, invalid)
    assert (p.escalated, p.kept_local, p.kept_local_pass, p.passed) == (6, 4, 2, 7)
    assert p.kept_local_precision == 0.5 and p.pass_at_1 == 0.7


def test_oracle_escalates_exactly_the_fixable(tasks: list[scoring.TaskOutcome]) -> None:
    p = scoring.oracle(tasks)  # B, C, F, G, I
    assert (p.escalated, p.passed, p.kept_local_pass) == (5, 8, 3)


def test_remote_none_has_no_pass_at_1_for_escalating_policies(tmp_path: Path) -> None:
    folder = make_folder(tmp_path, SCENARIO)
    for rec in list(folder.records.values()):
        folder.records[rec.key] = Record(task=rec.task, local=rec.local, remote=None, gate=rec.gate)
    tasks, _ = scoring.outcomes(folder, rules=RULES, gate_mode="tree-sitter")
    p = point(tasks, "synconf")
    assert p.passed is None and p.pass_at_1 is None
    assert (p.escalated, p.kept_local_precision) == (6, 0.5)  # local side still measured
    assert scoring.oracle(tasks).passed is None


def test_eval_scores_under_the_local_models_own_threshold(tmp_path: Path) -> None:
    """`routing.thresholds` for the run's local model applies in `eval` as it does in
    the server (`resolve_rules`). On 8c2c157 `score` read `routing.threshold` alone: it
    reported -0.5 and 6 escalations, a threshold the server never used for model "m"."""
    from synconfroute.server.evaluation.run import EvalOptions, score

    folder = make_folder(tmp_path, SCENARIO)  # its run's local model is "m"
    s = with_values(Settings(), {"routing": {"thresholds": {"m": -0.15, "other": -3.0}}})
    summary = score(folder, s, EvalOptions(out=tmp_path, generate=False), folder.info())
    assert summary["threshold"] == -0.15
    synconf = summary["groups"]["hand/python"]["policies"]["synconf"]
    # At -0.15, J (-0.3) is unconfident too: C D E F G I J escalate (6 at -0.5).
    assert (synconf["threshold"], synconf["escalated"]) == (-0.15, 7)
    assert summary["groups"]["hand/python"]["confident_wrong"]["threshold"] == -0.15
    # --threshold still wins over the settings, as it did.
    given = score(folder, s, EvalOptions(out=tmp_path, generate=False, threshold=-0.5), {})
    assert given["groups"]["hand/python"]["policies"]["synconf"]["escalated"] == 6


def test_gate_stats(tasks: list[scoring.TaskOutcome]) -> None:
    g = scoring.gate_stats(tasks)
    assert g["checked"] == 9 and g["correct"] == 3 and g["false_rejects"] == 0
    assert g["wrong"] == 6 and g["wrong_invalid"] == 3 and g["wrong_invalid_share"] == 0.5
    assert g["status"] == {"valid": 6, "invalid": 3}


def test_gate_false_reject_is_counted(tmp_path: Path) -> None:
    scenario = {"K": (-0.1, "invalid", True, True), "L": (-0.1, "valid", True, True)}
    tasks, _ = scoring.outcomes(
        make_folder(tmp_path, scenario), rules=RULES, gate_mode="tree-sitter"
    )
    g = scoring.gate_stats(tasks)
    assert (g["correct"], g["false_rejects"], g["false_reject_tasks"]) == (2, 1, ["hand/K"])


def test_confident_but_wrong_split(tasks: list[scoring.TaskOutcome]) -> None:
    cw = scoring.confident_wrong(tasks, RULES)  # B, C, D, J
    assert cw["confident_wrong"] == 4
    assert (cw["syntax_invalid"], cw["valid_but_wrong"], cw["undecided"]) == (2, 2, 0)
    assert cw["syntax_invalid_share"] == 0.5
    everyone = attrs.evolve(RULES, threshold=-math.inf, missing_logprobs="trust")
    everything = scoring.confident_wrong(tasks, everyone)  # all 6 wrong ones
    assert (everything["syntax_invalid"], everything["valid_but_wrong"]) == (3, 3)


def _curve(*pts: tuple[float, float]) -> list[Point]:
    n = 100
    return [
        Point(
            policy="p",
            threshold=-float(i),
            n=n,
            escalated=round(x * n),
            kept_local=0,
            kept_local_pass=0,
            passed=round(y * n),
        )
        for i, (x, y) in enumerate(pts)
    ]


def test_routellm_cpt_and_apgr() -> None:
    # PGR points (0,0) (0.2,0.5) (0.6,1) (1,1): APGR = 0.05 + 0.3 + 0.4; CPT(50%) = 0.2
    r = scoring.routellm(_curve((0.2, 0.5), (0.6, 0.7)), weak=0.3, strong=0.7)
    assert r["apgr"] == pytest.approx(0.75) and r["cpt50"] == pytest.approx(0.2)
    # PGR (0.5, 0.25) then (1, 1): half the gap at 0.5 + 0.5 * 0.25 / 0.75
    r = scoring.routellm(_curve((0.5, 0.4)), weak=0.3, strong=0.7)
    assert r["cpt50"] == pytest.approx(2 / 3, abs=1e-6)
    # Only the two ends = a random router.
    r = scoring.routellm(_curve((0.0, 0.3), (1.0, 0.7)), weak=0.3, strong=0.7)
    assert r == {"cpt50": pytest.approx(0.5), "apgr": pytest.approx(0.5)}
    # No gap to recover: undefined, not a division by zero.
    assert scoring.routellm(_curve((0.5, 0.5)), weak=0.7, strong=0.7)["apgr"] is None


def test_routellm_on_the_scenario(tasks: list[scoring.TaskOutcome]) -> None:
    grid = scoring.thresholds(tasks, T)
    assert T in grid and grid[0] < -2.0 and grid[-1] > -0.1
    curve = scoring.sweep(tasks, "synconf", grid, RULES)
    assert [p.escalation_rate for p in curve] == sorted(p.escalation_rate for p in curve)
    assert curve[-1].escalated == 10 and curve[0].escalated == 4  # all; invalid + empty
    # SynConfRoute's curve: (0.4, 0.6) (0.6, 0.7) (0.7, 0.7) (1.0, 0.7); weak 0.3, strong
    # 0.7, so PGR: (0, 0) (0.4, 0.75) (0.6, 1) ... (1, 1).
    r = scoring.routellm(curve, weak=0.3, strong=0.7)
    assert r["cpt50"] == pytest.approx(0.4 * 0.5 / 0.75, abs=1e-6)  # on the segment from (0, 0)
    assert r["apgr"] == pytest.approx(0.4 * 0.375 + 0.2 * 0.875 + 0.4, abs=1e-6)


def test_within_budget_takes_the_most_escalation_that_fits() -> None:
    curve = _curve((0.1, 0.4), (0.3, 0.5), (0.45, 0.6))
    pick = scoring.within_budget(curve, 0.4)
    assert pick is not None and pick.escalation_rate == 0.3
    assert scoring.within_budget(curve, 0.05) is None


def test_summarize_is_json_ready(tasks: list[scoring.TaskOutcome]) -> None:
    s = scoring.summarize(tasks, rules=RULES)
    json.dumps(s, allow_nan=False)
    assert s["policies"]["synconf"]["pass_at_1"] == 0.7
    assert s["local_alone"]["pass_at_1"] == 0.3
    assert s["confident_wrong"]["syntax_invalid"] == 2
    assert set(s["budgets"]) == {"0.2", "0.4", "0.6"}


def test_groups_by_dataset_language_and_all(tasks: list[scoring.TaskOutcome]) -> None:
    import attrs

    mixed = [*tasks, *(attrs.evolve(o, key="x" + o.key, language="java") for o in tasks)]
    names = list(scoring.groups(mixed))
    assert names == ["hand/java", "hand/python", "hand", "all"]
    assert list(scoring.groups(tasks)) == ["hand/python"]


# -- calibration ---------------------------------------------------------------------------


def test_calibrate_budget_confidence_policy(tmp_path: Path) -> None:
    folder = make_folder(tmp_path, SCENARIO)
    s = with_values(Settings(), {"routing": {"policy": "confidence"}})
    choice = calibrate.choose(folder, s, budget=0.4)
    # G, E, F below and I empty: the cut between -1.0 and -0.3.
    assert choice.threshold == pytest.approx(-0.65)
    assert choice.point.escalation_rate == 0.4 and choice.point.pass_at_1 == 0.6


def test_calibrate_budget_too_small_for_synconf(tmp_path: Path) -> None:
    folder = make_folder(tmp_path, SCENARIO)
    with pytest.raises(calibrate.CalibrationError, match=r"even the lowest escalates 40\.0%"):
        calibrate.choose(folder, Settings(), budget=0.3)
    assert calibrate.choose(folder, Settings(), budget=0.4).point.escalated == 4


def test_calibrate_best_needs_a_real_remote(tmp_path: Path) -> None:
    with pytest.raises(calibrate.CalibrationError, match="--best needs a real remote"):
        calibrate.choose(make_folder(tmp_path / "o", SCENARIO), Settings(), best=True)
    # With a real remote where B and C fail remotely too, escalating everything no
    # longer wins: the best is 6/10, first reached at 40% escalation.
    scenario = dict(SCENARIO, B=(-0.1, "valid", False, False), C=(-0.1, "invalid", False, False))
    s = with_values(Settings(), {"routing": {"policy": "confidence"}})
    choice = calibrate.choose(make_folder(tmp_path / "r", scenario, remote="config"), s, best=True)
    assert choice.point.pass_at_1 == 0.6 and choice.point.escalation_rate == 0.4
    assert choice.threshold == pytest.approx(-0.65)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("", "[routing]\nthreshold = -0.65\n"),
        (
            "# mine\n[local]\nmodel = 'x'\n",
            "# mine\n[local]\nmodel = 'x'\n\n[routing]\nthreshold = -0.65\n",
        ),
        (
            "[routing]\npolicy = 'synconf'\nthreshold = -0.5  # old\n[local]\nthreshold = 1\n",
            "[routing]\npolicy = 'synconf'\nthreshold = -0.65  # old\n[local]\nthreshold = 1\n",
        ),
        (
            "[local]\nmodel = 'x'\n[routing]\npolicy = 'confidence'\n\n[privacy]\n",
            "[local]\nmodel = 'x'\n[routing]\npolicy = 'confidence'\nthreshold = -0.65\n\n"
            "[privacy]\n",
        ),
        ("routing.threshold = -0.2\r\n", "routing.threshold = -0.65\r\n"),
        (
            "[routing.thresholds]\n'a' = -1.0\n",
            "[routing]\nthreshold = -0.65\n\n[routing.thresholds]\n'a' = -1.0\n",
        ),
        (  # a comment inside the table and quoted keys survive
            '[routing] # tiers\n"policy" = "synconf"  # why\n',
            '[routing] # tiers\n"policy" = "synconf"  # why\nthreshold = -0.65\n',
        ),
    ],
)
def test_set_threshold_keeps_the_rest(before: str, after: str) -> None:
    assert calibrate.set_threshold(before, -0.65) == after


def test_write_threshold_verifies_and_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SYNCONFROUTE_ROUTING_THRESHOLD", raising=False)
    path = tmp_path / "conf" / "config.toml"
    w = calibrate.write_threshold(path, -0.6543, "m")
    assert w.created and load(path, environ={}).settings.routing.threshold == -0.6543
    path.write_text('[routing]\nthreshold = -0.1\nthresholds = {"m" = -2.0}\n')
    w = calibrate.write_threshold(path, -0.3, "m")
    assert not w.created and "overrides this value" in w.warnings[0]
    assert load(path, environ={}).settings.routing.threshold == -0.3
    path.write_text("[routing\nthreshold = ")
    with pytest.raises(calibrate.CalibrationError, match="not valid TOML"):
        calibrate.write_threshold(path, -0.3)
    assert path.read_text() == "[routing\nthreshold = "  # untouched


# -- judging ----------------------------------------------------------------------------------


def test_output_matches_like_execeval() -> None:
    assert output_matches("0.0 2.0\n2.5\n", "0\n2\n2.5")
    assert output_matches("YES\nno", "Yes\nNo")
    assert not output_matches("abc", "ABC")  # only yes/no/true/false ignore case
    assert not output_matches("1 2", "1 2 3")
    assert not output_matches("1.0000001", "1")
    assert output_matches("  a  b\r\n", "a b")


def test_syntax_match_like_safim() -> None:
    assert syntax_match("np.sum(x, axis = 0)", "np.sum(x,axis=0)", "python")
    assert syntax_match("np.mean(x, axis=0)", "np.sum(x, axis=0)", "python")  # SAFIM's quirk
    assert not syntax_match("np.sum(x, axis=1)", "np.sum(x, axis=0)", "python")
    assert syntax_match("new Gson( )", "new Gson()", "java")
    assert not syntax_match("gson.toJson(u)", "gson.toJson(user)", "java")


# -- datasets ---------------------------------------------------------------------------------


def test_own_format_and_selection(tmp_path: Path) -> None:
    path = tmp_path / "team.jsonl"
    rows = [
        {
            "task_id": f"t{i}",
            "language": "python",
            "prefix": "a = int(input())\nprint(",
            "suffix": ")\n",
            "tests": [{"input": "2", "output": ["4", "4.0"]}],
            "ground_truth": "a * 2",
        }
        for i in range(5)
    ]
    rows.append(
        {
            "task_id": "p",
            "language": "cpp",
            "prefix": "",
            "suffix": "",
            "test_program": "int main(){}",
            "multiline": False,
        }
    )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    tasks = datasets.load_file(path)
    assert [t.key for t in tasks][:2] == ["team/t0", "team/t1"]
    assert tasks[0].io_tests == (IOTest("2", ("4", "4.0")),) and tasks[0].truth == "a * 2"
    assert tasks[-1].test_program == "int main(){}" and not tasks[-1].multiline
    a = datasets.select(tasks, limits={"team": 2}, seed=1)
    assert a == datasets.select(tasks, limits={"team": 2}, seed=1)  # deterministic
    assert len([t for t in a if t.language == "python"]) == 2
    assert datasets.select(tasks, langs=["cpp"]) == [tasks[-1]]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"language": "python", "prefix": "", "suffix": ""}) + "\n")
    with pytest.raises(datasets.DatasetError, match="needs 'tests'"):
        datasets.load_file(bad)


def test_humaneval_task_is_an_empty_line_in_an_editor(tmp_path: Path) -> None:
    row = {
        "task_id": "H/0",
        "entry_point": "f",
        "prompt": "def f():\n",
        "suffix": "    return x\n",
        "canonical_solution": "    x = 1\n",
        "test": "def check(c):\n    assert c() == 1\n",
    }
    path = tmp_path / "he.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps(row) + "\n")
    (task,) = datasets.load_file(path)
    assert task.truth == "    x = 1" and task.suffix == "\n    return x\n" and not task.multiline
    assert task.program(task.truth) == "def f():\n    x = 1\n    return x\n\n" + row["test"] + (
        "\ncheck(f)\n"
    )


# One function, four masks of it, as the human-eval-infilling release writes them.
SOLUTION = "def f(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n"
TEST = "def check(c):\n    assert c([1, 2]) == 3\n"


def he_row(task_id: str, start: str, end: str) -> dict[str, str]:
    """The row that masks SOLUTION from the first `start` to the end of the first `end`."""
    i = SOLUTION.index(start)
    j = SOLUTION.index(end) + len(end)
    return {
        "task_id": task_id,
        "entry_point": "f",
        "prompt": SOLUTION[:i],
        "canonical_solution": SOLUTION[i:j],
        "suffix": SOLUTION[j:],
        "test": TEST,
    }


HE_ROWS = [
    he_row("SingleLineInfilling/HumanEval/0/L0", "    total = 0\n", "    total = 0\n"),
    he_row("MultiLineInfilling/HumanEval/0/L1_L2", "    for x", "total += x\n"),
    he_row("RandomSpanInfilling/HumanEval/0/0", "s:\n        total", "    ret"),  # mid-line
    he_row("RandomSpanInfilling/HumanEval/0/1", "\n        total", "+= x\n"),  # after ":"
]


def test_humaneval_tasks_load_by_what_they_are(tmp_path: Path) -> None:
    """Issue 16: multi-line and random-span files in the HumanEval format were loaded as
    single-line ones (one line kept, a newline added mid-line): the oracle scored 22.5 %."""
    from synconfroute.server.evaluation.generate import multiline_for, treat

    path = tmp_path / "he-mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in HE_ROWS))
    single, multi, mid, opener = datasets.load_file(path)
    settings = Settings()
    for task, row in zip((single, multi, mid, opener), HE_ROWS, strict=True):
        # Whatever the mask, the program is the one the official harness runs.
        assert task.program(task.truth or "") == (
            row["prompt"] + row["canonical_solution"] + row["suffix"] + "\n" + TEST + "\ncheck(f)\n"
        )
    # One whole line: today's treatment (an empty line in the editor, single-line mode).
    assert single.truth == "    total = 0" and single.suffix.startswith("\n    for x")
    assert not single.multiline and not multiline_for(single, settings)
    # Several whole lines: the cursor on an empty line, where the server allows a block.
    assert multi.prefix == "def f(xs):\n    total = 0\n"
    assert multi.truth == "    for x in xs:\n        total += x"
    assert multi.suffix == "\n    return total\n"
    assert multi.multiline and multiline_for(multi, settings)
    # A span starting mid-line keeps its prefix and suffix as they are (no newline added);
    # the server answers one line at "for x in x|", as in the editor.
    assert mid.prefix.endswith("    for x in x") and mid.suffix == "urn total\n"
    assert mid.truth == "s:\n        total += x\n    ret"
    assert mid.multiline and not multiline_for(mid, settings)
    # After a block opener the server allows several lines.
    assert opener.prefix.endswith("for x in xs:") and opener.truth == "\n        total += x"
    assert opener.suffix == "\n    return total\n" and multiline_for(opener, settings)
    for task in (single, multi, opener):
        gen = Generation(backend="oracle", model="o", raw=task.truth or "", text="")
        assert treat(task, gen, settings).text == task.truth
    gen = Generation(backend="oracle", model="o", raw=mid.truth or "", text="")
    assert treat(mid, gen, settings).text == "s:"  # what the editor's rule costs here


def test_ceiling_names_what_cut_each_ground_truth(tmp_path: Path) -> None:
    from synconfroute.server.evaluation import ceiling

    path = tmp_path / "he-mixed.jsonl"
    # Two blank lines in a body are valid Python, and one of the server's stop strings.
    blank = he_row("MultiLineInfilling/HumanEval/0/L0_L2", "    total = 0", "total += x\n")
    blank["canonical_solution"] = blank["canonical_solution"].replace("0\n", "0\n\n\n")
    rows = [*HE_ROWS, blank]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = datasets.load_file(path)
    settings = Settings()
    fates = [ceiling.fate(t, settings) for t in tasks]
    assert [f.cause if f else "?" for f in fates] == [
        None,
        None,
        ceiling.SINGLE_MID,
        None,
        ceiling.STOP,
    ]
    off = Settings(completion=attrs.evolve(settings.completion, multiline=False))
    assert ceiling.fate(tasks[1], off) == ceiling.TruthFate(
        text="    for x in xs:", intact=False, cause=ceiling.SINGLE_SETTING
    )
    # Execution results as the sandbox would give them: the cut truths fail.
    execs = {}
    for t, f in zip(tasks, fates, strict=True):
        assert f is not None
        execs[exec_key(t, f.text)] = ExecResult(
            passed=f.intact, outcome="passed" if f.intact else "runtime-error"
        )
    summary = ceiling.summarize(tasks, settings, execs)
    g = summary["he-mixed/python"]
    assert (g["n"], g["intact"], g["passed"], g["ceiling"]) == (5, 3, 3, 0.6)
    assert g["causes"] == {ceiling.SINGLE_MID: 1, ceiling.STOP: 1}
    (line,) = ceiling.warnings(summary)
    assert "he-mixed/python" in line and "60.0 %" in line
    assert f"{ceiling.SINGLE_MID}: 50 %" in line and f"{ceiling.STOP}: 50 %" in line
    assert ceiling.warnings({"x/python": {**g, "passed": 99, "n": 100, "ceiling": 0.99}}) == []


def test_missing_control_split_says_where_to_get_it() -> None:
    with pytest.raises(datasets.DatasetError, match=r"control_completion\.jsonl\.gz"):
        download.load_builtin("safim-control", Path("/nonexistent"))


def test_refresh_derives_texts_with_the_current_pipeline(tmp_path: Path) -> None:
    from synconfroute.server.evaluation.generate import refresh_all

    def rec(task_id: str, prefix: str) -> Record:
        task = Task(
            dataset="hand",
            task_id=task_id,
            language="python",
            prefix=prefix,
            suffix="\nprint(f())\n",
        )
        tokens = (("1", -0.1), (" +", -0.2), (" 2", -0.3), ("\n    x", -1.0), (" = 3\n\n\ny", -2.0))
        raw = "".join(t for t, _ in tokens)
        gen = Generation(backend="embedded", model="m", raw=raw, text="stale", tokens=tokens)
        return Record(
            task=task,
            local=gen,
            remote=None,
            gate={"tree-sitter": Verdict(valid=False, status="invalid", mode="tree-sitter")},
        )

    folder = RunFolder(tmp_path)
    folder.add_record(rec("line", "def f():\n    return "))  # code before the cursor
    folder.add_record(rec("block", "def f():\n    "))  # a blank line: a block may start
    assert refresh_all(folder, Settings()) == 2
    line, block = folder.records["hand/line"], folder.records["hand/block"]
    assert line.local.text == "1 + 2" and line.gate == {}  # the stale verdict is dropped
    assert block.local.text == "1 + 2\n    x = 3"  # cut at the pipeline's stop "\n\n\n"
    assert len(block.local.tokens) == 5  # the last token holds the cut
    assert refresh_all(folder, Settings()) == 0  # idempotent
