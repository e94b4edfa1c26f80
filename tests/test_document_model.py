"""One document model (issue 13 section 1, issue 14 item 2/7/10): the session's own text.

A seeded fuzzer applies thousands of random incremental edits, in each position
encoding, and checks the session's text, its LSP line table and the incremental
tree after every edit against a reference model written here (a flat string and a
character-by-character line scan, sharing no code with server/vocab/positions.py). The
same edits then go through the real server over stdio; the prefix and suffix the
fake Ollama receives are checked against the reference window.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as t

from synconfroute.clients import templates
from synconfroute.server.session.session import Edit, Session, path_of, uri_key
from synconfroute.server.settings import config
from synconfroute.server.syntax import SyntaxDocument
from synconfroute.server.syntax.languages import parser_for
from synconfroute.server.vocab.positions import Encoding, Text, cap_window
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.lsp_harness import capabilities, inline_request, open_doc, stop, write_config
from tests.lsp_harness import start as start_server

ENCODINGS: tuple[Encoding, ...] = ("utf-16", "utf-8", "utf-32")
# Line breaks for LSP, characters that are NOT line breaks for LSP (but are for
# str.splitlines), an astral emoji (a surrogate pair in utf-16), CJK, ASCII.
PIECES = (
    "\n",
    "\r\n",
    "\r",
    "\u2028",
    "\u2029",
    "\u0085",
    "\f",
    "😀",
    "漢字",
    "x = 1",
    "def f(a):",
    "    ",
    "(",
    ")",
    "é",
)
STARTS = (
    "def f(a):\n    return a\n\nprint(f(1))\n",
    "def f(a):\r\n    s = '😀漢'\r\n    return s\r\n",
    "x = 1\ry = 2\r\rz = (3,\r     4)\r",
    "a = 1\u2028b = 2\u2029c = 3\x85d = 4\fe = 5\nf = 6\n",
    "s = '😀😀'\r\nt = '漢字'\n\r\n\r\u2028\n",
    "",
)


# ---------------------------------------------------------------- reference model


def ref_lines(text: str) -> list[tuple[int, int]]:
    """(start, end without its break) of each line, LSP's rule, by a plain scan."""
    lines, start, i = [], 0, 0
    while i < len(text):
        if text[i] == "\r" and i + 1 < len(text) and text[i + 1] == "\n":
            lines.append((start, i))
            i += 2
            start = i
        elif text[i] in "\r\n":
            lines.append((start, i))
            i += 1
            start = i
        else:
            i += 1
    lines.append((start, len(text)))
    return lines


def ref_units(s: str, encoding: str) -> int:
    if encoding == "utf-16":
        return len(s.encode("utf-16-le", "surrogatepass")) // 2
    if encoding == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    return len(s)


def ref_offset(text: str, line: int, character: int, encoding: str) -> int:
    """Offset of an edit position, clamped as LSP says (past the end: the end)."""
    lines = ref_lines(text)
    if line >= len(lines):
        return len(text)
    start, end = lines[line]
    for i in range(start, end + 1):
        if ref_units(text[start:i], encoding) >= character:
            return i
    return end


def ref_position(text: str, offset: int, encoding: str) -> tuple[int, int]:
    for n, (start, end) in enumerate(ref_lines(text)):
        if start <= offset <= end:
            return n, ref_units(text[start:offset], encoding)
    raise AssertionError(f"offset {offset} is inside a line break")


def random_position(rng: random.Random, text: str, encoding: str) -> tuple[int, int]:
    """A position a client may send: on a character boundary, now and then past the
    end of its line or past the last line (LSP clamps those)."""
    lines = ref_lines(text)
    roll = rng.random()
    if roll < 0.03:
        return len(lines) + rng.randrange(3), rng.randrange(5)
    line = rng.randrange(len(lines))
    start, end = lines[line]
    if roll < 0.08:
        return line, ref_units(text[start:end], encoding) + 1 + rng.randrange(4)
    return ref_position(text, rng.randint(start, end), encoding)


def random_edit(rng: random.Random, text: str, encoding: str) -> tuple[Edit, str]:
    """A random didChange content change and the reference text after it."""
    if rng.random() < 0.01:
        new = "".join(rng.choice(PIECES) for _ in range(rng.randrange(12)))
        return Edit(new), new
    a = random_position(rng, text, encoding)
    b = random_position(rng, text, encoding) if rng.random() < 0.5 else a
    oa, ob = ref_offset(text, *a, encoding), ref_offset(text, *b, encoding)
    if ob < oa:
        a, b, oa, ob = b, a, ob, oa
    ins = "".join(rng.choice(PIECES) for _ in range(rng.choice((0, 1, 1, 2, 3))))
    return Edit(ins, a, b), text[:oa] + ins + text[ob:]


def tree_nodes(tree: Any) -> list[tuple[Any, ...]]:
    out, stack = [], [tree.root_node]
    while stack:
        node = stack.pop()
        out.append((node.type, node.start_byte, node.end_byte, node.start_point, node.end_point))
        stack.extend(reversed(node.children))
    return out


def new_session(encoding: Encoding) -> Session:
    session = Session(config.Loaded(config.Settings(), (), config.default_config_path(), False))
    session.negotiated(encoding)
    return session


# ---------------------------------------------------------------- the cases


def test_u2028_then_an_edit_on_line_1() -> None:
    """U+2028 is no line break for LSP: an edit on line 1 lands after the \\n, not after
    the U+2028 (where pygls' str.splitlines copy put it)."""
    session = new_session("utf-16")
    uri = "file:///w/a.py"
    session.open(uri, "a = 1\u2028b = 2\nc = 3\n", "python")
    session.change(uri, [Edit("X", (1, 0), (1, 0))])
    st = session.docs.documents[uri]
    assert st.text.text == "a = 1\u2028b = 2\nXc = 3\n"
    assert st.syntax.text == st.text.text
    assert st.syntax.data == st.text.text.encode()


def test_bare_cr_offsets_agree_between_the_context_and_the_gate() -> None:
    """With \\r line ends, (1, 0) is offset 6 for the prompt AND for the gate (the gate
    said 12: the end of the text, lines counted at \\n only)."""
    text = "x = 1\ry = 2\r"
    doc = Text(text, "utf-16")
    assert doc.offset(1, 0) == 6
    assert SyntaxDocument(doc, "python").byte_offset((1, 0)) == 6
    # The verdict is the one at the cursor: `k=1` is a fine argument inside f( ... ),
    # and a syntax error at the end of the text, where the gate used to look.
    gate = SyntaxDocument(Text("f(\r)\r", "utf-16"), "python")
    assert gate.check("k=1", (1, 0)).status == "valid"
    assert gate.check("k=1", len(gate.data)).status == "invalid"


# ---------------------------------------------------------------- the fuzzer, in process


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_incremental_edit_fuzzer(encoding: Encoding) -> None:
    rng = random.Random(f"edits-{encoding}")
    session = new_session(encoding)
    edits = 0
    for round_ in range(3 * len(STARTS)):
        uri = f"file:///fuzz/{round_}.py"
        text = STARTS[round_ % len(STARTS)]
        session.open(uri, text, "python")
        st = session.docs.documents[uri]
        assert st.syntax.tree is not None  # keep a tree, so every edit edits it
        for step in range(90):
            edit, text = random_edit(rng, text, encoding)
            session.change(uri, [edit])
            edits += 1
            assert st.text.text == text, (edit, step)
            assert st.text.starts == [s for s, _ in ref_lines(text)], (edit, step)
            pos = random_position(rng, text, encoding)
            off = st.text.edit_offset(*pos)
            assert off == ref_offset(text, *pos, encoding)
            if ref_position(text, off, encoding) == pos:  # a real position: round trip
                assert st.text.offset(*pos) == off
                assert st.text.position(off) == pos
            if step % 15 == 0:
                fresh = parser_for("python").parse(text.encode("utf-8", "surrogatepass"))
                assert tree_nodes(st.syntax.tree) == tree_nodes(fresh), (edit, step)
        assert st.syntax.data == text.encode("utf-8", "surrogatepass")
        session.close(uri)
    assert edits >= 1500


# ---------------------------------------------------------------- through the real server


@pytest.fixture
def local() -> Iterator[FakeOllama]:
    with FakeOllama(default=TokenScript.of(" q", logprob=-0.01)) as fake:
        yield fake


def expected_window(text: str, offset: int, lines: int) -> tuple[str, str]:
    spans = ref_lines(text)
    row = next(n for n, (s, e) in enumerate(spans) if s <= offset <= e)
    first = spans[max(0, row - lines)][0]
    last = row + lines + 1
    end = spans[last][0] if last < len(spans) else len(text)
    return text[first:offset], text[offset:end]


def check_sent(body: dict[str, Any], prefix: str, suffix: str) -> None:
    if "suffix" in body:  # native FIM (an empty suffix is sent as "\n", see clients/ollama)
        assert (body["prompt"], body["suffix"]) == (prefix, suffix or "\n")
    else:  # raw, with our own template
        tpl = templates.detect("qwen2.5-coder:3b")
        assert tpl is not None
        assert body["prompt"] == tpl.render(prefix, suffix)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("encoding", ENCODINGS)
async def test_fuzzed_edits_through_the_server(
    tmp_path: Path, local: FakeOllama, encoding: Encoding
) -> None:
    rng = random.Random(f"lsp-{encoding}")
    lines = 3
    cfg = write_config(
        tmp_path, local_url=local.url, extra=f"[completion]\ncontext_lines = {lines}"
    )
    client, init = await start_server(
        cfg, capabilities("neovim", inline=True, encodings=[encoding])
    )
    try:
        assert init.capabilities.position_encoding == encoding
        uri = "file:///fuzz/My%20Project/doc.py"
        text = STARTS[1] * 3 + STARTS[3]
        open_doc(client, uri, text)
        checked = 0
        for version in range(2, 12):
            changes: list[Any] = []
            for _ in range(rng.randrange(1, 6)):
                edit, text = random_edit(rng, text, encoding)
                if edit.start is None or edit.end is None:
                    changes.append(t.TextDocumentContentChangeWholeDocument(text=edit.text))
                else:
                    span = t.Range(t.Position(*edit.start), t.Position(*edit.end))
                    changes.append(t.TextDocumentContentChangePartial(range=span, text=edit.text))
            client.text_document_did_change(
                t.DidChangeTextDocumentParams(
                    t.VersionedTextDocumentIdentifier(version=version, uri=uri), changes
                )
            )
            lines_now = ref_lines(text)
            row = rng.randrange(len(lines_now))
            s, e = lines_now[row]
            offset = rng.randint(s, e)
            before = len(local.received("/api/generate"))
            pos = t.Position(*ref_position(text, offset, encoding))
            result = await client.text_document_inline_completion_async(inline_request(uri, pos))
            assert isinstance(result, t.InlineCompletionList)
            sent = local.received("/api/generate")
            prefix, suffix = expected_window(text, offset, lines)
            if len(sent) == before or not prefix:  # cache hit, or nothing to ask
                continue
            check_sent(sent[-1].json(), prefix, suffix)
            checked += 1
        assert checked >= 7
    finally:
        await stop(client)


# ---------------------------------------------------------------- URIs (issue 14 item 2)


@pytest.mark.parametrize(
    ("opened", "asked", "path"),
    [
        (
            "file:///home/me/My%20Project/a.py",
            "file:///home/me/My%20Project/a.py",
            "/home/me/My Project/a.py",
        ),
        ("file:///home/me/My%20Project/a.py", "file:///home/me/My Project/a.py", None),
        ("file:///c%3A/Users/me/a.py", "file:///c%3A/Users/me/a.py", "c:/Users/me/a.py"),
        ("file:///c%3A/Users/me/a.py", "file:///C:/Users/me/a.py", None),
        ("file:///w/node_modules/%40types/x.py", "file:///w/node_modules/%40types/x.py", None),
    ],
)
def test_uri_spellings_meet_in_one_key(opened: str, asked: str, path: str | None) -> None:
    assert uri_key(opened) == uri_key(asked)
    if path is not None:
        assert path_of(opened) == path


def test_language_comes_from_the_decoded_path() -> None:
    session = new_session("utf-16")
    session.open("file:///w/My%20Project/x.p%79", "x = 1\n", None)
    st = session.document("file:///w/My Project/x.py")
    assert st is not None and st.language == "python" and st.path == "/w/My Project/x.py"


@pytest.mark.timeout(120)
async def test_percent_encoded_uris_through_the_server(tmp_path: Path, local: FakeOllama) -> None:
    with FakeOpenAI() as remote:
        cfg = write_config(
            tmp_path,
            local_url=local.url,
            remote_url=remote.base_url,
            extra='[privacy]\nnever_send = ["**/My Project/secret/**"]\n'
            '[routing]\npolicy = "remote"',
        )
        # Inside the workspace folder: a file outside every folder never escalates.
        ws = tmp_path / "ws"
        ws.mkdir()
        base = ws.as_uri()
        client, _ = await start_server(
            cfg, capabilities("visual-studio-code", inline=True), root=ws
        )
        try:
            text = "def f(a):\n    return \n"
            uris = (
                f"{base}/My%20Project/a.py",
                f"{base}/c%3A/Users/me/b.py",
                f"{base}/node_modules/%40types/c.py",
            )
            for n, uri in enumerate(uris):
                other = uri.replace("%20", " ").replace("%3A", ":").replace("%40", "@")
                open_doc(client, uri, f"# {n}\n{text}")
                for asked in (uri, other):
                    got = await client.text_document_inline_completion_async(
                        inline_request(asked, t.Position(2, 11))
                    )
                    assert isinstance(got, t.InlineCompletionList) and got.items
                    hover = await client.text_document_hover_async(
                        t.HoverParams(t.TextDocumentIdentifier(asked), t.Position(2, 11))
                    )
                    assert hover is not None
                client.text_document_did_close(
                    t.DidCloseTextDocumentParams(t.TextDocumentIdentifier(other))
                )
            n_remote = len(remote.received("/v1/completions"))
            assert n_remote == len(uris)  # the second spelling is a cache hit
            # never_send matches the decoded path: the secret folder stays local.
            secret = f"{base}/My%20Project/secret/k.py"
            open_doc(client, secret, text + "# other\n")
            got = await client.text_document_inline_completion_async(
                inline_request(secret, t.Position(1, 11))
            )
            assert isinstance(got, t.InlineCompletionList)
            assert local.wait_for(lambda: len(local.received("/api/generate")) == len(uris) + 1)
            assert len(remote.received("/v1/completions")) == n_remote
            # A closed document is not open any more, however it is spelled.
            with pytest.raises(Exception, match="not open"):
                await client.text_document_inline_completion_async(
                    inline_request(f"{base}/My Project/a.py", t.Position(1, 11))
                )
        finally:
            await stop(client)


# ---------------------------------------------------------------- lone surrogates (item 10)


@pytest.mark.timeout(120)
async def test_lone_surrogate_in_the_window(tmp_path: Path, local: FakeOllama) -> None:
    cfg = write_config(tmp_path, local_url=local.url)
    client, _ = await start_server(cfg, capabilities("visual-studio-code", inline=True))
    try:
        uri = "file:///w/s.py"
        text = "s = '\ud800'\nx = \ny = 1\n"
        open_doc(client, uri, text)
        got = await client.text_document_inline_completion_async(
            inline_request(uri, t.Position(1, 4))
        )
        assert isinstance(got, t.InlineCompletionList) and got.items
        assert got.items[0].insert_text == " q"
        body = local.received("/api/generate")[-1].json()
        assert body["prompt"] == "s = '\ufffd'\nx = "  # one code point for one: nothing moved
        assert body["suffix"] == "\ny = 1\n"
    finally:
        await stop(client)


# A lone surrogate in ANOTHER open document (issue 36 item 3): its definitions reach the
# prompt as cross-file context, its edits as recent edits; before the text was sanitised
# where it enters, the Ollama client failed to encode the body (-32603 UnicodeEncodeError).
DEFS = "def make_widget(size):\n    '''\ud800 label \udfff'''\n    return size\n"
USES = "from defs import make_widget\n\nw = make_widget(\n"


def _edit(uri: str, version: int, line: int, a: int, b: int, text: str) -> Any:
    change = t.TextDocumentContentChangePartial(
        t.Range(t.Position(line, a), t.Position(line, b)), text
    )
    return t.DidChangeTextDocumentParams(t.VersionedTextDocumentIdentifier(version, uri), [change])


@pytest.mark.timeout(120)
async def test_a_lone_surrogate_in_another_document_reaches_no_encoder(
    tmp_path: Path, local: FakeOllama
) -> None:
    ws = tmp_path / "w"
    ws.mkdir()
    extra = '[completion]\ncontext = "workspace"\nrecent_edits = true'
    cfg = write_config(tmp_path, local_url=local.url, extra=extra)
    local.script(TokenScript.of("1)", logprob=-0.01), always=True)  # valid, confident
    client, _ = await start_server(cfg, capabilities("visual-studio-code", inline=True), root=ws)
    try:
        defs, uses = f"{ws.as_uri()}/defs.py", f"{ws.as_uri()}/main.py"
        open_doc(client, defs, DEFS)
        # An edit holding another one: it goes to the recent-edits ring.
        client.text_document_did_change(_edit(defs, 2, 2, 4, 4, "x = '\udc80'\n    "))
        open_doc(client, uses, USES)
        for _ in range(3):
            got = await client.text_document_inline_completion_async(
                inline_request(uses, t.Position(2, 16))
            )
            assert isinstance(got, t.InlineCompletionList) and got.items, got
            assert got.items[0].insert_text == "1)"
        prompts = [r.json()["prompt"] for r in local.received("/api/generate")]
        assert any("\ufffd label \ufffd" in p for p in prompts), prompts  # the context came
        assert any("x = '\ufffd'" in p for p in prompts), prompts  # and the recent edit
        for r in local.received("/api/generate"):
            r.body.decode("utf-8")  # strict: no surrogate was sent in any form
    finally:
        await stop(client)


@pytest.mark.timeout(120)
async def test_a_lone_surrogate_in_a_uri_reaches_no_encoder(
    tmp_path: Path, local: FakeOllama
) -> None:
    """The document's path (from its URI) names it in repo-level prompts and recent edits:
    sanitised at didOpen too (before: -32603 UnicodeEncodeError)."""
    ws = tmp_path / "w"
    ws.mkdir()
    extra = '[completion]\ncontext = "workspace"\nrecent_edits = true'
    cfg = write_config(tmp_path, local_url=local.url, extra=extra)
    local.script(TokenScript.of("1)", logprob=-0.01), always=True)
    client, _ = await start_server(cfg, capabilities("visual-studio-code", inline=True), root=ws)
    try:
        odd, uses = f"{ws.as_uri()}/\ud800odd.py", f"{ws.as_uri()}/main.py"
        open_doc(client, odd, "def make_widget(size):\n    return size\n")
        client.text_document_did_change(_edit(odd, 2, 1, 4, 4, "size = size or 1\n    "))
        open_doc(client, uses, USES)
        for uri, at in ((odd, t.Position(2, 15)), (uses, t.Position(2, 16))):
            got = await client.text_document_inline_completion_async(inline_request(uri, at))
            assert isinstance(got, t.InlineCompletionList), got
        assert len(local.received("/api/generate")) == 2
        for r in local.received("/api/generate"):
            r.body.decode("utf-8")  # strict: no surrogate was sent in any form
        assert "\ufffdodd.py" in local.received("/api/generate")[-1].json()["prompt"]
    finally:
        await stop(client)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("encoding", ENCODINGS)
async def test_positions_after_a_sanitised_surrogate_stay_right(
    tmp_path: Path, local: FakeOllama, encoding: Encoding
) -> None:
    """A lone surrogate is one UTF-16 unit, three UTF-8 bytes (as WTF-8 counts it) and one
    code point, as U+FFFD is: positions after it are where the editor means them."""

    def col(s: str) -> int:
        if encoding == "utf-16":
            return len(s.encode("utf-16-le", "surrogatepass")) // 2
        return len(s.encode("utf-8", "surrogatepass")) if encoding == "utf-8" else len(s)

    cfg = write_config(tmp_path, local_url=local.url)
    caps = capabilities("visual-studio-code", inline=True, encodings=[encoding])
    local.script(TokenScript.of(" + 1", logprob=-0.01), always=True)  # valid, confident
    client, _ = await start_server(cfg, caps)
    try:
        uri = "file:///w/pos.py"
        head = "s = '\ud800\U0001f600\udc00"
        open_doc(client, uri, head + "x' + s\nz = 1\n")
        at = col(head)  # x, replaced by a surrogate and y
        client.text_document_did_change(_edit(uri, 2, 0, at, at + 1, "\udbffy"))
        end = col(head + "\udbffy' + s")
        got = await client.text_document_inline_completion_async(
            inline_request(uri, t.Position(0, end))
        )
        assert isinstance(got, t.InlineCompletionList) and got.items, got
        assert got.items[0].range is not None and got.items[0].range.start.character == end
        body = local.received("/api/generate")[-1].json()
        assert body["prompt"] == "s = '\ufffd\U0001f600\ufffd\ufffdy' + s"
        assert body["suffix"] == "\nz = 1\n"
    finally:
        await stop(client)


# ---------------------------------------------------------------- prompt size (item 7)


def test_cap_window_cuts_far_from_the_cursor_at_line_starts() -> None:
    prefix = "".join(f"line {i}\r\n" for i in range(1000)) + "cur"
    suffix = "sor\n" + "".join(f"after {i}\r" for i in range(1000))
    p, s = cap_window(prefix, suffix, 1000)
    assert len(p) + len(s) <= 1000
    assert prefix.endswith(p) and suffix.startswith(s)
    assert p.startswith("line ") and p.endswith("cur")  # starts at a line start
    assert s.endswith("\r") and len(p) > len(s)  # ends at a line end; the prefix gets more
    one_line = "x" * 100_000
    p, s = cap_window(one_line, one_line, 1000)  # no line start to cut at: cut anyway
    assert (len(p), len(s)) == (750, 250)
    assert cap_window("ab", "cd", 1000) == ("ab", "cd")


@pytest.mark.timeout(120)
async def test_prompt_is_bounded(tmp_path: Path, local: FakeOllama) -> None:
    with FakeOpenAI() as remote:
        cfg = write_config(
            tmp_path,
            local_url=local.url,
            remote_url=remote.base_url,
            extra='[routing]\npolicy = "remote"',
        )
        ws = tmp_path / "w"  # the documents' folder: outside it nothing escalates
        ws.mkdir()
        client, _ = await start_server(
            cfg,
            capabilities("visual-studio-code", inline=True),
            root=ws,
            # The character caps, not the measured speed (which moves between requests),
            # and no other open file in the prompt: this test counts lines and characters.
            env={
                "SYNCONFROUTE_LOCAL_FIRST_TOKEN_TARGET_MS": "0",
                "SYNCONFROUTE_COMPLETION_CONTEXT": "file",
                "SYNCONFROUTE_COMPLETION_RECENT_EDITS": "false",
            },
        )
        try:
            lf = "".join(f"v{i} = {i}\n" for i in range(5000))
            cr = lf.replace("\n", "\r")
            sep = lf.replace("\n", "\u2028")  # one LSP line: only the cap bounds it
            sizes = {}
            for name, text, pos in (
                ("lf", lf, t.Position(2500, 0)),
                ("cr", cr, t.Position(2500, 0)),
                ("u2028", sep, t.Position(0, len(sep) // 2)),
            ):
                uri = f"{ws.as_uri()}/{name}.py"
                open_doc(client, uri, text)
                await client.text_document_inline_completion_async(inline_request(uri, pos))
                body = local.received("/api/generate")[-1].json()
                sizes[name] = len(body["prompt"]) + len(body.get("suffix", ""))
            # context_lines (200 each side) counts \r lines as it counts \n lines.
            assert sizes["cr"] == sizes["lf"] < 10_000
            assert sizes["u2028"] <= 10_000
            # A 9 MB single-line JavaScript file: bounded per tier.
            big = "var a=[" + "1," * 4_500_000 + "];"
            open_doc(client, f"{ws.as_uri()}/big.js", big, language="javascript")
            await client.text_document_inline_completion_async(
                inline_request(f"{ws.as_uri()}/big.js", t.Position(0, len(big) // 2))
            )
            body = local.received("/api/generate")[-1].json()
            assert len(body["prompt"]) + len(body.get("suffix", "")) <= 10_000
            sent = remote.received("/v1/completions")[-1]
            assert len(sent.body) < 40_000  # 32,000 characters of code and the JSON around it
        finally:
            await stop(client)
