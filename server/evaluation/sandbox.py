"""Run untrusted candidate programs: one process tree per run, limited and killed as a whole.

Each run goes through a small trampoline (this interpreter, `-I -S`) that sets the resource
limits (RLIMIT_AS, RLIMIT_CPU, RLIMIT_NPROC, RLIMIT_FSIZE, no core files), drops to a
dedicated user id when we run as root, and execs the program; the program runs in a
temporary directory, in its own session, with a minimal environment. Where the OS allows,
`unshare -rnpf --kill-child` also gives it no network (an empty network namespace) and its
own PID namespace, so everything it forks dies with it. The wall timeout kills the whole
process group.

Why a dedicated user id when root: RLIMIT_NPROC counts the processes of a user and is not
enforced for root at all, so a fork bomb run as root would fill the machine's PID table.
Each worker slot gets its own id (61000 + slot), which also lets us sweep up anything a
program left behind, and keeps one slot's fork bomb from starving the others.

The trampoline is a separate exec (not `preexec_fn`) because the harness runs programs from
worker threads, where `preexec_fn` can deadlock.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
UID_BASE = 61000
_TAIL = 4000  # bytes of stderr kept for the record

# Runs as the harness's user; `resource` is imported before the uid changes (after it, the
# interpreter's own library may no longer be readable). `os.execv` needs no import.
_TRAMPOLINE = """\
import os, resource, sys
for item in sys.argv[1].split(","):
    name, soft, hard = item.split(":")
    resource.setrlimit(getattr(resource, name), (int(soft), int(hard)))
uid = int(sys.argv[2])
if uid >= 0:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
os.execv(sys.argv[3], sys.argv[3:])
"""


class SandboxError(Exception):
    """The harness cannot run programs at all (not a failed task); worded for the user."""


@attrs.frozen(kw_only=True)
class Limits:
    """Per-run limits. `cpu_s` None: the wall timeout plus one second."""

    wall_s: float = 10.0
    cpu_s: float | None = None
    memory_mb: int = 2048  # RLIMIT_AS (address space, not resident memory)
    nproc: int = 128  # processes and threads of the run's user
    fsize_mb: int = 64  # largest file the program may write (its stdout included)

    def rlimits(self) -> list[tuple[str, int, int]]:
        cpu = int(self.cpu_s if self.cpu_s is not None else self.wall_s + 1) + 1
        mem = self.memory_mb << 20
        fsize = self.fsize_mb << 20
        return [
            ("RLIMIT_AS", mem, mem),
            # soft limit -> SIGXCPU; one second later the hard limit -> SIGKILL
            ("RLIMIT_CPU", cpu, cpu + 1),
            ("RLIMIT_NPROC", self.nproc, self.nproc),
            ("RLIMIT_FSIZE", fsize, fsize),
            ("RLIMIT_CORE", 0, 0),
        ]


@attrs.frozen(kw_only=True)
class RunResult:
    returncode: int | None  # negative: killed by that signal; None: never started
    timed_out: bool
    stdout: bytes
    stderr: str  # the tail
    elapsed_s: float

    @property
    def signal_name(self) -> str | None:
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"


@attrs.frozen(kw_only=True)
class Isolation:
    """What the OS let the sandbox do (recorded with every run)."""

    network: bool  # no network: an empty network namespace
    pid_namespace: bool  # the program's processes die with it
    separate_uid: bool  # runs under a dedicated uid per worker (we are root)
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [
            "no network (network namespace)" if self.network else "network NOT isolated",
            "own PID namespace" if self.pid_namespace else "no PID namespace",
            "dedicated uid per worker" if self.separate_uid else "runs as the current user",
        ]
        return ", ".join(parts) + "".join(f"; {n}" for n in self.notes)


def _procs() -> list[os.DirEntry[str]]:
    """The process entries of /proc ([] where there is no /proc: cleanup is then by
    process group only)."""
    try:
        return [e for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return []


def _count_tasks(uid: int) -> int:
    """Processes and threads of `uid` now (what RLIMIT_NPROC counts)."""
    n = 0
    for entry in _procs():
        try:
            if entry.stat().st_uid == uid:
                n += len(os.listdir(f"/proc/{entry.name}/task"))
        except OSError:
            continue
    return n


def _leftovers(pgid: int, uid: int) -> list[int]:
    """Live processes of process group `pgid`, or of `uid` (a dedicated sandbox uid; -1:
    none). Zombies are left to their reapers."""
    found = []
    for entry in _procs():
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
            owner = entry.stat().st_uid if uid >= 0 else -2
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) < 3 or fields[0] == b"Z":
            continue
        if int(fields[2]) == pgid or owner == uid:
            found.append(int(entry.name))
    return found


def _children(ppid: int) -> list[int]:
    out = []
    for entry in _procs():
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == ppid:
            out.append(int(entry.name))
    return out


def sweep(pgid: int, uid: int = -1, limit_s: float = 5.0) -> int:
    """SIGKILL what a run left behind (its process group; its uid if dedicated) until
    nothing is left, so the next run starts with its whole RLIMIT_NPROC. Returns how many
    processes it had to kill."""
    killed = 0
    deadline = time.monotonic() + limit_s
    while victims := _leftovers(pgid, uid):
        for pid in victims:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        if time.monotonic() > deadline:
            break
        time.sleep(0.005)
    return killed


class Sandbox:
    """Runs programs under limits; thread-safe (one `slot` per concurrent caller)."""

    def __init__(self, *, workers: int | None = None, isolate: bool = True) -> None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        self.workers = max(1, workers or cores or os.cpu_count() or 1)
        self._root = os.geteuid() == 0
        self._unshare = shutil.which("unshare", path=SANDBOX_PATH) if isolate else None
        self._prefix: list[str] = []
        self._slots: list[int] = list(range(self.workers))
        self._slot_lock = threading.Condition()
        self._extra_nproc = 0
        self.isolation = self._probe(isolate)

    # -- setup ------------------------------------------------------------------

    def uid(self, slot: int) -> int:
        return UID_BASE + slot if self._root else -1

    def _probe(self, isolate: bool) -> Isolation:
        notes: list[str] = []
        if not self._root:
            # RLIMIT_NPROC counts all of this user's processes: leave room for them.
            self._extra_nproc = _count_tasks(os.getuid())
            notes.append(
                "not root: RLIMIT_NPROC is shared with the user's other processes "
                f"({self._extra_nproc} now)"
            )
        if not isolate:
            return Isolation(
                network=False,
                pid_namespace=False,
                separate_uid=self._root,
                notes=(*notes, "isolation turned off"),
            )
        if self._unshare is None:
            notes.append("unshare not found: network not isolated")
            return Isolation(
                network=False, pid_namespace=False, separate_uid=self._root, notes=tuple(notes)
            )
        true = shutil.which("true", path=SANDBOX_PATH) or "/bin/true"
        tmp = Path(tempfile.mkdtemp(prefix="synconfroute-probe-"))
        try:
            self._own(tmp, 0)
            for flags, pidns in (("-rnpf", True), ("-rn", False)):
                prefix = [self._unshare, flags, "--kill-child", "--"] if pidns else []
                prefix = prefix or [self._unshare, flags, "--"]
                self._prefix = prefix
                res = self.run([true], cwd=tmp, slot=0, limits=Limits(wall_s=10))
                if res.returncode == 0:
                    return Isolation(
                        network=True,
                        pid_namespace=pidns,
                        separate_uid=self._root,
                        notes=tuple(notes),
                    )
                notes.append(f"unshare {flags} failed ({res.stderr.strip()[:200] or 'no output'})")
            self._prefix = []
            notes.append("falling back to no namespaces: network not isolated")
            return Isolation(
                network=False, pid_namespace=False, separate_uid=self._root, notes=tuple(notes)
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    # -- slots and work directories -----------------------------------------------

    @contextlib.contextmanager
    def slot(self) -> Iterator[int]:
        """A worker slot (its own uid when root) for the duration of one task."""
        with self._slot_lock:
            while not self._slots:
                self._slot_lock.wait()
            slot = self._slots.pop()
        try:
            yield slot
        finally:
            with self._slot_lock:
                self._slots.append(slot)
                self._slot_lock.notify()

    def _own(self, path: Path, slot: int) -> None:
        uid = self.uid(slot)
        if uid >= 0:
            os.chown(path, uid, uid)

    @contextlib.contextmanager
    def workdir(self, slot: int) -> Iterator[Path]:
        """A fresh temporary directory the slot's user owns; removed afterwards."""
        path = Path(tempfile.mkdtemp(prefix="synconfroute-eval-"))
        try:
            self._own(path, slot)
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def write(self, path: Path, text: str, slot: int) -> None:
        # "replace": model output may hold lone surrogates, which are not UTF-8.
        path.write_text(text, encoding="utf-8", errors="replace", newline="")
        self._own(path, slot)

    # -- running ------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        slot: int,
        limits: Limits,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
    ) -> RunResult:
        """Run `argv` (argv[0] an absolute path) in `cwd` under `limits`.

        Never raises for what the program does; SandboxError only when nothing can start.
        """
        uid = self.uid(slot)
        rl = limits.rlimits()
        if not self._root:
            rl = [
                (n, s + self._extra_nproc, h + self._extra_nproc)
                if n == "RLIMIT_NPROC"
                else (n, s, h)
                for n, s, h in rl
            ]
        spec = ",".join(f"{n}:{s}:{h}" for n, s, h in rl)
        cmd = [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, spec, str(uid)]
        target = [*self._prefix, *argv] if self._prefix else list(argv)
        # Both outputs go to files in the work directory: RLIMIT_FSIZE then bounds them,
        # and no pipe can fill up and stall the program.
        io = Path(tempfile.mkdtemp(prefix="synconfroute-io-"))
        base_env = {
            "PATH": SANDBOX_PATH,
            "HOME": str(cwd),
            "TMPDIR": str(cwd),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
        }
        started = time.monotonic()
        try:
            (io / "in").write_text(stdin or "", encoding="utf-8", errors="replace", newline="")
            with (
                open(io / "in", "rb") as fin,
                open(io / "out", "wb") as fout,
                open(io / "err", "wb") as ferr,
            ):
                try:
                    proc = subprocess.Popen(
                        [*cmd, *target],
                        cwd=cwd,
                        stdin=fin,
                        stdout=fout,
                        stderr=ferr,
                        env={**base_env, **(env or {})},
                        start_new_session=True,
                        close_fds=True,
                    )
                except OSError as exc:
                    raise SandboxError(f"cannot start {argv[0]}: {exc}") from exc
                timed_out = False
                try:
                    proc.wait(timeout=limits.wall_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    self._kill(proc)
                finally:
                    if proc.returncode is None:  # interrupted (Ctrl-C): leave nothing behind
                        self._kill(proc)
            elapsed = time.monotonic() - started
            # Children still running (a fork bomb dying, a daemon that called setsid):
            # the next run in this slot must not inherit them.
            sweep(proc.pid, uid)
            out = (io / "out").read_bytes()
            err = (io / "err").read_bytes()[-_TAIL:].decode("utf-8", "replace")
            return RunResult(
                returncode=proc.returncode,
                timed_out=timed_out,
                stdout=out,
                stderr=err,
                elapsed_s=elapsed,
            )
        finally:
            shutil.rmtree(io, ignore_errors=True)

    def _kill(self, proc: subprocess.Popen[bytes]) -> None:
        if "--kill-child" in self._prefix:
            # unshare leads the group; its child is the PID namespace's init. Kill that
            # child only: the namespace dies with it, and unshare reaps it and exits. Killing
            # unshare too would orphan the child to the system's init, whose zombie counts
            # against the slot's RLIMIT_NPROC until that init gets round to reaping it.
            for pid in _children(proc.pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            try:
                proc.wait(timeout=2.0)
                return
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
