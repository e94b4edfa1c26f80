"""Special files in the workspace (issue 36 items 1 and 2): a FIFO named `pipe.py`, a
character device named `zero.py` (`mknod c 1 5`, /dev/zero's numbers; a link to
/dev/zero where we are not root), a socket. Every read of a workspace file goes through
`files.read_regular`: such files are skipped unread and counted, the index build goes on
past them, `status` shows them, and `exit` ends the server.

The checks that could hang on a broken server wait in a daemon thread or on a process,
with a generous deadline, and say what they saw."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from synconfroute.server.workspace import files
from synconfroute.server.workspace.workspace_index import WorkspaceIndex
from tests.lsp_harness import ROOT
from tests.test_transport import RawServer, frame, request

pytestmark = pytest.mark.timeout(180)

DEADLINE_S = 60.0  # for anything that ends at once on a fixed server


def make_device(path: Path) -> None:
    """A character device with /dev/zero's numbers (root), else a link to /dev/zero."""
    if os.geteuid() == 0:
        os.mknod(path, 0o644 | 0o020000, os.makedev(1, 5))  # S_IFCHR
    else:
        path.symlink_to("/dev/zero")


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sock.py"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        yield path


def workspace(folder: Path, n: int) -> list[Path]:
    """`n` small Python files around a FIFO `pipe.py` and a device `zero.py` (os.walk
    order is sorted: half the files come after them)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        sub = folder / f"pkg{i % 10}"
        sub.mkdir(exist_ok=True)
        p = sub / (f"a{i:04d}.py" if i % 2 else f"z{i:04d}.py")
        p.write_text(f"def func_{i}(x):\n    return x + {i}\n\nCONST_{i} = {i}\n")
        out.append(p)
    os.mkfifo(folder / "pipe.py")
    os.mkfifo(folder / "pkg0" / "pipe.py")
    make_device(folder / "zero.py")
    return out


def in_thread(work: Any, deadline: float = DEADLINE_S) -> Any:
    """`work()` in a daemon thread; AssertionError if it has not returned by `deadline`
    (a read blocked on a FIFO never returns: the thread is left behind)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:
            box["error"] = exc

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(deadline)
    assert not th.is_alive(), f"still running after {deadline} s (blocked in a read?)"
    if "error" in box:
        raise box["error"]
    return box.get("value")


# -- the one reader ------------------------------------------------------------------


def test_read_regular_refuses_every_special_file_without_blocking(
    tmp_path: Path, unix_socket: Path
) -> None:
    fifo = tmp_path / "f.py"
    os.mkfifo(fifo)
    dev = tmp_path / "zero.py"
    make_device(dev)
    kinds = {}
    for path in (fifo, dev, unix_socket, tmp_path):
        with pytest.raises(files.NotRegular) as caught:
            in_thread(lambda p=path: files.read_regular(str(p), 1 << 20), deadline=30)
        kinds[path.name] = caught.value.kind
    assert kinds == {
        "f.py": "FIFO",
        "zero.py": "character device",
        "sock.py": "socket",
        tmp_path.name: "folder",
    }
    ok = tmp_path / "ok.py"
    ok.write_bytes(b"x = 1\n" * 100)
    assert files.read_regular(str(ok), 600) == b"x = 1\n" * 100
    with pytest.raises(files.TooLarge):
        files.read_regular(str(ok), 599)
    with pytest.raises(FileNotFoundError):
        files.read_regular(str(tmp_path / "gone.py"), 10)
    for bad in ("a\x00b.py", "\ud800.py"):  # no file can have these names: not a crash
        with pytest.raises(OSError):
            files.read_regular(str(tmp_path / bad), 10)


def test_a_character_device_is_not_read_until_memory_runs_out(tmp_path: Path) -> None:
    """Under a 1 GB address-space limit, as the issue saw it under 3 GB: the device is
    skipped and counted; before, `read()` ran until MemoryError."""
    dev = tmp_path / "zero.py"
    make_device(dev)
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from synconfroute.server.workspace.workspace_index import WorkspaceIndex\n"
        "ix = WorkspaceIndex()\n"
        f"print(ix.update_from_disk({str(dev)!r}), ix.figures()['special'])\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0 and run.stdout.split() == ["False", "1"], run
    assert "Traceback" not in run.stderr, run.stderr


# -- the index -------------------------------------------------------------------------


def test_the_index_build_goes_past_special_files_and_counts_them(
    tmp_path: Path, unix_socket: Path
) -> None:
    ws = unix_socket.parent
    regular = workspace(ws, 200)
    (ws / ".gitignore").write_text("ignored/\n")
    index = WorkspaceIndex()
    in_thread(lambda: index.build([str(ws)]))
    figures = index.figures()
    indexed = set(index.files)
    missing = [str(p) for p in regular if str(p) not in indexed]
    assert not missing, (len(missing), missing[:5], figures)
    assert index.ready and figures["files"] == 200, figures
    # Two FIFOs, the device and the socket: seen, skipped unread, counted.
    assert figures["special"] == 4, (figures, sorted(index.special))
    assert index.lookup("func_199") and index.lookup("CONST_0")


def test_a_fifo_gitignore_neither_blocks_the_index_nor_lets_the_egress_check_hang(
    tmp_path: Path,
) -> None:
    from synconfroute.server.workspace import egress

    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "a.py").write_text("def a():\n    return 1\n")
    os.mkfifo(ws / "sub" / ".gitignore")
    index = WorkspaceIndex()
    in_thread(lambda: index.build([str(ws)]))
    assert str(ws / "sub" / "a.py") in index.files
    # Its rules are unknown: what lies below it counts as ignored (private), at once.
    real = str(ws / "sub" / "a.py")
    assert in_thread(lambda: egress.gitignored(real, str(ws)), deadline=30) is True


def test_watched_file_events_naming_special_files_are_skipped(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    workspace(ws, 4)
    index = WorkspaceIndex()
    in_thread(lambda: index.build([str(ws)]))
    assert index.figures()["special"] == 3
    late = ws / "late.py"
    os.mkfifo(late)
    assert in_thread(lambda: index.update_from_disk(str(late))) is False
    assert str(late) in index.special
    late.unlink()  # a regular file takes its place: read, and no longer counted
    late.write_text("def late():\n    return 2\n")
    assert index.update_from_disk(str(late)) is True
    assert str(late) not in index.special and index.lookup("late")
    index.remove(str(ws / "pipe.py"))  # deleted: forgotten
    assert index.figures()["special"] == 2


# -- the real server -------------------------------------------------------------------


class Server(RawServer):
    """RawServer whose initialize names a workspace folder."""

    def start(self, ws: Path) -> None:
        root = ws.as_uri()
        params: dict[str, Any] = {
            "processId": None,
            "rootUri": root,
            "workspaceFolders": [{"uri": root, "name": ws.name}],
            "capabilities": {"workspace": {"didChangeWatchedFiles": {}}},
        }
        assert "result" in self.call(request(1, "initialize", params))
        self.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))

    def status(self, msg_id: int) -> dict[str, Any]:
        params = {"command": "synconfroute.status", "arguments": []}
        answer = self.call(request(msg_id, "workspace/executeCommand", params))
        assert "result" in answer, answer
        return dict(answer["result"])

    def wait_status(self, done: Any, first_id: int) -> dict[str, Any]:
        """Poll `status` until `done(its workspace figures)`; the last figures."""
        end = time.monotonic() + DEADLINE_S
        n = first_id
        figures: dict[str, Any] = {}
        while time.monotonic() < end:
            figures = self.status(n).get("workspace") or {}
            if done(figures):
                return figures
            n += 1
            time.sleep(0.2)
        raise AssertionError(f"status never showed it; last {figures}\n{self.stderr()}")

    def shutdown_and_exit(self) -> float:
        """Seconds from `exit` to the process's end (AssertionError past the deadline)."""
        assert self.call(request(9000, "shutdown")).get("result", "missing") is None
        t0 = time.perf_counter()
        self.send(frame({"jsonrpc": "2.0", "method": "exit"}))
        assert self.wait_exit(DEADLINE_S) == 0, self.stderr()
        return time.perf_counter() - t0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path)
    try:
        yield srv
    finally:
        srv.close()


def test_the_server_indexes_past_a_fifo_and_a_device_shows_them_and_exits(
    tmp_path: Path, server: Server
) -> None:
    ws = tmp_path / "ws"
    workspace(ws, 60)
    server.start(ws)
    figures = server.wait_status(lambda f: f.get("ready"), 100)
    assert figures["files"] == 60 and figures["special"] == 3, figures
    # A watched-file event naming a FIFO (and the device): skipped, counted, not read.
    late = ws / "late_pipe.py"
    os.mkfifo(late)
    changes = [{"uri": late.as_uri(), "type": 1}, {"uri": (ws / "zero.py").as_uri(), "type": 2}]
    server.send(frame({"jsonrpc": "2.0", "method": "workspace/didChangeWatchedFiles",
                       "params": {"changes": changes}}))  # fmt: skip
    figures = server.wait_status(lambda f: f.get("special") == 4, 300)
    assert figures["files"] == 60, figures
    server.assert_answers(first_id=600)
    took = server.shutdown_and_exit()
    print(f"exit took {took:.3f} s")


def test_exit_ends_the_server_after_a_watched_fifo_event(tmp_path: Path, server: Server) -> None:
    """The issue's third case: an index with no special file, then one event naming a
    FIFO; before, the thread reading it blocked in open() and `exit` waited for it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("def a():\n    return 1\n")
    server.start(ws)
    server.assert_answers(first_id=100)
    fifo = ws / "b.py"
    os.mkfifo(fifo)
    event = {"changes": [{"uri": fifo.as_uri(), "type": 2}]}
    server.send(
        frame({"jsonrpc": "2.0", "method": "workspace/didChangeWatchedFiles", "params": event})
    )
    time.sleep(1.0)  # the event reaches its worker thread (which read the FIFO, before)
    server.assert_answers(first_id=200)
    server.shutdown_and_exit()


def test_the_complete_command_refuses_a_fifo_and_a_device(tmp_path: Path) -> None:
    """`synconfroute complete PATH:LINE:COL` reads through the same helper: a clear error,
    at once, where it blocked on the FIFO (and read the device until memory ran out)."""
    fifo, dev = tmp_path / "p.py", tmp_path / "zero.py"
    os.mkfifo(fifo)
    make_device(dev)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SYNCONFROUTE_CONFIG": str(tmp_path / "none")}
    for path, kind in ((fifo, "FIFO"), (dev, "character device")):
        run = subprocess.run(
            [sys.executable, "-m", "synconfroute", "complete", f"{path}:1:1"],
            capture_output=True,
            text=True,
            timeout=DEADLINE_S,
            env=env,
        )
        assert run.returncode != 0 and kind in run.stderr, run
        assert "Traceback" not in run.stderr, run.stderr


@pytest.mark.timeout(120)
async def test_a_file_name_that_is_not_utf8_reaches_no_prompt(tmp_path: Path) -> None:
    """os.walk gives a Latin-1 name as surrogate escapes; the index used to keep it, and
    the prompt naming its path failed to encode (-32603 UnicodeEncodeError). Such a file
    is skipped: no LSP URI or prompt can name it as text."""
    from lsprotocol import types as t

    from tests.fakes import FakeOllama, TokenScript
    from tests.lsp_harness import capabilities, inline_request, open_doc, start, stop, write_config

    ws = tmp_path / "w"
    ws.mkdir()
    fd = os.open(os.fsencode(ws) + b"/caf\xe9.py", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"def make_widget(size):\n    return size\n")
    os.close(fd)
    (ws / "util.py").write_text("def make_gadget(size):\n    return size\n")
    with FakeOllama(default=TokenScript.of("1)", logprob=-0.01)) as local:
        extra = '[completion]\ncontext = "workspace"\n'
        cfg = write_config(tmp_path, local_url=local.url, extra=extra)
        client, _ = await start(cfg, capabilities("visual-studio-code", inline=True), root=ws)
        try:
            uses = f"{ws.as_uri()}/main.py"
            text = "from caf import make_widget\nfrom util import make_gadget\n\nw = make_widget(\n"
            open_doc(client, uses, text)
            end = time.monotonic() + DEADLINE_S
            while time.monotonic() < end:  # until the index (built meanwhile) is used
                got = await client.text_document_inline_completion_async(
                    inline_request(uses, t.Position(3, 16))
                )
                assert isinstance(got, t.InlineCompletionList) and got.items, got
                if "make_gadget" in local.received("/api/generate")[-1].json()["prompt"]:
                    break
                await asyncio.sleep(0.2)
            prompts = [r.json()["prompt"] for r in local.received("/api/generate")]
            assert "make_gadget" in prompts[-1], prompts[-1]
            assert not any("return size" in p and "make_widget(size)" in p for p in prompts)
        finally:
            await stop(client)
