"""The benchmarks and studies keep the convention of scripts/README.md: modules of the
`bench` and `studies` packages, run with `python -m` from the repository root, no
sys.path edits; scripts/ holds the installers only. Each one starts (`--help`) here, so a
renamed import breaks CI, not the next person who measures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULES = sorted(
    f"{p.parent.name}.{p.stem}"
    for folder in ("bench", "studies")
    for p in (ROOT / folder).glob("*.py")
    if not p.name.startswith("_")
)


def test_scripts_holds_only_the_installers() -> None:
    """Installers are what setup.sh (README, .ci/run) runs, directly or through another
    installer; anything else in scripts/ is a benchmark or study in the wrong place."""
    files = {p.name: p for p in (ROOT / "scripts").iterdir() if p.is_file()}
    assert "setup.sh" in files
    reached, todo = {"setup.sh"}, ["setup.sh"]
    while todo:
        text = files[todo.pop()].read_text(encoding="utf-8")
        for name in files.keys() - reached:
            if f"scripts/{name}" in text:
                reached.add(name)
                todo.append(name)
    stray = sorted(files.keys() - reached - {"README.md"})
    assert not stray, (
        f"{stray} in scripts/ but not run by setup.sh: benchmarks go in bench/, studies in "
        "studies/ (scripts/README.md)"
    )


def test_no_benchmark_edits_sys_path() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("bench", "studies")
        for path in sorted((ROOT / folder).glob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "sys.path" in line or "noqa: E402" in line
    ]
    assert not offenders, f"run with `python -m` instead (scripts/README.md): {offenders}"


def test_tests_run_benchmarks_but_never_import_them() -> None:
    """One direction: benchmarks may use the test doubles (tests.fakes); a test may start a
    benchmark as a process (`python -m bench.fault_suite`) but never imports one."""
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if line.lstrip().startswith(
            ("from bench", "import bench", "from studies", "import studies")
        )
    ]
    assert not offenders, offenders


def test_there_are_benchmarks_and_studies() -> None:
    assert len([m for m in MODULES if m.startswith("bench.")]) >= 10, MODULES
    assert len([m for m in MODULES if m.startswith("studies.")]) >= 3, MODULES


@pytest.mark.parametrize("module", MODULES)
def test_each_starts_with_python_m_from_the_repository_root(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage: "), done.stdout[:500]
