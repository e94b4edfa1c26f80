"""Where a completion ends: single-line requests stop at the end of the line (every
tier), and a completion the token budget cut is trimmed to whole lines before it is
judged or shown. Against the fake Ollama and fake vLLM, with the real gate."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from synconfroute.clients._stream import collect
from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.openai import OpenAIBackend
from synconfroute.clients.types import Chunk, TokenLogprob
from synconfroute.server.evaluation.datasets import Task
from synconfroute.server.evaluation.generate import treat
from synconfroute.server.evaluation.records import Generation
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import CompletionContext, Pipeline
from synconfroute.server.routing.text_rules import drop_last_line, shown_text, wants_multiline
from synconfroute.server.settings.config import Settings
from synconfroute.server.vocab.card import route_card
from synconfroute.server.vocab.record import Truncation
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript

SINGLE = CompletionContext(
    prefix="def add(a, b):\n    return ",
    suffix="\n\n\nprint(add(1, 2))\n",
    language="python",
    path="/repo/app/calc.py",
)
# A blank line inside a function: a block may start, several lines are allowed.
MULTI = CompletionContext(
    prefix="def total(xs):\n",
    suffix="\n\n\nprint(total([1, 2]))\n",
    language="python",
    path="/repo/app/total.py",
)
INVALID = TokenScript.of(" a", " +", " (b", logprob=-0.05)


def pipeline(local_url: str, remote_url: str | None) -> Pipeline:
    s = Settings()
    local = OllamaBackend(local_url, "qwen2.5-coder:3b", timeout=5)
    remote = (
        OpenAIBackend([remote_url], "Qwen/Qwen2.5-Coder-32B-Instruct", api_key_env=None, timeout=5)
        if remote_url
        else None
    )
    return Pipeline(s, local, remote, make_gate(s.routing))


def test_contexts_are_in_the_modes_they_claim() -> None:
    assert not wants_multiline(SINGLE.prefix, True)
    assert wants_multiline(MULTI.prefix, True)


# -- 1. single-line completions stop at the end of the line ---------------------------


async def test_single_line_local_stream_stops_at_the_line_end(local_fake: FakeOllama) -> None:
    rest = [f"    x{i} = {i}\n" for i in range(30)]
    local_fake.script(TokenScript.of(" a", " +", " b", "\n", *rest, logprob=-0.05, delay=0.02))
    rec = await pipeline(local_fake.url, None).complete(SINGLE)
    assert (rec.route, rec.completion) == ("local", " a + b")
    assert rec.local_tokens == 4  # up to the newline, not the 30 lines after it
    gen = local_fake.received("/api/generate")[-1]
    assert await asyncio.to_thread(local_fake.wait_for, lambda: gen.disconnected)
    assert gen.tokens_sent <= 6, gen.tokens_sent  # the fake saw the client leave


async def test_single_line_keeps_a_leading_newline(local_fake: FakeOllama) -> None:
    ctx = CompletionContext(
        prefix="def add(a, b):\n    x = a + b", suffix="\n\n\nprint(add(1, 2))\n", language="python"
    )
    assert not wants_multiline(ctx.prefix, True)
    local_fake.script(
        TokenScript.of("\n", "    return", " x", "\n", "    y = 2\n", "    z = 3\n", logprob=-0.05)
    )
    rec = await pipeline(local_fake.url, None).complete(ctx)
    assert rec.completion == "\n    return x" and rec.route == "local"
    assert rec.local_tokens == 4


async def test_single_line_remote_stops_at_the_line_end(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    # The server ends the line (stop "\n"): the answer ends cleanly, nothing is cut off,
    # so the connection stays usable (against the real vLLM: tests/test_vllm.py).
    local_fake.script(INVALID)
    rest = [f"print({i})\n" for i in range(30)]
    remote_fake.script(TokenScript.of(" a", " + b", "\n", *rest, logprob=-0.01, delay=0.02))
    rec = await pipeline(local_fake.url, remote_fake.base_url).complete(SINGLE)
    assert (rec.route, rec.completion) == ("remote", " a + b")
    gen = remote_fake.received("/v1/completions")[-1]
    assert gen.json()["stop"][-1] == "\n" and gen.json()["min_tokens"] == 1
    assert gen.tokens_sent <= 3, gen.tokens_sent
    assert not gen.disconnected


async def test_single_line_remote_hangs_up_on_a_server_that_ignores_stop(
    local_fake: FakeOllama,
) -> None:
    local_fake.script(INVALID)
    rest = [f"print({i})\n" for i in range(30)]
    with FakeOpenAI(honour_stop=False) as remote:
        remote.script(TokenScript.of(" a", " + b", "\n", *rest, logprob=-0.01, delay=0.02))
        rec = await pipeline(local_fake.url, remote.base_url).complete(SINGLE)
        assert (rec.route, rec.completion) == ("remote", " a + b")
        gen = remote.received("/v1/completions")[-1]
        assert await asyncio.to_thread(remote.wait_for, lambda: gen.disconnected)
        assert gen.tokens_sent <= 5, gen.tokens_sent


async def test_multi_line_is_not_stopped_at_the_line_end(local_fake: FakeOllama) -> None:
    local_fake.script(TokenScript.of("    s = 0\n", "    return s", logprob=-0.05))
    rec = await pipeline(local_fake.url, None).complete(MULTI)
    assert rec.completion == "    s = 0\n    return s" and rec.route == "local"


async def test_collect_single_line_closes_the_stream() -> None:
    sent: list[str] = []
    closed = asyncio.Event()

    async def chunks() -> AsyncIterator[Chunk]:
        try:
            for t in ["\n", "  x", " = 1", "\n", "  y = 2", "\n"]:
                sent.append(t)
                yield Chunk(text=t, tokens=(TokenLogprob(t, -0.1),))
        finally:
            closed.set()

    gen = chunks()
    done = await collect(gen, backend="b", model="m", started=0.0, single_line=True)
    await gen.aclose()
    assert closed.is_set() and len(sent) == 4  # nothing read after the line's newline
    assert done.text == "\n  x = 1" and done.finish_reason == "stop"
    assert [t.text for t in done.tokens] == ["\n", "  x", " = 1", "\n"]
    whole = await collect(chunks(), backend="b", model="m", started=0.0)
    assert whole.text == "\n  x = 1\n  y = 2\n"


# -- 2. a completion cut by the token budget is trimmed ------------------------------


def test_shown_text_trims_only_length_cuts() -> None:
    raw = "    s = 0\r\n    return s\r\n    print(s"
    assert drop_last_line(raw) == "    s = 0\r\n    return s"
    assert shown_text(raw, "stop", "", multiline=True) == (raw, None)
    text, cut = shown_text(raw, "length", "", multiline=True)
    assert text == "    s = 0\r\n    return s"
    assert cut == Truncation(chars=len("\r\n    print(s"), lines=1)
    # Single-line: a line the budget cut is no line at all; a finished one stays.
    assert shown_text(" a + (b", "length", "", multiline=False)[0] == ""
    assert shown_text(" a + b\n c", "length", "", multiline=False) == (" a + b", None)
    assert shown_text("\n    f(", "length", "", multiline=False)[0] == ""


async def test_length_cut_local_is_trimmed_to_whole_lines_and_stays_local(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.script(
        TokenScript.of(
            "    s = 0\n",
            "    return s",
            "\n",
            "    print(s",
            logprob=-0.05,
            finish_reason="length",
        )
    )
    rec = await pipeline(local_fake.url, remote_fake.base_url).complete(MULTI)
    assert rec.route == "local", (rec.reasons, rec.syntax)
    assert rec.reasons == ("confident-and-valid",)
    assert rec.completion == "    s = 0\n    return s"
    assert rec.truncated == {"local": Truncation(chars=len("\n    print(s"), lines=1)}
    assert rec.to_json()["truncated"] == {"local": {"chars": 12, "lines": 1, "kept": "lines"}}
    assert "truncated: the local model" in route_card(rec)
    assert remote_fake.received() == []


async def test_length_cut_local_is_trimmed_to_lines_the_gate_accepts(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    tokens = ["    s = 0\n", "    for x in xs:\n", "        s += x\n", "    if s:\n", "        ret"]
    local_fake.script(TokenScript.of(*tokens, logprob=-0.05, finish_reason="length"))
    rec = await pipeline(local_fake.url, remote_fake.base_url).complete(MULTI)
    assert rec.route == "local", (rec.reasons, rec.syntax)
    assert rec.completion == "    s = 0\n    for x in xs:\n        s += x"
    assert rec.syntax is not None and rec.syntax.status == "valid"
    assert rec.truncated["local"].lines == 2  # "    if s:" and the partial line
    assert remote_fake.received() == []


async def test_length_cut_remote_is_trimmed_before_it_is_shown(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.script(TokenScript.of("    s = (", logprob=-0.05))  # invalid: escalates
    remote_fake.script(
        TokenScript.of(
            "    s = 0\n", "    return s\n", "    if s:\n", "        pr", finish_reason="length"
        )
    )
    rec = await pipeline(local_fake.url, remote_fake.base_url).complete(MULTI)
    assert rec.route == "remote" and rec.reasons == ("syntax-invalid", "remote-ok")
    assert rec.completion == "    s = 0\n    return s"
    # Whole lines end with `if s:`, whose body was cut: the gate's run stops before it.
    cut = Truncation(chars=len("\n    if s:\n        pr"), lines=2, kept="gate")
    assert rec.truncated == {"remote": cut}
    assert "truncated: the remote model" in route_card(rec)


async def test_single_line_remote_cut_mid_line_is_not_shown(
    local_fake: FakeOllama, remote_fake: FakeOpenAI
) -> None:
    local_fake.script(INVALID)
    remote_fake.script(TokenScript.of(" a", " + (", "b", finish_reason="length"))
    rec = await pipeline(local_fake.url, remote_fake.base_url).complete(SINGLE)
    assert rec.route == "none" and rec.completion == ""
    assert rec.reasons == ("syntax-invalid", "remote-empty")
    assert rec.truncated["remote"].chars == len(" a + (b")


# -- the evaluation derives texts the way the server does ----------------------------


def _task(prefix: str, *, multiline: bool = True) -> Task:
    suffix = "\n\n\nprint(total([1, 2]))\n"
    return Task(
        dataset="hand",
        task_id="t",
        language="python",
        prefix=prefix,
        suffix=suffix,
        multiline=multiline,
    )


def _gen(tokens: list[str], finish: str) -> Generation:
    raw = "".join(tokens)
    toks = tuple((t, -0.1) for t in tokens)
    return Generation(backend="b", model="m", raw=raw, text="", tokens=toks, finish_reason=finish)


def test_eval_treat_trims_length_cuts_like_the_pipeline() -> None:
    s = Settings()
    gate = make_gate(s.routing)
    task = _task("def total(xs):\n")
    cut = _gen(
        ["    s = 0\n", "    for x in xs:\n", "        s += x\n", "    if s:\n", "  r"], "length"
    )
    assert treat(task, cut, s, gate).text == "    s = 0\n    for x in xs:\n        s += x"
    assert treat(task, cut, s).text == "    s = 0\n    for x in xs:\n        s += x\n    if s:"
    assert treat(task, _gen(["    s = 0\n", "    pr"], "stop"), s, gate).text == "    s = 0\n    pr"
    # Nothing the gate accepts: the local text stays (and is rejected), the remote's is empty.
    open_only = _gen(["    if xs:\n", "  r"], "length")
    assert treat(task, open_only, s, gate).text == "    if xs:"
    assert treat(task, open_only, s, gate, tier="remote").text == ""


def test_eval_treat_single_line_stops_at_the_line_end() -> None:
    s = Settings()
    task = _task("def total(xs):\n    return ", multiline=False)
    gen = _gen([" sum", "(xs)", "\n", "    x", " = 1\n"], "length")
    done = treat(task, gen, s)
    assert done.text == " sum(xs)"  # a whole line: not truncated although "length"
    assert [t for t, _ in done.tokens] == [" sum", "(xs)", "\n"]  # as the stream stopped
    assert treat(task, _gen([" sum", "(x"], "length"), s).text == ""


def test_a_trimmed_text_keeps_its_line_break_before_code_on_the_cursor_line() -> None:
    raw = "    for x in xs:\n        s += x\n    s = s *"
    # Cursor at the start of a line holding code: without the break, "s += x" would run
    # into "return s".
    text, _ = shown_text(raw, "length", "    return s\n", multiline=True)
    assert text == "    for x in xs:\n        s += x\n"
    # On an empty line the editor's own line break follows: none added.
    text, _ = shown_text(raw, "length", "\n    return s\n", multiline=True)
    assert text == "    for x in xs:\n        s += x"
    # Single-line never gets one.
    assert shown_text(" a + b\n c", "length", ")\n", multiline=False)[0] == " a + b"
