"""What is not the page: outage, challenge and error pages served with 200 (README "Deletion
safety", *Outage pages*). Pure decisions, no I/O; :mod:`ragsync.pipeline.outages` applies them.

Three rules keep such a body out of the index:

- **One page.** A short body that carries a marker of a bot challenge or a maintenance /
  gateway error page (at most :data:`NOT_PAGE_WORDS` words of text) or of a
  JavaScript-required shell (at most :data:`SHELL_WORDS`) (:func:`not_the_page`), or any 200
  that carries ``Retry-After`` (a server saying "come back later" about what it sent), is
  never content: the page keeps what it had and is asked again.
- **Many pages.** When ``outage_pages`` or more pages of one host that had content of their
  own, and at least ``outage_share`` of the pages of a window that answered that host with
  200, arrive at one and the same text (:func:`shape`: request ids and times masked, so a
  per-request "Ray ID" does not tell them apart), that text is the host's outage page
  (:func:`outage_shapes`).
- **A change held until confirmed.** A long page whose text shrinks to almost nothing
  (:func:`shrinks`), or two records of distinct texts arriving at one text, look like an
  outage and may be one: the change waits for the missing-page rule's confirmations.

The markers were measured on real documentation (``python eval/bench_outage.py``): none of
them holds a page of the Rust, Node.js, npm, Valgrind, libxslt, libffi or Python docs installed
on the development machine, and every sample of ``tests/fixtures/outage`` is recognised.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

NOT_PAGE_WORDS = 120
"""A page with a marker and at most this many words of text is not the page; a longer one is
(a documentation page about Cloudflare's challenge mentions "Just a moment" too)."""
SHELL_WORDS = 30
"""… and a JavaScript-required shell at most this many: it is all shell, a short post with a
comment widget's ``<noscript>`` is a page."""
SHRINK_MIN_WORDS = 50
"""A page shorter than this may shrink as it likes: a stub edited is not an outage."""
NEAR_EMPTY_WORDS = 60
"""A page shrunk to more words than this is a page: FastAPI 0.140.0 cut two pages of 1,150 and
3,024 words to stubs of 95 and 125 that point elsewhere; login walls and maintenance pages
say less."""

# An error page's <title> is the error alone: a status code, the phrase, at most a server or
# vendor name after it ("503 Service Temporarily Unavailable", "502 Bad Gateway | openresty");
# a reference page about the status ("503 Service Unavailable - HTTP | MDN") says more.
_ERROR_TITLE = (
    r"<title>\s*(\d{3}\s*[:-]?\s*)?(service (temporarily )?unavailable|bad gateway"
    r"|gateway time-?out|internal server error|web server is down|origin error|access denied"
    r"|request blocked)\s*([|:-]\s*[\w. ]{0,20})?</title>"
)
# Markers in the raw HTML (lowercased, its first 64 KiB): the challenge pages of the common
# bot shields, JavaScript-required shells and maintenance and gateway error pages.
_MARKERS: tuple[tuple[str, int, re.Pattern[str]], ...] = tuple(
    (name, limit, re.compile(pattern))
    for name, limit, pattern in (
        # Cloudflare's interstitial (its JS Detections script, challenge-platform/…/jsd/,
        # loads on pages that render fine, so only the challenge's own paths count).
        (
            "bot challenge",
            NOT_PAGE_WORDS,
            r"challenge-platform/(h/[a-z]/)?orchestrate|_cf_chl_opt|cf-browser-verification",
        ),
        (
            "bot challenge",
            NOT_PAGE_WORDS,
            r"<title>\s*(just a moment|attention required|please wait)\b",
        ),
        (
            "bot challenge",
            NOT_PAGE_WORDS,
            r"checking (your browser|if the site connection is secure)"
            r"|verif(y|ying) (that )?you are (a )?human|<title>\s*ddos-guard\s*</title>"
            r"|making sure you(&#39;|'|’)re not a bot|vercel security checkpoint",
        ),
        (
            "bot challenge",
            NOT_PAGE_WORDS,
            r"captcha-delivery\.com|px-captcha|incapsula incident id|_incapsula_resource"
            r"|sucuri website firewall",
        ),
        (
            "maintenance page",
            NOT_PAGE_WORDS,
            r"<(title|h1)[^>]*>[^<]*(down for maintenance|under maintenance|site maintenance"
            r"|maintenance in progress|be (right )?back soon)"
            r"|<title>\s*(\d{3}\s*)?[^<]{0,20}temporarily unavailable",
        ),
        ("error page", NOT_PAGE_WORDS, _ERROR_TITLE),
    )
)
_NOSCRIPT = re.compile(r"<noscript[^>]*>(.{0,400}?)</noscript>", re.S)
_TAG = re.compile(r"<[^>]*>")
_SHELL = re.compile(
    r"(enable|turn on|requires?|needs?)\b.{0,40}javascript|javascript.{0,40}(required|disabled"
    r"|to continue)"
)
_WIDGET = re.compile(r"comment|disqus")  # a comment widget's own <noscript>: the page is there
_HEAD_BYTES = 65536
_WORD = re.compile(r"\w+")
# What differs between two requests for one outage page: request and incident ids (hex, or
# long digit runs), times of day. Short numbers are kept: pages that differ only in them
# (``_mm_add_epi8`` and ``_mm_add_epi16``) are distinct pages.
_VOLATILE = re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b|\d{5,}|\b\d{1,2}:\d{2}(:\d{2})?\b", re.I)


def marker(body: bytes) -> tuple[str, int] | None:
    """The kind of not-the-page marker in the first 64 KiB of ``body`` and the most words of
    text a page with it may have to be taken as not the page, or None.

    Example::

        >>> marker(b"<title>Just a moment...</title><p>Checking your browser</p>")
        ('bot challenge', 120)
        >>> marker(b"<title>Maintenance windows</title><p>Plan them ahead.</p>") is None
        True
        >>> marker(b"<title>503 Service Unavailable - HTTP | MDN Web Docs</title>") is None
        True
    """
    head = body[:_HEAD_BYTES].decode("latin-1").lower()
    for name, limit, pattern in _MARKERS:
        if pattern.search(head):
            return name, limit
    for match in _NOSCRIPT.finditer(head):
        text = _TAG.sub(" ", match.group(1))
        if _SHELL.search(text) and not _WIDGET.search(text):
            return "JavaScript-required shell", SHELL_WORDS
    return None


def words(markdown: str) -> int:
    """Words of text in ``markdown``."""
    return len(_WORD.findall(markdown))


def not_the_page(body: bytes, markdown: str) -> str | None:
    """Why a 200 body is not the page (a bot challenge, a JavaScript-required shell, a
    maintenance or error page), or None: a marker, and no more words of extracted text than
    a page with it has (:data:`NOT_PAGE_WORDS`, :data:`SHELL_WORDS`).

    Example::

        >>> not_the_page(b"<title>Just a moment...</title>", "# 127.0.0.1\\n\\nOne moment.")
        'bot challenge'
        >>> not_the_page(b"<title>Just a moment...</title>", "word " * 500) is None
        True
        >>> shell = b"<noscript>You need to enable JavaScript to run this app.</noscript>"
        >>> not_the_page(shell, "Example Docs"), not_the_page(shell, "A short post. " * 12)
        ('JavaScript-required shell', None)
        >>> widget = b"<noscript>Please enable JavaScript to view the <a>comments</a></noscript>"
        >>> not_the_page(widget, "A short post.") is None
        True
    """
    found = marker(body)
    if found is None:
        return None
    kind, limit = found
    return kind if words(markdown) <= limit else None


def shape(markdown: str, title: str) -> str:
    """What pages serving one outage page have in common: sha256 of the title and text with
    request ids and times masked (a per-request reference does not tell them apart).

    Example::

        >>> shape("Ray ID: 8a1f2e3d4c5b", "Oops") == shape("Ray ID: 77aa99bb00cc", "Oops")
        True
        >>> shape("_mm_add_epi8 adds", "x") == shape("_mm_add_epi16 adds", "x")
        False
    """
    masked = _VOLATILE.sub("0", f"{title}\n{markdown}")
    return hashlib.sha256(masked.encode("utf-8")).hexdigest()


def shrinks(old_words: int, new_words: int, *, share: float) -> bool:
    """Whether a page of ``old_words`` words edited to ``new_words`` keeps less than ``share``
    of them and at most :data:`NEAR_EMPTY_WORDS`: a near-empty body replacing a long page
    (``share`` 0: never).

    Example::

        >>> shrinks(800, 12, share=0.1), shrinks(800, 400, share=0.1), shrinks(30, 1, share=0.1)
        (True, False, False)
        >>> shrinks(1150, 95, share=0.1)  # a real page cut to a stub
        False
    """
    return (
        old_words >= SHRINK_MIN_WORDS
        and new_words <= NEAR_EMPTY_WORDS
        and new_words < old_words * share
    )


def outage_shapes(
    arrivals: Mapping[tuple[str, str], int],
    answered: Mapping[str, int],
    *,
    min_pages: int,
    share: float,
) -> set[tuple[str, str]]:
    """The ``(host, shape)`` of ``arrivals`` (pages that arrived at that text, by host and
    shape) that are outage pages: at least ``min_pages`` pages (0: never) and at least
    ``share`` of the pages that answered the host with 200 (``answered``).

    Example::

        >>> outage_shapes({("h", "m"): 5, ("h", "a"): 1}, {"h": 6}, min_pages=3, share=0.5)
        {('h', 'm')}
        >>> outage_shapes({("h", "m"): 3}, {"h": 60}, min_pages=3, share=0.5)
        set()
    """
    if min_pages <= 0:
        return set()
    return {
        key
        for key, count in arrivals.items()
        if count >= min_pages and count >= share * answered.get(key[0], 0)
    }
