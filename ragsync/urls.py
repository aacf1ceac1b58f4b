"""URL identity: one canonicalization used everywhere (record keys, dedup, scope checks)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

TRACKING_PARAMS = frozenset(
    {"fbclid", "gclid", "dclid", "msclkid", "mc_cid", "mc_eid", "yclid", "_ga", "_gl", "igshid"}
)
_DEFAULT_PORTS = {"http": 80, "https": 443}
# RFC 3986 §2.3: unreserved characters are never percent-encoded in the canonical form.
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def _is_tracking(name: str) -> bool:
    return name.lower().startswith("utm_") or name.lower() in TRACKING_PARAMS


def canonical_url(url: str) -> str:
    """The canonical form of ``url``: the identity of a page.

    Lowercases scheme and host, drops the default port and the fragment, removes tracking
    parameters (``utm_*``, ``fbclid``, ``gclid``, ...), sorts the query and normalises
    percent-encoding. An empty path becomes ``/``.

    Example::

        >>> canonical_url("HTTPS://Example.org:443/a%7eb?utm_source=x&b=2&a=1#top")
        'https://example.org/a~b?a=1&b=2'

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"not an absolute http(s) URL: {url!r}")
    host = parts.hostname.lower().rstrip(".")
    port = parts.port
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = quote(unquote(parts.path), safe=_PATH_SAFE) or "/"
    query = [
        (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _is_tracking(k)
    ]
    return urlunsplit((scheme, netloc, path, urlencode(sorted(query)), ""))


def record_key(source_id: str, url: str) -> str:
    """The stable identity of a page within a source: ``source_id`` + canonical URL."""
    return f"{source_id}:{canonical_url(url)}"


def host_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: the unit of robots.txt and politeness."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def in_scope(url: str, include: Iterable[str], exclude: Iterable[str]) -> bool:
    """True when ``url`` matches an ``include`` glob (or there are none) and no ``exclude`` glob."""
    include = list(include)
    if include and not any(fnmatch.fnmatchcase(url, pattern) for pattern in include):
        return False
    return not any(fnmatch.fnmatchcase(url, pattern) for pattern in exclude)
