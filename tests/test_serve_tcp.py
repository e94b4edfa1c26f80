"""Issue 27 item 8: `serve --tcp` listens beyond loopback only when told what it exposes,
and then only for a client that sends the token (the real server process, raw TCP)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes import closed_port

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(60)


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    (tmp_path / "config.toml").write_text('[remote]\nurl = ""\n', encoding="utf-8")
    full = {**os.environ, "SYNCONFROUTE_CONFIG": str(tmp_path / "config.toml"), **(env or {})}
    full["PYTHONPATH"] = str(ROOT)
    cmd = [sys.executable, "-m", "synconfroute", "serve", "--ledger", str(tmp_path / "l.jsonl")]
    return subprocess.Popen([*cmd, *args], env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def frame(obj: dict[str, object]) -> bytes:
    body = json.dumps(obj).encode()
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def initialize(port: int, options: dict[str, object]) -> bytes:
    """Connect (retrying while the server starts), send initialize, read what comes back."""
    for _ in range(100):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            break
        except OSError:
            time.sleep(0.1)
    else:
        raise AssertionError("the server never listened")
    with sock:
        params = {"processId": None, "rootUri": None, "capabilities": {}}
        params["initializationOptions"] = options
        sock.sendall(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}))
        out = b""
        while b'"id": 1' not in out and b'"id":1' not in out:
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
        return out


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7", "example.org"])
def test_non_loopback_refused_without_the_flag(tmp_path: Path, host: str) -> None:
    address = f"[{host}]:{closed_port()}" if ":" in host else f"{host}:{closed_port()}"
    proc = serve(tmp_path, "--tcp", address)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and b"not a loopback address" in err, err
    proc = serve(tmp_path, "--tcp", address, "--tcp-expose-to-network")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and b"needs --tcp-token-env" in err, err


def test_a_token_guards_the_tcp_server(tmp_path: Path) -> None:
    port = closed_port()
    env = {"MY_TCP_TOKEN": "t0ken-5ecret"}
    proc = serve(tmp_path, "--tcp", f"127.0.0.1:{port}", "--tcp-token-env", "MY_TCP_TOKEN", env=env)
    try:
        answer = initialize(port, {"tcpToken": "wrong", "remote": {"url": "http://evil/v1"}})
        assert b"error" in answer and b"tcpToken" in answer and b"capabilities" not in answer
        assert proc.wait(timeout=20) == 3  # the server ended: nobody else gets it
    finally:
        proc.kill()
    port = closed_port()
    proc = serve(tmp_path, "--tcp", f"127.0.0.1:{port}", "--tcp-token-env", "MY_TCP_TOKEN", env=env)
    try:
        answer = initialize(port, {"tcpToken": "t0ken-5ecret"})
        assert b"capabilities" in answer and b"unknown section" not in answer
    finally:
        proc.kill()
        proc.wait(timeout=20)


def test_loopback_needs_no_flag(tmp_path: Path) -> None:
    port = closed_port()
    proc = serve(tmp_path, "--tcp", f"127.0.0.1:{port}")
    try:
        assert b"capabilities" in initialize(port, {})
    finally:
        proc.kill()
        proc.wait(timeout=20)
