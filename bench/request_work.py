"""The work one completion costs the server, counted rather than timed: figures that do
not move with the machine's load, for comparing two checkouts on a noisy machine.

    .venv/bin/python -m bench.request_work [--rounds 40] [--instructions]

In process, a real `Session` with a real `Pipeline` completes in a new two-line document
per round (bench.lsp's shape); the local backend is an Ollama client whose stream answers
from memory after 20 ms (so the gate's head start and the timers run as they do with a
real backend). Printed per completion:

- the Python functions called and the C functions they call (`sys.setprofile`), and the
  files the Python calls are in, most first: those the user waits for (before the
  backend's stream and after its answer), and apart, the calls made while the backend
  generates (the gate's head start: hidden by the wait);
- with --instructions, the CPU instructions (valgrind's callgrind, which must be
  installed: Debian's `valgrind`): the run is repeated under it with 5 and 35 rounds and
  the difference divided by 30, after subtracting the same runs without completions
  (the document opens). Garbage collection is off and hash seeds fixed in those runs, so
  the figure repeats to within ~0.1 %.

A figures-only script: it asserts nothing. Run it in two checkouts to compare them.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextvars
import gc
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from types import FrameType
from typing import Any

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.types import Chunk, CompletionRequest, TokenLogprob
from synconfroute.server.learning import later
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.session.session import Session
from synconfroute.server.settings import config

WARMUP = 10


_waiting = [False]  # in the backend's 20 ms: work done then is hidden from the user


class FromMemory(OllamaBackend):
    """Ollama's client with the answer streamed from memory after 20 ms."""

    async def stream(self, request: CompletionRequest) -> AsyncGenerator[Chunk, None]:
        _waiting[0] = True
        try:
            await asyncio.sleep(0.02)
        finally:
            _waiting[0] = False
        for tok in (" x", " +", " 1"):
            yield Chunk(text=tok, tokens=(TokenLogprob(text=tok, logprob=-0.01),))
        yield Chunk(text="", finish_reason="stop")


def _session() -> Session:
    settings = config.with_values(config.Settings(), {"editor": {"debounce_ms": 0}})

    def make(s: config.Settings) -> Pipeline:
        local = FromMemory("http://127.0.0.1:9", "qwen2.5-coder:3b")
        return Pipeline(s, local, None, make_gate(s.routing))

    loaded = config.Loaded(settings, (), config.default_config_path(), False)
    return Session(loaded, make_pipeline=make)


async def rounds(n: int, *, complete: bool = True, profile: Any = None) -> None:
    """`n` rounds after the warm-up: open a document, complete in it (`profile`, if
    given, is set around each completion after the warm-up)."""
    session = _session()
    for i in range(n + WARMUP):
        uri = f"file:///bench/g{i}.py"
        session.open(uri, f"def g{i}(x):\n    return \n", "python", None)
        await asyncio.sleep(0.03)
        if not complete:
            continue
        # As the language server runs a request: in its own context with a `Later`, the
        # work left for after the response, run once the response would be written.
        context = contextvars.copy_context()
        after = context.run(later.for_request)
        if profile is not None and i >= WARMUP:
            sys.setprofile(profile)
        done = await asyncio.get_running_loop().create_task(
            session.complete(uri, 1, 11, invoked=True), context=context
        )
        sys.setprofile(None)
        after.run()
        if done is None:
            raise RuntimeError("no completion: the bench's session is broken")
    await session.shutdown()


def calls(n: int) -> None:
    py: collections.Counter[str] = collections.Counter()
    c_calls = hidden = 0
    root = str(Path(__file__).resolve().parent.parent) + "/"

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal c_calls, hidden
        if event == "call" and _waiting[0]:
            hidden += 1
        elif event == "call":
            name = frame.f_code.co_filename
            name = name.split("site-packages/")[-1].replace(root, "")
            py[re.sub(r".*/lib/python3\.\d+/", "", name)] += 1
        elif event == "c_call" and not _waiting[0]:
            c_calls += 1

    asyncio.run(rounds(n, profile=profile))
    total = sum(py.values())
    print(f"per completion ({n} rounds, a new two-line document each):")
    print(f"  {total / n:.0f} Python calls the user waits for, {c_calls / n:.0f} C calls")
    print(f"  {hidden / n:.0f} Python calls while the backend generates (hidden by its wait)")
    for name, k in py.most_common(15):
        print(f"  {k / n:7.1f}  {name}")


def instructions() -> None:
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (Debian: apt-get install valgrind)")
        return
    env = {**os.environ, "PYTHONHASHSEED": "0"}

    valgrind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable]

    def run(n: int, what: str) -> int:
        out = subprocess.run(
            [*valgrind, "-m", "bench.request_work", "--under-valgrind", what, str(n)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        found = re.search(r"Collected : (\d+)", out.stderr)
        if found is None:
            raise RuntimeError(f"no instruction count from valgrind:\n{out.stderr[-2000:]}")
        return int(found.group(1))

    full = run(35, "complete") - run(5, "complete")
    opens = run(35, "open") - run(5, "open")
    print("CPU instructions (callgrind), garbage collector off, hash seed 0:")
    print(f"  per completion {(full - opens) / 30:,.0f}  (a document opened: {opens / 30:,.0f})")


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--under-valgrind":
        gc.disable()
        asyncio.run(rounds(int(sys.argv[3]), complete=sys.argv[2] == "complete"))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--instructions", action="store_true", help="also count CPU instructions")
    args = ap.parse_args()
    calls(args.rounds)
    if args.instructions:
        instructions()
    return 0


if __name__ == "__main__":
    sys.exit(main())
