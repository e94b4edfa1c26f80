"""A workspace with private sources planted in it, for the privacy and canary tests.

Each private source defines a function whose body holds a unique marker; the public
file `app.py` uses every one of those functions, so cross-file context wants them all.
A marker in a remote body, a log or the ledger is a leak.

    base/                       a git repository (its root is above the workspace folder)
      .gitignore                ws/above/           (a .gitignore above the folder)
      .git/info/exclude         ws/excl/
      .git/config               core.excludesFile = ../excludes, which lists ws/glob/
      ws/                       the workspace folder
        .gitignore              <BOM>bom/, build/, \\#hash.py (a BOM, CRLF, an escape)
        app.py                  the public current file (uses every function below)
        lib/helpers.py          public context (its marker SHOULD reach the remote)
        secrets/vault.py        never_send = ["secrets/**"]
        .env                    a built-in secret file (Python-shaped)
        build/gen.py            .gitignore'd
        hidden/deep.py          never_send = ["hidden/**"], reached only by a link
        above/a.py, excl/e.py, glob/g.py, bom/b.py, #hash.py   ignored by those sources
        vault_alias.py  -> secrets/vault.py     symlinked file
        envconf.py      -> .env                 symlinked file onto a secret file
        ext_lib.py      -> ../outside/lib.py    symlinked file out of the workspace
        gen_alias.py    -> build/gen.py         symlinked file onto an ignored file
        deep_alias.py   -> hidden/deep.py       symlinked file (its target is private)
      outside/lib.py            outside every workspace folder
      ws_link -> ws             a symlinked workspace root
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import attrs

PUBLIC_MARKER = "PUBLIC_CONTROL_5c1e"


@attrs.frozen
class Private:
    kind: str  # never_send | secret_file | gitignored | outside | symlink_target
    rel: str  # path relative to the base folder
    func: str  # the function it defines
    marker: str
    alias: str  # a symlink in the workspace that names it (relative to ws)


PRIVATE: tuple[Private, ...] = (
    Private(
        "never_send", "ws/secrets/vault.py", "vault_key", "CANARY_NEVERSEND_a91f", "vault_alias.py"
    ),
    Private("secret_file", "ws/.env", "env_token", "CANARY_SECRETFILE_27bd", "envconf.py"),
    Private("gitignored", "ws/build/gen.py", "gen_table", "CANARY_GITIGNORED_d40c", "gen_alias.py"),
    Private("outside", "outside/lib.py", "outside_fn", "CANARY_OUTSIDE_8e62", "ext_lib.py"),
    Private(
        "symlink_target", "ws/hidden/deep.py", "deep_fn", "CANARY_SYMTARGET_f3a7", "deep_alias.py"
    ),
    # Issue 34: git's other ignore sources, and the way git reads a .gitignore.
    Private("gitignore_above", "ws/above/a.py", "above_fn", "CANARY_ABOVE_61b0", "above_alias.py"),
    Private("info_exclude", "ws/excl/e.py", "excl_fn", "CANARY_EXCLUDE_0d9e", "excl_alias.py"),
    Private("excludes_file", "ws/glob/g.py", "glob_fn", "CANARY_EXCLFILE_7a2c", "glob_alias.py"),
    Private("gitignore_bom", "ws/bom/b.py", "bom_fn", "CANARY_BOM_c5e1", "bom_alias.py"),
    Private("escaped_name", "ws/#hash.py", "hash_fn", "CANARY_ESCAPED_93f4", "hash_alias.py"),
)
NEVER_SEND = ["secrets/**", "hidden/**"]
MARKERS = tuple(p.marker for p in PRIVATE)


def body(func: str, marker: str) -> str:
    return (
        f"def {func}(value):\n"
        f'    """{marker}"""\n'
        f'    secret = "{marker}"\n'
        f"    return value + secret\n"
    )


def _app() -> str:
    mods = [p.alias.removesuffix(".py") for p in PRIVATE]
    lines = [f"from {m} import {p.func}" for m, p in zip(mods, PRIVATE, strict=True)]
    lines += ["from lib.helpers import public_helper", "", "", "def run(x):"]
    lines += [f"    a{i} = {p.func}(x)" for i, p in enumerate(PRIVATE)]
    lines += ["    b = public_helper(x)", "    return "]
    return "\n".join(lines) + "\n"


APP = _app()
APP_CURSOR = (APP.count("\n") - 1, 11)  # after "return "
# A file's text with a cursor where a completion is asked (line, character).
PRIVATE_CURSOR = (3, 11)  # "    return value + secret" : after "return "


def build(base: Path) -> Path:
    """Plant the workspace under `base` (a git repository); its folder (ws)."""
    ws = base / "ws"
    base.mkdir(parents=True, exist_ok=True)
    git = ["git", "-C", str(base)]
    subprocess.run([*git, "init", "-q", "."], check=True, capture_output=True)
    (base / ".git" / "info").mkdir(exist_ok=True)
    (base / ".git" / "info" / "exclude").write_text("ws/excl/\n", encoding="utf-8")
    (base.parent / "excludes").write_text("ws/glob/\n", encoding="utf-8")
    excludes = str(base.parent / "excludes")
    subprocess.run([*git, "config", "core.excludesFile", excludes], check=True, capture_output=True)
    (base / ".gitignore").write_text("ws/above/\n", encoding="utf-8")
    for p in PRIVATE:
        f = base / p.rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(body(p.func, p.marker), encoding="utf-8")
    (ws / "lib").mkdir(parents=True, exist_ok=True)
    (ws / "lib" / "__init__.py").write_text("", encoding="utf-8")
    (ws / "lib" / "helpers.py").write_text(body("public_helper", PUBLIC_MARKER), encoding="utf-8")
    (ws / "app.py").write_text(APP, encoding="utf-8")
    (ws / ".gitignore").write_bytes(b"\xef\xbb\xbfbom/\r\nbuild/\r\n\\#hash.py\r\n")
    for p in PRIVATE:
        os.symlink(os.path.relpath(base / p.rel, ws), ws / p.alias)
    os.symlink("ws", base / "ws_link")
    return ws


def leaks(text: str) -> list[str]:
    """The markers found in `text`."""
    return [m for m in MARKERS if m in text]


def write_settings(
    folder: Path,
    *,
    local_url: str,
    remote_url: str,
    context: str = "workspace",
    never_send: list[str] | None = None,
    extra: str = "",
    first_token_ms: int = 400,
) -> Path:
    """A settings file: fake tiers, a short local first-token budget (the timeout path)."""
    pats = ", ".join(f'"{p}"' for p in (NEVER_SEND if never_send is None else never_send))
    text = f"""
[local]
backend = "ollama"
url = "{local_url}"
model = "qwen2.5-coder:3b"
timeout = 5
first_token_ms = {first_token_ms}
total_ms = {first_token_ms + 1100}
[remote]
url = "{remote_url}"
model = "Qwen/Qwen2.5-Coder-32B-Instruct"
api_key_env = ""
timeout = 5
send_context = true
[completion]
context = "{context}"
[privacy]
never_send = [{pats}]
[editor]
debounce_ms = 0
adaptive_debounce = false
{extra}
"""
    path = folder / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path
