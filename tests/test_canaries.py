"""The canary suite (issue 27): unique markers in every kind of private source, reached by
every path form, on every escalation path, through the real server over stdio. No marker
may appear in any remote body, in the server's logs (stderr, the log file, the messages
it sends the editor) or in the ledger.

Sources (tests/privacy_workspace.py): a never_send file, a built-in secret file (.env), a
.gitignore'd file, a file outside the workspace, a private file reached only through a
symlink. Path forms: the real path, a symlinked file, `./`, `..`, percent-encoding, a
watched-file event (context only), each under the workspace root and under a symlinked
root. Case variants: this file system does not fold case (probed below); the folding
rules are tested directly in tests/test_egress.py. Escalation paths: low confidence,
syntax invalid, local failure, local timeout. Roles: the private file as the current
document (its window), and as context for a public file.

One server per root, many requests; the figures are printed (pytest -s).
"""

from __future__ import annotations

import asyncio
import itertools
import os
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as t

from synconfroute.server.workspace import privacy
from tests import privacy_workspace as pw
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import capabilities, inline_request, open_doc, start, stop

pytestmark = pytest.mark.timeout(600)

REMOTE = TokenScript.of(" value", " + 1", logprob=-0.01)
ESCALATIONS: dict[str, TokenScript] = {
    "low-confidence": TokenScript.of(" value", " * 2", logprob=-4.0),
    "syntax-invalid": TokenScript.of(" a", " +", " (b", logprob=-0.05),
    "local-failure": TokenScript(status=500, body={"error": "model runner has stopped"}),
    "local-timeout": TokenScript.of(" value", logprob=-0.05, first_delay=0.5),
}
FIRST_TOKEN_MS = 150
_version = itertools.count(2)


def forms(base: Path, ws: Path, root: Path, p: pw.Private) -> dict[str, str]:
    """URIs naming private source `p`, as an editor or file watcher might send them;
    in-workspace names are spelled under `root` (the workspace root or its link)."""
    under = str(root)
    real = base / p.rel
    inside = str(real).startswith(str(ws) + "/")
    rel = str(real.relative_to(ws)) if inside else p.alias  # outside: through its link
    out = {
        "real": real.as_uri() if not inside else f"file://{under}/{rel}",
        "symlinked-file": f"file://{under}/{p.alias}",
        "dot": f"file://{under}/./{rel}",
        "dotdot": f"file://{under}/lib/../{rel}",
        "percent": f"file://{under}/{rel}".replace(rel[0], f"%{ord(rel[0]):02X}", 1),
    }
    return out


async def edit_and_ask(
    client: Any, local: FakeOllama, uri: str, pos: tuple[int, int], path: str
) -> Any:
    """A completion that escalates by `path`; the text below the cursor changes first,
    so no answer comes from the cache."""
    n = next(_version)
    client.text_document_did_change(
        t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(version=n, uri=uri),
            content_changes=[
                t.TextDocumentContentChangePartial(
                    range=t.Range(t.Position(pos[0] + 1, 0), t.Position(pos[0] + 400, 0)),
                    text=f"# request {n}\n",
                )
            ],
        )
    )
    local.script(ESCALATIONS[path])
    return await client.text_document_inline_completion_async(inline_request(uri, t.Position(*pos)))


def bodies(remote: FakeOpenAI) -> list[str]:
    return [r.body.decode("utf-8", "replace") for r in remote.received("/v1/completions")]


async def run_matrix(
    tmp_path: Path, local: FakeOllama, remote: FakeOpenAI, use_link_root: bool
) -> dict[str, Any]:
    base = tmp_path / "base"
    ws = pw.build(base)
    root = base / "ws_link" if use_link_root else ws
    state = tmp_path / "state"
    cfg = pw.write_settings(
        tmp_path,
        local_url=local.url,
        remote_url=remote.base_url,
        first_token_ms=FIRST_TOKEN_MS,
    )
    client, _ = await start(
        cfg,
        capabilities("visual-studio-code", inline=True),
        root=root,
        env={"XDG_STATE_HOME": str(state), "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    counts = {"window": 0, "context": 0, "escalated-public": 0}
    cells: set[tuple[str, str, str, str]] = set()
    try:
        app = f"file://{root}/app.py"
        open_doc(client, app, pw.APP)
        # The index is built (the public control reaches a remote prompt).
        for _ in range(100):
            await edit_and_ask(client, local, app, pw.APP_CURSOR, "syntax-invalid")
            if any(pw.PUBLIC_MARKER in b for b in bodies(remote)):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"no public context in a remote prompt: {bodies(remote)[:1]}")
        for p in pw.PRIVATE:
            text = pw.body(p.func, p.marker)
            for form, uri in forms(base, ws, root, p).items():
                open_doc(client, uri, text)  # the editor holds it under this name
                for path in ESCALATIONS:
                    # As the current document: its own window never leaves.
                    before = len(bodies(remote))
                    await edit_and_ask(client, local, uri, pw.PRIVATE_CURSOR, path)
                    assert len(bodies(remote)) == before, (p.kind, form, path)
                    counts["window"] += 1
                    cells.add((p.kind, form, path, "window"))
                    # As context for the public file (an open neighbour, the index).
                    before = len(bodies(remote))
                    await edit_and_ask(client, local, app, pw.APP_CURSOR, path)
                    assert len(bodies(remote)) == before + 1, (p.kind, form, path)
                    counts["context"] += 1
                    counts["escalated-public"] += 1
                    cells.add((p.kind, form, path, "context"))
            # A watched-file event naming the source's real path.
            client.workspace_did_change_watched_files(
                t.DidChangeWatchedFilesParams(
                    changes=[
                        t.FileEvent(uri=(base / p.rel).as_uri(), type=t.FileChangeType.Changed)
                    ]
                )
            )
            await asyncio.sleep(0.2)
            for path in ESCALATIONS:
                await edit_and_ask(client, local, app, pw.APP_CURSOR, path)
                counts["context"] += 1
                cells.add((p.kind, "watched-event", path, "context"))
        status = await client.workspace_execute_command_async(
            t.ExecuteCommandParams("synconfroute.status", [])
        )
    finally:
        await stop(client)
    sent = bodies(remote)
    logs = "\n".join(m.message for m in client.messages)
    logs += "\n".join(str(m) for m in getattr(client, "log_messages", []))
    log_files = list(state.rglob("*.log*"))
    assert log_files, "the server wrote no log file"
    logs += "\n".join(f.read_text(encoding="utf-8", errors="replace") for f in log_files)
    ledger = (tmp_path / "ledger.jsonl").read_text(encoding="utf-8")
    return {
        "sent": sent,
        "logs": logs,
        "ledger": ledger,
        "counts": counts,
        "cells": cells,
        "status": status,
    }


@pytest.mark.parametrize("link_root", [False, True], ids=["root", "symlinked-root"])
async def test_no_marker_leaves_by_any_path(
    tmp_path: Path,
    fakes: tuple[FakeOllama, FakeOpenAI],
    capfd: pytest.CaptureFixture[str],
    link_root: bool,
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    got = await run_matrix(tmp_path, local, remote, link_root)
    stderr = capfd.readouterr().err
    assert "workspace index" in stderr  # the server's stderr was captured
    leaked = {
        "remote bodies": pw.leaks("\n".join(got["sent"])),
        "logs": pw.leaks(got["logs"] + stderr),
        "ledger": pw.leaks(got["ledger"]),
    }
    sources = {c[0] for c in got["cells"]}
    form_names = {c[1] for c in got["cells"]}
    paths = {c[2] for c in got["cells"]}
    requests = got["counts"]["window"] + got["counts"]["context"]
    print(
        f"\ncanaries ({'symlinked root' if link_root else 'root'}): {len(sources)} sources x "
        f"{len(form_names)} path forms x {len(paths)} escalation paths x 2 roles = "
        f"{len(got['cells'])} cells, {requests}"
        f" requests, {len(got['sent'])} remote bodies; leaked: {leaked}"
    )
    assert leaked == {"remote bodies": [], "logs": [], "ledger": []}
    # The controls: the suite did escalate, and public context did leave.
    assert got["counts"]["escalated-public"] == len(sources) * 5 * len(paths)
    assert all(pw.PUBLIC_MARKER in b for b in got["sent"][-5:]) or any(
        pw.PUBLIC_MARKER in b for b in got["sent"]
    )
    assert got["ledger"].count("\n") >= got["counts"]["window"]


def test_case_folding_on_this_file_system(tmp_path: Path) -> None:
    """Case variants are a path form only where the file system folds case."""
    (tmp_path / "Case").mkdir()
    folds = os.path.exists(tmp_path / "CASE")
    assert privacy.folds_case(str(tmp_path / "Case")) is folds
    print(f"\nthis file system folds case: {folds}")
