"""Retention of accepted completions: the inserted region followed through later edits."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from synconfroute.server.learning.ledger import Ledger, load
from synconfroute.server.learning.retention import (
    Region,
    Retention,
    edit_distance,
    minimal_edit,
    retained_ratio,
)
from synconfroute.server.session.session import Edit, Session
from synconfroute.server.settings import config


def apply(text: str, region: Region, start: int, end: int, new: str) -> str:
    region.edit(start, end, len(new))
    return text[:start] + new + text[end:]


DOC = "x = 1\nvalue = compute(a, b)\ny = 2\n"
INS = "compute(a, b)"
AT = DOC.index(INS)


@pytest.mark.parametrize(
    ("start", "end", "new", "expect"),
    [
        (0, 0, "# head\n", INS),  # insertion before: shifts
        (0, 5, "", INS),  # deletion before
        (AT, AT, "z", INS),  # insertion at its start: outside
        (AT + len(INS), AT + len(INS), "  # ok", INS),  # typing after it: outside
        (len(DOC), len(DOC), "more\n", INS),  # far after
        (AT + 8, AT + 8, "x, ", "compute(x, a, b)"),  # inside
        (AT + 8, AT + 12, "c", "compute(c)"),  # replacement inside
        (AT - 8, AT + 7, "", "(a, b)"),  # deletion over its start
        (AT + 7, AT + 20, ")\n", "compute)\n"),  # replacement over its end
        (0, len(DOC), "", ""),  # deletion spanning it: nothing left
        (AT - 2, AT + len(INS) + 1, "zz", "zz"),  # replaced whole
    ],
)
def test_region_through_one_edit(start: int, end: int, new: str, expect: str) -> None:
    r = Region(AT, AT + len(INS))
    text = apply(DOC, r, start, end, new)
    assert text[r.start : r.end] == expect


def test_region_through_a_sequence_of_edits() -> None:
    r = Region(AT, AT + len(INS))
    text = DOC
    text = apply(text, r, 0, 0, "import os\n")  # before
    i = text.index("(a")
    text = apply(text, r, i + 1, i + 2, "alpha")  # rename an argument inside
    text = apply(text, r, len(text), len(text), "z = 3\n")  # after
    assert text[r.start : r.end] == "compute(alpha, b)"
    assert retained_ratio(INS, text[r.start : r.end]) == pytest.approx(1 - 4 / len(INS))


def textbook(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def test_edit_distance_matches_the_textbook_table() -> None:
    rnd = random.Random(7)
    for _ in range(2000):
        a = "".join(rnd.choice("ab c\n") for _ in range(rnd.randint(0, 15)))
        b = "".join(rnd.choice("ab c\n") for _ in range(rnd.randint(0, 15)))
        assert edit_distance(a, b) == textbook(a, b), (a, b)
    long = "".join(rnd.choice("abcdefgh(),.=") for _ in range(200))  # > 64 bits
    other = long[:90] + "XYZ" + long[95:] + "tail"
    assert edit_distance(long, other) == textbook(long, other)


def test_edit_distance_and_ratio() -> None:
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("", "abc") == 3
    assert edit_distance("abc", "abc") == 0
    assert edit_distance("a" * 50, "", limit=10) == 10
    assert retained_ratio("abcd", "abcd") == 1.0
    assert retained_ratio("abcd", "") == 0.0
    assert retained_ratio("abcd", "x" * 100) == 0.0  # never negative


def test_minimal_edit_of_a_whole_text_sync() -> None:
    old, new = "abc\ndef\nghi\n", "abc\ndXf\nghi\n"
    assert minimal_edit(old, new) == (5, 6, "X")
    assert minimal_edit("aaa", "aaaa") == (3, 3, "a")
    assert minimal_edit("same", "same") == (4, 4, "")


def test_tracker_measures_once_per_delay_and_on_close() -> None:
    now = [0.0]
    got: list[tuple[str, float, float, int, bool]] = []
    text = ["prefix " + INS + " suffix"]
    tr = Retention(lambda *a: got.append(a), delays=(30, 300), clock=lambda: now[0])
    tr.track("doc", "c1", 7, INS, lambda: text[0])  # no event loop: checks run on due()
    now[0] = 31.0
    tr.due()
    tr.due()  # a check runs once
    assert got == [("c1", 30, 1.0, len(INS), False)]
    tr.edit("doc", 7, 7 + len(INS), 0)  # the user deleted it all
    text[0] = "prefix  suffix"
    tr.close("doc")  # closed before the 300 s check: the last value seen
    assert got[1] == ("c1", 300, 0.0, len(INS), True)
    assert tr.timers() == 0


async def test_timers_fire_and_shutdown_leaves_none() -> None:
    got: list[tuple[str, float, float, int, bool]] = []
    tr = Retention(lambda *a: got.append(a), delays=(0.05, 30))
    tr.track("doc", "c1", 0, "abc", lambda: "abX")
    await asyncio.sleep(0.2)
    assert got == [("c1", 0.05, pytest.approx(2 / 3, abs=1e-3), 3, False)]
    assert tr.timers() == 1
    tr.shutdown()
    assert tr.timers() == 0 and got[-1][1] == 30 and got[-1][4] is True
    loop = asyncio.get_running_loop()
    assert not [h for h in getattr(loop, "_scheduled", []) if not h.cancelled()]


def session_with_offer(tmp_path: Path) -> tuple[Session, str]:
    """A Session (plain calls) with an accepted completion at line 1."""
    loaded = config.Loaded(config.Settings(), (), tmp_path / "c.toml", False)
    s = Session(loaded, ledger=Ledger(tmp_path / "l.jsonl"), retention_delays=(30, 300))
    uri = "file:///p/a.py"
    s.open(uri, "def f(a, b):\n    return \n", "python")
    st = s.document(uri)
    assert st is not None
    from synconfroute.server.vocab.record import RouteDecision

    s.decision_log.decisions["c1"] = RouteDecision(
        completion="a + b",
        route="local",
        reasons=("confident-and-valid",),
        policy="synconf",
        confidence=-0.1,
        threshold=-0.5,
        syntax=None,
        local_model="m",
        remote_model=None,
    )
    st.offer = ("c1", (1, 11), "a + b")
    return s, uri


def test_session_tracks_the_accepted_text_through_edits(tmp_path: Path) -> None:
    s, uri = session_with_offer(tmp_path)
    s.change(uri, [Edit("a + b", (1, 11), (1, 11))])  # the editor inserts the item
    assert s.decision_log.accepted == {"c1"}
    s.change(uri, [Edit("# top\n", (0, 0), (0, 0))])  # a line before
    s.change(uri, [Edit("c", (2, 15), (2, 16))])  # b -> c inside it
    st = s.document(uri)
    assert st is not None
    # A whole-document sync (some clients send only those) keeps the region too.
    s.change(uri, [Edit(st.text.text.replace("a + c", "a + c * 2"))])
    s.close(uri)
    _, _, bad = load(tmp_path / "l.jsonl")
    decisions = [
        line for line in (tmp_path / "l.jsonl").read_text().splitlines() if "retained" in line
    ]
    assert bad == 0 and len(decisions) == 2
    # "a + b" -> "a + c * 2": 1 substitution + 4 insertions over 5 characters.
    assert all('"ratio":0.0' in d or '"ratio":0' in d for d in decisions)
    assert s.decision_log.retention.timers() == 0


def test_session_retention_ratio_after_a_small_edit(tmp_path: Path) -> None:
    s, uri = session_with_offer(tmp_path)
    s.change(uri, [Edit("    return a + b", (1, 0), (1, 11))])  # item applied with the line
    s.change(uri, [Edit("c", (1, 15), (1, 16))])
    s.close(uri)
    lines = (tmp_path / "l.jsonl").read_text().splitlines()
    ratios = [line for line in lines if '"retained"' in line]
    assert len(ratios) == 2 and all('"ratio":0.8' in r for r in ratios)
