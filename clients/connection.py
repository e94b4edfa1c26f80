"""How the remote tier's HTTP client connects, as organisations deploy it: TLS trusting
the operating system's store (or a private CA), a client certificate (mutual TLS), a
proxy, and static headers for a gateway.

Everything here happens when the client is built; the URL failover in openai.py knows
none of it. A setup that cannot work (a CA file that is not there, a key that does not
match its certificate, a header naming an unset variable) is a `ConnectionSetupError`
with a message naming the setting: the remote tier then refuses every request with it
(nothing is sent, the completion stays local). A TLS failure is never retried in plain
text. The local tier connects directly (no proxy, no environment): see `local_client`.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import httpx

from .errors import register_secret

log = logging.getLogger(__name__)

# `remote.proxy` value that means: no proxy, whatever the environment says.
DIRECT = "none"
# `remote.headers` values of this form name an environment variable holding the value.
ENV_REF = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
# Header names whose values are credentials even when written in the settings file.
_SECRET_HEADER = re.compile(r"(?i)(auth|key|token|secret|passw|cookie|session)")


class ConnectionSetupError(Exception):
    """The connection settings cannot work; the message names the setting to fix."""


@attrs.frozen
class Connection:
    """The remote tier's connection settings (remote.ca_file, client_cert, client_key,
    proxy, headers), as given."""

    ca_file: str = ""
    client_cert: str = ""
    client_key: str = ""
    proxy: str = ""  # "": HTTPS_PROXY / HTTP_PROXY / NO_PROXY from the environment
    headers: Mapping[str, str] = attrs.field(factory=dict)


def ssl_context(conn: Connection) -> ssl.SSLContext:
    """The OS trust store (truststore), plus `ca_file`; with a client certificate for
    mutual TLS. ConnectionSetupError names the setting whose file is unusable."""
    try:
        import truststore

        ctx: ssl.SSLContext = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    except ImportError:  # pragma: no cover - a dependency; Python's own store then
        ctx = ssl.create_default_context()
    if conn.ca_file:
        path = os.path.expanduser(conn.ca_file)
        try:
            ctx.load_verify_locations(cafile=path)
        except (OSError, ssl.SSLError) as exc:
            raise ConnectionSetupError(
                f"remote.ca_file {conn.ca_file!r} cannot be used ({_reason(exc)}): it must "
                "be a readable file of PEM CA certificates"
            ) from exc
    if conn.client_cert or conn.client_key:
        if not conn.client_cert:
            raise ConnectionSetupError(
                "remote.client_key is set without remote.client_cert: set both for mutual TLS"
            )
        cert = os.path.expanduser(conn.client_cert)
        key = os.path.expanduser(conn.client_key) if conn.client_key else None
        try:
            ctx.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as exc:
            raise ConnectionSetupError(
                f"remote.client_cert {conn.client_cert!r} / remote.client_key "
                f"{conn.client_key!r} cannot be used ({_reason(exc)}): they must be PEM "
                "files, the key unencrypted and matching the certificate"
            ) from exc
    return ctx


def proxy_for(url: str, setting: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The proxy a request to `url` goes through: `remote.proxy` when set ("none":
    none), else the environment's HTTPS_PROXY / HTTP_PROXY unless NO_PROXY covers the
    host. None: directly."""
    if setting.strip().lower() == DIRECT:
        return None
    if setting.strip():
        return setting.strip()
    env = os.environ if environ is None else environ
    proxies = {k.lower(): v for k, v in env.items() if k.lower().endswith("_proxy") and v}
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    chosen = proxies.get(f"{scheme}_proxy") or proxies.get("all_proxy")
    if not chosen:
        return None
    no_proxy = proxies.get("no_proxy", "")
    if no_proxy.strip() == "*":
        return None
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        bare = entry.lstrip(".")
        if host == bare or host.endswith("." + bare) or f"{host}{port}" == entry:
            return None
    return chosen


def check_proxy(proxy: str) -> None:
    """A proxy URL we can use: http:// or https:// (CONNECT tunnels https requests)."""
    scheme = urllib.parse.urlsplit(proxy).scheme.lower()
    if scheme not in ("http", "https"):
        raise ConnectionSetupError(
            f"remote.proxy {proxy!r}: expected an http:// or https:// proxy URL "
            '(or "none" for no proxy)'
        )


def resolve_headers(
    headers: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """`remote.headers` with `${VAR}` values read from the environment. Values read so,
    and values of credential-like headers, are registered as secrets (scrubbed from
    every error text, as the API key is)."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for name, value in headers.items():
        ref = ENV_REF.match(value.strip())
        if ref is not None:
            got = env.get(ref[1], "").strip()
            if not got:
                raise ConnectionSetupError(
                    f"remote.headers {name!r} names the environment variable {ref[1]}, "
                    "which is not set"
                )
            value = got
            register_secret(value)
        elif _SECRET_HEADER.search(name):
            register_secret(value)
        try:
            httpx.Headers({name: value})  # refuses names and values HTTP cannot carry
        except (ValueError, TypeError, UnicodeEncodeError) as exc:
            raise ConnectionSetupError(f"remote.headers {name!r}: not a valid header") from exc
        out[name] = value
    return out


def shown_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """`remote.headers` as we print them: a `${VAR}` reference as written, the value of a
    credential-like header masked."""
    return {
        name: value if ENV_REF.match(value.strip()) or not _SECRET_HEADER.search(name) else "***"
        for name, value in headers.items()
    }


def remote_client_args(
    conn: Connection, urls: Sequence[str], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """`httpx.AsyncClient` keyword arguments for the remote tier: TLS context, headers,
    and one transport per base URL that goes through a proxy. `trust_env` is off: the
    environment's proxies are read here (NO_PROXY included), and .netrc or SSL_CERT_FILE
    must not change what we send or trust behind the settings' back."""
    ctx = ssl_context(conn)
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {}
    for url in urls:
        proxy = proxy_for(url, conn.proxy, environ)
        if proxy is None:
            continue
        check_proxy(proxy)
        parts = urllib.parse.urlsplit(url)
        # An https:// proxy is itself reached over TLS, trusting what the cluster does.
        tls_proxy = urllib.parse.urlsplit(proxy).scheme.lower() == "https"
        try:
            route = httpx.Proxy(proxy, ssl_context=ctx if tls_proxy else None)
            mounts[f"{parts.scheme}://{parts.netloc}"] = httpx.AsyncHTTPTransport(
                verify=ctx, proxy=route
            )
        except (ValueError, RuntimeError, httpx.InvalidURL) as exc:
            raise ConnectionSetupError(f"remote.proxy {proxy!r} cannot be used ({exc})") from exc
    return {
        "verify": ctx,
        "headers": resolve_headers(conn.headers, environ),
        "mounts": mounts,
        "trust_env": False,
    }


def describe_tls(exc: BaseException) -> str | None:
    """A TLS failure in `exc`'s chain in words, with the setting that fixes it; None
    when the failure is not TLS."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLCertVerificationError):
            msg = seen.verify_message or str(seen)
            low = msg.lower()
            if "hostname" in low or "ip address mismatch" in low:
                return (
                    f"TLS: the server's certificate does not name this host ({msg}): use "
                    "the host name its certificate names in remote.url"
                )
            if "expired" in low or "not yet valid" in low:
                return f"TLS: the server's certificate is out of date ({msg}): renew it"
            return (
                f"TLS: the server's certificate is not trusted ({msg}): set remote.ca_file "
                "to your organisation's CA certificate (PEM), or add that CA to the "
                "operating system's trust store"
            )
        if isinstance(seen, ssl.SSLError):
            msg = _reason(seen)
            low = msg.lower()
            if (
                "certificate required" in low
                or "handshake failure" in low
                or ("alert" in low and "certificate" in low)
            ):
                return (
                    f"TLS: the server refused the handshake ({msg}): it wants a client "
                    "certificate it trusts; set remote.client_cert and remote.client_key"
                )
            if "wrong version number" in low or "record layer failure" in low:
                return (
                    f"TLS: the server does not speak TLS there ({msg}): check remote.url's "
                    "scheme and port (nothing is retried in plain text)"
                )
            return (
                f"TLS handshake failed ({msg}): check remote.ca_file, remote.client_cert "
                "and remote.client_key"
            )
        seen = seen.__cause__ or seen.__context__
    return None


def describe_closed(exc: BaseException, *, client_cert: bool) -> str | None:
    """An https connection the server closed before answering, without a TLS alert we
    could read (TLS 1.3: a server that refuses our client certificate, or wants one, drops
    the connection after the handshake, and we see a broken pipe or an end of stream,
    whichever comes first): the likely cause and the setting. None for any other failure."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        dropped = isinstance(seen, httpx.RemoteProtocolError) and "disconnected" in str(seen)
        if dropped or isinstance(seen, BrokenPipeError | ConnectionResetError):
            if client_cert:
                return (
                    "TLS: the server closed the connection without answering; a server "
                    "that does not trust our client certificate does this: check that it "
                    "trusts remote.client_cert"
                )
            return (
                "TLS: the server closed the connection without answering; a server that "
                "wants a client certificate (mutual TLS) does this: set remote.client_cert "
                "and remote.client_key"
            )
        seen = seen.__cause__ or seen.__context__
    return None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return f"{exc.reason}: {exc.strerror or exc}"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


__all__ = [
    "DIRECT",
    "Connection",
    "ConnectionSetupError",
    "check_proxy",
    "describe_closed",
    "describe_tls",
    "proxy_for",
    "remote_client_args",
    "resolve_headers",
    "shown_headers",
    "ssl_context",
]
