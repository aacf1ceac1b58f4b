"""A source's ground: the hosts it may fetch, and whether they may be private addresses.

A source's hosts are those of its own URLs (its sitemap, feed or API ``url``, its ``urls`` and
the URLs of its ``urls_file``) plus its ``allowed_hosts`` globs; its ``include``/``exclude``
globs are the paths its pages may have. Every URL is checked before any request — listed URLs,
each redirect hop, webhook and ``resync`` targets — and an out-of-scope URL is a recorded skip,
never a request (README "Security"). robots.txt redirects may go to any host
(:class:`RobotsScope`).

Connections to loopback, link-local (169.254.169.254 among them), private and unique-local
addresses are refused at connect time (:mod:`ragsync.transport`), unless the source says
``allow_private_networks = true`` or the URL is on the origin (host and port) of one of the
source's own URLs (so local development keeps working).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from urllib.parse import urlsplit

from ragsync.config import SourceConfig
from ragsync.urls import canonical_url, in_scope, split_url, url_lines


def hostname(url: str) -> str:
    """The host of ``url`` as its canonical form has it (lowercase, IDNA-encoded, no trailing
    dot; an IPv6 literal without brackets; "" when none), so that a source's own URLs and the
    canonical URLs of its listing compare equal.

    >>> hostname("https://Docs.Example.org.:8443/a")
    'docs.example.org'
    >>> hostname("http://[::1]:8080/"), hostname("http://Bücher.example/")
    ('::1', 'xn--bcher-kva.example')
    """
    try:
        return _idna(split_url(url).host.strip("[]"))
    except ValueError:  # not an http(s) URL a source can list: its host as written
        pass
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def _idna(host: str) -> str:
    """``host`` (lowercase, no trailing dot) with its non-ASCII labels IDNA-encoded, as the
    canonical form (w3lib) spells them; a label IDNA refuses stays as it is."""
    if host.isascii():
        return host
    labels = []
    for label in host.split("."):
        try:
            labels.append(label if label.isascii() else label.encode("idna").decode("ascii"))
        except UnicodeError:
            labels.append(label)
    return ".".join(labels)


@dataclass(frozen=True)
class Scope:
    """Where one source may send requests.

    Attributes:
        source_id: the source.
        origins: ``(host, port)`` of the source's own URLs: their hosts are the source's, and
            only these origins may be internal addresses without ``allow_private`` (not
            another port of the host).
        patterns: its ``allowed_hosts`` globs (``*.example.org``).
        allow_private: its ``allow_private_networks``.
        include, exclude: its URL globs, the paths a page may have (not discovery documents:
            a sitemap's children or robots.txt lie wherever the site puts them).
        strip_params: its ``strip_params`` (the patterns match canonical URLs).
    """

    source_id: str
    origins: frozenset[tuple[str, int]]
    patterns: tuple[str, ...] = ()
    allow_private: bool = False
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    strip_params: tuple[str, ...] = ()

    @cached_property
    def hosts(self) -> frozenset[str]:
        """The hosts of the source's own URLs."""
        return frozenset(host for host, _ in self.origins)

    def refuse(self, url: str) -> str | None:
        """Why ``url`` lies outside the scope, or None when it may be requested.

        >>> scope = Scope("docs", frozenset({("docs.example.org", 443)}), ("*.example.org",))
        >>> scope.refuse("https://www.example.org/a") is None
        True
        >>> scope.refuse("http://169.254.169.254/latest/meta-data/")
        "outside source docs's hosts: http://169.254.169.254/latest/meta-data/"
        """
        try:
            # An http(s) URL as the URL Standard reads it, without credentials.
            host = _idna(split_url(url).host.strip("[]"))
        except ValueError as exc:
            return str(exc)  # names the URL without its credentials
        if host and (
            host in self.hosts or any(fnmatch.fnmatchcase(host, p) for p in self.patterns)
        ):
            return None
        return f"outside source {self.source_id}'s hosts: {url}"

    def refuse_page(self, url: str) -> str | None:
        """Why a *page* at ``url`` lies outside the source — another host, or a URL its
        ``include``/``exclude`` patterns leave out — or None.

        >>> scope = Scope("docs", frozenset({("docs.example.org", 443)}), include=("*/v2/*",))
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
        private networks, or ``url`` is on the origin (host and port) of one of its own URLs.

        >>> scope = Scope("wiki", frozenset({("wiki.internal", 8080)}))
        >>> scope.private_ok("http://wiki.internal:8080/a")
        True
        >>> scope.private_ok("http://wiki.internal:2375/containers/json")
        False
        """
        return self.allow_private or origin(url) in self.origins


@dataclass(frozen=True)
class RobotsScope:
    """Where the redirects of a robots.txt request may go: any host (RFC 9309 §2.3.1.2: "even
    across authorities"), an internal address only where the source's scope allows it."""

    scope: Scope

    def refuse(self, url: str) -> str | None:
        try:
            split_url(url)
        except ValueError as exc:
            return str(exc)
        return None

    def private_ok(self, url: str) -> bool:
        return self.scope.private_ok(url)


def origin(url: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``url``, the port made explicit; None when it is not a usable
    http(s) URL.

    >>> origin("https://Docs.Example.org/a"), origin("http://[::1]:8080/")
    (('docs.example.org', 443), ('::1', 8080))
    """
    try:
        parts = split_url(url)
    except ValueError:
        return None
    return _idna(parts.host.strip("[]")), parts.port or (443 if parts.scheme == "https" else 80)


def host_glob(pattern: str) -> str:
    """An ``allowed_hosts`` entry in the form hosts are compared in: lowercase, IDNA-encoded,
    no trailing dot, an IPv6 literal without brackets.

    >>> host_glob("*.Bücher.example."), host_glob("[::1]")
    ('*.xn--bcher-kva.example', '::1')
    """
    pattern = pattern.strip().lower().rstrip(".")
    if pattern.startswith("[") and pattern.endswith("]"):
        return pattern[1:-1]
    return _idna(pattern)


def scope_of(source: SourceConfig, base_dir: Path | str = ".") -> Scope:
    """The scope of ``source`` (its ``urls_file`` is read, relative to ``base_dir``). A URL
    the listing would refuse (credentials, a broken host) adds nothing to it."""
    options = source.options
    urls: list[str] = [u for u in (getattr(options, "url", None),) if u]
    urls.extend(getattr(options, "urls", ()) or ())
    urls_file = getattr(options, "urls_file", None)
    if urls_file:
        urls.extend(_listed_urls(Path(base_dir) / urls_file))
    return Scope(
        source.id,
        frozenset(o for o in map(origin, urls) if o is not None and o[0]),
        tuple(map(host_glob, source.allowed_hosts)),
        source.allow_private_networks,
        include=source.include,
        exclude=source.exclude,
        strip_params=source.strip_params,
    )


def _listed_urls(path: Path) -> Iterable[str]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return ()  # the listing reports it (incomplete); nothing is in scope through it
    return [url for _, url in url_lines(text)]
