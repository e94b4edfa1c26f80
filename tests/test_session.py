"""Session bookkeeping that the LSP tests do not reach: tree memory, debounce rhythm."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from synconfroute.clients.ollama import OllamaBackend
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.session.folders import rules_of
from synconfroute.server.session.session import Edit, Session
from synconfroute.server.settings import config
from synconfroute.server.syntax import SyntaxDocument
from synconfroute.server.workspace.documents import _TREES_KEPT
from tests.fakes import FakeOllama, TokenScript
from tests.files import existing

TEXT = "def f(x):\n    return \n"


def test_lazy_and_released_trees_give_the_same_verdicts() -> None:
    eager = SyntaxDocument(TEXT, "python")
    lazy = SyntaxDocument(TEXT, "python", lazy=True)
    assert eager.has_tree and not lazy.has_tree
    for doc in (eager, lazy):
        doc.edit((1, 11), (1, 11), "x")
    eager.release_tree()
    for completion, valid in ((" + 1", True), (" + (1", False)):
        a = eager.check(completion, (1, 12))
        b = lazy.check(completion, (1, 12))
        assert a.valid == b.valid == valid
    assert eager.has_tree and lazy.has_tree  # parsed again on demand, then kept
    assert str(eager.tree.root_node) == str(SyntaxDocument(eager.text, "python").tree.root_node)  # type: ignore[union-attr]


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama(default=TokenScript.of(" x", logprob=-0.01)) as f:
        yield f


def _session(fake: FakeOllama, settings: config.Settings) -> Session:
    """A session whose local tier is the Ollama fake (no remote tier)."""

    def make(s: config.Settings) -> Pipeline:
        return Pipeline(s, OllamaBackend(fake.url, "qwen2.5-coder:3b"), None, make_gate(s.routing))

    return Session(
        config.Loaded(settings, (), config.default_config_path(), False), make_pipeline=make
    )


async def test_only_recent_documents_keep_trees(fake: FakeOllama) -> None:
    settings = config.with_values(config.Settings(), {"editor": {"debounce_ms": 0}})

    session = _session(fake, settings)
    n = _TREES_KEPT + 4
    texts = [f"def f{i}(x):\n    return \n" for i in range(n)]  # distinct: no cache hits
    for i in range(n):
        session.open(f"file:///d{i}.py", texts[i], "python", None)
    assert not any(st.syntax.has_tree for st in session.docs.documents.values())  # lazy at open
    for i in range(n):
        done = await session.complete(f"file:///d{i}.py", 1, 11, invoked=True)
        assert done is not None and done.insert_text == " x"
    kept = [uri for uri, st in session.docs.documents.items() if st.syntax.has_tree]
    assert kept == [f"file:///d{i}.py" for i in range(n - _TREES_KEPT, n)]
    # An evicted document still follows edits and checks correctly.
    session.change("file:///d0.py", [Edit("y +", (1, 11), (1, 11))])
    again = await session.complete("file:///d0.py", 1, 14, invoked=True)
    assert session.docs.documents["file:///d0.py"].text.text == "def f0(x):\n    return y +\n"
    assert again is not None and again.decision.syntax is not None
    assert again.decision.syntax.status == "valid", (again.decision.syntax, again.insert_text)
    await session.shutdown()


def test_adaptive_debounce_follows_typing_rhythm() -> None:
    settings = config.with_values(config.Settings(), {"editor": {"debounce_ms": 100}})
    session = Session(config.Loaded(settings, (), config.default_config_path(), False))
    session.open("file:///a.py", TEXT, "python", None)
    st = session.docs.documents["file:///a.py"]
    assert session.debounce_s(st) == pytest.approx(0.1)  # no rhythm yet: the setting
    st.keystrokes.extend([0.0, 0.04, 0.08, 0.12, 0.16])  # 40 ms between keys
    assert session.debounce_s(st) == pytest.approx(0.06)
    st.keystrokes.extend([1.0, 1.5, 2.0, 2.5])  # slow typist: capped at 3x the setting
    assert session.debounce_s(st) == pytest.approx(0.3)
    session.apply_overrides(init={"editor": {"adaptive_debounce": False}})
    assert session.debounce_s(st) == pytest.approx(0.1)


def test_change_keeps_the_tree_text_in_sync_utf16() -> None:
    session = Session(config.Loaded(config.Settings(), (), config.default_config_path(), False))
    session.negotiated("utf-16")
    session.open("file:///e.py", "s = '😀'\nx = 1\r\n", "python", None)
    session.change(
        "file:///e.py",
        [
            Edit("漢", (0, 7), (0, 7)),  # after the emoji: utf-16 column 7
            Edit("yy", (1, 0), (1, 1)),
            Edit("\nz = 2", (1, 6), (1, 6)),
        ],
    )
    assert session.docs.documents["file:///e.py"].syntax.text == "s = '😀漢'\nyy = 1\nz = 2\r\n"


async def test_accepting_the_offer_keeps_the_hover_card(fake: FakeOllama) -> None:
    settings = config.Settings()

    session = _session(fake, settings)
    uri = "file:///acc.py"
    session.open(uri, TEXT, "python", None)
    done = await session.complete(uri, 1, 11, invoked=True)
    assert done is not None and session.hover(uri, 1) is not None
    session.change(uri, [Edit(" x", (1, 11), (1, 11))])  # the editor inserts the item
    card = session.hover(uri, 1)
    assert card is not None and "accepted" in card
    session.change(uri, [Edit("y", (1, 13), (1, 13))])  # any other edit: the card goes
    assert session.hover(uri, 1) is None
    await session.shutdown()


async def test_a_file_over_the_size_limit_skips_the_gate_and_keeps_no_tree(
    fake: FakeOllama,
) -> None:
    settings = config.with_values(
        config.Settings(), {"editor": {"debounce_ms": 0}, "routing": {"syntax_max_bytes": 10_000}}
    )

    session = _session(fake, settings)
    big = "def g(y):\n    return y\n\n" * 600 + TEXT  # 14 KB
    session.open("file:///big.py", big, "python", None)
    session.open("file:///small.py", TEXT, "python", None)
    line = big.count("\n") - 1
    done = await session.complete("file:///big.py", line, 11, invoked=True)
    assert done is not None and done.insert_text == " x"
    rec = done.decision
    assert rec.syntax is not None and rec.syntax.status == "skipped"
    assert "routing.syntax_max_bytes" in rec.syntax.message
    assert f"{len(big.encode()):,} bytes" in rec.syntax.message
    # Nothing may leave (no remote): shown, but as unchecked and unconfirmed.
    assert rec.reasons == ("syntax-skipped", "no-remote-configured", "kept-local-unconfirmed")
    card = session.hover("file:///big.py", line)
    assert card is not None and "skipped" in card and "syntax_max_bytes" in card
    assert not session.docs.documents["file:///big.py"].syntax.has_tree
    small = await session.complete("file:///small.py", 1, 11, invoked=True)
    assert small is not None and small.decision.syntax is not None
    assert small.decision.syntax.status == "valid"
    assert session.docs.documents["file:///small.py"].syntax.has_tree
    await session.shutdown()


async def test_kept_trees_are_bounded_by_text_size(
    fake: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 16 trees of multi-MB files would cost gigabytes: count the text too.
    monkeypatch.setattr("synconfroute.server.workspace.documents._TREE_BYTES_KEPT", 25_000)
    settings = config.with_values(config.Settings(), {"editor": {"debounce_ms": 0}})

    session = _session(fake, settings)
    body = "def g(y):\n    return y\n\n" * 400  # 9.6 KB
    for i in range(4):
        text = body + f"def f{i}(x):\n    return \n"
        session.open(f"file:///m{i}.py", text, "python", None)
        done = await session.complete(f"file:///m{i}.py", 1201, 11, invoked=True)
        assert done is not None and done.decision.syntax is not None
        assert done.decision.syntax.status == "valid"
    kept = [uri for uri, st in session.docs.documents.items() if st.syntax.has_tree]
    assert kept == ["file:///m2.py", "file:///m3.py"]  # 2 x 10 KB fit in 25 KB, 3 do not
    await session.shutdown()


def test_settings_changes_publish_new_objects_never_mutate_old_ones() -> None:
    """A pipeline or request holding the settings it started with keeps a snapshot:
    the local-only toggle and editor overrides replace the object, never edit it."""
    session = Session(config.Loaded(config.Settings(), (), config.default_config_path(), False))
    before = session.settings
    assert session.toggle_local_only() is True
    assert session.settings.privacy.local_only and not before.privacy.local_only
    session.apply_overrides(init={"editor": {"debounce_ms": 10}})
    merged = session.settings
    assert merged.privacy.local_only and merged.editor.debounce_ms == 10  # the toggle stays
    assert session.toggle_local_only() is False
    assert merged.privacy.local_only and not session.settings.privacy.local_only
    assert before.editor.debounce_ms != 10


def test_status_record_keeps_the_command_json_keys() -> None:
    session = Session(config.Loaded(config.Settings(), (), config.default_config_path(), False))
    st = session.status().to_json()
    assert list(st) == [
        "local_only", "local", "remote", "policy", "threshold", "adaptive", "completions",
        "routes", "accepted", "last", "pid", "local_worker", "cluster", "workspace",
    ]  # fmt: skip
    assert st["routes"] == {"local": 0, "remote": 0, "none": 0} and st["local_worker"] is None


async def test_no_prefill_is_scheduled_for_a_local_tier_that_cannot_prefill(
    fake: FakeOllama,
) -> None:
    """Ollama has no prefill: neither an edit (the inferred rest) nor a reported cursor
    schedules anything, so nothing builds a context for nothing."""
    settings = config.Settings()

    session = _session(fake, settings)
    await session.pipeline()
    session.open("file:///a.py", "def f(x):\n    return \n", "python", None)
    session.change("file:///a.py", [Edit("x", (1, 11), (1, 11))])
    session.cursor("file:///a.py", 1, 12)
    await asyncio.sleep(0.4)  # past the rest
    assert session.prefiller.done == 0
    assert not fake.received("/api/generate")
    await session.shutdown()


@pytest.mark.parametrize("speculative", [True, False])
async def test_speculative_local_start_shows_nothing_before_the_debounce(
    fake: FakeOllama, speculative: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With editor.speculative the local model starts at the keystroke, while the
    debounce waits; the answer still comes only after it, and a keystroke meanwhile
    replaces it (nothing shown for the first). Only the embedded worker speculates
    (`speculates`); the Ollama fake stands in for it here, as if it could."""
    monkeypatch.setattr("synconfroute.server.session.session.speculates", lambda b: True)
    # A long debounce: a CI machine that pauses for a second cannot make the request
    # (speculative) or the answer (either way) look early or late.
    debounce_s = 3.0
    editor = {
        "debounce_ms": int(debounce_s * 1000),
        "adaptive_debounce": False,
        "speculative": speculative,
    }
    settings = config.with_values(config.Settings(), {"editor": editor})

    session = _session(fake, settings)
    uri = Path(existing("spec.py")).as_uri()  # a file that exists (the gate asks)
    session.open(uri, TEXT, "python", None)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    first = asyncio.ensure_future(session.complete(uri, 1, 11, invoked=False))

    def asked() -> int:
        return len(fake.received("/api/generate"))

    if speculative:  # the local tier gets the request while the debounce still waits
        for _ in range(int(debounce_s / 0.02)):
            if asked():
                break
            await asyncio.sleep(0.02)
        seen = (asked(), round(loop.time() - t0, 2), first.done())
        assert seen[0] == 1 and not seen[2], f"(requests, seconds, shown) = {seen}"
    else:  # nothing asked before the debounce ends
        await asyncio.sleep(0.3)
        assert asked() == 0 and not first.done(), (asked(), first.done())
    done = await first
    assert done is not None and done.insert_text == " x"
    assert loop.time() - t0 >= debounce_s  # shown after the debounce either way

    session.change(uri, [Edit("y", (1, 11), (1, 11))])
    second = asyncio.ensure_future(session.complete(uri, 1, 12, invoked=False))
    await asyncio.sleep(0.2)
    session.change(uri, [Edit(" +", (1, 12), (1, 12))])  # typed within the debounce
    third = asyncio.ensure_future(session.complete(uri, 1, 14, invoked=False))
    assert await second is None
    done = await third
    assert done is not None and done.insert_text == " x"
    await session.shutdown()


def test_only_the_embedded_worker_speculates() -> None:
    from synconfroute.clients.embedded import EmbeddedBackend
    from synconfroute.server.routing.backends import speculates

    assert speculates(EmbeddedBackend(None))
    assert not speculates(OllamaBackend("http://127.0.0.1:1", "qwen2.5-coder:3b"))
    assert not speculates(None)


async def test_a_requests_settings_are_read_again_only_when_a_folder_answered_meanwhile(
    fake: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each read follows the folders' real paths (syscalls): once per request, and again
    when a folder's configuration came while the request waited for the workspace."""
    session = _session(fake, config.with_values(config.Settings(), {"editor": {"debounce_ms": 0}}))
    session.open("file:///w/a.py", TEXT, "python", None)
    reads: list[str] = []
    read = session.folder_settings.settings_for

    def counted(path: str, window: config.Settings) -> config.Settings:
        reads.append(path)
        return read(path, window)

    monkeypatch.setattr(session.folder_settings, "settings_for", counted)
    assert await session.complete("file:///w/a.py", 1, 11, invoked=True) is not None
    assert reads == ["/w/a.py"]
    waited = session._await_workspace

    async def answered_meanwhile() -> None:
        await waited()
        settings = config.Settings()
        session.folder_settings.applied(rules_of("/w", settings, settings, ()), {})

    monkeypatch.setattr(session, "_await_workspace", answered_meanwhile)
    reads.clear()
    assert await session.complete("file:///w/a.py", 1, 11, invoked=True) is not None
    assert reads == ["/w/a.py", "/w/a.py"]
    await session.shutdown()
