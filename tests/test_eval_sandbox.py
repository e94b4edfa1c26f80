"""The sandbox on real programs: hostile ones are killed and judged failed, the harness
goes on, and the next task passes. Needs Linux (resource limits, /proc)."""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from synconfroute.server.evaluation import sandbox as sb
from synconfroute.server.evaluation.datasets import IOTest, Task
from synconfroute.server.evaluation.execute import Toolchains, exec_key, execute, java_class
from synconfroute.server.evaluation.records import Generation, Record, RunFolder
from synconfroute.server.evaluation.run import EvalOptions, execute_all

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")

FORK_BOMB = """\
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
INFINITE_LOOP = "while True:\n    pass\n"
MEMORY_HOG = "block = bytearray(64 * 1024**3)\n"  # far beyond RLIMIT_AS: refused at once
NETWORK = """\
import socket
socket.create_connection(("1.1.1.1", 53), timeout=2).close()
"""
ESCAPE = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n"
GOOD = "def add(a, b):\n    return a + b\n"


def task(name: str, program: str, language: str = "python", **kw: object) -> Task:
    return Task(
        dataset="sandbox",
        task_id=name,
        language=language,
        prefix="",
        suffix="",
        test_program=program,
        **kw,  # type: ignore[arg-type]
    )


def record(t: Task, text: str = "") -> Record:
    gen = Generation(backend="embedded", model="m", raw=text, text=text)
    return Record(task=t, local=gen, remote=None)


@pytest.fixture(scope="module")
def box() -> sb.Sandbox:
    return sb.Sandbox(workers=2)


@pytest.fixture(scope="module")
def tools(box: sb.Sandbox) -> Toolchains:
    t = Toolchains.find()
    t.check("python", box)
    return t


def test_hostile_programs_fail_and_the_harness_goes_on(tmp_path: Path, box: sb.Sandbox) -> None:
    folder = RunFolder(tmp_path)
    hostile = {
        "fork-bomb": FORK_BOMB,
        "infinite-loop": INFINITE_LOOP,
        "memory-hog": MEMORY_HOG,
        "crash": "raise SystemExit(3)\n",
    }
    for name, program in hostile.items():
        folder.add_record(record(task(name, program)))
    check = GOOD + "assert add(2, 3) == 5\n"
    folder.add_record(record(task("good", check)))
    err = io.StringIO()
    opts = EvalOptions(out=tmp_path, timeout_s=2.0, workers=2)
    count, info = execute_all(opts, folder, err, sandbox=box)
    assert count == 5 and "execute: 5/5" in err.getvalue()
    results = {r.task.task_id: folder.execs[exec_key(r.task, "")] for r in folder.records.values()}
    assert set(results) == {*hostile, "good"}
    assert results["fork-bomb"].outcome == "timeout"
    assert results["infinite-loop"].outcome == "timeout"
    assert results["memory-hog"].outcome == "memory-limit"
    assert results["crash"].outcome == "runtime-error" and "exit 3" in results["crash"].detail
    assert results["good"].passed and results["good"].outcome == "passed"
    assert info["sandbox"] == box.isolation.describe()
    if box.isolation.separate_uid:  # nothing of the fork bomb is left
        assert all(sb._count_tasks(box.uid(s)) == 0 for s in range(box.workers))


def test_no_network_and_nothing_escapes(box: sb.Sandbox, tools: Toolchains) -> None:
    net = execute(task("net", NETWORK), "", box, tools, timeout_s=5)
    if box.isolation.network:
        assert net.outcome == "runtime-error" and "unreachable" in net.detail.lower()
    else:
        pytest.skip(f"network namespaces unavailable here: {box.isolation.describe()}")
    res = execute(task("escape", ESCAPE), "", box, tools, timeout_s=5)
    assert res.passed  # the parent exits at once; its setsid() child must not survive
    if box.isolation.separate_uid:
        assert all(sb._count_tasks(box.uid(s)) == 0 for s in range(box.workers))


def test_limits_are_set(box: sb.Sandbox, tools: Toolchains) -> None:
    probe = (
        "import resource, os\n"
        "print(resource.getrlimit(resource.RLIMIT_AS)[0] >> 20,"
        " resource.getrlimit(resource.RLIMIT_NPROC)[0],"
        " resource.getrlimit(resource.RLIMIT_FSIZE)[0] >> 20, os.getcwd() != '/')\n"
    )
    t = task("limits", probe, io_tests=(IOTest("", ("2048 128 64 True",)),))
    if os.geteuid() != 0:
        pytest.skip("RLIMIT_NPROC is raised by the user's own process count when not root")
    assert execute(t, "", box, tools, timeout_s=5).passed


def test_cpp_compiles_once_and_reads_stdin(tmp_path: Path, box: sb.Sandbox) -> None:
    tools = Toolchains.find()
    try:
        tools.check("cpp", box, tmp_path)
    except sb.SandboxError as exc:
        pytest.skip(str(exc))
    prefix = "#include <bits/stdc++.h>\nint main(){long a,b;std::cin>>a>>b;std::cout<<"
    t = Task(
        dataset="sb",
        task_id="sum",
        language="cpp",
        prefix=prefix,
        suffix=";}\n",
        truth="a+b",
        io_tests=(IOTest("2 3", ("5",)), IOTest("10 -4", ("6",))),
    )
    assert execute(t, "a+b", box, tools, exact_shortcut=False).passed
    assert execute(t, "a-b", box, tools).outcome == "wrong-answer"
    bad = execute(t, "a+", box, tools)
    assert bad.outcome == "compile-error" and "error" in bad.detail


def test_java_file_named_after_its_public_class(box: sb.Sandbox) -> None:
    tools = Toolchains.find()
    try:
        tools.check("java", box)
    except sb.SandboxError as exc:
        pytest.skip(str(exc))
    program = (
        "import java.util.*;\npublic final class Codeforces1234 {\n"
        "  public static void main(String[] a) {\n"
        "    Scanner s = new Scanner(System.in); int n = s.nextInt();\n"
        "    System.out.println("
    )
    assert java_class(program) == "Codeforces1234"
    t = Task(
        dataset="sb",
        task_id="twice",
        language="java",
        prefix=program,
        suffix=");\n  }\n}\n",
        io_tests=(IOTest("21\n", ("42",)),),
    )
    assert execute(t, "2 * n", box, tools).passed
    assert execute(t, "n +", box, tools).outcome == "compile-error"


# Tries every way out of its private area; prints one JSON object: what -> "ok" or the error.
ESCAPE_FS = """\
import json, os, sys
spec = json.loads(sys.argv[1])
got = {}
def attempt(what, fn):
    try:
        fn()
        got[what] = "ok"
    except OSError as exc:
        got[what] = type(exc).__name__ + ": " + str(exc)
def write(path):
    with open(path, "wb") as fh:
        fh.write(b"x" * 1024)
for name, path in spec["write"].items():
    attempt("write " + name, lambda p=path: write(p))
for name, path in spec["read"].items():
    attempt("read " + name, lambda p=path: open(p, "rb").read(16))
attempt("list /", lambda: got.setdefault("root", sorted(os.listdir("/"))))
def run(*argv):
    import subprocess
    res = subprocess.run(argv, capture_output=True, text=True)
    if res.returncode:
        raise OSError(res.returncode, res.stderr.strip())
# Ways to lift the bound: remount the tmpfs larger, or mount a new one in a nested namespace.
attempt("remount", lambda: run("/usr/bin/mount", "-o", "remount,size=1g", "/"))
attempt("nested namespace", lambda: run("/usr/bin/unshare", "-rm", "true"))
written = 0
def fill(folder):
    global written
    for i in range(spec["fill_mb"]):
        with open(os.path.join(folder, f"fill{i}"), "wb") as fh:
            fh.write(b"\\0" * (1 << 20))
        written += 1 << 20
attempt("fill", lambda: (fill("."), fill(spec["tmp"])))
got["written_mb"] = written >> 20
print(json.dumps(got))
"""


def test_filesystem_private_and_bounded(tmp_path: Path, box: sb.Sandbox, tools: Toolchains) -> None:
    """Issue 14 item 15: a program wrote 5 x 50 MB into /tmp and a world-writable folder and
    read the project's source. Each run must see only a private, size-bounded area."""
    iso = box.isolation
    if not iso.filesystem:  # the kernel refused the namespaces (the probe says why)
        pytest.skip(f"no file-system isolation here: {iso.describe()}")
    shared = Path(tempfile.mkdtemp(prefix="synconfroute-test-ww-"))  # world-writable
    home = Path(tempfile.mkdtemp(prefix="synconfroute-test-home-"))  # a 0755 home folder
    try:
        shared.chmod(0o777)
        home.chmod(0o755)
        (home / ".netrc").write_text("machine x password secret\n")
        (home / ".netrc").chmod(0o644)
        repo_file = Path(sb.__file__).resolve()
        spec = {
            "write": {
                "/tmp": "/tmp/synconfroute-sandbox-escape",
                "/dev/shm": "/dev/shm/synconfroute-sandbox-escape",
                "world-writable folder": str(shared / "escape"),
            },
            "read": {
                "repository source": str(repo_file),
                "$HOME": str(Path.home() / ".bashrc"),
                "a 0755 home": str(home / ".netrc"),
            },
            "fill_mb": 24,
            "tmp": "/tmp",
        }
        limits = sb.Limits(wall_s=20, disk_mb=8)  # type: ignore[call-arg]
        with box.slot() as slot, box.workdir(slot) as wd:
            box.write(wd / "main.py", ESCAPE_FS, slot)
            assert tools.python is not None
            res = box.run(
                [tools.python, "main.py", json.dumps(spec)], cwd=wd, slot=slot, limits=limits
            )
            left_in_wd = sorted(p.name for p in wd.iterdir())
        assert res.returncode == 0, res.stderr
        got = json.loads(res.stdout)
        # /tmp and /dev/shm inside are the run's own (programs may need a temporary
        # folder): writing there must not reach the machine's.
        assert not Path("/tmp/synconfroute-sandbox-escape").exists()
        assert not Path("/dev/shm/synconfroute-sandbox-escape").exists()
        assert got["write world-writable folder"] != "ok" and not (shared / "escape").exists()
        for what in ("read repository source", "read $HOME", "read a 0755 home"):
            assert got[what] != "ok", (what, got[what])
        assert not {"work", "root", "home"} & set(got["root"]), got["root"]
        assert got["remount"] != "ok" and got["nested namespace"] != "ok", got
        assert "No space left" in got["fill"], got["fill"]
        assert got["written_mb"] < 8, got["written_mb"]
        assert left_in_wd == ["main.py"]  # the run's files vanish with it
    finally:
        for name in ("/tmp/synconfroute-sandbox-escape", "/dev/shm/synconfroute-sandbox-escape"):
            Path(name).unlink(missing_ok=True)
        shutil.rmtree(shared, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


def test_humaneval_program_passes_in_private_area(box: sb.Sandbox, tools: Toolchains) -> None:
    """The isolation must not break an ordinary HumanEval-style program, including one that
    uses a temporary file."""
    program = (
        GOOD
        + "import tempfile, os\n"
        + "with tempfile.NamedTemporaryFile('w', delete=False) as fh:\n    fh.write('x')\n"
        + "assert open(fh.name).read() == 'x' and add(2, 3) == 5\n"
    )
    res = execute(task("he-style", program), "", box, tools, timeout_s=10)
    assert res.passed, res


def test_ceiling_only_runs_the_ground_truths(tmp_path: Path) -> None:
    """`eval --ceiling-only`: no model; each ground truth as the server would insert it is
    run for real, and the table names what the server's rules cost."""
    from synconfroute.server.evaluation import run
    from synconfroute.server.settings.config import Settings
    from tests.test_eval_metrics import HE_ROWS

    path = tmp_path / "he-mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in HE_ROWS))
    opts = run.EvalOptions(
        out=tmp_path / "out", datasets=(), files=(path,), workers=2, ceiling_only=True
    )
    out, err = io.StringIO(), io.StringIO()
    result = run.run_eval(opts, Settings(), out=out, err=err)
    g = result["ceiling"]["he-mixed/python"]
    # The mid-line random span is cut to "s:" and fails; the other three pass.
    assert (g["n"], g["intact"], g["passed"]) == (4, 3, 3)
    assert g["causes"] == {"cut by single-line mode at a mid-line cursor": 1}
    assert "| he-mixed/python | 4 | 75.0% | 75.0% | 0 |" in out.getvalue()
    assert "warning: he-mixed/python: the pipeline's ceiling is 75.0 %" in err.getvalue()
    assert (
        json.loads((tmp_path / "out" / "ceiling.json").read_text())["ceiling"] == result["ceiling"]
    )


HUMANEVAL_LIKE = dict(
    prefix="def add(a, b):\n",
    suffix="\n",
    test_program="\ndef check(f):\n    assert f(2, 3) == 5\n\ncheck(add)\n",
)


@pytest.mark.parametrize(
    "completion",
    [
        "    __import__('os')._exit(0)",
        "    import sys; sys.exit()",
        "    exit(0)",
        "    raise SystemExit",
        "    import sys; sys.exit(0)",
    ],
)
def test_a_completion_that_exits_early_does_not_pass(
    box: sb.Sandbox, tools: Toolchains, completion: str
) -> None:
    """Exit status 0 is not a pass: the test program must reach its end (issue 20)."""
    t = Task(dataset="he", task_id="exit", language="python", **HUMANEVAL_LIKE)  # type: ignore[arg-type]
    res = execute(t, completion, box, tools, timeout_s=10, exact_shortcut=False)
    assert not res.passed and res.outcome == "runtime-error", res
    good = execute(t, "    return a + b", box, tools, timeout_s=10, exact_shortcut=False)
    assert good.passed and good.outcome == "passed", good
