"""The `synconfroute` command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

from . import __version__, config


def _load(args: argparse.Namespace) -> config.Loaded:
    return config.load(Path(args.config) if args.config else None)


def cmd_doctor(args: argparse.Namespace) -> int:
    from . import doctor

    loaded = _load(args)
    results = asyncio.run(doctor.run(loaded))
    print(doctor.as_json(loaded, results) if args.json else doctor.format_text(loaded, results))
    return 0 if all(r.usable for r in results) else 1


def cmd_settings(args: argparse.Namespace) -> int:
    if args.markdown:
        print(config.settings_markdown(), end="")
        return 0
    loaded = _load(args)
    for issue in loaded.issues:
        print(f"warning: {issue}", file=sys.stderr)
    print(json.dumps(attrs.asdict(loaded.settings), indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="synconfroute",
        description=(
            "Private AI code completion: a local fill-in-the-middle model first, a large "
            "model only when the small one is unsure or writes broken code."
        ),
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--config", metavar="PATH", help="settings file (default: platform config dir)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser("doctor", help="check each configured tier and say how to fix problems")
    d.add_argument("--json", action="store_true", help="machine-readable report")
    d.set_defaults(func=cmd_doctor)

    s = sub.add_parser("settings", help="print the effective settings (or their reference)")
    s.add_argument("--markdown", action="store_true", help="print the settings reference")
    s.set_defaults(func=cmd_settings)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # stdout belongs to the LSP stream under `serve`: logs always go to stderr.
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
