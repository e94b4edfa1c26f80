"""The local budget in time, the anchored window and the prediction's time cap."""

from __future__ import annotations

import itertools
import tarfile
from pathlib import Path

import pytest

from synconfroute.clients._speed import EMBEDDED_PRIOR, Rates, SpeedMeter
from synconfroute.clients.embedded import EmbeddedBackend
from synconfroute.clients.ollama import OllamaBackend
from synconfroute.clients.types import CompletionRequest
from synconfroute.server.learning import later
from synconfroute.server.routing.context import make_context
from synconfroute.server.routing.gate import make_gate
from synconfroute.server.routing.pipeline import Pipeline
from synconfroute.server.routing.request import CompletionContext
from synconfroute.server.routing.time_budget import (
    GRID_STEPS,
    MIN_PROMPT_CHARS,
    PROMPT_STEPS,
    anchor_line,
    anchored_window,
    local_budget,
)
from synconfroute.server.settings.config import Settings, with_values
from synconfroute.server.vocab.positions import cap_window

from .fakes.http import TokenScript
from .fakes.ollama import FakeOllama

CLICK = Path("/work/shared/data/repos/click-src.tar.gz")


def real_python_file() -> str:
    """click's core.py when the shared data is here, else the stdlib's argparse.py."""
    if CLICK.is_file():
        with tarfile.open(CLICK) as tar:
            for m in tar.getmembers():
                if m.name.endswith("click/core.py"):
                    f = tar.extractfile(m)
                    assert f is not None
                    return f.read().decode()
    import argparse

    return Path(argparse.__file__).read_text()


def typed_prefixes(text: str, first_line: int, lines: int) -> list[tuple[str, int]]:
    """(document so far, cursor offset) for every key of `lines` lines typed from
    `first_line` on, as an editor would see it: the text after the cursor not yet there."""
    starts = [0]
    for i, c in enumerate(text):
        if c == "\n":
            starts.append(i + 1)
    out = []
    for off in range(starts[first_line], starts[first_line + lines]):
        out.append((text[:off], off))
    return out


# -- the anchored window --------------------------------------------------------


def window_starts(text: str, limit: int, *, anchored: bool) -> list[tuple[int, str]]:
    """(document offset where the window starts, window) for each key typed."""
    out = []
    for doc, off in typed_prefixes(text, 1200, 48):
        ctx = make_context(doc, off, context_lines=200)
        if anchored:
            prefix, _ = anchored_window(ctx.prefix, ctx.suffix, limit, prefix_only=True)
        else:
            prefix, _ = cap_window(ctx.prefix, "", limit)
        out.append((off - len(prefix), prefix))
    return out


def test_the_old_cursor_relative_cut_moves_the_window_start_with_every_line() -> None:
    """The bug: the window is the last N characters before the cursor, so its start
    moves with nearly every line typed and the KV cache is lost at every pause."""
    seen = window_starts(real_python_file(), 1500, anchored=False)
    moves = sum(1 for a, b in itertools.pairwise(seen) if a[0] != b[0])
    assert moves >= 40  # 48 lines typed


def test_the_anchored_window_moves_in_grid_steps_and_typing_only_appends() -> None:
    seen = window_starts(real_python_file(), 1500, anchored=True)
    moves = [i for i, (a, b) in enumerate(itertools.pairwise(seen)) if a[0] != b[0]]
    assert len(moves) <= 48 // GRID_STEPS[1] + 2, moves  # 48 lines typed
    for i, ((start, prefix), (start2, prefix2)) in enumerate(itertools.pairwise(seen)):
        if i not in moves:
            assert start == start2 and prefix2.startswith(prefix)  # one key appended
        assert len(prefix) <= 1500
    assert min(len(p) for _, p in seen) >= 1500 // 2  # at least half the room kept


def test_the_window_starts_on_a_grid_line_of_the_document() -> None:
    text = real_python_file()
    lines = text.split("\n")
    for line in (40, 250, 251, 700, 1999):
        off = sum(len(x) + 1 for x in lines[:line]) + 4
        ctx = make_context(text, off, context_lines=200)
        first = text.count("\n", 0, off - len(ctx.prefix))
        assert first == anchor_line(line, 200)
        assert first % GRID_STEPS[0] == 0 or first == 0
        assert line - 200 <= first <= line
        prefix, _ = anchored_window(ctx.prefix, ctx.suffix, 2000, prefix_only=True)
        start = text.count("\n", 0, off - len(prefix))
        assert start % GRID_STEPS[-2] == 0 or len(prefix) >= 1000


def test_a_short_context_is_not_rounded_away() -> None:
    """`completion.context_lines = 3`: the window still holds the lines before the
    cursor's (the grid step shrinks to keep at least half of them)."""
    text = "".join(f"line_{i} = {i}\n" for i in range(100))
    off = text.index("line_45")
    ctx = make_context(text, off, context_lines=3)
    assert 2 <= ctx.prefix.count("\n") <= 3
    assert anchor_line(45, 3) in (42, 43) and anchor_line(45, 200) == 0
    assert anchor_line(1000, 200) == 800 and anchor_line(1001, 200) == 832


def test_a_prefix_only_model_gets_the_whole_budget_for_the_prefix() -> None:
    prefix = "".join(f"line_{i} = {i}\n" for i in range(400))
    suffix = "".join(f"after_{i} = {i}\n" for i in range(400))
    p, s = anchored_window(prefix, suffix, 2000, prefix_only=True)
    assert s == "" and 1000 <= len(p) <= 2000
    p, s = anchored_window(prefix, suffix, 2000)
    assert 0 < len(s) <= 500 and len(p) + len(s) <= 2000


def test_a_huge_line_is_cut_where_it_must_be() -> None:
    p, _ = anchored_window("x" * 5000, "", 1000, prefix_only=True)
    assert len(p) == 1000


# -- the budget -----------------------------------------------------------------


def test_the_prompt_fits_the_first_token_target_at_the_measured_rate() -> None:
    s = Settings()
    b = local_budget(s.local, s.completion, Rates(prompt_tps=320, decode_tps=72, samples=2))
    # 320 tok/s x (0.7 s - one decode step) x 3.5 chars a token
    assert 700 <= b.prompt_chars <= 800
    # 0.25 s x 72 tok/s = 18 tokens, one more for the step that ends on time
    assert b.multiline and b.max_predict_s == 0.25 and b.max_tokens == 19
    slower = local_budget(s.local, s.completion, Rates(prompt_tps=160, decode_tps=72))
    assert slower.prompt_chars < b.prompt_chars


def test_a_slow_machine_still_gets_a_few_lines_and_only_single_line_completions() -> None:
    s = Settings()
    b = local_budget(s.local, s.completion, Rates(prompt_tps=20, decode_tps=20))
    assert b.prompt_chars == MIN_PROMPT_CHARS
    assert not b.multiline  # 0.25 s x 20 tok/s = 5 tokens: not two lines


def test_unmeasured_or_switched_off_the_character_cap_rules() -> None:
    s = Settings()
    assert local_budget(s.local, s.completion, None).prompt_chars == s.local.max_prompt_chars
    assert local_budget(s.local, s.completion, Rates()).prompt_chars == s.local.max_prompt_chars
    # The embedded backend reports a small model's rates until it has measured its own.
    prior = local_budget(s.local, s.completion, EmbeddedBackend().rates)
    assert prior == local_budget(s.local, s.completion, EMBEDDED_PRIOR)
    assert prior.prompt_chars < s.local.max_prompt_chars
    s = with_values(s, {"local": {"first_token_target_ms": 0, "max_predict_ms": 0}})
    b = local_budget(s.local, s.completion, Rates(prompt_tps=320, decode_tps=72))
    assert b.prompt_chars == s.local.max_prompt_chars and b.max_predict_s is None
    assert b.max_tokens == s.completion.max_tokens


def test_small_changes_of_the_rate_keep_the_window_size() -> None:
    """The window's size moves in coarse steps: a rate that drifts by a few percent
    (it does, on a shared machine) does not resize the window and lose the KV cache."""
    s = Settings()
    sizes = {
        local_budget(s.local, s.completion, Rates(prompt_tps=r, decode_tps=72)).prompt_chars
        for r in range(330, 380, 5)
    }
    assert len(sizes) == 1 and sizes <= set(PROMPT_STEPS)


def test_the_meter_ignores_tiny_samples_and_follows_the_load() -> None:
    m = SpeedMeter()
    m.observe(prompt_tokens=3, prompt_s=0.1, decode_tokens=1, decode_s=0.1)
    assert m.rates.prompt_tps is None and m.rates.decode_tps is None
    m.observe(prompt_tokens=300, prompt_s=1.0, decode_tokens=20, decode_s=0.25)
    assert m.rates.prompt_tps == pytest.approx(300) and m.rates.decode_tps == pytest.approx(80)
    m.observe(prompt_tokens=100, prompt_s=1.0)
    assert 100 < (m.rates.prompt_tps or 0) < 300


# -- the time cap, with Ollama's timings (the fake speaks its wire protocol) ----

LONG_PREFIX = "".join(f"value_{i} = compute({i}, scale=2)\n" for i in range(20))


async def test_ollama_rates_come_from_its_timings_and_cap_a_multiline_prediction() -> None:
    with FakeOllama() as fake:
        fake.speed = (400.0, 80.0)  # 12.5 ms a token
        s = with_values(
            Settings(),
            {
                "local": {"backend": "ollama", "max_predict_ms": 300},
                "completion": {"deadline_ms": 5000},
            },
        )
        local = OllamaBackend(fake.url, "qwen2.5-coder:3b", timeout=5)
        p = Pipeline(s, local, None, make_gate(s.routing))
        try:
            # At start (the server warms the tier): one generation to its end, timed.
            r = await local.calibrate()
            assert r.prompt_tps is not None and 200 < r.prompt_tps < 450
            assert r.decode_tps is not None and 40 < r.decode_tps < 90
            # A block that ends by itself: Ollama's final line carries its timings.
            fake.script(TokenScript.of("    a = 1\n", "    b = 2\n", "    c = 3\n"))
            one = await p.complete(CompletionContext(prefix=LONG_PREFIX, suffix="\n"))
            assert one.route == "local" and one.completion.startswith("    a = 1\n")
            r = local.rates
            assert r.prompt_tps is not None and 200 < r.prompt_tps < 450
            assert r.decode_tps is not None and 40 < r.decode_tps < 90
            # A block: 0.3 s at 80 tok/s is about 24 tokens (lines here), not 40 lines.
            fake.script(TokenScript.of(*[f"    y{i} = x\n" for i in range(40)], logprob=-0.01))
            block = await p.complete(CompletionContext(prefix="def g(x):\n", suffix="\n"))
            n = block.completion.count("\n") + 1
            assert block.route == "local" and 2 <= n <= 28, block.completion
            assert "local" in block.truncated
        finally:
            await local.aclose()


async def test_a_stream_closed_before_ollamas_final_line_still_measures_decode() -> None:
    with FakeOllama() as fake:
        fake.speed = (400.0, 40.0)
        local = OllamaBackend(fake.url, "qwen2.5-coder:3b", timeout=5)
        try:
            fake.script(TokenScript.of(" x", " +", " 1", " +", " 2", "\n", "y = 3"))
            req = CompletionRequest(prefix="z =", suffix="\n", single_line=True)
            c = await local.complete(req)  # stops reading at the line end
            assert c.text == " x + 1 + 2"
            assert local.last_timings == {}  # no final line came
            assert local.rates.decode_tps is not None and 20 < local.rates.decode_tps < 45
        finally:
            await local.aclose()


async def test_without_the_time_cap_the_whole_block_comes() -> None:
    """The same block with `local.max_predict_ms = 0`: the cap above is what cut it."""
    with FakeOllama() as fake:
        fake.speed = (400.0, 200.0)
        s = with_values(Settings(), {"local": {"max_predict_ms": 0}})
        local = OllamaBackend(fake.url, "qwen2.5-coder:3b", timeout=5)
        p = Pipeline(s, local, None, make_gate(s.routing))
        try:
            fake.script(TokenScript.of(*[f"    y{i} = x\n" for i in range(40)], logprob=-0.01))
            block = await p.complete(CompletionContext(prefix="def g(x):\n", suffix="\n"))
            assert block.route == "local" and block.completion.count("\n") >= 30
        finally:
            await local.aclose()


# -- Ollama's prompt rate while typing (single lines never read its final line) ------


async def test_single_lines_measure_ollamas_prompt_rate_from_the_first_token() -> None:
    """Each single line closes the stream at its end, before Ollama's final line (the
    only one with `prompt_eval_duration`): the prompt rate comes from the time to the
    first token and the part of the prompt its KV cache did not hold."""
    text = real_python_file()

    def at(start: int, n: int) -> CompletionContext:  # mid-line: a single-line request
        return CompletionContext(prefix=text[start : start + n] + "\nresult", suffix="\n")

    with FakeOllama() as fake:
        fake.speed = (320.0, 72.0)  # the fake reads 4 characters a token: 1,280 chars/s
        fake.script(TokenScript.of(" value", " =", " 1", "\n", "x = 2"), always=True)
        s = with_values(Settings(), {"local": {"backend": "ollama"}})
        local = OllamaBackend(fake.url, "qwen2.5-coder:3b", timeout=10)
        p = Pipeline(s, local, None, make_gate(s.routing))

        async def complete(ctx: CompletionContext) -> None:
            await p.complete(ctx)
            await later.settle()  # the stream closes, and its timings are read, after it

        try:
            assert local.rates.prompt_tps is None  # not measured: the character cap rules
            assert p.local_budget().prompt_chars == s.local.max_prompt_chars
            await complete(at(5000, 700))  # nothing to compare its cache with yet
            assert local.rates.prompt_tps is None
            elsewhere = at(20000, 700)
            await complete(elsewhere)
            assert local.last_timings == {}  # no final line was read
            tps = local.rates.prompt_tps
            # 1,280 chars/s at 3.5 chars a token = 366 tok/s; a busy machine adds its own
            # delay to the first token and reads lower (seen: < 250 at load 10)
            assert tps is not None and 150 < tps < 480
            # The window now fits the first-token target instead of the 10,000 cap.
            assert p.local_budget().prompt_chars <= 1024
            # One key more: the cache holds the rest, no sample (the rate stands).
            typed = CompletionContext(prefix=elsewhere.prefix + "x", suffix="\n")
            await complete(typed)
            assert local.rates.prompt_tps == tps
            # The machine gets busy: the next jump measures the slower rate.
            fake.speed = (80.0, 72.0)
            await complete(at(40000, 700))
            slower = local.rates.prompt_tps
            assert slower is not None and slower < 0.9 * tps
        finally:
            await local.aclose()


async def test_warming_an_ollama_tier_measures_it_without_touching_the_scripts() -> None:
    """The server warms its tier with a short calibration; the test fake answers it
    outside its scripts and its request log, so no test loses a scripted answer."""
    from synconfroute.server.routing.backends import warm

    with FakeOllama() as fake:
        fake.speed = (320.0, 72.0)
        fake.script(TokenScript.of(" scripted", "\n"))
        local = OllamaBackend(fake.url, "qwen2.5-coder:3b", timeout=10)
        try:
            await warm(local)
            assert fake.calibrations == 1 and fake.received("/api/generate") == []
            r = local.rates
            assert r.prompt_tps is not None and 200 < r.prompt_tps < 450
            c = await local.complete(CompletionRequest(prefix="x =", suffix="\n", single_line=True))
            assert c.text == " scripted"  # the test's own answer is still first
        finally:
            await local.aclose()


def test_the_first_token_estimate_reads_only_large_new_prompt_parts() -> None:
    from synconfroute.clients._speed import FirstTokenEstimate

    est = FirstTokenEstimate()
    code = real_python_file()
    a, b = code[1000:3000], code[9000:11000]
    assert est.sample(a, 0.5, 50.0) is None  # nothing to compare the server's cache with
    tokens, seconds = est.sample(b, 0.6, 50.0) or (0, 0.0)  # a jump: all of b is new
    assert tokens == int(2000 / 3.5) and abs(seconds - 0.58) < 1e-9
    # A key typed in a FIM prompt: the suffix after it is read again, too few tokens.
    assert est.sample(b[:1800] + "x" + b[1800:], 0.05, 50.0) is None
    # No first token (cancelled): the server holds an unknown part; the next says nothing.
    assert est.sample(a, None, 50.0) is None
    assert est.sample(b, 0.6, 50.0) is None
    assert est.sample(a, 0.6, 50.0) is not None


def test_line_starts_as_lsp_counts_lines_per_line() -> None:
    """`_line_starts` (every line start of the prefix `anchored_window` cuts on a grid)
    against a reference loop: \\n, \\r\\n and a lone \\r end a line, over random texts.
    It ran one Python iteration per character (~570 µs for a 200-line prefix, each time
    the window was cut); now the characters are C's: the Python lines it runs (traced)
    grow with the lines of the text, not with its characters."""
    import random
    import sys

    from synconfroute.server.routing.time_budget import _line_starts

    def reference(text: str) -> list[int]:
        out = [0]
        for i, c in enumerate(text):
            if c == "\n" or (c == "\r" and text[i + 1 : i + 2] != "\n"):
                out.append(i + 1)
        return out

    rng = random.Random(35)
    pieces = ("a", "bc", " ", "\n", "\r", "\r\n")
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        assert _line_starts(text) == reference(text), repr(text)
    prefix = "    total = compute(values, weights)  # a comment\n" * 200
    events = 0

    def trace(frame: object, event: str, arg: object) -> object:
        nonlocal events
        events += 1
        return trace

    sys.settrace(trace)
    try:
        starts = _line_starts(prefix)
    finally:
        sys.settrace(None)
    assert starts == reference(prefix)
    assert events <= 4 * len(starts) + 20, f"{events} traced events for {len(starts)} lines"
