"""`privacy.real_path` resolves paths itself (fewer syscalls than `os.path.realpath`
followed by `os.path.isdir` probes): checked against Python's own `os.path.realpath` and
the plain `isdir` walk over random trees of folders, files and symlinks (relative,
absolute, dangling, chained, looping, through `..`), asked with `.`, `..`, `//`, missing
names and names below files. Every path must resolve exactly as Python resolves it, and
the nearest existing folder (the case-folding probe's) must be the one `isdir` finds,
also when the calls of one moment share what they found (`seen`).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from synconfroute.server.workspace import privacy

pytestmark = pytest.mark.skipif(os.sep != "/", reason="the resolver is the POSIX one")

TREES = 40
NAMES = ("a", "b", "c", "f.py", "l1", "l2", "l3")
PIECES = ("a", "b", "c", "f.py", "l1", "l2", "l3", ".", "..", "", "nope", "x.py")


def _tree(root: Path, rng: random.Random) -> list[Path]:
    """Random folders and files under `root`, then symlinks among them."""
    made = [root]
    for _ in range(rng.randint(3, 10)):
        parent = rng.choice([p for p in made if p.is_dir() and not p.is_symlink()])
        p = parent / rng.choice(NAMES[:3])
        if not p.exists() and not p.is_symlink():
            p.mkdir()
            made.append(p)
    for _ in range(rng.randint(1, 5)):
        parent = rng.choice([p for p in made if p.is_dir() and not p.is_symlink()])
        f = parent / "f.py"
        if not f.exists():
            f.write_text("x = 1\n")
            made.append(f)
    for _ in range(rng.randint(2, 8)):
        parent = rng.choice([p for p in made if p.is_dir() and not p.is_symlink()])
        link = parent / rng.choice(NAMES[4:])
        if link.exists() or link.is_symlink():
            continue
        kind = rng.random()
        if kind < 0.3:  # absolute, to anything made (or dangling)
            target = str(rng.choice(made)) + rng.choice(("", "", "/nope", "/.."))
        elif kind < 0.6:  # relative, up and across
            target = "/".join(rng.choice(PIECES[:9]) for _ in range(rng.randint(1, 4)))
        elif kind < 0.8:  # to another link (chains, loops)
            target = rng.choice(NAMES[4:]) + rng.choice(("", "/..", "/a", "/f.py"))
        else:
            target = str(link)  # to itself
        link.symlink_to(target or ".")
        made.append(link)
    return made


def _queries(root: Path, made: list[Path], rng: random.Random) -> list[str]:
    out = [str(root), "/", "//" + str(root).lstrip("/"), str(root) + "/"]
    for _ in range(60):
        base = str(rng.choice(made))
        tail = "/".join(rng.choice(PIECES) for _ in range(rng.randint(0, 5)))
        out.append(base + ("/" + tail if tail else ""))
    return out


def _old_real_path(path: str) -> str | None:
    """`real_path` as it was: Python's realpath, then the `isdir` walk."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return None
    return real.casefold() if privacy.folds_case(real) else real


def test_resolves_as_python_does(tmp_path: Path) -> None:
    rng = random.Random(35)
    asked = 0
    for n in range(TREES):
        root = tmp_path / f"t{n}"
        root.mkdir()
        made = _tree(root, rng)
        shared: dict[str, bool] = {}  # one moment: what one path found serves the next
        for q in _queries(root, made, rng):
            seen: dict[str, bool] = {}
            real = privacy._resolve(q, seen)
            assert real == os.path.realpath(q), (q, seen)
            near = privacy.nearest_folder(real, seen)
            assert near == privacy.nearest_folder(real, {}), (q, real, seen)
            assert privacy.real_path(q) == _old_real_path(q), q
            assert privacy.real_path(q, seen=shared) == _old_real_path(q), (q, shared)
            assert privacy.folds_case(real, shared) == privacy.folds_case(real), q
            asked += 1
    print(f"{asked} paths over {TREES} trees: all resolved as os.path.realpath")


def test_asks_the_file_system_less(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file in an existing folder: one `lstat` per name, no `stat` to find its folder;
    a file that does not exist: nothing asked below the first missing name."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("x = 1\n")
    calls: list[str] = []
    lstat, stat_ = os.lstat, os.stat

    def counted_lstat(p: object, *a: object, **k: object) -> os.stat_result:
        calls.append(f"lstat {p}")
        return lstat(p, *a, **k)  # type: ignore[arg-type]

    def counted_stat(p: object, *a: object, **k: object) -> os.stat_result:
        calls.append(f"stat {p}")
        return stat_(p, *a, **k)  # type: ignore[arg-type]

    real = str((tmp_path / "src" / "m.py").resolve())
    depth = real.count("/")
    missing = str(tmp_path.resolve() / "gone" / "deeper" / "m.py")
    gone = f"lstat {tmp_path.resolve() / 'gone'}"
    privacy.real_path(real)  # the case-folding verdicts of their folders, cached
    privacy.real_path(missing)
    monkeypatch.setattr(os, "lstat", counted_lstat)
    monkeypatch.setattr(os, "stat", counted_stat)
    assert privacy.real_path(real) == real
    assert calls == [c for c in calls if c.startswith("lstat")] and len(calls) == depth, calls
    calls.clear()
    assert privacy.real_path(missing) == missing
    asked = [c for c in calls if c.startswith("lstat")]
    assert asked[-1] == gone, calls
    assert not [c for c in calls if c.startswith("stat")], calls


def test_nothing_is_remembered_between_requests(tmp_path: Path) -> None:
    """A symlink switched between two requests: the next plan, the next `holders` and
    the next verdict see where it points now (what one call found serves only that call)."""
    from synconfroute.server.session import folders
    from synconfroute.server.settings.config import PrivacySettings
    from synconfroute.server.workspace import egress

    ws = tmp_path / "ws"
    for d in ("public", "secrets"):
        (ws / d).mkdir(parents=True)
        (ws / d / "m.py").write_text("x = 1\n")
    link = ws / "src"
    link.symlink_to(ws / "public")
    path, root = str(link / "m.py"), str(ws)
    privacy_ = PrivacySettings(never_send=["secrets/**"])
    seen: list[tuple[str | None, str | None, tuple[str, ...]]] = []
    for target in ("public", "secrets", "public"):
        link.unlink()
        link.symlink_to(ws / target)
        plan = egress.make_plan("remote", path, (root,))
        why = egress.private_reason(plan.sources[0], plan, privacy_)
        seen.append((plan.sources[0].real, why, folders.holders(path, [str(ws / "secrets")])))
    real = str((ws / "public" / "m.py").resolve()), str((ws / "secrets" / "m.py").resolve())
    assert seen == [
        (real[0], None, ()),
        (real[1], egress.NEVER_SEND, (str(ws / "secrets"),)),
        (real[0], None, ()),
    ]
