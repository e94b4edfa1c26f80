"""End to end through `synconfroute serve` with the fake backends: a scripted session
(show, dismiss, accept, edit after accepting, delete after accepting, escalate) yields
exactly the expected ledger lines and `stats` figures, and no line holds code."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as t
from pytest_lsp import LanguageClient

from synconfroute.server.commands.cli import main
from synconfroute.server.routing.router import Reason
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import (
    capabilities,
    inline_request,
    open_doc,
    start,
    stop,
    workspace_file,
    write_config,
)

pytestmark = pytest.mark.timeout(120)

URI = workspace_file("project/secret_module/calc.py").as_uri()
TEXT = "def add(a, b):\n    return \n\n\nprint(add(1, 2))\n"
CONFIDENT = TokenScript.of(" a", " +", " b", logprob=-0.05)
UNSURE = TokenScript.of(" a", " -", " b", logprob=-3.0)
REMOTE = TokenScript.of(" a", " * ", "b", logprob=-0.01)
LINE = TokenScript.of("x", " =", " 1", logprob=-0.05)
CHECKS = (0.6, 1.2)  # retention checks, seconds after an acceptance


def change(
    client: LanguageClient, version: int, start: tuple[int, int], end: tuple[int, int], text: str
) -> None:
    client.text_document_did_change(
        t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=URI, version=version),
            content_changes=[
                t.TextDocumentContentChangePartial(
                    range=t.Range(t.Position(*start), t.Position(*end)), text=text
                )
            ],
        )
    )


async def ask(client: LanguageClient, pos: tuple[int, int]) -> t.InlineCompletionItem:
    r = await client.text_document_inline_completion_async(inline_request(URI, t.Position(*pos)))
    assert isinstance(r, t.InlineCompletionList) and len(r.items) == 1
    return r.items[0]


def ledger_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def wait_for(path: Path, n: int, within_s: float = 15.0) -> list[dict[str, Any]]:
    end = asyncio.get_running_loop().time() + within_s
    while True:
        lines = ledger_lines(path) if path.is_file() else []  # noqa: ASYNC240 (tiny file)
        if len(lines) >= n or asyncio.get_running_loop().time() > end:
            return lines
        await asyncio.sleep(0.05)


def kind(line: dict[str, Any]) -> tuple[str, str]:
    if "route" in line:
        return "decision", line["id"].split(":")[1]
    if "adaptive" in line:
        return "adaptive", ""
    name = next(k for k in ("shown", "accepted", "dismissed", "retained") if k in line)
    return name, line[name].split(":")[1]


async def test_scripted_session_ledger_and_stats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    texts: list[str] = [TEXT]
    with FakeOllama() as local, FakeOpenAI() as remote:
        remote.script(REMOTE, always=True)
        cfg = write_config(tmp_path, local_url=local.url, remote_url=remote.base_url)
        client, _ = await start(
            cfg,
            capabilities("visual-studio-code", inline=True),
            server_args=["--retention-after", ",".join(map(str, CHECKS))],
        )
        try:
            open_doc(client, URI, TEXT)
            local.script(CONFIDENT, always=True)
            first = await ask(client, (1, 11))  # c1: shown, never accepted
            second = await ask(client, (1, 11))  # c2 replaces it: c1 dismissed
            texts += [first.insert_text, second.insert_text]  # type: ignore[list-item]
            assert second.insert_text == " a + b"
            # The editor inserts c2 (then runs its command: one acceptance, not two) ...
            change(client, 2, (1, 11), (1, 11), " a + b")
            assert second.command is not None
            await client.workspace_execute_command_async(
                t.ExecuteCommandParams(second.command.command, second.command.arguments)
            )
            # ... and the user edits inside it at once: "a + b" -> "a + c".
            change(client, 3, (1, 16), (1, 17), "c")
            await wait_for(ledger, 8)  # both checks of c2 done

            # c3 on a blank line: accepted, then deleted as a whole.
            local.script(LINE, always=True)
            third = await ask(client, (2, 0))
            texts.append(third.insert_text)  # type: ignore[arg-type]
            change(client, 4, (2, 0), (2, 0), third.insert_text)  # type: ignore[arg-type]
            change(client, 5, (2, 0), (2, len(third.insert_text)), "")  # type: ignore[arg-type]
            await wait_for(ledger, 13)

            # c4 escalates (unconfident local) and is replaced by c5 (dismissed); c5 is
            # still on screen when the editor shuts down: shown, nothing else.
            local.script(UNSURE)  # then LINE again
            fourth = await ask(client, (3, 0))
            fifth = await ask(client, (2, 0))
            texts += [fourth.insert_text, fifth.insert_text]  # type: ignore[list-item]
            status = await client.workspace_execute_command_async(
                t.ExecuteCommandParams("synconfroute.status")
            )
            assert status["adaptive"] is None and status["threshold"] == -0.5
        finally:
            await stop(client)
    lines = ledger_lines(ledger)
    assert [kind(x) for x in lines] == [
        ("decision", "c1"),
        ("shown", "c1"),
        ("dismissed", "c1"),
        ("decision", "c2"),
        ("shown", "c2"),
        ("accepted", "c2"),
        ("retained", "c2"),
        ("retained", "c2"),
        ("decision", "c3"),
        ("shown", "c3"),
        ("accepted", "c3"),
        ("retained", "c3"),
        ("retained", "c3"),
        ("decision", "c4"),
        ("shown", "c4"),
        ("dismissed", "c4"),
        ("decision", "c5"),
        ("shown", "c5"),
    ]
    ids = [x.get("id") or x[kind(x)[0]] for x in lines]
    assert len({i.split(":")[0] for i in ids}) == 1  # one server run, one token
    retained = [
        (x["after_s"], x["ratio"], x["chars"], x["closed"]) for x in lines if "retained" in x
    ]
    assert retained == [
        (CHECKS[0], 0.8333, 6, False),  # " a + b" -> " a + c": 1 of 6 characters changed
        (CHECKS[1], 0.8333, 6, False),
        (CHECKS[0], 0.0, len(third.insert_text or ""), False),  # deleted
        (CHECKS[1], 0.0, len(third.insert_text or ""), False),
    ]
    routes = [x["route"] for x in lines if "route" in x]
    assert routes == ["local", "local", "local", "remote", "local"]

    # Privacy: every string in the ledger is a known word, an id or a model name; no
    # code, no path, no completion text anywhere.
    allowed = {
        *(r.value for r in Reason),
        "local", "remote", "none", "synconf", "valid", "invalid", "python",
        "qwen2.5-coder:3b", "Qwen/Qwen2.5-Coder-32B-Instruct",
        "tree-sitter", "unsupported-language", "timeout", "error",
    }  # fmt: skip
    raw = ledger.read_text(encoding="utf-8")
    for fragment in ("calc", "secret_module", "/work/project", "def add", "print", "return"):
        assert fragment not in raw
    for x in lines:
        for v in _strings(x):
            assert v in allowed or re.fullmatch(r"[0-9a-f]{6}:c\d+", v), v
    for text in texts:
        assert text and json.dumps(text)[1:-1].strip() not in raw.replace('"', " ")

    assert main(["stats", "--ledger", str(ledger), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    loc, rem = s["by_route"]["local"], s["by_route"]["remote"]
    assert (loc["shown"], loc["accepted"], loc["dismissed"]) == (4, 2, 1)
    assert loc["acceptance_rate"] == 0.5
    assert loc["retention"][f"{CHECKS[1]:g}s"] == {"mean": pytest.approx(0.8333 / 2), "n": 2}
    assert (rem["shown"], rem["accepted"], rem["dismissed"]) == (1, 0, 1)
    assert rem["bytes_sent"] > 0 and loc["bytes_sent"] == 0
    assert s["by_language"]["python"]["completions"] == 5
    assert main(["stats", "--ledger", str(ledger)]) == 0
    assert "ret 1.2s" in capsys.readouterr().out


def _strings(x: Any) -> list[str]:
    if isinstance(x, str):
        return [x]
    if isinstance(x, dict):
        return [s for v in x.values() for s in _strings(v)] + [
            k for k in x if not re.fullmatch(r"[a-z_0-9]+", k)
        ]
    if isinstance(x, list):
        return [s for v in x for s in _strings(v)]
    return []
