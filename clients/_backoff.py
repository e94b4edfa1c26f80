"""Per-tier backoff: after a failure that will repeat, fail fast instead of asking again.

- 401/403: the key (or a proxy) refuses us; asking again cannot help until the
  settings change, and a settings change builds a new backend object.
- 429/503: the server says when to come back (Retry-After, seconds or an
  HTTP-date); without it, a short exponential backoff.
- connection failures: a short exponential backoff (the server may be restarting).

While a target is held, a request fails at once with the error that started the
hold (`sent_nothing=True`), so the pipeline escalates or answers empty as the
privacy settings allow. The start of a backoff is logged once, and its end
(the target answering again) once: never one line per request.
"""

from __future__ import annotations

import email.utils
import ipaddress
import logging
import math
import time
import urllib.parse
from collections.abc import Callable
from datetime import UTC
from typing import Literal

import attrs

from .errors import BackendError

Kind = Literal["auth", "rate", "connect"]

BASE_S = 0.5  # first hold after a connection failure or a 429/503 without Retry-After
MAX_S = 15.0  # exponential holds stop growing here
# A server on this machine (Ollama, llama.cpp's server) costs nothing to ask again and is
# usually just restarting: come back to it within this long.
LOOPBACK_MAX_S = 2.0
RETRY_AFTER_MAX_S = 3600.0  # a Retry-After beyond an hour is a server bug: do not obey it blindly


def kind_of_status(status: int) -> Kind | None:
    """Which HTTP statuses start a backoff (both HTTP backends share this rule)."""
    if status in (401, 403):
        return "auth"
    if status in (429, 503):
        return "rate"
    return None


def retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date); None if
    absent or unreadable. `now` is the wall clock (time.time()) for the date form."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # HTTP-dates are GMT
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds):
        return None
    return min(max(0.0, seconds), RETRY_AFTER_MAX_S)


@attrs.define
class _Hold:
    until: float  # monotonic; inf: until the settings change
    error: BackendError


class Backoff:
    """Holds per target (a base URL) of one backend object."""

    def __init__(
        self,
        tier: str,
        logger: logging.Logger,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tier = tier
        self._log = logger
        self._clock = clock
        self._holds: dict[str, _Hold] = {}
        self._streak: dict[str, int] = {}  # consecutive failures that grow the hold
        self._announced: set[str] = set()  # targets whose backoff start was logged

    def held(self, target: str) -> BackendError | None:
        """The error to fail with at once if `target` is backing off, else None."""
        hold = self._holds.get(target)
        if hold is None:
            return None
        left = hold.until - self._clock()
        if left <= 0:
            del self._holds[target]  # ask again; `succeeded` logs the end
            return None
        when = (
            "until the settings change" if math.isinf(left) else f"for {math.ceil(left):.0f} s more"
        )
        err = hold.error
        return type(err)(
            f"{err.message} [backing off {when}; no request sent]",
            backend=err.backend,
            hint=err.hint,
            sent_nothing=True,
        )

    def failed(
        self, target: str, error: BackendError, kind: Kind, *, seconds: float | None = None
    ) -> bool:
        """Start (or extend) the hold of `target`; True if this started a backoff."""
        if kind == "auth":
            hold = math.inf
        elif seconds is not None:
            hold = seconds
        else:
            n = self._streak.get(target, 0)
            hold = min(LOOPBACK_MAX_S if _loopback(target) else MAX_S, BASE_S * 2**n)
        if kind != "auth":
            self._streak[target] = self._streak.get(target, 0) + 1
        if hold <= 0:
            return False
        self._holds[target] = _Hold(self._clock() + hold, error)
        if target in self._announced:
            return False
        self._announced.add(target)
        span = "until the settings change" if math.isinf(hold) else f"for {hold:.3g} s"
        self._log.warning(
            "%s: %s; backing off %s: requests fail at once, without being sent",
            self._tier,
            error,
            span,
        )
        return True

    def succeeded(self, target: str) -> None:
        """`target` answered: end its backoff (logged once if one was announced)."""
        self._streak.pop(target, None)
        self._holds.pop(target, None)
        if target in self._announced:
            self._announced.discard(target)
            self._log.warning("%s: %s answers again; backoff over", self._tier, target)


def _loopback(target: str) -> bool:
    host = (urllib.parse.urlsplit(target).hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = ["Backoff", "Kind", "kind_of_status", "retry_after"]
