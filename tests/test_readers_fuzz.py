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
