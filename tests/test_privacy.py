"""Privacy rules as pure functions: never_send patterns (gitignore-style, relative to the
workspace folders) and the workspace scope that may only tighten what leaves the machine."""

from __future__ import annotations

import pytest

from synconfroute.server.settings import config
from synconfroute.server.workspace.privacy import never_send

ROOT = "/home/me/proj"


@pytest.mark.parametrize(
    ("pattern", "path", "blocked"),
    [
        # Anchored to the workspace folder, as users write them in .gitignore.
        ("secrets/**", f"{ROOT}/secrets/key.py", True),
        ("secrets/**", f"{ROOT}/secrets/deep/er/key.py", True),
        ("secrets/**", f"{ROOT}/src/secrets/key.py", False),
        ("/secrets/", f"{ROOT}/secrets/key.py", True),
        ("secrets/*", f"{ROOT}/secrets/a/b.py", True),  # a matched folder covers its content
        ("config/prod.py", f"{ROOT}/config/prod.py", True),
        ("config/prod.py", f"{ROOT}/x/config/prod.py", False),
        # Unanchored: any depth.
        ("secrets/", f"{ROOT}/a/secrets/key.py", True),
        ("secrets/", f"{ROOT}/a/secrets", False),  # folders only: a file named secrets
        ("secrets", f"{ROOT}/a/secrets", True),
        ("*.env", f"{ROOT}/deploy/prod.env", True),
        ("*.env", f"{ROOT}/deploy/prod.env.py", False),
        # The pattern that always worked keeps working.
        ("**/secrets/**", f"{ROOT}/secrets/key.py", True),
        ("**/secrets/**", f"{ROOT}/a/b/secrets/key.py", True),
        ("**/secrets/**", f"{ROOT}/a/secretsx/key.py", False),
        ("a/**/b.py", f"{ROOT}/a/b.py", True),
        ("a/**/b.py", f"{ROOT}/a/x/y/b.py", True),
        # `*` and `?` stay inside one path component; classes work.
        ("src/*.py", f"{ROOT}/src/sub/x.py", False),
        ("src/?.py", f"{ROOT}/src/x.py", True),
        ("key[0-9].pem", f"{ROOT}/k/key7.pem", True),
        ("key[!0-9].pem", f"{ROOT}/k/key7.pem", False),
        # No negation: a pattern never lets code out.
        ("!secrets/**", f"{ROOT}/secrets/key.py", False),
        ("", f"{ROOT}/secrets/key.py", False),
    ],
)
def test_never_send_patterns_inside_the_workspace(pattern: str, path: str, blocked: bool) -> None:
    assert never_send([pattern], path, [ROOT]) is blocked


def test_files_outside_any_folder_match_their_absolute_path() -> None:
    assert never_send(["/etc/secrets/**"], "/etc/secrets/a.py", [ROOT])
    assert never_send(["**/secrets/**"], "/opt/secrets/a.py", [ROOT])
    assert never_send(["*.env"], "/opt/x/.env", [])
    assert not never_send(["secrets/**"], "/opt/secrets/a.py", [ROOT])


def test_several_workspace_folders() -> None:
    roots = ["/w/api", "/w/web", "/w"]
    assert never_send(["secrets/**"], "/w/web/secrets/k.py", roots)
    assert never_send(["web/secrets/**"], "/w/web/secrets/k.py", roots)  # relative to /w
    assert not never_send(["secrets/**"], "/w/web/src/k.py", roots)
    assert not never_send(["secrets/**"], "/w/webx/secrets/k.py", ["/w/web"])


# -- workspace scope ------------------------------------------------------------


def user_settings(**sections: dict[str, object]) -> config.Settings:
    base = {
        "remote": {"url": "http://cluster:8000/v1", "model": "big"},
        "privacy": {"local_only": True, "never_send": ["secrets/**"]},
    }
    for k, v in sections.items():
        base.setdefault(k, {}).update(v)
    s, issues = config.merge(config.Settings(), base)
    assert not issues
    return s


def refused_keys(issues: list[config.SettingsIssue]) -> list[str]:
    return [i.key for i in issues if i.message.startswith("refused:")]


def test_workspace_cannot_widen_what_leaves_the_machine() -> None:
    user = user_settings()
    ws, issues = config.merge_workspace(
        user,
        {
            "privacy": {"local_only": False, "never_send": []},
            "remote": {"url": "http://other:1/v1", "api_key_env": "ANY_ENV_VAR"},
            "routing": {"policy": "remote"},
            "local": {"url": "http://evil:11434"},
        },
    )
    assert ws.privacy.local_only is True
    assert ws.privacy.never_send == ["secrets/**"]
    assert ws.remote.url == "http://cluster:8000/v1"
    assert ws.remote.api_key_env == user.remote.api_key_env
    assert ws.routing.policy == "synconf" and ws.local.url == user.local.url
    assert sorted(refused_keys(issues)) == [
        "local.url",
        "privacy.local_only",
        "remote.api_key_env",
        "remote.url",
        "routing.policy",
    ]
    text = " ".join(str(i) for i in issues)
    assert "workspace settings: privacy.local_only: refused" in text
    assert "http://other" not in text  # values are not echoed (a URL may carry a password)


def test_workspace_may_tighten() -> None:
    user = user_settings(
        privacy={"local_only": False},
        remote={"urls": ["http://backup:8000/v1"]},
        routing={"threshold": -0.5, "thresholds": {"m": -0.4}},
    )
    ws, issues = config.merge_workspace(
        user,
        {
            "privacy": {"local_only": True, "never_send": ["*.pem"]},
            "routing": {"policy": "syntax", "threshold": -1.0, "thresholds": {"m": -0.9}},
            "completion": {"context_lines": 20},
        },
    )
    assert not issues, issues
    assert ws.privacy.local_only is True
    assert ws.privacy.never_send == ["secrets/**", "*.pem"]  # added to, never replaced
    assert (ws.routing.policy, ws.routing.threshold) == ("syntax", -1.0)
    assert ws.completion.context_lines == 20
    # Where code goes is user-only now, even a narrower list of the user's own servers.
    _, issues = config.merge_workspace(user, {"remote": {"urls": [], "api_key_env": ""}})
    assert {i.key for i in issues} == {"remote.urls", "remote.api_key_env"}


@pytest.mark.parametrize(
    ("user", "workspace", "key"),
    [
        (
            {"routing": {"policy": "confidence"}},
            {"routing": {"policy": "syntax"}},
            "routing.policy",
        ),
        ({"routing": {"policy": "local"}}, {"routing": {"policy": "synconf"}}, "routing.policy"),
        ({}, {"routing": {"threshold": -0.1}}, "routing.threshold"),
        # Dropping the user's lower per-model threshold raises it back to `threshold`.
        (
            {"routing": {"thresholds": {"m": -2.0}}},
            {"routing": {"thresholds": {}}},
            "routing.thresholds",
        ),
        ({}, {"routing": {"thresholds": {"m": 0.0}}}, "routing.thresholds"),
        (
            {"routing": {"missing_logprobs": "trust"}},
            {"routing": {"missing_logprobs": "escalate"}},
            "routing.missing_logprobs",
        ),
        ({}, {"completion": {"context_lines": 5000}}, "completion.context_lines"),
        ({"remote": {"backend": "none"}}, {"remote": {"backend": "openai"}}, "remote.backend"),
        ({"remote": {"model": ""}}, {"remote": {"model": "big"}}, "remote.model"),
        ({}, {"remote": {"urls": ["http://other/v1"]}}, "remote.urls"),
    ],
)
def test_each_widening_is_refused_by_name(
    user: dict[str, dict[str, object]], workspace: dict[str, object], key: str
) -> None:
    u = user_settings(privacy={"local_only": False}, **user)
    ws, issues = config.merge_workspace(u, workspace)
    assert refused_keys(issues) == [key]
    section, name = key.split(".")
    assert getattr(getattr(ws, section), name) == getattr(getattr(u, section), name)


def test_same_values_as_the_user_are_no_widening() -> None:
    # VS Code answers workspace/configuration with the user's values too.
    user = user_settings()
    same = {
        "remote": {"url": user.remote.url, "api_key_env": user.remote.api_key_env},
        "privacy": {"local_only": True, "never_send": ["secrets/**"]},
        "routing": {"policy": "synconf"},
    }
    ws, issues = config.merge_workspace(user, same)
    assert not issues and ws == user
