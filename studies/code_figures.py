"""Structure figures anyone can recompute from the code (issue 19's "must show").

    python -m studies.code_figures [--root DIR] [--top 10]

Prints, from the source text alone (stdlib `ast`, nothing of the package is imported, so
it runs on any revision: `git worktree add /tmp/old REV && python -m studies.code_figures
--root /tmp/old`):
- the longest functions and methods in server/ and clients/ (lines from `def` to the
  last line of the body, decorators excluded; nested functions count on their own too);
- how many of the package's own modules the module defining `class Session` imports
  (anywhere in the file, inside functions too; `TYPE_CHECKING` imports included);
- the size in lines of the module defining `class Pipeline` (pipeline.py), and its
  longest functions.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

FOLDERS = ("server", "clients")


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["synconfroute", *parts])


def _files(root: Path) -> dict[str, Path]:
    return {
        _module_name(root, p): p
        for folder in FOLDERS
        for p in sorted((root / folder).rglob("*.py"))
        if ".venv" not in p.parts
    }


def functions(root: Path) -> list[tuple[int, str]]:
    """(length in lines, `path:line qualified.name`) for every function, longest first."""
    found: list[tuple[int, str]] = []
    for path in _files(root).values():
        tree = ast.parse(path.read_text(encoding="utf-8"))

        def walk(node: ast.AST, prefix: str, rel: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    name = f"{prefix}{child.name}"
                    length = (child.end_lineno or child.lineno) - child.lineno + 1
                    found.append((length, f"{rel}:{child.lineno} {name}"))
                    walk(child, name + ".", rel)
                elif isinstance(child, ast.ClassDef):
                    walk(child, f"{prefix}{child.name}.", rel)
                else:
                    walk(child, prefix, rel)

        walk(tree, "", str(path.relative_to(root)))
    found.sort(key=lambda f: (-f[0], f[1]))
    return found


def _imports(module: str, path: Path) -> set[str]:
    """Every import in the file, resolved to absolute names (`from . import x` gives both
    the package and package.x, as a submodule may be meant)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([node.module] if node.module else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def _defining(root: Path, cls: str) -> tuple[str, Path]:
    for name, path in _files(root).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.ClassDef) and n.name == cls for n in tree.body):
            return name, path
    raise SystemExit(f"no module defines class {cls}")


def own_imports(root: Path, cls: str) -> tuple[str, list[str], int]:
    """(module, the package's own modules it imports, how many modules the package has)."""
    files = _files(root)
    name, path = _defining(root, cls)
    # A package counts only when nothing below it was meant (`from . import x`).
    deps = {d for d in _imports(name, path) if d in files and d != name}
    deps = {d for d in deps if not any(o.startswith(d + ".") for o in deps)}
    server = [m for m in files if m.startswith("synconfroute.server.")]
    return name, sorted(deps), len(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    root = args.root.resolve()

    print(f"longest functions in server/ and clients/ (top {args.top}):")
    for length, where in functions(root)[: args.top]:
        print(f"  {length:4d}  {where}")

    name, deps, total = own_imports(root, "Session")
    server_deps = [d for d in deps if d.startswith("synconfroute.server.")]
    print(f"\n{name} (class Session) imports {len(server_deps)} of the {total} server modules")
    print(f"  and {len(deps) - len(server_deps)} client modules:")
    for d in deps:
        print(f"  {d}")

    pname, ppath = _defining(root, "Pipeline")
    lines = len(ppath.read_text(encoding="utf-8").splitlines())
    rel = ppath.relative_to(root)
    print(f"\n{pname} (class Pipeline): {rel}, {lines} lines; its longest functions:")
    for length, where in [f for f in functions(root) if f[1].startswith(f"{rel}:")][:5]:
        print(f"  {length:4d}  {where}")


if __name__ == "__main__":
    main()
