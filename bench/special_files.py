"""Special files in a workspace (issue 36): a FIFO and a character device among 1,000
Python files, served by the real server over stdio against a fake Ollama.

    .venv/bin/python -m bench.special_files [--files 1000] [--runs 1] [--no-baseline]

The workspace holds `--files` small Python files in ten folders, a FIFO `pipe.py` at the
top and one in a folder (nothing ever writes to them), and a character device `zero.py`
with /dev/zero's numbers (`mknod c 1 5`; as root only, else a link to /dev/zero, which
the index build skips as a link out of the workspace but a watched-file event follows).
Then, as an editor does: initialize with the folder, open a file that calls a function
defined in the file sorted last, ask for a completion; poll `synconfroute.status` until
the index build is done; send a watched-file event naming the FIFO and the device;
shutdown, exit.

Printed per run (the same without special files as a baseline, unless --no-baseline):
- first completion: seconds from `initialized` to the first completion answered;
- index: files indexed of the regular files, special files skipped, build seconds, and
  whether the completion prompt held the definition from the last file;
- peak RSS of the server (VmHWM, MB);
- exit: seconds from `exit` to the end of the process (a server that has not ended
  after --exit-wait seconds is killed and reported as such).

Figures, not assertions: tests/test_special_files.py holds the invariants.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

from bench.fault_suite import LspServer, new_key
from tests.fakes import FakeOllama, TokenScript

LAST = "zz_last"  # the folder sorted last: its function is what the completion needs


@attrs.define
class Run:
    label: str
    regular: int = 0
    first_completion_s: float = float("nan")
    completed: bool = False
    indexed: int = 0
    special: int = 0
    build_s: float = float("nan")
    context_found: bool = False
    peak_rss_mb: float = float("nan")
    exit_s: float = float("nan")
    exit_code: int | None = None
    notes: list[str] = attrs.field(factory=list)


def make_workspace(folder: Path, n: int, special: bool) -> tuple[int, list[str]]:
    """`n` regular files (one in LAST), and the special files; (regular count, notes)."""
    notes = []
    for i in range(n - 1):
        sub = folder / f"pkg{i % 10}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"m{i:04d}.py").write_text(
            f'def func_{i}(x):\n    """Add {i}."""\n    return x + {i}\n\nCONST_{i} = {i}\n'
        )
    (folder / LAST).mkdir(parents=True, exist_ok=True)
    (folder / LAST / "last.py").write_text(
        'def last_helper(value, scale):\n    """LAST-MARKER-5e1."""\n    return value * scale\n'
    )
    if special:
        os.mkfifo(folder / "pipe.py")
        os.mkfifo(folder / "pkg3" / "pipe.py")
        if os.geteuid() == 0:
            os.mknod(folder / "zero.py", 0o644 | 0o020000, os.makedev(1, 5))
            notes.append("zero.py: mknod c 1 5")
        else:
            (folder / "zero.py").symlink_to("/dev/zero")
            notes.append("zero.py: a link to /dev/zero (not root: no mknod)")
    return n, notes


def _config(folder: Path, local_url: str) -> Path:
    path = folder / "config.toml"
    path.write_text(
        f'[local]\nbackend = "ollama"\nurl = "{local_url}"\nmodel = "qwen2.5-coder:3b"\n'
        "first_token_target_ms = 0\n"
        '[privacy]\nlocal_only = true\n[completion]\ncontext = "workspace"\n'
        "[editor]\ndebounce_ms = 0\nadaptive_debounce = false\n",
        encoding="utf-8",
    )
    return path


def _peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


async def one_run(label: str, files: int, special: bool, exit_wait: float) -> Run:
    run = Run(label)
    with (
        tempfile.TemporaryDirectory(prefix="synconfroute-special-") as tmp,
        FakeOllama(default=TokenScript.of("1, 2)", logprob=-0.01)) as local,
    ):
        base = Path(tmp)
        ws = base / "ws"
        run.regular, run.notes = make_workspace(ws, files, special)
        server = LspServer(_config(base, local.url), base, new_key(), ws)
        await server.start()  # initialize (answered) and initialized
        t0 = time.perf_counter()
        try:
            main = ws / "main.py"  # on disk too: one more regular file, and open
            text = "from zz_last.last import last_helper\n\nresult = last_helper(\n"
            main.write_text(text)
            run.regular += 1
            doc = {"uri": main.as_uri(), "languageId": "python", "version": 1, "text": text}
            server.notify("textDocument/didOpen", {"textDocument": doc})
            params = {
                "textDocument": {"uri": main.as_uri()},
                "position": {"line": 2, "character": 21},
                "context": {"triggerKind": 1},
            }
            resp = await server.request("textDocument/inlineCompletion", params, 120)
            run.first_completion_s = time.perf_counter() - t0
            items = (resp.get("result") or {}).get("items") or []
            run.completed = bool(items and items[0].get("insertText"))
            figures = await _index_done(server, 180)
            if special:  # events naming them, as an editor's file watcher sends them
                changes = [
                    {"uri": (ws / "pipe.py").as_uri(), "type": 2},
                    {"uri": (ws / "zero.py").as_uri(), "type": 2},
                ]
                server.notify("workspace/didChangeWatchedFiles", {"changes": changes})
                await asyncio.sleep(0.5)
                figures = await _index_done(server, 60)
            run.indexed = int(figures.get("files", 0))
            run.special = int(figures.get("special", 0))
            run.build_s = float(figures.get("build_s", float("nan")))
            # Once the index is complete, the prompt holds the last file's definition.
            params["position"] = {"line": 2, "character": 21}
            await server.request("textDocument/inlineCompletion", params, 120)
            prompts = [r.json().get("prompt", "") for r in local.received("/api/generate")]
            run.context_found = any("LAST-MARKER-5e1" in p for p in prompts)
            run.peak_rss_mb = _peak_rss_mb(server.pid)
            await server.request("shutdown", None, 30)
            t1 = time.perf_counter()
            server.notify("exit", None)
            assert server.proc is not None
            try:
                run.exit_code = await asyncio.wait_for(server.proc.wait(), exit_wait)
                run.exit_s = time.perf_counter() - t1
            except TimeoutError:
                run.notes.append(f"still running {exit_wait} s after exit: killed")
        finally:
            await server.stop()
    return run


async def _index_done(server: LspServer, wait_s: float) -> dict[str, Any]:
    params = {"command": "synconfroute.status", "arguments": []}
    end = time.monotonic() + wait_s
    figures: dict[str, Any] = {}
    while time.monotonic() < end:
        resp = await server.request("workspace/executeCommand", params, 30)
        figures = dict((resp.get("result") or {}).get("workspace") or {})
        if figures.get("ready"):
            return figures
        await asyncio.sleep(0.2)
    return figures


def print_runs(runs: list[Run]) -> None:
    print(
        f"{'workspace':<22} {'1st compl s':>11} {'indexed':>11} {'special':>7} "
        f"{'build s':>7} {'context':>7} {'peak RSS MB':>11} {'exit s':>7} {'code':>4}"
    )
    for r in runs:
        print(
            f"{r.label:<22} {r.first_completion_s:>11.3f} "
            f"{f'{r.indexed}/{r.regular}':>11} {r.special:>7} {r.build_s:>7.2f} "
            f"{'yes' if r.context_found else 'NO':>7} {r.peak_rss_mb:>11.1f} "
            f"{r.exit_s:>7.3f} {r.exit_code if r.exit_code is not None else '-':>4}"
            + (f"  ({'; '.join(r.notes)})" if r.notes else "")
        )


async def main_async(args: argparse.Namespace) -> list[Run]:
    runs = []
    for i in range(args.runs):
        runs.append(await one_run(f"fifo+device #{i + 1}", args.files, True, args.exit_wait))
        if args.baseline:
            runs.append(await one_run(f"baseline #{i + 1}", args.files, False, args.exit_wait))
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--files", type=int, default=1000, help="regular Python files")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--exit-wait", type=float, default=60.0, help="seconds before a kill")
    ap.add_argument("--no-baseline", dest="baseline", action="store_false")
    args = ap.parse_args(argv)
    runs = asyncio.run(main_async(args))
    print_runs(runs)
    special = [r for r in runs if r.label.startswith("fifo")]
    if len(special) > 1:
        med = statistics.median(r.exit_s for r in special)
        print(f"\nmedian exit over {len(special)} runs: {med:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
