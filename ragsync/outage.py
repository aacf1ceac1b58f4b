"""What is not the page: outage, challenge and error pages served with 200 (README "Deletion
safety", *Outage pages*). Pure decisions, no I/O; :mod:`ragsync.pipeline.outages` applies them.

Three rules keep such a body out of the index:

- **One page.** A short body (at most :data:`NOT_PAGE_WORDS` words of text) that carries a
  marker of a bot challenge, a JavaScript-required shell or a maintenance / gateway error page
  (:func:`not_the_page`), or any 200 that carries ``Retry-After`` (a server saying "come back
  later" about what it sent), is never content: the page keeps what it had and is asked again.
- **Many pages.** When ``outage_pages`` or more pages of one host that had content of their
  own, and at least ``outage_share`` of the pages of a window that answered that host with
  200, arrive at one and the same text (:func:`shape`: request ids and times masked, so a
  per-request "Ray ID" does not tell them apart), that text is the host's outage page
  (:func:`outage_shapes`).
- **A change held until confirmed.** A long page whose text shrinks to a small part of itself
  (:func:`shrinks`), or two records of distinct texts arriving at one text, look like an
  outage and may be one: the change waits for the missing-page rule's confirmations.

The markers were measured on real documentation (``python eval/bench_outage.py``): none of
them fires on a page of the Rust, Node.js, npm, Valgrind, libxslt or libffi docs installed on
the development machine.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

NOT_PAGE_WORDS = 120
"""A page with a marker and at most this many words of text is not the page; a longer one is
(a documentation page about Cloudflare's challenge mentions "Just a moment" too)."""
SHRINK_MIN_WORDS = 50
"""A page shorter than this may shrink as it likes: a stub edited is not an outage."""

# Markers in the raw HTML (lowercased, its first 64 KiB): the challenge pages of the common
# bot shields, JavaScript-required shells and the titles of maintenance and gateway pages.
_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        # Cloudflare's interstitial (its JS Detections script, challenge-platform/…/jsd/,
        # loads on pages that render fine, so only the challenge's own paths count).
        (
            "bot challenge",
            r"challenge-platform/(h/[a-z]/)?orchestrate|_cf_chl_opt|cf-browser-verification",
        ),
        ("bot challenge", r"<title>\s*(just a moment|attention required|please wait)\b"),
        (
            "bot challenge",
            r"checking (your browser|if the site connection is secure)"
            r"|verif(y|ying) (that )?you are (a )?human|ddos-guard|ddos protection by"
            r"|making sure you(&#39;|'|’)re not a bot|vercel security checkpoint",
        ),
        (
            "bot challenge",
            r"captcha-delivery\.com|px-captcha|incapsula incident id|_incapsula_resource"
            r"|sucuri website firewall",
        ),
        (
            "JavaScript-required shell",
            r"<noscript[^>]*>[^<]*(enable|turn on|requires?|needs?)[^<]{0,40}javascript"
            r"|<noscript[^>]*>[^<]*javascript[^<]{0,40}(required|disabled|to continue)",
        ),
        (
            "maintenance page",
            r"<(title|h1)[^>]*>[^<]*(down for maintenance|under maintenance|site maintenance"
            r"|maintenance in progress|be (right )?back soon|temporarily unavailable)",
        ),
        (
            "error page",
            r"<(title|h1)[^>]*>[^<]*(service unavailable|bad gateway|gateway time-?out"
            r"|internal server error|web server is down|origin error|access denied"
            r"|request blocked)",
        ),
    )
)
_HEAD_BYTES = 65536
_WORD = re.compile(r"\w+")
# What differs between two requests for one outage page: request and incident ids (hex, or
# long digit runs), times of day. Short numbers are kept: pages that differ only in them
# (``_mm_add_epi8`` and ``_mm_add_epi16``) are distinct pages.
_VOLATILE = re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b|\d{5,}|\b\d{1,2}:\d{2}(:\d{2})?\b", re.I)


def marker(body: bytes) -> str | None:
    """The kind of not-the-page marker in the first 64 KiB of ``body``, or None.

    Example::

        >>> marker(b"<title>Just a moment...</title><p>Checking your browser</p>")
        'bot challenge'
        >>> marker(b"<title>Maintenance windows</title><p>Plan them ahead.</p>") is None
        True
    """
    head = body[:_HEAD_BYTES].decode("latin-1").lower()
    for name, pattern in _MARKERS:
        if pattern.search(head):
            return name
    return None


def words(markdown: str) -> int:
    """Words of text in ``markdown``."""
    return len(_WORD.findall(markdown))


def not_the_page(body: bytes, markdown: str) -> str | None:
    """Why a 200 body is not the page (a bot challenge, a JavaScript-required shell, a
    maintenance or error page), or None: a marker and at most :data:`NOT_PAGE_WORDS` words
    of extracted text.

    Example::

        >>> not_the_page(b"<title>Just a moment...</title>", "# 127.0.0.1\\n\\nOne moment.")
        'bot challenge'
        >>> not_the_page(b"<title>Just a moment...</title>", "word " * 500) is None
        True
    """
    kind = marker(body)
    return kind if kind is not None and words(markdown) <= NOT_PAGE_WORDS else None


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
    of them: a near-empty body replacing a long page (``share`` 0: never).

    Example::

        >>> shrinks(800, 12, share=0.1), shrinks(800, 400, share=0.1), shrinks(30, 1, share=0.1)
        (True, False, False)
    """
    return old_words >= SHRINK_MIN_WORDS and new_words < old_words * share


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
