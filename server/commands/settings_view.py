"""`synconfroute settings`: the effective settings as a person reads them.

Each key with its value and where the value came from (default, the settings file, the
environment), and first what that means for the one question users ask: what leaves
this machine. `--json` keeps the machine-readable dump.
"""

from __future__ import annotations

import os
import textwrap
import tomllib
from collections.abc import Mapping
from typing import Any

import attrs

from synconfroute.clients.connection import shown_headers
from synconfroute.clients.urls import mask_url, mask_urls_in

from ..settings import config
from ..workspace.prompt_split import sharing


def _file_data(loaded: config.Loaded) -> Mapping[str, Any]:
    if not loaded.config_found:
        return {}
    try:
        data = tomllib.loads(loaded.config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return {}  # `load` reported it already
    return data


def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_show(v)}" for k, v in value.items()) + "}"
    return str(value)


def egress_summary(s: config.Settings) -> list[str]:
    """What may leave the machine under these settings, in words."""
    out = []
    if s.privacy.local_only:
        out.append("nothing: privacy.local_only is on")
    elif not s.remote.configured:
        out.append("nothing: no remote tier (set remote.url and remote.model to escalate)")
    else:
        urls = ", ".join(mask_url(u) for u in s.remote.all_urls)
        out.append(
            f"escalated completions go to {urls} (model {s.remote.model}): the code around "
            "the cursor, and nothing from files matching privacy.never_send"
        )
        if s.privacy.never_send:
            out.append("never sent: " + ", ".join(s.privacy.never_send))
    out.append(f"other files' code (cross-file context, recent edits): {sharing(s)}")
    return out


def local_summary(s: config.Settings) -> str:
    """Which local model answers first, in words (backend "auto" decides at start-up)."""
    embedded = f"the GGUF at {s.local.model_path}" if s.local.model_path else "SmolLM2-135M"
    if s.local.backend == "auto":
        return (
            f"Ollama's {s.local.model} at {s.local.url} when it runs there, "
            f"else {embedded} embedded (llama.cpp in a worker process)"
        )
    if s.local.backend == "embedded":
        return f"{embedded} embedded (llama.cpp in a worker process)"
    return f"{s.local.model} at {s.local.url} ({s.local.backend})"


def policy_lines(loaded: config.Loaded) -> list[str]:
    """The organisation's policy, if one is installed, and the keys it sets."""
    pol = loaded.policy
    if pol is None:
        return []
    keys = ", ".join(pol.values) or "nothing"
    return [
        f"policy file    {pol.path} (the organisation's; binds the settings below)",
        _wrap(f"sets: {keys}"),
    ]


def _wrap(text: str) -> str:
    return textwrap.fill(text, width=96, initial_indent="  ", subsequent_indent="    ")


def format_text(loaded: config.Loaded, environ: Mapping[str, str] | None = None) -> str:
    s = loaded.settings
    env = config.env_settings(os.environ if environ is None else environ)
    data = _file_data(loaded)
    defaults = attrs.asdict(config.Settings())
    where = "" if loaded.config_found else " (not found: defaults)"
    lines = [f"settings file  {loaded.config_path}{where}", *policy_lines(loaded), ""]
    lines += ["local tier", _wrap(local_summary(s)), ""]
    lines += ["what leaves this machine", *(_wrap(x) for x in egress_summary(s)), ""]
    values = attrs.asdict(s)
    for section, fields in values.items():
        lines.append(f"[{section}]")
        width = max(len(k) for k in fields)
        for key, value in fields.items():
            if key in env.get(section, {}):
                source = "environment"
            elif isinstance(data.get(section), dict) and key in data[section]:
                source = "file"
            else:
                source = "default" if value == defaults[section][key] else "set"
            pol = loaded.policy
            if pol is not None and pol.sets(f"{section}.{key}"):
                same = value == pol.values[f"{section}.{key}"]
                source = "policy" if same else f"{source}, within the policy"
            shown = _show(
                shown_headers(value) if (section, key) == ("remote", "headers") else value
            )
            lines.append(f"  {key:<{width}}  {shown:<34} {source}")
        lines.append("")
    lines.append("every key: docs/settings.md (synconfroute settings --markdown)")
    return mask_urls_in("\n".join(lines))
