"""What git ignores, checked against git itself (issue 34, "Git's own semantics").

Random workspace trees: nested folders, `.gitignore` files at random depths (with a
byte-order mark, CRLF line ends, escapes such as `\\#name`, trailing spaces, negations,
anchored and `**` patterns), `.git/info/exclude`, a `core.excludesFile`, file and folder
symlinks, then moves and an edited `.gitignore`. For every path `git check-ignore` is the
oracle; compared with:

- `gitignore.ignored_in_repository` (what the egress gate asks inside a repository);
- `gitignore.ignored_below` (our reading outside a repository), on the trees where git
  has no source other than the `.gitignore` files;
- the egress gate's allow-list (`egress.private_reason`): a file is refused as gitignored
  exactly when git ignores it, or, for a symlink, when git ignores its target.

The figures are printed (pytest -s); disagreements must be 0.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from synconfroute.server.settings.config import PrivacySettings
from synconfroute.server.workspace import egress, gitignore

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is the oracle")

TREES = 60
DIRS = ("a", "b", "gen", "src", "lib")
FILES = ("a.py", "b.py", "x.py", "y.log", "gen.py", "#h.py", "!bang.py", "trail.py", "keep.log")
PATTERNS = (
    "*.log",
    "*.py",
    "x*",
    "?.py",
    "[ab].py",
    "[!a]*.log",
    "gen/",
    "/gen",
    "/gen/",
    "a/gen",
    "a/**/x.py",
    "**/b",
    "b/**",
    "**/gen/**",
    "!x.py",
    "!keep.log",
    "!gen/",
    "!*.py",
    "\\#h.py",
    "#h.py",
    "\\!bang.py",
    "trail.py   ",
    "src/*.py",
    "lib",
    "/a.py",
    "*/x.py",
    "# a comment",
    "",
)


@pytest.fixture
def isolated_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Neither git nor the server reads this machine's own global git config."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_DIR", "GIT_CONFIG_GLOBAL", "GIT_WORK_TREE"):
        monkeypatch.delenv(var, raising=False)
    return dict(os.environ)


def _ignore_file(rng: random.Random) -> bytes:
    lines = [rng.choice(PATTERNS) for _ in range(rng.randint(1, 5))]
    text = ("\r\n" if rng.random() < 0.3 else "\n").join(lines) + "\n"
    data = text.encode("utf-8")
    return (b"\xef\xbb\xbf" + data) if rng.random() < 0.3 else data


def _build(rng: random.Random, root: Path, env: dict[str, str]) -> bool:
    """A random tree in a new repository; whether git has sources besides .gitignore."""
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    folders = [root]
    for _ in range(rng.randint(2, 7)):
        parent = rng.choice(folders)
        if len(parent.relative_to(root).parts) < 4:
            d = parent / rng.choice(DIRS)
            d.mkdir(exist_ok=True)
            folders.append(d)
    for folder in folders:
        for name in rng.sample(FILES, rng.randint(1, 4)):
            (folder / name).write_text(f"# {name}\n", encoding="utf-8")
        if rng.random() < 0.6:
            (folder / ".gitignore").write_bytes(_ignore_file(rng))
    others = False
    if rng.random() < 0.4:
        (root / ".git" / "info").mkdir(exist_ok=True)
        (root / ".git" / "info" / "exclude").write_bytes(_ignore_file(rng))
        others = True
    if rng.random() < 0.4:
        excludes = root.parent / "excludes"
        excludes.write_bytes(_ignore_file(rng))
        cfg = ["git", "-C", str(root), "config", "core.excludesFile", str(excludes)]
        subprocess.run(cfg, check=True, env=env)
        others = True
    # Symlinks: a file onto another file, a folder onto another folder.
    regular = [p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts]
    if regular and rng.random() < 0.7:
        target = rng.choice(regular)
        link = rng.choice(folders) / "link.py"
        if not link.exists():
            link.symlink_to(os.path.relpath(target, link.parent))
    if len(folders) > 1 and rng.random() < 0.5:
        target = rng.choice(folders[1:])
        link = root / "dirlink"
        if not link.exists():
            link.symlink_to(os.path.relpath(target, root))
    return others


def _paths(root: Path) -> list[str]:
    """Every file and folder below `root` as git names them (not inside .git, nor below
    a folder symlink: git stops at a symlink)."""
    out = []
    for folder, dirs, names in os.walk(root):
        rel_folder = Path(folder).relative_to(root)
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in [*dirs, *names]:
            if name == ".gitignore":
                continue
            out.append(str(rel_folder / name) if str(rel_folder) != "." else name)
        dirs[:] = [d for d in dirs if not (Path(folder) / d).is_symlink()]
    return out


def _git_ignored(root: Path, paths: list[str], env: dict[str, str]) -> set[str]:
    proc = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "--no-index", "--stdin", "-z"],
        input="\0".join(paths).encode() + b"\0",
        capture_output=True,
        env=env,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return {p for p in proc.stdout.decode().split("\0") if p}


def _move(rng: random.Random, root: Path) -> None:
    """Move a file (maybe into an ignored folder) and edit a .gitignore."""
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    files = [p for p in files if ".git" not in p.relative_to(root).parts]
    folders = [root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]
    folders = [p for p in folders if ".git" not in p.relative_to(root).parts]
    movable = [p for p in files if p.name != ".gitignore"]
    if movable:
        src = rng.choice(movable)
        dst = rng.choice(folders) / rng.choice(FILES)
        if not dst.exists():
            src.rename(dst)
    ignores = [p for p in files if p.name == ".gitignore"]
    if ignores:
        with rng.choice(ignores).open("ab") as f:
            f.write(rng.choice(PATTERNS).encode() + b"\n")


def _compare(root: Path, env: dict[str, str], only_gitignore: bool) -> tuple[int, list[str]]:
    paths = _paths(root)
    git = _git_ignored(root, paths, env)
    real_root = os.path.realpath(root)
    settings = PrivacySettings(secret_files=False)
    bad = []
    for rel in paths:
        full = f"{real_root}/{rel}"
        want = rel in git
        if gitignore.ignored_in_repository(full, real_root) != want:
            bad.append(f"libgit2 {rel}: git says {want}")
        if only_gitignore and gitignore.ignored_below(full, real_root) != want:
            bad.append(f"ignored_below {rel}: git says {want}")
        if not os.path.isfile(full):
            continue  # folders and dangling links: not a source
        plan = egress.make_plan("remote", full, [real_root])
        assert plan.window is not None
        why = egress.private_reason(plan.window, plan, settings)
        target = os.path.relpath(os.path.realpath(full), real_root)
        judged = target if os.path.islink(full) else rel
        expected = judged in git if judged == rel else bool(_git_ignored(root, [judged], env))
        if (why == egress.GITIGNORED) != expected or why not in (None, egress.GITIGNORED):
            bad.append(f"allow-list {rel} -> {judged}: {why}, git ignores: {expected}")
    return len(paths), bad


def test_agrees_with_git_check_ignore_on_random_trees(
    tmp_path: Path, isolated_git: dict[str, str]
) -> None:
    rng = random.Random(34)
    checked = 0
    disagreements: list[str] = []
    for n in range(TREES):
        root = tmp_path / f"t{n}" / "repo"
        root.parent.mkdir()
        others = _build(rng, root, isolated_git)
        for _round in range(2):  # the tree as built, then after a move and an edit
            count, bad = _compare(root, isolated_git, only_gitignore=not others)
            checked += count
            disagreements += [f"tree {n}: {b}" for b in bad]
            _move(rng, root)
    print(
        f"\ngit check-ignore agreement: {TREES} trees, {checked} path checks (each tree"
        f" before and after a move), disagreements: {len(disagreements)}"
    )
    assert disagreements == [], "\n".join(disagreements[:20])
