"""The sandbox on real programs: hostile ones are killed and judged failed, the harness
goes on, and the next task passes. Needs Linux (resource limits, /proc)."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from server.evaluation import sandbox as sb
from server.evaluation.datasets import IOTest, Task
from server.evaluation.execute import Toolchains, exec_key, execute, java_class
from server.evaluation.records import Generation, Record, RunFolder
from server.evaluation.run import EvalOptions, execute_all

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
