"""Time to ghost text on real files, through the real server over stdio.

    .venv/bin/python -m bench.typing_replay replay [--tier embedded|ollama-fake]
        [--context file|workspace] [--files N] [--lines N] [--key-ms 90] [--pause-ms 1500]
    .venv/bin/python -m bench.typing_replay open [--files 10] [--rest-ms 1000]
        [--cursor report|edit|none]
    .venv/bin/python -m bench.typing_replay complete [--positions 10]

Files: click's sources (/work/shared/data/repos/click-src.tar.gz, `--tarball`), else the
stdlib's. `--root DIR` runs the server from another source tree (e.g. an export of an
older commit) for a side-by-side before/after; `--set KEY=VALUE` adds settings
(`local.max_predict_ms=0`).

replay: lines of each file are removed and typed back key by key (a line's indentation
comes with its newline, as editors auto-indent), `--key-ms` apart; every key sends
didChange and an automatic inlineCompletion, and cancels the request before it
($/cancelRequest, as editors do); at the end of each non-blank line the typist pauses
`--pause-ms`. Reported: time from the last key to ghost text at those pauses (p50/p95
over the pauses that got one), the share of pauses with ghost text, and the share of
prompt tokens the model reused from its KV cache (embedded: the server's
`synconfroute.status`; the Ollama fake: its own cache model).

open: each file is opened, the editor reports the cursor (`synconfroute/cursor`, as our
plugins do on focus; `--cursor edit`: types Enter there instead, as in an editor without
our plugin; `--cursor none`: neither) at the end of a line 40% into the file, the user rests
`--rest-ms`, then asks for a completion there: time to the answer, and whether it
showed something. A server that does not know the notification ignores it.

complete: `synconfroute complete` (a fresh process each time: cold) at `--positions`
line ends of click's core.py (3,000+ lines): the local first-token time and whether a
completion was shown.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CLICK = Path("/work/shared/data/repos/click-src.tar.gz")


# -- a plain JSON-RPC client ------------------------------------------------------


class Rpc:
    """The server over stdio, spoken to with raw frames (ids, cancels, timing exact)."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.routes: list[dict[str, Any]] = []  # synconfroute/route notifications
        self._ids = 0
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def start(self, root: Path, config: Path, workdir: Path) -> None:
        env = dict(os.environ)
        env.update(
            {
                "SYNCONFROUTE_CONFIG": str(config),
                "PYTHONPATH": str(root),
                "XDG_STATE_HOME": str(workdir / "state"),
                "XDG_CACHE_HOME": str(workdir / "cache"),
            }
        )
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "synconfroute",
            "serve",
            "--ledger",
            str(workdir / "ledger.jsonl"),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            cwd=str(root),
            limit=1 << 24,
        )
        self._reader = asyncio.create_task(self._read())
        caps = {
            "general": {"positionEncodings": ["utf-16"]},
            "textDocument": {"inlineCompletion": {"dynamicRegistration": False}},
        }
        uri = workdir.as_uri()
        await self.call(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": uri,
                "workspaceFolders": [{"uri": uri, "name": "bench"}],
                "capabilities": caps,
            },
        )
        self.notify("initialized", {})

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        data = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any) -> tuple[int, asyncio.Future[dict[str, Any]]]:
        self._ids += 1
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[self._ids] = fut
        self._send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        return self._ids, fut

    async def call(self, method: str, params: Any, wait_s: float = 120) -> dict[str, Any]:
        _, fut = self.request(method, params)
        return await asyncio.wait_for(fut, wait_s)

    async def route_of(self, msg: dict[str, Any], wait_s: float = 5.0) -> dict[str, Any]:
        """The synconfroute/route notification of an answered inlineCompletion (it
        follows the response), matched by its id; {} when it shows nothing."""
        result = msg.get("result")
        items = result.get("items", []) if isinstance(result, dict) else result or []
        args = ((items[0].get("command") or {}).get("arguments") or [None]) if items else [None]
        if args[0] is None:
            return {}
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            for route in reversed(self.routes):
                if route.get("id") == args[0]:
                    return route
            await asyncio.sleep(0.005)
        return {}

    def cancel(self, rid: int) -> None:
        self.notify("$/cancelRequest", {"id": rid})

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        out = self.proc.stdout
        while True:
            length = 0
            while True:
                line = await out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                k, _, v = line.decode().partition(":")
                if k.lower() == "content-length":
                    length = int(v)
            msg = json.loads(await out.readexactly(length))
            if "id" in msg and "method" in msg:  # a request from the server
                result: Any = None
                if msg["method"] == "workspace/configuration":
                    result = [None for _ in msg["params"].get("items", [])]
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
            elif msg.get("method") == "synconfroute/route":
                self.routes.append(msg.get("params") or {})
            elif "id" in msg:
                fut = self._pending.pop(msg["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            await self.call("shutdown", None, wait_s=10)
            self.notify("exit", None)
        if self.proc is not None:
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
        if self._reader is not None:
            self._reader.cancel()


def context_files(route: dict[str, Any]) -> int:
    """Other files in the local prompt of one answer (its hover card's context line)."""
    for line in str(route.get("card") or "").split("\n"):
        if "context from other files:" in line:
            return line.count("`") // 2 or len(line.split(":", 1)[1].split(","))
    return 0


def prompt_figures(
    before: dict[str, Any], after: dict[str, Any], fake: Any, routes: list[dict[str, Any]]
) -> str:
    """Prompt size per generation (embedded: tokens, from the server's status when it
    counts generations; the Ollama fake: characters) and context files per answer."""
    size = "n/a"
    if fake is not None and getattr(fake, "prompts_timed", 0):
        size = f"{fake.prompt_chars_total / fake.prompts_timed:.0f} chars"
    elif after.get("generations"):
        n = after["generations"] - before.get("generations", 0)
        d = after["prompt_tokens"] - before.get("prompt_tokens", 0)
        size = f"{d / n:.0f} tokens" if n else "n/a"
    files = [context_files(r) for r in routes if not r.get("cacheHit")]
    ctx = f"{statistics.mean(files):.1f} (max {max(files)})" if files else "n/a"
    return f"  prompt per generation: {size}; context files per answered prompt: {ctx}"


def shown(msg: dict[str, Any]) -> bool:
    """Whether an inlineCompletion response carries ghost text."""
    result = msg.get("result")
    items = result.get("items", []) if isinstance(result, dict) else result or []
    return any((i.get("insertText") or "").strip() for i in items)


# -- files ------------------------------------------------------------------------


def real_files(tarball: Path, n: int) -> list[tuple[str, str]]:
    """(name, text) of up to `n` real Python files, largest first."""
    found: list[tuple[str, str]] = []
    if tarball.is_file():
        with tarfile.open(tarball) as tar:
            for m in tar.getmembers():
                if m.name.endswith(".py") and "/tests/" not in m.name and m.size > 8000:
                    f = tar.extractfile(m)
                    if f is not None:
                        found.append((m.name, f.read().decode("utf-8", "replace")))
    else:
        import argparse as ap

        lib = Path(ap.__file__).parent
        for name in ("argparse.py", "typing.py", "inspect.py", "pathlib.py", "zipfile.py"):
            found.append((name, (lib / name).read_text()))
    found.sort(key=lambda x: -len(x[1]))
    return found[:n]


def code_region(text: str, lines: int, at: float) -> tuple[int, int]:
    """(first, last) line numbers of a run of `lines` lines at fraction `at` of the file,
    starting on an indented non-blank line (inside a body, where one types)."""
    rows = text.split("\n")
    i = max(1, int(len(rows) * at))
    while i < len(rows) - lines and not (rows[i].startswith("    ") and rows[i].strip()):
        i += 1
    return i, min(len(rows) - 1, i + lines)


def utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


# -- config -------------------------------------------------------------------------


def write_config(folder: Path, args: argparse.Namespace, ollama_url: str | None) -> Path:
    sections: dict[str, list[str]] = {"local": [], "completion": [], "editor": []}
    if ollama_url:
        sections["local"] += [
            'backend = "ollama"',
            f'url = "{ollama_url}"',
            'model = "qwen2.5-coder:3b"',
        ]
    else:
        sections["local"].append('backend = "embedded"')
    sections["completion"].append(f'context = "{args.context}"')
    for kv in args.set:
        key, _, value = kv.partition("=")
        sec, _, name = key.partition(".")
        sections.setdefault(sec, []).append(f"{name} = {value}")
    body = "".join(f"[{s}]\n" + "\n".join(v) + "\n" for s, v in sections.items() if v)
    path = folder / "config.toml"
    path.write_text(body)
    return path


async def status(rpc: Rpc) -> dict[str, Any]:
    msg = await rpc.call(
        "workspace/executeCommand", {"command": "synconfroute.status", "arguments": []}
    )
    result = msg.get("result")
    return result if isinstance(result, dict) else {}


async def wait_ready(rpc: Rpc, embedded: bool) -> None:
    """Until the embedded worker runs (the model loads in the background at start)."""
    if not embedded:
        return
    for _ in range(240):
        worker = (await status(rpc)).get("local_worker")
        if worker and worker.get("pid"):
            await asyncio.sleep(3.0)  # its calibration (newer servers) ends meanwhile
            return
        await asyncio.sleep(0.5)


# -- the three benchmarks -------------------------------------------------------------


async def replay(args: argparse.Namespace, rpc: Rpc, workdir: Path, fake: Any) -> None:
    files = real_files(args.tarball, args.files)
    ttg: list[float] = []
    answered: list[float] = []  # time to any answer (the fake's text is not the file's)
    pauses = hits = 0
    empty = late = 0
    before = (await status(rpc)).get("local_worker") or {}
    routes0 = len(rpc.routes)
    for fi, (name, text) in enumerate(files):
        first, last = code_region(text, args.lines, 0.3 + 0.4 * fi / max(1, len(files)))
        rows = text.split("\n")
        typed = "\n".join(rows[first:last]) + "\n"
        doc = "\n".join(rows[:first]) + "\n" + "\n".join(rows[last:])
        path = workdir / "src" / Path(name).name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)  # on disk as it was: the workspace index reads it
        uri = path.as_uri()
        version = 1
        rpc.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": doc}},
        )
        line, col = first, 0
        inflight: tuple[int, asyncio.Future[dict[str, Any]], float] | None = None
        i = 0
        while i < len(typed):
            c = typed[i]
            if c == "\n":
                j = i + 1
                while j < len(typed) and typed[j] == " ":
                    j += 1
                key = typed[i:j]  # the newline and the indentation editors add with it
                at_line_end = col > 0 and bool(rows[line].strip())
                if at_line_end and inflight is not None:
                    pauses += 1
                    rid, fut, sent = inflight
                    try:
                        msg = await asyncio.wait_for(
                            asyncio.shield(fut),
                            max(0.0, args.pause_ms / 1000 - (time.monotonic() - sent)),
                        )
                        answered.append((time.monotonic() - sent) * 1000)
                        if shown(msg):
                            hits += 1
                            ttg.append((time.monotonic() - sent) * 1000)
                        else:
                            empty += 1
                    except TimeoutError:
                        late += 1
                    rest = args.pause_ms / 1000 - (time.monotonic() - sent)
                    if rest > 0:
                        await asyncio.sleep(rest)
            else:
                j, key = i + 1, c
            if inflight is not None and not inflight[1].done():
                rpc.cancel(inflight[0])
            version += 1
            rpc.notify(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [
                        {
                            "range": {
                                "start": {"line": line, "character": col},
                                "end": {"line": line, "character": col},
                            },
                            "text": key,
                        }
                    ],
                },
            )
            if "\n" in key:
                line, col = line + 1, utf16_len(key.split("\n")[-1])
            else:
                col += utf16_len(key)
            rid, fut = rpc.request(
                "textDocument/inlineCompletion",
                {
                    "textDocument": {"uri": uri},
                    "position": {"line": line, "character": col},
                    "context": {"triggerKind": 2},
                },
            )
            inflight = (rid, fut, time.monotonic())
            await asyncio.sleep(args.key_ms / 1000)
            i = j
        if inflight is not None and not inflight[1].done():
            rpc.cancel(inflight[0])
        rpc.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        print(f"  {name}: lines {first + 1}-{last}, {pauses} pauses so far", flush=True)
    after = (await status(rpc)).get("local_worker") or {}
    reuse = "n/a"
    if fake is not None and fake.prompt_chars_total:
        reuse = f"{fake.cached_chars_total / fake.prompt_chars_total:.0%}"
    elif "prompt_tokens" in after:
        d_prompt = after["prompt_tokens"] - before.get("prompt_tokens", 0)
        d_cached = after["cached_tokens"] - before.get("cached_tokens", 0)
        reuse = f"{d_cached / d_prompt:.0%}" if d_prompt else "n/a"
    print(
        f"replay [{args.label}] tier={args.tier} context={args.context} "
        f"key={args.key_ms:g}ms pause={args.pause_ms:g}ms files={len(files)}"
    )
    print(
        f"  time to ghost text at line-end pauses: p50 {pct(ttg, 0.5):.0f} ms, "
        f"p95 {pct(ttg, 0.95):.0f} ms (over {len(ttg)} pauses with ghost text)"
    )
    print(
        f"  pauses with ghost text: {hits}/{pauses} ({hits / max(1, pauses):.0%}); "
        f"empty answer {empty}, no answer within the pause {late}"
    )
    print(
        f"  time to an answer at pauses: p50 {pct(answered, 0.5):.0f} ms, "
        f"p95 {pct(answered, 0.95):.0f} ms (over {len(answered)})"
    )
    print(f"  prompt tokens reused from the KV cache: {reuse}")
    print(prompt_figures(before, after, fake, rpc.routes[routes0:]))
    if after.get("prompt_tps"):
        print(
            f"  measured rates: prompt {after['prompt_tps']:.0f} tok/s, "
            f"decode {after.get('decode_tps') or 0:.0f} tok/s"
        )


async def first_after_open(args: argparse.Namespace, rpc: Rpc, workdir: Path) -> None:
    files = real_files(args.tarball, args.files)
    took: list[float] = []
    hits = 0
    before = (await status(rpc)).get("local_worker") or {}
    routes0 = len(rpc.routes)
    for name, text in files:
        rows = text.split("\n")
        line = int(len(rows) * 0.4)
        while not rows[line].strip():
            line += 1
        col = utf16_len(rows[line])
        path = workdir / "open" / Path(name).name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        uri = path.as_uri()
        rpc.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
        )
        pos = {"line": line, "character": col}
        if args.cursor == "report":  # our plugins
            rpc.notify("synconfroute/cursor", {"textDocument": {"uri": uri}, "position": pos})
        elif args.cursor == "edit":  # no plugin: Enter at the line's end, the server infers
            indent = len(rows[line]) - len(rows[line].lstrip())
            new = "\n" + " " * indent
            rpc.notify(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": uri, "version": 2},
                    "contentChanges": [{"range": {"start": pos, "end": pos}, "text": new}],
                },
            )
            pos = {"line": line + 1, "character": indent}
        await asyncio.sleep(args.rest_ms / 1000)
        t0 = time.monotonic()
        msg = await rpc.call(
            "textDocument/inlineCompletion",
            {"textDocument": {"uri": uri}, "position": pos, "context": {"triggerKind": 1}},
        )
        took.append((time.monotonic() - t0) * 1000)
        hits += shown(msg)
        card = str((await rpc.route_of(msg)).get("card") or "")
        stages = next((x for x in card.split("\n") if "latency" in x), "").strip("- ")
        print(f"  {name}:{line + 1}: {took[-1]:.0f} ms, shown={shown(msg)}; {stages}", flush=True)
        rpc.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    print(
        f"first completion after open [{args.label}] cursor={args.cursor} "
        f"rest={args.rest_ms:g}ms files={len(files)}"
    )
    print(
        f"  p50 {statistics.median(took):.0f} ms, p95 {pct(took, 0.95):.0f} ms; "
        f"shown {hits}/{len(files)}"
    )
    after = (await status(rpc)).get("local_worker") or {}
    d_prompt = after.get("prompt_tokens", 0) - before.get("prompt_tokens", 0)
    d_cached = after.get("cached_tokens", 0) - before.get("cached_tokens", 0)
    reuse = f"{d_cached / d_prompt:.0%}" if d_prompt else "n/a"
    prefills = after.get("prefills", 0) - before.get("prefills", 0)
    print(f"  prompt tokens reused from the KV cache: {reuse}; prefills: {prefills}")
    print(prompt_figures(before, after, None, rpc.routes[routes0:]))


def complete_cold(args: argparse.Namespace, workdir: Path) -> None:
    files = real_files(args.tarball, 1)
    name, text = files[0]
    path = workdir / Path(name).name
    path.write_text(text)
    rows = text.split("\n")
    cfg = write_config(workdir, args, None)
    env = dict(os.environ, SYNCONFROUTE_CONFIG=str(cfg), PYTHONPATH=str(args.root))
    env["XDG_STATE_HOME"] = str(workdir / "state")
    firsts: list[float] = []
    totals: list[float] = []
    hits = 0
    for k in range(args.positions):
        line = int(len(rows) * (0.1 + 0.8 * k / max(1, args.positions - 1)))
        while not rows[line].strip():
            line += 1
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "synconfroute",
                "complete",
                "--json",
                f"{path}:{line + 1}:{len(rows[line]) + 1}",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=str(args.root),
            timeout=300,
        )
        try:
            rec = json.loads(out.stdout)
        except ValueError:
            print(f"  line {line + 1}: no JSON ({out.stderr.strip()[-200:]})")
            continue
        lat = rec.get("latency_ms", {})
        first = lat.get("local_first_token")
        if first is not None:
            firsts.append(first)
        totals.append(lat.get("total", float("nan")))
        ok = bool((rec.get("completion") or "").strip())
        hits += ok
        print(
            f"  line {line + 1}: first token {first if first is None else round(first)} ms, "
            f"total {totals[-1]:.0f} ms, shown={ok}",
            flush=True,
        )
    print(f"complete, cold [{args.label}] {name} ({len(rows)} lines), {args.positions} positions")
    print(
        f"  first token p50 {pct(firsts, 0.5):.0f} ms (of {len(firsts)} with a token); "
        f"total p50 {pct(totals, 0.5):.0f} ms; shown {hits}/{args.positions}"
    )


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["replay", "open", "complete"])
    ap.add_argument("--tier", choices=["embedded", "ollama-fake"], default="embedded")
    ap.add_argument("--context", choices=["file", "workspace"], default="file")
    ap.add_argument("--files", type=int, default=3)
    ap.add_argument("--lines", type=int, default=12)
    ap.add_argument("--key-ms", type=float, default=90)
    ap.add_argument("--pause-ms", type=float, default=1500)
    ap.add_argument("--rest-ms", type=float, default=1000)
    ap.add_argument(
        "--cursor",
        choices=["report", "edit", "none"],
        default="report",
        help="open: the editor reports the cursor (our plugins), or types Enter there "
        "(an editor without a plugin: the server infers the rest), or neither",
    )
    ap.add_argument("--positions", type=int, default=10)
    ap.add_argument("--tarball", type=Path, default=CLICK)
    ap.add_argument("--root", type=Path, default=ROOT, help="server source tree")
    ap.add_argument("--set", action="append", default=[], help="SECTION.KEY=TOML_VALUE")
    ap.add_argument("--label", default="", help="a name for this run in the output")
    ap.add_argument("--ollama-speed", default="320,72", help="the fake's prompt,decode tokens/s")
    args = ap.parse_args()
    args.label = args.label or str(args.root)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if args.mode == "complete":
            complete_cold(args, workdir)
            return
        fake = None
        if args.tier == "ollama-fake":
            from tests.fakes import FakeOllama, TokenScript

            # A plausible single line for every request; the timings are the point.
            fake = FakeOllama(default=TokenScript.of(" value", " =", " 1", "\n", logprob=-0.05))
            fake.speed = tuple(float(x) for x in args.ollama_speed.split(","))  # type: ignore[assignment]
            fake.start()
        rpc = Rpc()
        await rpc.start(args.root, write_config(workdir, args, fake.url if fake else None), workdir)
        try:
            await wait_ready(rpc, args.tier == "embedded")
            if args.mode == "replay":
                await replay(args, rpc, workdir, fake)
            else:
                await first_after_open(args, rpc, workdir)
        finally:
            await rpc.stop()
            if fake is not None:
                fake.stop()


if __name__ == "__main__":
    asyncio.run(main())
