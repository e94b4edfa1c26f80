"""The server's work between a completion's handler and its local backend request, timed
in process, cold, and the requests it sends, digested: for comparing two checkouts.

    .venv/bin/python -m bench.request_context [--case tiny|real|both] [--rounds 60]
        [--gap-ms 50] [--source click-src.tar.gz]

A real `Session` with a real `Pipeline` (bench.request_work's, the local backend an
Ollama client answering from memory) completes after the server idled `--gap-ms` (its
caches cold, as behind a real backend). Printed: the median µs of
`ContextBuilder.build`, of its `_crossfile`, of `sequence.plan` and of
`FolderSettings.settings_for`, each wrapped with `perf_counter_ns`; and a digest of every
request body sent to the local tier and every decision's context notes (the same digest
from two checkouts: the same prompts and notes).

- tiny: bench.request_work's shape, a new two-line document per round (so ~60 open);
- real: a source tree (`--source`, a .tar.gz or a folder; default click's, from
  /work/shared/data/repos) as the workspace folder, whose configuration has come, the
  10 largest Python files of its package open, a line typed one key at a time in the
  largest, a completion after each key (context from the workspace index, other open
  files' snippets, a recent edit in another file).

The run re-executes itself with PYTHONHASHSEED=0: the ranking breaks ties in set order.
Timings are this machine's at this moment (say how loaded it was); the digest is not.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

from bench import request_work
from synconfroute.clients.types import Chunk, CompletionRequest
from synconfroute.server.routing import sequence
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.session import context_builder, folders
from synconfroute.server.session.session import Session
from synconfroute.server.settings import config
from synconfroute.server.workspace.documents import Edit

DEFAULT_SOURCE = Path("/work/shared/data/repos/click-src.tar.gz")
FIELDS = (
    *("context_files", "repo", "repo_path", "prefix", "suffix", "language", "path"),
    *("max_tokens", "stop", "single_line", "max_predict_s", "affinity"),
)
TYPED = "value = ctx.ensure_object(dict).get(name)"

times: dict[str, list[int]] = collections.defaultdict(list)
sent: list[str] = []


class Recorded(request_work.FromMemory):
    """bench.request_work's backend, each request's fields digested as it is asked."""

    async def stream(self, request: CompletionRequest) -> AsyncGenerator[Chunk, None]:
        fields = {k: getattr(request, k) for k in FIELDS}
        sent.append(hashlib.sha256(json.dumps(fields, default=str).encode()).hexdigest())
        async for chunk in super().stream(request):
            yield chunk


def _timed(owner: Any, name: str, key: str) -> None:
    orig: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(orig)
    def wrapper(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter_ns()
        try:
            return orig(*a, **kw)
        finally:
            times[key].append(time.perf_counter_ns() - t0)

    setattr(owner, name, wrapper)


def _session(roots: list[str]) -> Session:
    settings = config.with_values(config.Settings(), {"editor": {"debounce_ms": 0}})

    def make(s: config.Settings) -> Pipeline:
        local = Recorded("http://127.0.0.1:9", "qwen2.5-coder:3b")
        return Pipeline(s, local, None, make_gate(s.routing))

    loaded = config.Loaded(settings, (), config.default_config_path(), False)
    session = Session(loaded, make_pipeline=make, roots=lambda: roots)
    for uri in roots:  # the editor asked each folder's configuration; it answered
        root = uri.removeprefix("file://")
        session.expect_folder_configuration([root])
        session.apply_folder_configuration(root, {})
    return session


async def tiny(rounds: int, gap: float) -> None:
    session = _session([])
    for i in range(rounds + request_work.WARMUP):
        uri = f"file:///bench/g{i}.py"
        session.open(uri, f"def g{i}(x):\n    return \n", "python", None)
        await asyncio.sleep(gap)
        done = await session.complete(uri, 1, 11, invoked=True)
        if done is None:
            raise RuntimeError("no completion: the bench's session is broken")
        sent.append(repr(done.decision.context_files))
    await session.shutdown()


def _package(source: Path, into: Path) -> Path:
    """The folder holding the most Python source under `source` (extracted if a tarball)."""
    if source.is_file():
        with tarfile.open(source) as tar:
            tar.extractall(into, filter="data")
        source = into
    sizes: collections.Counter[Path] = collections.Counter()
    for f in source.rglob("*.py"):
        sizes[f.parent] += f.stat().st_size
    return sizes.most_common(1)[0][0]


async def real(rounds: int, gap: float, source: Path) -> None:
    # A fixed place: paths are in the requests (and their lengths in the budgets), and
    # the digest must not change with a temporary folder's random name.
    tmp = Path(tempfile.gettempdir()) / "synconfroute-bench-request-context"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        package = _package(source, tmp)
        files = sorted(package.glob("*.py"), key=lambda f: f.stat().st_size)[-10:]
        workspace = package.parent.parent if package.parent.name == "src" else package.parent
        session = _session([workspace.as_uri()])
        for f in files:
            session.open(f.as_uri(), f.read_text(encoding="utf-8"), "python", None)
        main, other = files[-1], files[0]
        lines = main.read_text(encoding="utf-8").split("\n")
        at = next(
            (
                n
                for n in range(len(lines) // 2, len(lines))
                if lines[n].startswith("        return ")
            ),
            len(lines) // 2,
        )
        session.change(other.as_uri(), [Edit("    # touched\n", (1, 0), (1, 0))])
        await session.complete(main.as_uri(), at, 0, invoked=True)  # starts the index
        index = session.context.index
        for _ in range(400):  # its build, in a thread: every file indexed first
            if index is not None and index.build_s is not None:
                break
            await asyncio.sleep(0.05)
        times.clear()
        sent.clear()
        session.change(main.as_uri(), [Edit("        \n", (at, 0), (at, 0))])
        typed = (TYPED * (1 + rounds // len(TYPED)))[:rounds]
        for i, ch in enumerate(typed):
            session.change(main.as_uri(), [Edit(ch, (at, 8 + i), (at, 8 + i))])
            await asyncio.sleep(gap)
            done = await session.complete(main.as_uri(), at, 9 + i, invoked=True)
            if done is None:
                raise RuntimeError("no completion: the bench's session is broken")
            sent.append(repr((done.decision.context_files, done.decision.context_sharing)))
        await session.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(case: str) -> None:
    medians = {k: statistics.median(v[1:]) / 1000 for k, v in times.items() if len(v) > 1}
    shown = "  ".join(f"{k} {v:.1f}" for k, v in sorted(medians.items()))
    digest = hashlib.sha256("".join(sent).encode()).hexdigest()[:16]
    print(f"{case}: median µs  {shown}")
    print(f"{case}: {len(sent)} requests and notes, digest {digest}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--case", choices=("tiny", "real", "both"), default="both")
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--gap-ms", type=float, default=50.0)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    args = ap.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        # As it was run: a module, or this file run as a script (another checkout's
        # package first on PYTHONPATH, to compare it).
        again = ["-m", "bench.request_context"] if __spec__ is not None else [sys.argv[0]]
        return subprocess.run([sys.executable, *again, *sys.argv[1:]], env=env).returncode
    _timed(context_builder.ContextBuilder, "build", "build")
    _timed(context_builder.ContextBuilder, "_crossfile", "_crossfile")
    _timed(sequence, "plan", "plan")
    _timed(folders.FolderSettings, "settings_for", "settings_for")
    gap = args.gap_ms / 1000
    if args.case in ("tiny", "both"):
        asyncio.run(tiny(args.rounds, gap))
        report("tiny")
    if args.case in ("real", "both"):
        if not args.source.exists():
            print(f"real: {args.source} not found (--source a .tar.gz or a folder)")
            return 0
        times.clear()
        sent.clear()
        asyncio.run(real(args.rounds, gap, args.source))
        report("real")
    return 0


if __name__ == "__main__":
    sys.exit(main())
