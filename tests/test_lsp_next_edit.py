"""Next-edit suggestions through the real server over stdio (pytest-lsp), against the
fake tiers (Ollama's native API locally, vLLM's OpenAI API remotely, real sockets), each
answering its prompt's own editable region rewritten (tests/fakes/next_edit.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as t
from pytest_lsp import LanguageClient

from tests.fakes import FakeOllama, FakeOpenAI
from tests.fakes.next_edit import RewritingModel
from tests.fakes.ollama import canonical
from tests.lsp_harness import capabilities, open_doc, start, stop, workspace_file, write_config

pytestmark = pytest.mark.timeout(120)

BEFORE = (
    "def price(items):\n"
    "    total = 0\n"
    "    for item in items:\n"
    "        total += item.cost\n"
    "    return total\n"
)
TEXT = BEFORE.replace("    total = 0", "    subtotal = 0")  # the edit just made
RENAMED = TEXT.replace("total +=", "subtotal +=").replace("return total", "return subtotal")


def rename(region: str) -> str:
    return region.replace("total +=", "subtotal +=").replace("return total", "return subtotal")


def broken(region: str) -> str:
    return region.replace("total += item.cost", "total += (item.cost")


def _plain(obj: Any) -> Any:
    """A custom method's result as pygls hands it over (nested namedtuples) -> JSON."""
    if hasattr(obj, "_asdict"):
        return {k: _plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    return obj


async def edit_at(client: LanguageClient, uri: str, version: int, line: int, ch: int) -> Any:
    params = {
        "textDocument": {"uri": uri, "version": version},
        "position": {"line": line, "character": ch},
    }
    return _plain(
        await client.protocol.send_request_async("textDocument/copilotInlineEdit", params)
    )


def type_rename(client: LanguageClient, uri: str) -> None:
    """Open the file as it was, then rename `total` on line 1 as the user would."""
    open_doc(client, uri, BEFORE)
    client.text_document_did_change(
        t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                t.TextDocumentContentChangePartial(
                    range=t.Range(t.Position(1, 4), t.Position(1, 4)), text="sub"
                )
            ],
        )
    )


def apply(text: str, item: dict[str, Any]) -> str:
    lines = text.split("\n")
    r = item["range"]

    def off(p: dict[str, int]) -> int:
        return sum(len(x) + 1 for x in lines[: p["line"]]) + p["character"]

    return text[: off(r["start"])] + item["text"] + text[off(r["end"]) :]


def ledger(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "ledger.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def rows(tmp_path: Path) -> list[dict[str, Any]]:
    """The ledger's decisions (not its shown/accepted/dismissed events)."""
    return [e for e in ledger(tmp_path) if "route" in e]


async def until(predicate: Callable[[], bool], within_s: float = 30.0) -> bool:
    end = asyncio.get_running_loop().time() + within_s
    while not predicate():
        if asyncio.get_running_loop().time() > end:
            return False
        await asyncio.sleep(0.05)
    return True


async def started(cfg: Path) -> tuple[LanguageClient, str, list[dict[str, Any]]]:
    """The server on `cfg`, the document's URI, and the routes it sends (as they come)."""
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    routes: list[dict[str, Any]] = []

    @client.feature("synconfroute/route")
    def on_route(params: Any) -> None:
        routes.append(_plain(params))

    return client, workspace_file("src/shop.py").as_uri(), routes


async def test_a_confident_valid_local_edit_is_shown_and_accepted(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.answer_for = model = RewritingModel(rename)  # type: ignore[attr-defined]
    remote.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
    cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, uri, routes = await started(cfg)
    try:
        type_rename(client, uri)
        got = await edit_at(client, uri, 2, 1, 12)
        assert len(got["edits"]) == 1, (got, ledger(tmp_path))
        (item,) = got["edits"]
        assert apply(TEXT, item) == RENAMED, item
        assert item["textDocument"] == {"uri": uri, "version": 2}
        assert item["command"]["command"] == "synconfroute.acceptNextEdit"
        assert "local" in item["command"]["title"], item["command"]
        assert len(remote.received("/v1/completions")) == 0
        # The route card: as data (right after the response), and on hover over its lines.
        assert await until(lambda: bool(routes)), routes
        assert routes[-1]["kind"] == "next-edit" and routes[-1]["route"] == "local"
        assert routes[-1]["id"] == item["command"]["arguments"][0]
        hover = await client.text_document_hover_async(
            t.HoverParams(t.TextDocumentIdentifier(uri), t.Position(3, 10))
        )
        assert hover is not None and "local" in str(hover.contents), hover
        # The prompt held the rename just made, as a diff, and the cursor.
        (prompt,) = model.prompts
        assert "-    total = 0\n+    subtotal = 0" in prompt, prompt
        # Shown, then accepted through the item's command: both in the ledger.
        client.protocol.notify("textDocument/didShowInlineEdit", {"item": item})
        did = item["command"]["arguments"][0]
        ok = await client.workspace_execute_command_async(
            t.ExecuteCommandParams(command="synconfroute.acceptNextEdit", arguments=[did])
        )
        assert ok is True
        assert await until(lambda: any("accepted" in e for e in ledger(tmp_path))), ledger(tmp_path)
        events = ledger(tmp_path)
        assert any("shown" in e for e in events)
        rows = [e for e in events if "route" in e]
        assert [(e["route"], e.get("task")) for e in rows] == [("local", "next-edit")], rows
        assert not any("dismissed" in e for e in events)  # accepted, not dismissed
        # A stale version: no edit, and no model asked.
        asked = len(model.prompts)
        assert await edit_at(client, uri, 1, 1, 12) == {"edits": []}
        assert len(model.prompts) == asked
        # Shown and passed over (a newer request came instead): dismissed, in the ledger.
        (again,) = (await edit_at(client, uri, 2, 1, 12))["edits"]
        client.protocol.notify("textDocument/didShowInlineEdit", {"item": again})
        await edit_at(client, uri, 2, 1, 11)
        gone = again["command"]["arguments"][0]
        assert await until(lambda: any("dismissed" in e for e in ledger(tmp_path)))
        dismissed = [e["dismissed"] for e in ledger(tmp_path) if "dismissed" in e]
        assert len(dismissed) == 1 and dismissed[0].endswith(gone), (dismissed, gone)
    finally:
        await stop(client)


async def test_an_edit_that_breaks_the_file_escalates_and_the_clusters_is_shown(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.answer_for = RewritingModel(broken)  # type: ignore[attr-defined]
    remote.answer_for = cluster = RewritingModel(rename)  # type: ignore[attr-defined]
    cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    uri = workspace_file("src/shop.py").as_uri()
    try:
        type_rename(client, uri)
        got = await edit_at(client, uri, 2, 1, 12)
        (item,) = got["edits"]
        assert apply(TEXT, item) == RENAMED, item
        assert "remote" in item["command"]["title"], item["command"]
        assert len(cluster.prompts) == 1 and len(remote.received("/v1/completions")) == 1
    finally:
        await stop(client)


async def test_a_never_send_files_region_never_leaves(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.answer_for = RewritingModel(broken)  # type: ignore[attr-defined]
    remote.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
    cfg = write_config(
        tmp_path,
        local_url=local.url,
        remote_url=remote.base_url,
        extra='[privacy]\nnever_send = ["secrets/**"]',
    )
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    uri = workspace_file("secrets/shop.py").as_uri()
    try:
        type_rename(client, uri)
        got = await edit_at(client, uri, 2, 1, 12)
        # The local edit breaks the file and may not escalate: nothing is shown...
        assert got == {"edits": []}
        # ...and nothing of the file reached the cluster.
        assert remote.received("/v1/completions") == []
        assert all("subtotal" not in r.body.decode() for r in remote.received())
    finally:
        await stop(client)


async def test_a_malformed_request_gets_a_clear_error(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    try:
        with pytest.raises(Exception, match="version"):
            await client.protocol.send_request_async(
                "textDocument/copilotInlineEdit",
                {"textDocument": {"uri": "file:///x.py"}, "position": {"line": 0, "character": 0}},
            )
    finally:
        await stop(client)


async def test_a_newer_request_supersedes_the_one_in_flight(
    tmp_path: Path, local_fake: FakeOllama
) -> None:
    local = local_fake
    # Slow enough that the second request comes while the first is being answered.
    local.answer_for = model = RewritingModel(rename, delay=0.02)  # type: ignore[attr-defined]
    cfg = write_config(tmp_path, local_url=local.url)
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    uri = workspace_file("src/shop.py").as_uri()
    try:
        type_rename(client, uri)
        first = asyncio.ensure_future(edit_at(client, uri, 2, 1, 12))
        assert await until(lambda: len(model.prompts) == 1), model.prompts
        second = await edit_at(client, uri, 2, 1, 11)
        older = await first
        # Every request is answered: the older one with no edit, the newer with the edit.
        assert older == {"edits": []}, older
        (item,) = second["edits"]
        assert apply(TEXT, item) == RENAMED
        # The older generation was abandoned: its connection closed before its end.
        gens = [r for r in local.received("/api/generate") if "editable_region" in r.body.decode()]
        assert len(gens) == 2 and gens[0].disconnected and not gens[0].finished, gens
    finally:
        await stop(client)


async def test_each_tier_asks_its_own_next_edit_model(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    """`next_edit.local_model` / `remote_model` name the models next edits ask (a
    Zeta-class model beside the completion model); completions keep `local.model`."""
    local, remote = fakes
    local.answer_for = RewritingModel(broken)  # type: ignore[attr-defined]
    remote.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
    # Each server has the next-edit model too (asked for one it lacks, it says 404).
    local.models[canonical("zeta:7b")] = local._complete_info({"capabilities": ["completion"]})
    remote.models.append("zed-industries/zeta")
    cfg = write_config(
        tmp_path,
        local_url=local.url,
        remote_url=remote.base_url,
        extra='[next_edit]\nlocal_model = "zeta:7b"\nremote_model = "zed-industries/zeta"',
    )
    client, uri, routes = await started(cfg)
    try:
        type_rename(client, uri)
        (item,) = (await edit_at(client, uri, 2, 1, 12))["edits"]
        assert apply(TEXT, item) == RENAMED, item
        asked = [
            r.json()["model"]
            for r in local.received("/api/generate")
            if "editable_region" in r.body.decode()
        ]
        assert asked == ["zeta:7b"], asked
        (sent,) = remote.received("/v1/completions")
        assert sent.json()["model"] == "zed-industries/zeta"
        # The route card names the models that answered.
        assert await until(lambda: bool(routes)), routes
        card = str(routes[-1])
        assert "zeta:7b" in card and "zed-industries/zeta" in card, card
        # A completion still asks the completion model.
        await client.text_document_inline_completion_async(
            t.InlineCompletionParams(
                context=t.InlineCompletionContext(
                    trigger_kind=t.InlineCompletionTriggerKind.Invoked
                ),
                text_document=t.TextDocumentIdentifier(uri),
                position=t.Position(2, 0),
            )
        )
        plain = [
            r.json()["model"]
            for r in local.received("/api/generate")
            if "editable_region" not in r.body.decode()
        ]
        assert plain and set(plain) == {"qwen2.5-coder:3b"}, plain
    finally:
        await stop(client)


@pytest.mark.parametrize("only_in_time", [True, False])
async def test_next_edits_stop_while_the_local_model_is_too_slow_for_them(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI], only_in_time: bool
) -> None:
    """`next_edit.only_in_time`: a local model whose rewrites keep running out of
    `next_edit.local_ms` would escalate every request, sending each region to the
    cluster. After at most WINDOW late rewrites, requests ask no model at all and say
    why (`local-too-slow`); with only_in_time off, every one escalates."""
    from synconfroute.server.routing.next_edit.pace import WINDOW

    local, remote = fakes
    # ~60 tokens at 50 ms each: 3 s a rewrite, against a 300 ms budget.
    local.answer_for = RewritingModel(rename, delay=0.05)  # type: ignore[attr-defined]
    remote.answer_for = RewritingModel(rename)  # type: ignore[attr-defined]
    cfg = write_config(
        tmp_path,
        local_url=local.url,
        remote_url=remote.base_url,
        # A long overall deadline: a CI machine that pauses must not turn an escalation
        # into a timeout (the local budget, 300 ms, is what the test is about).
        extra=f"[next_edit]\nlocal_ms = 300\ndeadline_ms = 120000\n"
        f"only_in_time = {str(only_in_time).lower()}",
    )
    client, uri, routes = await started(cfg)

    def edit_prompts() -> int:
        return sum("editable_region" in r.body.decode() for r in local.received("/api/generate"))

    try:
        type_rename(client, uri)
        answers = []
        for _ in range(WINDOW + 3):
            answers.append(await edit_at(client, uri, 2, 1, 12))
        escalated = len(remote.received("/v1/completions"))
        seen = [(r["route"], r["reasons"]) for r in routes]
        print(f"only_in_time={only_in_time}: {escalated} escalated of {len(answers)}")
        if not only_in_time:
            assert escalated == len(answers) and all(a["edits"] for a in answers), seen
            return
        assert 1 <= escalated <= WINDOW, (escalated, seen)
        # Each escalation was a late local rewrite, and its edit was shown.
        assert all(a["edits"] for a in answers[:escalated]), answers
        # From then on: no edit, no model asked, and the card says why.
        off = answers[escalated:]
        assert off and all(a == {"edits": []} for a in off), answers
        assert edit_prompts() <= escalated, (edit_prompts(), escalated)
        # The ledger says why of each request (no route is sent for no edit).
        assert await until(lambda: len(rows(tmp_path)) == len(answers)), rows(tmp_path)
        why = [(e["route"], e["reasons"]) for e in rows(tmp_path)]
        assert all(r == ("none", ["local-too-slow"]) for r in why[escalated:]), why
        assert all(r == ("remote", ["local-timeout", "remote-ok"]) for r in why[:escalated]), why
    finally:
        await stop(client)


async def test_requests_made_while_typing_wait_for_the_pause_and_the_newest_wins(
    tmp_path: Path, local_fake: FakeOllama
) -> None:
    """The completions' debounce (`editor.debounce_ms`, from the last keystroke): two
    requests right after an edit ask the model once, for the newer; the older is
    answered with no edit."""
    local = local_fake
    local.answer_for = model = RewritingModel(rename)  # type: ignore[attr-defined]
    cfg = write_config(tmp_path, local_url=local.url)
    # A long pause (1.5 s): the two requests come well within it even on a slow machine.
    text = cfg.read_text(encoding="utf-8").replace("debounce_ms = 0", "debounce_ms = 1500")
    cfg.write_text(text, encoding="utf-8")
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    uri = workspace_file("src/shop.py").as_uri()
    try:
        type_rename(client, uri)
        first = asyncio.ensure_future(edit_at(client, uri, 2, 1, 12))
        second = asyncio.ensure_future(edit_at(client, uri, 2, 1, 12))
        older, newer = await first, await second
        assert older == {"edits": []}, older
        (item,) = newer["edits"]
        assert apply(TEXT, item) == RENAMED
        assert len(model.prompts) == 1, model.prompts
        # Long after the last keystroke: answered, one more prompt.
        await asyncio.sleep(2.0)
        again = await edit_at(client, uri, 2, 1, 12)
        assert again["edits"] and len(model.prompts) == 2, (again, len(model.prompts))
    finally:
        await stop(client)
