"""A progress line with an ETA on stderr (stdout keeps the results clean).

On a terminal the line is redrawn in place a few times a second; otherwise (nohup, CI
logs) a full line is printed every `every_s` seconds and at the end.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Literal, TextIO


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    def __init__(
        self,
        label: str,
        total: int,
        *,
        stream: TextIO | None = None,
        every_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        unit: Literal["items", "bytes"] = "items",
    ) -> None:
        self.label = label
        self.unit = unit
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._every = 0.25 if self._tty else every_s
        self._clock = clock
        self._start = clock()
        self._last = -1e9
        self._shown = -1  # `done` when the line was last written
        self._lock = threading.Lock()
        self.extra = ""  # e.g. "12 passed"

    def line(self) -> str:
        elapsed = self._clock() - self._start
        pct = 100.0 * self.done / self.total if self.total else 100.0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.done and self.done < self.total:
            eta = "ETA " + _clock((self.total - self.done) / rate)
        elif self.done >= self.total:
            eta = "done"
        else:
            eta = "ETA ?"
        extra = f"  {self.extra}" if self.extra else ""
        if self.unit == "bytes":
            amount = f"{self.done / 1e6:.1f}/{self.total / 1e6:.1f} MB"
            speed = f"{rate / 1e6:.2f} MB/s"
        else:
            amount, speed = f"{self.done}/{self.total}", f"{rate:.2f}/s"
        return (
            f"{self.label}: {amount} ({pct:.0f}%)  {speed}  elapsed {_clock(elapsed)}  {eta}{extra}"
        )

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            now = self._clock()
            if now - self._last >= self._every or self.done >= self.total:
                self._last = now
                self._show()

    def _show(self) -> None:
        self._shown = self.done
        if self._tty:
            self.stream.write("\r\x1b[2K" + self.line())
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def finish(self) -> None:
        with self._lock:
            if self.total == 0:
                return
            if self._shown != self.done:
                self._show()
            if self._tty:
                self.stream.write("\n")
                self.stream.flush()
