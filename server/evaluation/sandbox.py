"""Run untrusted candidate programs: one process tree per run, limited and killed as a whole.

Each run goes through a small trampoline (this interpreter, `-I -S`) that sets the resource
limits (RLIMIT_AS, RLIMIT_CPU, RLIMIT_NPROC, RLIMIT_FSIZE, no core files), drops to a
dedicated user id when we run as root, and execs the program in its own session, with a
minimal environment. Where the OS allows, the run also gets:
- its own file system: the trampoline makes a user, mount and network namespace, mounts a
  tmpfs of `Limits.disk_mb` as the new root (the only writable place: a copy of the work
  folder, /tmp, /dev/shm), binds the system folders read-only, and pivots into it. Home
  folders, the project, the machine's /tmp and other runs are not there at all, and no
  nested user namespace may be made (in one, a program could mount an unbounded tmpfs);
- no network (an empty network namespace);
- its own PID namespace (`unshare -pf --kill-child`), so everything it forks dies with it;
- no capabilities (`setpriv`): it cannot remount its tmpfs larger or undo the mounts.
Each step falls back to the one before where the kernel refuses it (`unshare -rnpf`, then
`-rn`, then nothing), and `Isolation` records what held. The wall timeout kills the whole
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
import json
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

# Runs as the harness's user; `resource`, `json` and `ctypes` are imported before the uid
# changes (after it, the interpreter's own library may no longer be readable). argv: a JSON
# config, then the command. With "fs", it builds the run's file system itself (the `unshare`
# command cannot mount a tmpfs): a new user, mount and network namespace; a tmpfs of
# "size_mb" as the new root, the only writable place; the system folders bound read-only;
# the work folder copied in ("copy") or bound ("bind", for compilers, whose output the next
# run needs); then pivot_root, and the host's file system is gone from the namespace.
_TRAMPOLINE = """\
import ctypes, json, os, resource, sys
cfg = json.loads(sys.argv[1])
for name, soft, hard in cfg["rlimits"]:
    resource.setrlimit(getattr(resource, name), (soft, hard))
uid = cfg["uid"]
if uid >= 0:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
fs = cfg.get("fs")
if fs:
    libc = ctypes.CDLL(None, use_errno=True)
    def check(rc, what):
        if rc != 0:
            err = ctypes.get_errno()
            sys.stderr.write(f"sandbox: {what}: {os.strerror(err)}\\n")
            os._exit(125)
    def mount(src, dst, fstype, flags, data=None):
        enc = lambda s: None if s is None else s.encode()
        check(libc.mount(enc(src), enc(dst), enc(fstype), flags, enc(data)), f"mount {dst}")
    # A uid change made us non-dumpable, which makes /proc/self root's: writing our own
    # uid_map needs it back.
    libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
    outer_uid, outer_gid = os.getuid(), os.getgid()
    check(libc.unshare(0x10000000 | 0x00020000 | 0x40000000), "unshare")  # user, mount, net
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {outer_uid} 1"),
                       ("gid_map", f"0 {outer_gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)
    # No nested user namespace: in one, the program could mount a tmpfs of any size.
    with open("/proc/sys/user/max_user_namespaces", "w") as fh:
        fh.write("0")
    MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
        1, 2, 4, 32, 4096, 16384, 1 << 18)
    KEEP = 2 | 4 | 8 | 1024 | 2048 | 4096  # nosuid nodev noexec noatime nodiratime relatime
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = fs["root"]
    mount("synconfroute", root, "tmpfs", MS_NOSUID | MS_NODEV,
          f"size={fs['size_mb']}m,nr_inodes={fs['inodes']},mode=755")
    def bind(src, writable=False):
        dst = root + src
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            open(dst, "w").close()
        mount(src, dst, None, MS_BIND | MS_REC)
        if not writable:  # a bind mount keeps its source's locked flags: pass them back
            kept = os.statvfs(src).f_flag & KEEP
            mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)
    for path in fs["system"]:
        if os.path.islink(path):
            os.symlink(os.readlink(path), root + path)
        elif os.path.exists(path):
            bind(path)
    for path in fs["expose"]:
        if os.path.exists(path):
            bind(path)
    for dev in ("null", "zero", "full", "random", "urandom"):
        bind("/dev/" + dev, writable=True)
    for n, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{n}", f"{root}/dev/{name}")
    os.symlink("/proc/self/fd", root + "/dev/fd")
    for path in ("/tmp", "/dev/shm"):
        os.makedirs(root + path, exist_ok=True)
    # The PID namespace's own /proc is mounted over this by `unshare --mount-proc`; the
    # kernel lets a user namespace mount a proc only where one is already fully visible.
    bind("/proc", writable=True)
    os.chmod(root + "/tmp", 0o1777)
    os.chmod(root + "/dev/shm", 0o1777)
    cwd = fs["cwd"]
    if fs["mode"] == "bind":
        bind(cwd, writable=True)
    else:
        def copy(folder):  # regular files and folders (javac writes packages as folders)
            os.makedirs(root + folder, exist_ok=True)
            for entry in os.scandir(folder):
                dst = root + entry.path
                if entry.is_dir(follow_symlinks=False):
                    copy(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    with open(entry.path, "rb") as src, open(dst, "wb") as out:
                        while chunk := src.read(1 << 20):
                            out.write(chunk)
                else:
                    continue
                os.chmod(dst, entry.stat(follow_symlinks=False).st_mode & 0o7777)
        copy(cwd)
    os.chdir(root)
    check(libc.syscall(fs["pivot_root"], b".", b"."), "pivot_root")
    check(libc.umount2(b".", 2), "umount the old root")  # MNT_DETACH
    os.chdir(cwd)
os.execv(cfg["argv"][0], cfg["argv"])
"""

# The system folders a run sees, read-only (toolchains live here; /etc holds the JDK's
# configuration on Debian).
SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# pivot_root has no libc wrapper; its syscall number where we know it.
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
_DROP_CAPS = ("--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--")


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
    # The run's private writable area (a tmpfs: its own copy of the work folder, /tmp,
    # /dev/shm), where the file system is isolated. It is memory, so it stays small.
    disk_mb: int = 64

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
    # Own mount namespace: the run sees read-only system folders and its private tmpfs,
    # nothing else of the machine (no home, no project, no /tmp, no other run).
    filesystem: bool = False
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [
            "no network (network namespace)" if self.network else "network NOT isolated",
            "own PID namespace" if self.pid_namespace else "no PID namespace",
            "private file system (tmpfs; system folders read-only; no home, project or /tmp)"
            if self.filesystem
            else "file system NOT isolated",
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
        self._fs = False  # build a private file system for each run (see _TRAMPOLINE)
        self._expose: set[str] = set()
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
        setpriv = shutil.which("setpriv", path=SANDBOX_PATH)
        pivot = _PIVOT_ROOT.get(os.uname().machine)
        attempts: list[tuple[str, list[str], bool, bool]] = []
        if setpriv is None or pivot is None:
            why = (
                "setpriv not found"
                if setpriv is None
                else f"unknown pivot_root on {os.uname().machine}"
            )
            notes.append(f"{why}: file system not isolated")
        else:
            # The trampoline makes the user, mount and network namespaces; unshare the PID one.
            pid = [self._unshare, "-pf", "--kill-child", "--mount-proc", "--", setpriv]
            attempts.append(("-pf (after the trampoline's -rmn)", [*pid, *_DROP_CAPS], True, True))
        attempts.append(("-rnpf", [self._unshare, "-rnpf", "--kill-child", "--"], True, False))
        attempts.append(("-rn", [self._unshare, "-rn", "--"], False, False))
        tmp = Path(tempfile.mkdtemp(prefix="synconfroute-probe-"))
        try:
            self._own(tmp, 0)
            for flags, prefix, pidns, fs in attempts:
                self._prefix, self._fs = prefix, fs
                res = self.run([true], cwd=tmp, slot=0, limits=Limits(wall_s=10))
                if res.returncode == 0:
                    return Isolation(
                        network=True,
                        pid_namespace=pidns,
                        separate_uid=self._root,
                        filesystem=fs,
                        notes=tuple(notes),
                    )
                notes.append(f"unshare {flags} failed ({res.stderr.strip()[:200] or 'no output'})")
            self._prefix, self._fs = [], False
            notes.append("falling back to no namespaces: network not isolated")
            return Isolation(
                network=False, pid_namespace=False, separate_uid=self._root, notes=tuple(notes)
            )
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def expose(self, path: Path | str) -> None:
        """Let runs read `path` (a toolchain outside the system folders, a precompiled
        header), bound read-only at the same place."""
        self._expose.add(str(Path(path).resolve()))

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
        keep_files: bool = False,
    ) -> RunResult:
        """Run `argv` (argv[0] an absolute path) in `cwd` under `limits`.

        With file-system isolation the program works on a private copy of `cwd`, and what
        it writes is gone after the run; `keep_files` binds `cwd` itself instead, for a
        compiler whose output the next runs need (a trusted program, though its input is
        not). Never raises for what the program does; SandboxError only when nothing can
        start.
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
        # Both outputs go to files in a folder of our own: RLIMIT_FSIZE then bounds them,
        # and no pipe can fill up and stall the program.
        io = Path(tempfile.mkdtemp(prefix="synconfroute-io-"))
        cfg: dict[str, object] = {
            "rlimits": rl,
            "uid": uid,
            "argv": [*self._prefix, *argv] if self._prefix else list(argv),
        }
        if self._fs:
            # The new root's mount point: empty, and reachable by the run's user.
            io.chmod(0o711)
            (io / "root").mkdir(mode=0o755)
            cfg["fs"] = {
                "root": str(io / "root"),
                "size_mb": limits.disk_mb,
                "inodes": 4096 + 64 * limits.disk_mb,
                "system": SYSTEM_DIRS,
                "expose": sorted(self._expose),
                "cwd": str(Path(cwd).resolve()),
                "mode": "bind" if keep_files else "copy",
                "pivot_root": _PIVOT_ROOT[os.uname().machine],
            }
        cmd = [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, json.dumps(cfg)]
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
                        cmd,
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
