"""Write the server's settings (server/settings/config.py) into the extension's package.json.

    python editors/vscode/scripts/sync_settings.py           # update package.json
    python editors/vscode/scripts/sync_settings.py --check   # exit 1 if it is out of date

The server is the one place settings are defined; the extension contributes the same keys
(`synconfroute.<section>.<key>`) with their types, defaults and documentation, plus its
own: the server program, its virtual environment and the protocol trace.
"""

from __future__ import annotations

import argparse
import json
import sys
import typing
from pathlib import Path
from typing import Any, Literal

import attrs

HERE = Path(__file__).resolve().parent
PACKAGE_JSON = HERE.parent / "package.json"
sys.path.insert(0, str(HERE.parents[2]))

from synconfroute.server.settings import config  # noqa: E402  (needs the repository on sys.path)

SECTION = "synconfroute"

EXTENSION_PROPERTIES: dict[str, dict[str, Any]] = {
    f"{SECTION}.server.path": {
        "type": "string",
        "default": "",
        "scope": "machine-overridable",
        "order": 0,
        "markdownDescription": (
            "The `synconfroute` program (e.g. `~/synconfroute/.venv/bin/synconfroute`). "
            "Empty: look in `#synconfroute.server.venv#`, then on PATH."
        ),
    },
    f"{SECTION}.server.venv": {
        "type": "string",
        "default": "",
        "scope": "machine-overridable",
        "order": 1,
        "markdownDescription": (
            "A virtual environment where synconfroute is installed (e.g. "
            "`~/synconfroute/.venv`); its `bin/synconfroute` is started."
        ),
    },
    f"{SECTION}.trace.server": {
        "type": "string",
        "enum": ["off", "messages", "verbose"],
        "default": "off",
        "order": 2,
        "description": "Log the LSP messages between VS Code and the server (Output panel).",
    },
}

COMMANDS = [
    {"command": "synconfroute.client.showStatus", "title": "Show Status"},
    {"command": "synconfroute.client.toggleLocalOnly", "title": "Toggle Local-Only"},
    {"command": "synconfroute.client.restartServer", "title": "Restart Server"},
    {"command": "synconfroute.client.suggestNextEdit", "title": "Suggest Next Edit"},
]

SETTINGS_NOTE = (
    " *Only the settings you change here are sent; the others come from the server's "
    "settings file (`~/.config/synconfroute/config.toml`) or its defaults.*"
)


def _scope_note(key: str) -> str:
    if key in config.TIGHTEN_ONLY_KEYS:
        return " *A workspace may only set this towards sending less off the machine.*"
    return " *User settings only: a workspace may not set it.*"


def _schema(hint: Any, field: attrs.Attribute[Any]) -> dict[str, Any]:
    if typing.get_origin(hint) is Literal:
        return {"type": "string", "enum": list(typing.get_args(hint))}
    if typing.get_origin(hint) is list:
        return {"type": "array", "items": {"type": "string"}}
    if typing.get_origin(hint) is dict:
        value = "string" if typing.get_args(hint)[1] is str else "number"
        return {"type": "object", "additionalProperties": {"type": value}}
    kind = {bool: "boolean", int: "integer", float: "number", str: "string"}[hint]
    out: dict[str, Any] = {"type": kind}
    lo, hi = field.metadata.get("lo"), field.metadata.get("hi")
    if lo is not None:
        out["minimum"] = lo
    if hi is not None:
        out["maximum"] = hi
    return out


def server_properties() -> dict[str, dict[str, Any]]:
    """One contributed property per server setting, in the server's order."""
    defaults = config.Settings()
    props: dict[str, dict[str, Any]] = {}
    order = len(EXTENSION_PROPERTIES)
    for name, section in config.SECTIONS.items():
        hints = typing.get_type_hints(section)
        for field in attrs.fields(section):
            prop = _schema(hints[field.name], field)
            prop["default"] = getattr(getattr(defaults, name), field.name)
            key = f"{name}.{field.name}"
            # The server's one allow-list: a workspace's .vscode/settings.json may set
            # only the tighten-only keys (the server refuses the rest from it anyway).
            prop["scope"] = "resource" if key in config.TIGHTEN_ONLY_KEYS else "machine"
            prop["order"] = order
            env = config.ENV_PREFIX + f"{name}_{field.name}".upper()
            prop["markdownDescription"] = (
                f"{field.metadata['doc']} (Environment: `{env}`.){_scope_note(key)}{SETTINGS_NOTE}"
            )
            props[f"{SECTION}.{name}.{field.name}"] = prop
            order += 1
    return props


def updated(package: dict[str, Any]) -> dict[str, Any]:
    new = json.loads(json.dumps(package))
    contributes = new.setdefault("contributes", {})
    contributes["commands"] = [dict(c, category="SynConfRoute") for c in COMMANDS]
    contributes["configuration"] = {
        "title": "SynConfRoute",
        "properties": {**EXTENSION_PROPERTIES, **server_properties()},
    }
    return new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="fail if package.json is stale")
    args = parser.parse_args(argv)
    package = json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))
    new = updated(package)
    if args.check:
        if new != package:
            print(
                f"{PACKAGE_JSON} does not match server/settings/config.py: run "
                "python editors/vscode/scripts/sync_settings.py",
                file=sys.stderr,
            )
            return 1
        return 0
    PACKAGE_JSON.write_text(json.dumps(new, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
