"""robots.txt (RFC 9309) through protego, one parsed file per host per run (revalidated
conditionally across runs by the engine's discovery cache).

Rules are matched against the URL *as published* (its path and query as the site wrote them),
not its canonical form: the canonical form sorts the query and drops tracking parameters, so
``Allow: /search?q=a&page=2`` would not match it. protego is kept for matching; two of its
readings differ from RFC 9309 and Google's parser, and :func:`parse_robots` rewrites the text
before protego sees it:

- a ``User-agent`` value is its product token: the first word, up to the first character
  that is not a letter, ``-`` or ``_`` ("Googlebot Images" and "googlebot/2.1" name
  ``googlebot``), matched case-insensitively and exactly (RFC 9309 §2.2.1). protego matches
  substrings, so ``User-agent: rag`` would bind ``ragsync`` and "FOO BAR" would bind nobody;
- a line that is not a known directive does not end a group (RFC 9309 §2.2.4: crawlers ignore
  records they do not know). protego closes the group on it, so ``User-agent: ragsync``,
  ``X-Unknown: 1``, ``User-agent: *``, ``Disallow: /`` would leave ragsync unrestricted.

Lines longer than Google's limit (8 × 2083 bytes) are cut there, as Google's parser does.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from protego import Protego

from ragsync.errors import FetchError
from ragsync.politeness import HostPaused
from ragsync.urls import host_of, split_url

_BOM = "\ufeff"
_BOM_BYTES = b"\xef\xbb\xbf"
MAX_LINE_BYTES = 8 * 2083 - 1  # Google's robots.txt parser's line limit, less its NUL
# The directives protego knows, with the spellings it tolerates; any other "name:" line is
# dropped so that it cannot split a group.
_KNOWN_FIELDS = frozenset(
    {
        "user-agent",
        "useragent",
        "allow",
        "disallow",
        "dissallow",
        "dissalow",
        "disalow",
        "diasllow",
        "disallaw",
        "sitemap",
        "sitemaps",
        "site-map",
        "crawl-delay",
        "request-rate",
        "visit-time",
        "host",
    }
)
_FIELD = re.compile(r"\s*([A-Za-z][\w-]*)\s*:")
_USER_AGENT_LINE = re.compile(r"\s*user[-\s]?agent(?:\s*:\s*|\s+)(.*)", re.IGNORECASE)
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]*")


def decode_robots(body: bytes) -> str:
    """The text of a robots.txt body: UTF-8 (RFC 9309 §2.3), a leading byte-order mark
    dropped (else the first line, usually ``User-agent``, is not recognised and its whole
    group is lost), as is a truncated one (``EF BB``, ``EF``: Google's parser skips those
    too), undecodable bytes replaced.

    Example::

        >>> decode_robots(b"\\xef\\xbb\\xbfUser-agent: *\\n")
        'User-agent: *\\n'
        >>> decode_robots(b"\\xef\\xbbUser-agent: *\\n")
        'User-agent: *\\n'
    """
    for cut in (3, 2, 1):
        if body.startswith(_BOM_BYTES[:cut]):
            body = body[cut:]
            break
    return body.decode("utf-8", errors="replace")


def parse_robots(text: str, product: str) -> Protego:
    """robots.txt ``text`` parsed for the crawler whose product token is ``product``.

    The text is rewritten first (see the module docstring): a leading byte-order mark
    dropped, ``User-agent`` values reduced to their product token and every token other than
    ``product`` and ``*`` replaced by one protego cannot confuse with it, unknown lines
    dropped, over-long lines cut.

    Example::

        >>> rules = parse_robots("User-agent: rag\\nDisallow: /\\n", "ragsync")
        >>> rules.can_fetch("https://example.org/a", "ragsync")
        True
    """
    mine = product.lower()
    lines = []
    for line in text.removeprefix(_BOM).splitlines():
        line = line.encode()[:MAX_LINE_BYTES].decode(errors="ignore")
        rule = line.split("#", 1)[0]
        agent = _USER_AGENT_LINE.fullmatch(rule)
        if agent:
            lines.append(f"User-agent: {_group_token(agent.group(1), mine)}")
            continue
        field = _FIELD.match(rule)
        if field and field.group(1).lower() not in _KNOWN_FIELDS:
            continue  # RFC 9309 §2.2.4: an unknown record, ignored (and no group boundary)
        lines.append(line)
    return Protego.parse("\n".join(lines))


def _group_token(value: str, mine: str) -> str:
    """What a ``User-agent`` line names, as protego should see it: ``*``, ``mine``, or a
    token that is never a substring of ``mine`` (protego's matching)."""
    value = value.strip()
    if value.startswith("*"):
        return "*"
    token = _PRODUCT_TOKEN.match(value)
    if token and token.group().lower() == mine:
        return mine
    return f"{mine}-other-crawler"


def robots_target(url: str) -> str:
    """What robots.txt rules are matched against: the path and query of ``url`` as written
    (RFC 9309 §2.2.2), the fragment dropped. An empty path is ``/``; a ``?`` with nothing
    after it stays.

    Example::

        >>> robots_target("https://Example.org/search?q=a&page=2&utm_source=x#top")
        '/search?q=a&page=2&utm_source=x'

    Raises:
        ValueError: ``url`` is not an absolute http(s) URL (see :func:`ragsync.urls.split_url`).
    """
    parts = split_url(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.has_query else "")


class RobotsPolicy:
    """Answers "may this User-Agent fetch this URL?", reading each host's robots.txt once.

    Args:
        get_text: the text of a URL; raises ``FetchError`` (with ``status`` for HTTP errors).
            The engine passes the discovery context's cached, conditional reader, decoding
            with :func:`decode_robots` (a byte-order mark left in the text is dropped here
            all the same).
        user_agent: the product token is matched against robots.txt groups.
    """

    def __init__(self, get_text: Callable[[str], str], user_agent: str):
        self._get_text = get_text
        # RFC 9309 §2.2.1: groups match the product token ("ragsync" of "ragsync/0.1 (+…)");
        # protego matches by substring, so the whole string would let a group named after
        # any word of it ("pypi", "project") pass for ragsync's own.
        self.user_agent = product_token(user_agent)
        self._rules: dict[str, Protego | bool] = {}
        self._unreachable: dict[str, str] = {}
        self._lasting: set[str] = set()
        self._paused: dict[str, HostPaused] = {}  # hosts paused when their robots.txt was due
        self.requests = 0

    def _load(self, host: str) -> Protego | bool:
        """Parsed rules, or True (allow all) / False (disallow all)."""
        self.requests += 1
        try:
            text = self._get_text(f"{host}/robots.txt")
        except FetchError as exc:
            if isinstance(exc.__cause__, HostPaused):
                # The host is paused (Retry-After): not unreachable, its pages wait for the
                # pause to end (deferred), and robots.txt is read then: in a later pass, not
                # asked again for each page of this one.
                self._paused[host] = exc.__cause__
                raise exc.__cause__ from None
            if exc.status is not None and 400 <= exc.status < 500:
                return True  # RFC 9309 §2.3.1.3: unavailable → no restriction
            # §2.3.1.4: unreachable → assume complete disallow (for now: retried later) …
            self._unreachable[host] = f"robots.txt unreachable: {exc.reason}"
            if exc.status is None and not exc.transient:  # … unless asking again cannot help:
                self._lasting.add(host)  # refused by the private-network guard, a bad URL
            return False
        return parse_robots(text, self.user_agent)

    def unreachable(self, url: str) -> str | None:
        """Why the host's robots.txt could not be read, or None."""
        return self._unreachable.get(host_of(url))

    def lasting(self, url: str) -> bool:
        """Whether the host's robots.txt cannot be read whatever the time (a request the
        private-network guard refuses): its pages fail without retries."""
        return host_of(url) in self._lasting

    def knows(self, url: str) -> bool:
        """True once ``url``'s host robots.txt has been fetched."""
        return host_of(url) in self._rules

    def allowed(self, url: str) -> bool:
        """Whether robots.txt lets ragsync fetch ``url``, reading the host's file once.

        Args:
            url: the URL *as published*: as the sitemap, feed, list or ``Location`` header
                wrote it (made absolute), not its canonical form. Its host may be spelled
                either way (``host_of`` canonicalizes it), but its path and query are matched
                as written. A URL that is not an absolute http(s) URL is not allowed.

        Raises:
            HostPaused: the host's robots.txt is not read yet and the host is paused (a
                Retry-After past ``max_pause_wait``): its pages are deferred, not refused.
        """
        try:
            target = robots_target(url)
        except ValueError:
            return False
        host = host_of(url)
        paused = self._paused.get(host)
        if paused is not None and paused.until > time.time():
            raise paused
        if host not in self._rules:
            self._rules[host] = self._load(host)
        rules = self._rules[host]
        if isinstance(rules, bool):
            return rules
        # A whole URL, not the bare target: protego reads a target starting with "//" as an
        # authority.
        return bool(rules.can_fetch(f"{host}{target}", self.user_agent))

    def crawl_delay(self, url: str) -> float | None:
        rules = self._rules.get(host_of(url))
        if isinstance(rules, Protego):
            return rules.crawl_delay(self.user_agent)
        return None


def product_token(user_agent: str) -> str:
    """The product token of a User-Agent string, what robots.txt groups name.

    Example::

        >>> product_token("ragsync/0.1.0 (+https://pypi.org/project/ragsync/)")
        'ragsync'
    """
    words = user_agent.strip().split()
    return words[0].split("/", 1)[0] if words else user_agent
