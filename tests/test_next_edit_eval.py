"""`eval --task next-edit`: tasks built from a real commit history (the itsdangerous
bundle, real git), and the table scored through the next-edit sequence against the fake
tiers over real sockets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.server.evaluation import next_edit_tasks
from synconfroute.server.evaluation.next_edit_eval import score, table
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.next_edit.prompt import region_at
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.settings.config import Settings
from tests.fakes import FakeOllama, FakeOpenAI
from tests.fakes.next_edit import RewritingModel

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT.parent / "shared" / "data" / "repos" / "itsdangerous-history.bundle"
if not BUNDLE.exists():
    BUNDLE = Path("/work/shared/data/repos/itsdangerous-history.bundle")

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not BUNDLE.exists():
        pytest.skip(f"{BUNDLE} is not here")
    dest = tmp_path_factory.mktemp("history") / "itsdangerous"
    subprocess.run(["git", "clone", "-q", str(BUNDLE), str(dest)], check=True)
    return dest


def test_hunks_of_a_zero_context_diff() -> None:
    diff = "@@ -3 +3 @@\n-    total = 1\n+    subtotal = 1\n@@ -5,0 +6 @@\n+    x = 2\n"
    a, b = next_edit_tasks.hunks(diff)
    assert (a.old_start, a.old, a.new) == (2, ("    total = 1",), ("    subtotal = 1",))
    assert (b.old_start, b.old, b.new) == (5, (), ("    x = 2",))
    assert not next_edit_tasks.similar(a, b)  # an insertion is not the same change


def test_tasks_are_built_from_the_real_history(repo: Path) -> None:
    built = next_edit_tasks.build(repo, region_lines=5)
    assert built.commits > 400 and len(built.tasks) >= 10, built
    for task in built.tasks:
        # The first place is done, the next is not, and it lies in the editable region.
        assert task.after in task.text and task.expected != task.text
        r = region_at(task.text, task.cursor, region_lines=5, context_lines=0)
        grown = len(task.expected) - len(task.text)
        assert task.text[: r.start] == task.expected[: r.start], task.commit
        assert task.text[r.end :] == task.expected[r.end + grown :], task.commit


async def test_the_table_local_alone_remote_alone_routed(
    repo: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    built = next_edit_tasks.build(repo, region_lines=5, max_tasks=6)
    tasks = built.tasks
    s = Settings()
    # The fakes know each task's answer by its region: the remote gives it, the local
    # tier rewrites nothing, unsure (so every task escalates and only the remote is right).
    answers = {}
    for task in tasks:
        r = region_at(task.text, task.cursor, region_lines=5, context_lines=0)
        grown = len(task.expected) - len(task.text)
        answers[task.text[r.start : r.end]] = task.expected[r.start : r.end + grown]
    local_fake.answer_for = RewritingModel(lambda old: old, copied_lp=-2.0)  # type: ignore[attr-defined]
    remote_fake.answer_for = RewritingModel(lambda old: answers.get(old, old))  # type: ignore[attr-defined]
    p = Pipeline(
        s,
        OllamaBackend(local_fake.url, "qwen2.5-coder:3b", timeout=5),
        OpenAIBackend(
            [remote_fake.base_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None, timeout=5
        ),
        make_gate(s.routing),
    )
    seen: list[tuple[int, int, bool | None]] = []
    rows = await score(
        tasks, p, p.rules(), repo, lambda i, n, r, _s: seen.append((i, n, r.remote_exact))
    )
    assert seen == [(i + 1, len(tasks), True) for i in range(len(tasks))]  # progress per task
    out = table(built, rows)
    n = len(tasks)
    assert f"local alone    exact   0.0% (0/{n})" in out, out
    assert f"remote alone   exact 100.0% ({n}/{n})" in out, out
    assert f"routed         exact 100.0% ({n}/{n})" in out, out
    assert f"escalated      100.0% ({n}/{n})" in out, out


def test_the_command_says_what_it_wants() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "synconfroute", "eval", "--task", "next-edit"],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )  # fmt: skip
    assert proc.returncode == 2 and "--history" in proc.stderr, proc.stderr
