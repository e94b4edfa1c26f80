"""The package as pip and `python -m build` make it, from real clones of this repository.

A clone without symlink support (`git clone -c core.symlinks=false`, git's default on
Windows) has small text files where synconfroute/server and synconfroute/clients link to
server/ and clients/. A build that followed the links then made a wheel holding only
__init__ and __main__. setup.py maps the halves to their folders instead; these tests
build the sdist and the wheel from a clone with links and one without, check every file,
install the wheel and an editable checkout of the link-less clone, and import them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HALVES = {"server": "synconfroute/server", "clients": "synconfroute/clients"}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("git") is None or not (ROOT / ".git").exists(),
        reason="needs git and a git checkout (the tests clone it)",
    ),
]


def _run(*cmd: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


def _ok(*cmd: str | Path, cwd: Path | None = None) -> str:
    done = _run(*cmd, cwd=cwd)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _clone(dest: Path, symlinks: bool) -> Path:
    """A clone of this checkout as committed, plus its uncommitted changes to tracked files."""
    snapshot = _ok("git", "stash", "create", cwd=ROOT).strip() or "HEAD"
    if snapshot == "HEAD":
        snapshot = _ok("git", "rev-parse", "HEAD", cwd=ROOT).strip()
    links = "true" if symlinks else "false"
    _ok(
        "git",
        "clone",
        "-q",
        "--shared",
        "--no-checkout",
        "-c",
        f"core.symlinks={links}",
        ROOT,
        dest,
    )
    _ok("git", "checkout", "-q", snapshot, cwd=dest)
    return dest


def _tracked_modules(clone: Path) -> set[str]:
    """The .py files of the import package, as paths inside it (synconfroute/server/x.py)."""
    files = _ok("git", "ls-files", "-z", "synconfroute", *HALVES, cwd=clone).split("\0")
    out = set()
    for f in filter(None, files):
        if not f.endswith(".py"):
            continue
        top, _, rest = f.partition("/")
        out.add(f"{HALVES[top]}/{rest}" if top in HALVES else f)
    return out


def _build(clone: Path, out: Path) -> tuple[Path, Path]:
    """`python -m build`: the sdist, then the wheel built from that sdist (as PyPI gets them)."""
    _ok(sys.executable, "-m", "build", "--outdir", out, clone)
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel


def _venv(where: Path) -> Path:
    """A bare venv that sees this interpreter's packages (the dependencies), not its
    synconfroute: an editable install's finder lives in a .pth file, and .pth files in a
    directory added by another .pth are not run."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", where], check=True)
    python = where / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site_dir = Path(
        _ok(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    )
    shared = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site_dir / "zz_shared_deps.pth").write_text("\n".join(shared) + "\n")
    return python


def _pip(python: Path, *args: str | Path) -> str:
    return _ok(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", *args)


IMPORT_CHECK = (
    "import synconfroute, synconfroute.server, synconfroute.clients;"
    "import synconfroute.clients.ollama, synconfroute.clients.openai;"
    "from importlib.metadata import entry_points;"
    "(ep,) = entry_points(group='console_scripts', name='synconfroute');"
    "ep.load();"
    "print(synconfroute.__file__, synconfroute.server.__file__, synconfroute.clients.__file__)"
)


@pytest.fixture(scope="module")
def builds(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[Path, Path, Path]]:
    """{"links" or "no-links": (clone, sdist, wheel)}."""
    base = tmp_path_factory.mktemp("packaging")
    out = {}
    for name, symlinks in (("links", True), ("no-links", False)):
        clone = _clone(base / name, symlinks)
        out[name] = (clone, *_build(clone, base / f"{name}-dist"))
    return out


def test_a_clone_without_symlinks_has_text_files_where_the_links_are(
    builds: dict[str, tuple[Path, Path, Path]],
) -> None:
    """The condition the other tests build under (what Windows' git writes)."""
    nolinks = builds["no-links"][0] / "synconfroute"
    links = builds["links"][0] / "synconfroute"
    for folder in HALVES:
        assert (nolinks / folder).is_file() and not (nolinks / folder).is_symlink()
        assert (nolinks / folder).read_text() == f"../{folder}"
        assert (links / folder).is_symlink()


@pytest.mark.parametrize("kind", ["links", "no-links"])
def test_the_wheel_holds_every_module_of_the_package_and_nothing_else(
    builds: dict[str, tuple[Path, Path, Path]], kind: str
) -> None:
    clone, _, wheel = builds[kind]
    names = zipfile.ZipFile(wheel).namelist()
    (info,) = {n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")}
    modules = {n for n in names if not n.startswith(info + "/")}
    expected = _tracked_modules(clone)
    assert len(expected) > 20, expected  # the package, not two files
    assert modules == expected, (
        f"missing: {sorted(expected - modules)}; unexpected: {sorted(modules - expected)}"
    )
    # The console script's module is in the wheel.
    entry = zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()
    target = entry.split("synconfroute = ", 1)[1].split(":", 1)[0].strip()
    assert target.replace(".", "/") + ".py" in modules, entry


@pytest.mark.parametrize("kind", ["links", "no-links"])
def test_the_sdist_holds_the_real_folders_and_no_links(
    builds: dict[str, tuple[Path, Path, Path]], kind: str
) -> None:
    clone, sdist, _ = builds[kind]
    with tarfile.open(sdist) as tar:
        members = tar.getmembers()
    assert not [m.name for m in members if not (m.isfile() or m.isdir())], "links in the sdist"
    files = {m.name.split("/", 1)[1] for m in members if m.isfile()}
    tracked = set(_ok("git", "ls-files", "synconfroute", *HALVES, cwd=clone).split())
    expected = {f for f in tracked if f.endswith(".py")}
    assert expected <= files, sorted(expected - files)
    assert {"pyproject.toml", "setup.py", "README.md"} <= files
    # The link placeholders (synconfroute/server holding "../server") are not packaged.
    assert not {"synconfroute/server", "synconfroute/clients"} & files


def test_the_wheel_from_a_clone_without_symlinks_installs_and_imports(
    builds: dict[str, tuple[Path, Path, Path]], tmp_path: Path
) -> None:
    _, _, wheel = builds["no-links"]
    python = _venv(tmp_path / "venv")
    _pip(python, wheel)
    files = _ok(python, "-c", IMPORT_CHECK, cwd=tmp_path).split()
    site = str(tmp_path / "venv")
    assert all(f.startswith(site) for f in files), files
    assert files[1].endswith("synconfroute/server/__init__.py")


def test_an_editable_install_of_a_clone_without_symlinks_imports_its_folders(
    builds: dict[str, tuple[Path, Path, Path]], tmp_path: Path
) -> None:
    clone = builds["no-links"][0]
    python = _venv(tmp_path / "venv")
    _pip(python, "-e", clone)
    for cwd in (tmp_path, clone):  # from elsewhere, and from the checkout (the README's way)
        files = _ok(python, "-c", IMPORT_CHECK, cwd=cwd).split()
        assert files == [
            str(clone / "synconfroute" / "__init__.py"),
            str(clone / "server" / "__init__.py"),
            str(clone / "clients" / "__init__.py"),
        ]
    # `python -m synconfroute` from the checkout, as editors may start it.
    assert "usage: synconfroute" in _ok(python, "-m", "synconfroute", "--help", cwd=clone)


def test_a_tree_missing_a_half_fails_the_build_and_says_why(
    builds: dict[str, tuple[Path, Path, Path]], tmp_path: Path
) -> None:
    """Never an empty wheel: without server/__init__.py the build stops with the reason."""
    broken = tmp_path / "broken"
    shutil.copytree(builds["no-links"][0], broken, ignore=shutil.ignore_patterns(".git"))
    (broken / "server" / "__init__.py").unlink()
    done = _run(sys.executable, "-m", "build", "--wheel", "--outdir", tmp_path / "dist", broken)
    assert done.returncode != 0
    assert "server/__init__.py is missing" in done.stdout + done.stderr
    assert not list(tmp_path.glob("dist/*.whl"))
