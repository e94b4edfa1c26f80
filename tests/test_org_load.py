"""The organisation-load study's verified-escalation figures (studies/org_load.py), run
as a process (tests never import studies: tests/test_bench.py) over a small eval run
folder written with the eval's own record classes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from synconfroute.server.evaluation.datasets import Task
from synconfroute.server.evaluation.execute import exec_key
from synconfroute.server.evaluation.records import Generation, Record

ROOT = Path(__file__).resolve().parent.parent
VALID = {
    "valid": True,
    "status": "valid",
    "mode": "tree-sitter",
    "checker": "tree-sitter",
    "line": None,
    "column": None,
    "message": "",
    "elapsed_s": 0.001,
    "detail": "",
    "undefined": [],
}


def record(
    name: str, prefix: str, raw: list[str], text: str, truth: str, ml: bool, lp: float
) -> Record:
    task = Task(
        dataset="hand",
        task_id=name,
        language="python",
        prefix=prefix,
        suffix="\n",
        truth=truth,
        multiline=ml,
    )
    local = Generation(
        backend="embedded",
        model="m",
        raw="".join(raw),
        text=text,
        tokens=tuple((t, lp * (i + 1)) for i, t in enumerate(raw)),
        total_s=0.3,
    )
    remote = Generation(backend="oracle", model="truth", raw=truth, text=truth, oracle=True)
    return Record(task=task, local=local, remote=remote)


def run_folder(tmp: Path) -> Path:
    recs = [
        # A block answer cut at its Markdown fence: the fence and the prose after it are
        # never sent to the verifier. 8 draft tokens; 6 follow the truth ("    x = 1\n    y =").
        record(
            "block",
            "def f():\n",
            ["    x", " =", " 1", "\n", "    y", " =", " 3", "\n", "```", "\n", "This"],
            "    x = 1\n    y = 3\n",
            "    x = 1\n    y = 2\n",
            True,
            -0.5,
        ),
        # One line: the line break merged into the last token is not part of the draft,
        # whose own text is the truth: 2 of 2 kept, the next line not drafted.
        record(
            "line",
            "def f(n):\n",
            ["    return", " n\n", "    pass"],
            "    return n",
            "    return n",
            False,
            -0.4,
        ),
        # An answer that post-processing emptied: no draft, no confidence.
        record("empty", "def g():\n", ["```", "\n", "x"], "", "    return 1", False, -0.1),
        # One line that starts differently: 1 drafted, none kept. The surest answer.
        record(
            "wrong", "def h():\n", ["    pass", "\n", "x"], "    pass", "    return 2", False, -0.01
        ),
    ]
    folder = tmp / "run"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"remote": "oracle"}), encoding="utf-8")
    with (folder / "records.jsonl").open("w", encoding="utf-8") as f:
        for r in recs:
            # What the eval's tree-sitter gate recorded: every answer valid Python here.
            d = r.to_json()
            d["gate"] = {"tree-sitter": {**VALID, "language": r.task.language}}
            f.write(json.dumps(d) + "\n")
    with (folder / "exec.jsonl").open("w", encoding="utf-8") as f:
        for r in recs:
            for text, ok in ((r.local.text, False), (r.task.truth or "", True)):
                row = {
                    "key": exec_key(r.task, text),
                    "task": r.key,
                    "passed": ok,
                    "outcome": "passed" if ok else "failed",
                    "detail": "",
                    "elapsed_s": 0.1,
                }
                f.write(json.dumps(row) + "\n")
    return folder


def study(folder: Path, *args: str) -> str:
    cmd = [sys.executable, "-m", "studies.org_load", "--records", str(folder), "--capacity"]
    cmd += ["--nominal", "20", "--replicas", "1", "--seconds", "20", *args]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_the_draft_is_what_the_server_sends_and_the_kept_run_follows_the_truth(
    tmp_path: Path,
) -> None:
    out = study(run_folder(tmp_path), "--share", "0.75")
    # Drafts 8 + 2 + 0 + 1, kept 6 + 2 + 0 + 0 (the previous code counted every raw
    # token: 20, and the line's " n\n" as not following the truth: 7 kept). Escalated:
    # the empty answer and the two least sure; steps saved (16 output tokens, 1 + what
    # the draft did not hold decoded): 5 + 1 + 0 over 3.
    assert "all tasks 8 of 11 draft tokens kept (72.7%)" in out, out
    assert "3 escalated at nominal, 2 with a draft, 8 of 10 draft tokens kept" in out, out
    assert "decode steps saved per escalation 2.00 of 16" in out, out
    assert "| no |" in out and "| yes |" in out, out


def test_the_threshold_counts_an_answer_without_a_confidence_as_escalated(
    tmp_path: Path,
) -> None:
    # Half of 4 tasks: the empty answer escalates at any threshold, so one scored task.
    out = study(run_folder(tmp_path), "--share", "0.5")
    assert "2 escalated at nominal" in out, out
