"""Lint and types are part of the suite, so the README's one test command checks them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> str:
    exe = Path(sys.executable).parent / name
    found = str(exe) if exe.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return found


def test_ruff_check() -> None:
    r = subprocess.run([_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format() -> None:
    r = subprocess.run(
        [_tool("ruff"), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_strict_on_server_and_clients() -> None:
    r = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # Every module, not only synconfroute/'s two files: mypy reads server/ and clients/
    # through the synconfroute/server and synconfroute/clients links.
    files = [*(ROOT / "synconfroute").glob("*.py")]
    files += [p for folder in ("server", "clients") for p in (ROOT / folder).rglob("*.py")]
    assert f"no issues found in {len(files)} source files" in r.stdout, r.stdout


def test_the_only_tracked_links_are_the_package_halves() -> None:
    """A link committed by accident (a worktree's .code-server or node_modules pointing at
    another checkout) dangles on every other machine and breaks set-up there."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(
        ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    links = sorted(line.split("\t", 1)[1] for line in out.splitlines() if line.startswith("120000"))
    assert links == ["synconfroute/clients", "synconfroute/server"], links
