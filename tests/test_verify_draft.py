"""Verified escalation (issue 37), without a server: reading a scoring answer
(clients/_verify.py), and the fallback where the server cannot score prompts.

The real vLLM tests are in tests/test_vllm_verify.py."""

from __future__ import annotations

from typing import Any

from synconfroute.clients import CompletionRequest
from synconfroute.clients._verify import check, draft_for, safe_cut
from synconfroute.clients.openai import OpenAIBackend
from tests.fakes.http import Request, Responder, TokenScript
from tests.fakes.openai import FakeOpenAI

PROMPT = "def add(a, b):\n    return"


def block(tokens: list[str], values: list[float], tops: list[dict[str, float]]) -> dict[str, Any]:
    return {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops}


def echoed(prompt_toks: list[str], draft: list[tuple[str, float, float]], gen: str) -> Any:
    """A scoring answer: prompt tokens, draft tokens as (text, logprob, best logprob),
    one generated token."""
    toks = [*prompt_toks, *(t for t, _, _ in draft), gen]
    values = [0.0] * len(prompt_toks) + [v for _, v, _ in draft] + [-0.1]
    tops: list[dict[str, float]] = [{t: 0.0} for t in prompt_toks]
    tops += [{t: v, "<best>": best} if best > v else {t: v} for t, v, best in draft]
    tops.append({gen: -0.1})
    return block(toks, values, tops), "".join(toks)


def test_whole_draft_agreed_is_kept_with_the_token_after_it() -> None:
    lp, text = echoed(
        ["def", " add", "(a, b):\n", "    return"],
        [(" a", -0.1, -0.1), (" +", -0.2, -0.2), (" b", -0.1, -0.1)],
        "\n",
    )
    chk = check(PROMPT, " a + b", lp, 1, text[:-1], "stop", 64)
    assert chk is not None and chk.whole and chk.kept == chk.tokens == 3
    assert chk.kept_text == " a + b" and chk.after == ("", chk.after[1], "stop")


def test_first_disagreement_ends_the_kept_run() -> None:
    lp, text = echoed(
        ["def", " add", "(a, b):\n", "    return"],
        [(" a", -0.1, -0.1), (" -", -2.0, -0.3), (" b", -0.1, -0.1)],
        "\n",
    )
    chk = check(PROMPT, " a - b", lp, 1, text, "stop", 64)
    assert chk is not None and (chk.tokens, chk.kept, chk.kept_text) == (3, 1, " a")
    assert chk.after is None and not chk.whole


def test_a_draft_split_across_the_prompts_end_is_not_used() -> None:
    # "y = " + "10" is tokenised "y", " =", " 10": no token starts where the prompt ends.
    lp, text = echoed(["y", " ="], [(" 10", -0.1, -0.1)], "\n")
    chk = check("y = ", "10", lp, 1, text, "stop", 64)
    assert chk is not None and (chk.tokens, chk.kept) == (0, 0)


def test_kept_run_ends_where_retokenising_is_safe_and_within_the_cap() -> None:
    # "foo" "bar" agreed, "baz" not: "foo" | "bar" is inside a word, so only "foo" would
    # re-tokenise as it was scored... and not even that: the cut falls inside the word.
    lp, text = echoed(
        ["x", " ="], [(" foo", -0.1, -0.1), ("bar", -0.1, -0.1), ("(", -3.0, -0.1)], ""
    )
    chk = check("x =", " foobar(", lp, 1, text, "length", 64)
    assert chk is not None and chk.tokens == 3 and chk.kept == 2  # " foobar" | "(": safe
    lp, text = echoed(
        ["x", " ="], [(" foo", -0.1, -0.1), ("bar", -0.1, -0.1), ("baz", -3.0, -0.1)], ""
    )
    chk = check("x =", " foobarbaz", lp, 1, text, "length", 64)
    assert chk is not None and chk.kept == 0  # every cut inside the word: none is safe
    lp, text = echoed(["x", " ="], [(" a", -0.1, -0.1), (" +", -0.1, -0.1), (" b", -0.1, -0.1)], "")
    chk = check("x =", " a + b", lp, 1, text, "length", 2)
    assert chk is not None and chk.kept == 2 and chk.kept_text == " a +"  # the token cap


def test_an_answer_without_the_echo_means_no_prompt_scoring() -> None:
    answer = block([" a"], [-0.1], [{" a": -0.1}])
    assert check(PROMPT, " a + b", answer, 1, " a", "length", 64) is None
    assert check(PROMPT, " a + b", None, 1, " a", "length", 64) is None


def test_safe_cuts_and_single_line_drafts() -> None:
    assert safe_cut("return", " a") and safe_cut("(a", ",")
    assert not safe_cut("foo", "bar") and not safe_cut("x = ", "1") and not safe_cut("+", "=")
    assert not safe_cut("\n", "\n    ") and not safe_cut("```\n\n", "In")
    assert safe_cut("):\n", "def") and not safe_cut("x:\n    ", "y")
    assert draft_for(" a + b\n    c", single_line=True) == " a + b"
    assert draft_for("\n    y = 2\nz", single_line=True) == "\n    y = 2"
    assert draft_for(" a\nb", single_line=False) == " a\nb"


async def test_a_server_that_cannot_score_prompts_gets_a_plain_escalation() -> None:
    """The fake (like llama.cpp's server) has no vLLM /tokenize: the client asks once,
    then escalates plainly, with the same body as without a draft."""
    with FakeOpenAI() as fake:
        fake.script(TokenScript.of(" a", " +", " b"), TokenScript.of(" a", " +", " b"))
        b = OpenAIBackend([fake.base_url], fake.models[0], api_key_env=None, timeout=5)
        try:
            first = await b.complete(CompletionRequest(prefix=PROMPT, draft=" a + b"))
            second = await b.complete(CompletionRequest(prefix=PROMPT, draft=" a + b"))
        finally:
            await b.aclose()
    assert first.text == second.text == " a + b"
    assert (first.draft_tokens, first.draft_kept) == (0, 0)
    sent = fake.received("/v1/completions")
    assert len(sent) == 2 and all("echo" not in r.json() for r in sent)
    assert len(fake.received("/tokenize")) == 1  # asked once, remembered


async def test_a_busy_probe_is_asked_again_a_missing_one_is_not() -> None:
    """A /tokenize that answers 503 (busy) or 401 says nothing about the server's
    features: the next escalation asks again. A 404 (no such endpoint) is remembered."""
    statuses = [503, 404]

    async def tokenize(req: Request, resp: Responder) -> None:
        await resp.send(statuses.pop(0), {"error": "no"})

    with FakeOpenAI() as fake:
        fake.routes[("POST", "/tokenize")] = tokenize
        b = OpenAIBackend([fake.base_url], fake.models[0], api_key_env=None, timeout=5)
        try:
            for _ in range(3):
                done = await b.complete(CompletionRequest(prefix=PROMPT, draft=" a + b"))
                assert done.text == "return a + b" and done.draft_tokens == 0
        finally:
            await b.aclose()
    assert len(fake.received("/tokenize")) == 2 and statuses == []
    assert len(fake.received("/v1/completions")) == 3  # plain escalations, all three
