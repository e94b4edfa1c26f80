"""Every setting a hint or message of the backends names exists (issue 20: the worker's
"did not stop" hint named `local.n_ctx`, which is no setting)."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import attrs

from synconfroute.clients.embedded import death_message
from synconfroute.server.settings.config import SECTIONS

ROOT = Path(__file__).resolve().parent.parent
KEY = re.compile(r"\b(local|remote|routing|privacy|completion|editor)\.([a-z_]+[a-z])\b")


def _known(section: str, name: str) -> bool:
    return name in {f.name for f in attrs.fields(SECTIONS[section])}


def test_the_worker_death_hints_name_real_settings() -> None:
    texts = [*death_message(0, hung=True), *death_message(-signal.SIGABRT)]
    named = [m.groups() for text in texts for m in KEY.finditer(text)]
    assert named, texts
    assert all(_known(s, n) for s, n in named), named


def test_no_client_module_names_a_setting_that_does_not_exist() -> None:
    for path in sorted((ROOT / "clients").glob("*.py")):
        text = path.read_text()
        for m in KEY.finditer(text):
            section, name = m.groups()
            around = text[m.start() - 1 : m.start()] + text[m.end() : m.end() + 1]
            if name in ("py", "toml") or "(" in around[1:] or "." in around:
                continue  # a file name, a module path or a method call, not a setting
            assert _known(section, name), f"{path.name}: {m.group(0)}"
