"""`privacy.never_send` patterns, matched the way users write them: gitignore-style.

A pattern is matched against the file's path relative to each workspace folder that
holds it, and against its absolute path (so absolute patterns, and files outside any
folder, work too). As in .gitignore:

- a pattern without `/` (other than a trailing one) matches a name at any depth
  (`*.env`, `secrets`);
- a pattern with a `/` at the start or in the middle is anchored to the folder
  (`secrets/**`, `/config/prod.py`);
- `*` and `?` never cross `/`; `**` does (`**/secrets/**`, `a/**/b`);
- a trailing `/` matches folders only;
- a matched folder covers everything inside it.

`!` negation is not supported (a pattern must never let code out): it is matched as
a literal `!`.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
import stat
from collections.abc import Iterable, Sequence


@functools.lru_cache(maxsize=512)
def _compile(pattern: str) -> tuple[re.Pattern[str], bool] | None:
    """(regex over a '/'-separated path, folder-only) or None for a blank pattern."""
    p = pattern.strip()
    if not p:
        return None
    dir_only = p.endswith("/")
    p = p.rstrip("/")
    if not p:
        return None
    anchored = "/" in p
    p = p.lstrip("/")
    if not anchored and not p.startswith("**"):
        p = "**/" + p
    out: list[str] = []
    i = 0
    while i < len(p):
        if p.startswith("**/", i):
            out.append("(?:.*/)?")  # zero or more folders
            i += 3
        elif p.startswith("**", i):
            out.append(".*")
            i += 2
        elif p[i] == "*":
            out.append("[^/]*")
            i += 1
        elif p[i] == "?":
            out.append("[^/]")
            i += 1
        elif p[i] == "[" and (end := p.find("]", i + 2)) > 0:
            body = p[i + 1 : end]
            if body[0] == "!":
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(p[i]))
            i += 1
    return re.compile("".join(out)), dir_only


def _matches(pattern: str, path: str) -> bool:
    compiled = _compile(pattern)
    if compiled is None:
        return False
    regex, dir_only = compiled
    parts = [part for part in path.split("/") if part]
    # The file itself, and each folder above it (a matched folder covers its content).
    for n in range(1, len(parts) + 1):
        if dir_only and n == len(parts):
            break
        if regex.fullmatch("/".join(parts[:n])):
            return True
    return False


def relative_paths(path: str, roots: Iterable[str]) -> list[str]:
    """`path` relative to each root that holds it (nested folders give several)."""
    out = []
    for root in roots:
        r = root.rstrip("/")
        if r and path.startswith(r + "/"):
            out.append(path[len(r) + 1 :])
    return out


# Files that hold credentials more often than code (privacy.secret_files).
SECRET_PATTERNS = (
    ".env*",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*.p12",
    "*.pfx",
    "credentials*",
    ".netrc",
    ".npmrc",
    ".pypirc",
)


def patterns(never: Sequence[str], secret_files: bool) -> tuple[str, ...]:
    """The patterns in force: the user's, plus the secret-bearing files when on."""
    return (*never, *SECRET_PATTERNS) if secret_files else tuple(never)


@functools.lru_cache(maxsize=256)
def _combined(patterns: tuple[str, ...]) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
    """All of `patterns` as two regexes (any entry, folders only): one match per prefix
    instead of one per pattern (the egress gate asks this for every source)."""
    files: list[str] = []
    dirs: list[str] = []
    for p in patterns:
        compiled = _compile(p)
        if compiled is not None:
            (dirs if compiled[1] else files).append(compiled[0].pattern)

    def one(xs: list[str]) -> re.Pattern[str] | None:
        return re.compile("|".join(f"(?:{x})" for x in xs)) if xs else None

    return one(files), one(dirs)


def never_send(patterns: Sequence[str], path: str, roots: Iterable[str] = ()) -> bool:
    """True when a pattern covers `path` (absolute, '/'-separated) in any root or at all."""
    if not path or not patterns:
        return False
    files, dirs = _combined(tuple(patterns))
    for candidate in (*relative_paths(path, roots), path):
        parts = [part for part in candidate.split("/") if part]
        # The file itself, and each folder above it (a matched folder covers its content).
        for n in range(1, len(parts) + 1):
            prefix = "/".join(parts[:n])
            if files is not None and files.fullmatch(prefix):
                return True
            if dirs is not None and n < len(parts) and dirs.fullmatch(prefix):
                return True
    return False


# -- resolved paths: the privacy question is asked of what a path really names ------------


@functools.lru_cache(maxsize=256)
def _folds_at(folder: str) -> bool:
    """Whether the file system holding the existing folder `folder` ignores case: the same
    folder named with its letters' case swapped is the same folder."""
    head, name = os.path.split(folder.rstrip("/"))
    if not name or name.swapcase() == name:
        return False if not head or head == folder else _folds_at(head)
    try:
        return os.path.samefile(folder, os.path.join(head, name.swapcase()))
    except (OSError, ValueError):
        return False


def folds_case(path: str, seen: dict[str, bool] | None = None) -> bool:
    """Whether `path` lives on a case-folding file system (macOS and Windows by default):
    probed on its nearest existing folder that has a letter in its name. `seen`: what
    `real_path` found of the file system a moment ago (the same request)."""
    p = nearest_folder(path, {} if seen is None else seen)
    return _folds_at(p) if p else False


def nearest_folder(path: str, seen: dict[str, bool]) -> str:
    """`path` if it is an existing folder, else the nearest one above it ("" if none),
    where `seen` says which paths are folders (True) or not (False) as `_resolve` just
    found them: only the others are asked (`os.path.isdir`)."""
    p = path
    while p:
        known = seen.get(p)
        if os.path.isdir(p) if known is None else known:
            return p
        p = os.path.dirname(p)
    return ""


def _resolve(path: str, seen: dict[str, bool]) -> str:
    """`os.path.realpath(path)` for an absolute POSIX path, step for step as Python's
    own (`posixpath._joinrealpath`, not strict), noting in `seen` whether each path it
    `lstat`s is a folder (a link is not noted): neither it nor `nearest_folder` asks
    again what `seen` holds. Below a name that is no folder nothing can exist, so
    nothing is asked (`..` climbs by name, as Python's does)."""
    seen.setdefault("/", True)
    real, rest = _join_real("/", path[1:], {}, seen)
    return real if rest is None else posixpath.normpath(posixpath.join(real, rest))


def _join_real(
    path: str, rest: str, links: dict[str, str | None], seen: dict[str, bool]
) -> tuple[str, str | None]:
    """`path` (resolved) joined with `rest`, its links followed: (the real path, None),
    or, at a link loop, (the part resolved, what is left of `rest`), which Python leaves
    as it is."""
    below = seen.get(path) is False  # `path` is no folder: nothing below it exists
    while rest:
        name, _, rest = rest.partition("/")
        if not name or name == ".":
            continue
        if name == "..":
            path = posixpath.dirname(path)
            below = seen.get(path) is False
            continue
        new = path + name if path == "/" else path + "/" + name
        if below:
            seen[new] = False
            path = new
            continue
        known = seen.get(new)
        if known is not None:  # found a moment ago (no link: those are not noted)
            path, below = new, not known
            continue
        try:
            mode = os.lstat(new).st_mode
        except OSError:
            seen[new] = False
            path, below = new, True
            continue
        if not stat.S_ISLNK(mode):
            below = not stat.S_ISDIR(mode)
            seen[new] = not below
            path = new
            continue
        if new in links:
            done = links[new]
            if done is None:  # a loop: the rest stays as it is
                return new, rest
            path = done
            below = seen.get(path) is False
            continue
        links[new] = None
        target = os.readlink(new)
        if target.startswith("/"):
            path, left = _join_real("/", target[1:], links, seen)
        else:
            path, left = _join_real(path, target, links, seen)
        if left is not None:
            return path, posixpath.join(left, rest) if rest else left
        links[new] = path
        below = seen.get(path) is False
    return path, None


def real_path(
    path: str, *, fold: bool | None = None, seen: dict[str, bool] | None = None
) -> str | None:
    """The real path `path` names: symlinks followed (the target's folders too), `.` and
    `..` removed, '/'-separated, case-folded where the file system folds case (`fold`
    None: probe it). None when it cannot be resolved (not an absolute file path).
    `seen`: what an earlier call of the same moment (one request's plan) found of the
    file system, shared, so a folder both paths pass through is asked once."""
    if not path or "\x00" in path:
        return None
    seen = {} if seen is None else seen
    try:
        if os.sep == "/":
            if path[0] != "/":
                return None
            real = _resolve(path, seen)  # `os.path.realpath`, with fewer syscalls
        else:
            native = path.replace("/", os.sep)
            if not os.path.isabs(native):
                return None
            real = os.path.realpath(native).replace(os.sep, "/")
    except (OSError, ValueError):
        return None
    if fold is None:
        near = nearest_folder(real, seen)
        fold = _folds_at(near) if near else False
    return real.casefold() if fold else real


def normal_path(path: str, *, fold: bool = False) -> str:
    """`path` with `.`, `..` and repeated '/' removed (no symlinks followed)."""
    p = posixpath.normpath(path.replace(os.sep, "/")) if path else ""
    if p.startswith("//") and not p.startswith("///") and not path.startswith("//"):
        p = p[1:]
    return p.casefold() if fold else p


def within(path: str, roots: Iterable[str]) -> bool:
    """`path` is one of `roots` or inside one (all '/'-separated, same case rule)."""
    for r in roots:  # a loop, not any(genexpr): asked several times per request
        r = r.rstrip("/")
        if path == r or path.startswith(r + "/"):
            return True
    return False
