"""Settings: precedence, validation messages that name the key, documentation."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from synconfroute.server.settings import config


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "config.toml"
    p.write_text(text, encoding="utf-8")
    return p


def test_defaults_without_file(tmp_path: Path) -> None:
    loaded = config.load(tmp_path / "missing.toml", environ={})
    s = loaded.settings
    assert not loaded.config_found and loaded.issues == ()
    assert s.local.backend == "auto" and s.routing.policy == "synconf"
    assert s.routing.threshold == -0.5 and s.routing.confidence_tokens == 3
    assert s.routing.syntax == "tree-sitter"
    assert not s.remote.configured  # no remote tier unless configured


def test_issue_example_file_is_accepted(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        """
[local]
backend = "ollama"            # "ollama" | "openai" | "embedded"
url = "http://127.0.0.1:11434"
model = "qwen2.5-coder:3b"
[remote]
backend = "openai"            # vLLM's OpenAI-compatible server
url = "http://gpu-cluster:8000/v1"   # or urls = [...] for failover
model = "Qwen/Qwen2.5-Coder-32B-Instruct"
api_key_env = "SYNCONFROUTE_REMOTE_API_KEY"
[routing]
policy = "synconf"
threshold = -0.5
confidence_tokens = 3
syntax = "tree-sitter"        # "tree-sitter" | "compiler" | "confirm"
""",
    )
    loaded = config.load(p, environ={})
    assert loaded.issues == ()
    s = loaded.settings
    assert s.local.backend == "ollama"
    assert s.remote.configured and s.remote.all_urls == ["http://gpu-cluster:8000/v1"]


def test_precedence_file_env_overrides(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "[routing]\nthreshold = -0.7\nconfidence_tokens = 5\n[privacy]\nlocal_only = false\n",
    )
    env = {
        "SYNCONFROUTE_ROUTING_THRESHOLD": "-0.9",
        "SYNCONFROUTE_PRIVACY_LOCAL_ONLY": "yes",
        "SYNCONFROUTE_REMOTE_URLS": "http://a/v1, http://b/v1",
        "SYNCONFROUTE_REMOTE_API_KEY": "secret-not-a-setting",
    }
    loaded = config.load(p, environ=env, overrides={"routing": {"threshold": -0.3}})
    s = loaded.settings
    assert loaded.issues == ()
    assert s.routing.threshold == -0.3  # LSP beats env beats file
    assert s.routing.confidence_tokens == 5  # file beats default
    assert s.privacy.local_only is True
    assert s.remote.urls == ["http://a/v1", "http://b/v1"]


@pytest.mark.parametrize(
    ("toml", "key", "fragment"),
    [
        ('[routing]\nthreshold = "high"\n', "routing.threshold", "expected a number"),
        ("[routing]\nthreshold = 0.5\n", "routing.threshold", "at most 0.0"),
        ('[routing]\npolicy = "smart"\n', "routing.policy", "expected one of 'synconf'"),
        ("[routing]\nconfidence_tokens = 2.5\n", "routing.confidence_tokens", "whole number"),
        ("[routing]\nconfidence_tokens = 0\n", "routing.confidence_tokens", "at least 1"),
        ('[privacy]\nlocal_only = "yes"\n', "privacy.local_only", "true or false"),
        ("[privacy]\nnever_send = [1]\n", "privacy.never_send", "list of strings"),
        ('[local]\nmodle = "x"\n', "local.modle", "did you mean local.model?"),
        ('[rooting]\npolicy = "local"\n', "rooting", "did you mean [routing]?"),
        ('[routing.thresholds]\n"m" = "x"\n', "routing.thresholds", "table of numbers"),
        ("[routing]\nthreshold = nan\n", "routing.threshold", "finite number"),
        ("[completion]\ndeadline_ms = inf\n", "completion.deadline_ms", "finite number"),
    ],
)
def test_bad_values_name_the_key_and_keep_defaults(
    tmp_path: Path, toml: str, key: str, fragment: str
) -> None:
    loaded = config.load(write(tmp_path, toml), environ={})
    assert len(loaded.issues) == 1
    issue = loaded.issues[0]
    assert issue.key == key and fragment in issue.message, issue
    assert str(tmp_path) in str(issue)
    defaults = config.load(tmp_path / "none.toml", environ={}).settings
    # A privacy-affecting value that cannot be read fails closed (issue 27 item 5).
    closes = config.privacy_affecting(key)
    assert issue.fail_closed is closes and ("local-only" in issue.message) is closes
    assert loaded.settings == config.with_values(defaults, {"privacy": {"local_only": closes}})


def test_unreadable_toml_falls_back(tmp_path: Path) -> None:
    loaded = config.load(write(tmp_path, "[routing\nthreshold = "), environ={})
    assert loaded.issues and "cannot read" in loaded.issues[0].message
    assert loaded.settings.routing.threshold == -0.5
    assert loaded.settings.privacy.local_only and loaded.issues[0].fail_closed


def test_per_model_threshold(tmp_path: Path) -> None:
    p = write(
        tmp_path, '[routing]\nthreshold = -0.5\n[routing.thresholds]\n"qwen2.5-coder:3b" = -0.25\n'
    )
    r = config.load(p, environ={}).settings.routing
    assert r.threshold_for("qwen2.5-coder:3b") == -0.25
    assert r.threshold_for("other") == -0.5


def test_config_path_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = write(tmp_path, '[local]\nbackend = "embedded"\n')
    monkeypatch.setenv("SYNCONFROUTE_CONFIG", str(p))
    loaded = config.load()
    assert loaded.config_path == p and loaded.settings.local.backend == "embedded"


def test_merge_reports_and_keeps_base() -> None:
    base = config.Settings()
    merged, issues = config.merge(base, {"routing": {"threshold": "x", "policy": "local"}})
    assert merged.routing.policy == "local" and merged.routing.threshold == -0.5
    assert base.routing.policy == "synconf"  # the base is not mutated
    assert [i.key for i in issues] == ["routing.threshold"]


def test_settings_are_frozen_and_holding_them_back_builds_new_values() -> None:
    s = config.Settings()
    for section in (s, s.local, s.remote, s.routing, s.privacy, s.completion, s.editor):
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(section, attrs.fields(type(section))[0].name, None)
    # A workspace's widening is undone in a new value; the one it was judged on stays.
    user = config.with_values(s, {"routing": {"threshold": -1.0}})
    ws = config.with_values(user, {"routing": {"threshold": -0.2}, "local": {"url": "http://x"}})
    held, refused = config.tighten_only(user, ws)
    assert (held.routing.threshold, held.local.url) == (-1.0, user.local.url)
    assert (ws.routing.threshold, ws.local.url) == (-0.2, "http://x")
    assert sorted(i.key for i in refused) == ["local.url", "routing.threshold"]


def test_every_setting_is_documented() -> None:
    rows = list(config.documented_fields())
    assert len(rows) > 20
    for key, _default, _type, doc in rows:
        assert len(doc) > 10, key
    md = config.settings_markdown()
    assert "`routing.threshold`" in md and "SYNCONFROUTE_ROUTING_THRESHOLD" in md


def test_docs_settings_md_is_current() -> None:
    doc = Path(__file__).parent.parent / "docs" / "settings.md"
    assert doc.read_text(encoding="utf-8") == config.settings_markdown(), (
        "docs/settings.md is stale: run `synconfroute settings --markdown > docs/settings.md`"
    )


def test_remote_priority_ranks_background_work_below_the_editor() -> None:
    assert config.RemoteSettings().request_priority() is None  # 0: nothing sent
    assert config.RemoteSettings().request_priority(background=True) is None
    remote = config.RemoteSettings(priority=-5)
    assert remote.request_priority() == -5
    background = remote.request_priority(background=True)
    assert background is not None and background > -5  # lower is served first
