"""The canary suite (issue 27): unique markers in every kind of private source, reached by
every path form, on every escalation path, through the real server over stdio. No marker
may appear in any remote body, in the server's logs (stderr, the log file, the messages
it sends the editor) or in the ledger.

Sources (tests/privacy_workspace.py): a never_send file, a built-in secret file (.env), a
.gitignore'd file, a file outside the workspace, a private file reached only through a
symlink; and (issue 34) files git ignores by its other sources: a .gitignore above the
workspace folder, .git/info/exclude, core.excludesFile, a .gitignore that starts with a
byte-order mark (CRLF lines), an escaped `\\#name`. Path forms: the real path, a
symlinked file, `./`, `..`, percent-encoding, a watched-file event (context only), each
under the workspace root and under a symlinked root. Case variants: this file system
does not fold case (probed below); the folding rules are tested directly in
tests/test_egress.py. Escalation paths: low confidence, syntax invalid, local failure,
local timeout. Roles: the private file as the current document (its window), and as
context for a public file. Issue 34's folder classes (nested folders, a removed folder,
no folder, per-folder settings, a moved file) run in `test_folder_classes_leak_nothing`.

One server per root, many requests; the figures are printed (pytest -s).
"""

from __future__ import annotations

import asyncio
import itertools
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

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
    q = quote(rel)  # `#hash.py`: an editor percent-encodes what a URI cannot hold
    out = {
        "real": real.as_uri() if not inside else f"file://{under}/{q}",
        "symlinked-file": f"file://{under}/{p.alias}",
        "dot": f"file://{under}/./{q}",
        "dotdot": f"file://{under}/lib/../{q}",
        "percent": f"file://{under}/%{ord(rel[0]):02X}{quote(rel[1:])}",
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


# -- issue 34: the folder classes ----------------------------------------------------------

FOLDER_MARKERS = {
    "nested-folder": "CANARY_NESTED_2e81",  # ws/.gitignore pkg/gen/, folders ws and ws/pkg
    "per-folder-settings": "CANARY_PERFOLDER_b07d",  # folder b's never_send, by scopeUri
    "removed-folder": "CANARY_REMOVED_5a3f",  # a file of a folder removed meanwhile
    "moved-file": "CANARY_MOVED_e9c4",  # indexed and edited, then moved into secrets/
    "no-folder": "CANARY_NOFOLDER_11d6",  # no folder, no repository: secrets/k.py
    "no-folder-gitignore": "CANARY_NOFOLDERIGN_4c72",  # no folder: the .gitignore beside it
}


def _plant(path: Path, func: str, marker: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(pw.body(func, marker), encoding="utf-8")
    return path.as_uri()


def _text(uri: str) -> str:
    return Path(uri[len("file://") :]).read_text(encoding="utf-8")


async def _classes_run(
    tmp_path: Path, local: FakeOllama, remote: FakeOpenAI
) -> tuple[int, int, list[str]]:
    """The folder classes under one server (folders ws, ws/pkg, b, c; c removed), each
    as the current document and as context of a public file, on every escalation path;
    then the no-folder classes under a server with no folder. (requests, escalations of
    the public file that carried public context, what the servers logged)"""
    ws, b, c, nf = (tmp_path / n for n in ("ws", "b", "c", "nf"))
    pkg = ws / "pkg"
    for d in (pkg, b, c, nf):
        d.mkdir(parents=True)
    (ws / ".gitignore").write_text("pkg/gen/\n", encoding="utf-8")
    (nf / ".gitignore").write_text("gen_nf.py\n", encoding="utf-8")
    m = FOLDER_MARKERS
    windows = {
        "nested-folder": _plant(pkg / "gen" / "g.py", "nested_fn", m["nested-folder"]),
        "per-folder-settings": _plant(b / "private" / "p.py", "pf_fn", m["per-folder-settings"]),
        "removed-folder": _plant(c / "lib.py", "removed_fn", m["removed-folder"]),
    }
    moved_old = ws / "lib" / "moved.py"
    moved_uri = _plant(moved_old, "moved_fn", m["moved-file"])
    helper = _plant(ws / "lib" / "helpers.py", "public_helper", pw.PUBLIC_MARKER)
    funcs = ["nested_fn", "pf_fn", "removed_fn", "moved_fn", "public_helper"]
    app_text = "def run(x):\n    a = " + " + ".join(f"{f}(x)" for f in funcs) + "\n    return \n"
    (ws / "app.py").write_text(app_text, encoding="utf-8")
    app, app_cursor = (ws / "app.py").as_uri(), (2, 11)
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}
    cfg = pw.write_settings(
        tmp_path, local_url=local.url, remote_url=remote.base_url,
        first_token_ms=FIRST_TOKEN_MS, never_send=["secrets/**"],
    )  # fmt: skip
    requests = public = 0
    client, _ = await start(
        cfg, capabilities("visual-studio-code", inline=True), root=ws,
        folders=[ws, pkg, b, c], configuration={"synconfroute": {}}, env=env,
    )  # fmt: skip
    logs: list[str] = []
    try:
        client.set_configuration(
            {"synconfroute": {"privacy": {"never_send": ["private/**"]}}}, scope_uri=b.as_uri()
        )
        client.workspace_did_change_configuration(t.DidChangeConfigurationParams(settings=None))
        for uri in (*windows.values(), moved_uri, helper):
            open_doc(client, uri, _text(uri))
        client.text_document_did_change(
            t.DidChangeTextDocumentParams(
                text_document=t.VersionedTextDocumentIdentifier(version=2, uri=moved_uri),
                content_changes=[
                    t.TextDocumentContentChangePartial(
                        range=t.Range(t.Position(3, 0), t.Position(3, 0)),
                        text=f"    more = '{m['moved-file']}'\n",
                    )
                ],
            )
        )
        open_doc(client, app, app_text)
        # The move (no file events) and the folder removal, then every request.
        client.text_document_did_close(
            t.DidCloseTextDocumentParams(text_document=t.TextDocumentIdentifier(moved_uri))
        )
        (ws / "secrets").mkdir()
        moved_old.rename(ws / "secrets" / "moved.py")
        client.workspace_did_change_workspace_folders(
            t.DidChangeWorkspaceFoldersParams(
                event=t.WorkspaceFoldersChangeEvent(
                    added=[], removed=[t.WorkspaceFolder(uri=c.as_uri(), name="c")]
                )
            )
        )
        await asyncio.sleep(0.5)
        for path in ESCALATIONS:
            for uri in windows.values():
                before = len(bodies(remote))
                await edit_and_ask(client, local, uri, pw.PRIVATE_CURSOR, path)
                assert len(bodies(remote)) == before, (uri, path)
                requests += 1
            before = len(bodies(remote))
            await edit_and_ask(client, local, app, app_cursor, path)
            requests += 1
            new = bodies(remote)[before:]
            public += sum(pw.PUBLIC_MARKER in x for x in new)
    finally:
        await stop(client)
    logs += [x.message for x in client.messages]
    # No folder at all, no repository (a file opened from a shell).
    client, _ = await start(cfg, capabilities("neovim", inline=True), root=None, env=env)
    try:
        lone = {
            "no-folder": _plant(nf / "secrets" / "k.py", "k_fn", m["no-folder"]),
            "no-folder-gitignore": _plant(nf / "gen_nf.py", "g_fn", m["no-folder-gitignore"]),
        }
        for uri in lone.values():
            open_doc(client, uri, _text(uri))
        for path in ESCALATIONS:
            for uri in lone.values():
                before = len(bodies(remote))
                await edit_and_ask(client, local, uri, pw.PRIVATE_CURSOR, path)
                assert len(bodies(remote)) == before, (uri, path)
                requests += 1
    finally:
        await stop(client)
    logs += [x.message for x in client.messages]
    for f in (tmp_path / "state").rglob("*.log*"):
        logs.append(f.read_text(encoding="utf-8", errors="replace"))
    return requests, public, logs


async def test_folder_classes_leak_nothing(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI], capfd: pytest.CaptureFixture[str]
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    requests, public, logs = await _classes_run(tmp_path, local, remote)
    everything = "\n".join([*bodies(remote), *logs, capfd.readouterr().err])
    ledger = tmp_path / "ledger.jsonl"
    everything += ledger.read_text(encoding="utf-8") if ledger.exists() else ""
    leaked = [k for k, marker in FOLDER_MARKERS.items() if marker in everything]
    print(
        f"\ncanaries (issue 34 folder classes): {len(FOLDER_MARKERS)} classes x "
        f"{len(ESCALATIONS)} escalation paths, {requests} requests, "
        f"{len(bodies(remote))} remote bodies; leaked: {leaked}"
    )
    assert leaked == []
    assert public == len(ESCALATIONS)  # the controls: each public request escalated
