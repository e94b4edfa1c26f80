"""Numbers the settings reader must refuse (issue 20): NaN, infinities, values past a
bound, per-model thresholds above 0, and values nested deeper than any setting is.
Each is reported naming its key, and the default stays; nothing raises."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from synconfroute.server.settings import config
from synconfroute.server.settings.config import Settings, load, merge

ROOT = Path(__file__).resolve().parent.parent

NUMBERS = [
    ("routing", "threshold"),
    ("completion", "deadline_ms"),
    ("local", "timeout"),
    ("remote", "timeout"),
    ("local", "first_token_ms"),
    ("local", "total_ms"),
    ("routing", "syntax_budget_ms"),
    ("editor", "debounce_ms"),
]


def _issue_for(issues: list[config.SettingsIssue], key: str) -> config.SettingsIssue:
    found = [i for i in issues if i.key == key]
    assert found, f"no issue names {key}: {[str(i) for i in issues]}"
    return found[0]


@pytest.mark.parametrize("section,key", NUMBERS)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_numbers_are_refused_in_the_file(
    tmp_path: Path, section: str, key: str, value: str
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f"[{section}]\n{key} = {value}\n")
    loaded = load(path, environ={})
    got = getattr(getattr(loaded.settings, section), key)
    assert got == getattr(getattr(Settings(), section), key)
    assert "finite" in _issue_for(list(loaded.issues), f"{section}.{key}").message


@pytest.mark.parametrize("section,key", NUMBERS)
def test_non_finite_numbers_are_refused_from_the_editor_and_environment(
    section: str, key: str
) -> None:
    merged, issues = merge(Settings(), {section: {key: float("nan")}})
    assert not math.isnan(getattr(getattr(merged, section), key))
    _issue_for(issues, f"{section}.{key}")
    env = {f"SYNCONFROUTE_{section.upper()}_{key.upper()}": "nan"}
    loaded = load(Path("/nonexistent/c.toml"), environ=env)
    assert not math.isnan(getattr(getattr(loaded.settings, section), key))
    _issue_for(list(loaded.issues), f"{section}.{key}")


@pytest.mark.parametrize(
    "section,key,value",
    [
        ("local", "timeout", 1e300),
        ("remote", "timeout", 1e12),
        ("completion", "deadline_ms", 1e18),
        ("local", "num_ctx", 10**30),
        ("completion", "context_lines", 10**400),
        ("routing", "confidence_tokens", 10**9),
    ],
)
def test_extreme_numbers_are_refused(section: str, key: str, value: Any) -> None:
    merged, issues = merge(Settings(), {section: {key: value}})
    assert getattr(getattr(merged, section), key) == getattr(getattr(Settings(), section), key)
    _issue_for(issues, f"{section}.{key}")


@pytest.mark.parametrize("value", [5.0, 0.1, float("nan"), float("inf"), "x", True, [1]])
def test_per_model_thresholds_must_be_finite_and_at_most_zero(value: Any) -> None:
    merged, issues = merge(Settings(), {"routing": {"thresholds": {"m": value}}})
    assert merged.routing.thresholds == {}
    assert "routing.thresholds" in str(_issue_for(issues, "routing.thresholds"))
    ok, none = merge(Settings(), {"routing": {"thresholds": {"m": -0.3, "n": 0}}})
    assert ok.routing.thresholds == {"m": -0.3, "n": 0.0} and not none


def _deep(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


@pytest.mark.parametrize("depth", [50, 5000])
def test_deeply_nested_values_give_a_message_not_a_traceback(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f"[privacy]\nnever_send = {_deep(depth)}\n[routing]\nthreshold = -0.3\n")
    loaded = load(path, environ={})  # does not raise
    assert loaded.issues
    env = {**os.environ, "SYNCONFROUTE_CONFIG": str(path), "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-m", "synconfroute", "settings"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    assert "privacy.never_send" in run.stderr or "(file)" in run.stderr, run.stderr


def test_deeply_nested_editor_values_are_reported() -> None:
    value: Any = 1
    for _ in range(5000):
        value = [value]
    merged, issues = merge(Settings(), {"privacy": {"never_send": value}})
    assert merged.privacy.never_send == []
    assert len(str(_issue_for(issues, "privacy.never_send"))) < 400
