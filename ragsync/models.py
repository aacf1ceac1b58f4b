"""Frozen values that flow between the pipeline's stages."""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal
from urllib.parse import urljoin, urlsplit

ChangeType = Literal["created", "updated", "removed", "restored"]
OpKind = Literal["upsert", "delete", "set_payload"]


class DocumentStatus(StrEnum):
    """A document's ``status`` column (README "Deletion safety"); members equal their values.

    Example::

        >>> DocumentStatus("tombstoned") == "tombstoned"
        True
    """

    ACTIVE = "active"  # indexed and answering
    SUSPECTED_MISSING = "suspected_missing"  # missing evidence seen: still retrievable
    TOMBSTONED = "tombstoned"  # deleted from the index; the row stays for the change log


class AttemptState(StrEnum):
    """A failed page's ``fetch_attempts.state``: what happens to it next."""

    RETRYING = "retrying"  # due again at next_retry_at
    DEAD = "dead"  # retries exhausted: held back until a person or a listing change acts
    ATTENTION = "attention"  # 401/403: a person must act; no blind retry
    REFUSED = "refused"  # the page cannot be indexed as served (type, empty body, status)
    MISSING = "missing"  # 404/410 before the page was ever indexed


class Verdict(StrEnum):
    """What a response means for a page (:func:`ragsync.policy.classify`)."""

    NOT_MODIFIED = "not_modified"  # 304: only last_checked_at moves
    CONTENT = "content"  # 200 with a text body: hash, then extract
    MISSING = "missing"  # 404/410: evidence of deletion, never a deletion by itself
    RATE_LIMITED = "rate_limited"  # 429
    NEEDS_ATTENTION = "needs_attention"  # 401/403: no blind retry
    RETRY = "retry"  # 5xx and other transient statuses
    TEMPORARY_REDIRECT = "temporary_redirect"  # 302/303/307: content kept, page retried
    REFUSED = "refused"  # anything else: the page ends with a recorded reason


def media_type(content_type: str) -> str:
    """The media type of a ``Content-Type`` value, parameters dropped: ``"text/html"``."""
    return content_type.split(";", 1)[0].strip().lower()


REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})  # RFC 9110 §15.4 (with Location)
TEMPORARY_REDIRECTS = frozenset({302, 303, 307})  # 301 and 308 are permanent


@dataclass(frozen=True)
class Candidate:
    """A URL a source connector proposes for (re)validation.

    ``lastmod`` is a hint for ordering work (a sitemap's ``<lastmod>``), never proof of change.
    """

    url: str
    lastmod: str | None = None
    priority: float = 0.0
    record_id: str | None = None  # the provider's stable id: the record key instead of the URL
    content: str | None = None  # Markdown of the record itself: indexed without fetching
    title: str | None = None
    deleted: bool = False  # an authoritative deletion signal: tombstone at once
    # The URL as the source wrote it (made absolute), when it differs from the canonical
    # ``url``: what robots.txt is matched against and what is requested (README "URLs").
    published: str | None = None


def work_item(doc_key: str, candidate: Candidate, *, unlisted: bool) -> dict[str, Any]:
    """A due page as a row of the shared work queue (:meth:`ragsync.state.work.WorkQueue.add`)."""
    fields = {
        "record_id": candidate.record_id,
        "content": candidate.content,
        "title": candidate.title,
        "deleted": candidate.deleted or None,
        "published": candidate.published,
    }
    kept = {name: value for name, value in fields.items() if value is not None}
    record = json.dumps(kept) if kept else None
    return {
        "doc_key": doc_key,
        "url": candidate.url,
        "lastmod": candidate.lastmod,
        "record": record,
        "unlisted": int(unlisted),
    }


def work_candidate(row: Mapping[str, Any]) -> tuple[str, Candidate, bool]:
    """The page a claimed work-queue row stands for: ``(doc_key, candidate, unlisted)``."""
    record = json.loads(row["record"]) if row["record"] else {}
    candidate = Candidate(url=row["url"], lastmod=row["lastmod"], **record)
    return row["doc_key"], candidate, bool(row["unlisted"])


@dataclass(frozen=True)
class Checkpoint:
    """Yielded by a source between candidates: persist ``value`` once every candidate yielded
    before it is committed (a cursor, a next-page URL, a feed's newest entry)."""

    value: Any


@dataclass(frozen=True)
class Response:
    """The part of an HTTP response the pipeline needs.

    ``headers`` maps lowercase names to the latin-1 text of the raw value bytes (lossless:
    ``value.encode("latin-1")`` gives the bytes back). ``redirects`` lists the redirects
    followed to get here, as ``(status, URL that answered with it)``, oldest first.
    """

    url: str  # final URL after redirects (for an unfollowed redirect: the URL that sent it)
    status: int
    headers: dict[str, str]
    body: bytes
    requested_url: str = ""
    redirects: tuple[tuple[int, str], ...] = ()

    @property
    def location(self) -> str | None:
        """Where a redirect (301, 302, 303, 307, 308) points: its ``Location`` resolved against
        ``url`` (RFC 9110 §10.2.2), or None for another status or a missing, unparseable or
        non-HTTP(S) Location.

        Example::

            >>> Response("https://x.org/a/b", 302, {"location": "../c"}, b"").location
            'https://x.org/c'
        """
        value = self.headers.get("location", "").strip()
        if self.status not in REDIRECT_STATUSES or not value:
            return None
        with suppress(UnicodeError):  # values are latin-1 text of their bytes; UTF-8 is common
            value = value.encode("latin-1").decode("utf-8")
        try:
            target = urljoin(self.url, value)
            parts = urlsplit(target)
            parts.port  # noqa: B018 - raises ValueError on a port out of range
        except ValueError:
            return None
        return target if parts.scheme in ("http", "https") and parts.hostname else None

    @property
    def etag(self) -> str | None:
        return self.headers.get("etag")

    @property
    def last_modified(self) -> str | None:
        return self.headers.get("last-modified")

    @property
    def content_type(self) -> str:
        return media_type(self.headers.get("content-type", ""))


@dataclass(frozen=True)
class Extracted:
    """Clean Markdown of one page and the hash that decides whether it changed."""

    title: str
    markdown: str
    content_hash: str
    extractor: str  # "trafilatura", "markdownify", "docs:<generator>" or "record"


@dataclass(frozen=True)
class Chunk:
    """One embeddable piece of a document.

    ``text`` is exactly what is embedded and stored as ``page_content``: the heading path, a
    blank line, then the chunk's Markdown. ``chunk_hash`` is sha256 of ``text``.
    """

    index: int
    text: str
    headings: tuple[str, ...]
    chunk_hash: str
    tokens: int


@dataclass(frozen=True)
class StoredChunk:
    """A chunk as the state DB holds it for one document."""

    point_id: str
    chunk_index: int
    chunk_hash: str
    text: str
    headings: tuple[str, ...]
    tokens: int
    last_changed_at: str


@dataclass(frozen=True)
class ChunkDiff:
    """What one document's new chunk list means for the vector store
    (see :mod:`ragsync.chunkdiff`)."""

    add: tuple[StoredChunk, ...]
    remove: tuple[StoredChunk, ...]
    keep: tuple[StoredChunk, ...]
    repayload: tuple[StoredChunk, ...]  # kept points whose payload must be updated
    folded: int = 0  # chunks whose text came earlier in the document: stored once

    @property
    def changed(self) -> bool:
        return bool(self.add or self.remove or self.repayload)


@dataclass(frozen=True)
class Change:
    """One row of the append-only change log."""

    id: int
    run_id: str
    change_type: ChangeType
    source: str
    url: str
    doc_key: str
    at: str
    old_hash: str | None
    new_hash: str | None
    chunks_added: int
    chunks_removed: int
    chunks_kept: int
    magnitude: float
    diff: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Change:
        return cls(
            id=row["id"],
            run_id=row["run_id"],
            change_type=row["change_type"],
            source=row["source_id"],
            url=row["url"],
            doc_key=row["doc_key"],
            at=row["at"],
            old_hash=row["old_hash"],
            new_hash=row["new_hash"],
            chunks_added=row["chunks_added"],
            chunks_removed=row["chunks_removed"],
            chunks_kept=row["chunks_kept"],
            magnitude=row["magnitude"],
            diff=row["diff"] or "",
        )


@dataclass(frozen=True)
class Hit:
    """One search result."""

    score: float
    text: str
    url: str
    title: str
    headings: tuple[str, ...]
    source: str
    doc_key: str
    point_id: str
    # Hybrid search: the scores the two rankings gave (None: the chunk was not among one
    # ranking's candidates); ``score`` is then the fused score.
    dense_score: float | None = None
    sparse_score: float | None = None
    chunk_index: int = 0  # the chunk's place in its page
    # The other pages holding the same chunk text (an aggregate page that repeats every page,
    # such as a single-page edition): collapsed into this hit (README "Hybrid search").
    also: tuple[str, ...] = ()

    @classmethod
    def from_payload(cls, point_id: Any, score: float, payload: dict[str, Any]) -> Hit:
        """A hit from a stored LangChain-compatible payload (what every store keeps)."""
        meta = payload.get("metadata", {})
        return cls(
            score=float(score),
            text=payload.get("page_content", ""),
            url=meta.get("url", ""),
            title=meta.get("title", ""),
            headings=tuple(meta.get("headings", ())),
            source=meta.get("source", ""),
            doc_key=meta.get("doc_key", ""),
            point_id=str(point_id),
            chunk_index=int(meta.get("chunk_index") or 0),
        )


@dataclass(frozen=True)
class StoreOp:
    """One idempotent vector-store operation from the journal."""

    seq: int
    op: OpKind
    point_id: str
    payload: dict | None = None
    text_hash: str | None = None
    model_id: str | None = None


@dataclass
class Counters:
    """Run counters. Names match the run report and ``/metrics`` (README "CLI reference")."""

    candidates_discovered: int = 0
    discovery_parsed: int = 0  # sitemaps / feeds / API pages fetched and parsed
    discovery_not_modified: int = 0  # … that answered 304: nothing parsed
    conditional_requests_sent: int = 0
    requests_sent: int = 0
    responses_304: int = 0
    responses_200_changed: int = 0
    responses_200_unchanged: int = 0
    responses_404: int = 0
    responses_429: int = 0
    fetch_errors: int = 0
    robots_disallowed: int = 0
    held_back: int = 0  # not requested: retry not yet due, dead letter or needs attention
    not_due: int = 0  # not requested: the page's adaptive revisit time has not come
    sources_not_due: int = 0  # sources skipped: their cadence (every / cron) has not come
    deferred: int = 0  # not requested: the host is paused (Retry-After) past max_pause_wait
    retries_scheduled: int = 0
    parse_failures: int = 0
    documents_created: int = 0
    documents_updated: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    chunks_folded: int = 0  # chunk texts a page repeats: stored once, at their first place
    sparse_computed: int = 0  # sparse vectors computed (texts never encoded before)
    points_upserted: int = 0
    points_deleted: int = 0
    payloads_updated: int = 0
    journal_replayed: int = 0
    tombstones_created: int = 0
    records_moved: int = 0  # renamed pages (301 / rel=canonical) whose record moved
    duplicates: int = 0  # pages whose content another URL of the source holds: an alias
    moves_suspected: int = 0  # permanent redirects seen but not yet confirmed: content kept
    temporary_redirects: int = 0  # 302/303/307: content kept, page retried
    listings_incomplete: int = 0  # listings that failed in part: no "unlisted" evidence
    outage_pages: int = 0  # pages that served an outage, challenge or error page with 200: kept
    changes_held: int = 0  # changes waiting for the missing-page rule's confirmation: kept
    out_of_scope: int = 0  # listed URLs outside the source's hosts: never requested
    noindex: int = 0  # crawled pages that ask not to be indexed (robots noindex): not indexed
    not_text: int = 0  # crawled links to files (JSON, images) never indexed: skipped, no failure
    events_delivered: int = 0
    pages_queued: int = 0  # workers: due pages put on the shared work queue
    # Pages asked in full without the validators they have: refetch due, host distrusted, a
    # disagreement settled, or asked for (README "Validators that lie").
    refetches: int = 0
    validator_disagreements: int = 0  # 304s while the listing's lastmod moved
    validator_lies: int = 0  # … settled: the page had changed under the validators it had

    def add(self, other: Counters) -> None:
        for name, value in vars(other).items():
            setattr(self, name, getattr(self, name) + value)

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


@dataclass
class SourceOutcome:
    """One source's part of a run."""

    ok: bool = True
    counters: Counters = field(default_factory=Counters)
    errors: list[str] = field(default_factory=list)
    # Why the source's listing was incomplete (empty: complete, or not listed this run).
    incomplete: list[str] = field(default_factory=list)
    # Outage pages found this run (README "Deletion safety", outage pages).
    outages: list[str] = field(default_factory=list)
    # Its listing was not due this run: when it is, and the cadence that says so (README
    # "CLI reference": `listing_not_due` in the run report).
    not_due: dict[str, Any] | None = None


@dataclass
class SyncResult:
    """The run report (README "CLI reference", `ragsync run --json`): counters overall and
    per source."""

    run_id: str
    started_at: str
    finished_at: str = ""
    ok: bool = True
    counters: Counters = field(default_factory=Counters)
    sources: dict[str, SourceOutcome] = field(default_factory=dict)

    def merge(self, source_id: str, outcome: SourceOutcome) -> None:
        """Add one source's outcome (a source may come up more than once in a run)."""
        known = self.sources.get(source_id)
        if known is None:
            self.sources[source_id] = outcome
        else:
            known.ok = known.ok and outcome.ok
            known.errors.extend(outcome.errors)
            known.incomplete.extend(outcome.incomplete)
            known.outages.extend(outcome.outages)
            known.not_due = known.not_due or outcome.not_due
            known.counters.add(outcome.counters)
        self.counters.add(outcome.counters)

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "ok": self.ok,
            "counters": self.counters.as_dict(),
            "sources": {
                source_id: {
                    "ok": outcome.ok,
                    "counters": outcome.counters.as_dict(),
                    "errors": list(outcome.errors),
                    "listing_incomplete": list(outcome.incomplete),
                    "outages": list(outcome.outages),
                    "listing_not_due": outcome.not_due,
                }
                for source_id, outcome in self.sources.items()
            },
        }
