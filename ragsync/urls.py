"""URL identity: one canonicalization used everywhere (record keys, dedup, scope checks)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

TRACKING_PARAMS = frozenset(
    {
        "fbclid",
        "gclid",
        "gclsrc",
        "dclid",
        "gbraid",
        "wbraid",
        "msclkid",
        "mc_cid",
        "mc_eid",
        "yclid",
        "_ga",
        "_gl",
        "igshid",
        "_hsenc",
        "_hsmi",
        "mkt_tok",
        "oly_anon_id",
        "oly_enc_id",
        "vero_id",
        "ttclid",
        "twclid",
        "li_fat_id",
        "s_kwcid",
        "ref_src",
    }
)
TRACKING_PREFIXES = ("utm_", "pk_", "mtm_", "hsa_")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def is_tracking_param(name: str, extra: Iterable[str] = ()) -> bool:
    """True for analytics parameters that never change what a page says."""
    lowered = name.lower()
    return (
        lowered in TRACKING_PARAMS
        or lowered.startswith(TRACKING_PREFIXES)
        or any(fnmatch.fnmatchcase(lowered, pattern.lower()) for pattern in extra)
    )


def canonical_url(url: str, strip_params: Iterable[str] = ()) -> str:
    """The canonical form of ``url``: the identity of a page.

    Lowercases scheme and host, drops the default port, a trailing dot of the host and the
    fragment, removes tracking parameters (``utm_*``, ``fbclid``, ``gclid``, … and the globs in
    ``strip_params``), sorts the query and normalises percent-encoding (w3lib's
    ``canonicalize_url``, as Scrapy uses it). An empty path becomes ``/``.

    Example::

        >>> canonical_url("HTTPS://Example.org:443/a%7eb?utm_source=x&b=2&a=1#top")
        'https://example.org/a~b?a=1&b=2'

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:  # a port that is not a number
        raise ValueError(f"not an absolute http(s) URL: {url!r} ({exc})") from None
    if scheme not in _DEFAULT_PORTS or not host:
        raise ValueError(f"not an absolute http(s) URL: {url!r}")
    host = host.lower().rstrip(".")
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    strip = tuple(strip_params)
    query = "&".join(
        pair
        for pair in parts.query.split("&")
        if pair and not is_tracking_param(unquote(pair.split("=", 1)[0]), strip)
    )
    return canonicalize_url(urlunsplit((scheme, netloc, parts.path or "/", query, "")))


def require_http_url(value: str, key: str) -> None:
    """Raise ``ConfigError`` naming ``key`` when ``value`` is not an http(s) URL."""
    from ragsync.errors import ConfigError

    if not value.startswith(("http://", "https://")):
        raise ConfigError(f"must be an http(s) URL, got {value!r}", key=key)


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
