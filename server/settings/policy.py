"""The organisation's managed policy: a settings file above the user's, binding them.

A platform team installs `/etc/synconfroute/policy.toml` (or points `SYNCONFROUTE_POLICY`
at one). It has the settings file's tables and keys, read before the user's settings:

- a key that sends less when tightened (the workspace's tighten-only keys:
  `privacy.local_only`, `remote.send_context`, `routing.escalation_budget`, the prompt
  sizes, ...) is a ceiling: the user may go further in the same direction, never back;
- `privacy.never_send` and `completion.disabled_in` add up: the user may add, not remove;
- `remote.allowed_urls` says where code may go: a user URL outside it is refused;
- any other key it sets is fixed.

A refused user value is reported naming the policy file, and the policy's value stays. A
policy that cannot be read (bad TOML, an unknown key, a bad value of a privacy key)
keeps everything on this machine until it is fixed, as a user file that does not parse.
"""

from __future__ import annotations

import os
import tomllib
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from synconfroute.clients.urls import mask_url

from . import config

POLICY_ENV = "SYNCONFROUTE_POLICY"
DEFAULT_POLICY = Path("/etc/synconfroute/policy.toml")
# Lists whose entries add up: the policy's stay, the user's are added.
ADDITIVE = ("privacy.never_send", "completion.disabled_in")


@attrs.frozen
class Policy:
    """What the policy file holds: `values` maps each dotted key it sets to its value;
    `settings` is the defaults with those values (the user's starting point)."""

    path: Path
    found: bool
    values: Mapping[str, Any]
    settings: config.Settings
    issues: tuple[config.SettingsIssue, ...] = ()

    @property
    def source(self) -> str:
        return f"the organisation's policy ({self.path})"

    def sets(self, key: str) -> bool:
        return key in self.values


def policy_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    given = env.get(POLICY_ENV, "").strip()
    return Path(given).expanduser() if given else DEFAULT_POLICY


def load_policy(environ: Mapping[str, str] | None = None) -> Policy:
    """The policy at `SYNCONFROUTE_POLICY`, else /etc/synconfroute/policy.toml; none
    there is no policy. An unreadable one fails closed (local-only)."""
    path = policy_path(environ)
    source = f"policy {path}"
    settings = config.Settings()
    issues: list[config.SettingsIssue] = []
    try:
        found = path.is_file()
        data = tomllib.loads(path.read_text(encoding="utf-8")) if found else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        why = f"cannot read: {exc}{config.CLOSED}"
        return Policy(
            path, True, {}, settings, (config.SettingsIssue(source, "(file)", why, True),)
        )
    config._apply(settings, data, source, issues)
    # Any problem in the organisation's file is one the user cannot see around: the
    # policy's intent is unknown, so nothing leaves until it is fixed.
    issues = [attrs.evolve(i, fail_closed=True) if not i.fail_closed else i for i in issues]
    values: dict[str, Any] = {}
    bad = {i.key for i in issues}
    for section, table in data.items():
        if section not in config.SECTIONS or not isinstance(table, Mapping):
            continue
        for key in table:
            dotted = f"{section}.{key}"
            if dotted not in bad and hasattr(getattr(settings, section), key):
                values[dotted] = getattr(getattr(settings, section), key)
    config.fail_closed(settings, issues)
    return Policy(path, found, values, settings, tuple(issues))


def url_allowed(url: str, allowed: list[str]) -> bool:
    """Whether `url` lies under one of `allowed` (same scheme, host and port; a path
    that is the allowed one or below it)."""
    try:
        u = urllib.parse.urlsplit(url.strip())
    except ValueError:
        return False
    for prefix in allowed:
        try:
            p = urllib.parse.urlsplit(prefix.strip())
        except ValueError:
            continue
        if (u.scheme.lower(), u.netloc.lower()) != (p.scheme.lower(), p.netloc.lower()):
            continue
        base = p.path.rstrip("/")
        if not base or u.path.rstrip("/") == base or u.path.startswith(base + "/"):
            return True
    return False


def bind(policy: Policy | None, s: config.Settings) -> list[config.SettingsIssue]:
    """Hold `s` (in place) within the policy, and its URLs within `remote.allowed_urls`;
    each value refused is reported once, naming the policy."""
    issues: list[config.SettingsIssue] = []
    if policy is not None:
        for key, pval in policy.values.items():
            section, name = key.split(".")
            cur = getattr(getattr(s, section), name)
            if key in ADDITIVE:
                setattr(getattr(s, section), name, [*pval, *(v for v in cur if v not in pval)])
                if missing := [v for v in pval if v not in cur]:
                    why = (
                        f"refused: removing {_show(missing)}: {policy.source} sets them and "
                        "they stay (yours are added to them)"
                    )
                    issues.append(config.SettingsIssue("settings", key, why))
                continue
            if cur == pval:
                continue
            rule = config.TIGHTEN_ONLY.get(key)
            tighter = rule is not None and rule[0](pval, cur)
            if tighter and (key != "routing.thresholds" or config._thresholds(policy.settings, s)):
                continue  # tighter than the policy: the user's to choose
            setattr(getattr(s, section), name, pval)
            how = f"it may only be tightened ({rule[1]})" if rule else "it is fixed"
            issues.append(
                config.SettingsIssue(
                    "settings",
                    key,
                    f"refused: {policy.source} sets {key} = {_show(pval)} and {how}",
                )
            )
    allowed = s.remote.allowed_urls
    outside = [u for u in s.remote.all_urls if not url_allowed(u, allowed)] if allowed else []
    if outside:
        who = (
            policy.source
            if policy is not None and policy.sets("remote.allowed_urls")
            else "your remote.allowed_urls"
        )
        base = policy.settings if policy is not None else config.Settings()
        s.remote.url, s.remote.urls = base.remote.url, list(base.remote.urls)
        if any(not url_allowed(u, allowed) for u in s.remote.all_urls):
            s.remote.url, s.remote.urls = "", []  # even the policy's own URL is outside
        shown = ", ".join(mask_url(u) for u in outside)
        issues.append(
            config.SettingsIssue(
                "settings",
                "remote.url",
                f"refused: {shown} is outside remote.allowed_urls set by {who} "
                f"({', '.join(mask_url(a) for a in allowed)}); code goes nowhere else",
            )
        )
    return issues


def _show(value: Any) -> str:
    return config._toml_value(value)


__all__ = [
    "DEFAULT_POLICY",
    "POLICY_ENV",
    "Policy",
    "bind",
    "load_policy",
    "policy_path",
    "url_allowed",
]
