"""Recent edits as context (issue 21): the ring buffer, and through the session and the
pipeline to what the fake tiers receive over real sockets."""

from __future__ import annotations

import json
from pathlib import Path

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.session.session import Edit, Session
from synconfroute.server.settings import config
from synconfroute.server.workspace.recent_edits import (
    RecentEdits,
    lines_of_range_edit,
    lines_of_sync,
)
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


TEXT = "\n".join(f"line {i}" for i in range(40))


def test_a_second_change_nearby_joins_the_chunk_and_the_ring_drops_the_oldest() -> None:
    clock = Clock()
    ring = RecentEdits(max_chunks=2, max_age_s=60, clock=clock)
    ring.note("/w/a.py", TEXT, 10, 10)
    ring.note("/w/a.py", TEXT, 12, 12)  # two lines further: the same place
    (only,) = ring.recent()
    assert (only.first, only.last) == (8, 14) and "line 10" in only.text
    ring.note("/w/b.py", TEXT, 0, 0)
    ring.note("/w/c.py", TEXT, 30, 31)
    assert [c.path for c in ring.recent()] == ["/w/c.py", "/w/b.py"]  # newest first, 2 kept
    assert [c.path for c in ring.recent(exclude="/w/c.py")] == ["/w/b.py"]
    clock.now += 61
    assert ring.recent() == []  # too old


def test_a_long_change_keeps_the_lines_around_it() -> None:
    ring = RecentEdits()
    ring.note("/w/a.py", TEXT, 0, 39)
    (c,) = ring.recent()
    assert c.text.count("\n") + 1 == 12


def test_changed_lines_of_range_edits_and_whole_syncs() -> None:
    assert lines_of_range_edit(4, "x") == (4, 4)
    assert lines_of_range_edit(4, "a\nb\r\nc\rd") == (4, 7)
    assert lines_of_sync("a\nb\nc\n", "a\nB\nc\n") == (1, 1)


# -- through the session: what the tiers receive ---------------------------------------

A = "def helper(x):\n    return x\n"
B = "from a import helper\n\ndef main():\n    return \n"
LOW = TokenScript.of(" x", " y", " z", logprob=-3.0)  # unconfident: escalates


def _prompts(fake: FakeOllama | FakeOpenAI, path: str) -> list[str]:
    return [str(json.loads(r.body).get("prompt", "")) for r in fake.received(path)]


def _session(
    tmp_path: Path, local: FakeOllama, remote: FakeOpenAI | None, s: config.Settings
) -> Session:
    s = config.with_values(
        s,
        {
            "editor": {"debounce_ms": 0},
            "completion": {"context": "file"},  # only the edits: no index in these tests
            # The fake's reported timings would size the prompt (issue 26): these tests
            # are about which tier gets which file, at the configured total.
            "local": {"first_token_target_ms": 0},
        },
    )

    def make(st: config.Settings) -> Pipeline:
        r = None
        if remote is not None:
            r = OpenAIBackend(
                [remote.base_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None
            )
        return Pipeline(
            st, OllamaBackend(local.url, "qwen2.5-coder:3b", timeout=5), r, make_gate(st.routing)
        )

    loaded = config.Loaded(s, (), config.default_config_path(), False)
    return Session(loaded, make_pipeline=make, roots=lambda: [tmp_path.as_uri()])


async def test_an_edit_in_one_file_is_in_the_next_prompt_of_another(tmp_path: Path) -> None:
    with FakeOllama(default=TokenScript.of(" 1", logprob=-0.01)) as local:
        session = _session(tmp_path, local, None, config.Settings())
        a, b = (tmp_path / "a.py").as_uri(), (tmp_path / "b.py").as_uri()
        session.open(a, A, "python")
        session.open(b, B, "python")
        await session.complete(b, 3, 11, invoked=True)
        assert "EDITED_IN_A" not in _prompts(local, "/api/generate")[-1]
        # One keystroke's change in a.py (a range edit), then the next request in b.py.
        session.change(a, [Edit("    # EDITED_IN_A\n", (1, 0), (1, 0))])
        await session.complete(b, 3, 11, invoked=True)
        prompt = _prompts(local, "/api/generate")[-1]
        await session.shutdown()
    assert "# EDITED_IN_A" in prompt
    # Before the current file, under its path: the current file stays last.
    assert prompt.index("EDITED_IN_A") < prompt.index("def main():")
    assert "# Path: a.py\n" in prompt  # Ollama's native FIM: comment headers


async def test_a_private_files_edit_never_reaches_the_remote(tmp_path: Path) -> None:
    s = config.with_values(
        config.Settings(),
        {
            "remote": {"send_context": True},  # the user sends context to the cluster...
            "privacy": {"never_send": ["keys.py"]},  # ...but never this file
        },
    )
    with FakeOllama() as local, FakeOpenAI() as remote:
        remote.script(TokenScript.of("1", logprob=-0.01), always=True)
        session = _session(tmp_path, local, remote, s)
        for n in ("keys.py", "pub.py", "b.py"):  # files that exist (the gate asks)
            (tmp_path / n).write_text("\n", encoding="utf-8")
        keys, pub, b = ((tmp_path / n).as_uri() for n in ("keys.py", "pub.py", "b.py"))
        session.open(keys, "SALT = 'x'\n", "python")
        session.open(pub, "P = 1\n", "python")
        session.open(b, B, "python")
        session.change(keys, [Edit("SALT = 'PRIVATE-SALT-9d1e'\n")])  # whole-text sync
        session.change(pub, [Edit("P = 'PUBLIC-EDIT-44aa'\n", (0, 0), (1, 0))])
        local.script(LOW)
        done = await session.complete(b, 3, 11, invoked=True)
        await session.shutdown()
        local_prompt = _prompts(local, "/api/generate")[-1]
        bodies = [r.body.decode() for r in remote.received("/v1/completions")]
    assert done is not None and done.decision.route == "remote"
    assert "PRIVATE-SALT-9d1e" in local_prompt and "PUBLIC-EDIT-44aa" in local_prompt
    assert bodies and all("PUBLIC-EDIT-44aa" in body for body in bodies)
    assert not any("PRIVATE-SALT-9d1e" in body or "keys.py" in body for body in bodies)


async def test_without_send_context_no_edit_leaves_the_machine(tmp_path: Path) -> None:
    with FakeOllama() as local, FakeOpenAI() as remote:
        remote.script(TokenScript.of("1", logprob=-0.01), always=True)
        session = _session(tmp_path, local, remote, config.Settings())  # the defaults
        for n in ("pub.py", "b.py"):  # files that exist (the gate asks)
            (tmp_path / n).write_text("\n", encoding="utf-8")
        pub, b = (tmp_path / "pub.py").as_uri(), (tmp_path / "b.py").as_uri()
        session.open(pub, "P = 1\n", "python")
        session.open(b, B, "python")
        session.change(pub, [Edit("P = 'PUBLIC-EDIT-44aa'\n", (0, 0), (1, 0))])
        local.script(LOW)
        done = await session.complete(b, 3, 11, invoked=True)
        await session.shutdown()
        local_prompt = _prompts(local, "/api/generate")[-1]
        bodies = [r.body.decode() for r in remote.received("/v1/completions")]
    assert done is not None and done.decision.route == "remote"
    assert "PUBLIC-EDIT-44aa" in local_prompt
    assert bodies and not any("PUBLIC-EDIT-44aa" in body or "pub.py" in body for body in bodies)
