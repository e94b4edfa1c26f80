"""Definition recall in the prompt each tier actually receives (issue 21).

Not what the context assembler ranks: what reaches the model. Each task goes through
the real session and pipeline (the workspace index built from the tree, the document
opened as the editor would hold it, an inline completion requested at the cursor), and
the request the tier's backend sends is read where it arrives: the recording fakes of
tests/fakes (a fake Ollama for the local tier, a fake vLLM for the remote one), over
real sockets. The local backend is the real OllamaBackend, the remote the real
OpenAIBackend; the fake local model answers unconfidently when the remote prompt is
measured, so the request escalates.

Tasks: in the real trees of ../shared/data/repos (click: Python; gson: Java), a line
that calls a function (or constructs a class) defined in ANOTHER file of the tree and
not in its own; the line is masked (its code removed, its indentation kept) and the
cursor put there, so the callee's name is not typed yet, as in the check of issue 21.
The callee must plausibly be the tree's: its name imported by the file, or the file
naming the module or class that defines it (the definition file's stem: `utils`,
`JsonReader`); without that, `s.charAt(i)` would count as a call of whatever `charAt`
gson defines. `--any-name` drops this filter (the first numbers of issue 21's notes).
Hit: the prompt holds the definition's header up to the callee's name (e.g. `def
get_text_stream`, `public JsonElement toJsonTree`), whitespace collapsed, of any of
the name's definitions in other files. Only the current file is open (the worst case:
no neighbouring tabs); the index holds the whole tree.

Buckets by the current file's length: < 200, 200-600, > 600 lines; up to --per-bucket
tasks each (seed 11). The local total is `local.max_prompt_chars` (10,000): the server
lowers it to what the real model's measured speed prefills in `local.first_token_target_ms`
(issue 26), which a fake cannot tell.

Variants (one run, side by side):
- `local`: the defaults (context on for the local tier);
- `local file-only`: `completion.context = "file"` (the old default);
- `local bodies` / `local signatures`: the packing alternatives, at the default budget;
- `local old ranking`: imported names not yet seen near the cursor ranked as before;
- `local 256 tok` / `local 1024 tok`: other budgets for context;
- `remote (send_context on)`: the remote tier's request when the user sends context
  there; `remote (default)`: what it carries by default (nothing of other files).

    .venv/bin/python -m bench.context_prompt [--per-bucket 40] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.session.session import Session
from synconfroute.server.settings import config
from synconfroute.server.syntax.languages import detect_language
from synconfroute.server.workspace import crossfile
from synconfroute.server.workspace.workspace_index import WorkspaceIndex, source_files
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript

REPOS = Path("/work/shared/data/repos")
BUCKETS = (("<200", 0, 200), ("200-600", 200, 600), (">600", 600, 10**9))
_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_SKIP = re.compile(r"^\s*(import|from|package|#|//|\*|/\*|@|def |class |public |private )")
_WS = re.compile(r"\s+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
REMOTE_MODEL = "Qwen/Qwen2.5-Coder-32B-Instruct"
CONFIDENT = TokenScript.of(" x", logprob=-0.01)
LOW = TokenScript.of(" x", " y", " z", logprob=-3.0)


def header(text: str, name: str) -> str | None:
    """A definition's header up to its name, whitespace collapsed."""
    sig = crossfile.signature(text)
    m = re.search(rf"\b{re.escape(name)}\b", sig)
    return _WS.sub(" ", sig[: m.end()]) if m else None


def stem(path: str) -> str:
    return Path(path).stem


def tasks_for(
    root: str, per_bucket: int, rng: random.Random, *, any_name: bool = False
) -> list[dict[str, Any]]:
    index = WorkspaceIndex()
    index.build([root])
    by_bucket: dict[str, list[dict[str, Any]]] = {b[0]: [] for b in BUCKETS}
    for path, _ in source_files(root, index.max_file_bytes):
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        lines = text.split("\n")
        bucket = next(b[0] for b in BUCKETS if b[1] <= len(lines) < b[2])
        own = {s.name for s in index.symbols_of(path)}
        idents = set(_IDENT.findall(text))
        imported = crossfile.imports(detect_language(None, path) or "", text, path)[0]
        for i, line in enumerate(lines):
            if _SKIP.match(line) or not line.strip():
                continue
            for name in _CALL.findall(line):
                if name in own or len(name) < 3 or name in crossfile._KEYWORDS:
                    continue
                defs = [s for s in index.lookup(name) if s.path != path]
                if not any_name:  # the callee's module or class is named in the file
                    defs = [s for s in defs if name in imported or stem(s.path) in idents]
                heads = {h for s in defs if (h := header(s.text, name))}
                if not heads:
                    continue
                indent = len(line) - len(line.lstrip())
                masked = [*lines[:i], line[:indent], *lines[i + 1 :]]
                by_bucket[bucket].append(
                    {
                        "path": path,
                        "lines": len(lines),
                        "bucket": bucket,
                        "text": "\n".join(masked),
                        "line": i,
                        "col": indent,
                        "name": name,
                        "heads": sorted(heads),
                    }
                )
                break  # the first cross-file call of the line
    out = []
    for items in by_bucket.values():
        rng.shuffle(items)
        out += items[:per_bucket]
    return out


def hit(prompt: str, task: dict[str, Any]) -> bool:
    flat = _WS.sub(" ", prompt)
    return any(h in flat for h in task["heads"])


def _prompt_of(fake: FakeOllama | FakeOpenAI, route: str) -> str:
    body = json.loads(fake.received(route)[-1].body)
    return str(body.get("prompt", "")) + "\n" + str(body.get("suffix", ""))


async def run_variant(
    root: str,
    tasks: list[dict[str, Any]],
    tweak: Callable[[config.Settings], config.Settings],
    tier: str,
) -> dict[str, Any]:
    # The total is the configured one: the fake Ollama's reported timings are fiction,
    # and the measured budget (issue 26) depends on the real model's speed.
    s = config.with_values(
        config.Settings(), {"editor": {"debounce_ms": 0}, "local": {"first_token_target_ms": 0}}
    )
    s = tweak(s)
    with (
        FakeOllama(default=LOW if tier == "remote" else CONFIDENT) as local,
        FakeOpenAI() as remote,
    ):
        remote.script(TokenScript.of("x", logprob=-0.01), always=True)

        def make(st: config.Settings) -> Pipeline:
            r = None
            if tier == "remote":
                r = OpenAIBackend([remote.base_url], REMOTE_MODEL, api_key_env=None)
            return Pipeline(
                st, OllamaBackend(local.url, "qwen2.5-coder:3b", timeout=10), r,
                make_gate(st.routing),
            )  # fmt: skip

        loaded = config.Loaded(s, (), config.default_config_path(), False)
        session = Session(loaded, make_pipeline=make, roots=lambda: [Path(root).as_uri()])
        index = session.start_index()
        for _ in range(1200):  # the index builds in a worker thread
            if index is None or index.ready:
                break
            await asyncio.sleep(0.05)
        per: dict[str, list[int]] = {b[0]: [] for b in BUCKETS}
        sizes: dict[str, list[int]] = {b[0]: [] for b in BUCKETS}
        route = "/v1/completions" if tier == "remote" else "/api/generate"
        fake: FakeOllama | FakeOpenAI = remote if tier == "remote" else local
        for task in tasks:
            uri = Path(task["path"]).as_uri()
            session.open(uri, task["text"], detect_language(None, task["path"]))
            before = len(fake.received(route))
            await session.complete(uri, task["line"], task["col"], invoked=True)
            session.close(uri)
            if len(fake.received(route)) == before:
                per[task["bucket"]].append(0)  # no request reached the tier
                continue
            prompt = _prompt_of(fake, route)
            per[task["bucket"]].append(int(hit(prompt, task)))
            sizes[task["bucket"]].append(len(prompt))
        await session.shutdown()
    return {
        b: {
            "n": len(v),
            "recall": (sum(v) / len(v)) if v else None,
            "prompt_chars_p50": sorted(sizes[b])[len(sizes[b]) // 2] if sizes[b] else None,
        }
        for b, v in per.items()
    }


def _set(**kw: Any) -> Callable[[config.Settings], config.Settings]:
    def tweak(s: config.Settings) -> config.Settings:
        changes: dict[str, dict[str, Any]] = {}
        for dotted, value in kw.items():
            section, key = dotted.split("__")
            changes.setdefault(section, {})[key] = value
        return config.with_values(s, changes)

    return tweak


VARIANTS: list[tuple[str, str, Callable[[config.Settings], config.Settings], dict[str, Any]]] = [
    ("local (defaults)", "local", _set(), {}),
    ("local file-only (old default)", "local", _set(completion__context="file"), {}),
    ("local bodies packing", "local", _set(), {"PACK": "bodies"}),
    ("local signatures only", "local", _set(), {"PACK": "signatures"}),
    ("local old ranking", "local", _set(), {"IMPORTED_UNSEEN": 0.3, "MEMBER_WEIGHT": 0.0}),
    ("local no class members", "local", _set(), {"MEMBER_WEIGHT": 0.0}),
    ("local context 512 tok", "local", _set(local__context_tokens=512), {}),
    ("local context 2048 tok", "local", _set(local__context_tokens=2048), {}),
    ("local total 4000 chars", "local", _set(local__max_prompt_chars=4000), {}),
    ("remote (defaults: send_context off)", "remote", _set(), {}),
    ("remote (send_context on)", "remote", _set(remote__send_context=True), {}),
]


async def run_all(roots: dict[str, tuple[str, list[dict[str, Any]]]], only: str) -> dict:
    results: dict[str, Any] = {}
    for repo, (root, tasks) in roots.items():
        for name, tier, tweak, patch in VARIANTS:
            if only and not any(name.startswith(o) for o in only.split(",")):
                continue
            saved = {k: getattr(crossfile, k) for k in patch}
            for k, v in patch.items():
                setattr(crossfile, k, v)
            t0 = time.perf_counter()
            try:
                res = await run_variant(root, tasks, tweak, tier)
            finally:
                for k, v in saved.items():
                    setattr(crossfile, k, v)
            results[f"{repo} | {name}"] = res
            cells = "  ".join(
                f"{b}: {r['recall']:.2f} (n={r['n']}, {r['prompt_chars_p50']} ch)"
                if r["recall"] is not None
                else f"{b}: -"
                for b, r in res.items()
            )
            print(f"{repo:6} {name:38} {cells}  [{time.perf_counter() - t0:.0f} s]", flush=True)
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-bucket", type=int, default=40)
    ap.add_argument("--repos", default="click,gson")
    ap.add_argument("--only", default="", help="comma-separated variant name prefixes")
    ap.add_argument("--json", default="")
    ap.add_argument(
        "--any-name",
        action="store_true",
        help="count calls of any name defined in another file (JDK calls such as "
        "`s.charAt(i)` included when the tree defines a `charAt` somewhere)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        roots = {}
        for repo in args.repos.split(","):
            tar = next(REPOS.glob(f"{repo}*.tar.gz"))
            with tarfile.open(tar) as tf:
                tf.extractall(f"{tmp}/{repo}", filter="data")
            root = str(next(p for p in Path(f"{tmp}/{repo}").iterdir() if p.is_dir()))
            roots[repo] = (
                root,
                tasks_for(root, args.per_bucket, random.Random(11), any_name=args.any_name),
            )
        results = asyncio.run(run_all(roots, args.only))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
