"""The cluster, second step, through the real server (`synconfroute serve`) against fakes:
replica affinity over several `remote.urls`, and the cluster's own load signal (vLLM's
/metrics) moving the escalation bar before this client's own answers are slow.

Assertions are on lasting states, polled with generous bounds (a paused CI machine only
makes the loops run longer), never on how long something took."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as t
from pytest_lsp import LanguageClient

from synconfroute.clients.replicas import rendezvous
from synconfroute.server.routing.affinity import workspace_key
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import capabilities, inline_request, open_doc, start, stop, write_config

pytestmark = pytest.mark.timeout(300)

BROKEN = TokenScript.of(" a", " +", " (b", logprob=-0.05)  # invalid: always escalates
UNSURE = TokenScript.of(" a", " +", " b", logprob=-0.8)  # valid, under the -0.5 threshold
REMOTE = TokenScript.of(" a", " + ", "b", logprob=-0.01)  # answers at once: never slow


def _plain(value: Any) -> Any:
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


@pytest.fixture
def replicas() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    with FakeOpenAI(default=REMOTE) as a, FakeOpenAI(default=REMOTE) as b:
        yield a, b


class Editor:
    """One document per workspace; each ask edits it (a new function name), so no answer
    comes from the completion cache."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.versions: dict[str, int] = {}
        self.n = 0
        self.routes: list[dict[str, Any]] = []

        @client.feature("synconfroute/route")
        def on_route(params: Any) -> None:
            self.routes.append(_plain(params))

    def text(self, tag: str, uri: str) -> tuple[str, t.Position]:
        """A new text, written to disk too: only a real file inside an open folder may
        leave the machine."""
        self.n += 1
        name = f"add_{tag}_{self.n}"
        text = f"def {name}(a, b):\n    return \n\n\nprint({name}(1, 2))\n"
        Path(uri.removeprefix("file://")).write_text(text, encoding="utf-8")
        return text, t.Position(1, 11)

    async def ask(self, uri: str, tag: str) -> dict[str, Any]:
        """A completion at a fresh text; its `synconfroute/route` notification."""
        text, pos = self.text(tag, uri)
        if uri not in self.versions:
            self.versions[uri] = 1
            open_doc(self.client, uri, text)
        else:
            self.versions[uri] += 1
            self.client.text_document_did_change(
                t.DidChangeTextDocumentParams(
                    text_document=t.VersionedTextDocumentIdentifier(
                        version=self.versions[uri], uri=uri
                    ),
                    content_changes=[t.TextDocumentContentChangeWholeDocument(text)],
                )
            )
        before = len(self.routes)
        await self.client.text_document_inline_completion_async(inline_request(uri, pos))
        for _ in range(600):  # the notification follows the response; never wait forever
            if len(self.routes) > before:
                break
            await asyncio.sleep(0.05)
        assert len(self.routes) > before, "no synconfroute/route notification"
        return self.routes[-1]

    async def status(self) -> dict[str, Any]:
        st = await self.client.workspace_execute_command_async(
            t.ExecuteCommandParams("synconfroute.status", [])
        )
        assert isinstance(st, dict), st
        return st


def _card(note: dict[str, Any]) -> str:
    card = note["card"]
    return card if isinstance(card, str) else str(card["value"])


def _six_workspaces(base: Path, urls: list[str]) -> list[Path]:
    """Six workspace folders, three of them first in rendezvous order for each replica
    (which replica a folder hashes to depends on the user name and the temporary path;
    picking them keeps "six workspaces use both" a check of the server, not of luck)."""
    chosen: dict[str, list[Path]] = {u: [] for u in urls}
    for i in range(1000):
        folder = (base / f"ws{i}").resolve()
        first = rendezvous(workspace_key(str(folder / "calc.py"), (str(folder),)), urls)[0]
        if len(chosen[first]) < 3:
            chosen[first].append(folder)
        if all(len(v) == 3 for v in chosen.values()):
            break
    folders = [f for v in chosen.values() for f in v]
    for f in folders:
        f.mkdir(parents=True)
    return folders


async def test_each_workspace_sticks_to_one_replica_and_workspaces_use_both(
    tmp_path: Path, local_fake: FakeOllama, replicas: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    a, b = replicas
    urls = [a.base_url, b.base_url]
    folders = _six_workspaces(tmp_path / "repos", urls)
    local_fake.script(BROKEN, always=True)
    cfg = write_config(
        tmp_path,
        local_url=local_fake.url,
        remote_url=a.base_url,
        remote_extra=f'urls = ["{b.base_url}"]\nsession_header = "x-user-id"',
    )
    client, _ = await start(
        cfg, capabilities("visual-studio-code", inline=True), folders=folders, root=folders[0]
    )
    editor = Editor(client)
    try:
        for _ in range(3):
            for i, folder in enumerate(folders):
                note = await editor.ask((folder / "calc.py").as_uri(), f"ws{i}")
                assert note["route"] == "remote", note
        # Each workspace's requests, by the function names they carry, at each replica.
        seen: dict[int, set[str]] = {}
        headers: dict[int, set[str]] = {}
        for fake, url in ((a, a.base_url), (b, b.base_url)):
            for r in fake.received("/v1/completions"):
                prompt = r.json()["prompt"]
                (i,) = [i for i in range(6) if f"add_ws{i}_" in prompt]
                seen.setdefault(i, set()).add(url)
                headers.setdefault(i, set()).add(r.headers.get("x-user-id", ""))
        assert sorted(seen) == list(range(6)), seen
        for i, folder in enumerate(folders):
            key = workspace_key(str(folder / "calc.py"), (str(folder),))
            assert seen[i] == {rendezvous(key, urls)[0]}, (i, seen)  # sticks, to its own
            assert headers[i] == {key}, headers  # one stable session value per workspace
            assert folder.name not in key and len(key) == 16  # a hash, naming nothing
        assert len(a.received("/v1/completions")) == 9, "three workspaces on each replica"
        assert len(b.received("/v1/completions")) == 9
        # A failure moves a workspace to the next replica in its own order, and back once
        # its replica answers again (a 503 holds it only for its Retry-After).
        on_a = [i for i, f in enumerate(folders) if seen[i] == {a.base_url}]
        a.script(TokenScript(status=503, retry_after="1"))
        before_b = len(b.received("/v1/completions"))
        note = await editor.ask((folders[on_a[0]] / "calc.py").as_uri(), f"ws{on_a[0]}")
        assert note["route"] == "remote", note
        assert len(b.received("/v1/completions")) == before_b + 1
        for _ in range(100):
            await asyncio.sleep(0.2)
            before_a = len(a.received("/v1/completions"))
            note = await editor.ask((folders[on_a[0]] / "calc.py").as_uri(), f"ws{on_a[0]}")
            if len(a.received("/v1/completions")) > before_a:
                break
        else:
            pytest.fail("the workspace never went back to its own replica")
    finally:
        await stop(client)


async def test_a_queue_on_the_cluster_keeps_unsure_answers_local_before_any_slow_answer(
    tmp_path: Path, local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    """60 requests waiting on the cluster (its /metrics) raise the bar although every
    answer this client got was fast; once the queue is gone, escalation resumes."""
    remote_fake.script(REMOTE, always=True)
    remote_fake.waiting, remote_fake.running = 60, 4
    local_fake.script(UNSURE, always=True)
    # No answer of this client's may count as slow, however long a loaded CI machine
    # takes to pass it on: the bar can only move on the cluster's word.
    cfg = write_config(
        tmp_path,
        local_url=local_fake.url,
        remote_url=remote_fake.base_url,
        extra="[routing]\nttft_target_ms = 600000",
    )
    folder = (tmp_path / "repo").resolve()
    folder.mkdir()
    uri = (folder / "calc.py").as_uri()
    client, _ = await start(
        cfg, capabilities("visual-studio-code", inline=True), folders=[folder], root=folder
    )
    editor = Editor(client)
    try:
        held: dict[str, Any] | None = None
        notes = []
        for _ in range(200):
            note = await editor.ask(uri, "q")
            notes.append((note["route"], note["reasons"]))
            if note["route"] == "local" and "cluster-busy" in note["reasons"]:
                held = note
                break
            assert note["route"] == "remote", notes  # escalated, answered at once
            await asyncio.sleep(0.1)  # the metrics poll runs in the background
        assert held is not None, f"the queue never raised the bar: {notes}"
        assert remote_fake.received("/metrics"), "the server never read the cluster's metrics"
        # Every escalation was answered in full: the bar moved on the cluster's word.
        for r in remote_fake.received("/v1/completions"):
            assert r.disconnected is False
        card = _card(held)
        assert "cluster queue: 60 waiting, 4 running" in card, card
        assert "moved by cluster metrics" in card, card
        cluster = (await editor.status())["cluster"]
        assert cluster["state"] == "queued" and cluster["moved_by"] == "cluster metrics", cluster
        # The metrics poll carries no code: no body, and no key either.
        for r in remote_fake.received("/metrics"):
            assert r.method == "GET" and not r.body and "authorization" not in r.headers
        # The queue drains: escalation resumes without waiting for a half-life.
        remote_fake.waiting, remote_fake.running = 0, 1
        resumed = None
        for _ in range(200):
            note = await editor.ask(uri, "q")
            notes.append((note["route"], note["reasons"]))
            if note["route"] == "remote":
                resumed = note
                break
            await asyncio.sleep(0.1)
        assert resumed is not None, f"escalation never resumed: {notes[-5:]}"
        assert resumed["reasons"] == ["low-confidence", "remote-ok"], resumed
        cluster = (await editor.status())["cluster"]
        assert cluster["lift"] == 0.0 and "cluster idle" in cluster["why"], cluster
    finally:
        await stop(client)
