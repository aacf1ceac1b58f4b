"""Warm search for `ragsync serve`: ``GET /search?q=…&k=…&source=…``.

The query model is loaded once per process, on the first query (a daemon that is never asked
pays nothing; the first query pays the load once), and kept. The vector store is shared with
the sync loop through :class:`SharedStore`: an embedded store (Qdrant local mode, Qdrant Edge)
admits one open handle per folder, and reopening it costs seconds at 100k points, so while
queries keep coming the store stays open between passes.

Access (README "Security"): with ``[server] search_token`` set, every query needs
``Authorization: Bearer <token>``; without it, search answers only when serve listens on a
loopback address (the machine's own users), and is refused (403) on any other address.

Example::

    curl 'http://127.0.0.1:8787/search?q=rotate+keys&k=3'
    # {"hits": [{"score": 0.61, "url": "...", "headings": [...], ...}], "index": "…"}
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import ipaddress
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from ragsync.config import Config
from ragsync.embed import Embedder
from ragsync.models import Hit
from ragsync.protocols import VectorStore
from ragsync.retrieval import MODES, IndexFacts, Mode, retrieve
from ragsync.sparse import SparseVector

MAX_QUERY_CHARS = 2000  # a question, not a document; longer is a mistake or an attack
MAX_K = 100
DEFAULT_K = 5
KEEP_OPEN = 300.0  # seconds the shared store stays open after the last query
Access = Literal["token", "loopback", "off"]

log = logging.getLogger("ragsync")


@dataclass(frozen=True)
class SearchParams:
    """A validated query: text, number of hits, and an optional source id."""

    q: str
    k: int = DEFAULT_K
    source: str | None = None
    mode: Mode | None = None  # None: [search] mode


class ParamError(ValueError):
    """A query parameter is missing or wrong.

    Attributes:
        param: the parameter's name (``q``, ``k`` or ``source``).
        status: 400 for a missing or malformed value, 422 for a well-formed one that is out
            of range or names no source.
    """

    def __init__(self, param: str, message: str, *, status: int = 400):
        super().__init__(f"{param}: {message}")
        self.param = param
        self.message = message
        self.status = status


def parse_search_params(
    params: Mapping[str, Sequence[str]], sources: Collection[str]
) -> SearchParams:
    """Validate the query string of ``/search``.

    Args:
        params: each parameter's values, in order (a parameter may be repeated).
        sources: the configured source ids.

    Raises:
        ParamError: ``q`` missing, empty or over :data:`MAX_QUERY_CHARS`; ``k`` not an
            integer within 1..:data:`MAX_K`; ``source`` unknown; a parameter repeated.

    >>> parse_search_params({"q": ["rotate keys"], "k": ["3"]}, {"docs"})
    SearchParams(q='rotate keys', k=3, source=None, mode=None)
    """
    for name, values in params.items():
        if name in ("q", "k", "source", "mode") and len(values) > 1:
            raise ParamError(name, "given more than once")
    q = (params.get("q") or [""])[0].strip()
    if "q" not in params:
        raise ParamError("q", "required (the query text)")
    if not q:
        raise ParamError("q", "must not be empty")
    if len(q) > MAX_QUERY_CHARS:
        raise ParamError("q", f"longer than {MAX_QUERY_CHARS} characters")
    k = DEFAULT_K
    if "k" in params:
        text = params["k"][0].strip()
        if not text.isascii() or not text.isdigit():
            raise ParamError("k", f"must be an integer, got {text[:20]!r}")
        k = int(text)
        if not 1 <= k <= MAX_K:
            raise ParamError("k", f"must be within 1-{MAX_K}, got {k}", status=422)
    source = (params.get("source") or [""])[0] or None
    if source is not None and source not in sources:
        raise ParamError("source", f"no source {source[:80]!r}", status=422)
    mode = (params.get("mode") or [""])[0] or None
    if mode is not None and mode not in MODES:
        raise ParamError("mode", f"must be one of {', '.join(MODES)}, got {mode[:20]!r}")
    return SearchParams(q=q, k=k, source=source, mode=cast(Mode | None, mode))


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a listen host) reaches only this machine: ``localhost``, 127/8, ::1.

    >>> is_loopback("127.0.0.1"), is_loopback("0.0.0.0"), is_loopback("localhost")
    (True, False, True)
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name may resolve anywhere


def search_access(listen_host: str, token: str | None) -> Access:
    """Who may search: ``token`` (a Bearer token is required), ``loopback`` (anyone who can
    connect, which on a loopback address is this machine only) or ``off`` (refused: a
    non-loopback address without a token would expose the indexed content to the network)."""
    if token:
        return "token"
    return "loopback" if is_loopback(listen_host) else "off"


def authorized(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer <token>`` (RFC 6750 §2.1),
    compared in constant time."""
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


def index_id(config: Config) -> str:
    """A short fingerprint of the index a config points at (store kind, place, collection),
    so that `ragsync search` only takes answers from a serve of the same index."""
    store = config.store
    place = store.url or store.path
    return hashlib.sha256(f"{store.kind}|{place}|{store.collection}".encode()).hexdigest()[:16]


def hit_dict(hit: Hit) -> dict[str, Any]:
    """A hit as JSON: the fields of :class:`~ragsync.models.Hit`, tuples as lists."""
    data = dataclasses.asdict(hit)
    data["headings"], data["also"] = list(hit.headings), list(hit.also)
    return data


def hit_from_dict(data: Mapping[str, Any]) -> Hit:
    """The :class:`~ragsync.models.Hit` of :func:`hit_dict`'s JSON."""
    names = {f.name for f in dataclasses.fields(Hit)}
    values = {name: data[name] for name in names if name in data}  # scores: newer serves
    tuples = {"headings": tuple(values["headings"]), "also": tuple(values.get("also", ()))}
    return Hit(**{**values, **tuples, "score": float(data["score"])})


class SharedStore:
    """One vector store shared by serve's sync loop and its searches, one call at a time.

    It is the store the loop's engine closes after each pass (``close``): the real store is
    closed then only when no query came within ``keep_open`` seconds, so other processes can
    still open an embedded store between passes when nobody searches. :meth:`release_if_idle`
    (called by the loop each second) closes it once queries stop; :meth:`shutdown` at exit.

    Args:
        opener: builds the real store (called again after each real close).
        keep_open: seconds the store stays open after the last query.
        clock: monotonic seconds (tests).
    """

    def __init__(
        self,
        opener: Callable[[], VectorStore],
        *,
        keep_open: float = KEEP_OPEN,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.opener = opener
        self.keep_open = keep_open
        self.clock = clock
        self.lock = threading.RLock()
        self.inner: VectorStore | None = None
        self.last_query: float | None = None

    @property
    def store(self) -> VectorStore:
        with self.lock:  # query threads reach it without the lock (sparse_idf): one opener
            if self.inner is None:
                # An embedded store held by another process is read through it, and one a
                # writer asked for is left to that writer (README "Vector stores").
                self.inner = self.opener()
            return self.inner

    @property
    def sparse_idf(self) -> bool | None:
        """The real store's (None: it holds no sparse vectors)."""
        return getattr(self.store, "sparse_idf", None)

    def ensure_collection(self, dimension: int, **sparse: bool) -> Any:
        with self.lock:
            return self.store.ensure_collection(dimension, **sparse)

    def drop(self) -> None:
        with self.lock:
            self.store.drop()  # type: ignore[attr-defined]

    def upsert(self, points: Sequence[tuple[str, Sequence[float], dict]], **sparse: Any) -> None:
        with self.lock:
            self.store.upsert(points, **sparse)

    def set_payload(self, items: Sequence[tuple[str, dict]]) -> None:
        with self.lock:
            self.store.set_payload(items)

    def delete(self, point_ids: Sequence[str]) -> None:
        with self.lock:
            self.store.delete(point_ids)

    def search(self, vector: Sequence[float], k: int, source: str | None = None) -> list[Hit]:
        with self.lock:
            self.last_query = self.clock()
            return self.store.search(vector, k, source)

    def search_sparse(self, vector: SparseVector, k: int, source: str | None = None) -> list[Hit]:
        with self.lock:
            self.last_query = self.clock()
            return self.store.search_sparse(vector, k, source)  # type: ignore[attr-defined]

    def points(self, *, with_vectors: bool = False) -> Iterator[tuple[str, dict, Any]]:
        with self.lock:
            yield from self.store.points(with_vectors=with_vectors)

    def sparse_points(self) -> Iterator[tuple[str, SparseVector | None]]:
        with self.lock:
            yield from self.store.sparse_points()  # type: ignore[attr-defined]

    def count(self, source: str | None = None) -> int:
        with self.lock:
            return self.store.count(source)

    def recently_queried(self) -> bool:
        return self.last_query is not None and self.clock() - self.last_query < self.keep_open

    def close(self) -> None:
        """The engine's release after a pass or a query: kept open while queries are recent."""
        with self.lock:
            if not self.recently_queried():
                self.shutdown()

    def release_if_idle(self) -> None:
        """Close the real store once no query came for ``keep_open`` seconds, or at once when
        another process asked for it (an embedded store: README "Vector stores"); queries
        then read through that process, and take the store back when it is done."""
        inner: Any = self.inner
        if inner is None:
            return
        hold = getattr(inner, "hold", None)  # a GuardedStore's, for an embedded store
        if hold is not None and hold.held and inner.wanted_since(hold.since):
            log.info("%s: another process asked for the store; letting go", inner.name)
            self.shutdown()
        elif not self.recently_queried():
            self.close()

    def shutdown(self) -> None:
        """Close the real store now."""
        with self.lock:
            if self.inner is not None:
                self.inner.close()
                self.inner = None


class WarmSearch:
    """The query side of serve: one embedder, loaded on the first query and kept.

    Args:
        embedder_factory: builds the embedder (called once, on the first query).
        store: the store shared with the sync loop.
        config: the configuration (collection, ``[search]`` defaults).
        index_of: what the state DB knows of the collection's sparse vectors, asked per query
            (a reindex may add them while serve runs).
    """

    def __init__(
        self,
        embedder_factory: Callable[[], Embedder],
        store: SharedStore,
        config: Config,
        index_of: Callable[[], IndexFacts],
    ):
        self.embedder_factory = embedder_factory
        self.store = store
        self.config = config
        self.index_of = index_of
        self.model_lock = threading.Lock()  # one tokenizer and model: one query at a time
        self.embedder: Embedder | None = None

    def embed(self, text: str) -> Sequence[float]:
        with self.model_lock:
            if self.embedder is None:
                self.embedder = self.embedder_factory()
            return self.embedder.embed([text])[0]

    def search(self, params: SearchParams) -> list[Hit]:
        """The hits for ``params`` (blocking: run it in a worker thread)."""
        return retrieve(
            params.q,
            params.k,
            store=self.store,
            embed=self.embed,
            index=self.index_of(),
            mode=params.mode or self.config.search.mode,
            sparse_weight=self.config.search.sparse_weight,
            page_weight=self.config.search.page_weight,
            gate_margin=self.config.search.sparse_gate,
            source=params.source,
            collection=self.config.store.collection,
        )
