"""One digest of every prompt, plan and privacy verdict over many real requests: run it
in two checkouts (before and after a change that must not change them) and compare.

    PYTHONHASHSEED=0 .venv/bin/python -m bench.plan_digest [--requests 300] [--source DIR]

A copy of server/ and tests/ of a checkout (--source: the same one in both runs; by
default this one) is the workspace (one folder, with its
own never_send), plus a secrets/ folder and a folder reached through a symlink. The real
session opens 40 of its files, builds the workspace index, edits 10 of them (recent
edits), then, at random cursors, builds each request's context and plans it for both
tiers as the pipeline does (the local tier's `sequence.plan`, the remote tier's
`plan_tier` with `remote.send_context` on). Into the digest go each request as it would
be sent (prefix, suffix, other files' code, stops, budgets, its `PromptPlan`: every
source's path and resolved real path, the roots, the folders' rules), the context notes,
the remote plan's egress verdict, and the folders holding the file. PYTHONHASHSEED=0:
ranking ties follow set order, which the hash seed changes from run to run.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent


def prepare(source: Path, ws: Path) -> list[tuple[Path, str]]:
    """The workspace under `ws`, and the files the editor opens (path, text)."""
    for part in ("server", "tests"):
        shutil.copytree(source / part, ws / part, ignore=shutil.ignore_patterns("__pycache__"))
    (ws / "secrets").mkdir()
    shutil.copy(source / "server/workspace/egress.py", ws / "secrets/keys.py")
    (ws / "linked").symlink_to(ws / "server/routing")
    rng = random.Random(7)
    files = sorted(p for p in ws.rglob("*.py") if "__pycache__" not in p.parts)
    picked = [*rng.sample(files, 40), ws / "secrets/keys.py", ws / "linked/planner.py"]
    return [(p, p.read_text(encoding="utf-8")) for p in picked]


async def run(requests: int, ws: Path, opened: list[tuple[Path, str]]) -> None:
    from synconfroute.clients.ollama import OllamaBackend
    from synconfroute.server.routing import planner, sequence
    from synconfroute.server.routing.gate import make_gate
    from synconfroute.server.routing.pipeline import Pipeline
    from synconfroute.server.session import folders
    from synconfroute.server.session.session import Edit, Session
    from synconfroute.server.settings import config
    from synconfroute.server.workspace import egress

    settings = config.with_values(
        config.Settings(),
        {
            "editor": {"debounce_ms": 0},
            "completion": {"recent_edits": True},
            "remote": {"send_context": True, "model": "m", "url": "http://127.0.0.1:9"},
            "privacy": {"never_send": ["secrets/**", "**/gating.py"]},
        },
    )

    def make(s: config.Settings) -> Pipeline:
        local = OllamaBackend("http://127.0.0.1:9", "qwen2.5-coder:3b")
        return Pipeline(s, local, None, make_gate(s.routing))

    loaded = config.Loaded(settings, (), config.default_config_path(), False)
    session = Session(loaded, make_pipeline=make, roots=lambda: (ws.as_uri(),))
    session.expect_folder_configuration([str(ws)])
    session.apply_folder_configuration(str(ws), {"privacy": {"never_send": ["**/cache.py"]}})
    rng = random.Random(8)
    picked = [p for p, _ in opened]
    for p, text in opened:
        session.open(p.as_uri(), text, "python", None)
    first = session.docs.document(picked[0].as_uri())
    assert first is not None
    session.context.start_index(session.settings_for(first))
    await asyncio.gather(*list(session._closing))  # the index, built
    for p in picked[:10]:
        st = session.docs.document(p.as_uri())
        assert st is not None
        k = min(st.text.text.count("\n"), 5)
        session.change(p.as_uri(), [Edit("    extra_call(value)\n", (k, 0), (k, 0))])
    pipe = await session.pipeline()
    digest = hashlib.sha256()
    verdicts: Counter[str] = Counter()
    roots = [str(ws), str(ws / "server"), str(ws / "linked")]
    for _ in range(requests):
        p = rng.choice(picked)
        st = session.docs.document(p.as_uri())
        assert st is not None
        lines = st.text.text.split("\n")
        line = rng.randrange(len(lines))
        at = (line, rng.randint(0, len(lines[line])))
        s = session.settings_for(st)
        offset = st.text.offset(*at)
        window = session.context.window(st, offset, s)
        snapshot = (st.text.text, st.text.version)
        ctx = session.context.build(window, st, snapshot, offset, at, s, blocking_gate=False)
        ctx = attrs.evolve(ctx, invoked=True)
        env = pipe.planning(ctx)
        req = sequence.plan(ctx, session.rules(s), ("local", "remote"), 0.0, env)
        assert req.local is not None
        single = req.local.request.single_line
        remote = planner.plan_tier(ctx, "remote", None, env, deadline=1.0, single_line=single)
        for planned in (req.local, remote):
            # The plan as resolved (the local tier's only when asked: `TierRequest.plan`).
            whole = attrs.evolve(planned.request, plan=planned.plan)
            sent = attrs.asdict(whole, filter=lambda a, _: a.name != "deadline")
            digest.update(json.dumps(sent, sort_keys=True, default=repr).encode())
            digest.update(repr((planned.notes, planned.prompt_chars)).encode())
        verdict = egress.refusal(remote.plan, env.settings) or "sent"
        verdicts[verdict] += 1
        digest.update(verdict.encode())
        digest.update(repr(folders.holders(st.path, roots)).encode())
        digest.update(repr((len(ctx.crossfile), len(ctx.recent_edits), ctx.repo)).encode())
    await session.shutdown()
    print(f"{requests} requests, each planned for both tiers")
    print(f"remote egress verdicts: {dict(sorted(verdicts.items()))}")
    print(f"digest {digest.hexdigest()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--source", type=Path, default=ROOT, help="the checkout copied")
    args = ap.parse_args()
    # One path in every run: the plans name it.
    ws = Path(tempfile.gettempdir()) / "synconfroute-plan-digest"
    shutil.rmtree(ws, ignore_errors=True)
    ws.mkdir()
    try:
        opened = prepare(args.source.resolve(), ws)
        asyncio.run(run(args.requests, ws, opened))
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
