"""`DocumentStore.recent`: the documents edited last, kept in edit order as edits come,
so a request no longer sorts every open document (a server with 300 open did, per
request). Checked against the plain sort, by `-edited` with ties in the order opened,
over seeded random opens, reopens, edits and closes, with a clock that often repeats
a reading (ties: a coarse clock, as Windows' is); and `holds_path` against the set of
open paths."""

from __future__ import annotations

import itertools
import random

import pytest

from synconfroute.server.workspace import documents
from synconfroute.server.workspace.documents import DocumentStore, Edit


def test_recent_is_the_sorted_order(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(35)
    ticks = itertools.count(1)
    reading = [1.0]

    def clock() -> float:
        if rng.random() < 0.6:  # often the same reading as the edit before
            reading[0] = float(next(ticks))
        return reading[0]

    monkeypatch.setattr(documents.time, "monotonic", clock)
    store = DocumentStore()
    uris = [f"file:///w/m{i}.py" for i in range(12)] + ["file:///w/same.py"]
    checked = 0
    for _ in range(3000):
        uri = rng.choice(uris)
        op = rng.random()
        if op < 0.25:
            store.open(uri, "x = 1\n", "python")
        elif op < 0.35:
            store.close(uri)
        elif store.document(uri) is not None:
            store.change(uri, [Edit(f"y = {rng.random()}\n")])
        docs = list(store.documents.values())
        exclude = rng.choice([None, *docs])
        for n in (1, 8, len(docs) + 1):
            want = sorted((d for d in docs if d is not exclude), key=lambda d: -d.edited)[:n]
            assert store.recent(n, exclude) == want
            checked += 1
        assert store.edited_count == sum(1 for d in docs if d.edited)
        for uri_ in uris:
            path = uri_.removeprefix("file://")
            assert store.holds_path(path) == any(d.path == path for d in docs)
    print(f"{checked} orders checked")


def test_an_edited_time_set_by_hand_falls_back_to_sorting() -> None:
    store = DocumentStore()
    a = store.open("file:///w/a.py", "a\n", "python")
    b = store.open("file:///w/b.py", "b\n", "python")
    store.change("file:///w/a.py", [Edit("a2\n")])
    store.change("file:///w/b.py", [Edit("b2\n")])
    a.edited = b.edited + 10  # not the store's doing: the edit order no longer says
    assert store.recent(2) == [a, b]
