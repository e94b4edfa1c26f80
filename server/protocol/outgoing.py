"""What makes an outgoing message safe to send: no traceback reaches the editor (the
server log keeps it whole)."""

from __future__ import annotations

import re
from typing import Any

from lsprotocol import types as t

# Where a traceback starts in a text: its header (plain, or an exception group's, whose
# lines start with "+" or "|"), a frame line, or the words that chain two of them.
_TRACEBACK = re.compile(
    r"(?:(?:Exception Group )?Traceback )?\(most recent call last\)"
    r'|^[ \t|+]*File "[^"\n]*", line \d+'
    r"|During handling of the above exception"
    r"|The above exception was the direct cause",
    re.MULTILINE,
)
DETAILS = " (the server log has the details)"


def without_traceback(text: str) -> str:
    """`text` cut before anything that looks like a traceback (the server log keeps it
    whole): the one rule for every message the editor receives."""
    m = _TRACEBACK.search(text)
    if m is None:
        return text
    head = text[: m.start()].rstrip(" \t\r\n:+|")
    return (head or "synconfroute: internal error") + DETAILS


# Messages whose text the editor shows or logs: (method, the params' text field).
TEXT_MESSAGES = {
    t.WINDOW_LOG_MESSAGE: "message",
    t.WINDOW_SHOW_MESSAGE: "message",
    t.WINDOW_SHOW_MESSAGE_REQUEST: "message",
    t.LOG_TRACE: "message",
}


def _scrub_field(holder: Any, name: str) -> None:
    """Cut a traceback out of `holder[name]` (a dict) or `holder.name` (an object)."""
    if isinstance(holder, dict):
        value = holder.get(name)
        if isinstance(value, str) and (clean := without_traceback(value)) != value:
            holder[name] = clean
    elif holder is not None:
        value = getattr(holder, name, None)
        if isinstance(value, str) and (clean := without_traceback(value)) != value:
            setattr(holder, name, clean)


def _get(holder: Any, name: str) -> Any:
    return holder.get(name) if isinstance(holder, dict) else getattr(holder, name, None)


def scrub_outgoing(data: Any) -> None:
    """Make one outgoing message (a dict or an lsprotocol object) free of tracebacks, in
    place: the text of log, show-message and trace messages, an error's message, and an
    error's data (dropped whole when any of it looks like a traceback)."""
    if type(data) is dict and data.get("error") is None:  # our responses, notifications
        method = data.get("method")
        if type(method) is not str or method not in TEXT_MESSAGES:
            return
    method, params, error = (_get(data, k) for k in ("method", "params", "error"))
    field = TEXT_MESSAGES.get(method) if isinstance(method, str) else None
    if field is not None:
        _scrub_field(params, field)
        if method == t.LOG_TRACE:
            _scrub_field(params, "verbose")
    if error is None:
        return
    _scrub_field(error, "message")
    details = error.get("data") if isinstance(error, dict) else getattr(error, "data", None)
    text = details if isinstance(details, str) else repr(details)
    if details is not None and _TRACEBACK.search(text):
        if isinstance(error, dict):
            error.pop("data", None)
        else:
            error.data = None
