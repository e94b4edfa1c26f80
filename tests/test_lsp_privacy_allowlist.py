"""Issue 34, items 1 to 6: privacy by allow-list, through the real server over stdio, each
checked on what the recording fake remote received (a unique marker per private file).

1. git's other ignore sources: `.git/info/exclude`, `core.excludesFile`, a `.gitignore`
   above the workspace folder, a byte-order mark, an escaped `\\#name`;
2. nested workspace folders: the outer folder's `.gitignore` holds for the inner one;
3. removed folders: no folder left, or the initial rootUri after its folder was removed;
4. no folder at all (never_send and the `.gitignore` beside the file hold), and a root
   that is the file's own folder (the repository's root anchors the patterns too);
5. per-folder settings: each folder's `never_send`, asked with its scopeUri;
6. a file moved into `secrets/`: no events, didRenameFiles, watched-file events, a didOpen
   of the new path with the old one closed, or a new public file written at the old name
   (no events); with and without an edit first.

Each private file is tried as the current document and as context (an open neighbour);
a public control in the same run shows that the request did escalate and carry context.
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as t

from tests import privacy_workspace as pw
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import capabilities, inline_request, open_doc, start, stop

pytestmark = pytest.mark.timeout(240)

REMOTE = TokenScript.of(" value", " + 1", logprob=-0.01)
INVALID = TokenScript.of(" a", " +", " (b", logprob=-0.05)
_n = itertools.count(1)
_version = itertools.count(2)


def bodies(remote: FakeOpenAI) -> list[str]:
    return [r.body.decode("utf-8", "replace") for r in remote.received("/v1/completions")]


def plant(path: Path, func: str) -> str:
    """A file defining `func` whose body holds a unique marker; the marker."""
    marker = f"CANARY34_{func.upper()}_{next(_n):03d}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(pw.body(func, marker), encoding="utf-8")
    return marker


def write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def app_text(funcs: list[str]) -> tuple[str, tuple[int, int]]:
    """A public file that uses every function in `funcs`; the cursor after `return `."""
    lines = ["def run(x):", "    a = " + " + ".join(f"{f}(x)" for f in funcs), "    return "]
    return "\n".join(lines) + "\n", (2, 11)


async def ask(client: Any, local: FakeOllama, uri: str, pos: tuple[int, int]) -> None:
    """One completion that escalates (syntax-invalid local answer); the text below the
    cursor changes first, so no answer comes from the cache."""
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
    local.script(INVALID)
    await client.text_document_inline_completion_async(inline_request(uri, t.Position(*pos)))


def git(*args: str, cwd: Path, home: Path) -> None:
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def server_env(tmp_path: Path) -> dict[str, str]:
    """The server's HOME (its global git config) is the test's own."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "GIT_CONFIG_NOSYSTEM": "1",
    }


async def check_private(
    client: Any,
    local: FakeOllama,
    remote: FakeOpenAI,
    private: dict[str, Path],
    workspace_public: Path,
) -> list[str]:
    """Each private file as the current document and as context of a public file next
    to `workspace_public`; the markers that reached the remote, and a control."""
    markers = {name: plant(path, name) for name, path in private.items()}
    helper = plant(workspace_public.parent / "pub_helper.py", "pub_helper")
    text, cursor = app_text([*private, "pub_helper"])
    write(workspace_public, text)
    app = workspace_public.as_uri()
    open_doc(
        client, (workspace_public.parent / "pub_helper.py").as_uri(), pw.body("pub_helper", helper)
    )
    for name, path in private.items():
        open_doc(client, path.as_uri(), path.read_text(encoding="utf-8"))
        before = len(bodies(remote))
        await ask(client, local, path.as_uri(), pw.PRIVATE_CURSOR)  # as the current file
        assert len(bodies(remote)) == before, f"{name}: its own window was sent"
    open_doc(client, app, text)
    for _ in range(3):
        await ask(client, local, app, cursor)  # as context of the public file
    sent = "\n".join(bodies(remote))
    assert helper in sent, f"control: no public context reached the remote: {sent[-400:]}"
    return [name for name, m in markers.items() if m in sent]


# -- item 1: every source git reads -----------------------------------------------------


async def test_item1_every_git_ignore_source_holds(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    env = server_env(tmp_path)
    home = Path(env["HOME"])
    repo = tmp_path / "repo"
    ws = repo / "ws"  # the workspace folder is below the repository root
    ws.mkdir(parents=True)
    git("init", "-q", ".", cwd=repo, home=home)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("excl_mod.py\n", encoding="utf-8")
    global_excludes = home / "global-excludes"
    global_excludes.write_text("glob_mod.py\n", encoding="utf-8")
    git("config", "--global", "core.excludesFile", str(global_excludes), cwd=repo, home=home)
    (repo / ".gitignore").write_text("ws/above_mod.py\n", encoding="utf-8")
    (ws / ".gitignore").write_bytes(b"\xef\xbb\xbfbom_mod.py\r\n\\#hash_mod.py\r\n")
    private = {
        "excl_mod": ws / "excl_mod.py",
        "glob_mod": ws / "glob_mod.py",
        "above_mod": ws / "above_mod.py",
        "bom_mod": ws / "bom_mod.py",
        "hash_mod": ws / "#hash_mod.py",
    }
    cfg = pw.write_settings(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True), root=ws, env=env)
    try:
        leaked = await check_private(client, local, remote, private, ws / "app.py")
    finally:
        await stop(client)
    for name in private:  # git itself, the reference, ignores each of them
        path = private[name].relative_to(repo)
        git("check-ignore", "-q", str(path), cwd=repo, home=home)
    assert leaked == []


# -- item 2: nested workspace folders ---------------------------------------------------


async def test_item2_the_outer_folders_gitignore_holds_in_a_nested_folder(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    ws = tmp_path / "ws"
    pkg = ws / "pkg"
    pkg.mkdir(parents=True)
    (ws / ".gitignore").write_text("pkg/gen/\n", encoding="utf-8")
    cfg = pw.write_settings(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(
        cfg,
        capabilities("visual-studio-code", inline=True),
        root=ws,
        folders=[ws, pkg],
        env=server_env(tmp_path),
    )
    try:
        leaked = await check_private(
            client, local, remote, {"gen_mod": pkg / "gen" / "g.py"}, pkg / "app.py"
        )
    finally:
        await stop(client)
    assert leaked == []


# -- item 3: removed folders ------------------------------------------------------------


def remove_folder(client: Any, folder: Path) -> None:
    client.workspace_did_change_workspace_folders(
        t.DidChangeWorkspaceFoldersParams(
            event=t.WorkspaceFoldersChangeEvent(
                added=[], removed=[t.WorkspaceFolder(uri=folder.as_uri(), name=folder.name)]
            )
        )
    )


async def test_item3_the_only_folder_removed_keeps_its_private_files(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    ws = pw.build(tmp_path / "base")  # never_send secrets/**, .gitignore build/
    cfg = pw.write_settings(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(
        cfg,
        capabilities("visual-studio-code", inline=True),
        root=None,
        folders=[ws],
        env=server_env(tmp_path),
    )
    try:
        remove_folder(client, ws)
        await asyncio.sleep(0.3)
        for p in (pw.PRIVATE[0], pw.PRIVATE[2]):  # secrets/vault.py, build/gen.py
            uri = (tmp_path / "base" / p.rel).as_uri()
            open_doc(client, uri, pw.body(p.func, p.marker))
            await ask(client, local, uri, pw.PRIVATE_CURSOR)
        # The control: a public file (in no folder now, no repository) still escalates.
        public = (ws / "lib" / "helpers.py").as_uri()
        open_doc(client, public, pw.body("public_helper", pw.PUBLIC_MARKER))
        await ask(client, local, public, pw.PRIVATE_CURSOR)
    finally:
        await stop(client)
    sent = "\n".join(bodies(remote))
    assert pw.leaks(sent) == []
    assert pw.PUBLIC_MARKER in sent


async def test_item3_a_removed_folder_is_no_root_even_when_it_was_the_root_uri(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    ws = pw.build(tmp_path / "base")
    other = tmp_path / "other"
    other.mkdir()
    cfg = pw.write_settings(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(
        cfg,
        capabilities("visual-studio-code", inline=True),
        root=ws,
        folders=[ws, other],
        env=server_env(tmp_path),
    )
    try:
        remove_folder(client, ws)
        await asyncio.sleep(0.3)
        gone = (ws / "lib" / "helpers.py").as_uri()  # public, but its folder is closed
        open_doc(client, gone, pw.body("public_helper", pw.PUBLIC_MARKER))
        await ask(client, local, gone, pw.PRIVATE_CURSOR)
        assert bodies(remote) == []
        kept = other / "x.py"
        marker = plant(kept, "other_fn")
        open_doc(client, kept.as_uri(), kept.read_text(encoding="utf-8"))
        await ask(client, local, kept.as_uri(), pw.PRIVATE_CURSOR)
        assert marker in "\n".join(bodies(remote))  # the folder still open escalates
    finally:
        await stop(client)


# -- item 4: no folder; a root that is the file's own folder ---------------------------


async def test_item4_with_no_folder_never_send_and_the_gitignore_beside_the_file_hold(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    proj = tmp_path / "proj"  # in no repository
    repo = tmp_path / "repo"  # a repository: its root stands in for the folder
    (proj / "secrets").mkdir(parents=True)
    (repo / "out").mkdir(parents=True)
    env = server_env(tmp_path)
    git("init", "-q", ".", cwd=repo, home=Path(env["HOME"]))
    (proj / ".gitignore").write_text("gen_mod.py\n", encoding="utf-8")
    (repo / ".gitignore").write_text("out/\n", encoding="utf-8")
    cfg = pw.write_settings(
        tmp_path, local_url=local.url, remote_url=remote.base_url, never_send=["secrets/**"]
    )
    private = {
        "k": proj / "secrets" / "k.py",
        "gen_mod": proj / "gen_mod.py",
        "o": repo / "out" / "o.py",
        "rk": repo / "secrets" / "rk.py",
    }
    client, _ = await start(
        cfg, capabilities("visual-studio-code", inline=True), root=None, env=env
    )
    try:
        markers = {name: plant(path, name) for name, path in private.items()}
        for path in private.values():
            open_doc(client, path.as_uri(), path.read_text(encoding="utf-8"))
            await ask(client, local, path.as_uri(), pw.PRIVATE_CURSOR)
        public = repo / "app.py"
        control = plant(public, "app_fn")
        open_doc(client, public.as_uri(), public.read_text(encoding="utf-8"))
        await ask(client, local, public.as_uri(), pw.PRIVATE_CURSOR)
    finally:
        await stop(client)
    sent = "\n".join(bodies(remote))
    assert [n for n, m in markers.items() if m in sent] == []
    assert control in sent


async def test_item4_a_root_at_the_files_own_folder_does_not_unanchor_never_send(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    proj = tmp_path / "proj"
    (proj / "secrets").mkdir(parents=True)
    env = server_env(tmp_path)
    git("init", "-q", ".", cwd=proj, home=Path(env["HOME"]))
    cfg = pw.write_settings(
        tmp_path, local_url=local.url, remote_url=remote.base_url, never_send=["secrets/k*"]
    )
    # What an editor without a root marker sent: the file's own folder as the root.
    client, _ = await start(
        cfg, capabilities("neovim", inline=True), root=proj / "secrets", env=env
    )
    try:
        k = proj / "secrets" / "k.py"
        marker = plant(k, "k")
        open_doc(client, k.as_uri(), k.read_text(encoding="utf-8"))
        await ask(client, local, k.as_uri(), pw.PRIVATE_CURSOR)
        public = proj / "secrets" / "pub.py"  # the control: not covered, same folder
        control = plant(public, "pub")
        open_doc(client, public.as_uri(), public.read_text(encoding="utf-8"))
        await ask(client, local, public.as_uri(), pw.PRIVATE_CURSOR)
    finally:
        await stop(client)
    sent = "\n".join(bodies(remote))
    assert marker not in sent
    assert control in sent


# -- item 5: per-folder settings --------------------------------------------------------


async def test_item5_each_folders_own_never_send_applies_to_its_files(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    cfg = pw.write_settings(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(
        cfg,
        capabilities("visual-studio-code", inline=True),
        root=a,
        folders=[a, b],
        configuration={"synconfroute": {}},
        env=server_env(tmp_path),
    )
    # Folder b's .vscode/settings.json: VS Code answers it only for b's scopeUri.
    client.set_configuration(
        {"synconfroute": {"privacy": {"never_send": ["private/**"]}}}, scope_uri=b.as_uri()
    )
    client.workspace_did_change_configuration(t.DidChangeConfigurationParams(settings=None))
    await asyncio.sleep(0.5)
    try:
        leaked = await check_private(
            client, local, remote, {"b_private": b / "private" / "p.py"}, b / "app.py"
        )
        # The control: folder a has no such setting; its private/ folder escalates.
        a_file = a / "private" / "p.py"
        a_marker = plant(a_file, "a_private")
        open_doc(client, a_file.as_uri(), a_file.read_text(encoding="utf-8"))
        await ask(client, local, a_file.as_uri(), pw.PRIVATE_CURSOR)
    finally:
        await stop(client)
    assert leaked == []
    assert a_marker in "\n".join(bodies(remote))


# -- item 6: a file moved into secrets/ -------------------------------------------------

# "replaced": moved with no file events, and a new (public) file written at the old name.
MOVES = ["no-events", "did-rename", "watched-files", "reopen", "replaced"]


@pytest.mark.parametrize("edited", [False, True], ids=["index-only", "after-an-edit"])
@pytest.mark.parametrize("how", MOVES)
async def test_item6_a_file_moved_into_secrets_leaves_nothing_under_its_old_name(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI], how: str, edited: bool
) -> None:
    local, remote = fakes
    remote.script(REMOTE, always=True)
    ws = tmp_path / "ws"
    (ws / "lib").mkdir(parents=True)
    (ws / "secrets").mkdir()
    old, new = ws / "lib" / "mod.py", ws / "secrets" / "mod.py"
    marker = plant(old, "moved_fn")
    helper = plant(ws / "lib" / "helper.py", "pub_helper")
    text, cursor = app_text(["moved_fn", "pub_helper"])
    (ws / "app.py").write_text(text, encoding="utf-8")
    cfg = pw.write_settings(
        tmp_path, local_url=local.url, remote_url=remote.base_url, never_send=["secrets/**"]
    )
    client, _ = await start(
        cfg, capabilities("visual-studio-code", inline=True), root=ws, env=server_env(tmp_path)
    )
    try:
        app = (ws / "app.py").as_uri()
        open_doc(client, (ws / "lib" / "helper.py").as_uri(), pw.body("pub_helper", helper))
        open_doc(client, old.as_uri(), old.read_text(encoding="utf-8"))
        if edited:  # a recent-edit chunk of it, under the old name
            client.text_document_did_change(
                t.DidChangeTextDocumentParams(
                    text_document=t.VersionedTextDocumentIdentifier(version=2, uri=old.as_uri()),
                    content_changes=[
                        t.TextDocumentContentChangePartial(
                            range=t.Range(t.Position(2, 0), t.Position(2, 0)),
                            text=f"    extra = '{marker}'\n",
                        )
                    ],
                )
            )
        open_doc(client, app, text)
        await ask(client, local, app, cursor)
        assert marker in bodies(remote)[-1], "control: the file fed the prompt before the move"
        # The move: the editor closes the old name; the file is now under secrets/.
        client.text_document_did_close(
            t.DidCloseTextDocumentParams(text_document=t.TextDocumentIdentifier(old.as_uri()))
        )
        old.rename(new)
        if how == "did-rename":
            client.workspace_did_rename_files(
                t.RenameFilesParams(files=[t.FileRename(old.as_uri(), new.as_uri())])
            )
        elif how == "watched-files":
            client.workspace_did_change_watched_files(
                t.DidChangeWatchedFilesParams(
                    changes=[
                        t.FileEvent(uri=old.as_uri(), type=t.FileChangeType.Deleted),
                        t.FileEvent(uri=new.as_uri(), type=t.FileChangeType.Created),
                    ]
                )
            )
        elif how == "reopen":
            open_doc(client, new.as_uri(), new.read_text(encoding="utf-8"))
        elif how == "replaced":
            plant(old, "moved_fn")  # the same function, new public code, another marker
        await asyncio.sleep(0.3)
        before = len(bodies(remote))
        for _ in range(3):
            await ask(client, local, app, cursor)
        after = bodies(remote)[before:]
    finally:
        await stop(client)
    assert len(after) == 3 and all(helper in b for b in after), "control: escalated, public context"
    assert not any(marker in b for b in after), f"{how}: the moved file's code was sent"
