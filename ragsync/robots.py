"""robots.txt (RFC 9309) through protego, one parsed file per host per run (revalidated
conditionally across runs by the engine's discovery cache)."""

from __future__ import annotations

from collections.abc import Callable

from protego import Protego

from ragsync.errors import FetchError
from ragsync.urls import host_of

_BOM = "\ufeff"


def decode_robots(body: bytes) -> str:
    """The text of a robots.txt body: UTF-8 (RFC 9309 §2.3), a leading byte-order mark
    dropped (else the first line, usually ``User-agent``, is not recognised and its whole
    group is lost), undecodable bytes replaced.

    Example::

        >>> decode_robots(b"\\xef\\xbb\\xbfUser-agent: *\\n")
        'User-agent: *\\n'
    """
    return body.decode("utf-8-sig", errors="replace")


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
        self.requests = 0

    def _load(self, host: str) -> Protego | bool:
        """Parsed rules, or True (allow all) / False (disallow all)."""
        self.requests += 1
        try:
            text = self._get_text(f"{host}/robots.txt")
        except FetchError as exc:
            if exc.status is not None and 400 <= exc.status < 500:
                return True  # RFC 9309 §2.3.1.3: unavailable → no restriction
            # §2.3.1.4: unreachable → assume complete disallow (for now: retried later)
            self._unreachable[host] = f"robots.txt unreachable: {exc.reason}"
            return False
        return Protego.parse(text.removeprefix(_BOM))

    def unreachable(self, url: str) -> str | None:
        """Why the host's robots.txt could not be read (a transient failure), or None."""
        return self._unreachable.get(host_of(url))

    def knows(self, url: str) -> bool:
        """True once ``url``'s host robots.txt has been fetched."""
        return host_of(url) in self._rules

    def allowed(self, url: str) -> bool:
        host = host_of(url)
        if host not in self._rules:
            self._rules[host] = self._load(host)
        rules = self._rules[host]
        if isinstance(rules, bool):
            return rules
        return bool(rules.can_fetch(url, self.user_agent))

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
