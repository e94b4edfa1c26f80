"""Fault suite and soak: the real server over stdio against fault-injecting backends.

    .venv/bin/python -m bench.fault_suite [--requests 8] [--concurrency 4] [--deadline-ms 800]
    .venv/bin/python -m bench.fault_suite --soak 10000 [--fault-rate 0.2]

Starts `python -m synconfroute serve` (stdio) with a settings file pointing the local
tier at a FaultyOllama and the remote tier at a FaultyOpenAI (tests/fakes/faulty.py),
speaks JSON-RPC to it as an editor does (didChange, inlineCompletion, hover), and
walks through fault phases (down, slow, hung before/after headers, garbage, cut
streams, 401, 429 with Retry-After, ignored num_predict/max_tokens, a proxy echoing
the Authorization header) under three privacy modes: `open`, `never_send` (every
document matches a never_send pattern, written the way users write them) and
`local_only`. One server process per mode; a server that dies is restarted and
counted as a crash.

Per phase it prints: requests, answered, answered within deadline + 100 ms,
answers with a completion, JSON-RPC errors, latency p50/max, crashes, generation
requests seen by each tier, remote requests under privacy, places where the API
key showed up (responses, notifications, stderr, log file, ledger), tracebacks on
stderr, RSS growth of the server.

Hard invariants (exit status 1 when broken): every request answered, no crash, no
remote request under privacy, the API key never shown. (A remote that is `down`
cannot count what it refused: privacy there is shown by the other phases.) Late answers, empty
answers and RSS growth are figures.

Soak (`--soak N`): N completions on one server, each tier injecting a fault into
`--fault-rate` of its requests (seeded); prints RSS after warm-up, along the way
and at the end (growth must stay under --max-growth-mb) and whether every request
was answered. `--json PATH` writes all figures for tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from tests.fakes.faulty import Fault, FaultyOllama, FaultyOpenAI

ROOT = Path(__file__).resolve().parent.parent

KEY_ENV = "FAULT_SUITE_API_KEY"
SECRET_MARK = "SECRETMARK"  # in the text of every document that must not leave
MODES = ("open", "never_send", "local_only")
NEVER_SEND = ("secrets/**",)  # gitignore-style, relative to the workspace folder
GRACE_MS = 100.0  # "in time" = within deadline + this


@attrs.frozen
class Phase:
    name: str
    local: Fault
    remote: Fault
    local_confident: bool | None = True  # None: confident and unsure in turn

    @property
    def recovery(self) -> str | None:
        """How a user gets the tiers back after this phase: a 401 backs off until the
        settings change and a 429 for its Retry-After (30 s), so the server is restarted
        (as a settings change would rebuild the backend); other faults back off for at
        most a second or two, so time passes. None: nothing to recover from."""
        faults = {self.local, self.remote}
        if faults & {"401", "429"}:
            return "restart"
        return None if faults == {"ok"} else "wait"

    def completion_possible(self, mode: str) -> bool:
        """Could a correct server offer a completion here? A local tier that answers
        can; otherwise only a healthy remote that privacy lets us use (a runaway local
        cut at max_tokens gives `x x x ...`, which the gate rejects)."""
        if self.local in ("ok", "slow"):
            return True
        return mode == "open" and self.remote == "ok"


# Local faults run with a healthy remote (a fixed server escalates); remote faults
# with an unsure local (so that, privacy allowing, every request escalates).
PHASES: tuple[Phase, ...] = (
    Phase("healthy", "ok", "ok", None),
    Phase("local-down", "down", "ok"),
    Phase("remote-down", "ok", "down", False),
    Phase("both-down", "down", "down"),
    Phase("local-slow", "slow", "ok"),
    Phase("remote-slow", "ok", "slow", False),
    Phase("local-hung-headers", "hung-headers", "ok"),
    Phase("local-hung-body", "hung-body", "ok"),
    Phase("remote-hung-headers", "ok", "hung-headers", False),
    Phase("remote-hung-body", "ok", "hung-body", False),
    Phase("local-garbage", "garbage", "ok"),
    Phase("remote-garbage", "ok", "garbage", False),
    Phase("local-cut", "cut", "ok"),
    Phase("remote-cut", "ok", "cut", False),
    Phase("remote-401", "ok", "401", False),
    Phase("remote-429", "ok", "429", False),
    Phase("local-runaway", "runaway", "ok"),
    Phase("remote-runaway", "ok", "runaway", False),
    Phase("remote-echo-auth", "ok", "echo-auth", False),
    Phase("healthy-again", "ok", "ok", None),
)

LOCAL_MIX: tuple[Fault, ...] = (
    "down",
    "slow",
    "hung-headers",
    "hung-body",
    "garbage",
    "cut",
    "runaway",
)
REMOTE_MIX: tuple[Fault, ...] = (
    "slow",
    "hung-headers",
    "hung-body",
    "garbage",
    "cut",
    "401",
    "429",
    "runaway",
    "echo-auth",
)


def new_key() -> str:
    return f"sk-fs-{secrets.token_hex(16)}"


def key_probe(key: str) -> str:
    """12 characters from the key's random part: a cut-off key still shows it."""
    return key[6:18]


class ServerDied(Exception):
    pass


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


# What the plain client says it can do (bench.protocol_path initializes with it too).
CAPABILITIES = {
    "general": {"positionEncodings": ["utf-16"]},
    "textDocument": {
        "inlineCompletion": {"dynamicRegistration": False},
        "hover": {"contentFormat": ["markdown", "plaintext"]},
        "synchronization": {"didSave": False},
    },
    "window": {"workDoneProgress": False},
}


class LspServer:
    """`python -m synconfroute serve` over stdio, spoken to with raw JSON-RPC frames.

    A plain client on purpose: it must survive a server that dies, goes deaf or
    answers late, and it scans every byte the server writes for the API key.
    """

    def __init__(self, config: Path, workdir: Path, key: str, root: Path) -> None:
        self.config, self.workdir, self.key, self.root = config, workdir, key, root
        self.probe = key_probe(key)
        self.proc: asyncio.subprocess.Process | None = None
        self._ids = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.key_places: Counter[str] = Counter()  # where the key showed: message kind
        self._methods: dict[int, str] = {}
        self.tracebacks = 0
        self.stderr_tail: list[str] = []
        self.dead = asyncio.Event()

    @property
    def key_hits(self) -> int:
        return sum(self.key_places.values())

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and not self.dead.is_set()

    async def start(self) -> None:
        state = self.workdir / "state"
        env = dict(os.environ)
        env.update(
            {
                "SYNCONFROUTE_CONFIG": str(self.config),
                "PYTHONPATH": str(ROOT),
                KEY_ENV: self.key,
                # The server's log file lands here, not in the user's state dir.
                "XDG_STATE_HOME": str(state),
                "XDG_CACHE_HOME": str(self.workdir / "cache"),
            }
        )
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "synconfroute",
            "serve",
            "--ledger",
            str(self.workdir / "ledger.jsonl"),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=str(ROOT),
            limit=1 << 24,
        )
        self._tasks = [
            asyncio.create_task(self._read_stdout()),
            asyncio.create_task(self._read_stderr()),
        ]
        root_uri = self.root.as_uri()
        await self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root_uri,
                "workspaceFolders": [{"uri": root_uri, "name": self.root.name}],
                "capabilities": CAPABILITIES,
            },
            wait_s=60,
        )
        self.notify("initialized", {})

    def _send(self, msg: dict[str, Any]) -> None:
        if self.proc is None or self.proc.stdin is None or not self.alive:
            raise ServerDied("the server is not running")
        data = json.dumps(msg).encode()
        try:
            self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        except (ConnectionError, RuntimeError) as exc:
            raise ServerDied(str(exc)) from exc

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Any, wait_s: float) -> dict[str, Any]:
        """The response message; TimeoutError when none came in time, ServerDied."""
        self._ids += 1
        rid = self._ids
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        self._methods[rid] = method
        try:
            self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
            return await asyncio.wait_for(fut, wait_s)
        finally:
            self._pending.pop(rid, None)
            self._methods.pop(rid, None)

    async def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        out = self.proc.stdout
        try:
            while True:
                length = -1
                while True:
                    line = await out.readline()
                    if not line:
                        return
                    if line in (b"\r\n", b"\n"):
                        break
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                body = await out.readexactly(length)
                msg = json.loads(body)
                if self.probe.encode() in body:
                    where = msg.get("method") or self._methods.get(msg.get("id"), "response")
                    self.key_places[str(where)] += 1
                self._dispatch(msg)
        except (asyncio.IncompleteReadError, ValueError, ConnectionError):
            return
        finally:
            self.dead.set()
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ServerDied("the server closed its output"))

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "id" in msg and ("result" in msg or "error" in msg) and "method" not in msg:
            fut = self._pending.get(msg["id"])
            if fut is not None and not fut.done():
                fut.set_result(msg)
        elif "id" in msg and "method" in msg:  # a request from the server
            with contextlib.suppress(ServerDied):
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while line := await self.proc.stderr.readline():
            text = line.decode("utf-8", "replace")
            if self.probe in text:
                self.key_places["stderr"] += 1
            if text.startswith("Traceback"):
                self.tracebacks += 1
            self.stderr_tail = [*self.stderr_tail[-40:], text.rstrip()]

    def files_with_key(self) -> list[str]:
        """The log file and the ledger, checked for the key."""
        found = []
        for path in [self.workdir / "ledger.jsonl", *self.workdir.glob("state/**/*.log*")]:
            with contextlib.suppress(OSError):
                if self.probe in path.read_text("utf-8", "replace"):
                    found.append(path.name)
        return found

    async def stop(self) -> None:
        if self.proc is None:
            return
        if self.alive:
            with contextlib.suppress(ServerDied, TimeoutError):
                await self.request("shutdown", None, wait_s=5)
                self.notify("exit", None)
        try:
            await asyncio.wait_for(self.proc.wait(), 5)
        except TimeoutError:  # `exit` did not end it (a known bug): end it ourselves
            self.proc.kill()
            await self.proc.wait()
        for task in self._tasks:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*self._tasks)


@attrs.define
class Figures:
    """What one phase (or the soak) measured."""

    phase: str
    mode: str
    requests: int = 0  # completions
    answered: int = 0
    hovers: int = 0
    hovers_answered: int = 0
    in_time: int = 0
    with_item: int = 0
    errors: int = 0
    latencies_ms: list[float] = attrs.field(factory=list)
    crashes: int = 0
    local_requests: int = 0
    remote_requests: int = 0
    remote_under_privacy: int = 0
    key_places: Counter[str] = attrs.field(factory=Counter)  # where the API key showed
    tracebacks: int = 0
    rss_start_mb: float = float("nan")
    rss_end_mb: float = float("nan")
    error_samples: list[str] = attrs.field(factory=list)
    completion_possible: bool = False

    @property
    def unanswered(self) -> int:
        return self.requests - self.answered + self.hovers - self.hovers_answered

    @property
    def late(self) -> int:
        return self.answered - self.in_time  # completions only: hovers ask no model

    @property
    def key_leaks(self) -> int:
        return sum(self.key_places.values())

    @property
    def rss_growth_mb(self) -> float:
        return self.rss_end_mb - self.rss_start_mb

    def hard_failures(self) -> list[str]:
        out = []
        if self.unanswered:
            out.append(f"{self.unanswered} unanswered")
        if self.crashes:
            out.append(f"{self.crashes} crash(es)")
        if self.remote_under_privacy:
            out.append(f"{self.remote_under_privacy} remote request(s) under privacy")
        if self.key_leaks:
            where = ", ".join(f"{k} {v}" for k, v in sorted(self.key_places.items()))
            out.append(f"API key shown {self.key_leaks} time(s) ({where})")
        return out

    def soft_findings(self) -> list[str]:
        out = []
        if self.late:
            out.append(f"{self.late} late")
        if self.completion_possible and self.with_item < self.answered:
            out.append(f"{self.answered - self.with_item} empty where a completion was possible")
        if self.errors:
            out.append(f"{self.errors} JSON-RPC errors")
        if self.tracebacks:
            out.append(f"{self.tracebacks} tracebacks")
        return out

    def as_json(self) -> dict[str, Any]:
        d = attrs.asdict(self)
        d.pop("latencies_ms")
        d.update(
            key_leaks=self.key_leaks,
            unanswered=self.unanswered,
            late=self.late,
            rss_growth_mb=self.rss_growth_mb,
            p50_ms=_pct(self.latencies_ms, 0.5),
            max_ms=max(self.latencies_ms, default=float("nan")),
            hard_failures=self.hard_failures(),
            soft_findings=self.soft_findings(),
        )
        return d


def _pct(xs: Sequence[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def write_config(
    folder: Path,
    local_url: str,
    remote_url: str,
    mode: str,
    deadline_ms: float,
    never_send: Sequence[str] = NEVER_SEND,
) -> Path:
    never = list(never_send)  # in every mode: only documents under secrets/ match
    text = f"""
[local]
backend = "ollama"
url = "{local_url}"
model = "qwen2.5-coder:3b"
timeout = 5

[remote]
url = "{remote_url}/v1"
model = "Qwen/Qwen2.5-Coder-32B-Instruct"
api_key_env = "{KEY_ENV}"
timeout = 5

[completion]
deadline_ms = {deadline_ms}

[privacy]
local_only = {"true" if mode == "local_only" else "false"}
never_send = {json.dumps(never)}

[editor]
debounce_ms = 0
adaptive_debounce = false
"""
    path = folder / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def document(n: int, secret: bool) -> tuple[str, tuple[int, int]]:
    """A small Python file, different for every request (no cache hits), and the cursor."""
    mark = f"# {SECRET_MARK}\n" if secret else "# fault suite\n"
    text = f"{mark}def add_{n}(a, b):\n    return \n\n\nprint(add_{n}(1, 2))\n"
    return text, (2, 11)


class Driver:
    """Sends completions through one server, restarting it if it dies."""

    def __init__(
        self,
        mode: str,
        workdir: Path,
        local: FaultyOllama,
        remote: FaultyOpenAI,
        args: argparse.Namespace,
        key: str,
    ) -> None:
        self.mode, self.workdir, self.local, self.remote = mode, workdir, local, remote
        self.args, self.key = args, key
        self.config = write_config(
            workdir, local.url, remote.url, mode, args.deadline_ms, args.never_send
        )
        self.server: LspServer | None = None
        self.serial = 0
        self.uris: list[tuple[str, bool]] = []
        self.versions: dict[str, int] = {}
        self.crashes = 0
        self.dead_key_places: Counter[str] = Counter()
        self.dead_tracebacks = 0
        self.silent = 0  # requests in a row that got no answer
        self._starting = asyncio.Lock()

    def _doc_uri(self, k: int) -> tuple[str, bool]:
        if self.mode == "never_send" or (self.args.soak and k == 0):
            return (ROOT / "secrets" / f"w{k}.py").as_uri(), True
        return (ROOT / "fault_suite" / f"w{k}.py").as_uri(), False

    async def _bury(self) -> None:
        """A server found dead: count the crash, keep its figures, forget it."""
        if self.server is None:
            return
        self.crashes += 1
        self.dead_key_places.update(self.server.key_places)
        self.dead_tracebacks += self.server.tracebacks
        tail = "\n    ".join(self.server.stderr_tail[-8:])
        print(f"  [{self.mode}] the server died; its last words:\n    {tail}", flush=True)
        await self.server.stop()
        self.server = None

    async def restart(self) -> None:
        """Stop the server on purpose (not a crash); the next request starts a new one."""
        if self.server is None:
            return
        self.dead_key_places.update(self.server.key_places)
        self.dead_tracebacks += self.server.tracebacks
        await self.server.stop()
        self.server = None

    def _totals(self) -> tuple[Counter[str], int]:
        live = self.server
        keys = self.dead_key_places + (live.key_places if live else Counter())
        tbs = self.dead_tracebacks + (live.tracebacks if live else 0)
        return keys, tbs

    async def ensure_server(self) -> LspServer:
        async with self._starting:  # workers that all find it dead start one server
            return await self._ensure_server()

    async def _ensure_server(self) -> LspServer:
        if self.server is not None and self.server.alive:
            return self.server
        await self._bury()
        server = LspServer(self.config, self.workdir, self.key, ROOT)
        try:
            await server.start()
        except (ServerDied, TimeoutError) as exc:
            self.crashes += 1  # it could not even be initialized
            await server.stop()
            raise ServerDied(f"the server did not start: {exc!r}") from exc
        self.server = server
        self.uris = [self._doc_uri(k) for k in range(self.args.concurrency)]
        for uri, secret in self.uris:
            text, _ = document(0, secret)
            self.versions[uri] = 1
            server.notify(
                "textDocument/didOpen",
                {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
            )
        return server

    async def run(self, fig: Figures, count: int, progress: Any = None) -> None:
        """`count` completions spread over the workers' documents."""
        (keys0, tb0), crashes0 = self._totals(), self.crashes
        with contextlib.suppress(ServerDied):
            fig.rss_start_mb = rss_mb((await self.ensure_server()).pid)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for _ in range(count):
            queue.put_nowait(0)
        done = 0

        async def worker(k: int) -> None:
            nonlocal done
            while not queue.empty():
                queue.get_nowait()
                await self._one(k, fig)
                done += 1
                if progress is not None:
                    await progress(done)

        await asyncio.gather(*(worker(k) for k in range(self.args.concurrency)))
        if self.server is not None and self.server.alive:
            fig.rss_end_mb = rss_mb(self.server.pid)
        else:
            await self._bury()
        keys, tbs = self._totals()
        fig.crashes += self.crashes - crashes0
        if fig.crashes:  # two processes: their RSS difference means nothing
            fig.rss_start_mb = fig.rss_end_mb = float("nan")
        fig.key_places.update(keys - keys0)
        fig.tracebacks += tbs - tb0

    async def _one(self, k: int, fig: Figures) -> None:
        self.serial += 1
        n = self.serial
        fig.requests += 1
        try:
            server = await self.ensure_server()
        except ServerDied:
            return  # unanswered
        uri, secret = self.uris[k]
        text, (line, col) = document(n, secret)
        self.versions[uri] += 1
        timeout = self.args.deadline_ms / 1000 + self.args.grace_s
        t0 = time.perf_counter()
        try:
            server.notify(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": uri, "version": self.versions[uri]},
                    "contentChanges": [{"text": text}],
                },
            )
            params = {
                "textDocument": {"uri": uri},
                "position": {"line": line, "character": col},
                "context": {"triggerKind": 1},
            }
            resp = await server.request("textDocument/inlineCompletion", params, timeout)
        except (ServerDied, TimeoutError):
            self.silent += 1
            if self.silent >= 2 * self.args.concurrency and server.alive and server.proc:
                # Alive but deaf: end it (counted as a crash) rather than wait out the run.
                print(f"  [{self.mode}] the server stopped answering; ending it", flush=True)
                server.proc.kill()
                server.dead.set()
            return  # unanswered
        self.silent = 0
        ms = (time.perf_counter() - t0) * 1000
        fig.answered += 1
        fig.latencies_ms.append(ms)
        if ms <= self.args.deadline_ms + GRACE_MS:
            fig.in_time += 1
        if "error" in resp:
            fig.errors += 1
            if len(fig.error_samples) < 3:
                fig.error_samples.append(str(resp["error"].get("message", ""))[:200])
            return
        items = (resp.get("result") or {}).get("items") or []
        if items and items[0].get("insertText"):
            fig.with_item += 1
        if self.args.hover:  # the card shows errors: one more place a key could leak
            hover = {"textDocument": {"uri": uri}, "position": {"line": line, "character": 0}}
            fig.hovers += 1
            with contextlib.suppress(ServerDied, TimeoutError):
                await server.request("textDocument/hover", hover, self.args.grace_s)
                fig.hovers_answered += 1

    def collect(self, fig: Figures, phase: str, secret_docs_only: bool) -> None:
        fig.local_requests = self.local.faults.requests(phase)
        fig.remote_requests = self.remote.faults.requests(phase)
        if self.mode in ("local_only", "never_send"):
            fig.remote_under_privacy = fig.remote_requests
        else:  # only the secret documents must not leave
            fig.remote_under_privacy = self.remote.faults.carried(phase, SECRET_MARK)

    async def close(self) -> list[str]:
        leaked: list[str] = []
        if self.server is not None:
            await self.server.stop()
            leaked = self.server.files_with_key()
        return leaked


def set_phase(
    local: FaultyOllama, remote: FaultyOpenAI, phase: Phase, label: str, slow_s: float
) -> None:
    for tier in (local, remote):
        tier.faults.clear_mix()
        tier.faults.slow_s = slow_s
    local.faults.alternate = phase.local_confident is None
    local.set_fault(phase.local, label, confident=bool(phase.local_confident))
    remote.set_fault(phase.remote, label)


def print_table(rows: list[Figures], deadline_ms: float) -> None:
    head = (
        f"{'mode':<10} {'phase':<20} {'req':>4} {'ans':>4} {'≤dl+100':>7} {'item':>4} "
        f"{'err':>3} {'p50ms':>6} {'maxms':>6} {'crash':>5} {'localrq':>7} {'remoterq':>8} "
        f"{'priv!':>5} {'key!':>4} {'tb':>3} {'ΔRSS MB':>7}  hard / soft"
    )
    print(f"deadline {deadline_ms:.0f} ms; in time = answered within deadline + {GRACE_MS:.0f} ms")
    print(head)
    print("-" * len(head))
    for f in rows:
        notes = "; ".join(f.hard_failures()) or "ok"
        soft = "; ".join(f.soft_findings())
        print(
            f"{f.mode:<10} {f.phase:<20} {f.requests:>4} {f.answered:>4} {f.in_time:>7} "
            f"{f.with_item:>4} {f.errors:>3} {_pct(f.latencies_ms, 0.5):>6.0f} "
            f"{max(f.latencies_ms, default=float('nan')):>6.0f} {f.crashes:>5} "
            f"{f.local_requests:>7} {f.remote_requests:>8} {f.remote_under_privacy:>5} "
            f"{f.key_leaks:>4} {f.tracebacks:>3} {f.rss_growth_mb:>+7.1f}  {notes}"
            + (f" / {soft}" if soft else ""),
            flush=True,
        )


async def run_suite(args: argparse.Namespace) -> tuple[list[Figures], list[str]]:
    key = new_key()
    phases = [p for p in PHASES if not args.phases or p.name in args.phases]
    rows: list[Figures] = []
    problems: list[str] = []
    slow_s = args.deadline_ms / 1000 * args.slow_fraction
    started = time.perf_counter()
    for mode in args.modes:
        with (
            tempfile.TemporaryDirectory(prefix="fault-suite-") as tmp,
            FaultyOllama(markers=(SECRET_MARK,)) as local,
            FaultyOpenAI(markers=(SECRET_MARK,), api_key=key) as remote,
        ):
            driver = Driver(mode, Path(tmp), local, remote, args, key)
            try:
                for phase in phases:
                    if time.perf_counter() - started > args.budget_s:
                        problems.append(f"{mode}/{phase.name}: skipped (time budget)")
                        continue
                    label = f"{mode}/{phase.name}"
                    set_phase(local, remote, phase, label, slow_s)
                    fig = Figures(phase.name, mode)
                    fig.completion_possible = phase.completion_possible(mode)
                    await driver.run(fig, args.requests)
                    driver.collect(fig, label, mode != "open")
                    rows.append(fig)
                    if phase.recovery == "restart":
                        await driver.restart()
                    elif phase.recovery == "wait":
                        await asyncio.sleep(args.settle_s)  # the backends' short backoff
                    if args.verbose:
                        print_table([fig], args.deadline_ms)
            finally:
                # Healthy again so that shutdown is not held up by a hung double.
                set_phase(local, remote, PHASES[0], f"{mode}/shutdown", slow_s)
                leaked = await driver.close()
            if leaked:
                problems.append(f"{mode}: the API key is in {', '.join(leaked)}")
    return rows, problems


async def run_soak(args: argparse.Namespace) -> tuple[Figures, list[str], list[str]]:
    key = new_key()
    lines: list[str] = []
    problems: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    rate = args.fault_rate
    with (
        tempfile.TemporaryDirectory(prefix="fault-soak-") as tmp,
        FaultyOllama(markers=(SECRET_MARK,)) as local,
        FaultyOpenAI(markers=(SECRET_MARK,), api_key=key) as remote,
    ):
        driver = Driver("open", Path(tmp), local, remote, args, key)
        label = "soak"
        for tier, mix in ((local, LOCAL_MIX), (remote, REMOTE_MIX)):
            tier.set_fault("ok", label)
            weights: dict[Fault, float] = {"ok": 1 - rate}
            weights.update({f: rate / len(mix) for f in mix})
            tier.faults.set_mix(weights, seed=args.seed)
            tier.faults.slow_s = args.deadline_ms / 1000 * args.slow_fraction
        local.faults.alternate = True
        warm = min(max(200, args.soak // 10), args.soak)
        say(
            f"soak: {args.soak} completions, {rate:.0%} faults per tier, deadline "
            f"{args.deadline_ms:.0f} ms, {args.concurrency} concurrent documents "
            f"(1 under never_send)"
        )
        warm_fig = Figures("warm-up", "open")
        t0 = time.perf_counter()
        await driver.run(warm_fig, warm)
        server = driver.server
        after_warm = rss_mb(server.pid) if server is not None else float("nan")
        say(f"  RSS after warm-up ({warm} completions): {after_warm:.1f} MB")
        fig = Figures("soak", "open")
        step = max(1, (args.soak - warm) // 10)

        async def progress(done: int) -> None:
            if done % step == 0 and driver.server is not None:
                rss = rss_mb(driver.server.pid)
                say(
                    f"  {warm + done:>6} completions  RSS {rss:7.1f} MB  "
                    f"({rss - after_warm:+.1f} MB)  {time.perf_counter() - t0:6.0f} s"
                )

        await driver.run(fig, args.soak - warm, progress)
        fig.rss_start_mb = after_warm
        driver.collect(fig, label, False)
        for attr in ("requests", "answered", "hovers", "hovers_answered", "in_time"):
            setattr(fig, attr, getattr(fig, attr) + getattr(warm_fig, attr))
        fig.latencies_ms = warm_fig.latencies_ms + fig.latencies_ms
        fig.key_places.update(warm_fig.key_places)
        fig.with_item += warm_fig.with_item
        fig.errors += warm_fig.errors
        fig.crashes += warm_fig.crashes
        fig.tracebacks += warm_fig.tracebacks
        for tier in (local, remote):
            tier.set_fault("ok", "shutdown")
            tier.faults.clear_mix()
        leaked = await driver.close()
        if leaked:
            problems.append(f"the API key is in {', '.join(leaked)}")
        played_l = sum(v for (p, f), v in local.faults.faults_played.items() if p == label)
        faulty_l = sum(
            v for (p, f), v in local.faults.faults_played.items() if p == label and f != "ok"
        )
        played_r = sum(v for (p, f), v in remote.faults.faults_played.items() if p == label)
        faulty_r = sum(
            v for (p, f), v in remote.faults.faults_played.items() if p == label and f != "ok"
        )
        say(
            f"  RSS at the end: {fig.rss_end_mb:.1f} MB; growth after warm-up "
            f"{fig.rss_growth_mb:+.1f} MB (limit {args.max_growth_mb:.0f} MB)"
        )
        say(
            f"  {fig.requests} requests, {fig.answered} answered "
            f"({fig.in_time} within deadline + {GRACE_MS:.0f} ms), {fig.with_item} with a "
            f"completion, {fig.errors} errors, {fig.crashes} crashes, p50 "
            f"{_pct(fig.latencies_ms, 0.5):.0f} ms, p99 {_pct(fig.latencies_ms, 0.99):.0f} ms"
        )
        say(
            f"  faults injected: local {faulty_l}/{played_l}, remote {faulty_r}/{played_r}; "
            f"remote requests under privacy {fig.remote_under_privacy}; key shown "
            f"{fig.key_leaks}; tracebacks {fig.tracebacks}; {time.perf_counter() - t0:.0f} s"
        )
        if fig.rss_growth_mb >= args.max_growth_mb:
            problems.append(
                f"RSS grew {fig.rss_growth_mb:.1f} MB after warm-up "
                f"(limit {args.max_growth_mb:.0f} MB)"
            )
    return fig, problems, lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=8, help="completions per phase and mode")
    ap.add_argument("--concurrency", type=int, default=4, help="documents completed at once")
    ap.add_argument("--deadline-ms", type=float, default=800.0, help="completion.deadline_ms")
    ap.add_argument(
        "--slow-fraction",
        type=float,
        default=0.7,
        help="`slow` waits this fraction of the deadline before its first byte",
    )
    ap.add_argument(
        "--grace-s", type=float, default=5.0, help="past deadline + this, a request is unanswered"
    )
    ap.add_argument(
        "--settle-s",
        type=float,
        default=1.2,
        help="pause after a faulty phase: the backends' connection backoff expires",
    )
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--phases", nargs="+", choices=[p.name for p in PHASES])
    ap.add_argument(
        "--never-send",
        nargs="+",
        default=list(NEVER_SEND),
        metavar="GLOB",
        help="privacy.never_send patterns (the documents live in <repo>/secrets/)",
    )
    ap.add_argument("--no-hover", dest="hover", action="store_false", help="skip the hovers")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=270.0,
        help="phases not started within this many seconds are skipped (and reported)",
    )
    ap.add_argument(
        "--hostile",
        action="store_true",
        help="the hostile-input phases instead (bench/fault_hostile.py): worker pipe garbage, "
        "a hostile ledger, NaN and extreme settings",
    )
    ap.add_argument("--soak", type=int, default=0, metavar="N", help="soak with N completions")
    ap.add_argument("--fault-rate", type=float, default=0.2, help="soak: share of faulty answers")
    ap.add_argument("--max-growth-mb", type=float, default=5.0, help="soak: RSS growth limit")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each phase as it ends")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    if args.hostile:
        from bench import fault_hostile  # its phases reuse this module's client

        return fault_hostile.main(args)
    if args.soak:
        args.concurrency = max(args.concurrency, 2)
        fig, problems, _ = asyncio.run(run_soak(args))
        problems = fig.hard_failures() + problems
        if args.json:
            args.json.write_text(json.dumps({"soak": fig.as_json(), "problems": problems}))
    else:
        rows, problems = asyncio.run(run_suite(args))
        print()
        print_table(rows, args.deadline_ms)
        for f in rows:
            problems += [f"{f.mode}/{f.phase}: {h}" for h in f.hard_failures()]
        if args.json:
            payload = {"phases": [f.as_json() for f in rows], "problems": problems}
            args.json.write_text(json.dumps(payload, indent=1))
        late = sum(f.late for f in rows)
        total = sum(f.answered for f in rows)
        print(f"\nlate answers: {late}/{total}; {time.perf_counter() - t0:.0f} s in all")
    if problems:
        print("\nHARD INVARIANTS BROKEN:")
        for p in problems:
            print(f"  - {p}")
        return 1
    print("\nall hard invariants held")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
    sys.exit(130)
