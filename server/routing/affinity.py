"""The workspace's affinity key: which replica its escalations go to (rendezvous hashing
in the remote client), and the session header a balancer keys on.

A keyed hash of the user and the repository root (the workspace folder holding the file,
else the file's folder): stable across requests and restarts, the same for every file of
one repository, different between users, and naming neither (16 hex digits of
HMAC-SHA-256). The key is this installation's own random salt (`affinity-salt` in the
platform state dir, made on first use, readable by the user alone): a plain hash of a
login name and a path could be reversed by whoever sees the header, trying the usual
names and paths.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import logging
import os
import secrets
from functools import cache
from pathlib import Path

import platformdirs

from ..settings.config import APP

log = logging.getLogger(__name__)
SALT_FILE = "affinity-salt"


def _read_salt(path: Path) -> bytes | None:
    text = path.read_text(encoding="ascii").strip()
    return bytes.fromhex(text) if len(text) == 64 else None


@cache
def salt() -> bytes:
    """This installation's salt: read, or made once (two processes starting together
    agree: the file is created exclusively). If the state dir cannot hold it, a salt for
    this process alone (the key then changes at each restart: affinity, not privacy, is
    what is lost)."""
    path = Path(platformdirs.user_state_dir(APP)) / SALT_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            got = _read_salt(path)
            if got is not None:
                return got
            raise OSError(f"{path} does not hold a salt") from None
        new = secrets.token_bytes(32)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(new.hex() + "\n")
        return new
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        log.warning("affinity key: no salt file (%s); this process uses its own", exc)
        return secrets.token_bytes(32)


@cache
def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):  # no login name: the key is per repository only
        return ""


def repository_root(path: str, roots: tuple[str, ...]) -> str:
    """The deepest workspace folder holding `path`, else `path`'s own folder."""
    holding = [r for r in roots if r and (path == r or path.startswith(r.rstrip(os.sep) + os.sep))]
    return max(holding, key=len) if holding else os.path.dirname(path)


def workspace_key(
    path: str, roots: tuple[str, ...], user: str | None = None, key: bytes | None = None
) -> str:
    root = repository_root(path, roots)
    who = _user() if user is None else user
    mac = hmac.new(salt() if key is None else key, f"{who}\0{root}".encode(), hashlib.sha256)
    return mac.hexdigest()[:16]
