"""Hostile inputs for the fault suite: garbage on the embedded worker's pipe, a hostile
ledger (at start-up and while the server runs), NaN and extreme settings pushed through
didChangeConfiguration, special files in the workspace (FIFOs, a character device, a
socket, in the index build and in watched-file events), lone surrogates in open
documents (cross-file context, recent edits), extreme and malformed positions.

    .venv/bin/python -m bench.fault_suite --hostile [--requests 6] [--json PATH]
    .venv/bin/python -m bench.fault_hostile [--requests 6]   (the same)

One server per phase, spoken to as an editor does (`bench.fault_suite.LspServer`). Per
phase it prints: requests, answered, answered with a completion, JSON-RPC errors,
crashes, tracebacks sent to the client (any message the server wrote holding one),
and what the phase itself did (the worker's protocol errors and restarts, unreadable
ledger lines, settings keys named in warnings, tracebacks of the CLI commands).

Hard invariants (exit status 1 when broken): every request answered, no crash, no
traceback sent to the client or printed by `stats` / `calibrate`; `exit` ends the
server; special files skipped and counted, the regular files all indexed; no error for
a completion next to a lone surrogate.

The pipe phases need the embedded model (extra `embedded`); they write into the
worker's real protocol pipe (its write end, opened through /proc) as anything sharing
that pipe could: non-object JSON, partial lines, then a flood.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from bench.fault_suite import ROOT, LspServer, ServerDied, new_key
from tests.fakes.faulty import FaultyOllama

DOC = (ROOT / "fault_suite" / "hostile.py").as_uri()
NAN, INF = float("nan"), float("inf")

NON_OBJECT = [b"[1]\n", b"null\n", b'"text"\n', b"42\n", b'{"id": "x", "text": "y"}\n'] * 3
PARTIAL = [
    b'{"id": 1, "chu',
    b'nk": 5}\n',
    b'{"id":',
    b"\n",
    b'{"id": 2, "done": {"decode_s"',
    b"}\n",
]
FLOOD = b"[1]\n" * 10_000

HOSTILE_LEDGER = [
    '{"id":"h:1","route":["local"]}',
    '{"id":"h:2","route":"local","reasons":7}',
    '{"id":"h:3","route":"local","latency_ms":"fast"}',
    '{"id":"h:4","route":"local","confidence":"-0.1"}',
    '{"id":"h\\u0000","route":"local","language":"py\\u0000"}',
    '{"id":"h:5","route":"local","bytes_sent":"300"}',
    '{"adaptive":"x","from":-0.5,"start":-0.5,"why":"w"}',
    '{"adaptive":null,"from":-0.5,"start":-0.5,"why":"w"}',
    '{"adaptive":NaN,"from":-0.5,"start":-0.5,"why":"w"}',
    '{"retained":"h:1","after_s":"30","ratio":"x"}',
    "[1, 2]",
    "null",
    "[" * 100_000 + "]" * 100_000,
    '{"route":"local","id":"d","reasons":' + "[" * 50_000 + "]" * 50_000 + "}",
]

# In any message the server writes: a traceback, or pygls' warning about our own marker.
TRACEBACK_LIKE = (
    "Traceback (most recent call last)",
    "Exception Group",
    "most recent call last",
    'File \\"',
    "Unknown message",
)

# (what the editor pushes, the key a warning must name)
BAD_SETTINGS: list[tuple[str, str]] = [
    ('{"local": {"timeout": NaN}}', "local.timeout"),
    ('{"completion": {"deadline_ms": NaN}}', "completion.deadline_ms"),
    ('{"routing": {"threshold": NaN}}', "routing.threshold"),
    ('{"remote": {"timeout": Infinity}}', "remote.timeout"),
    ('{"local": {"first_token_ms": -Infinity}}', "local.first_token_ms"),
    ('{"completion": {"deadline_ms": 1e308}}', "completion.deadline_ms"),
    ('{"local": {"num_ctx": 1' + "0" * 400 + "}}", "local.num_ctx"),
    ('{"routing": {"thresholds": {"qwen2.5-coder:3b": 5.0}}}', "routing.thresholds"),
    ('{"routing": {"thresholds": {"m": NaN}}}', "routing.thresholds"),
    ('{"editor": {"debounce_ms": 1e300}}', "editor.debounce_ms"),
    ('{"privacy": {"never_send": ' + "[" * 500 + "]" * 500 + "}}", "privacy.never_send"),
    ('{"completion": {"max_tokens": ' + "[" * 5000 + "]" * 5000 + "}}", ""),  # -32700
]


@attrs.define
class Row:
    phase: str
    requests: int = 0
    answered: int = 0
    with_item: int = 0
    errors: int = 0
    crashes: int = 0
    client_tracebacks: int = 0
    notes: list[str] = attrs.field(factory=list)
    problems: list[str] = attrs.field(factory=list)

    def hard_failures(self) -> list[str]:
        out = list(self.problems)
        if self.answered < self.requests:
            out.append(f"{self.requests - self.answered} of {self.requests} requests unanswered")
        if self.crashes:
            out.append(f"{self.crashes} crashes")
        if self.client_tracebacks:
            out.append(f"{self.client_tracebacks} tracebacks sent to the client")
        return out


class Client(LspServer):
    """The suite's raw client, also counting tracebacks in what the server writes and
    keeping the settings warnings it shows."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.client_tracebacks = 0
        self.shown: list[str] = []
        self.version = 0

    def _dispatch(self, msg: dict[str, Any]) -> None:
        text = json.dumps(msg)
        if any(s in text for s in TRACEBACK_LIKE):
            self.client_tracebacks += 1
        if msg.get("method") == "window/showMessage":
            self.shown.append(str(msg["params"].get("message", "")))
        super()._dispatch(msg)

    def send_raw(self, body: str) -> None:
        """A message written by hand (NaN, nesting json.dumps refuses)."""
        assert self.proc is not None and self.proc.stdin is not None
        data = body.encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)

    async def complete(self, row: Row, n: int, wait_s: float) -> None:
        self.version += 1
        text = f"def add_{n}(a, b):\n    return \n"
        if self.version == 1:
            doc = {"uri": DOC, "languageId": "python", "version": 1, "text": text}
            self.notify("textDocument/didOpen", {"textDocument": doc})
        else:
            change = {"textDocument": {"uri": DOC, "version": self.version}}
            self.notify("textDocument/didChange", {**change, "contentChanges": [{"text": text}]})
        row.requests += 1
        params = {
            "textDocument": {"uri": DOC},
            "position": {"line": 1, "character": 11},
            "context": {"triggerKind": 1},
        }
        try:
            resp = await self.request("textDocument/inlineCompletion", params, wait_s)
        except (ServerDied, TimeoutError):
            return
        row.answered += 1
        if "error" in resp:
            row.errors += 1
        elif ((resp.get("result") or {}).get("items") or [{}])[0].get("insertText"):
            row.with_item += 1

    async def ask(self, row: Row, method: str, params: Any, wait_s: float) -> dict[str, Any]:
        """One request counted in `row`: answered or not, an error or not."""
        row.requests += 1
        try:
            resp = await self.request(method, params, wait_s)
        except (ServerDied, TimeoutError):
            return {}
        row.answered += 1
        if "error" in resp:
            row.errors += 1
        return resp

    async def status(self) -> dict[str, Any]:
        params = {"command": "synconfroute.status", "arguments": []}
        resp = await self.request("workspace/executeCommand", params, 30)
        return dict(resp.get("result") or {})


def _config(folder: Path, *, embedded: bool, local_url: str = "", extra: str = "") -> Path:
    local = (
        '[local]\nbackend = "embedded"\n'
        if embedded
        else f'[local]\nbackend = "ollama"\nurl = "{local_url}"\nmodel = "qwen2.5-coder:3b"\n'
    )
    text = (
        local
        + "[privacy]\nlocal_only = true\n[completion]\ndeadline_ms = 4000\n"
        + "[editor]\ndebounce_ms = 0\nadaptive_debounce = false\n"
        + extra
    )
    path = folder / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


async def _server(folder: Path, config: Path, row: Row, root: Path = ROOT) -> Client:
    server = Client(config, folder, new_key(), root)
    row.requests += 1  # initialize
    try:
        await server.start()
    except (ServerDied, TimeoutError) as exc:
        row.crashes += 1
        row.problems.append(f"the server did not start: {exc!r}")
        await server.stop()
        raise
    row.answered += 1
    return server


async def _finish(server: Client, row: Row) -> None:
    if not server.alive:
        row.crashes += 1
    row.client_tracebacks += server.client_tracebacks
    await server.stop()


@contextlib.contextmanager
def worker_pipe(worker_pid: int) -> Iterator[int]:
    """A write end of the worker's protocol pipe: its one pipe descriptor past stderr
    that is open for writing."""
    fds = Path(f"/proc/{worker_pid}/fd")
    for entry in sorted(fds.iterdir(), key=lambda p: int(p.name)):
        if int(entry.name) < 3 or not os.readlink(entry).startswith("pipe:"):
            continue
        flags = (Path(f"/proc/{worker_pid}/fdinfo") / entry.name).read_text()
        if int(flags.split("flags:")[1].split()[0], 8) & 3 == os.O_WRONLY:
            fd = os.open(entry, os.O_WRONLY)
            try:
                yield fd
            finally:
                os.close(fd)
            return
    raise RuntimeError(f"no protocol pipe found in {fds}")


async def pipe_phases(args: argparse.Namespace, work: Path) -> list[Row]:
    rows = [Row("pipe-non-object"), Row("pipe-partial-lines"), Row("pipe-flood")]
    if importlib.util.find_spec("llama_cpp") is None:
        for row in rows:
            row.notes.append("skipped: no embedded model (extra 'embedded')")
        return rows
    folder = work / "pipe"
    folder.mkdir()
    server = await _server(folder, _config(folder, embedded=True), rows[0])
    try:
        warm = Row("warm")
        await server.complete(warm, 0, 120)  # loads the model
        n = 0
        for row, garbage in zip(rows, (NON_OBJECT, PARTIAL, [FLOOD]), strict=True):
            before = (await server.status()).get("local_worker") or {}
            with worker_pipe(int(before["pid"])) as fd:
                for chunk in garbage:
                    os.write(fd, chunk)
                    await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)
            t0 = time.perf_counter()
            for _ in range(args.requests):
                n += 1
                await server.complete(row, n, 4 + args.grace_s)
            took = (time.perf_counter() - t0) / max(1, args.requests)
            after = (await server.status()).get("local_worker") or {}
            errors = after.get("protocol_errors", 0) - before.get("protocol_errors", 0)
            row.notes.append(
                f"protocol errors {errors}"
                f", restarts {after.get('restarts', 0) - before.get('restarts', 0)}"
                f", {took * 1000:.0f} ms a completion"
            )
    finally:
        await _finish(server, rows[-1])
    return rows


def _cli(ledger: Path, config: Path, row: Row) -> None:
    """`stats`, `stats --json`, `calibrate --from-ledger`: their exit and no traceback."""
    env = {**os.environ, "SYNCONFROUTE_CONFIG": str(config), "PYTHONPATH": str(ROOT)}
    runs = [
        ["stats", "--ledger", str(ledger)],
        ["stats", "--json", "--ledger", str(ledger)],
        ["calibrate", "--from-ledger", str(ledger), "--best", "--dry-run"],
    ]
    codes = []
    for argv in runs:
        run = subprocess.run(
            [sys.executable, "-m", "synconfroute", *argv],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=120,
        )
        codes.append(run.returncode)
        if "Traceback" in run.stdout + run.stderr:
            row.problems.append(f"`synconfroute {argv[0]}` printed a traceback")
        if argv[:2] == ["stats", "--json"] and run.returncode == 0:
            row.notes.append(f"unreadable lines {json.loads(run.stdout)['unreadable_lines']}")
    row.notes.append(f"stats/stats --json/calibrate exit {codes}")


def _good_lines(n: int) -> list[str]:
    out = []
    for i in range(n):
        conf = -0.05 * (i % 20)
        out.append(
            json.dumps(
                {
                    "t": 1.0,
                    "id": f"g:{i}",
                    "route": "local" if i % 2 else "remote",
                    "reasons": ["confident-and-valid"],
                    "policy": "synconf",
                    "confidence": conf,
                    "threshold": -0.5,
                    "latency_ms": {"total": 20.0},
                }
            )
        )
        out.append(json.dumps({"t": 1.0, "shown": f"g:{i}"}))
        out.append(json.dumps({"t": 1.0, "accepted" if i % 3 else "dismissed": f"g:{i}"}))
    return out


async def ledger_phases(args: argparse.Namespace, work: Path, local_url: str) -> list[Row]:
    start_row, live_row = Row("ledger-at-start"), Row("ledger-while-running")
    folder = work / "ledger"
    folder.mkdir()
    ledger = folder / "ledger.jsonl"
    ledger.write_text("\n".join(_good_lines(30) + HOSTILE_LEDGER) + "\n")
    config = _config(
        folder,
        embedded=False,
        local_url=local_url,
        extra="[routing]\nadaptive = true\nthreshold = -0.5\n",
    )
    server = await _server(folder, config, start_row)
    try:
        for n in range(args.requests):
            await server.complete(start_row, n, 4 + args.grace_s)
        threshold = (await server.status()).get("threshold")
        start_row.notes.append(f"threshold {threshold}")
        _cli(ledger, config, start_row)
        for n in range(args.requests):
            with ledger.open("a") as f:  # another writer damages the file meanwhile
                f.write(HOSTILE_LEDGER[n % len(HOSTILE_LEDGER)] + "\n")
            await server.complete(live_row, 100 + n, 4 + args.grace_s)
    finally:
        await _finish(server, live_row)
    again = await _server(folder, config, live_row)  # and the next start reads it all
    try:
        await again.complete(live_row, 999, 4 + args.grace_s)
    finally:
        await _finish(again, live_row)
    _cli(ledger, config, live_row)
    return [start_row, live_row]


async def settings_phase(args: argparse.Namespace, work: Path, local_url: str) -> Row:
    row = Row("settings-nan-extreme")
    folder = work / "settings"
    folder.mkdir()
    server = await _server(folder, _config(folder, embedded=False, local_url=local_url), row)
    named = 0
    try:
        for i, (payload, key) in enumerate(BAD_SETTINGS):
            shown = len(server.shown)
            server.send_raw(
                '{"jsonrpc":"2.0","method":"workspace/didChangeConfiguration",'
                '"params":{"settings":{"synconfroute":' + payload + "}}}"
            )
            await server.complete(row, i, 4 + args.grace_s)
            if key and any(key in m for m in server.shown[shown:]):
                named += 1
    finally:
        await _finish(server, row)
    expected = sum(1 for _, key in BAD_SETTINGS if key)
    row.notes.append(f"warnings naming the key {named}/{expected}")
    if named < expected:
        row.problems.append(f"only {named} of {expected} bad values were named in a warning")
    return row


def _special_workspace(ws: Path, n: int) -> int:
    """`n` Python files around FIFOs and a character device (`mknod c 1 5` as root, else
    a link to /dev/zero); the caller binds a socket there too."""
    for i in range(n):
        sub = ws / f"pkg{i % 5}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"m{i:03d}.py").write_text(f"def func_{i}(x):\n    return x + {i}\n")
    os.mkfifo(ws / "pipe.py")
    os.mkfifo(ws / "pkg1" / "pipe.py")
    if os.geteuid() == 0:
        os.mknod(ws / "zero.py", 0o644 | 0o020000, os.makedev(1, 5))
    else:
        (ws / "zero.py").symlink_to("/dev/zero")
    return n


async def _exit_time(server: Client, row: Row, wait_s: float) -> bool:
    """shutdown, then exit: whether the process ended (it must)."""
    row.requests += 1
    try:
        await server.request("shutdown", None, 10)
    except (ServerDied, TimeoutError):
        return False
    row.answered += 1
    t0 = time.perf_counter()
    server.notify("exit", None)
    assert server.proc is not None
    try:
        await asyncio.wait_for(server.proc.wait(), wait_s)
    except TimeoutError:
        row.problems.append(f"the server was still running {wait_s:.0f} s after exit")
        return False
    row.notes.append(f"exit {time.perf_counter() - t0:.2f} s")
    return True


async def _index_figures(
    server: Client, row: Row, wait_s: float, special: int | None = None
) -> dict[str, Any]:
    """`status` until the index build is done (and `special` files are counted)."""
    end = time.monotonic() + wait_s
    figures: dict[str, Any] = {}
    params = {"command": "synconfroute.status", "arguments": []}
    while time.monotonic() < end:
        resp = await server.ask(row, "workspace/executeCommand", params, 30)
        figures = dict((resp.get("result") or {}).get("workspace") or {})
        if figures.get("ready") and (special is None or figures.get("special") == special):
            break
        await asyncio.sleep(0.2)
    return figures


async def special_files_phase(args: argparse.Namespace, work: Path, local_url: str) -> Row:
    """A workspace with FIFOs, a device and a socket: the index build goes past them,
    watched-file events naming them are skipped, `status` counts them, `exit` ends."""
    row = Row("special-files")
    folder = work / "special"
    ws = folder / "ws"
    regular = _special_workspace(ws, 50)
    extra = '[completion]\ncontext = "workspace"\n'
    config = _config(folder, embedded=False, local_url=local_url, extra=extra)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(ws / "sock.py"))
        server = await _server(folder, config, row, ws)
        exited = False
        try:
            for n in range(args.requests):
                await server.complete(row, n, 4 + args.grace_s)
            await _index_figures(server, row, 60)
            late = ws / "late_pipe.py"
            os.mkfifo(late)
            events = [
                {"uri": p.as_uri(), "type": 2}
                for p in (late, ws / "pipe.py", ws / "zero.py", ws / "sock.py")
            ]
            server.notify("workspace/didChangeWatchedFiles", {"changes": events})
            for n in range(args.requests):
                await server.complete(row, 100 + n, 4 + args.grace_s)
            figures = await _index_figures(server, row, 60, special=5)
            indexed = int(figures.get("files", 0))
            row.notes.append(f"indexed {indexed}/{regular}, special {figures.get('special')}/5")
            if indexed < regular or figures.get("special") != 5:
                row.problems.append(f"index figures {figures}")
            row.client_tracebacks += server.client_tracebacks
            exited = await _exit_time(server, row, 30)
        finally:
            if exited:
                await server.stop()
            else:
                await _finish(server, row)
    return row


# Definitions holding lone surrogates (a comment: the index keeps it with the function).
SURROGATE_DEFS = "def make_widget(size):\n    # \ud800 label \udfff\n    return size\n"


async def surrogates_phase(args: argparse.Namespace, work: Path, local_url: str) -> Row:
    """Lone surrogates in another open document (cross-file context, recent edits) and
    in the completed one: completions answer without an error."""
    row = Row("lone-surrogates")
    folder = work / "surrogates"
    folder.mkdir()
    extra = '[completion]\ncontext = "workspace"\nrecent_edits = true\n'
    config = _config(folder, embedded=False, local_url=local_url, extra=extra)
    server = await _server(folder, config, row, folder)
    try:
        other = (folder / "widgets.py").as_uri()
        doc = {"uri": other, "languageId": "python", "version": 1, "text": SURROGATE_DEFS}
        server.notify("textDocument/didOpen", {"textDocument": doc})
        for n in range(args.requests):
            at = {"line": 2, "character": 4}
            change = {"range": {"start": at, "end": at}, "text": f"v{n} = '\udc80\ud800'\n    "}
            ident = {"uri": other, "version": 2 + n}
            server.notify(
                "textDocument/didChange", {"textDocument": ident, "contentChanges": [change]}
            )
            await server.complete(row, n, 4 + args.grace_s)
        server.version += 1  # and in the completed document itself, before the cursor
        ident = {"uri": DOC, "version": server.version}
        whole = {"text": "w = make_widget('\ud800')\nx = \n"}
        server.notify("textDocument/didChange", {"textDocument": ident, "contentChanges": [whole]})
        await server.ask(row, "textDocument/inlineCompletion", _at(1, 4), 4 + args.grace_s)
    finally:
        await _finish(server, row)
    if row.errors:
        row.problems.append(f"{row.errors} completions failed next to a lone surrogate")
    return row


def _at(line: Any, character: Any) -> dict[str, Any]:
    return {
        "textDocument": {"uri": DOC},
        "position": {"line": line, "character": character},
        "context": {"triggerKind": 1},
    }


EXTREME_POSITIONS: list[Any] = [
    _at(-1, 0),
    _at(0, -1),
    _at(2**31, 0),
    _at(0, 2**31),
    _at(2**63, 2**63),
    _at(-(2**63), 0),
    _at(1, 10**6),
    _at(0.5, 0),
    _at("1", "2"),
    _at(None, 0),
    {"textDocument": {"uri": DOC}},
    {"textDocument": {"uri": DOC}, "position": [1, 2]},
    [1, 2],
    "x",
]


async def positions_phase(args: argparse.Namespace, work: Path, local_url: str) -> Row:
    """Extreme and malformed positions in requests (each answered: -32602 where it is
    not in the document) and in didChange ranges (clamped); completions at good
    positions work after them."""
    row = Row("extreme-positions")
    folder = work / "positions"
    folder.mkdir()
    server = await _server(folder, _config(folder, embedded=False, local_url=local_url), row)
    try:
        await server.complete(row, 0, 4 + args.grace_s)  # opens the document
        for params in EXTREME_POSITIONS:
            await server.ask(row, "textDocument/inlineCompletion", params, 10)
            await server.ask(row, "textDocument/hover", params, 10)
        big = {"line": 2**31, "character": -(2**31)}
        ranges = [
            {"start": {"line": -5, "character": 2**31}, "end": big},
            {"start": big, "end": big},
        ]
        for rng in ranges:
            server.version += 1
            ident = {"uri": DOC, "version": server.version}
            edit = {"range": rng, "text": "y"}
            server.notify(
                "textDocument/didChange", {"textDocument": ident, "contentChanges": [edit]}
            )
        server.notify("synconfroute/cursor", {"textDocument": {"uri": DOC}, "position": big})
        for n in range(args.requests):
            await server.complete(row, 10 + n, 4 + args.grace_s)
    finally:
        await _finish(server, row)
    row.notes.append(f"{len(EXTREME_POSITIONS) * 2} bad-position requests")
    return row


async def run(args: argparse.Namespace) -> list[Row]:
    with (
        tempfile.TemporaryDirectory(prefix="synconfroute-hostile-") as tmp,
        FaultyOllama() as local,
    ):
        local.set_fault("ok", "hostile")
        work = Path(tmp)
        rows = await pipe_phases(args, work)
        rows += await ledger_phases(args, work, local.url)
        rows.append(await settings_phase(args, work, local.url))
        rows.append(await special_files_phase(args, work, local.url))
        rows.append(await surrogates_phase(args, work, local.url))
        rows.append(await positions_phase(args, work, local.url))
        return rows


def print_rows(rows: list[Row]) -> None:
    print(
        f"{'phase':<22} {'req':>4} {'ans':>4} {'item':>4} {'err':>4} {'crash':>5} "
        f"{'tb→client':>9}  notes"
    )
    for r in rows:
        print(
            f"{r.phase:<22} {r.requests:>4} {r.answered:>4} {r.with_item:>4} {r.errors:>4} "
            f"{r.crashes:>5} {r.client_tracebacks:>9}  {'; '.join(r.notes)}"
        )


def main(args: argparse.Namespace) -> int:
    """`fault_suite --hostile`: the phases above; exit status 1 when an invariant broke."""
    rows = asyncio.run(run(args))
    print_rows(rows)
    answered, asked = sum(r.answered for r in rows), sum(r.requests for r in rows)
    crashed, shown = sum(r.crashes for r in rows), sum(r.client_tracebacks for r in rows)
    print(
        f"\ntotal: {asked} requests, {answered} answered, {crashed} crashed, "
        f"{shown} tracebacks to the client"
    )
    problems = [f"{r.phase}: {p}" for r in rows for p in r.hard_failures()]
    if args.json:
        payload = {"hostile": [attrs.asdict(r) for r in rows], "problems": problems}
        args.json.write_text(json.dumps(payload, indent=1))
    if problems:
        print("\nHARD INVARIANTS BROKEN:")
        for p in problems:
            print(f"  - {p}")
        return 1
    print("\nall hard invariants held")
    return 0


if __name__ == "__main__":  # the same as `python -m bench.fault_suite --hostile ...`
    from bench.fault_suite import main as suite_main

    sys.exit(suite_main(["--hostile", *sys.argv[1:]]))
