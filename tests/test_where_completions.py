"""Where completions fire (issue 39): `completion.disabled_in` (comment, string: from the
tree-sitter node at the cursor) and `completion.languages`. With the cursor disabled,
no model is asked at all (local or remote), as the real server over stdio shows against
recording fakes; a workspace may only tighten both.

Before this change every cursor got a completion: the comment request below reached the
local fake and escalated to the remote one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from lsprotocol import types as t

from synconfroute.server.settings import config
from synconfroute.server.syntax.cursor_scope import scope_at
from synconfroute.server.syntax.document import SyntaxDocument
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

TEXT = 'def add(a, b):\n    # add the two \n    s = "a string here"\n    return \n'
URI = workspace_file("src/where.py", TEXT).as_uri()  # a file that exists: the gate sends no other
IN_COMMENT = [t.Position(1, 10), t.Position(1, 18)]  # inside, and at the comment's end
IN_STRING = t.Position(2, 12)
IN_CODE = t.Position(3, 11)
UNSURE = TokenScript.of(" a", " * 2", logprob=-4.0)  # escalates when asked


def _scope(text: str, marker: str, language: str = "python") -> str | None:
    pos = text.index(marker)
    doc = SyntaxDocument(text.replace(marker, ""), language)
    assert doc.tree is not None
    return scope_at(doc.tree, len(text[:pos].encode()))


@pytest.mark.parametrize(
    ("language", "text", "want"),
    [
        ("python", "x = 1  # note|\n", "comment"),
        ("python", "x = 1  # no|te\ny = 2\n", "comment"),
        ("python", "x = 1  # note\n|y = 2\n", None),
        ("python", 'x = "ab|c"\n', "string"),
        ("python", 'x = "abc"|\n', None),
        ("python", 'def f():\n    """Doc|string."""\n', "string"),
        ("python", 'x = f"a {na|me} b"\n', None),  # an f-string's code
        ("python", "x = fo|o(1)\n", None),
        ("cpp", "int x = 1; // note|\n", "comment"),
        ("cpp", "int x = /* a| */ 1;\n", "comment"),
        ("cpp", "int x = /* a */| 1;\n", None),
        ("cpp", 'const char* s = "he|llo";\n', "string"),
        ("java", "class A { // hi|\n}\n", "comment"),
        ("rust", "fn main() { // hi|\n}\n", "comment"),
        ("rust", "fn main() { // hi\n|}\n", None),
        ("go", 'package m\nvar s = "a|b"\n', "string"),
    ],
)
def test_scope_at_the_cursor(language: str, text: str, want: str | None) -> None:
    assert _scope(text, "|", language) == want


def test_a_workspace_may_only_tighten_where_completions_fire() -> None:
    user = config.with_values(config.Settings(), {"completion": {"languages": ["python", "java"]}})
    ws, issues = config.merge_workspace(
        user, {"completion": {"disabled_in": ["comment"], "languages": ["python"]}}
    )
    assert ws.completion.disabled_in == ["comment"] and ws.completion.languages == ["python"]
    assert not issues
    ws, issues = config.merge_workspace(user, {"completion": {"languages": ["python", "go"]}})
    assert ws.completion.languages == ["python", "java"]
    assert [i.key for i in issues] == ["completion.languages"], issues
    ws, issues = config.merge_workspace(user, {"completion": {"languages": []}})
    assert ws.completion.languages == ["python", "java"], "empty (every language) widens"
    # The user's places stay when a workspace names others.
    user = config.with_values(user, {"completion": {"disabled_in": ["string"]}})
    ws, _ = config.merge_workspace(user, {"completion": {"disabled_in": ["comment"]}})
    assert ws.completion.disabled_in == ["string", "comment"]
    bad = config.merge(user, {"completion": {"disabled_in": ["docstring"]}})[1]
    assert bad and "expected some of comment, string" in bad[0].message


async def until(predicate: Callable[[], bool], within_s: float = 20.0) -> bool:
    loop = asyncio.get_running_loop()
    end = loop.time() + within_s
    while not predicate():
        if loop.time() > end:
            return False
        await asyncio.sleep(0.05)
    return True


async def settled(count: Callable[[], int], quiet_s: float = 0.5) -> int:
    """The count once it has not moved for `quiet_s` (the warm-up generation is over)."""
    last = count()
    for _ in range(200):
        await asyncio.sleep(quiet_s)
        now = count()
        if now == last:
            return now
        last = now
    return last


async def test_disabled_in_comment_and_string_asks_no_model(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.script(UNSURE, always=True)
    cfg = write_config(
        tmp_path,
        local_url=local.url,
        remote_url=remote.base_url,
        extra='[completion]\ndisabled_in = ["comment", "string"]',
    )
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))

    def asked_local() -> int:
        return len(local.received("/api/generate"))

    def asked_remote() -> int:
        return len(remote.received("/v1/completions"))

    try:
        open_doc(client, URI, TEXT)
        # The control: in code, the request reaches both tiers (it escalates).
        got = await client.text_document_inline_completion_async(inline_request(URI, IN_CODE))
        assert await until(lambda: asked_remote() == 1), (asked_local(), asked_remote())
        assert got is not None and got.items, got
        before = (await settled(asked_local), asked_remote())
        answers = []
        for pos in [*IN_COMMENT, IN_STRING]:
            for invoked in (True, False):
                answers.append(
                    await client.text_document_inline_completion_async(
                        inline_request(URI, pos, invoked=invoked)
                    )
                )
        await asyncio.sleep(0.5)
        after = (asked_local(), asked_remote())
    finally:
        await stop(client)
    assert all(a is not None and not a.items for a in answers), answers
    assert after == before, f"model requests while disabled: {before} -> {after}"


async def test_languages_allow_list_asks_no_model(
    tmp_path: Path, fakes: tuple[FakeOllama, FakeOpenAI]
) -> None:
    local, remote = fakes
    local.script(UNSURE, always=True)
    cfg = write_config(
        tmp_path,
        local_url=local.url,
        remote_url=remote.base_url,
        extra='[completion]\nlanguages = ["java", "typescriptreact"]',
    )
    client, _ = await start(cfg, capabilities("visual-studio-code", inline=True))
    try:
        before = await settled(lambda: len(local.received("/api/generate")))
        open_doc(client, URI, TEXT)
        got = await client.text_document_inline_completion_async(inline_request(URI, IN_CODE))
        java = workspace_file("src/A.java").as_uri()
        open_doc(client, java, "class A {\n  int f() { return ; }\n}\n", language="java")
        ok = await client.text_document_inline_completion_async(
            inline_request(java, t.Position(1, 19))
        )
        assert await until(lambda: len(local.received("/api/generate")) > before)
        await asyncio.sleep(0.3)
        gens = [r.json()["prompt"] for r in local.received("/api/generate")[before:]]
    finally:
        await stop(client)
    assert got is not None and not got.items
    assert ok is not None
    assert gens and all("def add" not in p for p in gens), gens  # only the Java file asked
