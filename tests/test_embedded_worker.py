"""The embedded tier's isolation: llama.cpp runs in a worker process that may die.

Real SmolLM2 through llama.cpp; the crashes are real signals sent to the real worker.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from synconfroute.clients.embedded import (
    REBUILD_HINT,
    EmbeddedBackend,
    bundled_model_path,
    death_message,
)
from synconfroute.clients.errors import BackendUnavailable
from synconfroute.clients.types import CompletionRequest

pytestmark = pytest.mark.embedded

if importlib.util.find_spec("llama_cpp") is None or bundled_model_path() is None:
    pytest.skip("extra 'embedded' not installed", allow_module_level=True)

LONG = "numbers = [\n    1,\n    2,\n    3,\n"
ADD = "def add(a, b):\n    return"


def test_the_installed_build_generates_in_a_child_process() -> None:
    """The build itself, outside our code: a crash here is reported, not fatal to pytest."""
    script = (
        "import sys, llama_cpp\n"
        "llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=256, verbose=False)\n"
        "out = llm.create_completion('def add(a, b):\\n    return', max_tokens=4)\n"
        "print(repr(out['choices'][0]['text']))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(bundled_model_path())],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if run.returncode != 0:
        message, fix = death_message(run.returncode)
        pytest.fail(f"{message}; fix: {fix}\n{run.stderr[-2000:]}")
    assert run.stdout.strip().startswith("'")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: the reader thread reaps it.
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


async def test_sigsegv_mid_generation_is_an_error_and_the_next_request_works() -> None:
    b = EmbeddedBackend()
    try:
        first = await b.complete(CompletionRequest(prefix=ADD, max_tokens=4))
        pid = b.worker_pid
        assert pid is not None and pid != os.getpid()
        stream = b.stream(CompletionRequest(prefix=LONG, max_tokens=400))
        await anext(stream)  # generating now
        os.kill(pid, signal.SIGSEGV)
        with pytest.raises(BackendUnavailable) as caught:
            async for _ in stream:
                pass
        assert "SIGSEGV" in caught.value.message
        assert "does not run on this CPU" in caught.value.message
        assert caught.value.hint == REBUILD_HINT
        gen = b.last_generation
        assert gen is not None and gen.finished.is_set() and gen.finish_reason == "error"
        # The first restart is immediate, with the model loaded once more.
        again = await b.complete(CompletionRequest(prefix=ADD, max_tokens=4))
        assert again.text == first.text and again.tokens
        assert b.worker_pid not in (None, pid) and b.restarts == 1
        assert not _alive(pid)
    finally:
        await b.aclose()


async def test_repeated_deaths_back_off_and_say_so() -> None:
    b = EmbeddedBackend()
    try:
        await b.load()
        for death in range(2):  # two deaths in a row: the second restart waits 1 s
            pid = b.worker_pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            for _ in range(100):
                if b.worker_pid is None:
                    break
                await asyncio.sleep(0.05)
            if death == 0:
                await b.load()  # the first restart is immediate
        with pytest.raises(BackendUnavailable) as caught:
            await b.complete(CompletionRequest(prefix=ADD, max_tokens=4))
        assert "SIGKILL" in caught.value.message and "out-of-memory" in caught.value.message
        assert "next restart" in caught.value.message
        await asyncio.sleep(1.1)
        done = await b.complete(CompletionRequest(prefix=ADD, max_tokens=4))
        assert done.tokens
    finally:
        await b.aclose()


async def test_closing_the_backend_ends_the_worker() -> None:
    b = EmbeddedBackend()
    await b.load()
    pid = b.worker_pid
    assert pid is not None and _alive(pid)
    await b.aclose()
    # close() waits for the worker to exit (and kills it if it hangs).
    assert not _alive(pid)
    assert b.worker_pid is None and not b.loaded


def test_death_messages_name_the_signal_and_the_fix() -> None:
    msg, fix = death_message(-signal.SIGILL)
    assert "SIGILL" in msg and "does not run on this CPU" in msg and "--rebuild-llama" in fix
    msg, fix = death_message(-signal.SIGABRT)
    assert "SIGABRT" in msg
    msg, fix = death_message(3)
    assert "status 3" in msg


def test_check_build_command_passes_on_this_build() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "synconfroute", "check-build"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    assert "llama.cpp build ok" in run.stdout


def _broken_build(folder: Path) -> dict[str, str]:
    """An environment whose llama_cpp dies by SIGSEGV, as a build for another CPU does."""
    pkg = folder / "llama_cpp"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import os, signal\n"
        "__version__ = '0.3.36'\n"
        "class Llama:\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        os.kill(os.getpid(), signal.SIGSEGV)\n"
    )
    root = Path(__file__).resolve().parent.parent
    return {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{root}"}


@pytest.mark.parametrize("command", [["doctor"], ["check-build"]])
def test_a_build_that_crashes_is_reported_with_the_fix(tmp_path: Path, command: list[str]) -> None:
    env = _broken_build(tmp_path)
    env["SYNCONFROUTE_CONFIG"] = str(tmp_path / "none.toml")
    env["SYNCONFROUTE_LOCAL_BACKEND"] = "embedded"
    run = subprocess.run(
        [sys.executable, "-m", "synconfroute", *command],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "SIGSEGV" in out and "does not run on this CPU" in out, out
    assert "--rebuild-llama" in out, out
    assert "Traceback" not in out, out


@pytest.mark.timeout(180)
async def test_the_server_survives_a_worker_crash_mid_request(tmp_path: Path) -> None:
    """Real server over stdio, embedded local tier, fake remote: a SIGSEGV in the
    worker during a request costs that request its local answer, not the server."""
    from lsprotocol import types as t

    from tests.fakes import FakeOpenAI, TokenScript
    from tests.lsp_harness import capabilities, inline_request, open_doc, start, stop, write_config

    with FakeOpenAI() as remote:
        remote.script(TokenScript.of(" a", " + ", "b", logprob=-0.01), always=True)
        cfg = write_config(
            tmp_path,
            local_backend="embedded",
            remote_url=remote.base_url,
            # A long local generation that is never escalated early, so the kill lands
            # in its middle.
            extra=(
                "[completion]\nmax_tokens = 256\nmultiline = true\ndeadline_ms = 30000\n"
                "[routing]\nthreshold = -100\n"
            ),
        )
        # The documents live in the workspace folder: outside it nothing escalates.
        client, _ = await start(
            cfg,
            capabilities("visual-studio-code", inline=True),
            root=tmp_path,
            # No time cap on the prediction (local.max_predict_ms): on a fast machine a
            # capped generation ends before the kill lands in its middle.
            env={"SYNCONFROUTE_LOCAL_MAX_PREDICT_MS": "0"},
        )
        try:
            # Files that exist: the egress gate sends no other (privacy by allow-list).
            (tmp_path / "numbers.py").write_text(LONG + "\n")
            uri = (tmp_path / "numbers.py").as_uri()
            open_doc(client, uri, LONG + "\n")
            cursor = t.Position(4, 0)
            warm = await client.text_document_inline_completion_async(inline_request(uri, cursor))
            assert warm is not None
            status = await client.workspace_execute_command_async(
                t.ExecuteCommandParams("synconfroute.status", [])
            )
            server_pid, worker = status["pid"], status["local_worker"]
            assert worker and worker["pid"] != server_pid and worker["rss_mb"] > 10

            (tmp_path / "values.py").write_text("values = [\n    10,\n    20,\n    30,\n\n")
            other = (tmp_path / "values.py").as_uri()  # not a cache hit
            open_doc(client, other, "values = [\n    10,\n    20,\n    30,\n\n")
            pending = asyncio.ensure_future(
                client.text_document_inline_completion_async(inline_request(other, cursor))
            )
            await asyncio.sleep(0.4)  # warm KV cache: the worker is decoding by now
            assert not pending.done(), "the local generation ended before the kill"
            os.kill(worker["pid"], signal.SIGSEGV)
            crashed = await asyncio.wait_for(pending, 60)
            assert isinstance(crashed, t.InlineCompletionList) and crashed.items
            assert crashed.items[0].insert_text.startswith(" a + b")  # the remote's answer
            hover = await client.text_document_hover_async(
                t.HoverParams(t.TextDocumentIdentifier(other), cursor)
            )
            card = hover.contents.value if hover else ""  # type: ignore[union-attr]
            assert "SIGSEGV" in card, card

            (tmp_path / "add.py").write_text("def add(a, b):\n    return\n")
            third = (tmp_path / "add.py").as_uri()
            open_doc(client, third, "def add(a, b):\n    return\n")
            after = await client.text_document_inline_completion_async(
                inline_request(third, t.Position(1, 10))
            )
            assert isinstance(after, t.InlineCompletionList) and after.items
            hover = await client.text_document_hover_async(
                t.HoverParams(t.TextDocumentIdentifier(third), t.Position(1, 4))
            )
            card = hover.contents.value if hover else ""  # type: ignore[union-attr]
            assert "**synconfroute**: local" in card, card
            status = await client.workspace_execute_command_async(
                t.ExecuteCommandParams("synconfroute.status", [])
            )
            assert status["pid"] == server_pid
            assert status["local_worker"]["pid"] not in (None, worker["pid"])
            assert status["local_worker"]["restarts"] == 1
        finally:
            await stop(client)


async def test_a_worker_that_ignores_a_cancel_is_killed_and_replaced() -> None:
    b = EmbeddedBackend(stop_timeout_s=1.0)
    try:
        await b.load()
        pid = b.worker_pid
        assert pid is not None
        stream = b.stream(CompletionRequest(prefix=LONG, max_tokens=400))
        await anext(stream)
        os.kill(pid, signal.SIGSTOP)  # a hung decode: it can read no cancel
        await stream.aclose()
        gen = b.last_generation
        assert gen is not None
        assert await asyncio.to_thread(gen.finished.wait, 10), "the stuck worker was not killed"
        assert gen.finish_reason == "error"
        assert not _alive(pid)
        done = await b.complete(CompletionRequest(prefix=ADD, max_tokens=4))
        assert done.tokens and b.worker_pid not in (None, pid)
    finally:
        await b.aclose()
