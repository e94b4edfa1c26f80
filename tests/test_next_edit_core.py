"""The pure core of next-edit suggestions: the prompt, the answer, the one edit and the
confidence of the changed tokens."""

from __future__ import annotations

from pathlib import Path

from synconfroute.server.routing.next_edit import answer, prompt

TEXT = "def f(a, b):\n    subtotal = a + b\n    total = total * 2\n    return total\n"


def test_region_is_whole_lines_around_the_cursor() -> None:
    cursor = TEXT.index("subtotal") + 3
    r = prompt.region_at(TEXT, cursor, region_lines=1, context_lines=5)
    assert TEXT[r.start : r.end] == ("def f(a, b):\n    subtotal = a + b\n    total = total * 2")
    assert r.excerpt_start == 0 and TEXT[r.end : r.excerpt_end] == "\n    return total\n"


def test_zeta_prompt_has_diffs_then_marked_excerpt() -> None:
    cursor = TEXT.index("subtotal") + 3
    r = prompt.region_at(TEXT, cursor, region_lines=1, context_lines=5)
    edit = prompt.RecentEdit("m.py", "    total = a + b", "    subtotal = a + b")
    p = prompt.build("zeta", "m.py", TEXT, r, [edit])
    assert (
        'User edited "m.py":\n```diff\n@@ -1 +1 @@\n-    total = a + b\n+    subtotal = a + b\n```'
        in p
    )
    assert p.index("### User Edits:") < p.index("### User Excerpt:") < p.index("### Response:")
    ex = p[p.index("```m.py\n") :]
    assert ex.startswith("```m.py\n<|start_of_file|>\n<|editable_region_start|>\ndef f(a, b):\n")
    assert "    sub<|user_cursor_is_here|>total = a + b\n" in ex
    assert "total * 2\n<|editable_region_end|>\n    return total\n" in ex
    plain = prompt.build("plain", "m.py", TEXT, r, [])
    assert "(none)" in plain and "<|editable_region_start|>" in plain and "###" not in plain


def _answer(region: str) -> str:
    return f"<|editable_region_start|>\n{region}\n<|editable_region_end|>\n```"


def test_the_answer_gives_one_edit_covering_every_change() -> None:
    old = "    subtotal = a + b\n    total = total * 2"
    new = "    subtotal = a + b\n    subtotal = subtotal * 2"
    rw = answer.parse(_answer(new))
    assert rw is not None and rw.text == new and answer.complete(_answer(new))
    e = answer.one_edit(old, rw.text)
    assert e is not None
    # One range from the first change to the last (both `total`s of the line), the
    # common head and tail kept.
    assert old[: e.start] + e.text + old[e.end :] == new
    assert old[e.start : e.end] == "total = " and e.text == "subtotal = sub"
    assert e.start == len("    subtotal = a + b\n    ")


def test_an_answer_that_rewrites_nothing_is_no_edit() -> None:
    old = "x = 1\ny = 2"
    rw = answer.parse(_answer(old))
    assert rw is not None and answer.one_edit(old, rw.text) is None
    assert answer.parse("no markers here") is None


def test_echoed_cursor_marker_is_dropped() -> None:
    rw = answer.parse(
        "<|editable_region_start|>\nab<|user_cursor_is_here|>cd\n<|editable_region_end|>"
    )
    assert rw is not None and rw.text == "abcd"


def test_confidence_counts_only_the_changed_tokens() -> None:
    old = "a = 1\nb = 2"
    new = "a = 1\nb = 3"
    text = _answer(new)
    # Tokens spelling the answer: copied ones sure, the changed "3" unsure.
    pieces = [
        "<|editable_region_start|>",
        "\n",
        "a = 1\n",
        "b = ",
        "3",
        "\n",
        "<|editable_region_end|>",
        "\n```",
    ]
    lps = [-0.01, -0.01, -0.01, -0.01, -2.5, -0.01, -0.01, -0.01]
    tokens = list(zip(pieces, lps, strict=True))
    rw = answer.parse(text)
    assert rw is not None
    e = answer.one_edit(old, rw.text)
    assert e is not None
    changed = answer.changed_logprobs(tokens, text, rw, old)
    assert changed == (-2.5,)
    assert answer.mean(changed) == -2.5
    # A deletion is judged by the token at the seam.
    rw2 = answer.parse(_answer("a = 1\n"))
    assert rw2 is not None
    d = answer.one_edit(old, rw2.text)
    assert d is not None and d.text == "" and old[d.start : d.end] == "b = 2"
    t2 = _answer("a = 1\n")
    toks2 = [
        ("<|editable_region_start|>\n", -0.01),
        ("a = 1\n", -0.02),
        ("\n", -1.5),
        ("<|editable_region_end|>\n```", -0.01),
    ]
    assert answer.changed_logprobs(toks2, t2, rw2, old) == (-1.5,)


def test_the_ring_knows_a_chunk_before_its_changes() -> None:
    from synconfroute.server.workspace.recent_edits import RecentEdits

    ring = RecentEdits(clock=lambda: 0.0)
    v0 = "a\nb\n    total = 1\nc\nd\ne"
    v1 = v0.replace("total", "subtotal")
    ring.note("/w/m.py", v1, 2, 2, v0)
    v2 = v1.replace("= 1", "= 2")  # typed again on the same line: one chunk
    ring.note("/w/m.py", v2, 2, 2, v1)
    (chunk,) = ring.recent()
    # Two lines around the change, as they were before both changes.
    assert (
        chunk.text == "a\nb\n    subtotal = 2\nc\nd" and chunk.before == "a\nb\n    total = 1\nc\nd"
    )
    edit = prompt.RecentEdit("m.py", chunk.before, chunk.text)
    assert "-    total = 1\n+    subtotal = 2" in prompt.unified_diff(edit)


def test_calibration_from_the_ledger_leaves_next_edits_out(tmp_path: Path) -> None:
    from synconfroute.server.evaluation.from_ledger import observations
    from synconfroute.server.learning.ledger import Ledger, load
    from synconfroute.server.vocab.record import RouteDecision

    led = Ledger(tmp_path / "l.jsonl")
    rec = RouteDecision(
        completion="x", route="local", reasons=(), policy="synconf", confidence=-0.1,
        threshold=-0.5, syntax=None, local_model="m", remote_model=None, local_completion="x",
    )  # fmt: skip
    for did, task in (("a", "completion"), ("b", "next-edit")):
        led.decision(did, rec, task)
        led.event("shown", did)
        led.event("accepted", did)
    decisions, *_ = load(tmp_path / "l.jsonl")
    assert [d["task"] for d in decisions] == ["completion", "next-edit"]
    obs, skipped = observations(decisions, 0.5)
    assert len(obs) == 1 and skipped["next-edit suggestion"] == 1


def test_stats_count_next_edits_apart_from_completions(tmp_path: Path) -> None:
    from synconfroute.server.learning.ledger import Ledger, format_summary, read, summarize
    from synconfroute.server.vocab.record import RouteDecision

    led = Ledger(tmp_path / "l.jsonl")
    rec = RouteDecision(
        completion="x", route="local", reasons=(), policy="synconf", confidence=-0.1,
        threshold=-0.5, syntax=None, local_model="m", remote_model=None, local_completion="x",
    )  # fmt: skip
    led.decision("a", rec)
    led.decision("b", rec, "next-edit")
    led.event("accepted", "b")
    decisions, accepted, _ = read(tmp_path / "l.jsonl")
    s = summarize(decisions, accepted)
    assert s["completions"] == 1 and s["accepted"]["local"] == 0
    assert s["next_edits"] == {"suggestions": 1, "routes": {"local": 1}, "accepted": 1}
    assert "next edits        1  (local 1, remote 0, none 0); accepted 1" in format_summary(
        s, tmp_path / "l.jsonl"
    )
