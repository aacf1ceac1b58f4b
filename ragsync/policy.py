"""Pure decisions about fetched responses (no I/O): what a status and a body mean for a page."""

from __future__ import annotations

import hashlib
from typing import Literal

Verdict = Literal[
    "not_modified",  # 304: only last_checked_at moves
    "content",  # 200 with a text body: hash, then extract
    "missing",  # 404/410: evidence of deletion, never a deletion by itself
    "rate_limited",  # 429
    "needs_attention",  # 401/403: no blind retry
    "retry",  # 5xx and other transient statuses
    "refused",  # anything else: the page ends with a recorded reason
]

HTML_TYPES = frozenset({"", "text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"text/plain", "text/markdown", "text/x-markdown"})


def classify(status: int, content_type: str, body: bytes) -> tuple[Verdict, str]:
    """The verdict on a response and, when it is not usable content, the reason.

    Example::

        >>> classify(304, "", b"")
        ('not_modified', '')
        >>> classify(200, "image/png", b"...")
        ('refused', 'not a text page: content type image/png')
    """
    if status == 304:
        return "not_modified", ""
    if status in (404, 410):
        return "missing", f"HTTP {status}"
    if status == 429:
        return "rate_limited", "HTTP 429"
    if status in (401, 403):
        return "needs_attention", f"HTTP {status}"
    if status >= 500 or status == 408:
        return "retry", f"HTTP {status}"
    if status != 200:
        return "refused", f"HTTP {status}"
    if content_type not in HTML_TYPES and content_type not in TEXT_TYPES:
        return "refused", f"not a text page: content type {content_type}"
    if not body.strip():
        return "refused", "empty body on HTTP 200"
    return "content", ""


def raw_hash(body: bytes) -> str:
    """sha256 of the raw body: the cheap shortcut before extraction."""
    return hashlib.sha256(body).hexdigest()
