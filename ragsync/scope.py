"""A source's ground: the hosts it may fetch, and whether they may be private addresses.

A source's hosts are those of its own URLs (its sitemap, feed or API ``url``, its ``urls`` and
the URLs of its ``urls_file``) plus its ``allowed_hosts`` globs. Every URL is checked before any
request — listed URLs, each redirect hop, robots.txt, webhook and ``resync`` targets — and an
out-of-scope URL is a recorded skip, never a request (README "Security").

Connections to loopback, link-local (169.254.169.254 among them), private and unique-local
addresses are refused at connect time (:mod:`ragsync.transport`), unless the source says
``allow_private_networks = true`` or the host is one of the source's own configured hosts (so
local development keeps working).
"""

from __future__ import annotations

import contextlib
import fnmatch
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ragsync.config import SourceConfig
from ragsync.urls import canonical_url, in_scope


def hostname(url: str) -> str:
    """The host of ``url`` as its canonical form has it (lowercase, IDNA-encoded, no trailing
    dot; an IPv6 literal without brackets; "" when none), so that a source's own URLs and the
    canonical URLs of its listing compare equal.

    >>> hostname("https://Docs.Example.org.:8443/a")
    'docs.example.org'
    >>> hostname("http://[::1]:8080/"), hostname("http://Bücher.example/")
    ('::1', 'xn--bcher-kva.example')
    """
    with contextlib.suppress(ValueError):  # not an http(s) URL: its host as written
        url = canonical_url(url)
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def internal_address(address: str) -> bool:
    """Whether an IP address is not on the public internet: loopback, link-local, private,
    unique-local, shared (CGNAT), multicast, unspecified or reserved.

        >>> [internal_address(a) for a in ("127.0.0.2", "169.254.169.254", "10.1.2.3", "fd00::1")]
        [True, True, True, True]
        >>> internal_address("93.184.215.14"), internal_address("::ffff:127.0.0.1")
        (False, True)
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast or ip.is_unspecified


@dataclass(frozen=True)
class Scope:
    """Where one source may send requests.

    Attributes:
        source_id: the source.
        hosts: the hosts of the source's own URLs.
        patterns: its ``allowed_hosts`` globs (``*.example.org``).
        allow_private: its ``allow_private_networks``.
        include, exclude: its URL globs, the paths a page may have (not discovery documents:
            a sitemap's children or robots.txt lie wherever the site puts them).
        strip_params: its ``strip_params`` (the patterns match canonical URLs).
    """

    source_id: str
    hosts: frozenset[str]
    patterns: tuple[str, ...] = ()
    allow_private: bool = False
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    strip_params: tuple[str, ...] = ()

    def refuse(self, url: str) -> str | None:
        """Why ``url`` lies outside the scope, or None when it may be requested.

        >>> scope = Scope("docs", frozenset({"docs.example.org"}), ("*.example.org",))
        >>> scope.refuse("https://www.example.org/a") is None
        True
        >>> scope.refuse("http://169.254.169.254/latest/meta-data/")
        "outside source docs's hosts: http://169.254.169.254/latest/meta-data/"
        """
        scheme = urlsplit(url).scheme.lower()
        if scheme not in ("http", "https"):
            return f"not an http(s) URL: {url}"
        host = hostname(url)
        if host and (
            host in self.hosts or any(fnmatch.fnmatchcase(host, p) for p in self.patterns)
        ):
            return None
        return f"outside source {self.source_id}'s hosts: {url}"

    def refuse_page(self, url: str) -> str | None:
        """Why a *page* at ``url`` lies outside the source — another host, or a URL its
        ``include``/``exclude`` patterns leave out — or None.

        >>> scope = Scope("docs", frozenset({"docs.example.org"}), include=("*/v2/*",))
        >>> scope.refuse_page("https://docs.example.org/v2/a") is None
        True
        >>> scope.refuse_page("https://docs.example.org/admin")
        "outside source docs's include/exclude patterns: https://docs.example.org/admin"
        """
        refusal = self.refuse(url)
        if refusal is not None:
            return refusal
        try:
            canonical = canonical_url(url, self.strip_params)
        except ValueError as exc:
            return str(exc)
        if not in_scope(canonical, self.include, self.exclude):
            return f"outside source {self.source_id}'s include/exclude patterns: {url}"
        return None

    def private_ok(self, url: str) -> bool:
        """Whether a request to ``url`` may connect to an internal address: the source allows
        private networks, or the host is one of its own configured hosts."""
        return self.allow_private or hostname(url) in self.hosts


def scope_of(source: SourceConfig, base_dir: Path | str = ".") -> Scope:
    """The scope of ``source`` (its ``urls_file`` is read, relative to ``base_dir``)."""
    options = source.options
    urls: list[str] = [u for u in (getattr(options, "url", None),) if u]
    urls.extend(getattr(options, "urls", ()) or ())
    urls_file = getattr(options, "urls_file", None)
    if urls_file:
        urls.extend(_listed_urls(Path(base_dir) / urls_file))
    hosts = frozenset(host for host in map(hostname, urls) if host)
    patterns = tuple(pattern.lower() for pattern in source.allowed_hosts)
    return Scope(
        source.id,
        hosts,
        patterns,
        source.allow_private_networks,
        include=source.include,
        exclude=source.exclude,
        strip_params=source.strip_params,
    )


def _listed_urls(path: Path) -> Iterable[str]:
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError):
        return ()  # the listing reports it (incomplete); nothing is in scope through it
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]
