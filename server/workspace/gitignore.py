"""What git ignores, judged as git judges it, from every source git reads.

Inside a repository: the `.gitignore` of each folder from the repository root down (even
above the workspace folder), `.git/info/exclude` (the common one, for a worktree) and
`core.excludesFile` (from git's own configuration, `git config`; unset, the default
`$XDG_CONFIG_HOME/git/ignore`). Precedence as git's: a deeper `.gitignore` over a higher
one, every `.gitignore` over `info/exclude`, that over `core.excludesFile`; within one
file the last matching line wins; nothing inside an ignored folder comes back. Each file
is read as git reads it: a UTF-8 byte-order mark skipped, CRLF line ends, `\\#` and `\\!`
escapes, trailing spaces dropped unless escaped. Outside any repository there is no git
to ask: the `.gitignore` files from a given folder down are read the same way.

Why our own evaluator, not a library's: measured on the random trees of
tests/test_gitignore_property.py against `git check-ignore` (the oracle), libgit2's
`path_is_ignored` (pygit2 1.21, libgit2 1.9.7) disagreed on negations under an excluded
folder and across sources, and dulwich's ignore manager (1.2.21) drops the first pattern
of a file that starts with a byte-order mark (studies/gitignore_engines.py; figures in
docs/privacy.md). This one agrees with git on every path of those trees; each file's
rules are parsed once and cached by its modification time and size.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess

from . import files

Rules = tuple[tuple[re.Pattern[str], bool, bool], ...]  # (regex, folder-only, negated)
# What one check already read (one gate check asks about several files at one moment):
# repository roots by folder, git folders, excludes files, ignore files' rules.
Memo = dict[tuple[str, str, bool], object]


class GitUnreadable(Exception):
    """A repository exists but cannot be read (a broken `.git` file): nothing is known."""


def repository_root(path: str, memo: Memo | None = None) -> str | None:
    """The work tree root of the git repository holding `path` (a resolved real path of
    a file or folder), or None: the nearest folder above it with a `.git` entry."""
    memo = {} if memo is None else memo
    d = path if os.path.isdir(path) else os.path.dirname(path)
    seen = []
    found: str | None = None
    while True:
        key = ("root", d, False)
        if key in memo:
            found = memo[key]  # type: ignore[assignment]
            break
        seen.append(key)
        if os.path.lexists(os.path.join(d, ".git")):
            found = d
            break
        up = os.path.dirname(d)
        if up == d:
            break
        d = up
    for key in seen:
        memo[key] = found
    return found


def _common_dir(root: str) -> str:
    """The repository's common git folder (a worktree's `.git` file points elsewhere)."""
    dot = os.path.join(root, ".git")
    if os.path.isdir(dot):
        return dot
    try:  # a regular file only: a FIFO named .git must not stall the gate
        first = files.read_regular_text(dot, 64 * 1024).partition("\n")[0].strip()
    except OSError as exc:
        raise GitUnreadable(f"{dot}: {exc}") from exc
    if not first.startswith("gitdir:"):
        raise GitUnreadable(f"{dot}: not a gitdir link")
    gitdir = os.path.join(root, first[len("gitdir:") :].strip())
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
            return os.path.normpath(os.path.join(gitdir, f.read().strip()))
    except OSError:
        return gitdir


def _stamp(path: str) -> tuple[int, int]:
    """(modification time, size) of `path`; size -1 when it does not exist."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return (0, -1)
    return (st.st_mtime_ns, st.st_size)


def _xdg() -> str:
    return os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")


@functools.lru_cache(maxsize=64)
def _excludes_file_at(root: str, _stamps: tuple[tuple[int, int], ...], xdg: str) -> str:
    """`core.excludesFile` as git reads it (its include rules, `~` expanded); unset, the
    default. Asked of git once per change of its config files (`_stamps`)."""
    default = os.path.join(xdg, "git", "ignore")
    try:
        out = subprocess.run(
            ["git", "-C", root, "config", "--path", "--get", "core.excludesFile"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return default  # no git here: its default file is all that can apply
    value = out.stdout.strip()
    return os.path.join(root, value) if value else default


def _excludes_file(root: str, common: str) -> str:
    xdg = _xdg()
    configs = (
        os.path.join(common, "config"),
        os.path.join(os.path.expanduser("~"), ".gitconfig"),
        os.path.join(xdg, "git", "config"),
        os.environ.get("GIT_CONFIG_GLOBAL", ""),
    )
    return _excludes_file_at(root, tuple(_stamp(f) for f in configs if f), xdg)


def ignored_in_repository(
    real: str, root: str, *, fold: bool = False, memo: Memo | None = None
) -> bool:
    """Whether git ignores `real` (a resolved path inside the work tree `root`), from
    all of git's sources. Raises GitUnreadable when the repository cannot be read."""
    rel = real[len(root.rstrip("/")) + 1 :]
    if not rel:
        return False
    if rel == ".git" or rel.startswith(".git/"):
        return True  # git's own folder is never a source of code to send
    memo = {} if memo is None else memo
    key = ("below", root, fold)
    below = memo.get(key)
    if below is None:
        common = _common_dir(root)
        below = (  # lowest precedence first
            _file_rules(_excludes_file(root, common), fold),
            _file_rules(os.path.join(common, "info", "exclude"), fold),
        )
        memo[key] = below
    return ignored_below(real, root, fold=fold, below=below, memo=memo)  # type: ignore[arg-type]


# -- the rules of one ignore file ------------------------------------------------------


@functools.lru_cache(maxsize=2048)
def compile_pattern(p: str) -> tuple[re.Pattern[str], bool] | None:
    """One `.gitignore` pattern (comment, `!` and trailing spaces already handled) as
    (regex over a '/'-separated path relative to the `.gitignore`'s folder, folder-only),
    with git's wildmatch rules: `*`, `?` and `[...]` never match `/`; `**/`, `/**/` and
    `/**` span folders, any other `**` is a `*`; a backslash makes the next character
    literal; a `/` at the start or in the middle anchors the pattern to the folder."""
    dir_only = p.endswith("/") and not p.endswith("\\/")
    if dir_only:
        p = p[:-1]
    if not p:
        return None
    anchored = "/" in p
    if p.startswith("/"):
        p = p[1:]
    if not anchored:
        p = "**/" + p
    out: list[str] = []
    i, n = 0, len(p)
    while i < n:
        at_start = i == 0 or p[i - 1] == "/"
        if p.startswith("**", i) and at_start and (i + 2 == n or p[i + 2] == "/"):
            if i + 2 == n:
                out.append(".*")  # `x/**`: everything inside
                i += 2
            else:
                out.append("(?:.*/)?")  # zero or more folders
                i += 3
        elif p[i] == "*":
            while i < n and p[i] == "*":
                i += 1
            out.append("[^/]*")
        elif p[i] == "?":
            out.append("[^/]")
            i += 1
        elif p[i] == "[":
            j = i + 1
            neg = j < n and p[j] in "!^"
            if neg:
                j += 1
            body: list[str] = []
            first = True
            while j < n and (p[j] != "]" or first):
                c = p[j]
                if c == "\\" and j + 1 < n:
                    j += 1
                    c = p[j]
                body.append("\\" + c if c in "\\]^[" else c)
                first = False
                j += 1
            if j >= n:
                return None  # an unclosed class: git's wildmatch matches nothing
            out.append("[" + ("^/" if neg else "") + "".join(body) + "]")
            i = j + 1
        elif p[i] == "\\" and i + 1 < n:
            out.append(re.escape(p[i + 1]))
            i += 2
        else:
            out.append(re.escape(p[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL), dir_only


def _unescape_trailing(line: str) -> str:
    """Trailing spaces go unless escaped with a backslash (git: `foo\\ ` keeps one)."""
    end = len(line)
    while end > 0 and line[end - 1] == " ":
        if end >= 2 and line[end - 2] == "\\":
            return line[: end - 2] + line[end - 1 :]  # the escaped space stays
        end -= 1
    return line[:end]


@functools.lru_cache(maxsize=1024)
def _parse(path: str, stamp: tuple[int, int], fold: bool) -> Rules:
    """(regex, folder-only, negated) per pattern of the ignore file `path` (cached by
    its modification time and size)."""
    if stamp[1] < 0:
        return ()  # no such file: no rules from it
    try:
        text = files.read_regular_text(path, files.GITIGNORE_MAX_BYTES)
    except OSError:  # a FIFO, a device, too large, no permission: its rules are unknown,
        return ((re.compile(".*", re.DOTALL), False, False),)  # so all below is private
    if text.startswith("\ufeff"):
        text = text[1:]  # git skips a UTF-8 byte-order mark
    out = []
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if not line or line.startswith("#"):
            continue
        line = _unescape_trailing(line)
        negate = line.startswith("!")
        body = line[1:] if negate else line
        compiled = compile_pattern(body.casefold() if fold else body)
        if compiled is not None:
            out.append((compiled[0], compiled[1], negate))
    return tuple(out)


def _file_rules(path: str, fold: bool, memo: Memo | None = None) -> Rules:
    key = ("rules", path, fold)
    if memo is not None and key in memo:
        return memo[key]  # type: ignore[return-value]
    stamp = _stamp(path)
    rules = () if stamp[1] < 0 else _parse(path, stamp, fold)
    if memo is not None:
        memo[key] = rules
    return rules


def ignored_below(
    real: str,
    top: str,
    *,
    fold: bool = False,
    below: tuple[Rules, ...] = (),
    memo: Memo | None = None,
) -> bool:
    """Whether the `.gitignore` files from folder `top` down to `real`'s folder exclude
    `real` (or a folder above it), with git's rules: the last matching line wins, `!`
    negates, patterns are relative to the folder of their `.gitignore`, and nothing
    inside an ignored folder comes back. `below`: rule lists of lower precedence,
    relative to `top` (a repository's `core.excludesFile`, then `info/exclude`)."""
    top = top.rstrip("/")
    rel = real[len(top) + 1 :] if real != top else ""
    if not rel:
        return False
    parts = rel.split("/")
    rules = [
        _file_rules("/".join([top, *parts[:i], ".gitignore"]), fold, memo)
        for i in range(len(parts))
    ]
    for depth in range(1, len(parts) + 1):  # each folder above the file, then the file
        # git takes a symlink as a file, never as the folder it may lead to
        is_dir = depth < len(parts) or (os.path.isdir(real) and not os.path.islink(real))
        ignored = False
        whole = "/".join(parts[:depth])
        for extra in below:  # lowest precedence first: the last match wins
            for regex, dir_only, negate in extra:
                if (is_dir or not dir_only) and regex.fullmatch(whole):
                    ignored = not negate
        for base_depth in range(depth):
            sub = "/".join(parts[base_depth:depth])
            for regex, dir_only, negate in rules[base_depth]:
                if (is_dir or not dir_only) and regex.fullmatch(sub):
                    ignored = not negate
        if ignored:
            return True  # git does not look inside an ignored folder
    return False
