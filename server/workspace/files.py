"""The one way the server reads a file of the workspace: regular files only, bounded.

A workspace holds whatever a path can name. `open()` on a FIFO waits for a writer,
forever; a character device such as /dev/zero never ends a `read()`; a socket cannot
be opened at all. Every read of a workspace file (the index build, watched-file
events, a document closed with unsaved edits, .gitignore files) goes through
`read_regular`: `os.stat` first (a special file is never opened), `O_NONBLOCK` (a FIFO
swapped in after the stat does not block the open), `fstat` on what was opened (it
must still be a regular file, the same one), and a size cap on the bytes read (the
file may grow meanwhile). Callers count `NotRegular` to show it (`status`).
"""

from __future__ import annotations

import os
import stat

__all__ = [
    "GITIGNORE_MAX_BYTES",
    "NotRegular",
    "TooLarge",
    "kind_of",
    "read_regular",
    "read_regular_text",
]

GITIGNORE_MAX_BYTES = 8 * 2**20  # git reads any size; past this one is not read

# Reads in pieces: a file that grows while it is read stops at the cap, not in MemoryError.
_CHUNK = 1 << 16
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
_FLAGS |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


class NotRegular(OSError):
    """The path names a FIFO, a device, a socket or a folder: skipped, never read."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(f"{path} is a {kind}, not a regular file: skipped")
        self.path = path
        self.kind = kind


class TooLarge(OSError):
    """The file holds more than the cap allows."""

    def __init__(self, path: str, size: int, cap: int) -> None:
        super().__init__(f"{path} has {size} bytes or more, over the limit of {cap}")
        self.path = path
        self.size = size
        self.cap = cap


def kind_of(mode: int) -> str:
    """What a stat mode names, in words ("regular file", "FIFO", ...)."""
    for test, kind in (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISDIR, "folder"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return kind
    return "special file"


def read_regular(path: str, max_bytes: int) -> bytes:
    """The bytes of the regular file at `path` (links followed), at most `max_bytes`.

    Raises NotRegular for anything but a regular file (it is not opened, or opened
    without blocking and closed unread), TooLarge past `max_bytes`, OSError when it
    cannot be read (gone, no permission, a path no file can have)."""
    try:
        before = os.stat(path)
    except ValueError as exc:  # a NUL, or a lone surrogate git never wrote: no such file
        raise FileNotFoundError(f"{path!a} cannot name a file: {exc}") from exc
    if not stat.S_ISREG(before.st_mode):
        raise NotRegular(path, kind_of(before.st_mode))
    if before.st_size > max_bytes:
        raise TooLarge(path, before.st_size, max_bytes)
    fd = os.open(path, _FLAGS)
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode):  # swapped for a FIFO between stat and open
            raise NotRegular(path, kind_of(now.st_mode))
        if now.st_size > max_bytes:  # another file swapped in, or this one grew
            raise TooLarge(path, now.st_size, max_bytes)
        chunks: list[bytes] = []
        got = 0
        while got <= max_bytes:
            piece = os.read(fd, min(_CHUNK, max_bytes + 1 - got))
            if not piece:
                break
            chunks.append(piece)
            got += len(piece)
        if got > max_bytes:
            raise TooLarge(path, got, max_bytes)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_regular_text(path: str, max_bytes: int) -> str:
    """`read_regular`, decoded as UTF-8 (a bad byte becomes U+FFFD, never a surrogate)."""
    return read_regular(path, max_bytes).decode("utf-8", "replace")
