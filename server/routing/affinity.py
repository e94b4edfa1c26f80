"""The workspace's affinity key: which replica its escalations go to (rendezvous hashing
in the remote client), and the session header a balancer keys on.

A hash of the user and the repository root (the workspace folder holding the file, else
the file's folder): stable across requests and restarts, the same for every file of one
repository, different between users, and naming neither (16 hex digits of SHA-256).
"""

from __future__ import annotations

import getpass
import hashlib
import os
from functools import cache


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


def workspace_key(path: str, roots: tuple[str, ...], user: str | None = None) -> str:
    root = repository_root(path, roots)
    who = _user() if user is None else user
    return hashlib.sha256(f"synconfroute\0{who}\0{root}".encode()).hexdigest()[:16]
