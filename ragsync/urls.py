"""URL identity: one canonicalization used everywhere (record keys, dedup, scope checks)."""

from __future__ import annotations

import fnmatch
import functools
import ipaddress
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

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
# URL Standard, section 4.4 (basic URL parser, first steps): C0 controls and space are trimmed
# at both ends; ASCII tab and newline are removed everywhere.
_C0_CONTROL_OR_SPACE = "".join(map(chr, range(0x21)))
_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")
# URL Standard, section 3.2 (host representation): "forbidden domain code points".
_FORBIDDEN_HOST = re.compile(r"[\x00-\x20#%/:<>?@\[\\\]^|\x7f]")
# URL Standard, section 3.5 (IPv4 parser): one part in hexadecimal, octal or decimal.
_IPV4_PART = re.compile(r"0[xX]([0-9a-fA-F]*)|0([0-7]+)|(0|[1-9][0-9]*)")


def is_tracking_param(name: str, extra: Iterable[str] = ()) -> bool:
    """True for analytics parameters that never change what a page says."""
    lowered = name.lower()
    return (
        lowered in TRACKING_PARAMS
        or lowered.startswith(TRACKING_PREFIXES)
        or any(fnmatch.fnmatchcase(lowered, pattern.lower()) for pattern in extra)
    )


def canonical_url(url: str, strip_params: Iterable[str] = ()) -> str:
    r"""The canonical form of ``url``: the identity of a page.

    Reads ``url`` as the URL Standard's basic parser does for http(s) (see :func:`split_url`:
    surrounding control characters and spaces dropped, tabs and newlines removed, ``\`` read
    as ``/``, IPv6 literals), then lowercases scheme and host, drops the default port, a
    trailing dot of the host and the fragment, removes tracking parameters (``utm_*``,
    ``fbclid``, ``gclid``, … and the globs in ``strip_params``), sorts the query and normalises
    percent-encoding (w3lib's ``canonicalize_url``, as Scrapy uses it). An empty path becomes
    ``/``.

    Example::

        >>> canonical_url("HTTPS://Example.org:443/a%7eb?utm_source=x&b=2&a=1#top")
        'https://example.org/a~b?a=1&b=2'
        >>> canonical_url("http://[::1]:8080\\docs")
        'http://[::1]:8080/docs'

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL, or carries credentials.
    """
    return _canonical(url, tuple(strip_params))


# Cached: a page's URL is canonicalised several times on its way (listing, identity of the
# response, scope), and w3lib's canonicalisation is not cheap.
@functools.lru_cache(maxsize=4096)
def _canonical(url: str, strip: tuple[str, ...]) -> str:
    """:func:`canonical_url` of ``url`` with ``strip_params`` as a tuple."""
    parts = split_url(url)
    query = "&".join(
        pair
        for pair in parts.query.split("&")
        if pair and not is_tracking_param(unquote(pair.split("=", 1)[0]), strip)
    )
    # Spaces escaped first: w3lib strips whitespace at the end of the URL it is given, which
    # would drop a space that ends the query ("?q=a " is not "?q=a" in the URL Standard).
    path, query = (parts.path or "/").replace(" ", "%20"), query.replace(" ", "%20")
    # Imported here: w3lib brings urllib.request, http.client and ssl, which a run with
    # nothing due does not need.
    from w3lib.url import canonicalize_url

    return canonicalize_url(urlunsplit((parts.scheme, parts.netloc, path, query, "")))


@dataclass(frozen=True)
class URLParts:
    """An absolute http(s) URL read as the URL Standard reads it, before canonicalization.

    Attributes:
        scheme: ``http`` or ``https``.
        host: lowercased, without a trailing dot; an IPv6 literal in brackets, compressed.
        port: the explicit port, ``None`` when absent or the scheme's default.
        path: as written (not re-encoded, dot segments kept).
        query: as written, without the ``?``.
        has_query: whether the URL has a ``?`` (an empty query is still a query to robots.txt).
    """

    scheme: str
    host: str
    port: int | None
    path: str
    query: str
    has_query: bool

    @property
    def netloc(self) -> str:
        """``host[:port]``."""
        return self.host if self.port is None else f"{self.host}:{self.port}"

    @property
    def origin(self) -> str:
        """``scheme://host[:port]``: the unit of robots.txt and politeness."""
        return f"{self.scheme}://{self.netloc}"


def clean_url(url: str) -> str:
    r"""``url`` as the URL Standard's basic URL parser first rewrites it (section 4.4).

    Leading and trailing C0 control characters and spaces are stripped, ASCII tabs and
    newlines anywhere are removed, and in http(s), a "special" scheme, a backslash before the
    query reads as ``/`` and any run of slashes (or none) after ``scheme:`` introduces the host
    (the "special authority ignore slashes" state).

    Example::

        >>> clean_url(" \x01http:\\example.org\\a\tb?q=\\ ")
        'http://example.org/ab?q=\\'
    """
    url = url.strip(_C0_CONTROL_OR_SPACE).translate(_TAB_OR_NEWLINE)
    scheme, colon, rest = url.partition(":")
    if not colon or scheme.lower() not in _DEFAULT_PORTS:
        return url
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i != -1), default=len(rest))
    rest = rest[:cut].replace("\\", "/") + rest[cut:]
    return f"{scheme}://{rest.lstrip('/')}"


# Cached: a page's URL is split a dozen times on its way (scope, robots, politeness, identity),
# and its parts are immutable.
@functools.lru_cache(maxsize=4096)
def split_url(url: str) -> URLParts:
    """Parse and validate an absolute http(s) URL (after :func:`clean_url`).

    Raises:
        ValueError: not an absolute http(s) URL (no host, a host with forbidden characters, a
            port that is not a number in 0-65535, a malformed IPv6 literal), or one with
            credentials: ``user:pass@`` would be sent to whatever the host is, and records that
            differ only in them would be merged. The message names the URL without them.
    """
    cleaned = clean_url(url)
    parts = urlsplit(cleaned)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError(f"not an absolute http(s) URL: {redact_url(cleaned)!r}")
    if parts.username or parts.password:
        raise ValueError(
            f"URL with credentials refused: {redact_url(cleaned)!r} "
            "(put the page's own URL in the source; credentials never go in a URL)"
        )
    try:
        host, port = _host(parts.netloc, parts.hostname), parts.port
    except ValueError as exc:  # a port that is not a number, a broken IPv6 literal
        raise ValueError(f"not an absolute http(s) URL: {redact_url(cleaned)!r} ({exc})") from None
    if not host:
        raise ValueError(f"not an absolute http(s) URL: {redact_url(cleaned)!r}")
    return URLParts(
        scheme=scheme,
        host=host,
        port=None if port == _DEFAULT_PORTS[scheme] else port,
        path=parts.path,
        query=parts.query,
        has_query="?" in cleaned.split("#", 1)[0],
    )


def _host(netloc: str, hostname: str | None) -> str:
    """The host of a URL in its canonical spelling; raises ValueError when it cannot be one."""
    if not hostname:
        return ""
    if netloc.rpartition("@")[2].startswith("["):
        # URL Standard "IPv6 parser": the serialised form is the compressed one; zone ids
        # ("%25eth0") are not allowed in URLs.
        if "%" in hostname:
            raise ValueError(f"zone id in IPv6 host {hostname!r}")
        return f"[{ipaddress.IPv6Address(hostname).compressed}]"
    # URL Standard "host parser": a domain is percent-decoded before it is checked.
    host = unquote(hostname).lower().rstrip(".")
    if _FORBIDDEN_HOST.search(host):
        raise ValueError(f"forbidden character in host {host!r}")
    return _ipv4(host) or host


def _ipv4(host: str) -> str | None:
    """The dotted-decimal form of a host the URL Standard reads as an IPv4 address, if any:
    ``192.0x00A80001`` is ``192.168.0.1`` (the "IPv4 parser": 1-4 parts, decimal, octal or
    hexadecimal). None for a domain name."""
    labels = host.split(".")
    if not labels or not _IPV4_PART.fullmatch(labels[-1]):
        return None
    numbers = []
    for label in labels:
        match = _IPV4_PART.fullmatch(label)
        if not match or len(labels) > 4:
            raise ValueError(f"not an IPv4 address: {host!r}")
        hex_digits, octal_digits, decimal = match.groups()
        if hex_digits is not None:
            numbers.append(int(hex_digits or "0", 16))
        elif octal_digits is not None:
            numbers.append(int(octal_digits, 8))
        else:
            numbers.append(int(decimal))
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise ValueError(f"IPv4 address out of range: {host!r}")
    value = last + sum(n << (8 * (3 - i)) for i, n in enumerate(head))
    return str(ipaddress.IPv4Address(value))


def redact_url(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``: safe to log.

    Example::

        >>> redact_url("https://bob:s3cret@example.org/a")
        'https://***@example.org/a'
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority_end = min((i for i in map(rest.find, "/?#") if i != -1), default=len(rest))
    userinfo, at, hostport = rest[:authority_end].rpartition("@")
    if not at:
        return url
    return f"{scheme}://***@{hostport}{rest[authority_end:]}"


def url_lines(text: str) -> Iterator[tuple[int, str]]:
    r"""``(line number, URL)`` of a URL list: one URL per line, ``#`` starts a comment, blank
    lines skipped (the ``urls_file`` format).

    Example::

        >>> list(url_lines("https://a.example/x  # first\n\n# none\nhttps://a.example/y\n"))
        [(1, 'https://a.example/x'), (4, 'https://a.example/y')]
    """
    for number, line in enumerate(text.splitlines(), 1):
        url = line.split("#", 1)[0].strip()
        if url:
            yield number, url


def start_directory(url: str) -> str:
    """The canonical URL prefix a start page's crawl stays under: its directory.

    >>> start_directory("https://Docs.example.org/book/")
    'https://docs.example.org/book/'
    >>> start_directory("https://docs.example.org/book/intro.html?x=1")
    'https://docs.example.org/book/'
    >>> start_directory("https://docs.example.org/book")  # a file "book" in "/"
    'https://docs.example.org/'
    """
    parts = urlsplit(canonical_url(url))
    directory = parts.path[: parts.path.rfind("/") + 1] or "/"
    return f"{parts.scheme}://{parts.netloc}{directory}"


def with_slash(url: str) -> str:
    """``url`` with a slash after its path: where a server sends a directory asked without
    its slash ("/book" → "/book/"), so a crawl from ``url`` that lands there stays under it.

    >>> with_slash("https://docs.example.org/book?x=1#top")
    'https://docs.example.org/book/?x=1'
    """
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path + "/", fragment=""))


def require_http_url(value: str, key: str) -> None:
    """Raise ``ConfigError`` naming ``key`` when ``value`` is not an http(s) URL that
    :func:`split_url` accepts (no credentials, a valid host and port)."""
    from ragsync.errors import ConfigError

    if not value.lower().startswith(("http://", "https://")):
        raise ConfigError(f"must be an http(s) URL, got {redact_url(value)!r}", key=key)
    try:
        split_url(value)
    except ValueError as exc:  # credentials, a bad port or host: named without the secret
        raise ConfigError(str(exc), key=key) from None


def host_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: the unit of robots.txt and politeness.

    Spelled as in the canonical form (``HTTP://Example.org:80/x`` and ``http://example.org/y``
    share one), so a raw, published URL and its canonical form have the same host.
    """
    try:
        return split_url(url).origin
    except ValueError:  # not a URL a source can list: keep the old, literal reading
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}"


def in_scope(url: str, include: Iterable[str], exclude: Iterable[str]) -> bool:
    """True when ``url`` matches an ``include`` glob (or there are none) and no ``exclude`` glob."""
    include = list(include)
    if include and not any(fnmatch.fnmatchcase(url, pattern) for pattern in include):
        return False
    return not any(fnmatch.fnmatchcase(url, pattern) for pattern in exclude)
