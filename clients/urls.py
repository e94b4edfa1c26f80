"""URLs as we print and log them: user names, passwords and query secrets masked.

A settings URL never carries credentials (`remote.url` with userinfo is refused: the
key belongs in the variable `remote.api_key_env` names), but a URL can still carry a
secret in its query (`?api_key=...`, a signed `sig=`), and a URL from elsewhere (a
server's error page, httpx's "HTTP Request: POST <url>" log line) is not ours to check.
Every URL we print or log passes `mask_url`, or `mask_urls_in` for a whole text.
"""

from __future__ import annotations

import logging
import re
import urllib.parse

MASK = "***"

# Query parameter names whose values are credentials (matched anywhere in the name).
_SECRET_PARAM = re.compile(r"(?i)(key|token|secret|passw|pwd|auth|sig|credential|session|code)")
# A URL inside free text: a scheme, then everything up to whitespace or a quote/bracket.
_URL_IN_TEXT = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")


def has_userinfo(url: str) -> bool:
    """Whether `url` names a user or password (`https://user:pass@host/...`)."""
    authority = url.strip().split("://", 1)[-1]
    return "@" in re.split(r"[/?#]", authority, maxsplit=1)[0]


def mask_url(url: str) -> str:
    """`url` with its userinfo and the values of secret-looking query parameters (and
    any fragment's) replaced by ***; anything unparsable is masked after the host."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        # e.g. a bad IPv6 literal: keep the scheme only.
        scheme = url.split("://", 1)[0] if "://" in url else ""
        return f"{scheme}://{MASK}" if scheme else MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = _mask_query(parts.query)
    fragment = _mask_query(parts.fragment) if "=" in parts.fragment else parts.fragment
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _mask_query(query: str) -> str:
    if not query:
        return query
    out = []
    for item in query.split("&"):
        name, eq, value = item.partition("=")
        if eq and value and _SECRET_PARAM.search(urllib.parse.unquote(name)):
            value = MASK
        out.append(f"{name}{eq}{value}")
    return "&".join(out)


def mask_urls_in(text: str) -> str:
    """`text` with every URL in it masked (`mask_url`)."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: mask_url(m.group(0)), text)


class MaskUrls(logging.Filter):
    """A logging filter that masks the URLs of a record's message (arguments merged
    first: httpx passes the URL as an argument). Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is logging's to report, not ours
            return True
        masked = mask_urls_in(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


_FILTER = MaskUrls()


def install_log_masking() -> None:
    """Mask URLs in httpx's own log lines (at the source: "HTTP Request: POST <url>")
    and in every record reaching the root logger's handlers present now."""
    for name in ("httpx", "httpcore"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    for handler in logging.getLogger().handlers:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)


__all__ = ["MASK", "MaskUrls", "has_userinfo", "install_log_masking", "mask_url", "mask_urls_in"]
