"""Which implementation of git's ignore rules the egress gate uses (issue 34): the
candidates against `git check-ignore`, on the random trees of the property test.

Engines: ours (`server/workspace/gitignore.py`), libgit2's `path_is_ignored` (pygit2),
dulwich's `IgnoreFilterManager`. Each is asked about every path of every tree (nested
folders, `.gitignore` files at random depths with a byte-order mark, CRLF, escapes,
negations; `.git/info/exclude`; `core.excludesFile`; symlinks; a move and an edited
`.gitignore`), git is the oracle. Printed: disagreements per engine, a few examples, and
the cost of one check (the repository or manager opened and warmed once per tree, as
the gate caches it). pygit2 and dulwich are not dependencies of the project:

    pip install pygit2 dulwich   # into any environment, for this study only
    python -m studies.gitignore_engines [--trees 60] [--seed 34]
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Engine = Callable[[Path, str], bool]  # (repository root, path relative to it) -> ignored


def _engines(home: Path) -> dict[str, Callable[[Path], Engine]]:
    """Each engine as a factory: given a tree's root, a checker with its state opened."""
    from synconfroute.server.workspace import gitignore

    def ours(root: Path) -> Engine:
        real = os.path.realpath(root)
        return lambda _root, rel: gitignore.ignored_in_repository(f"{real}/{rel}", real)

    out: dict[str, Callable[[Path], Engine]] = {"ours": ours}
    try:
        import pygit2

        for level in (pygit2.enums.ConfigLevel.GLOBAL, pygit2.enums.ConfigLevel.XDG):
            pygit2.settings.search_path[level] = str(home)

        def libgit2(root: Path) -> Engine:
            repo = pygit2.Repository(str(root))
            return lambda _root, rel: bool(repo.path_is_ignored(rel))

        out[f"libgit2 {pygit2.LIBGIT2_VERSION} (pygit2 {pygit2.__version__})"] = libgit2
    except ImportError:
        print("pygit2 not installed: libgit2 left out")
    try:
        import dulwich
        from dulwich.ignore import IgnoreFilterManager
        from dulwich.repo import Repo

        def dulwich_engine(root: Path) -> Engine:
            manager = IgnoreFilterManager.from_repo(Repo(str(root)))

            def check(r: Path, rel: str) -> bool:
                is_dir = (r / rel).is_dir() and not (r / rel).is_symlink()
                return bool(manager.is_ignored(rel + "/" if is_dir else rel))

            return check

        version = ".".join(str(x) for x in dulwich.__version__)
        out[f"dulwich {version}"] = dulwich_engine
    except ImportError:
        print("dulwich not installed: dulwich left out")
    return out


def run(trees: int, seed: int) -> None:
    from tests import test_gitignore_property as prop

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        os.environ.update(
            HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), GIT_CONFIG_NOSYSTEM="1"
        )
        env = dict(os.environ)
        engines = _engines(home)
        wrong: dict[str, list[str]] = {name: [] for name in engines}
        spent: dict[str, float] = dict.fromkeys(engines, 0.0)
        checks = 0
        rng = random.Random(seed)
        for n in range(trees):
            root = Path(tmp) / f"t{n}" / "repo"
            root.parent.mkdir()
            prop._build(rng, root, env)
            for _round in range(2):  # as built, then after a move and an edit
                paths = prop._paths(root)
                truth = prop._git_ignored(root, paths, env)
                checks += len(paths)
                for name, make in engines.items():
                    engine: Any = make(root)
                    engine(root, paths[0])  # opened and warm (ours: git config read once)
                    t0 = time.perf_counter()
                    got = {rel: engine(root, rel) for rel in paths}
                    spent[name] += time.perf_counter() - t0
                    wrong[name] += [
                        f"tree {n}: {rel}: git {rel in truth}, engine {got[rel]}"
                        for rel in paths
                        if got[rel] != (rel in truth)
                    ]
                prop._move(rng, root)
    print(f"{trees} trees, {checks} path checks, git check-ignore as the oracle")
    for name in engines:
        trees_wrong = len({w.split(":")[0] for w in wrong[name]})
        print(
            f"  {name}: {len(wrong[name])} disagreements in {trees_wrong} trees;"
            f" {spent[name] / checks * 1e6:.1f} us a check"
        )
        for example in wrong[name][:3]:
            print(f"      {example}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--trees", type=int, default=60)
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args(argv)
    run(args.trees, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
