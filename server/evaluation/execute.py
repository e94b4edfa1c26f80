"""Judge one completion of one task: build the program, compile it once, run its tests.

Crashes, timeouts, limits and compile errors are failed tasks (an `ExecResult` with the
outcome), never exceptions. Only a missing toolchain (no javac, say) is a harness error,
raised as SandboxError by `Toolchains.check` before any task runs.

SAFIM's rules, followed here: the program's CRLFs become LFs (as ExecEval, SAFIM's execution
engine, does); stdout matches an accepted output by ExecEval's validator (`output_matches`);
a completion identical to the ground truth passes without running (turn off with
`exact_shortcut=False`); tasks without tests (SAFIM API) are judged by SAFIM's "syntax
match" against the ground truth.
"""

from __future__ import annotations

import ast
import atexit
import hashlib
import re
import secrets
import shutil
import stat
import tempfile
import threading
import warnings
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Literal

import attrs

from .datasets import Task
from .sandbox import SANDBOX_PATH, SYSTEM_DIRS, Limits, RunResult, Sandbox, SandboxError

Outcome = Literal[
    "passed",
    "exact-match",
    "syntax-match",
    "wrong-answer",
    "runtime-error",
    "timeout",
    "memory-limit",
    "output-limit",
    "compile-error",
]
PASSING: frozenset[str] = frozenset({"passed", "exact-match", "syntax-match"})

CXX_FLAGS = ("-O1", "-std=c++17")
JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-Xshare:auto")
# The JVM reserves address space far beyond its heap (class space, code cache, thread
# stacks): RLIMIT_AS gets this much on top of the heap limit.
JVM_RESERVE_MB = 3072


@attrs.frozen(kw_only=True)
class ExecResult:
    passed: bool
    outcome: Outcome
    detail: str = ""
    elapsed_s: float = 0.0


def exec_key(task: Task, completion: str) -> str:
    """Identifies (task, completion): equal completions (local = remote) run once."""
    h = hashlib.sha256(f"{task.key}\x00{completion}".encode()).hexdigest()
    return h[:32]


_WORDS = frozenset({"yes", "no", "true", "false"})
_EPS = Decimal("1e-12")


def _same_token(a: str, b: str) -> bool:
    if a == b:
        return True
    if "_" not in a + b:
        try:
            x, y = Decimal(a), Decimal(b)
        except InvalidOperation:
            pass
        else:
            if x.is_finite() and y.is_finite():
                return abs(x - y) <= _EPS
            return False
    la, lb = a.lower(), b.lower()
    return la in _WORDS and la == lb


def output_matches(out: str, expected: str) -> bool:
    """ExecEval's validator (SAFIM's execution engine): the same lines once stripped, else
    the same whitespace-separated tokens, where numbers may differ by 1e-12 and
    yes/no/true/false ignore case."""
    lines_a, lines_b = out.strip().split("\n"), expected.strip().split("\n")
    if len(lines_a) == len(lines_b) and all(
        x.strip() == y.strip() for x, y in zip(lines_a, lines_b, strict=True)
    ):
        return True
    toks_a, toks_b = out.split(), expected.split()
    return len(toks_a) == len(toks_b) and all(
        _same_token(x, y) for x, y in zip(toks_a, toks_b, strict=True)
    )


def _call_params(node: ast.Call) -> tuple[list[str], dict[str | None, str]]:
    return [ast.dump(a) for a in node.args], {k.arg: ast.dump(k.value) for k in node.keywords}


# Squeezed code ("1if x") draws SyntaxWarnings from the parser: not ours to show.
_SM_FILE = "<syntax-match>"
warnings.filterwarnings("ignore", category=SyntaxWarning, module=re.escape(_SM_FILE))


def syntax_match(completion: str, truth: str, language: str) -> bool:
    """SAFIM's judgement for API completions, as its evaluate.py does it: drop all
    whitespace; in Python, two calls match when their arguments match (SAFIM does not
    compare the called function's name); otherwise compare the text."""
    a, b = re.sub(r"\s+", "", completion), re.sub(r"\s+", "", truth)
    if language == "python":
        try:
            ta = ast.parse(a, _SM_FILE, mode="eval")
            tb = ast.parse(b, _SM_FILE, mode="eval")
        except (SyntaxError, ValueError):
            pass
        else:
            if isinstance(ta.body, ast.Call) and isinstance(tb.body, ast.Call):
                return _call_params(ta.body) == _call_params(tb.body)
    return a == b


_JAVA_PUBLIC = re.compile(
    r"\bpublic\s+(?:(?:final|abstract|static|strictfp|sealed)\s+)*"
    r"(?:class|interface|enum|record)\s+([A-Za-z_$][\w$]*)"
)
_JAVA_ANY = re.compile(r"\b(?:class|enum|record)\s+([A-Za-z_$][\w$]*)")


def java_class(program: str) -> str:
    """The public class (javac wants the file named after it), else the first class."""
    m = _JAVA_PUBLIC.search(program) or _JAVA_ANY.search(program)
    return m.group(1) if m else "Main"


@attrs.define
class Toolchains:
    """Where the compilers and interpreters are, checked once per language."""

    python: str | None = None
    javac: str | None = None
    java: str | None = None
    gxx: str | None = None
    pch_dir: Path | None = None  # holds bits/stdc++.h.gch built with CXX_FLAGS
    notes: list[str] = attrs.field(factory=list)
    _checked: set[str] = attrs.field(factory=set)
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    @classmethod
    def find(cls, python: str | None = None) -> Toolchains:
        # System directories first: the sandbox user may not be able to read a
        # virtualenv or pyenv under /root.
        def which(name: str) -> str | None:
            return shutil.which(name, path=SANDBOX_PATH) or shutil.which(name)

        return cls(
            python=python or which("python3"),
            javac=which("javac"),
            java=which("java"),
            gxx=which("g++"),
        )

    def check(self, language: str, sandbox: Sandbox, cache: Path | None = None) -> None:
        """Raise SandboxError with a fix when `language` cannot be run in the sandbox."""
        with self._lock:
            if language in self._checked:
                return
            need: dict[str, tuple[str | None, str, list[str]]] = {
                "python": (self.python, "python3 (pass --python PATH)", ["-c", "print(1)"]),
                "java": (self.java, "a JDK 11+ (e.g. apt install default-jdk-headless)", []),
                "cpp": (self.gxx, "g++ (e.g. apt install g++)", ["--version"]),
            }
            if language not in need:
                raise SandboxError(f"cannot run {language} programs (python, java, cpp only)")
            tool, fix, args = need[language]
            if language == "java":
                if self.javac is None:
                    raise SandboxError(f"javac not found on PATH: install {fix}")
                args = ["-Xmx64m", *JVM_FLAGS, "-version"]
            if tool is None:
                raise SandboxError(f"no {language} toolchain on PATH: install {fix}")
            for t in (tool, self.javac if language == "java" else None):
                if t is not None:
                    _expose_tool(sandbox, t)
            with sandbox.slot() as slot, sandbox.workdir(slot) as wd:
                res = sandbox.run([tool, *args], cwd=wd, slot=slot, limits=_limits(language))
            if res.returncode != 0:
                raise SandboxError(
                    f"{tool} does not run in the sandbox (exit {res.returncode}): "
                    f"{res.stderr.strip()[:300]}; install {fix} where every user can read it"
                )
            if language == "cpp" and cache is not None:
                self.pch_dir = self._build_pch(sandbox, cache)
            self._checked.add(language)

    def _build_pch(self, sandbox: Sandbox, cache: Path) -> Path | None:
        """Precompile <bits/stdc++.h> (0.9 s -> 0.2 s per program here) in `cache`, or in a
        temporary folder when the sandbox user cannot read `cache` (a home folder, say);
        None if neither works. The PCH is only used once a test program compiled with it."""
        readable = not sandbox.isolation.separate_uid or _world_traversable(cache)
        for base in (cache, None) if readable else (None,):
            if base is None:
                base = Path(tempfile.mkdtemp(prefix="synconfroute-pch-"))
                base.chmod(0o755)
                atexit.register(shutil.rmtree, base, True)
            folder = base / "pch"
            try:
                built = (folder / "bits" / "stdc++.h.gch").is_file() or self._pch_into(
                    sandbox, folder
                )
            except OSError as exc:
                self.notes.append(f"cannot write a precompiled header in {base}: {exc}")
                continue
            if built:
                sandbox.expose(folder)
            if built and self._pch_works(sandbox, folder):
                return folder
        self.notes.append("no precompiled <bits/stdc++.h>: C++ compiles take ~1 s each")
        return None

    def _pch_into(self, sandbox: Sandbox, folder: Path) -> bool:
        assert self.gxx is not None
        with sandbox.slot() as slot, sandbox.workdir(slot) as wd:
            sandbox.write(wd / "p.cpp", "#include <bits/stdc++.h>\n", slot)
            res = sandbox.run(
                [self.gxx, *CXX_FLAGS, "-E", "p.cpp"],
                cwd=wd,
                slot=slot,
                limits=_limits("cpp", compile=True),
                keep_files=True,
            )
            # The first line marker that names the header says where it is.
            found = re.search(rb'^# 1 "([^"]*/bits/stdc\+\+\.h)"', res.stdout, re.M)
            if res.returncode != 0 or found is None:
                return False
            header = found.group(1).decode()
            res = sandbox.run(
                [self.gxx, *CXX_FLAGS, "-x", "c++-header", header, "-o", str(wd / "h.gch")],
                cwd=wd,
                slot=slot,
                limits=_limits("cpp", compile=True),
                keep_files=True,
            )
            if res.returncode != 0:
                self.notes.append(f"precompiling <bits/stdc++.h> failed: {res.stderr[:200]}")
                return False
            target = folder / "bits" / "stdc++.h.gch"
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(".tmp")
            shutil.copyfile(wd / "h.gch", tmp)
        tmp.chmod(0o644)
        tmp.replace(target)
        for d in (target.parent, folder, folder.parent):
            d.chmod(d.stat().st_mode | 0o755)
        return True

    def _pch_works(self, sandbox: Sandbox, folder: Path) -> bool:
        assert self.gxx is not None
        probe = "#include <bits/stdc++.h>\nint main() { std::vector<int> v; return v.size(); }\n"
        with sandbox.slot() as slot, sandbox.workdir(slot) as wd:
            sandbox.write(wd / "t.cpp", probe, slot)
            res = sandbox.run(
                [self.gxx, *CXX_FLAGS, "-I", str(folder), "-o", "t", "t.cpp"],
                cwd=wd,
                slot=slot,
                limits=_limits("cpp", compile=True),
                keep_files=True,
            )
        return res.returncode == 0


def _expose_tool(sandbox: Sandbox, tool: str) -> None:
    """Let the sandbox see a toolchain installed outside the system folders (/opt/jdk,
    say): its installation folder, the parent of its bin/."""
    real = Path(tool).resolve()
    if any(real.is_relative_to(d) for d in SYSTEM_DIRS):
        return
    sandbox.expose(real.parent.parent if real.parent.name == "bin" else real.parent)


def _world_traversable(path: Path) -> bool:
    """Whether another user can reach `path` (every existing ancestor has o+x)."""
    for p in [path.resolve(), *path.resolve().parents]:
        if p.exists() and not p.stat().st_mode & stat.S_IXOTH:
            return False
    return True


def _limits(language: str, *, compile: bool = False, wall_s: float = 10.0) -> Limits:
    if compile:
        # A precompiled <bits/stdc++.h> is ~100 MB.
        extra = JVM_RESERVE_MB if language == "java" else 0
        return Limits(wall_s=60.0, memory_mb=2048 + extra, fsize_mb=512)
    if language == "java":
        # JIT and GC threads add CPU time beside the program's own.
        return Limits(wall_s=wall_s, cpu_s=2 * wall_s + 1, memory_mb=512 + JVM_RESERVE_MB)
    return Limits(wall_s=wall_s, memory_mb=2048)


def _failure(res: RunResult) -> tuple[Outcome, str] | None:
    """The outcome of a run that did not exit cleanly, or None if it did."""
    if res.timed_out or res.signal_name in ("SIGXCPU", "SIGKILL"):
        return "timeout", f"killed after {res.elapsed_s:.1f} s"
    if res.signal_name == "SIGXFSZ":
        return "output-limit", "wrote more than the file size limit"
    if res.returncode != 0:
        err = res.stderr
        if any(m in err for m in ("MemoryError", "OutOfMemoryError", "std::bad_alloc")):
            return "memory-limit", _last_line(err)
        why = res.signal_name or f"exit {res.returncode}"
        return "runtime-error", f"{why}: {_last_line(err)}"
    return None


def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def execute(
    task: Task,
    completion: str,
    sandbox: Sandbox,
    tools: Toolchains,
    *,
    timeout_s: float = 10.0,
    exact_shortcut: bool = True,
) -> ExecResult:
    """Judge `completion` for `task` (see the module doc). Thread-safe."""
    if task.match == "syntax-match":
        if task.truth is None:
            return ExecResult(passed=False, outcome="wrong-answer", detail="no ground truth")
        ok = syntax_match(completion, task.truth, task.language)
        return ExecResult(passed=ok, outcome="syntax-match" if ok else "wrong-answer")
    if exact_shortcut and task.io_tests and task.truth is not None and completion == task.truth:
        return ExecResult(passed=True, outcome="exact-match")
    program = task.program(completion).replace("\r\n", "\n")
    marker = None
    if not task.io_tests and task.language == "python":
        # A program that tests itself passes only if it reaches its end: exit status 0
        # alone is not enough (a completion may call exit() or os._exit(0) before the
        # checks run). The marker is new each run, so no completion can print it.
        marker = f"synconfroute-end-{secrets.token_hex(16)}"
        program += f"\nprint({marker!r}, flush=True)\n"
    with sandbox.slot() as slot, sandbox.workdir(slot) as wd:
        return _run_program(task, program, sandbox, tools, slot, wd, timeout_s, marker)


def _run_program(
    task: Task,
    program: str,
    sandbox: Sandbox,
    tools: Toolchains,
    slot: int,
    wd: Path,
    timeout_s: float,
    marker: str | None = None,
) -> ExecResult:
    lang = task.language
    spent = 0.0
    limits = _limits(lang, wall_s=timeout_s)
    if lang == "python":
        assert tools.python is not None
        sandbox.write(wd / "main.py", program, slot)
        argv = [tools.python, "main.py"]
    elif lang == "java":
        assert tools.javac is not None and tools.java is not None
        name = java_class(program)
        sandbox.write(wd / f"{name}.java", program, slot)
        res = sandbox.run(
            [
                tools.javac,
                *(f"-J{f}" for f in ("-Xmx512m", *JVM_FLAGS)),
                "-encoding",
                "UTF-8",
                "-nowarn",
                "-d",
                ".",
                f"{name}.java",
            ],
            cwd=wd,
            slot=slot,
            limits=_limits(lang, compile=True),
            keep_files=True,
        )
        spent += res.elapsed_s
        if res.returncode != 0:
            return _compile_error(res, spent)
        argv = [tools.java, "-Xmx512m", "-Xss64m", *JVM_FLAGS, "-cp", ".", name]
    elif lang == "cpp":
        assert tools.gxx is not None
        sandbox.write(wd / "main.cpp", program, slot)
        include = ["-I", str(tools.pch_dir)] if tools.pch_dir else []
        res = sandbox.run(
            [tools.gxx, *CXX_FLAGS, *include, "-o", "main", "main.cpp"],
            cwd=wd,
            slot=slot,
            limits=_limits(lang, compile=True),
            keep_files=True,
        )
        spent += res.elapsed_s
        if res.returncode != 0:
            return _compile_error(res, spent)
        argv = [str(wd / "main")]
    else:
        raise SandboxError(f"cannot run {lang} programs (python, java, cpp only)")

    if not task.io_tests:  # the program tests itself (HumanEval's check())
        res = sandbox.run(argv, cwd=wd, slot=slot, limits=limits)
        spent += res.elapsed_s
        failed = _failure(res)
        if failed:
            return ExecResult(passed=False, outcome=failed[0], detail=failed[1], elapsed_s=spent)
        if marker is not None and not _ends_with_marker(res.stdout, marker):
            why = "exit 0 before the end of the test program (its checks did not all run)"
            return ExecResult(passed=False, outcome="runtime-error", detail=why, elapsed_s=spent)
        return ExecResult(passed=True, outcome="passed", elapsed_s=spent)
    for i, test in enumerate(task.io_tests, 1):
        res = sandbox.run(argv, cwd=wd, slot=slot, limits=limits, stdin=test.input)
        spent += res.elapsed_s
        failed = _failure(res)
        if failed:
            detail = f"test {i}: {failed[1]}"
            return ExecResult(passed=False, outcome=failed[0], detail=detail, elapsed_s=spent)
        out = res.stdout.decode("utf-8", "replace")
        if not any(output_matches(out, accepted) for accepted in test.outputs):
            got = " ".join(out.split())[:80]
            return ExecResult(
                passed=False,
                outcome="wrong-answer",
                detail=f"test {i}: got {got!r}",
                elapsed_s=spent,
            )
    return ExecResult(passed=True, outcome="passed", elapsed_s=spent)


def _ends_with_marker(stdout: bytes, marker: str) -> bool:
    lines = stdout.decode("utf-8", "replace").rstrip().splitlines()
    return bool(lines) and lines[-1].strip() == marker


def _compile_error(res: RunResult, spent: float) -> ExecResult:
    first = next((ln for ln in res.stderr.splitlines() if "error" in ln.lower()), "")
    why = "compiler timed out" if res.timed_out else (first.strip()[:300] or _last_line(res.stderr))
    return ExecResult(passed=False, outcome="compile-error", detail=why, elapsed_s=spent)
