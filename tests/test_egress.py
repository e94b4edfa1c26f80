"""The privacy question on resolved paths, the prompt plan and the egress gate (issue 27)."""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest

from synconfroute.clients.errors import EgressRefused
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.clients.plan import FolderRules, PlanSource, PromptPlan, dataset_plan
from synconfroute.server.routing.backends import make_remote
from synconfroute.server.routing.gated import GatedRemote
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.settings.config import PrivacySettings, RemoteSettings, Settings
from synconfroute.server.workspace import egress, privacy
from tests import privacy_workspace as pw

ROOT = Path(__file__).resolve().parent.parent


def _reason(path: Path | str, roots: list[Path], role: str = "window", **kw: object) -> str | None:
    settings = PrivacySettings(never_send=list(pw.NEVER_SEND), **kw)  # type: ignore[arg-type]
    return egress.check_path(str(path), [str(r) for r in roots], settings, role)  # type: ignore[arg-type]


def test_every_private_kind_by_every_name(tmp_path: Path) -> None:
    base = tmp_path / "base"
    ws = pw.build(base)
    link_root = base / "ws_link"
    want = {
        "never_send": egress.NEVER_SEND,
        "secret_file": egress.SECRET_FILE,
        "gitignored": egress.GITIGNORED,
        "outside": egress.OUTSIDE,
        "symlink_target": egress.NEVER_SEND,
        "gitignore_above": egress.GITIGNORED,
        "info_exclude": egress.GITIGNORED,
        "excludes_file": egress.GITIGNORED,
        "gitignore_bom": egress.GITIGNORED,
        "escaped_name": egress.GITIGNORED,
    }
    for p in pw.PRIVATE:
        real = base / p.rel
        names = [real, ws / p.alias, f"{ws}/./{p.alias}", f"{ws}/lib/../{p.alias}"]
        if str(real).startswith(str(ws) + "/"):
            rel = real.relative_to(ws)
            names += [link_root / rel, f"{ws}/./{rel}", f"{ws}/lib/../{rel}"]
        for name in names:
            for roots in ([ws], [link_root]):
                for role in ("window", "context"):
                    assert _reason(name, roots, role) == want[p.kind], (p.kind, name, roots, role)
    public = ws / "lib" / "helpers.py"
    assert _reason(public, [ws]) is None and _reason(public, [link_root], "context") is None
    assert _reason(f"{link_root}/lib/../lib/helpers.py", [ws]) is None


def test_unresolvable_and_no_folder(tmp_path: Path) -> None:
    assert _reason("untitled:Untitled-1", [tmp_path]) == egress.UNRESOLVABLE
    assert _reason("relative/file.py", [tmp_path]) == egress.UNRESOLVABLE
    assert _reason(f"{tmp_path}/a\x00b.py", [tmp_path]) == egress.UNRESOLVABLE
    # Allow-list: a file that does not exist (moved, deleted, never saved) is not known.
    assert _reason(tmp_path / "a.py", []) == egress.NOT_A_FILE
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    # No workspace folder and no repository: the current file is judged by its patterns,
    # context never goes.
    assert _reason(tmp_path / "a.py", []) is None
    assert _reason(tmp_path / "a.py", [], "context") == egress.OUTSIDE
    (tmp_path / ".env").write_text("x = 1\n", encoding="utf-8")
    assert _reason(tmp_path / ".env", []) == egress.SECRET_FILE


def test_gitignore_rules(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "gen").mkdir(parents=True)
    (tmp_path / ".gitignore").write_text("*.log\n/out/\n!keep.log\n", encoding="utf-8")
    (tmp_path / "pkg" / ".gitignore").write_text("gen/\nlocal_*.py\n", encoding="utf-8")
    root = str(tmp_path)
    cases = {
        "a.log": True,
        "keep.log": False,
        "out/x.py": True,
        "pkg/out/x.py": False,  # anchored to the root's .gitignore
        "pkg/gen/x.py": True,
        "gen/x.py": False,  # pkg/.gitignore's rules are relative to pkg/
        "pkg/local_settings.py": True,
        "pkg/app.py": False,
    }
    for rel, ignored in cases.items():
        assert egress.gitignored(f"{root}/{rel}", root) is ignored, rel


def test_case_folding_logic(tmp_path: Path) -> None:
    """This file system (Linux ext4/overlay) does not fold case; the folding rules are
    checked directly: a folded plan matches patterns and folders case-insensitively."""
    assert privacy.folds_case(str(tmp_path)) is False
    (tmp_path / "Secrets").mkdir()
    real = tmp_path / "Secrets" / "Vault.py"
    real.write_text("x = 1\n", encoding="utf-8")
    # The folded name exists too, as on a folding file system (the gate asks it exists).
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "vault.py").write_text("x = 1\n", encoding="utf-8")
    plan = egress.make_plan("remote", str(real), [str(tmp_path).upper()], fold=True)
    assert plan.folds_case and plan.window is not None
    assert plan.window.real == str(real).casefold()
    assert plan.real_roots == (privacy.real_path(str(tmp_path).upper(), fold=True),)
    settings = PrivacySettings(never_send=["secrets/**"])
    assert egress.private_reason(plan.window, plan, settings) == egress.NEVER_SEND
    assert egress.private_reason(plan.window, plan, PrivacySettings()) is None
    unfolded = egress.make_plan("remote", str(real), [str(tmp_path)], fold=False)
    assert unfolded.window is not None
    assert egress.private_reason(unfolded.window, unfolded, settings) is None  # case differs
    (tmp_path / ".gitignore").write_text("SECRETS/\n", encoding="utf-8")
    assert egress.gitignored(str(real).casefold(), str(tmp_path).casefold(), fold=True)
    assert not egress.gitignored(str(real), str(tmp_path), fold=False)


def test_gate_refuses_private_unresolvable_or_planless(tmp_path: Path) -> None:
    ws = pw.build(tmp_path / "base")
    s = Settings(privacy=PrivacySettings(never_send=list(pw.NEVER_SEND)))
    gate = egress.EgressGate(lambda: s)
    ok = egress.make_plan(
        "remote", str(ws / "app.py"), [str(ws)], context=[(str(ws / "lib/helpers.py"), 10)]
    )
    gate(b"{}", ok)
    bad = egress.make_plan(
        "remote", str(ws / "app.py"), [str(ws)], context=[(str(ws / "vault_alias.py"), 10)]
    )
    for plan in (bad, None, PromptPlan("remote", ())):
        with pytest.raises(EgressRefused):
            gate(b"{}", plan)
    unresolved = PromptPlan("remote", (PlanSource("window", "x.py", None),), (str(ws),))
    with pytest.raises(EgressRefused, match="unresolvable"):
        gate(b"{}", unresolved)
    # The settings of the moment: switched on after the plan was made.
    s = Settings(privacy=PrivacySettings(never_send=list(pw.NEVER_SEND), local_only=True))
    with pytest.raises(EgressRefused, match="local-only"):
        gate(b"{}", ok)
    gate(b"{}", dataset_plan("task 1", 10))  # benchmark text: not workspace code
    assert gate.checked == 7 and gate.refused == 5


async def test_every_remote_client_has_a_gate() -> None:
    remote = make_remote(RemoteSettings(url="http://127.0.0.1:9/v1", model="m"))
    assert isinstance(remote, GatedRemote) and isinstance(remote.inner, OpenAIBackend)
    client = remote.inner
    assert client._egress is not None
    with pytest.raises(EgressRefused):
        client._egress(b"{}", egress.make_plan("remote", "/w/a.py", ["/w"]))
    with pytest.raises(EgressRefused, match="private"):  # the seam's own check, first
        remote.passes(egress.make_plan("remote", "/w/a.py", ["/w"]))
    p = Pipeline(Settings(), None, remote)
    assert p.remote is not None and p.remote.inner is client  # gated once, not twice
    assert p.remote.gate is not None
    assert client._egress is p.remote.gate  # the pipeline's own, with its live settings
    await remote.aclose()


def _calls(tree: ast.AST, attr: str, client: bool = False) -> list[tuple[str, int]]:
    """(enclosing function, line) of each call of `<something>.<attr>(...)` (with
    `client`: only on a receiver named like an HTTP client, `client` or `x._client`)."""
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else func
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and child.func.attr == attr
                and (not client or "client" in ast.unparse(child.func.value).lower())
            ):
                out.append((name, child.lineno))
            visit(child, name)

    visit(tree, "")
    return out


def test_nothing_else_calls_the_remote_clients_send() -> None:
    """The remote client's HTTP send is called in one place, `OpenAIBackend._send`, which
    runs the egress check first; nothing else calls `_send`, and no module posts code
    with httpx' shortcuts."""
    sends: list[str] = []
    for folder in ("clients", "server"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            rel = path.relative_to(ROOT).as_posix()
            for func, _line in _calls(tree, "send", client=True):
                sends.append(f"{rel}:{func}")
            for func, _line in _calls(tree, "_send"):
                sends.append(f"{rel}:{func}->_send")
            for func, line in _calls(tree, "post"):
                if rel != "clients/ollama.py":  # Ollama: the local machine only
                    raise AssertionError(f"{rel}:{line} ({func}) posts with httpx' shortcut")
            streams = [
                c for c in _calls(tree, "stream") if "_client.stream(" in path.read_text("utf-8")
            ]
            if streams and rel != "clients/ollama.py":  # Ollama: the local machine only
                raise AssertionError(f"{rel} streams an HTTP request outside the gate")
    openai_sends = [s for s in sends if s.startswith("clients/openai.py")]
    # `exchange`: every completion request; `verify_supported`: the /tokenize probe of a
    # verified escalation (remote.verify_draft), judged by the request's own plan.
    assert openai_sends == [
        "clients/openai.py:_send",
        "clients/openai.py:verify_supported->_send",
        "clients/openai.py:exchange->_send",
    ]
    source = (ROOT / "clients" / "openai.py").read_text(encoding="utf-8")
    body = source.split("async def _send(", 1)[1].split("\n    def ", 1)[0]
    assert body.index("self._egress(") < body.index("self._client.send(")
    assert [s for s in sends if not s.startswith("clients/openai.py")] == []


def test_fs_folding_probe_on_this_machine(tmp_path: Path) -> None:
    """Reported in the note: whether this machine's file system folds case."""
    (tmp_path / "Probe").mkdir()
    folds = os.path.exists(tmp_path / "PROBE")
    assert privacy.folds_case(str(tmp_path / "Probe")) is folds


# -- workspace scope: one allow-list, in the code, the docs and the VS Code manifest ------


def test_workspace_scope_is_one_allow_list() -> None:
    import json

    from synconfroute.server.settings import config

    keys = [k for k, *_ in config.documented_fields()]
    assert set(config.TIGHTEN_ONLY_KEYS) < set(keys)
    assert set(config.user_only_keys()) == set(keys) - set(config.TIGHTEN_ONLY_KEYS)
    for key in keys:  # everything that can make the local tier fail or point elsewhere
        if key.startswith("local.") or key in (
            "routing.adaptive_step",
            "routing.adaptive_every",
            "remote.url",
            "remote.urls",
            "remote.api_key_env",
        ):
            assert key in config.user_only_keys(), key
    props = json.loads((ROOT / "editors/vscode/package.json").read_text(encoding="utf-8"))[
        "contributes"
    ]["configuration"]["properties"]
    for key in keys:
        want = "resource" if key in config.TIGHTEN_ONLY_KEYS else "machine"
        assert props[f"synconfroute.{key}"]["scope"] == want, key
    md = (ROOT / "docs/settings.md").read_text(encoding="utf-8")
    for key in keys:
        row = next(line for line in md.splitlines() if line.startswith(f"| `{key}` |"))
        assert ("| tighten: " in row) is (key in config.TIGHTEN_ONLY_KEYS), row


def test_workspace_may_tighten_every_allowed_key_and_nothing_else() -> None:
    from synconfroute.server.settings import config

    user = config.with_values(
        Settings(),
        {
            "completion": {"context": "workspace"},
            "routing": {"adaptive": True},
            "remote": {"url": "http://gpu:8000/v1", "model": "m"},
        },
    )
    tighter = {
        "privacy": {"local_only": True, "never_send": ["x/**"], "secret_files": True},
        "remote": {"backend": "none", "model": "", "max_prompt_chars": 1000},
        "routing": {"policy": "local", "threshold": -2.0, "semantic": "off"},
        "completion": {"context": "file", "context_lines": 10},
    }
    ws, issues = config.merge_workspace(user, tighter)
    assert [i for i in issues if i.message.startswith("refused")] == []
    assert ws.privacy.local_only and ws.remote.backend == "none" and ws.routing.policy == "local"
    wider = {
        "routing": {"policy": "remote", "threshold": -0.1, "adaptive_step": 0.5},
        "completion": {"context_lines": 999, "max_tokens": 8},
        "editor": {"debounce_ms": 5.0},
        "remote": {"model": "other"},
    }
    ws, issues = config.merge_workspace(user, wider)
    refused = {i.key for i in issues if i.message.startswith("refused")}
    assert refused == {
        "routing.policy",
        "routing.threshold",
        "routing.adaptive_step",
        "completion.context_lines",
        "completion.max_tokens",
        "editor.debounce_ms",
        "remote.model",
    }
    assert config.merge(user, {})[0] == ws  # every refused value is the user's again


# -- issue 34: the allow-list ------------------------------------------------------------


def test_allow_list_unknown_is_private(tmp_path: Path) -> None:
    """Moved, deleted, never saved, not a regular file, in a closed folder: private."""
    ws = tmp_path / "ws"
    (ws / "lib").mkdir(parents=True)
    f = ws / "lib" / "a.py"
    f.write_text("x = 1\n", encoding="utf-8")
    settings = PrivacySettings()
    assert egress.check_path(str(f), [str(ws)], settings, "context") is None
    assert egress.check_path(str(ws / "lib"), [str(ws)], settings) == egress.NOT_A_FILE
    assert egress.check_path(str(ws / "gone.py"), [str(ws)], settings) == egress.NOT_A_FILE
    os.mkfifo(ws / "pipe.py")
    assert egress.check_path(str(ws / "pipe.py"), [str(ws)], settings) == egress.NOT_A_FILE
    # A plan made before the file moved: at the gate, the source no longer exists.
    plan = egress.make_plan("remote", str(f), [str(ws)])
    f.rename(ws / "b.py")
    assert plan.window is not None
    assert egress.private_reason(plan.window, plan, settings) == egress.NOT_A_FILE
    # A folder whose settings are not known yet, or keep it local.
    (ws / "b.py").rename(f)
    closed = FolderRules(root=str(ws), closed=True)
    assert egress.check_path(str(f), [str(ws)], settings, folders=[closed]) == egress.FOLDER_CLOSED
    no_ctx = FolderRules(root=str(ws), no_context=True)
    assert egress.check_path(str(f), [str(ws)], settings, folders=[no_ctx]) is None
    assert (
        egress.check_path(str(f), [str(ws)], settings, "context", folders=[no_ctx])
        == egress.FOLDER_CLOSED
    )


def test_each_folders_rules_apply_to_its_files_only(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        (d / "private").mkdir(parents=True)
        (d / "private" / "p.py").write_text("x = 1\n", encoding="utf-8")
    rules = [FolderRules(root=str(b), never_send=("private/**",))]
    roots = [str(a), str(b)]
    settings = PrivacySettings()
    got = {
        d.name: egress.check_path(str(d / "private" / "p.py"), roots, settings, folders=rules)
        for d in (a, b)
    }
    assert got == {"a": None, "b": egress.NEVER_SEND}


def test_roots_when_no_folder_is_open(tmp_path: Path) -> None:
    """No folder: the repository stands in (context only from it); no repository either:
    relative patterns and .gitignore files from every folder above the file."""
    repo, lone = tmp_path / "repo", tmp_path / "lone"
    for d in (repo / "secrets", repo / "lib", lone / "secrets"):
        d.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (lone / ".gitignore").write_text("gen.py\n", encoding="utf-8")
    files = {
        "repo-app": repo / "app.py",
        "repo-lib": repo / "lib" / "l.py",
        "repo-secret": repo / "secrets" / "s.py",
        "lone-secret": lone / "secrets" / "k.py",
        "lone-gen": lone / "gen.py",
        "lone-app": lone / "app.py",
    }
    for f in files.values():
        f.write_text("x = 1\n", encoding="utf-8")
    s = PrivacySettings(never_send=["secrets/**"])
    window = {k: egress.check_path(str(f), [], s) for k, f in files.items()}
    assert window == {
        "repo-app": None,
        "repo-lib": None,
        "repo-secret": egress.NEVER_SEND,
        "lone-secret": egress.NEVER_SEND,
        "lone-gen": egress.GITIGNORED,
        "lone-app": None,
    }
    app, lone_app = str(files["repo-app"]), str(files["lone-app"])
    ctx = egress.check_path(str(files["repo-lib"]), [], s, "context", window=app)
    assert ctx is None  # context from the window's own repository
    far = egress.check_path(str(files["lone-app"]), [], s, "context", window=app)
    assert far == egress.OUTSIDE
    none = egress.check_path(str(files["repo-lib"]), [], s, "context", window=lone_app)
    assert none == egress.OUTSIDE  # no folder, no repository: context never goes


def test_never_send_is_anchored_at_the_repository_too(tmp_path: Path) -> None:
    """A folder opened below the repository root (an editor's fallback to the file's own
    folder) does not un-anchor `secrets/**`."""
    (tmp_path / "secrets").mkdir()
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    k = tmp_path / "secrets" / "k.py"
    k.write_text("x = 1\n", encoding="utf-8")
    s = PrivacySettings(never_send=["secrets/**"])
    assert egress.check_path(str(k), [str(tmp_path / "secrets")], s) == egress.NEVER_SEND


def test_a_broken_git_link_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / ".git").write_text("not a gitdir line\n", encoding="utf-8")
    f = tmp_path / "a.py"
    f.write_text("x = 1\n", encoding="utf-8")
    got = egress.check_path(str(f), [str(tmp_path)], PrivacySettings())
    assert got == egress.GIT_UNREADABLE
