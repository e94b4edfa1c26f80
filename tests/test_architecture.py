"""The layering DESIGN.md promises, checked on the source: no import cycles, `clients`
never imports `server`, and only the protocol glue imports pygls.

Module-level imports only (an import inside a function runs late and is how a lower
layer may reach a higher one on purpose, e.g. doctor building backends); imports under
`if TYPE_CHECKING:` are not imports at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("server", "clients")  # their import names are synconfroute.server, .clients
GLUE = {
    "synconfroute.server.protocol.lsp",
    "synconfroute.server.protocol.transport",
}  # the only modules that may import pygls


def _module_name(path: Path) -> str:
    """The import name: server/x.py is synconfroute.server.x (one import package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["synconfroute", *parts])


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if node.level == 0:
        base = node.module or ""
    else:
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join(parts[:keep] + ([node.module] if node.module else []))
    # `from . import x` may name submodules: count both the package and base.x
    return [base] + [f"{base}.{a.name}" for a in node.names]


def _top_level_imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.update(_resolve(module, is_package, node))
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for pkg in FOLDERS for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        deps = _top_level_imports(path, name)
        # A module's own parent packages are imported before it anyway: not an edge.
        graph[name] = {d for d in deps if d in files and d != name and not name.startswith(d + ".")}
    return graph


def _external(path: Path, module: str) -> set[str]:
    return {d.split(".")[0] for d in _top_level_imports(path, module)}


def test_the_import_graph_has_no_cycles() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_clients_never_import_server() -> None:
    offenders = [
        f"{name} imports {dep}"
        for name, deps in _graph().items()
        if name.startswith("synconfroute.clients")
        for dep in deps
        if dep.startswith("synconfroute.server")
    ]
    assert not offenders, offenders


def test_only_the_protocol_glue_imports_pygls() -> None:
    offenders = []
    for pkg in FOLDERS:
        for path in (ROOT / pkg).rglob("*.py"):
            name = _module_name(path)
            if name not in GLUE and {"pygls", "lsprotocol"} & _external(path, name):
                offenders.append(name)
    assert not offenders, f"pygls/lsprotocol imported outside {sorted(GLUE)}: {offenders}"


# Layers, lowest first: a module may import only from its own layer or below. Each layer
# of server/ is one subpackage, so `ls server/` shows the floor plan: the words every layer
# shares; the syntax check; the settings; what the user did with decisions (learning); the
# open documents and workspace; one request end to end (routing); the offline evaluation;
# one editor connection (session); the protocol glue; the command line.
LAYERS: list[tuple[str, ...]] = [
    ("synconfroute.clients",),
    ("synconfroute.server.vocab",),
    ("synconfroute.server.syntax",),
    ("synconfroute.server.settings",),
    ("synconfroute.server.learning",),
    ("synconfroute.server.workspace",),
    ("synconfroute.server.routing",),
    ("synconfroute.server.evaluation",),
    ("synconfroute.server.session",),
    ("synconfroute.server.protocol",),
    (
        "synconfroute.server.commands",
        "synconfroute.server.__main__",
        "synconfroute.server",
    ),  # entry points (and the package itself)
]


def _layer(module: str) -> int:
    best = (-1, -1)  # (prefix length, layer): the most specific prefix wins
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best[0]:
                best = (len(p), i)
    assert best[1] >= 0, f"{module} is in no layer: add it to LAYERS"
    return best[1]


def test_no_module_imports_a_higher_layer() -> None:
    upward = [
        f"{name} (layer {_layer(name)}) imports {dep} (layer {_layer(dep)})"
        for name, deps in _graph().items()
        for dep in deps
        if _layer(dep) > _layer(name)
    ]
    assert not upward, "\n".join(upward)
