"""Cross-file context: retrieval recall, assembly speed, index build time and memory.

No model involved. Tasks come from real trees (../shared/data/repos: click, Python;
gson, Java): a line that calls or uses a symbol defined in ANOTHER file of the tree
(and not in its own file; keywords and common builtins skipped) is masked; the
cursor sits at the start of its code, the prefix is the lines above, the suffix the
lines below. A task is a hit when the assembled context holds the signature line of
one of that symbol's definitions (any of them: without type resolution the builder
cannot tell which one the line means; a name that is also a local variable, e.g. a
parameter `func`, still counts as a task).

Three settings:
- `none`: the current file only (today's prompts; recall 0 by construction);
- `open`: snippets of 4 other open documents (random files of the same folder);
- `workspace`: the workspace index (definitions) plus those open documents.

Then assembly latency (candidates + fit) on the trees and on a generated workspace of
10,000 files, and each index's build time and memory (tracemalloc, retained after the
build; the build time comes from a separate run without tracemalloc).

    python -m bench.crossfile [--tasks 300] [--files 10000]
"""

from __future__ import annotations

import argparse
import gc
import random
import re
import tarfile
import tempfile
import time
import tracemalloc
from pathlib import Path

from synconfroute.server.syntax.languages import detect_language
from synconfroute.server.workspace import crossfile
from synconfroute.server.workspace.workspace_index import WorkspaceIndex, source_files

REPOS = Path(__file__).resolve().parents[2] / "shared" / "data" / "repos"
if not REPOS.exists():
    REPOS = Path("/work/shared/data/repos")
BUDGETS = (512, 1024, 2048)
OPEN_DOCS = 4
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SKIP_LINE = re.compile(r"^\s*(import|from|package|#|//|\*|/\*|@|def |class |public |private )")


_WS = re.compile(r"\s+")


def _head(text: str, name: str) -> str:
    sig = crossfile.signature(text)
    m = re.search(rf"\b{re.escape(name)}\b", sig)
    return _WS.sub(" ", sig[: m.end()]) if m else ""


def build(root: str, traced: bool) -> tuple[WorkspaceIndex, float, int]:
    """(index, build seconds, bytes retained per tracemalloc or 0)."""
    gc.collect()
    if traced:
        tracemalloc.start()
    t0 = time.perf_counter()
    index = WorkspaceIndex()
    index.build([root])
    took = time.perf_counter() - t0
    retained = 0
    if traced:
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    return index, took, retained


def tasks_for(root: str, index: WorkspaceIndex, limit: int, rng: random.Random) -> list[dict]:
    out = []
    for path, _ in source_files(root, index.max_file_bytes):
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        lines = text.split("\n")
        own = {s.name for s in index.symbols_of(path)}
        for i, line in enumerate(lines):
            if _SKIP_LINE.match(line) or not line.strip():
                continue
            for name in _IDENT.findall(line):
                # Keywords and builtins (`type`, `len`) are not the cross-file symbol
                # even where a field elsewhere has that name.
                if name in own or len(name) < 3 or name in crossfile._KEYWORDS:
                    continue
                defs = [s for s in index.lookup(name) if s.path != path]
                if not defs:
                    continue
                indent = len(line) - len(line.lstrip())
                out.append(
                    {
                        "path": path,
                        "language": detect_language(None, path) or "",
                        "prefix": "\n".join(lines[:i]) + "\n" + line[:indent],
                        "suffix": "\n" + "\n".join(lines[i + 1 :]),
                        "name": name,
                        # The header up to the name, whitespace collapsed: found in a
                        # one-line signature and in a body alike (annotations aside).
                        "signatures": [_head(s.text, name) for s in defs],
                    }
                )
                break  # the first cross-file symbol of the line
    rng.shuffle(out)
    return out[:limit]


def open_docs_for(path: str, root: str, rng: random.Random) -> list[crossfile.OpenDoc]:
    folder = Path(path).parent
    same = sorted(str(p) for p in folder.iterdir() if p.is_file() and str(p) != path)
    same = [p for p in same if detect_language(None, p)]
    if len(same) < OPEN_DOCS:  # a small folder: fill up from the whole tree
        rest = sorted(p for p, _ in source_files(root, 1 << 20) if p != path and p not in same)
        same += rng.sample(rest, min(len(rest), OPEN_DOCS - len(same)))
    picked = rng.sample(same, min(OPEN_DOCS, len(same)))
    return [
        crossfile.OpenDoc(p, 1, Path(p).read_text(encoding="utf-8", errors="replace"))
        for p in picked
    ]


def assemble(
    task: dict,
    index: WorkspaceIndex | None,
    docs: list[crossfile.OpenDoc],
    cache: crossfile.SnippetCache,
    budget_tokens: int,
) -> str:
    window_prefix = task["prefix"][-4000:]
    ranked = crossfile.candidates(
        prefix=window_prefix,
        suffix=task["suffix"][:1000],
        path=task["path"],
        language=task["language"],
        index=index,
        open_docs=docs,
        snippets=cache,
        full_prefix=task["prefix"][:20000],
    )
    files = crossfile.fit(ranked, budget_tokens * crossfile.CHARS_PER_TOKEN, lambda p: True)
    return "\n".join(f.text for f in files)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def recall(name: str, root: str, n_tasks: int) -> None:
    rng = random.Random(11)
    _, build_s, _ = build(root, traced=False)
    index, _, retained = build(root, traced=True)
    f = index.figures()
    print(
        f"\n## {name}: {f['files']} files, {f['symbols']} symbols; index build "
        f"{build_s * 1000:.0f} ms, memory retained {retained / 2**20:.2f} MiB "
        f"(its own estimate {f['stored_bytes'] / 2**20:.2f} MiB)"
    )
    tasks = tasks_for(root, index, n_tasks, rng)
    docs = {t["path"]: open_docs_for(t["path"], root, random.Random(t["path"])) for t in tasks}
    cache = crossfile.SnippetCache(size=256)
    print(f"{len(tasks)} tasks\n")
    print("| setting | " + " | ".join(f"recall @ {b} tokens" for b in BUDGETS) + " |")
    print("|---|" + "---|" * len(BUDGETS))
    for setting in ("none", "open", "workspace"):
        row = []
        for budget in BUDGETS:
            hits = 0
            for t in tasks:
                if setting == "none":
                    continue  # the current file only: its own definitions are excluded
                ctx = assemble(
                    t, index if setting == "workspace" else None, docs[t["path"]], cache, budget
                )
                flat = _WS.sub(" ", ctx)
                hits += any(sig and sig in flat for sig in t["signatures"])
            row.append(f"{100 * hits / max(1, len(tasks)):.1f}% ({hits}/{len(tasks)})")
        print(f"| {setting} | " + " | ".join(row) + " |")
    times = []
    for t in tasks:
        t0 = time.perf_counter()
        assemble(t, index, docs[t["path"]], cache, 2048)
        times.append((time.perf_counter() - t0) * 1000)
    print(
        f"\nassembly (workspace, 2,048 tokens): p50 {pct(times, 0.5):.2f} ms, "
        f"p99 {pct(times, 0.99):.2f} ms"
    )


def generated(n_files: int, root: Path) -> None:
    """A workspace of `n_files` Python modules that import and call each other."""
    rng = random.Random(7)
    for i in range(n_files):
        pkg = root / f"pkg{i // 100}"
        pkg.mkdir(exist_ok=True)
        deps = [rng.randrange(n_files) for _ in range(3)]
        lines = [f"from pkg{d // 100}.mod{d} import func_{d}_0, Class{d}" for d in deps]
        lines.append(f"LIMIT_{i} = {i}")
        for k in range(4):
            lines += [
                f"def func_{i}_{k}(a, b):",
                f"    '''Compute {k} for module {i}.'''",
                f"    x = func_{deps[k % 3]}_0(a, b)",
                "    return x + a * b",
                "",
            ]
        lines += [
            f"class Class{i}:",
            "    size: int = 0",
            "    def method(self, y):",
            f"        return Class{deps[0]}().method(y) + func_{i}_1(y, 1)",
            "",
        ]
        (pkg / f"mod{i}.py").write_text("\n".join(lines), encoding="utf-8")


def big(n_files: int) -> None:
    with tempfile.TemporaryDirectory(prefix="xfile-gen-") as tmp:
        root = Path(tmp)
        generated(n_files, root)
        _, build_s, _ = build(str(root), traced=False)
        index, _, retained = build(str(root), traced=True)
        f = index.figures()
        print(
            f"\n## generated: {f['files']} files, {f['symbols']} symbols; index build "
            f"{build_s:.2f} s, memory retained {retained / 2**20:.1f} MiB "
            f"(its own estimate {f['stored_bytes'] / 2**20:.1f} MiB)"
        )
        rng = random.Random(3)
        cache = crossfile.SnippetCache(size=256)
        times = []
        for _ in range(300):
            i = rng.randrange(n_files)
            path = str(root / f"pkg{i // 100}" / f"mod{i}.py")
            text = Path(path).read_text(encoding="utf-8")
            cut = rng.randrange(len(text) // 2, len(text))
            task = {
                "path": path,
                "language": "python",
                "prefix": text[:cut],
                "suffix": text[cut:],
            }
            docs = [
                crossfile.OpenDoc(p, 1, Path(p).read_text(encoding="utf-8"))
                for p in (
                    str(root / f"pkg{j // 100}" / f"mod{j}.py")
                    for j in rng.sample(range(n_files), OPEN_DOCS)
                )
            ]
            t0 = time.perf_counter()
            assemble(task, index, docs, cache, 2048)
            times.append((time.perf_counter() - t0) * 1000)
        print(
            f"assembly (workspace, 2,048 tokens, 4 open documents, each new: no snippet "
            f"cache hit): p50 {pct(times, 0.5):.2f} ms, p99 {pct(times, 0.99):.2f} ms"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=300, help="tasks per tree")
    ap.add_argument("--files", type=int, default=10000, help="files of the generated workspace")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="xfile-repos-") as tmp:
        for tar in sorted(REPOS.glob("*.tar.gz")):
            with tarfile.open(tar) as tf:
                tf.extractall(tmp, filter="data")
        for sub in sorted(Path(tmp).iterdir()):
            recall(sub.name, str(sub), args.tasks)
    if args.files:
        big(args.files)
    print(f"\n(budgets counted at {crossfile.CHARS_PER_TOKEN} characters a token)")


if __name__ == "__main__":
    main()
