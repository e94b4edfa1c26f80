"""A remote answer its token budget cut is never shown broken (issue 37): trimmed to the
longest run of whole lines the gate accepts with nothing left open at the cut, or not
shown, and the record says which. Against the fake Ollama and fake vLLM, the real gate,
and Python's own compiler as the judge of "broken"."""

from __future__ import annotations

import ast

import pytest

from synconfroute.server.routing.pipeline import CompletionContext
from synconfroute.server.routing.text_rules import open_at_cut
from synconfroute.server.vocab.card import route_card
from tests.fakes import FakeOllama, FakeOpenAI, TokenScript
from tests.test_pipeline_lines import pipeline

# The cursor is on the blank line in the `if` block's body; the `elif` follows it.
PREFIX = "def sign(x):\n    if x > 0:\n"
SUFFIX = "    elif x < 0:\n        return -1\n    return 0\n"
CTX = CompletionContext(prefix=PREFIX, suffix=SUFFIX, language="python", path="/repo/sign.py")
BROKEN_LOCAL = TokenScript.of("        y = (", logprob=-0.05)  # invalid: escalates

# Remote answers cut by max_tokens: (tokens, what may be shown, how it is recorded).
CUTS = [
    # ends the `if` block and starts a statement at its level: the `elif` is orphaned
    (
        ["        y = 1\n", "        return y\n", "    z = 2\n", "    w"],
        "        y = 1\n        return y\n",
        "gate",
    ),
    # a header whose body was cut off
    (["        return 1\n", "    if x == 0:\n", "        ret"], "        return 1\n", "gate"),
    (["        y = 1\n", "    for i in x:\n", "        pr"], "        y = 1\n", "gate"),
    # stays inside the block: whole lines are enough
    (
        ["        y = 1\n", "        return y\n", "        pr"],
        "        y = 1\n        return y\n",
        "lines",
    ),
    # nothing complete before the cut
    (["    z = 2\n", "    if z:\n", "        pr"], "", "nothing"),
]


def compiles(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


@pytest.mark.parametrize(("tokens", "shown", "kept"), CUTS)
async def test_a_cut_remote_answer_is_never_shown_broken(
    local_fake: FakeOllama,
    remote_fake: FakeOpenAI,
    tokens: list[str],
    shown: str,
    kept: str,
) -> None:
    local_fake.script(BROKEN_LOCAL)
    remote_fake.script(TokenScript.of(*tokens, finish_reason="length"))
    rec = await pipeline(local_fake.url, remote_fake.base_url).complete(CTX)
    print(rec.route, rec.reasons, repr(rec.completion), rec.truncated)
    assert rec.completion == shown
    assert not rec.completion or compiles(PREFIX + rec.completion + SUFFIX)
    assert rec.truncated["remote"].kept == kept
    if kept == "nothing":
        assert rec.route == "none" and "nothing shown" in route_card(rec)


def test_what_is_left_open_at_a_cut() -> None:
    assert open_at_cut("        y = 1\n    if y:", "", "python")
    assert open_at_cut("    if (x) {", "", "cpp")
    assert not open_at_cut("        y = 1", SUFFIX, "python")
    assert open_at_cut("        y = 1\n    z = 2", SUFFIX, "python")
    # the run writes the `if` the suffix's `elif` continues
    assert not open_at_cut("    if x > 9:\n        return 2", SUFFIX, "python")
    assert open_at_cut("    while x:\n        x -= 1", SUFFIX, "python")
    assert not open_at_cut("    while x:\n        x -= 1", "    else:\n        pass\n", "python")
    assert not open_at_cut("    z = 2", "    return 0\n", "python")  # nothing continues
