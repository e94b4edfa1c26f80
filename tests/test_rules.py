"""The routing rules are resolved once, in one place: the threshold the router uses is the
one `synconfroute.status` reports, the hover card shows and adaptive mode starts from.

The bug these tests reproduce (issue 19): with the embedded model and a per-model
threshold for its GGUF stem, the router used `thresholds[stem]`, `status` reported
`routing.threshold`, and adaptive mode started from `threshold_for(local.model)` (the
Ollama tag, not the model actually loaded).
"""

from __future__ import annotations

from pathlib import Path

from synconfroute.server.learning.ledger import Ledger
from synconfroute.server.session.session import Session
from synconfroute.server.settings import config

STEM = "SmolLM2-135M-test"  # the embedded backend's model name is its GGUF file's stem


def _session(tmp_path: Path, *, adaptive: bool) -> Session:
    settings, issues = config.merge(
        config.Settings(),
        {
            # The embedded tier, as `auto` picks it where no Ollama answers. The file
            # need not exist: the rules are known before any generation (which fails).
            "local": {"backend": "embedded", "model_path": str(tmp_path / f"{STEM}.gguf")},
            "routing": {"threshold": -0.5, "thresholds": {STEM: -1.2}, "adaptive": adaptive},
            "editor": {"debounce_ms": 0},
        },
    )
    assert not issues
    assert settings.local.model != STEM  # the configured Ollama tag is not the model used
    loaded = config.Loaded(settings, (), tmp_path / "c.toml", False)
    return Session(loaded, ledger=Ledger(tmp_path / "ledger.jsonl"))


async def _one_completion_threshold(s: Session) -> float:
    uri = "file:///p/a.py"
    s.open(uri, "def f(x):\n    return \n", "python")
    done = await s.complete(uri, 1, 11, invoked=True)
    assert done is not None
    return done.decision.threshold


async def test_status_reports_the_threshold_the_router_uses(tmp_path: Path) -> None:
    s = _session(tmp_path, adaptive=False)
    try:
        used = await _one_completion_threshold(s)
        assert used == -1.2  # the per-model threshold of the model actually loaded
        assert s.status().threshold == used
    finally:
        await s.shutdown()


async def test_adaptive_mode_starts_from_the_per_model_threshold(tmp_path: Path) -> None:
    s = _session(tmp_path, adaptive=True)
    try:
        used = await _one_completion_threshold(s)
        assert used == -1.2  # no move yet: adaptive mode starts where the router would be
        st = s.status()
        assert st.threshold == used
        assert st.adaptive is not None and st.adaptive["start"] == -1.2
    finally:
        await s.shutdown()
