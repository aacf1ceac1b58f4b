"""Identity in one place: record keys and vector point ids.

A record is a source's page (or API record) under its canonical URL; a point is one chunk of a
record embedded with one model. Both are pure functions of their inputs, so a re-run computes
the same ids (README "Architecture": identity).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from ragsync.urls import canonical_url


def record_key(source_id: str, url: str, strip_params: Iterable[str] = ()) -> str:
    """The state DB key of a source's page: ``<source id>:<canonical URL>``.

    >>> record_key("docs", "HTTPS://Example.org:443/a?utm_source=x#top")
    'docs:https://example.org/a'
    """
    return f"{source_id}:{canonical_url(url, strip_params)}"


def canonical_record_key(source_id: str, canonical: str) -> str:
    """The record key of a URL already in canonical form (as every URL past the listing is):
    :func:`record_key` without canonicalising again.

        >>> canonical_record_key("docs", "https://example.org/a")
        'docs:https://example.org/a'
    """
    return f"{source_id}:{canonical}"


def point_id(doc_key: str, chunk_hash: str, model_id: str) -> str:
    """Deterministic vector point id: uuid5 over (record key, chunk hash, model id); a
    document holds each chunk text once (:func:`ragsync.chunkdiff.diff_chunks`).

        >>> point_id("docs:https://example.org/a", "ab12", "m") == point_id(
        ...     "docs:https://example.org/a", "ab12", "m")
        True
    """
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{doc_key}\n{chunk_hash}\n{model_id}"))


def api_record_key(source_id: str, record_id: str) -> str:
    """The state DB key of an API record: the provider's id, not a URL.

    >>> api_record_key("tickets", "42")
    'tickets:id:42'
    """
    return f"{source_id}:id:{record_id}"
