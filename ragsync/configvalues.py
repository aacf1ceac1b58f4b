"""Checks of single ``ragsync.toml`` values beyond their type and range.

Each check takes a value and raises :class:`ValueError` with a message that never repeats a
password or a secret; :mod:`ragsync.config` adds the file and the key (README "Configuration
reference"). ``${VAR}`` references are checked for their shape only: their values are checked
where they are resolved.

Example::

    parse_listen("127.0.0.1:8787")  # ("127.0.0.1", 8787)
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

SECRET_PREFIX = "whsec_"
# Standard Webhooks: a symmetric secret is random, at least 24 bytes and at most 64 ("Signature
# scheme" of the specification).
SECRET_BYTES = (24, 64)
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# RFC 3986 §3.2.1: userinfo is unreserved, pct-encoded, sub-delims and ":"; plus ${VAR}.
_USERINFO = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:]|%[0-9A-Fa-f]{2}|\$\{\w+\})*")
# Labels of letters, digits, '-' and '_' (container and compose service names use '_').
_HOSTNAME = re.compile(
    r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(?:\.[A-Za-z0-9_-]{1,63})*"
)
_PORT = re.compile(r"[0-9]{1,5}")


def parse_listen(text: str) -> tuple[str, int]:
    """Host and port of a ``HOST:PORT`` listen address (an IPv6 host in brackets).

    >>> parse_listen("127.0.0.1:8787")
    ('127.0.0.1', 8787)
    >>> parse_listen("[::1]:9000"), parse_listen(":8787")
    (('::1', 9000), ('127.0.0.1', 8787))

    Raises:
        ValueError: not ``HOST:PORT``, or the port is not within 1-65535.
    """
    host, colon, port = text.rpartition(":")
    if not colon or not _PORT.fullmatch(port):
        raise ValueError(f"must be HOST:PORT, e.g. '127.0.0.1:8787', got {text!r}")
    host = host or "127.0.0.1"  # ":8787": this machine only, as before
    if not 1 <= int(port) <= 65535:
        raise ValueError(f"port must be within 1-65535, got {int(port)}")
    if host.startswith("[") and host.endswith("]"):
        try:
            return str(ipaddress.IPv6Address(host[1:-1])), int(port)
        except ValueError:
            raise ValueError(f"{host} is not an IPv6 address") from None
    if ":" in host:
        raise ValueError(f"write an IPv6 host in brackets, e.g. '[::1]:{port}'")
    if re.fullmatch(r"[0-9.]+", host):
        try:
            return str(ipaddress.IPv4Address(host)), int(port)
        except ValueError:
            raise ValueError(f"{host!r} is not an IPv4 address") from None
    if not _HOSTNAME.fullmatch(host):
        raise ValueError(
            f"{host!r} is not a host name or address (use '0.0.0.0' for every interface)"
        )
    return host, int(port)


def http_url(value: str) -> None:
    """Refuse anything but an absolute ``http://`` or ``https://`` URL with a host.

    Raises:
        ValueError: another scheme, no host, whitespace, or an unencoded user or password.
    """
    _url(value, ("http", "https"), host=True)


def database_url(value: str) -> None:
    """Refuse anything but a ``postgresql://`` URL (or a whole-URL ``${VAR}`` reference).

    Raises:
        ValueError: another scheme, whitespace, or a password with an unencoded ``@``, ``/``….
    """
    if not value.startswith("${"):
        _url(value, ("postgresql", "postgres"), host=False)


def store_url(value: str) -> None:
    """A vector-store server: ``http(s)://`` (Qdrant) or ``postgresql://`` (pgvector)."""
    if not value.startswith("${"):
        _url(value, ("http", "https", "postgresql", "postgres"), host=False)


def _url(value: str, schemes: tuple[str, ...], *, host: bool) -> None:
    scheme, sep, rest = value.partition("://")
    shown = " or ".join(f"{s}://" for s in schemes)
    if not sep or scheme.lower() not in schemes:
        # The scheme alone: the rest may hold a password.
        raise ValueError(f"must be a {shown} URL, got {scheme + sep if sep else 'no scheme'}")
    if any(c.isspace() for c in value):
        raise ValueError("must not contain spaces")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    userinfo, at, _ = authority.rpartition("@")
    # libpq reads an '@' after the first '/' as part of the host: a password holding '/'.
    stray = scheme.lower().startswith("postgres") and "@" in rest[len(authority) :]
    if stray or at and not _USERINFO.fullmatch(userinfo):
        raise ValueError(
            "the user or password holds a reserved character: percent-encode it ('@' as %40, "
            "':' as %3A, '/' as %2F) or give the password as ${VAR}"
        )
    try:
        parts = urlsplit(ENV_REF.sub("0", value))
        hosts = authority.rpartition("@")[2]
        # libpq takes several hosts, "db1:5432,db2:5432" (failover): each is checked.
        for one in hosts.split(",") if scheme.lower().startswith("postgres") else [hosts]:
            urlsplit(f"//{ENV_REF.sub('0', one)}").port  # noqa: B018 - raises on a bad port
    except ValueError:
        # Not the library's message: it may quote a piece of the password.
        raise ValueError("is not a valid URL (check the host and the port)") from None
    if host and not parts.hostname:
        raise ValueError("has no host")


def standard_webhooks_secret(value: str) -> None:
    """Refuse what is not a Standard Webhooks secret: ``whsec_`` + base64 of 24-64 bytes.

    >>> standard_webhooks_secret("whsec_" + "QUFB" * 8)
    >>> standard_webhooks_secret("hunter2")
    Traceback (most recent call last):
    ...
    ValueError: not a Standard Webhooks secret (expected 'whsec_' followed by base64)

    Raises:
        ValueError: empty, no prefix, not base64, or a key of the wrong length.
    """
    if not value:
        raise ValueError("is empty")
    if not value.startswith(SECRET_PREFIX):
        raise ValueError("not a Standard Webhooks secret (expected 'whsec_' followed by base64)")
    body = value[len(SECRET_PREFIX) :]
    try:
        key = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except binascii.Error:
        raise ValueError(
            "not a Standard Webhooks secret: the part after 'whsec_' is not base64"
        ) from None
    low, high = SECRET_BYTES
    if not low <= len(key) <= high:
        raise ValueError(
            f"a Standard Webhooks secret holds {low}-{high} bytes, this one {len(key)}"
        )


def event_secret(value: str) -> None:
    """An ``[[events]]`` secret: a Standard Webhooks secret, or ``${VAR}`` naming one."""
    if not ENV_REF.search(value):
        standard_webhooks_secret(value)


def hook_secret(value: str) -> None:
    """A source's ``webhook_secret``: any GitHub secret, or a Standard Webhooks one (``whsec_``)."""
    if not value:
        raise ValueError("is empty")
    if value.startswith(SECRET_PREFIX) and not ENV_REF.search(value):
        standard_webhooks_secret(value)


def bearer_token(value: str) -> None:
    """A ``[server] search_token``: 16 to 256 characters of RFC 6750 §2.1's token68 alphabet
    (letters, digits, ``-._~+/`` and trailing ``=``), or ``${VAR}`` naming one.

    >>> bearer_token("0123456789abcdef")
    >>> bearer_token("short")
    Traceback (most recent call last):
    ...
    ValueError: a search token needs 16-256 characters (e.g. `openssl rand -hex 32`), this one 5

    Raises:
        ValueError: too short or long, or a character a Bearer header cannot carry.
    """
    if ENV_REF.fullmatch(value):
        return
    if not 16 <= len(value) <= 256:
        raise ValueError(
            f"a search token needs 16-256 characters (e.g. `openssl rand -hex 32`), this one "
            f"{len(value)}"
        )
    if not re.fullmatch(r"[A-Za-z0-9\-._~+/]+=*", value):
        raise ValueError("a search token holds only letters, digits, '-._~+/' and trailing '='")


def host_pattern(value: str) -> None:
    """An ``allowed_hosts`` entry: a host or a glob such as ``*.example.org``, not a URL,
    and without a port (hosts are compared without one); an IPv6 literal may be bracketed."""
    if "/" in value or any(c.isspace() for c in value) or not value.strip("."):
        raise ValueError(f"must be a host or a host glob such as '*.example.org', got {value!r}")
    bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    if ":" in bare and bare.count(":") == 1:
        raise ValueError(f"a host without its port, got {value!r}")


def writable_path(path: str, *, folder: bool) -> None:
    """Refuse a path ragsync could not create or write: a file where a folder must be, a
    device, a folder under a file, or a read-only place. ``:memory:`` passes.

    Raises:
        ValueError: the path is unusable (the message says why).
    """
    if path == ":memory:":
        return
    target = Path(path)
    kind = "folder" if folder else "file"
    try:
        if target.exists():
            if folder and not target.is_dir() or not folder and not target.is_file():
                raise ValueError(f"{path} is not a {'folder' if folder else 'regular file'}")
            # SQLite writes its journal beside the database file.
            places = [target] if folder else [target, target.parent]
            if not all(os.access(place, os.W_OK) for place in places):
                raise ValueError(f"{path} is not writable")
            return
        ancestor = target.parent
        while not ancestor.exists():
            ancestor = ancestor.parent
    except OSError as exc:
        raise ValueError(f"cannot use {path}: {exc.strerror}") from None
    if not ancestor.is_dir():
        raise ValueError(f"cannot create the {kind} {path}: {ancestor} is not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValueError(f"cannot create the {kind} {path}: {ancestor} is not writable")
