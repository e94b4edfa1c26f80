"""A workspace with private sources planted in it, for the privacy and canary tests.

Each private source defines a function whose body holds a unique marker; the public
file `app.py` uses every one of those functions, so cross-file context wants them all.
A marker in a remote body, a log or the ledger is a leak.

    base/
      ws/                       the workspace folder
        .gitignore              build/
        app.py                  the public current file (uses every function below)
        lib/helpers.py          public context (its marker SHOULD reach the remote)
        secrets/vault.py        never_send = ["secrets/**"]
        .env                    a built-in secret file (Python-shaped)
        build/gen.py            .gitignore'd
        hidden/deep.py          never_send = ["hidden/**"], reached only by a link
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


APP = (
    "from vault_alias import vault_key\n"
    "from envconf import env_token\n"
    "from gen_alias import gen_table\n"
    "from ext_lib import outside_fn\n"
    "from deep_alias import deep_fn\n"
    "from lib.helpers import public_helper\n"
    "\n"
    "\n"
    "def run(x):\n"
    "    a = vault_key(x) + env_token(x) + gen_table(x)\n"
    "    b = outside_fn(x) + deep_fn(x) + public_helper(x)\n"
    "    return \n"
)
APP_CURSOR = (11, 11)  # after "return "
# A file's text with a cursor where a completion is asked (line, character).
PRIVATE_CURSOR = (3, 11)  # "    return value + secret" : after "return "


def build(base: Path) -> Path:
    """Plant the workspace under `base`; its folder (ws)."""
    ws = base / "ws"
    for p in PRIVATE:
        f = base / p.rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(body(p.func, p.marker), encoding="utf-8")
    (ws / "lib").mkdir(parents=True, exist_ok=True)
    (ws / "lib" / "__init__.py").write_text("", encoding="utf-8")
    (ws / "lib" / "helpers.py").write_text(body("public_helper", PUBLIC_MARKER), encoding="utf-8")
    (ws / "app.py").write_text(APP, encoding="utf-8")
    (ws / ".gitignore").write_text("build/\n", encoding="utf-8")
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
