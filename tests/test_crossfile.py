"""Cross-file context (issue 11): the workspace index, context assembly, and its privacy
in the pipeline (real clients against the fake Ollama and vLLM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.settings.config import Settings, with_values
from synconfroute.server.syntax.languages import LANGUAGES
from synconfroute.server.workspace import crossfile
from synconfroute.server.workspace.workspace_index import WorkspaceIndex, extract, source_files
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.files import existing

pytestmark = pytest.mark.timeout(60)

# One definition of each kind per language the gate knows (kind of each name).
SAMPLES: dict[str, tuple[str, dict[str, str]]] = {
    "python": (
        "LIMIT = 3\nclass Shape:\n    sides: int = 0\n    def area(self):\n        return 0\n"
        "@cache\ndef helper(x):\n    return x\n",
        {"LIMIT": "constant", "Shape": "class", "sides": "field", "area": "method"}
        | {"helper": "function"},
    ),
    "java": (
        "class Shape {\n  private int sides;\n  Shape() {}\n  int area() { return 0; }\n}\n"
        "interface Drawable { void draw(); }\n",
        {"Shape": "method", "sides": "field", "area": "method", "Drawable": "class"}
        | {"draw": "method"},
    ),
    "cpp": (
        "#define LIMIT 3\nstruct Shape { int sides; int area() const; };\n"
        "namespace geo { int helper(int x) { return x; } }\nint proto(int);\n",
        {"LIMIT": "constant", "Shape": "class", "sides": "field", "area": "method"}
        | {"helper": "function", "proto": "function"},
    ),
    "c": (
        "#define LIMIT 3\nstruct Shape { int sides; };\nint helper(int x) { return x; }\n"
        "static const int K = 1;\n",
        {"LIMIT": "constant", "Shape": "class", "sides": "field", "helper": "function"}
        | {"K": "constant"},
    ),
    "javascript": (
        "export function helper(x) { return x; }\nconst LIMIT = 3;\nconst arrow = (a) => a;\n"
        "class Shape { area() { return 0; } }\n",
        {"helper": "function", "LIMIT": "constant", "arrow": "function", "Shape": "class"}
        | {"area": "method"},
    ),
    "typescript": (
        "interface Drawable { draw(): void }\ntype Id = string;\n"
        "export class Shape { private sides: number = 0; area(): number { return 0; } }\n"
        "export const LIMIT = 3;\nfunction helper(x: number): number { return x; }\n",
        {"Drawable": "class", "Id": "class", "Shape": "class", "sides": "field"}
        | {"area": "method", "LIMIT": "constant", "helper": "function"},
    ),
    "tsx": (
        "export function Button(p: Props) { return <b>{p.x}</b>; }\nconst LIMIT = 3;\n",
        {"Button": "function", "LIMIT": "constant"},
    ),
    "go": (
        "package geo\nconst Limit = 3\ntype Shape struct { Sides int }\n"
        "func Helper(x int) int { return x }\nfunc (s *Shape) Area() int { return 0 }\n",
        {"Limit": "constant", "Shape": "class", "Sides": "field", "Helper": "function"}
        | {"Area": "method"},
    ),
    "rust": (
        "const LIMIT: i32 = 3;\npub struct Shape { sides: i32 }\n"
        "impl Shape { pub fn area(&self) -> i32 { 0 } }\nfn helper(x: i32) -> i32 { x }\n",
        {"LIMIT": "constant", "Shape": "class", "sides": "field", "area": "method"}
        | {"helper": "function"},
    ),
}


def test_every_gate_language_has_a_sample() -> None:
    assert set(SAMPLES) == set(LANGUAGES)


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_extract_finds_each_kind_of_definition(language: str) -> None:
    source, expected = SAMPLES[language]
    found = {s.name: s.kind for s in extract(language, source, "/w/f")}
    assert {n: found.get(n) for n in expected} == expected
    helper = next((s for s in extract(language, source, "/w/f") if s.name in expected), None)
    assert helper is not None and helper.name in helper.text and helper.path == "/w/f"


def test_definition_text_is_clipped_and_keeps_decorators() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(100))
    [sym] = extract("python", f"@cache\ndef big():\n{body}\n", "/w/f.py")
    assert sym.text.startswith("@cache\ndef big():") and sym.line == 0
    assert sym.text.count("\n") <= 13 and len(sym.text) <= 803


def test_bad_input_gives_no_crash() -> None:
    assert extract("cobol", "MOVE A TO B.", "/w/x.cob") == []
    assert isinstance(extract("python", "def (:\n\x00\ud800", "/w/x.py"), list)


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def test_source_files_respect_gitignore_size_and_tool_folders(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            ".gitignore": "build/\n*.gen.py\n!keep.gen.py\n",
            "a.py": "A = 1\n",
            "keep.gen.py": "K = 1\n",
            "drop.gen.py": "D = 1\n",
            "build/b.py": "B = 1\n",
            "node_modules/m.js": "const M = 1;\n",
            "sub/.gitignore": "local.py\n",
            "sub/local.py": "L = 1\n",
            "sub/ok.go": "package x\n",
            "big.py": "X = 1\n" * 400,
            "notes.txt": "not code\n",
        },
    )
    found = {Path(p).relative_to(tmp_path).as_posix() for p, _ in source_files(str(tmp_path), 1000)}
    assert found == {"a.py", "keep.gen.py", "sub/ok.go"}


def test_index_updates_and_removes(tmp_path: Path) -> None:
    _tree(tmp_path, {"a.py": "def alpha():\n    pass\n", "b.py": "def beta():\n    pass\n"})
    index = WorkspaceIndex()
    index.build([str(tmp_path)])
    a = f"{tmp_path}/a.py"
    assert index.ready and len(index) == 2 and [s.path for s in index.lookup("alpha")] == [a]
    index.update(a, "def gamma():\n    pass\n")
    assert index.lookup("alpha") == [] and index.lookup("gamma")[0].path == a
    index.remove(a)
    assert index.lookup("gamma") == [] and len(index) == 1


def test_index_memory_and_file_bounds(tmp_path: Path) -> None:
    _tree(tmp_path, {f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(10)})
    small = WorkspaceIndex(max_bytes=1200)  # about 3 symbols
    small.build([str(tmp_path)])
    assert small.stored <= 1200 and small.skipped > 0 and 0 < len(small) < 10
    few = WorkspaceIndex(max_files=3)
    few.build([str(tmp_path)])
    assert len(few) == 3 and few.skipped == 7


# The workspace folder: its files exist (the egress gate sends only files that exist).
WS = str(Path(existing("w/app/main.py")).parent.parent)
for _rel in ("app/util.py", "vendor/other.py", ".env", "a.py", "secret.py", "b.py", "c.py"):
    existing(f"w/{_rel}")
UTIL = "def sign_request(req, key):\n    '''Sign with HMAC.'''\n    return hmac(key, req)\n"
OTHER = "def sign_request(a):\n    return None\n"
CUR = "from app.util import sign_request\n\ndef send(req):\n    key = load()\n    return "


def _index() -> WorkspaceIndex:
    index = WorkspaceIndex()
    index.update(f"{WS}/app/util.py", UTIL)
    index.update(f"{WS}/vendor/other.py", OTHER)
    index.update(f"{WS}/app/main.py", CUR)
    return index


def test_definitions_of_names_near_the_cursor_rank_first_and_imports_resolve() -> None:
    found = crossfile.candidates(
        prefix=CUR + "sign_request(", suffix="\n", path=f"{WS}/app/main.py",
        language="python", index=_index(),
    )  # fmt: skip
    defs = [c for c in found if c.name == "sign_request"]
    assert defs[0].path == f"{WS}/app/util.py"  # the imported one wins
    assert defs[0].score > defs[1].score
    # A name defined in the current file is not context (the prefix/suffix has it).
    assert all(c.name != "send" for c in found)


def test_open_documents_give_similar_snippets() -> None:
    doc = crossfile.OpenDoc(
        f"{WS}/app/client.py",
        1,
        "def call(session, url, payload):\n    session.post(url, payload)\n",
    )
    found = crossfile.candidates(
        prefix="def retry(session, url, payload):\n    ", suffix="", path=f"{WS}/app/x.py",
        language="python", index=None, open_docs=[doc],
    )  # fmt: skip
    assert [c.kind for c in found] == ["snippet"] and "session.post" in found[0].text


def test_fit_stays_in_budget_and_skips_what_is_not_allowed() -> None:
    ranked = [
        crossfile.Candidate(path=f"{WS}/a.py", text="A" * 100, kind="definition", score=3),
        crossfile.Candidate(path=f"{WS}/secret.py", text="S" * 10, kind="definition", score=2),
        crossfile.Candidate(path=f"{WS}/b.py", text="B" * 500, kind="definition", score=1),
        crossfile.Candidate(path=f"{WS}/c.py", text="C" * 10, kind="definition", score=0.5),
    ]
    files = crossfile.fit(ranked, 300, lambda p: "secret" not in p)
    assert [f.path for f in files] == [f"{WS}/c.py", f"{WS}/a.py"]  # least relevant first
    assert sum(len(f.text) + crossfile.HEADER_CHARS + len(f.path) for f in files) <= 300
    assert crossfile.fit(ranked, 0, lambda p: True) == []


# -- the pipeline: which tier sees which file ------------------------------------------

LOW = TokenScript.of(" x", " y", " z", logprob=-3.0)  # unconfident: escalates
REMOTE = TokenScript.of("sign_request(req, key)", logprob=-0.01)


def _pipeline(local: FakeOllama, remote: FakeOpenAI, s: Settings) -> Pipeline:
    # The configured total, not one sized from the fake's reported timings (issue 26):
    # these tests are about which tier gets which file.
    s = with_values(s, {"local": {"first_token_target_ms": 0}})
    return Pipeline(
        s,
        OllamaBackend(local.url, "qwen2.5-coder:3b", timeout=5),
        OpenAIBackend([remote.base_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None),
        make_gate(s.routing),
    )


def _sending() -> Settings:
    """Settings with which the user sends context to the cluster too."""
    return with_values(Settings(), {"remote": {"send_context": True}})


def _ctx(never: str) -> CompletionContext:
    found = crossfile.candidates(
        prefix=CUR, suffix="\n", path=f"{WS}/app/main.py", language="python", index=_index(),
        open_docs=[crossfile.OpenDoc(f"{WS}/.env", 1, "API_TOKEN = load(key) # hunter2\n")],
    )  # fmt: skip
    return CompletionContext(
        prefix=CUR,
        suffix="\n",
        language="python",
        path=f"{WS}/app/main.py",
        roots=(WS,),
        crossfile=tuple(found),
        repo="w",
    )


def _prompt(fake: FakeOllama | FakeOpenAI, path: str) -> str:
    bodies = [json.loads(r.body) for r in fake.received(path)]
    return "\n".join(str(b.get("prompt", "")) for b in bodies)


async def test_never_send_definitions_feed_only_the_local_tier(
    fakes: tuple[FakeOllama, FakeOpenAI],
) -> None:
    local, remote = fakes
    local.script(LOW)
    remote.script(REMOTE)
    s = with_values(
        Settings(),
        {
            "privacy": {"never_send": ["app/util.py"]},
            "remote": {"send_context": True},  # the user chose to send context to the cluster
        },
    )
    p = _pipeline(local, remote, s)
    try:
        rec = await p.complete(_ctx("app/util.py"))
    finally:
        await p.local.aclose()  # type: ignore[union-attr]
        await p.remote.aclose()  # type: ignore[union-attr]
    assert rec.route == "remote"
    local_prompt, remote_prompt = (
        _prompt(local, "/api/generate"),
        _prompt(remote, "/v1/completions"),
    )
    assert "Sign with HMAC" in local_prompt and "hunter2" in local_prompt
    assert "Sign with HMAC" not in remote_prompt and "hunter2" not in remote_prompt
    # The other definition of the name is not private: it may go, as a repo-level file.
    assert "<|file_sep|>vendor/other.py\ndef sign_request(a)" in remote_prompt
    assert "<|repo_name|>w\n" in remote_prompt and "<|file_sep|>app/main.py\n" in remote_prompt
    tiers = {(p, t) for p, _, t in rec.context_files}
    assert ("app/util.py", "local") in tiers and ("app/util.py", "remote") not in tiers
    assert (".env", "local") in tiers and (".env", "remote") not in tiers
    assert ("vendor/other.py", "remote") in tiers
    assert 0 < rec.context_bytes_sent < rec.bytes_sent


async def test_file_mode_prompts_are_unchanged(fakes: tuple[FakeOllama, FakeOpenAI]) -> None:
    local, remote = fakes
    local.script(LOW)
    remote.script(REMOTE)
    p = _pipeline(local, remote, _sending())
    ctx = CompletionContext(prefix=CUR, suffix="\n", language="python", path=f"{WS}/app/main.py")
    try:
        rec = await p.complete(ctx)
    finally:
        await p.local.aclose()  # type: ignore[union-attr]
        await p.remote.aclose()  # type: ignore[union-attr]
    assert (
        _prompt(remote, "/v1/completions") == f"<|fim_prefix|>{CUR}<|fim_suffix|>\n<|fim_middle|>"
    )
    assert rec.context_files == () and rec.context_bytes_sent == 0


# -- eval: context size per request ------------------------------------------------


async def test_eval_sends_and_records_task_context(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    from synconfroute.server.evaluation import datasets
    from synconfroute.server.evaluation.generate import generate_record

    local, remote = fakes
    local.script(TokenScript.of("helper(2)", logprob=-0.1))
    remote.script(TokenScript.of("helper(2)", logprob=-0.01))
    row = {
        "task_id": "ctx-1",
        "language": "python",
        "prefix": "from util import helper\nprint(",
        "suffix": ")\n",
        "tests": [{"input": "", "output": "4"}],
        "context_files": [["util.py", "def helper(x):\n    return 2 * x\n"]],
    }
    data = tmp_path / "ctx.jsonl"
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    [task] = datasets.load_file(data)
    assert datasets.Task.from_json(json.loads(json.dumps(task.to_json()))) == task
    s = Settings()
    p = _pipeline(local, remote, s)
    assert p.local is not None and p.remote is not None
    try:
        rec = await generate_record(
            task, s, p.local, p.remote, "config", make_gate(s.routing), max_tokens=8
        )
    finally:
        await p.local.aclose()
        await p.remote.aclose()
    size = len(row["context_files"][0][1])  # type: ignore[index]
    assert rec.local.context_bytes == size and rec.remote is not None
    assert rec.remote.context_bytes == size
    assert "<|file_sep|>util.py\ndef helper(x)" in _prompt(remote, "/v1/completions")
    assert "# Path: util.py\ndef helper(x)" in _prompt(local, "/api/generate")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**row, "context_files": "util.py"}) + "\n", encoding="utf-8")
    with pytest.raises(datasets.DatasetError, match="context_files"):
        datasets.load_file(bad)


# -- settings and the built-in secret list ------------------------------------------


def test_workspace_settings_cannot_widen_context() -> None:
    from synconfroute.server.settings.config import merge_workspace

    user = with_values(Settings(), {"completion": {"context": "file", "recent_edits": False}})
    ws, issues = merge_workspace(
        user,
        {
            "completion": {"context": "workspace", "recent_edits": True},
            "remote": {"context_tokens": 99999, "send_context": True},
            "privacy": {"secret_files": False},
        },
    )
    assert ws.completion.context == "file" and ws.remote.context_tokens == 2048
    assert ws.privacy.secret_files is True and not ws.remote.send_context
    assert not ws.completion.recent_edits
    refused = {i.key for i in issues if i.message.startswith("refused")}
    assert refused == {
        "completion.context",
        "completion.recent_edits",
        "remote.context_tokens",
        "remote.send_context",
        "privacy.secret_files",
    }
    user = with_values(user, {"completion": {"context": "workspace"}})
    ws, issues = merge_workspace(user, {"completion": {"context": "file"}})
    assert ws.completion.context == "file" and not issues  # tightening is fine


@pytest.mark.parametrize(
    ("path", "blocked"),
    [
        ("/w/.env", True),
        ("/w/.env.production", True),
        ("/w/deploy/server.pem", True),
        ("/w/tls/site.key", True),
        ("/home/u/.ssh/id_rsa", True),
        ("/w/cert.p12", True),
        ("/w/aws/credentials", True),
        ("/w/app/main.py", False),
        ("/w/keyboard.py", False),
    ],
)
def test_secret_files_never_escalate(path: str, blocked: bool) -> None:
    from synconfroute.server.routing.pipeline import remote_access

    s = Settings()
    remote = OpenAIBackend(["http://127.0.0.1:9/v1"], "m", api_key_env=None)
    inside = path.startswith("/w/")
    path = existing(path)  # the file exists (the gate asks), /w is the folder WS
    assert (remote_access(s, remote, path, (WS,)) == "privacy-blocked") is blocked
    s = with_values(s, {"privacy": {"secret_files": False}})
    # Outside every workspace folder, a file stays on the machine anyway (issue 27).
    assert (remote_access(s, remote, path, (WS,)) == "ok") is inside


# -- the session keeps the index current ------------------------------------------------


async def test_session_index_follows_open_edit_save_close_and_disk(tmp_path: Path) -> None:
    import asyncio

    from synconfroute.server.session.session import Edit, Session
    from synconfroute.server.settings import config

    _tree(tmp_path, {"lib.py": "def old_name():\n    pass\n", "b.py": "B = 1\n"})
    settings = Settings()
    session = Session(
        config.Loaded(settings, (), config.default_config_path(), False),
        roots=lambda: [tmp_path.as_uri()],
    )
    session.apply_overrides(init={"completion": {"context": "file"}})
    assert session.start_index() is None  # "file": no index, nothing read
    session.apply_overrides(init={"completion": {"context": "workspace"}})
    index = session.start_index()
    assert index is not None
    for _ in range(200):
        if index.ready:
            break
        await asyncio.sleep(0.01)
    lib = f"{tmp_path}/lib.py"
    assert index.ready and index.lookup("old_name")[0].path == lib
    uri = (tmp_path / "lib.py").as_uri()
    session.open(uri, "def old_name():\n    pass\n", "python")
    session.change(uri, [Edit("def new_name():\n    pass\n")])
    assert session.document(uri).index_stale  # type: ignore[union-attr]
    session.saved(uri)
    assert index.lookup("new_name") and not index.lookup("old_name")
    session.change(uri, [Edit("def unsaved():\n    pass\n")])
    session.close(uri)  # unsaved edits are gone: the file on disk is the truth again
    assert index.lookup("old_name") and not index.lookup("unsaved")
    (tmp_path / "b.py").unlink()
    await session.files_changed([((tmp_path / "b.py").as_uri(), True)])
    assert index.lookup("B") == []
    await session.shutdown()


async def test_a_file_made_private_mid_request_cancels_the_remote_call_that_carries_it(
    fakes: tuple[FakeOllama, FakeOpenAI],
) -> None:
    import asyncio

    from synconfroute.server.settings.config import PrivacySettings

    local, remote = fakes
    local.script(LOW)
    remote.script(TokenScript.of("sign_request(req, key)", logprob=-0.01, first_delay=2.0))
    p = _pipeline(local, remote, _sending())
    try:
        task = asyncio.ensure_future(p.complete(_ctx("")))
        for _ in range(200):  # until the remote request is on its way
            if remote.received("/v1/completions"):
                break
            await asyncio.sleep(0.01)
        assert "Sign with HMAC" in _prompt(remote, "/v1/completions")  # public, so far
        p.update_privacy(PrivacySettings(never_send=["app/util.py"]))
        rec = await asyncio.wait_for(task, 5)
    finally:
        await p.local.aclose()  # type: ignore[union-attr]
        await p.remote.aclose()  # type: ignore[union-attr]
    assert rec.route != "remote" and rec.completion != "sign_request(req, key)"
    assert any("privacy settings changed" in e for e in rec.errors)


def test_the_repo_name_is_the_innermost_open_folder_holding_the_file() -> None:
    """`<|repo_name|>` in a multi-root window: the folder of the file being completed
    (before: always the first folder's name, whichever folder held the file)."""
    from synconfroute.server.session.context_builder import repo_name

    roots = ("/w/billing", "/w/shop", "/w/shop/vendor/lib")
    assert repo_name("/w/shop/src/cart.py", roots) == "shop"
    assert repo_name("/w/shop/vendor/lib/x.py", roots) == "lib"
    assert repo_name("/w/billing/a.py", roots) == "billing"
    assert repo_name("/w/shopping/a.py", roots) == ""  # a name prefix is no parent
    assert repo_name("/elsewhere/a.py", roots) == ""
    assert repo_name("/w/shop/a.py", ("/w/shop/",)) == "shop"
