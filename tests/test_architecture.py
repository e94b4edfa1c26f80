"""The layering, enforced by import-linter: the contracts in .importlinter (layers of
server/, clients below server, pygls only in the protocol glue, pure modules without I/O,
`serve` without the evaluation, the package without tests/bench/studies), plus no import
cycles between modules.

The import graph is grimp's (import-linter's): it holds every import, at module level,
inside functions and under `if TYPE_CHECKING:`; an import inside a function is a
dependency all the same, it only runs later. The last tests break a contract on purpose,
in a copy of the package, and check that the linter says so.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / ".importlinter"
HALVES = {"server": "synconfroute.server", "clients": "synconfroute.clients"}


def _module_names() -> set[str]:
    """Every module of the package, from the files (server/x.py is synconfroute.server.x)."""
    names = {"synconfroute", "synconfroute.__main__"}
    for folder, package in HALVES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names.add(".".join([package, *parts]))
    return names


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph("synconfroute", cache_dir=None)


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Each import cycle found by a depth-first walk, as the chain of modules."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    found: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                found.append([*stack[stack.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def module_graph(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """Module -> the package's modules it imports. A module's own parent packages are
    imported before it anyway: not an edge."""
    ours = {m for m in graph.modules if m.split(".")[0] == "synconfroute"}
    return {
        m: {d for d in graph.find_modules_directly_imported_by(m) if d in ours}
        - {p for p in ours if m.startswith(p + ".")}
        for m in ours
    }


def test_the_graph_holds_every_module_of_the_package() -> None:
    """grimp reads the package through synconfroute/server and synconfroute/clients (the
    links); where they are missing it would check two files and call that kept."""
    seen = {m for m in _graph().modules if m.split(".")[0] == "synconfroute"}
    missing = _module_names() - seen
    assert not missing, (
        f"the import graph lacks {sorted(missing)[:5]}...: synconfroute/server and "
        "synconfroute/clients must link to server/ and clients/ (a clone without symlink "
        "support has text files there; clone with `git clone -c core.symlinks=true`)"
    )


def test_imports_inside_functions_are_in_the_graph() -> None:
    """The command line loads the evaluation only when `eval` runs: an import inside a
    function. The contracts see it (the layers allow it: commands is the top layer)."""
    details = _graph().get_import_details(
        importer="synconfroute.server.commands.cli", imported="synconfroute.server.evaluation.cli"
    )
    assert details, "grimp missed an import inside a function"
    assert all(d["line_contents"].startswith("from ..evaluation.cli import") for d in details)
    source = (ROOT / "server" / "commands" / "cli.py").read_text(encoding="utf-8")
    nested = [
        n.lineno
        for f in ast.walk(ast.parse(source))
        if isinstance(f, ast.FunctionDef)
        for n in ast.walk(f)
        if isinstance(n, ast.ImportFrom) and n.module == "evaluation.cli"
    ]
    assert {d["line_number"] for d in details} <= set(nested)


def test_the_import_contracts_hold() -> None:
    done = subprocess.run(
        [sys.executable, "-c", LINT, str(CONFIG)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout, done.stdout


def test_the_import_graph_has_no_cycles() -> None:
    found = cycles(module_graph(_graph()))
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_every_server_module_is_in_a_layer() -> None:
    """A module outside the layer packages would escape the layers contract."""
    config = CONFIG.read_text(encoding="utf-8")
    block = config.split("layers =", 1)[1].split("\n\n", 1)[0]
    layers = {name.strip() for line in block.splitlines() for name in line.split("|")} - {""}
    entry = {"synconfroute.server", "synconfroute.server.__main__"}  # the package and -m
    outside = [
        m
        for m in _module_names()
        if m.startswith("synconfroute.server.")
        and m not in entry
        and not any(m == layer or m.startswith(layer + ".") for layer in layers)
    ]
    assert not outside, f"modules in no layer of {CONFIG.name}: {sorted(outside)}"


IO_CALLS = {"open", "read_text", "write_text", "read_bytes", "write_bytes", "mkdir", "unlink"}


def test_pure_modules_do_no_file_io() -> None:
    """The 'pure' contract forbids the I/O modules; this catches what needs no import:
    builtin open() and pathlib's methods on a path handed in."""
    config = CONFIG.read_text(encoding="utf-8")
    block = config.split("[importlinter:contract:pure]", 1)[1]
    sources = block.split("source_modules =", 1)[1].split("forbidden_modules", 1)[0].split()
    offenders = []
    for module in sources:
        rel = Path(*module.split(".")[1:])
        for path in [ROOT / rel.with_suffix(".py"), *sorted((ROOT / rel).glob("**/*.py"))]:
            if not path.is_file():
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call):
                    f = node.func
                    name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
                    if name in IO_CALLS:
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}()")
    assert not offenders, offenders


# -- a deliberate violation, in a copy --------------------------------------------
# lint-imports on a copy of the package with one bad import added: the copy is real
# files (no links), first on the path, so grimp reads it and not this checkout.
LINT = textwrap.dedent(
    """
    import sys
    from importlinter.cli import lint_imports
    sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))
    """
)


def _copy_with(tmp_path: Path, edits: dict[str, str]) -> Path:
    """A copy of the package in tmp_path/synconfroute, with `edits` appended to files."""
    dest = tmp_path / "synconfroute"
    shutil.copytree(ROOT / "synconfroute", dest, symlinks=True)
    for folder in HALVES:
        (dest / folder).unlink()
        shutil.copytree(ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for rel, code in edits.items():
        with (dest / rel).open("a", encoding="utf-8") as f:
            f.write("\n\n" + textwrap.dedent(code))
    shutil.copy(CONFIG, tmp_path / ".importlinter")
    return tmp_path


def _lint(copy: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    return subprocess.run(
        [sys.executable, "-c", LINT, str(copy / ".importlinter")],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_deliberate_violation_inside_a_function_breaks_the_contracts(tmp_path: Path) -> None:
    copy = _copy_with(
        tmp_path,
        {
            # clients reaching up into the protocol, late (inside a function)
            "clients/types.py": """
                def _late_reach():
                    from synconfroute.server.protocol import lsp
                    return lsp
            """,
            # the vocabulary (lowest server layer) importing the routing core
            "server/vocab/kinds.py": """
                def _upward():
                    from ..routing import pipeline
                    return pipeline
            """,
            # a thread in the vocabulary (a pure layer)
            "server/vocab/positions.py": """
                def _background():
                    import threading
                    return threading
            """,
            # pygls outside the protocol glue
            "server/routing/cache.py": """
                def _glue_elsewhere():
                    import pygls
                    return pygls
            """,
        },
    )
    done = _lint(copy)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "Contracts: 2 kept, 4 broken." in out, out
    for broken in (
        "clients never import server (the backends know nothing of routing or editors) BROKEN",
        "pygls and lsprotocol only in the protocol glue (server/protocol) BROKEN",
        "network or plotting BROKEN",
    ):
        assert broken in out, out
    assert "server/ layers" in out and "(clients lowest) BROKEN" in out, out
    # each report names the offending line
    assert "synconfroute.clients.types -> synconfroute.server.protocol.lsp (l." in out, out
    assert "synconfroute.server.vocab.kinds -> synconfroute.server.routing.pipeline" in out, out
    assert "synconfroute.server.routing.cache -> pygls (l." in out, out
    assert "synconfroute.server.vocab.positions -> threading (l." in out, out


def test_the_unmodified_copy_keeps_the_contracts(tmp_path: Path) -> None:
    """The copy itself is sound: the failures above come from the added imports alone."""
    done = _lint(_copy_with(tmp_path, {}))
    assert done.returncode == 0 and "0 broken" in done.stdout, done.stdout + done.stderr


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path: Path) -> None:
    copy = _copy_with(
        tmp_path,
        {
            "server/evaluation/datasets.py": """
                def _late():
                    from . import download
                    return download
            """
        },
    )
    script = textwrap.dedent(
        """
        import grimp
        from tests.test_architecture import cycles, module_graph
        for c in cycles(module_graph(grimp.build_graph("synconfroute", cache_dir=None))):
            print(" -> ".join(c))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=copy, env=env, capture_output=True, text=True,
        timeout=300, check=True,
    )  # fmt: skip
    assert done.stdout.splitlines() == [
        "synconfroute.server.evaluation.datasets -> synconfroute.server.evaluation.download"
        " -> synconfroute.server.evaluation.datasets"
    ], done.stdout


@pytest.mark.parametrize("module", ["synconfroute.server.protocol.lsp", "synconfroute"])
def test_serving_loads_no_evaluation_module(module: str) -> None:
    """The evaluation ships in the wheel for `synconfroute eval` and `calibrate`; the
    language server never loads it (also at run time, not only in the graph)."""
    code = (
        f"import sys, {module}; import synconfroute.server.commands.cli;"
        "print(sorted(m for m in sys.modules if '.evaluation' in m))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.strip() == "[]", out
