"""Fuzzing the two readers of files anyone can edit (issue 20), with Hypothesis: the
ledger reader (and `stats`, `calibrate --from-ledger` over what it returns) and the
settings reader (file, environment, editor and workspace scopes). Whatever the input,
no exception escapes; what is read back is typed and finite."""

from __future__ import annotations

import contextlib
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synconfroute.server.evaluation.calibrate import CalibrationError
from synconfroute.server.evaluation.from_ledger import choose
from synconfroute.server.learning import ledger, stats
from synconfroute.server.settings import config

FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)

# Ledger lines: the keys the server writes, with any values; plus raw text and deep nesting.
LEDGER_KEYS = [
    "t", "id", "route", "reasons", "policy", "confidence", "threshold", "syntax",
    "local_model", "language", "latency_ms", "bytes_sent", "context_bytes", "cache_hit",
    "early", "local_text", "chars", "adaptive", "from", "start", "why", "shown",
    "accepted", "dismissed", "retained", "after_s", "ratio", "closed",
]  # fmt: skip
plausible = st.one_of(
    st.sampled_from(["local", "remote", "none", "r:c1", "synconf", "valid"]),
    st.floats(min_value=-3, max_value=0.5),
    values,
)
ledger_objects = st.dictionaries(st.sampled_from(LEDGER_KEYS), plausible, max_size=10)
ledger_lines = st.one_of(
    ledger_objects.map(lambda d: json.dumps(d)),  # NaN and Infinity included, as Python writes
    values.map(lambda v: json.dumps(v)),
    st.text(max_size=40).map(lambda t: t.replace("\n", " ")),  # one line each
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 3000).map(
        lambda n: '{"route":"local","id":"x","reasons":' + "[" * n + "]" * n + "}"
    ),
)
GOOD = [
    json.dumps(
        {
            "id": f"g:{i}",
            "route": "local" if i % 2 else "remote",
            "policy": "synconf",
            "confidence": -0.1 * (i % 9),
            "latency_ms": {"total": 5.0},
        }
    )
    for i in range(6)
]
GOOD += [json.dumps({"shown": f"g:{i}"}) for i in range(6)] + [json.dumps({"accepted": "g:1"})]


@FUZZ
@given(st.lists(ledger_lines, max_size=12), st.randoms(use_true_random=False))
def test_the_ledger_reader_never_raises(lines: list[str], rnd: Any) -> None:
    mixed = GOOD + lines
    rnd.shuffle(mixed)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "l.jsonl"
        path.write_text("\n".join(mixed) + "\n", encoding="utf-8", errors="surrogatepass")
        decisions, moves, bad = ledger.load(path)
        read, accepted, _ = ledger.read(path)
    assert bad <= len(lines) and len(decisions) >= 6
    for d in decisions:
        assert d["route"] in ("local", "remote", "none") and isinstance(d["id"], str)
        c = d["confidence"]
        assert c is None or (isinstance(c, float) and math.isfinite(c))
        assert all(isinstance(v, float) and math.isfinite(v) for v in d["latency_ms"].values())
    assert all(math.isfinite(m["adaptive"]) for m in moves)
    summary = stats.compute(decisions, moves, unreadable=bad)
    json.dumps(summary, allow_nan=False)
    stats.format_text(summary, path)
    ledger.summarize(read, accepted)
    with contextlib.suppress(CalibrationError):  # too few decisions: said in words
        choose(decisions, best=True, min_sample=1)


SECTION_NAMES = [*config.SECTIONS, "nope"]
FIELD_NAMES = sorted({f.name for s in config.SECTIONS.values() for f in attrs.fields(s)})
overrides = st.dictionaries(
    st.sampled_from(SECTION_NAMES),
    st.one_of(values, st.dictionaries(st.sampled_from([*FIELD_NAMES, "x"]), values, max_size=5)),
    max_size=4,
)


def _assert_sane(s: config.Settings) -> None:
    for name, section_type in config.SECTIONS.items():
        section = getattr(s, name)
        for f in attrs.fields(section_type):
            v = getattr(section, f.name)
            nums = list(v.values()) if isinstance(v, dict) else [v]
            for x in nums:
                if isinstance(x, float):
                    assert math.isfinite(x), f"{name}.{f.name} = {x}"
                lo, hi = f.metadata.get("lo"), f.metadata.get("hi")
                if isinstance(x, int | float) and not isinstance(x, bool):
                    assert lo is None or x >= lo, f"{name}.{f.name} = {x}"
                    assert hi is None or x <= hi, f"{name}.{f.name} = {x}"


@FUZZ
@given(overrides, overrides)
def test_the_settings_reader_never_raises(user: dict[str, Any], workspace: dict[str, Any]) -> None:
    merged, issues = config.merge(config.Settings(), user)
    _assert_sane(merged)
    ws, ws_issues = config.merge_workspace(merged, workspace)
    _assert_sane(ws)
    for issue in [*issues, *ws_issues]:
        assert len(str(issue)) < 1000


toml_values = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "1e400", "-0.0", "true", '"x"', "[1, [2]]", "{a = 1}"]),
    st.integers(-(10**25), 10**25).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
)


@FUZZ
@given(
    st.lists(
        st.tuples(st.sampled_from(SECTION_NAMES), st.sampled_from(FIELD_NAMES), toml_values),
        max_size=6,
    ),
    st.dictionaries(
        st.sampled_from(
            [f"SYNCONFROUTE_{s.upper()}_{k.upper()}" for s in SECTION_NAMES for k in FIELD_NAMES]
        ),
        st.text(max_size=12).filter(lambda t: "\x00" not in t),
        max_size=4,
    ),
)
def test_the_settings_file_and_environment_never_raise(
    entries: list[tuple[str, str, str]], environ: dict[str, str]
) -> None:
    text = "".join(f"[{s}]\n{k} = {v}\n" for s, k, v in entries)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.toml"
        path.write_text(text, encoding="utf-8")
        loaded = config.load(path, environ=environ)
    _assert_sane(loaded.settings)


# -- workspace files of every kind, document text with lone surrogates (issue 36) ---------

# What a workspace entry may be: a regular file (any bytes: bad UTF-8, NULs, a BOM), a
# FIFO, a character device (/dev/zero's numbers as root, else a link to /dev/zero), a
# link to a FIFO, a link loop, a folder with a source file's name, an empty file.
_KINDS = ["regular", "fifo", "device", "link-to-fifo", "loop", "folder", "empty"]
_entries = st.lists(
    st.tuples(
        st.sampled_from(_KINDS),
        st.binary(max_size=300),
        st.sampled_from(["", "sub/", "sub/deeper/"]),
    ),
    min_size=1,
    max_size=12,
)


def _make(root: Path, i: int, kind: str, data: bytes, folder: str) -> str | None:
    """Create entry `i`; its path if it is a regular file the index must hold."""
    import os

    where = root / folder
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"f{i}.py"
    if kind == "regular":
        path.write_bytes(data)
        return str(path)
    if kind == "empty":
        path.write_bytes(b"")
        return str(path)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        if os.geteuid() == 0:
            os.mknod(path, 0o644 | 0o020000, os.makedev(1, 5))
        else:
            path.symlink_to("/dev/zero")
    elif kind == "link-to-fifo":
        os.mkfifo(where / f"f{i}.fifo")
        path.symlink_to(where / f"f{i}.fifo")  # inside the workspace: followed
    elif kind == "loop":
        path.symlink_to(path)
    else:
        path.mkdir()
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(_entries)
def test_the_index_reads_only_regular_files_and_never_blocks(
    entries: list[tuple[str, bytes, str]],
) -> None:
    import os
    import threading

    from synconfroute.server.workspace.workspace_index import WorkspaceIndex

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        regular = {p for i, e in enumerate(entries) if (p := _make(root, i, *e)) is not None}
        special = sum(1 for kind, _, _ in entries if kind in ("fifo", "device", "link-to-fifo"))
        if os.geteuid() != 0:
            special -= sum(1 for kind, _, f in entries if kind == "device")  # a link out
        index = WorkspaceIndex(max_file_bytes=200)
        build = threading.Thread(target=index.build, args=([tmp],), daemon=True)
        build.start()
        build.join(60)
        assert not build.is_alive(), "the build blocked"
        fits = {p for p in regular if os.path.getsize(p) <= 200}
        assert set(index.files) == fits
        assert index.figures()["special"] == special, (sorted(index.special), entries)
        for path in [str(p) for p in root.rglob("*.py")]:  # as watched-file events
            th = threading.Thread(target=index.update_from_disk, args=(path,), daemon=True)
            th.start()
            th.join(30)
            assert not th.is_alive(), f"update_from_disk({path}) blocked"
        assert set(index.files) == fits


_texts = st.lists(
    st.one_of(
        st.text(max_size=8),
        st.sampled_from(["\ud800", "\udfff", "\udc80x", "😀", "\r\n", "\n", "\r", "\u2028"]),
    ),
    max_size=10,
).map("".join)
_edits = st.lists(
    st.tuples(
        st.integers(-3, 2**31),
        st.integers(-3, 2**31),
        st.integers(-3, 6),
        st.integers(-3, 40),
        _texts,
        st.booleans(),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_texts, _edits, st.sampled_from(["utf-16", "utf-8", "utf-32"]))
def test_document_text_never_holds_a_lone_surrogate(
    text: str, edits: list[tuple[int, int, int, int, str, bool]], encoding: Any
) -> None:
    """Whatever didOpen and didChange bring (surrogates, extreme positions), the server's
    copy encodes as UTF-8 and its tree's bytes are that encoding."""
    from synconfroute.server.workspace.documents import DocumentStore, Edit

    store = DocumentStore()
    store.encoding = encoding
    store.open("file:///w/a.py", text, "python")
    for l1, c1, l2, c2, new, whole in edits:
        edit = Edit(new) if whole else Edit(new, (l1, c1), (l1 + l2, c2))
        changed = store.change("file:///w/a.py", [edit])
        assert changed is not None
        doc = changed.doc
        assert doc.syntax.data == doc.text.text.encode("utf-8")  # strict: no surrogate
    st_ = store.document("file:///w/a.py")
    assert st_ is not None
    st_.text.text.encode("utf-8")
