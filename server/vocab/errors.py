"""The server's user-facing errors: one base, caught once in `cli.main`.

A `UserError` is a problem with what the user asked (a file, a position, a dataset, a
run folder, a settings file), worded for them: `cli.main` prints `synconfroute
COMMAND: message` and exits with `exit_code`, no traceback. Backend problems are
`clients.errors.BackendError`s; protocol problems are answered as LSP errors.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix, with its message already written for them."""

    exit_code = 1


class UsageError(UserError):
    """The command line itself is wrong (exit status 2, as argparse uses)."""

    exit_code = 2


__all__ = ["UsageError", "UserError"]
