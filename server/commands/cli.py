"""The `synconfroute` command line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import ipaddress
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import attrs

from synconfroute.clients.connection import shown_headers
from synconfroute.clients.urls import install_log_masking, mask_urls_in

from .. import __version__
from ..settings import config
from ..vocab.errors import UsageError, UserError


def _load(args: argparse.Namespace) -> config.Loaded:
    return config.load(Path(args.config) if args.config else None)


def cmd_doctor(args: argparse.Namespace) -> int:
    from . import doctor

    loaded = _load(args)
    results = asyncio.run(doctor.run(loaded))
    print(doctor.as_json(loaded, results) if args.json else doctor.format_text(loaded, results))
    return 0 if all(r.usable for r in results) else 1


def cmd_check_build(args: argparse.Namespace) -> int:
    """Run a tiny generation on the installed llama.cpp build, in its worker process."""
    from synconfroute.clients.embedded import EmbeddedBackend

    from . import doctor

    async def probe() -> int:
        backend = EmbeddedBackend(args.model)
        try:
            report = await doctor.probe(backend)
        finally:
            await backend.aclose()
        errors = [p for p in report.problems if p.severity == "error"]
        if report.usable and not errors:
            first = f"{(report.first_token_s or 0) * 1000:.0f} ms"
            print(f"llama.cpp build ok: {report.version}, first token {first}, {report.sample!r}")
            return 0
        for p in errors or report.problems:
            print(f"error: {p.message}", file=sys.stderr)
            if p.fix:
                print(f"  fix: {p.fix}", file=sys.stderr)
        return 1

    return asyncio.run(probe())


def cmd_settings(args: argparse.Namespace) -> int:
    if args.markdown:
        print(config.settings_markdown(), end="")
        return 0
    loaded = _load(args)
    for issue in loaded.issues:
        print(mask_urls_in(f"warning: {issue}"), file=sys.stderr)
    if args.json:
        data = attrs.asdict(loaded.settings)
        data["remote"]["headers"] = shown_headers(data["remote"]["headers"])
        print(mask_urls_in(json.dumps(data, indent=2)))
    else:
        from .settings_view import format_text

        print(mask_urls_in(format_text(loaded)))
    return 0


def _parse_target(spec: str) -> tuple[Path, int, int]:
    """PATH:LINE:COL (1-based, as editors show them) -> (path, line0, col0)."""
    parts = spec.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        raise UsageError(f"expected PATH:LINE:COL with 1-based numbers, got {spec!r}")
    line, col = int(parts[1]), int(parts[2])
    if line < 1 or col < 1:
        raise UsageError(f"line and column start at 1, got {line}:{col}")
    return Path(parts[0]), line - 1, col - 1


def cmd_complete(args: argparse.Namespace) -> int:
    from . import complete

    path, line, col = _parse_target(args.target)
    loaded = _load(args)
    for issue in loaded.issues:
        print(f"warning: {issue}", file=sys.stderr)
    ctx = complete.prepare(loaded.settings, path, line, col)
    rec = asyncio.run(complete.run(loaded.settings, ctx))
    if args.json:
        print(json.dumps(rec.to_json(), indent=2))
    else:
        print(complete.format_text(rec))
    return 0 if rec.route != "none" else 1


def _log_to_file(level: int) -> Path | None:
    """Add a rotating log file under the platform log dir; None if it cannot be written."""
    import logging.handlers

    import platformdirs

    folder = Path(platformdirs.user_log_dir(config.APP))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(
            folder / "server.log",
            maxBytes=2_000_000,
            backupCount=2,
            encoding="utf-8",
            errors="backslashreplace",
        )
    except OSError as exc:
        logging.getLogger(__name__).warning("no log file: %s", exc)
        return None
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    return folder / "server.log"


def _seconds(value: str) -> tuple[float, ...]:
    try:
        out = tuple(float(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds like 30,300, got {value!r}") from None
    if not out or any(not 0 < v < 86400 for v in out):
        raise argparse.ArgumentTypeError(f"expected seconds between 0 and 86400, got {value!r}")
    return out


def tcp_refusal(host: str, expose: bool, token_env: str | None) -> str | None:
    """Why `serve --tcp` must not listen on `host` (None: it may). The first TCP client is
    treated as the user: beyond this machine, only with an explicit flag and a token."""
    if token_env and not os.environ.get(token_env, "").strip():
        return f"--tcp-token-env {token_env}: that environment variable is empty or unset"
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False  # a host name may resolve to any interface
    if loopback:
        return None
    if not expose:
        return (
            f"--tcp {host}: not a loopback address. Anyone who reaches it could drive the "
            "server as you and receive your workspace's code; pass --tcp-expose-to-network "
            "and --tcp-token-env NAME if that is what you want"
        )
    if not token_env:
        return "--tcp-expose-to-network needs --tcp-token-env NAME (a token the client sends)"
    return None


def cmd_serve(args: argparse.Namespace) -> int:
    from ..protocol.lsp import create_server
    from ..protocol.serve import serve_stdio, serve_tcp

    loaded = _load(args)
    level = (
        logging.DEBUG
        if args.verbose
        else getattr(logging, loaded.settings.editor.log_level.upper(), logging.INFO)
    )
    logging.getLogger().setLevel(level)
    for h in logging.getLogger().handlers:
        h.setLevel(level)
    # pygls logs whole messages (source code included) at INFO: only in debug mode.
    logging.getLogger("pygls").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    # httpx logs a line per model request at INFO ("HTTP Request: POST ..."), to stderr
    # and the log file while the completion waits for it: only in debug mode too (our
    # backends log their failures themselves).
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    path = _log_to_file(level)
    logging.getLogger(__name__).info("synconfroute %s serving; log file %s", __version__, path)
    from ..learning.ledger import default_path

    server = create_server(
        loaded, Path(args.ledger) if args.ledger else default_path(), args.retention_after
    )
    install_log_masking()  # now on every handler: stderr, the log file, the editor's log
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        if not port.isdigit():
            print(f"synconfroute serve: --tcp wants HOST:PORT, got {args.tcp!r}", file=sys.stderr)
            return 2
        host = host.strip("[]") or "127.0.0.1"
        refusal = tcp_refusal(host, args.tcp_expose_to_network, args.tcp_token_env)
        if refusal:
            print(f"synconfroute serve: {refusal}", file=sys.stderr)
            return 2
        if args.tcp_token_env:
            server.tcp_token = os.environ[args.tcp_token_env].strip()
        _end_process(serve_tcp(server, host, int(port)))
    _end_process(serve_stdio(server))


def _end_process(code: int) -> NoReturn:
    """After `exit`: flush the logs and the LSP stream, then end the process at once.
    Interpreter shutdown joins every thread pool's threads, and a thread may be blocked
    for good (a read in the kernel, a native call); `exit` must end the server anyway."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def cmd_eval(args: argparse.Namespace) -> int:
    from ..evaluation.cli import run_eval_command

    return run_eval_command(args, _load(args))


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ..evaluation.cli import run_calibrate_command

    return run_calibrate_command(args, _load(args))


def cmd_stats(args: argparse.Namespace) -> int:
    from ..learning import ledger, stats

    path = Path(args.ledger) if args.ledger else ledger.default_path()
    if not path.is_file():
        print(
            f"synconfroute stats: no ledger at {path} (no completions served yet?)", file=sys.stderr
        )
        return 1
    decisions, moves, bad = ledger.load(path)
    summary = stats.compute(decisions, moves, unreadable=bad)
    if bad:
        print(f"warning: skipped {bad} unreadable lines in {path}", file=sys.stderr)
    if args.plot:
        try:
            out = stats.plot(summary, Path(args.plot))
        except ImportError as exc:
            print(f"synconfroute stats: {exc}", file=sys.stderr)
            return 1
        print(f"wrote {out}", file=sys.stderr)
    print(json.dumps(summary, indent=2) if args.json else stats.format_text(summary, path))
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

    cb = sub.add_parser(
        "check-build",
        help="check that the installed llama.cpp build runs on this CPU (setup runs this)",
        description=(
            "Loads the embedded model in its worker process and runs a tiny generation. "
            "A crash (a build made for another CPU) is reported with the rebuild command."
        ),
    )
    cb.add_argument("--model", metavar="GGUF", help="model file (default: the bundled SmolLM2)")
    cb.set_defaults(func=cmd_check_build)

    c = sub.add_parser(
        "complete",
        help="complete a file at a position once, and show the route taken",
        description=(
            "Runs one completion through the pipeline (local model, syntax gate, "
            "escalation) at PATH:LINE:COL (1-based) and prints it with the decision. "
            "Exit code 1 when no completion was produced."
        ),
    )
    c.add_argument("target", metavar="PATH:LINE:COL")
    c.add_argument("--json", action="store_true", help="print the decision record as JSON")
    c.set_defaults(func=cmd_complete)

    sv = sub.add_parser(
        "serve",
        help="run the language server (stdio; editors start this)",
        description="Language server over stdio (the default) or TCP for debugging.",
    )
    sv.add_argument("--stdio", action="store_true", help="use stdio (the default)")
    sv.add_argument(
        "--tcp",
        metavar="HOST:PORT",
        help="listen on TCP instead of stdio (loopback only, unless --tcp-expose-to-network)",
    )
    sv.add_argument(
        "--tcp-expose-to-network",
        action="store_true",
        help="allow a non-loopback --tcp address: whoever connects first drives the server "
        "as you (its settings are yours) and receives your workspace's code in prompts; "
        "needs --tcp-token-env",
    )
    sv.add_argument(
        "--tcp-token-env",
        metavar="NAME",
        help="environment variable holding a token the TCP client must send as "
        "initializationOptions.tcpToken",
    )
    sv.add_argument("--ledger", metavar="PATH", help="ledger file (default: platform state dir)")
    sv.add_argument(
        "--retention-after",
        type=_seconds,
        metavar="S,S",
        help="when to measure how much of an accepted completion is left, in seconds "
        "after the acceptance (default 30,300)",
    )
    sv.set_defaults(func=cmd_serve)

    from ..evaluation.cli import add_calibrate_arguments, add_eval_arguments

    ev = sub.add_parser(
        "eval",
        help="measure routing on benchmarks or your own tasks (pass@1, escalation, gate)",
        description=(
            "Generates each task's local and remote completion once (resumable), runs the "
            "tests in a sandbox, and replays every routing policy and threshold over the "
            "records. See docs/evaluation.md."
        ),
    )
    add_eval_arguments(ev)
    ev.set_defaults(func=cmd_eval)

    ca = sub.add_parser(
        "calibrate",
        help="choose routing.threshold from an eval run and write it to the settings file",
        description=(
            "Picks the threshold for an escalation budget (--budget) or the best pass@1 "
            "(--best) from the records of `synconfroute eval`, and writes it into the "
            "settings file (--config, else the default), keeping the rest of the file."
        ),
    )
    add_calibrate_arguments(ca)
    ca.set_defaults(func=cmd_calibrate)

    st = sub.add_parser(
        "stats",
        help="sum the ledger: how much stayed local, what was accepted and kept",
        description=(
            "Per route, language and confidence bucket: acceptance rate (of the items "
            "shown), retention (share of an accepted completion still there after 30 s "
            "and 5 min), latency p50/p95, bytes sent."
        ),
    )
    st.add_argument("--ledger", metavar="PATH", help="ledger file (default: platform state dir)")
    st.add_argument("--json", action="store_true", help="machine-readable summary")
    st.add_argument(
        "--plot",
        metavar="PNG",
        help="also draw acceptance against confidence, local and remote (needs matplotlib)",
    )
    st.set_defaults(func=cmd_stats)

    s = sub.add_parser("settings", help="print the effective settings (or their reference)")
    s.add_argument("--markdown", action="store_true", help="print the settings reference")
    s.add_argument("--json", action="store_true", help="the effective settings as JSON")
    s.set_defaults(func=cmd_settings)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # stdout belongs to the LSP stream under `serve`: logs always go to stderr. A log line
    # may quote what a client sent (a lone surrogate in a URI): escaped, never lost.
    if isinstance(sys.stderr, io.TextIOWrapper):
        sys.stderr.reconfigure(errors="backslashreplace")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    install_log_masking()  # URLs' userinfo and query secrets, httpx's request line too
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
    except UserError as exc:  # the one place: every command's user-facing errors
        print(f"synconfroute {args.command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `synconfroute stats | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the exit flush does not raise again
        return 0
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
