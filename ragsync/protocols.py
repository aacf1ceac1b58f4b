"""The small contracts between the engine and its pluggable stages."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from ragsync.models import Candidate, Checkpoint, Hit, Response
from ragsync.sparse import SparseVector


class DiscoveryContext(Protocol):
    """What a source connector may use: the engine's HTTP GET and the config folder."""

    base_dir: Path

    def get(self, url: str) -> Response:
        """GET a discovery document (sitemap, feed, API page). Raises ``FetchError``."""
        ...

    def get_parsed(self, url: str, parse: Callable[[bytes], Any]) -> Any:
        """``parse(body)``, revalidated conditionally: a 304 reuses the cached parse."""
        ...

    def get_parsed_or_warn(self, url: str, parse: Callable[[bytes], Any], what: str) -> Any:
        """``get_parsed``, or None when the document cannot be had (the listing is then
        incomplete)."""
        ...

    def get_parsed_response_or_warn(
        self, url: str, parse: Callable[[Response], Any], what: str
    ) -> Any:
        """``get_parsed_or_warn`` whose ``parse`` gets the whole response (final URL, headers)."""
        ...

    def checkpoint(self) -> Any:
        """The source's last committed continuation."""
        ...

    source_id: str

    def now(self) -> str:
        """The current time (ISO 8601, UTC)."""
        ...

    def poll_started(self, window_start: str, window_end: str) -> int: ...

    def poll_finished(
        self,
        poll_id: int,
        *,
        outcome: str,
        pages: int,
        records: int,
        truncated: int,
        error: str | None = None,
    ) -> None: ...

    def warn(self, message: str) -> None:
        """Record a non-fatal problem for the run report that leaves the listing complete."""
        ...

    def incomplete(self, reason: str) -> None:
        """Record that the listing misses something it should have listed (and warn)."""
        ...

    @property
    def incomplete_reasons(self) -> list[str]:
        """Why the listing is incomplete (empty: complete); read by the engine afterwards."""
        ...


class Source(Protocol):
    """A source connector: proposes candidate URLs; never fetches page bodies itself.

    ``Options`` is the frozen dataclass of the kind's own config keys; ``validate`` raises
    ``ConfigError(message, key=...)`` for combinations the types cannot express.
    """

    Options: ClassVar[type]
    # What leaving the listing means. "complete" (sitemap, urls): the page is verified by fetch
    # and pruned per the source's policy. "recent" (feed): verified, never pruned. "changes"
    # (paginated change APIs): the listing only holds what changed; nothing is inferred.
    listing: ClassVar[str]

    @classmethod
    def validate(cls, options: Any) -> None: ...

    def __init__(self, options: Any) -> None: ...

    def discover(self, ctx: DiscoveryContext) -> Iterator[Candidate | Checkpoint]: ...


# A crawl's bounds by default; a source that sets another value chose its bound, and reaching it
# is no warning (README "Discovery").
CRAWL_MAX_DEPTH = 50
CRAWL_MAX_PAGES = 50_000


@runtime_checkable
class Crawler(Protocol):
    """A source whose listing is a crawl: ``discover`` yields its start pages, and the engine
    follows their links in scope, breadth first, to ``max_depth`` hops and ``max_pages`` pages
    (:mod:`ragsync.pipeline.crawl`)."""

    @property
    def start_urls(self) -> tuple[str, ...]: ...

    @property
    def max_depth(self) -> int: ...

    @property
    def max_pages(self) -> int: ...


class VectorStore(Protocol):
    """A vector index written only through idempotent operations keyed by point id, each
    durable when it returns.

    Implementations also offer ``from_config(StoreConfig)`` as a classmethod, and may offer
    ``writes()``: a context manager inside which operations are made durable once, when it
    ends (the journal applies a batch inside one: :func:`ragsync.pipeline.journal.batch_writes`).
    """

    def ensure_collection(self, dimension: int) -> object: ...

    def upsert(self, points: Sequence[tuple[str, Sequence[float], dict]]) -> None: ...

    def set_payload(self, items: Sequence[tuple[str, dict]]) -> None: ...

    def delete(self, point_ids: Sequence[str]) -> None: ...

    def search(self, vector: Sequence[float], k: int, source: str | None = None) -> list[Hit]: ...

    def points(self, *, with_vectors: bool = False) -> Iterator[tuple[str, dict, Any]]: ...

    def count(self, source: str | None = None) -> int: ...

    def close(self) -> None: ...


class SparseStore(VectorStore, Protocol):
    """A store that also holds a sparse (lexical) vector per point (README "Hybrid search").

    ``sparse_idf`` says whether it applies BM25's IDF itself (Qdrant's IDF modifier) or wants
    IDF-weighted queries (pgvector). ``ensure_collection(dimension, sparse=True)`` returns
    whether the collection holds sparse vectors (an old one may not, and may not be able to
    gain them in place: :meth:`drop` and a rebuild from the cache then add them).
    """

    sparse_idf: bool

    def ensure_collection(self, dimension: int, *, sparse: bool = False) -> bool: ...

    def upsert(
        self,
        points: Sequence[tuple[str, Sequence[float], dict]],
        *,
        sparse: Sequence[SparseVector] | None = None,
    ) -> None: ...

    def search_sparse(
        self, vector: SparseVector, k: int, source: str | None = None
    ) -> list[Hit]: ...

    def sparse_points(self) -> Iterator[tuple[str, SparseVector | None]]: ...

    def drop(self) -> None: ...
