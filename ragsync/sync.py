"""The sync orchestrator: discover → fetch → extract → chunk → plan → embed → commit → apply.

The orchestrator only orchestrates: decisions live in :mod:`ragsync.policy` and
:mod:`ragsync.plan`, persistence in :mod:`ragsync.state`, connectors behind
:mod:`ragsync.protocols`. Pages are fetched, extracted and chunked in a thread pool; embedding,
commits and vector-store writes happen on the calling thread, one document transaction at a time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import socket
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from itertools import groupby
from pathlib import Path
from typing import Any, Literal

from ragsync.chunk import Chunker
from ragsync.clock import Clock, epoch, iso, parse_iso
from ragsync.config import Config, SourceConfig, load_config, parse_duration
from ragsync.discovery import DiscoveryContext
from ragsync.dryrun import CountingEmbedder, NullStore
from ragsync.embed import Embedder, embedder_from_config
from ragsync.errors import ConfigError, ExtractError, FetchError, StoreError
from ragsync.events import Dispatcher, outbox_rows
from ragsync.extract import canonical_link, content_hash, line_title, normalize_markdown
from ragsync.extractpool import shared_pool
from ragsync.fetch import Fetcher
from ragsync.models import (
    Candidate,
    Change,
    Checkpoint,
    Chunk,
    ChunkPlan,
    Counters,
    Extracted,
    Hit,
    Response,
    SourceOutcome,
    StoredChunk,
    StoreOp,
    SyncResult,
    work_item,
)
from ragsync.plan import chunk_payload, magnitude, markdown_diff, plan_chunks
from ragsync.policy import (
    HTML_TYPES,
    classify,
    coverage_gaps,
    missing_step,
    raw_hash,
    retry_delay,
)
from ragsync.politeness import HostGate, HostPaused, PoliteFetcher
from ragsync.progress import LogProgress, Progress
from ragsync.protocols import VectorStore
from ragsync.registry import source_class, store_class
from ragsync.robots import RobotsPolicy, decode_robots
from ragsync.runlock import RunLock
from ragsync.schedule import next_interval, next_source_run
from ragsync.state import StateDB
from ragsync.urls import canonical_url, host_of, in_scope
from ragsync.verify import VerifyReport, compare

log = logging.getLogger("ragsync")

PageKind = Literal[
    "disallowed",
    "deferred",
    "error",
    "missing",
    "not_modified",
    "unchanged",
    "changed",
    "moved_only",  # its content is handled by the page of its target record
    "moving",  # a permanent redirect not yet confirmed: evidence only, content kept
    "deleted",  # the source says the record is deleted (authoritative)
]
JOURNAL_BATCH = 256
EVENTS_DEADLINE = 15.0  # seconds `run` spends delivering due events before it exits
WINDOW_PAGES = 64  # pages fetched, then embedded and committed together
EMBED_CALL_BATCHES = 16  # model batches per embed call (and per cache flush)


def _page_due(
    item: tuple[str, Candidate, bool], info: dict[str, tuple[str | None, str | None]], now: str
) -> bool:
    """A page is due when new, when its adaptive revisit time has come, or when the listing's
    lastmod moved since it was last checked (a hint that may bring a check forward, never
    one that skips it)."""
    key, candidate, _ = item
    if key not in info:
        return True
    next_check_at, lastmod_hint = info[key]
    if next_check_at is None or next_check_at <= now:
        return True
    return bool(candidate.lastmod and candidate.lastmod > (lastmod_hint or ""))


def _with_evidence(
    document: dict[str, Any], *, at: str, status: int | None, reason: str
) -> list[dict[str, Any]]:
    """The document's evidence of absence (404s, unconfirmed moves, unlisted checks) with one
    more observation; the last 20 are kept."""
    evidence = json.loads(document["missing_evidence"] or "[]")
    return [*evidence, {"at": at, "status": status, "reason": reason}][-20:]


@dataclass
class _Page:
    """One candidate after the fetch/extract/chunk stage (built on a worker thread)."""

    doc_key: str
    url: str
    candidate: Candidate
    document: dict[str, Any] | None
    unlisted: bool = False  # known page the source no longer lists
    prunable: bool = False  # … and the source's policy counts that as missing evidence
    moved_to: str | None = None  # canonical URL it redirects to / declares (rel=canonical)
    moved_from: dict[str, Any] | None = None  # the record it came from, retired at commit
    move_step: tuple[int, float] = (0, 0.0)  # "moving": (observations, since) of the move
    kind: PageKind = "error"
    verdict: str | None = None  # see ragsync.policy.classify; "parse_failure" after extraction
    pause_until: float | None = None  # Unix time the host is paused until (Retry-After etc.)
    conditional: bool = False
    requested: bool = False
    status: int | None = None
    reason: str = ""
    transient: bool = False
    response: Response | None = None
    raw_hash: str = ""
    extracted: Extracted | None = None
    chunks: list[Chunk] = field(default_factory=list)


class Syncer:
    """Keeps the vector store in sync with the configured sources.

    Args:
        config: the configuration (see :func:`ragsync.config.load_config`).
        embedder: defaults to the configured sentence-transformers model (loaded lazily).
        store: defaults to the configured vector store (opened lazily, closed after each run).
        state: defaults to the configured SQLite state DB.
        transport: an httpx transport for fetching (tests).
        clock: returns "now" as an aware datetime (tests pin it).
        progress: told about long work; log lines by default (the CLI shows bars on a TTY).

    Example::

        with Syncer.from_config("ragsync.toml") as syncer:
            result = syncer.run()
            print(result.counters.chunks_embedded)
            for hit in syncer.search("how do I rotate keys?", k=3):
                print(hit.score, hit.url)
    """

    def __init__(
        self,
        config: Config,
        *,
        embedder: Embedder | None = None,
        store: VectorStore | None = None,
        state: StateDB | None = None,
        transport: Any = None,
        clock: Clock | None = None,
        progress: Progress | None = None,
    ):
        self.config = config
        self._embedder = embedder
        self._owns_embedder = embedder is None  # an injected embedder is the caller's to close
        self._store = store
        self.state = state or StateDB.from_config(config.state)
        self._transport = transport
        self.clock = clock or (lambda: datetime.now(UTC))
        self._random = random.Random()
        self.progress: Progress = progress or LogProgress()
        # One pass at a time per state DB, across processes (README "Run lock").
        self.run_lock = RunLock(self.state)
        # Set by ragsync.worker.Worker: a named lease as a context manager yielding "held",
        # and a claim on a page another worker may be checking (source id, doc key) -> taken.
        self.journal_lease: Callable[[str], AbstractContextManager[bool]] | None = None
        self.claim_page: Callable[[str, str], bool] | None = None

    @classmethod
    def from_config(cls, path: str | Path = "ragsync.toml", **kwargs: Any) -> Syncer:
        """A syncer for the config file at ``path``. Raises ``ConfigError``."""
        return cls(load_config(path), **kwargs)

    def __enter__(self) -> Syncer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the vector store (its local folder lock), the connections of an HTTP
        embedder it built, and the state DB."""
        self._close_store()
        close_embedder = getattr(self._embedder, "close", None)
        if self._owns_embedder and close_embedder is not None:
            close_embedder()
        self.state.close()

    # -- lazily built parts ---------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = embedder_from_config(self.config.embedder, self.config.base_dir)
        return self._embedder

    @property
    def store(self) -> VectorStore:
        if self._store is None:
            self._store = store_class(self.config.store.kind).from_config(self.config.store)
        return self._store

    def _close_store(self) -> None:
        if self._store is not None:
            self._store.close()

    @cached_property
    def chunker(self) -> Chunker:
        return Chunker(
            self.config.chunker.max_tokens,
            self.embedder.count_tokens,
            self.embedder.max_input_tokens,
        )

    @cached_property
    def model_id(self) -> str:
        return self.embedder.model_id

    # -- public API -----------------------------------------------------------------------

    def run(
        self,
        *,
        source: str | None = None,
        revalidate_all: bool = False,
        targeted_only: bool = False,
        wait: bool = False,
    ) -> SyncResult:
        """One sync pass: replay the journal, then revalidate every source's pages.

        Args:
            source: only this source id (``ConfigError`` if unknown).
            revalidate_all: also request pages held back (retry not yet due, dead letter,
                needs attention).
            targeted_only: only drain the targeted queue (webhooks, `resync`).
            wait: when another process holds the state (a pass, or workers), wait for it
                instead of raising ``RunLocked``.

        Returns:
            The run report; ``ok`` is False when some page or discovery step failed.

        Raises:
            RunLocked: another process holds the state and ``wait`` is False.
        """
        sources = [self.config.source(source)] if source else list(self.config.sources)
        with self.run_lock.held(wait=wait):
            return self._run(sources, revalidate_all=revalidate_all, targeted_only=targeted_only)

    def _run(
        self, sources: list[SourceConfig], *, revalidate_all: bool, targeted_only: bool
    ) -> SyncResult:
        result = self._start_run()
        plain = Fetcher(self.config.fetch, transport=self._transport)
        gate = HostGate(
            per_host_concurrency=self.config.fetch.per_host_concurrency,
            min_delay=self.config.fetch.per_host_delay,
            max_wait=self.config.fetch.max_pause_wait,
            pauses=self.state.hosts.list_pauses(),
        )
        fetcher = PoliteFetcher(plain, gate, default_pause=self.config.fetch.retry_base)
        dispatcher = self._dispatcher()  # before any work: a bad secret fails fast
        try:
            replayed = Counters()
            replayed.journal_replayed = self._apply_journal(replayed)
            result.counters.add(replayed)
            self._drain_queue(fetcher, result)  # targeted work first
            for source_config in [] if targeted_only else sources:
                begun = self.clock()
                if not revalidate_all and not self._source_due(source_config, begun):
                    # Its listing is not due; pages whose own revisit time came still are.
                    known = self.state.documents.list_due(source_config.id, iso(begun))
                    if not known:
                        result.counters.sources_not_due += 1
                        continue
                    outcome = self._sync_source(
                        source_config, fetcher, result.run_id, False, known=known
                    )
                    self._merge(result, source_config.id, outcome)
                    continue
                self._list_source(source_config, fetcher, result, begun, revalidate_all)
            result.ok = all(outcome.ok for outcome in result.sources.values())
            if dispatcher is not None:
                result.counters.events_delivered = dispatcher.deliver_due(EVENTS_DEADLINE)
            retention = timedelta(seconds=self.config.state.raw_body_retention)
            self.state.index.remove_raw_bodies(iso(self.clock() - retention))
        finally:
            if dispatcher is not None:
                dispatcher.close()
            plain.close()
            self._close_store()
            self._finish_run(result)
        return result

    def plan(self, *, source: str | None = None, revalidate_all: bool = False) -> dict[str, Any]:
        """What :meth:`run` would do now, without writing anything (a dry run).

        The real sync path runs against a throwaway copy of the state DB, a store that keeps
        nothing and an embedder that only counts, with outbound events switched off. Pages are
        fetched (conditionally, as `run` would); nothing is embedded or written.

        Returns:
            ``{"counters", "embedding": {"texts", "tokens"}, "documents": [...]}`` where each
            document names its change and the chunks it would add, remove and keep.

        Example::

            plan = syncer.plan()
            print(plan["embedding"]["texts"], "texts would be embedded")
        """
        counting = CountingEmbedder(self.embedder)
        with tempfile.TemporaryDirectory(prefix="ragsync-plan-") as folder:
            copy = self.state.copy_to(Path(folder) / "state.db")
            copy.leases.remove_all()  # the copy is this dry run's alone, whoever holds the real one
            dry = Syncer(
                dataclasses.replace(self.config, events=()),
                embedder=counting,
                store=NullStore(),
                state=copy,
                transport=self._transport,
                clock=self.clock,
            )
            try:
                result = dry.run(source=source, revalidate_all=revalidate_all)
                documents = [
                    {
                        "url": change.url,
                        "doc_key": change.doc_key,
                        "change": change.change_type,
                        "chunks_added": change.chunks_added,
                        "chunks_removed": change.chunks_removed,
                        "chunks_kept": change.chunks_kept,
                    }
                    for change in dry.changes()
                    if change.run_id == result.run_id
                ]
            finally:
                dry.close()
        report = result.to_dict()
        return {
            "ok": report["ok"],
            "counters": report["counters"],
            "sources": report["sources"],
            "embedding": {"texts": counting.texts, "tokens": counting.tokens},
            "documents": documents,
        }

    def due_now(self) -> bool:
        """Whether a pass would do anything now (targeted work, a due source or page)."""
        now = self.clock()
        if self.state.targets.count():
            return True
        if any(self._source_due(source, now) for source in self.config.sources):
            return True
        next_due = self.state.runs.next_due()
        return next_due is not None and next_due <= iso(now)

    def _source_due(self, source: SourceConfig, now: datetime) -> bool:
        next_run = self.state.runs.next_run_at(source.id)
        return next_run is None or next_run <= iso(now)

    def watch(self, *, stop: threading.Event | None = None, max_sleep: float = 300.0) -> None:
        """Run, then sleep until the next due item (a source, a page, a retry); repeat until
        ``stop`` is set. A signal that interrupts a pass abandons it safely: the next pass
        replays the journal first."""
        stop = stop or threading.Event()
        while not stop.is_set():
            self.run(wait=True)  # a `ragsync run` in progress: take the next turn
            next_due = self.state.runs.next_due()
            wait = max_sleep
            if next_due:
                moment = parse_iso(next_due)
                wait = min(max_sleep, max(1.0, (moment - self.clock()).total_seconds()))
            if self.state.targets.count():
                wait = 1.0
            log.info("next pass in %.0f s", wait)
            stop.wait(wait)

    @staticmethod
    def _merge(result: SyncResult, source_id: str, outcome: SourceOutcome) -> None:
        known = result.sources.get(source_id)
        if known is None:
            result.sources[source_id] = outcome
        else:
            known.ok = known.ok and outcome.ok
            known.errors.extend(outcome.errors)
            known.incomplete.extend(outcome.incomplete)
            known.counters.add(outcome.counters)
        result.counters.add(outcome.counters)

    def _drain_queue(self, fetcher: PoliteFetcher, result: SyncResult) -> None:
        """Re-sync the URLs webhooks and `resync` queued, then forget them (only after their
        pages are committed: a crash leaves them queued)."""
        for source, items in self.by_source(self.state.targets.list()):
            if source is None:
                self.state.targets.remove([item["id"] for item in items])
                continue
            source_id = source.id
            urls = [item["url"] for item in items if item["url"]]
            for item in items:
                if item["record_id"]:  # an API record: its page, or a poll of the source
                    document = self.state.documents.get(f"{source_id}:id:{item['record_id']}")
                    if document and document["extractor"] != "record":
                        urls.append(document["canonical_url"])
            if any(item["record_id"] for item in items) and source.kind == "http_api":
                outcome = self._sync_source(source, fetcher, result.run_id, True)
            else:
                outcome = self._sync_source(source, fetcher, result.run_id, True, urls)
            self._merge(result, source_id, outcome)
            self.state.targets.remove([item["id"] for item in items])

    def by_source(
        self, rows: Iterable[dict[str, Any]]
    ) -> list[tuple[SourceConfig | None, list[dict[str, Any]]]]:
        """Queued rows grouped by their ``source_id``, with its config — None (and a warning)
        for a source the config no longer has, whose rows the caller drops."""
        grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            grouped[row["source_id"]].append(row)
        found: list[tuple[SourceConfig | None, list[dict[str, Any]]]] = []
        for source_id, items in grouped.items():
            try:
                found.append((self.config.source(source_id), items))
            except ConfigError:
                log.warning("queued work for unknown source %r dropped", source_id)
                found.append((None, items))
        return found

    def owns(self, source: SourceConfig, url: str) -> bool:
        """Whether ``url`` lies in ``source``'s scope: its include/exclude patterns, and its
        hosts when it has no include pattern (what a webhook may ask ragsync to fetch)."""
        try:
            url = canonical_url(url, source.strip_params)
        except ValueError:
            return False
        if not in_scope(url, source.include, source.exclude):
            return False
        if source.include:
            return True
        options = source.options
        seeds = [getattr(options, "url", None), *getattr(options, "urls", ())]
        hosts = {host_of(canonical_url(seed)) for seed in seeds if seed}
        return not hosts or host_of(url) in hosts

    def resync(
        self, urls: Sequence[str], *, source: str | None = None, wait: bool = False
    ) -> SyncResult:
        """Re-sync these URLs now, through the same queue the webhook receiver fills.

        Raises:
            ValueError: a URL lies outside every source's scope (or ``source``'s).
            RunLocked: another process holds the state (the URLs stay queued for its next
                pass) and ``wait`` is False.
        """
        candidates = [self.config.source(source)] if source else list(self.config.sources)
        plan: dict[str, list[str]] = defaultdict(list)
        outside = []
        for url in urls:
            owner = next((s for s in candidates if self.owns(s, url)), None)
            if owner is None:
                outside.append(url)
            else:
                plan[owner.id].append(url)
        if outside:
            raise ValueError(
                f"outside the scope of {source or 'every source'}: " + ", ".join(outside)
            )
        now = iso(self.clock())
        for source_id, found in plan.items():
            self.state.targets.add(source_id, found, reason="resync", at=now)
        return self.run(targeted_only=True, wait=wait)

    async def aresync(self, urls: Sequence[str], *, source: str | None = None) -> SyncResult:
        """:meth:`resync` in a worker thread (see :meth:`arun`)."""
        return await asyncio.to_thread(self.resync, urls, source=source)

    def _start_run(self, tag: str = "", *, owner: str | None = None) -> SyncResult:
        """A new run report, recorded as running (``tag`` marks a worker's runs) under the
        run-lock holder ``owner`` (this syncer's lock by default)."""
        started = self.clock()
        result = SyncResult(
            run_id=f"{started:%Y%m%dT%H%M%S}-{tag}{uuid.uuid4().hex[:8]}", started_at=iso(started)
        )
        self.state.runs.add(result.run_id, result.started_at, owner=owner or self.run_lock.owner)
        return result

    def _list_source(
        self,
        source: SourceConfig,
        fetcher: PoliteFetcher,
        result: SyncResult,
        begun: datetime,
        revalidate_all: bool = False,
        *,
        enqueue: bool = False,
    ) -> None:
        """Read a due source's listing and check (or, for workers, queue) its due pages, then
        schedule its next listing."""
        outcome = self._sync_source(source, fetcher, result.run_id, revalidate_all, enqueue=enqueue)
        self._merge(result, source.id, outcome)
        due = next_source_run(begun, every=source.every, cron=source.cron)
        self.state.runs.put_source_run(
            source.id, iso(begun), iso(due), incomplete=outcome.incomplete
        )

    def _finish_run(self, result: SyncResult) -> None:
        result.finished_at = iso(self.clock())
        self.state.runs.finish(
            result.run_id,
            finished_at=result.finished_at,
            ok=result.ok,
            counters=result.counters.as_dict(),
            sources=result.to_dict()["sources"],
        )

    def _check_collection_model(self) -> None:
        """Never mix the vectors of two models in one collection."""
        name = self.config.store.collection
        recorded = self.state.index.get_collection_model(name)
        if recorded is None:
            self.state.index.put_collection(
                name, self.model_id, self.embedder.dimension, iso(self.clock())
            )
        elif recorded != self.model_id:
            raise StoreError(
                f"collection {name!r} holds vectors of model {recorded}, but the configured "
                f"model is {self.model_id}: set [store] collection to a new name and run "
                "`ragsync reindex` (or `ragsync reindex --same-collection` to replace them)"
            )

    def reindex(self, *, source: str | None = None, same_collection: bool = False) -> SyncResult:
        """Re-extract, re-chunk and re-embed from retained raw bodies (or, for pages whose body
        left the retention window, from their stored Markdown) — without any network request.
        Only texts absent from the cache are embedded.

        After a change of extractor, ``chunker`` settings or model. A model change writes into
        the configured collection only if it is new or ``same_collection`` is given (its old
        points are then replaced); vectors of two models never share a collection at rest.

        Example::

            result = syncer.reindex()
            print(result.counters.chunks_embedded, "texts embedded")
        """
        sources = [self.config.source(source)] if source else list(self.config.sources)
        with self.run_lock.held():
            return self._reindex(sources, same_collection=same_collection)

    def _reindex(self, sources: list[SourceConfig], *, same_collection: bool) -> SyncResult:
        started = self.clock()
        result = SyncResult(
            run_id=f"reindex-{started:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}",
            started_at=iso(started),
        )
        if same_collection:
            self.state.index.put_collection(
                self.config.store.collection, self.model_id, self.embedder.dimension, iso(started)
            )
        self.state.runs.add(result.run_id, result.started_at, owner=self.run_lock.owner)
        try:
            result.counters.journal_replayed = self._apply_journal(result.counters)
            for source_config in sources:
                outcome = SourceOutcome()
                documents = [
                    d
                    for d in self.state.documents.list(source_config.id)
                    if d["status"] != "tombstoned"
                ]
                for start in range(0, len(documents), WINDOW_PAGES):
                    pages = [self._reindex_page(d) for d in documents[start : start + WINDOW_PAGES]]
                    changed = [p for p in pages if p is not None]
                    if changed:
                        self._commit_pages(source_config, changed, outcome, result.run_id)
                result.sources[source_config.id] = outcome
                result.counters.add(outcome.counters)
            result.ok = all(o.ok for o in result.sources.values())
        finally:
            self._close_store()
            self._finish_run(result)
        return result

    def _reindex_page(self, document: dict[str, Any]) -> _Page | None:
        """The page a document becomes with today's extractor, chunker and model (None when
        nothing about it would change)."""
        body = self.state.index.get_raw_body(document["doc_key"])
        extracted: Extracted | None = None
        if body is not None and document["extractor"] != "record":
            headers = {"content-type": body["content_type"] or ""}
            try:
                extracted = self._extract(Response(body["url"], 200, headers, body["body"]))
            except ExtractError:
                extracted = None
        if extracted is None:
            extracted = Extracted(
                document["title"],
                document["markdown"] or "",
                document["content_hash"],
                document["extractor"],
            )
        chunks = self.chunker.chunk(extracted.markdown)
        _, plan = plan_chunks(
            document["doc_key"],
            self.state.index.get_chunks(document["doc_key"]),
            chunks,
            model_id=self.model_id,
            now="",
        )
        if not plan.changed and extracted.content_hash == document["content_hash"]:
            return None
        candidate = Candidate(url=document["canonical_url"], lastmod=document["lastmod_hint"])
        page = _Page(document["doc_key"], document["canonical_url"], candidate, document)
        page.kind, page.extracted, page.chunks = "changed", extracted, chunks
        page.raw_hash = document["raw_hash"] or ""
        return page

    def _dispatcher(self) -> Dispatcher | None:
        if not self.config.events:
            return None
        return Dispatcher(self.state, self.config.events, transport=self._transport)

    def deliver_events(self, deadline: float = EVENTS_DEADLINE) -> int:
        """Deliver due change events for up to ``deadline`` seconds; return how many arrived."""
        dispatcher = self._dispatcher()
        if dispatcher is None:
            return 0
        try:
            return dispatcher.deliver_due(deadline)
        finally:
            dispatcher.close()

    def changes(self, since: str | None = None, source: str | None = None) -> list[Change]:
        """The change log (created / updated / removed / restored), oldest first.

        Args:
            since: an ISO timestamp or a duration back from now (``"2h"``, ``"7d"``).
            source: only this source id.

        Example::

            for change in syncer.changes(since="1d"):
                print(change.at, change.change_type, change.url, change.magnitude)
        """
        if since:
            try:
                since = iso(self.clock() - timedelta(seconds=parse_duration(since)))
            except ValueError:
                try:
                    moment = datetime.fromisoformat(since.replace("Z", "+00:00"))
                except ValueError:
                    raise ValueError(
                        f"since: {since!r} is neither a duration ('2h') nor an ISO timestamp"
                    ) from None
                since = iso(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
        rows = self.state.runs.list_changes(since)
        return [
            Change.from_row(row) for row in rows if source is None or row["source_id"] == source
        ]

    async def arun(self, *, source: str | None = None, revalidate_all: bool = False) -> SyncResult:
        """:meth:`run` in a worker thread, so an asyncio app's event loop never blocks."""
        return await asyncio.to_thread(self.run, source=source, revalidate_all=revalidate_all)

    async def asearch(self, query: str, k: int = 5, *, source: str | None = None) -> list[Hit]:
        """:meth:`search` in a worker thread (see :meth:`arun`)."""
        return await asyncio.to_thread(self.search, query, k, source=source)

    def search(self, query: str, k: int = 5, *, source: str | None = None) -> list[Hit]:
        """The ``k`` chunks nearest to ``query`` (what an app would retrieve).

        Example::

            for hit in syncer.search("rotate keys", k=3):
                print(f"{hit.score:.3f} {hit.url} {' > '.join(hit.headings)}")
        """
        try:
            vector = self.embedder.embed([query])[0]
            return self.store.search(vector, k, source)
        finally:
            self._close_store()

    def status(self, *, count_points: bool = True) -> dict[str, Any]:
        """Per source: documents by state, what is failing (since when, why), the dead letter
        and the attention list; plus the last run, pending journal work, host pauses and — with
        workers — the shared work queue and the leases held.

        Example::

            for source_id, s in syncer.status()["sources"].items():
                print(source_id, s["documents"], len(s["dead_letter"]))
        """
        counts = self.state.documents.count_by_status()
        sources: dict[str, dict[str, Any]] = {}
        for source in self.config.sources:
            attempts = self.state.attempts.list(source.id)
            lists: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for attempt in attempts:
                lists[attempt["state"] or "retrying"].append(
                    {
                        "url": attempt["url"],
                        "since": attempt["first_failed_at"],
                        "attempts": attempt["attempts"],
                        "last_status": attempt["last_status"],
                        "reason": attempt["last_error"],
                        "next_retry_at": attempt["next_retry_at"],
                    }
                )
            documents = {"active": 0, "suspected_missing": 0, "tombstoned": 0}
            documents.update(counts.get(source.id, {}))
            sources[source.id] = {
                "kind": source.kind,
                "lag_seconds": self._lag(source.id),
                "documents": documents,
                "failing": {state: len(items) for state, items in sorted(lists.items())},
                "retrying": lists["retrying"],
                "dead_letter": lists["dead"],
                "needs_attention": lists["attention"],
                "refused": lists["refused"],
                "oldest_check": self.state.documents.oldest_check(source.id),
                # The last listing: complete, or why not (then it proved no page gone).
                "listing": self.state.runs.get_listing(source.id),
            }
            polls = self.state.discovery.list_polls(source.id)
            if polls:
                windows = [
                    (p["window_start"], p["window_end"]) for p in polls if p["outcome"] == "ok"
                ]
                sources[source.id]["polls"] = {
                    "last": polls[-1],
                    "failed": sum(p["outcome"] == "failed" for p in polls),
                    "gaps": [{"from": a, "to": b} for a, b in coverage_gaps(windows)],
                }
        last = self.state.runs.get_last()
        now = time.time()
        points: int | None = None
        if count_points:
            try:
                points = self.store.count()
                for source_id, entry in sources.items():
                    entry["points_in_store"] = self.store.count(source=source_id)
            except StoreError:  # e.g. a local store held by a running `serve`
                points = None
            finally:
                self._close_store()
        return {
            "sources": sources,
            "lag_seconds": self._lag(None),  # how overdue the most overdue page check is
            "queue_depth": self.state.targets.count(),
            "points_in_store": points,
            "last_run": None
            if last is None
            else {
                "run_id": last["run_id"],
                "started_at": last["started_at"],
                "finished_at": last["finished_at"],
                "status": last["status"],
                "ok": bool(last["ok"]),
                "counters": json.loads(last["counters"] or "{}"),
            },
            "pending_journal": self.state.journal.count(),
            # Runs in progress now (alive), or whose process died (closed by the next run),
            # and the latest runs closed as interrupted.
            "running": self.state.runs.list_running(now, socket.gethostname()),
            "interrupted_runs": self.state.runs.list_interrupted(),
            # Workers: pages queued for any worker, and who holds what right now.
            "work_queue": self.state.work.count(),
            "leases": self.state.leases.list_live(now),
            "host_pauses": {
                host: iso(until)
                for host, until in self.state.hosts.list_pauses().items()
                if until > now
            },
        }

    def _lag(self, source_id: str | None) -> float:
        oldest_due = self.state.documents.oldest_due(iso(self.clock()), source_id)
        if not oldest_due:
            return 0.0
        moment = parse_iso(oldest_due)
        return round(max(0.0, (self.clock() - moment).total_seconds()), 1)

    def verify(self, *, repair: bool = False) -> VerifyReport:
        """Compare the state DB with the vector store; with ``repair``, make the store match.

        Repair replays the journal, then writes the missing points (vectors from the cache;
        only texts the cache lacks are embedded), deletes orphans and rewrites drifted payloads,
        all through the journal.

        Example::

            report = syncer.verify(repair=True)
            print(report.to_dict())
        """
        if repair:
            with self.run_lock.held():
                return self._verify(repair=True)
        return self._verify(repair=False)

    def _verify(self, *, repair: bool) -> VerifyReport:
        try:
            pending = self.state.journal.count()
            if repair and pending:
                self._apply_journal(Counters())
            report = self._compare()
            report.pending_journal = self.state.journal.count() if repair else pending
            if repair and not report.clean:
                self._repair(report)
                report.repaired = True
            return report
        finally:
            self._close_store()

    def _expected_points(self) -> tuple[dict[str, dict], dict[str, tuple[str, str]]]:
        """``({point_id: payload}, {point_id: (doc_key, chunk_hash)})`` from the state DB."""
        documents = {d["doc_key"]: d for d in self.state.documents.list()}
        payloads, origin = {}, {}
        for doc_key, chunk in self.state.index.list_chunks():
            document = documents[doc_key]
            payloads[chunk.point_id] = chunk_payload(
                chunk, document=document, model_id=self.model_id
            )
            origin[chunk.point_id] = (doc_key, chunk.chunk_hash)
        return payloads, origin

    def _compare(self) -> VerifyReport:
        expected, _ = self._expected_points()
        actual = {pid: payload for pid, payload, _ in self.store.points()}
        return compare(expected, actual)

    def _repair(self, report: VerifyReport) -> None:
        expected, origin = self._expected_points()
        now = iso(self.clock())
        base = {"run_id": "verify", "created_at": now}
        ops: list[dict[str, Any]] = []
        for pid in report.missing:
            doc_key, text_hash = origin[pid]
            ops.append(
                {
                    **base,
                    "doc_key": doc_key,
                    "op": "upsert",
                    "point_id": pid,
                    "payload": expected[pid],
                    "text_hash": text_hash,
                    "model_id": self.model_id,
                }
            )
        for pid in report.drift:
            ops.append(
                {
                    **base,
                    "doc_key": origin[pid][0],
                    "op": "set_payload",
                    "point_id": pid,
                    "payload": expected[pid],
                }
            )
        for pid in report.orphans:
            ops.append({**base, "doc_key": None, "op": "delete", "point_id": pid})
        self.state.journal.add(ops)
        self._apply_journal(Counters())

    # -- one source -----------------------------------------------------------------------

    def _sync_source(
        self,
        source: SourceConfig,
        fetcher: PoliteFetcher,
        run_id: str,
        revalidate_all: bool,
        targets: list[str] | None = None,
        known: list[tuple[str, str]] | None = None,
        *,
        claimed: list[tuple[str, Candidate, bool]] | None = None,
        enqueue: bool = False,
    ) -> SourceOutcome:
        """One source: discover and check its pages — or, with ``targets``, only those URLs
        (targeted re-sync from a webhook or `ragsync resync`).

        Workers split this in two: with ``enqueue`` the pages that are due go to the shared
        work queue instead of being checked here; ``claimed`` are pages taken from that queue
        (already found due), checked without discovery.
        """
        outcome = SourceOutcome()
        counters = outcome.counters
        connector = source_class(source.kind)(source.options)
        ctx = DiscoveryContext(
            fetcher,
            self.state,
            source.id,
            Path(self.config.base_dir),
            outcome,
            lambda: iso(self.clock()),
        )
        # What a page missing from the listing means (see ragsync.protocols.Source.listing).
        listing = getattr(connector, "listing", "complete")
        prunable = source.prune_unlisted and listing == "complete"
        robots = RobotsPolicy(
            lambda url: ctx.get_parsed(url, decode_robots),
            self.config.fetch.user_agent,
        )
        robots_lock = threading.Lock()

        def allowed(url: str) -> bool:
            with robots_lock:  # one robots.txt fetch per host, even with many workers
                if not robots.knows(url):
                    robots.allowed(url)
                    fetcher.gate.set_crawl_delay(host_of(url), robots.crawl_delay(url))
                return robots.allowed(url)

        def prepare(item: tuple[str, Candidate, bool, dict[str, Any] | None]) -> _Page:
            """Fetch, extract and chunk one page (on a fetch thread); any failure is the
            page's recorded outcome."""
            doc_key, candidate, unlisted, document = item
            page = _Page(
                doc_key,
                candidate.url,
                candidate,
                document,
                unlisted=unlisted,
                prunable=unlisted and prunable,
            )
            try:
                if candidate.content is not None or candidate.deleted:
                    self._prepare_record(page)  # API records carry their content: no fetch
                    return page
                if not allowed(page.url):
                    unreachable = robots.unreachable(page.url)
                    if unreachable:  # not a rule: the host could not be asked; retry later
                        page.reason, page.transient = unreachable, True
                    else:
                        page.kind = "disallowed"
                    return page
                self._prepare(page, fetcher, source)
            except HostPaused as paused:
                page.kind, page.reason = "deferred", str(paused)
            except Exception as exc:  # one page's bad input ends that page, never the run
                log.debug("%s: unexpected error", page.url, exc_info=True)
                page.kind, page.transient, page.extracted, page.chunks = "error", False, None, []
                page.verdict = None
                page.reason = f"internal error: {type(exc).__name__}: {exc}"
            return page

        def check(work: list[tuple[str, Candidate, bool]], *, due_already: bool = False) -> None:
            """Check (or, for workers, queue) ``(key, candidate, unlisted)`` items: an
            unlisted one is a known page a *complete* listing left out."""
            if not revalidate_all and not due_already:
                now = iso(self.clock())
                held, retry = self.state.attempts.retry_gates(source.id, now)
                free = [item for item in work if item[0] not in held]
                due = [item for item in free if item[0] in retry or _page_due(item, info, now)]
                counters.held_back += len(work) - len(free)
                counters.not_due += len(free) - len(due)
                work = due
            if enqueue:
                self.state.work.add(
                    source.id, [work_item(*item) for item in work], iso(self.clock())
                )
                counters.pages_queued += len(work)
                return
            for start in range(0, len(work), window):
                part = work[start : start + window]
                documents = self.state.documents.get_many([key for key, _, _ in part])
                batch = [(key, cand, unlisted, documents.get(key)) for key, cand, unlisted in part]
                pages = list(pool.map(prepare, batch))
                for host, (until, reason) in fetcher.take_new_pauses().items():
                    # At least: a longer pause another worker set meanwhile stands.
                    self.state.hosts.pause_at_least(host, until, reason, iso(self.clock()))
                self._commit_pages(source, pages, outcome, run_id)
                # A listed URL that moved lists its target: not to be verified as unlisted.
                seen.update(p.doc_key for p in pages if p.moved_from is not None and not p.unlisted)
                seen.update(
                    f"{source.id}:{p.moved_to}"
                    for p in pages
                    if p.kind == "moving" and not p.unlisted
                )
                self.progress.pages(source.id, start + len(batch), len(work))

        window = max(WINDOW_PAGES, self.config.fetch.concurrency * 2)
        # Read once per source: when each known page is due and the lastmod it was checked at.
        # Pages committed during this run are absent from it, and never come up twice (seen).
        info = {} if claimed is not None else self.state.documents.due_hints(source.id)
        seen: set[str] = set()
        with ThreadPoolExecutor(max_workers=self.config.fetch.concurrency) as pool:
            if claimed is not None:
                check(claimed, due_already=True)
                return outcome
            if known is not None:  # due pages of a source whose listing is not due
                check([(key, Candidate(url=url), False) for key, url in known])
                return outcome
            if targets is not None:
                found = [Candidate(url=url) for url in targets]
                check(
                    [
                        (key, cand, False)
                        for key, cand in self._candidates(source, found, ctx, seen, info)
                    ]
                )
                return outcome
            found_items = self._guarded(connector.discover(ctx), ctx, source)
            for listed, checkpoint in self._discover(source, found_items, ctx, seen, info):
                counters.candidates_discovered += len(listed)
                check([(key, cand, False) for key, cand in listed])
                if checkpoint is not None:  # only now: everything it covers is committed
                    self.state.discovery.put_checkpoint(
                        source.id, checkpoint.value, iso(self.clock())
                    )
            outcome.incomplete = list(ctx.incomplete_reasons)
            if outcome.incomplete:
                counters.listings_incomplete += 1
            if listing == "changes":
                return outcome
            # Only a complete listing is evidence that a page it left out is gone. After an
            # incomplete one, the pages it did not list are checked on their own schedule, as
            # any page, and keep their state (README "Deletion safety").
            complete = not outcome.incomplete
            check([(key, cand, complete) for key, cand in self._unlisted(source, seen)])
        return outcome

    @staticmethod
    def _guarded(
        found: Iterator[Candidate | Checkpoint], ctx: DiscoveryContext, source: SourceConfig
    ) -> Iterator[Candidate | Checkpoint]:
        """The connector's listing, bounded by ``max_urls``; an exception inside the
        connector (hostile input, a bug) ends this source's listing as incomplete instead of
        the run."""
        listed = 0
        try:
            for item in found:
                if not isinstance(item, Checkpoint):
                    listed += 1
                    if listed > source.max_urls:
                        ctx.incomplete(f"listing cut at max_urls={source.max_urls} URLs")
                        return
                yield item
        except Exception as exc:
            log.debug("discovery of source %s failed", source.id, exc_info=True)
            ctx.incomplete(f"discovery failed: {type(exc).__name__}: {exc}")
        finally:
            close = getattr(found, "close", None)
            if close is not None:  # a connector reports what it skipped when it is closed
                close()

    def _discover(
        self,
        source: SourceConfig,
        found: Iterator[Candidate | Checkpoint],
        ctx: DiscoveryContext,
        seen: set[str],
        info: dict[str, tuple[str | None, str | None]],
    ) -> Iterator[tuple[list[tuple[str, Candidate]], Checkpoint | None]]:
        """Batches of new candidates, each closed by the checkpoint that follows it."""
        batch: list[Candidate] = []
        for item in found:
            if isinstance(item, Checkpoint):
                yield self._candidates(source, batch, ctx, seen, info), item
                batch = []
            else:
                batch.append(item)
        yield self._candidates(source, batch, ctx, seen, info), None

    def _candidates(
        self,
        source: SourceConfig,
        found: Iterable[Candidate],
        ctx: DiscoveryContext,
        seen: set[str],
        info: dict[str, tuple[str | None, str | None]],
    ) -> list[tuple[str, Candidate]]:
        """Canonical, in-scope, de-duplicated candidates; newest ``lastmod`` first.

        A URL known to redirect (an alias) stands for its target record, so a renamed page is
        requested once, at its new URL — until the alias is due for re-verification
        (``max_interval`` after it was last confirmed): then the URL itself is requested, and
        if it serves its own page again its record comes back.
        """
        aliases = self.state.aliases.verified(source.id)
        stale = iso(self.clock() - timedelta(seconds=source.max_interval))
        reverify: list[str] = []
        unique: dict[str, Candidate] = {}
        for candidate in found:
            if candidate.record_id is not None:  # an API record: the provider's id is the key
                key = f"{source.id}:id:{candidate.record_id}"
                if key not in seen:
                    unique[key] = candidate
                    seen.add(key)
                continue
            try:
                url = canonical_url(candidate.url, source.strip_params)
            except ValueError as exc:
                ctx.warn(str(exc))
                continue
            if not in_scope(url, source.include, source.exclude):
                continue
            key = f"{source.id}:{url}"
            if key in aliases:
                target, verified_at = aliases[key]
                if verified_at > stale:
                    key = target
                    url = key.split(":", 1)[1]
                elif key not in seen:
                    reverify.append(key)
                    info.pop(key, None)  # due now, whatever its tombstone's schedule says
            if key in seen:
                continue
            seen.add(key)
            unique[key] = Candidate(url=url, lastmod=candidate.lastmod, priority=candidate.priority)
        if reverify:  # requested in this pass: confirmed again, or restored
            self.state.aliases.mark_verified(reverify, iso(self.clock()))

        # Work order: new pages and pages whose lastmod moved first (lastmod is a hint for
        # ordering only: every listed page is revalidated all the same), then newest lastmod.
        def order(item: tuple[str, Candidate]) -> tuple[float, bool, str]:
            key, candidate = item
            moved = key not in info or (candidate.lastmod or "") > (info[key][1] or "")
            return candidate.priority, moved, candidate.lastmod or ""

        return sorted(unique.items(), key=order, reverse=True)

    def _unlisted(self, source: SourceConfig, listed: set[str]) -> list[tuple[str, Candidate]]:
        """Known pages the source no longer lists: verified by fetch, never dropped unseen."""
        return [
            (doc["doc_key"], Candidate(url=doc["canonical_url"]))
            for doc in self.state.documents.list(source.id)
            if doc["doc_key"] not in listed and doc["status"] != "tombstoned"
        ]

    def _prepare_record(self, page: _Page) -> None:
        """An API record that carries its content (or an authoritative deletion): no fetch."""
        candidate = page.candidate
        if candidate.deleted:
            page.kind = "deleted"
            return
        assert candidate.content is not None
        markdown = normalize_markdown(candidate.content)
        title = candidate.title or line_title(markdown) or page.url
        extracted = Extracted(title, markdown, content_hash(markdown), "record")
        document = page.document
        if (
            document
            and document["status"] != "tombstoned"
            and (document["content_hash"], document["title"]) == (extracted.content_hash, title)
        ):
            page.kind = "unchanged"
            return
        page.extracted = extracted
        page.chunks = self.chunker.chunk(markdown)
        page.kind = "changed"

    @staticmethod
    def _identity(source: SourceConfig, response: Response) -> tuple[str, str | None]:
        """``(final, declared)``: the canonical form of the URL that answered (after
        redirects), and the ``rel=canonical`` it declares on the same host, if any."""
        final = canonical_url(response.url, source.strip_params)
        if response.status != 200 or response.content_type not in HTML_TYPES:
            return final, None
        declared = canonical_link(response.body, response.headers, response.url)
        try:
            declared = canonical_url(declared, source.strip_params) if declared else None
        except ValueError:
            return final, None
        return final, declared if declared and host_of(declared) == host_of(final) else None

    def _canonical_target(
        self, source: SourceConfig, declared: str, fetcher: PoliteFetcher
    ) -> Response | None:
        """The response of the URL a page declares canonical, fetched as a redirect target
        would be; None when it does not serve content in the source's scope."""
        try:
            target = fetcher.get(declared, follow_temporary=False)
        except FetchError:
            return None
        verdict, _ = classify(target.status, target.content_type, target.body)
        final = canonical_url(target.url, source.strip_params)
        if verdict != "content" or not in_scope(final, source.include, source.exclude):
            return None
        return target

    def _prepare(self, page: _Page, fetcher: PoliteFetcher, source: SourceConfig) -> None:
        """Fetch (conditionally), then hash, extract and chunk. Runs on a worker thread."""
        document = page.document
        etag = last_modified = None
        if document and document["status"] == "active":
            etag, last_modified = document["etag"], document["last_modified"]
        page.conditional = bool(etag or last_modified)
        page.requested = True
        try:
            # A temporary redirect is not followed: the page keeps its content and is retried
            # (README "Deletion safety"); permanent ones are followed and recorded.
            response = fetcher.get(
                page.url, etag=etag, last_modified=last_modified, follow_temporary=False
            )
        except FetchError as exc:
            page.reason, page.transient = exc.reason, exc.transient
            return
        page.response, page.status = response, response.status
        if fetcher.pause_for(response.status, response.headers) is not None:
            page.pause_until = fetcher.gate.paused_until(host_of(response.url))
        verdict, page.reason = classify(response.status, response.content_type, response.body)
        page.verdict = verdict
        if verdict == "missing":
            page.kind = "missing"
            return
        if verdict == "temporary_redirect":
            page.transient = True
            page.reason = (
                f"temporary redirect (HTTP {response.status}) to {response.location}; "
                "the indexed content is kept"
            )
            return
        if verdict in ("content", "not_modified") and ":id:" not in page.doc_key:
            own, declared = self._identity(source, response)
            identity = declared or own
            if not in_scope(identity, source.include, source.exclude):
                page.kind, page.reason = "missing", f"redirects out of the source to {response.url}"
                return
            if verdict == "content" and identity != own:
                # A declared rel=canonical: this body is not the target's (a redirect stub,
                # a print version), so the target's own response is the content, with its
                # own validators; a target that serves nothing leaves the page as itself.
                target = self._canonical_target(source, identity, fetcher)
                if target is None:
                    identity = own
                else:
                    response, identity = target, canonical_url(target.url, source.strip_params)
                    page.response, page.status = response, response.status
            if identity != page.url:
                page.moved_to = identity  # resolved against the target record at commit
        if verdict == "not_modified":
            page.kind = "not_modified" if document else "error"
            page.reason = "" if document else "HTTP 304 to an unconditional request"
            return
        if verdict != "content":
            page.transient = verdict in ("retry", "rate_limited")
            return
        page.raw_hash = raw_hash(response.body)
        known = document if document and document["status"] != "tombstoned" else None
        if page.moved_to:
            known = None  # compared with the target record at commit time
        if known and known["raw_hash"] == page.raw_hash:
            page.kind = "unchanged"
            return
        try:
            page.extracted = self._extract(response)
        except ExtractError as exc:
            page.verdict, page.reason = "parse_failure", f"parse failure: {exc.reason}"
            return
        if known and known["content_hash"] == page.extracted.content_hash:
            page.kind = "unchanged"
            return
        page.chunks = self.chunker.chunk(page.extracted.markdown)
        page.kind = "changed"

    def _extract(self, response: Response) -> Extracted:
        """The page's Markdown, from an extraction worker process: HTML is never parsed on
        the fetch threads (lxml is not safe there), and a page over its CPU budget, or one
        that crashes its worker, fails alone (README "Extraction")."""
        pool = shared_pool(
            workers=self.config.extract.workers, cpu_budget=self.config.extract.cpu_budget
        )
        return pool.extract(response.body, response.headers.get("content-type", ""), response.url)

    # -- commit: one transaction per document, then apply the journal ----------------------

    def _commit_pages(
        self, source: SourceConfig, pages: Sequence[_Page], outcome: SourceOutcome, run_id: str
    ) -> None:
        counters = outcome.counters
        moment = self.clock()
        now = iso(moment)
        self._resolve_moves(source, pages, moment.timestamp())
        plans = {}
        for page in pages:
            if page.kind == "changed":
                plans[page.doc_key] = self._plan(page, now)
        self._embed_missing(
            {c.chunk_hash: c.text for stored, plan in plans.values() for c in plan.add}, counters
        )
        checked: list[tuple[str, str, dict[str, Any]]] = []
        for page in pages:
            self._count_response(page, counters)
            if page.kind in ("disallowed", "deferred"):
                continue
            if page.kind == "deleted":
                self._record_deleted(source, page, now, run_id, counters)
            elif (
                page.prunable
                and page.moved_from is None  # an unlisted URL that redirects has moved
                and page.kind in ("not_modified", "unchanged", "changed")
            ):
                if page.kind == "changed":  # served and edited: fresh until it is pruned
                    stored, plan = plans[page.doc_key]
                    self._commit_changed(source, page, stored, plan, now, run_id, counters)
                self._record_missing(
                    source, page, "no longer listed by the source", now, run_id, counters
                )
            elif page.kind == "missing":
                self._record_missing(source, page, page.reason, now, run_id, counters)
            elif page.kind == "moving":
                self._record_moving(source, page, now, counters)
            elif page.kind in ("not_modified", "unchanged"):
                fields = {
                    "lastmod_hint": page.candidate.lastmod,
                    **self._revisit(source, page, changed=False),
                }
                if page.kind == "unchanged":  # a 200 with the same content: new validators
                    fields.update(self._validators(page))
                checked.append((page.doc_key, now, fields))
            elif page.kind == "changed":
                stored, plan = plans[page.doc_key]
                self._commit_changed(source, page, stored, plan, now, run_id, counters)
            elif page.kind != "moved_only":
                self._record_failure(source, page, now, outcome)
            if page.moved_from is not None:
                self._retire_moved(source, page, now, run_id, counters)
        self.state.documents.mark_checked(checked)  # one transaction for every page found unchanged
        log.debug("committed %d pages; applying the journal", len(pages))
        self._apply_journal(counters)

    def _resolve_moves(self, source: SourceConfig, pages: Sequence[_Page], moment: float) -> None:
        """Re-key pages that redirect permanently (or declare rel=canonical) to their target
        record, once the move is confirmed.

        A move is confirmed by the missing-page rule (``missing_confirmations`` observations
        spanning ``missing_grace``); until then the page is "moving": its record keeps its
        content and points, and only the evidence is recorded. A URL with no indexed content
        moves at once. A confirmed move gives the target the content (re-chunked under its own
        key: vectors come from the cache); the old record is retired after the commit and kept
        as an alias, so a renamed page moves instead of staying indexed twice.
        """
        taken = {p.doc_key for p in pages if not p.moved_to}
        for page in pages:
            if not page.moved_to or page.kind not in ("changed", "unchanged", "not_modified"):
                continue
            old = page.document
            target_key = f"{source.id}:{page.moved_to}"
            if old is not None and old["status"] != "tombstoned":
                count, since, confirmed = missing_step(
                    old["missing_count"] or 0,
                    epoch(old["missing_since"]),
                    moment,
                    confirmations=source.missing_confirmations,
                    grace=source.missing_grace,
                )
                if not confirmed:
                    page.kind, page.move_step = "moving", (count, since)
                    continue
            if self.claim_page is not None and not self.claim_page(source.id, target_key):
                # Another worker holds the target's page: it commits the content; this one
                # only retires the old record (README "Scaling out").
                page.moved_from = old or {"doc_key": page.doc_key, "canonical_url": page.url}
                page.doc_key, page.url, page.kind = target_key, page.moved_to, "moved_only"
                continue
            page.moved_from = old or {"doc_key": page.doc_key, "canonical_url": page.url}
            page.doc_key, page.url = target_key, page.moved_to
            page.document = target = self.state.documents.get(target_key)
            if target_key in taken:
                page.kind = "moved_only"  # the target is handled by its own page in this batch
                continue
            taken.add(target_key)
            extracted = page.extracted
            if extracted is None and old is not None and old["markdown"]:
                extracted = Extracted(
                    old["title"], old["markdown"], old["content_hash"], old["extractor"]
                )
            if extracted is None:
                page.kind = "moved_only"
                continue
            if (
                target
                and target["status"] != "tombstoned"
                and (target["content_hash"] == extracted.content_hash)
            ):
                page.kind = "unchanged"
                continue
            page.extracted = extracted
            page.chunks = page.chunks or self.chunker.chunk(extracted.markdown)
            page.kind = "changed"

    def _record_moving(
        self, source: SourceConfig, page: _Page, now: str, counters: Counters
    ) -> None:
        """Evidence of a permanent move not yet confirmed: the record keeps its content and
        points (suspected missing from its URL) until the move is confirmed."""
        document = page.document
        assert document is not None
        count, since = page.move_step
        reason = f"redirects permanently to {page.moved_to}"
        evidence = _with_evidence(document, at=now, status=page.status, reason=reason)
        self.state.documents.mark_missing(
            page.doc_key,
            count=count,
            since=iso(since),
            evidence=evidence,
            at=now,
        )
        counters.moves_suspected += 1
        log.info(
            "%s: %s (move %d/%d, content kept)",
            page.url,
            reason,
            count,
            source.missing_confirmations,
        )

    def _retire_moved(
        self, source: SourceConfig, page: _Page, now: str, run_id: str, counters: Counters
    ) -> None:
        """Tombstone the record a page moved away from and remember it as an alias."""
        old = page.moved_from
        assert old is not None
        alias = {
            "alias_key": old["doc_key"],
            "doc_key": page.doc_key,
            "url": old["canonical_url"],
            "at": now,
            "verified_at": now,
        }
        if old.get("status") == "tombstoned":  # an alias confirmed again, or a late move
            self.state.aliases.put(alias)
            return
        counters.records_moved += 1
        if "status" not in old:  # a URL never indexed under its own key
            self.state.aliases.put(alias)
            return
        reason = f"moved to {page.url}"
        evidence = _with_evidence(old, at=now, status=page.status, reason=reason)
        self._tombstone(source, old, reason, evidence, now, run_id, counters, aliases=[alias])

    def _revisit(self, source: SourceConfig, page: _Page, *, changed: bool) -> dict[str, Any]:
        """When to check this page again: sooner after a change, later after none."""
        previous = page.document["check_interval"] if page.document else None
        longest = source.max_interval
        shortest = min(
            source.every if source.min_interval is None else source.min_interval, longest
        )
        interval = next_interval(
            previous,
            changed=changed,
            initial=min(max(source.every, shortest), longest),
            min_interval=shortest,
            max_interval=longest,
            draw=self._random.random(),
        )
        due = self.clock() + timedelta(seconds=interval)
        return {"check_interval": interval, "next_check_at": iso(due)}

    @staticmethod
    def _count_response(page: _Page, counters: Counters) -> None:
        counters.requests_sent += page.requested
        counters.conditional_requests_sent += page.conditional
        if not page.requested and page.kind in ("changed", "unchanged"):
            return  # records with inline content and reindexed pages had no HTTP response
        counter = {
            "disallowed": "robots_disallowed",
            "deferred": "deferred",
            "not_modified": "responses_304",
            "unchanged": "responses_200_unchanged",
            "changed": "responses_200_changed",
            "missing": "responses_404",
        }.get(page.kind)
        if counter:
            setattr(counters, counter, getattr(counters, counter) + 1)

    def _plan(self, page: _Page, now: str) -> tuple[list[StoredChunk], ChunkPlan]:
        document = page.document
        assert page.extracted is not None
        payload_moved = document is not None and (
            document["title"] != page.extracted.title or document["canonical_url"] != page.url
        )
        old = self.state.index.get_chunks(page.doc_key) if document else []
        return plan_chunks(
            page.doc_key,
            old,
            page.chunks,
            model_id=self.model_id,
            now=now,
            document_payload_changed=payload_moved,
        )

    def _embed_missing(self, texts: dict[str, str], counters: Counters) -> None:
        """Embed the texts whose vectors the cache lacks; cache them as they come."""
        if not texts:
            return
        # Sorted by length so that the model's batches carry little padding.
        missing = sorted(
            self.state.embeddings.missing(texts, self.model_id), key=lambda h: (len(texts[h]), h)
        )
        counters.chunks_reused += len(texts) - len(missing)
        # Cached every few model batches, so a killed run keeps the embedding work it did.
        step = self.config.embedder.batch_size * EMBED_CALL_BATCHES
        for start in range(0, len(missing), step):
            batch = missing[start : start + step]
            vectors = self.embedder.embed([texts[h] for h in batch])
            self.state.embeddings.put(
                self.model_id, dict(zip(batch, vectors, strict=True)), iso(self.clock())
            )
            counters.chunks_embedded += len(batch)
            self.progress.embedded(start + len(batch), len(missing))

    def _validators(self, page: _Page) -> dict[str, str | None]:
        if page.response is None:
            return {}
        return {
            "etag": page.response.etag,
            "last_modified": page.response.last_modified,
            "raw_hash": page.raw_hash or None,
        }

    def _commit_changed(
        self,
        source: SourceConfig,
        page: _Page,
        stored: list[StoredChunk],
        plan: ChunkPlan,
        now: str,
        run_id: str,
        counters: Counters,
    ) -> None:
        before = page.document
        extracted = page.extracted
        assert extracted is not None
        response = page.response
        document = {
            "doc_key": page.doc_key,
            "source_id": source.id,
            "canonical_url": page.url,
            "title": extracted.title,
            "etag": response.etag if response else None,
            "last_modified": response.last_modified if response else None,
            "raw_hash": page.raw_hash,
            "content_hash": extracted.content_hash,
            "markdown": extracted.markdown,
            "extractor": extracted.extractor,
            "status": "active",
            "lastmod_hint": page.candidate.lastmod,
            "chunk_count": len(stored),
            "first_seen_at": before["first_seen_at"] if before else now,
            "last_checked_at": now,
            "last_changed_at": now,
            "missing_count": 0,
            "missing_since": None,
            "missing_evidence": None,
            "tombstoned_at": None,
            "tombstone_reason": None,
            **self._revisit(source, page, changed=True),
        }
        model_id = self.model_id
        ops: list[dict[str, Any]] = []
        base = {"run_id": run_id, "doc_key": page.doc_key, "created_at": now}
        for chunk in plan.remove:
            ops.append({**base, "op": "delete", "point_id": chunk.point_id})
        for chunk in plan.add:
            payload = chunk_payload(chunk, document=document, model_id=model_id)
            ops.append(
                {
                    **base,
                    "op": "upsert",
                    "point_id": chunk.point_id,
                    "payload": payload,
                    "text_hash": chunk.chunk_hash,
                    "model_id": model_id,
                }
            )
        for chunk in plan.repayload:
            payload = chunk_payload(chunk, document=document, model_id=model_id)
            ops.append(
                {**base, "op": "set_payload", "point_id": chunk.point_id, "payload": payload}
            )
        if before is None:
            change_type = "created"
        else:
            change_type = "restored" if before["status"] == "tombstoned" else "updated"
        change = {
            "run_id": run_id,
            "doc_key": page.doc_key,
            "source_id": source.id,
            "url": page.url,
            "change_type": change_type,
            "old_hash": before["content_hash"] if before else None,
            "new_hash": extracted.content_hash,
            "diff": markdown_diff(
                before["markdown"] if before else "", extracted.markdown, page.url
            ),
            "chunks_added": len(plan.add),
            "chunks_removed": len(plan.remove),
            "chunks_kept": len(plan.keep),
            "magnitude": magnitude(plan),
            "at": now,
        }
        events = outbox_rows(change, self.config.events, now)
        raw_body = None
        if response is not None and response.status == 200:
            raw_body = {
                "doc_key": page.doc_key,
                "url": response.url,
                "content_type": response.headers.get("content-type", ""),
                "body": response.body,
                "raw_hash": page.raw_hash,
                "fetched_at": now,
            }
        # Committed concurrently by another worker (the target of a move it was checking)?
        # Then its change row and events stand, and this one is not written twice.
        fresh = before is None or before["content_hash"] != extracted.content_hash
        committed = self.state.index.commit_document(
            document,
            stored,
            ops,
            change,
            events=events,
            raw_body=raw_body,
            unless_hash=extracted.content_hash if fresh else None,
        )
        if committed and before is None:
            counters.documents_created += 1
        elif committed:
            counters.documents_updated += 1

    def _record_failure(
        self, source: SourceConfig, page: _Page, now: str, outcome: SourceOutcome
    ) -> None:
        """Classify a failed page (SPEC §3.3); its last good content is never touched."""
        counters, fetch = outcome.counters, self.config.fetch
        previous = self.state.attempts.get(page.doc_key)
        attempts = (previous["attempts"] if previous else 0) + 1
        retry_at: float | None = None
        body = None
        if page.verdict == "rate_limited":
            counters.responses_429 += 1
            state = "retrying"  # rate limits never send a page to the dead letter
            retry_at = page.pause_until or self.clock().timestamp() + fetch.retry_base
        elif page.verdict == "temporary_redirect":
            # A server saying "elsewhere, for now" (a maintenance window): never the dead
            # letter, and never a move; the page is asked again with backoff.
            counters.temporary_redirects += 1
            state = "retrying"
            delay = retry_delay(
                attempts, base=fetch.retry_base, cap=fetch.retry_cap, draw=self._random.random()
            )
            retry_at = self.clock().timestamp() + delay
        elif page.verdict == "needs_attention":
            counters.fetch_errors += 1
            state = "attention"  # 401/403: no blind retry; `run --all` tries again
        elif page.transient and attempts >= fetch.retry_attempts:
            counters.fetch_errors += 1
            state = "dead"
        elif page.transient:
            counters.fetch_errors += 1
            state = "retrying"
            delay = retry_delay(
                attempts, base=fetch.retry_base, cap=fetch.retry_cap, draw=self._random.random()
            )
            retry_at = max(self.clock().timestamp() + delay, page.pause_until or 0.0)
        elif page.verdict == "parse_failure":
            counters.parse_failures += 1
            state = "refused"
            body = page.response.body if page.response else None  # kept for diagnosis
        else:
            counters.fetch_errors += 1
            state = "refused"  # binary, oversized, redirect loop, empty: retried next run
        if retry_at is not None:
            counters.retries_scheduled += 1
        next_retry_at = iso(retry_at) if retry_at else None
        self.state.attempts.add(
            page.doc_key,
            page.url,
            source_id=source.id,
            status=page.status,
            error=page.reason,
            at=now,
            state=state,
            next_retry_at=next_retry_at,
            body=body,
        )
        outcome.ok = False
        outcome.errors.append(f"{page.url}: {page.reason} ({state})")
        log.warning("%s: %s (%s)", page.url, page.reason, state)

    def _record_missing(
        self,
        source: SourceConfig,
        page: _Page,
        reason: str,
        now: str,
        run_id: str,
        counters: Counters,
    ) -> None:
        """Missing evidence (SPEC §3.8): suspected first, tombstoned only when confirmed."""
        document = page.document
        if document is None:
            self.state.attempts.add(
                page.doc_key,
                page.url,
                source_id=source.id,
                status=page.status,
                error=reason,
                at=now,
                state="missing",
            )
            return
        if document["status"] == "tombstoned":
            return
        count, since, tombstone = missing_step(
            document["missing_count"] or 0,
            epoch(document["missing_since"]),
            self.clock().timestamp(),
            confirmations=source.missing_confirmations,
            grace=source.missing_grace,
        )
        evidence = _with_evidence(document, at=now, status=page.status, reason=reason)
        since_iso = iso(since)
        if not tombstone:
            log.info(
                "%s: %s (suspected missing %d/%d, content kept)",
                page.url,
                reason,
                count,
                source.missing_confirmations,
            )
            self.state.documents.mark_missing(
                page.doc_key, count=count, since=since_iso, evidence=evidence, at=now
            )
            return
        document = {**document, "missing_count": count, "missing_since": since_iso}
        self._tombstone(source, document, reason, evidence, now, run_id, counters)
        log.info("%s: tombstoned after %d observations (%s)", page.url, count, reason)

    def _record_deleted(
        self, source: SourceConfig, page: _Page, now: str, run_id: str, counters: Counters
    ) -> None:
        """An authoritative deletion signal (an API's deleted flag): tombstone at once."""
        document = page.document
        if document is None or document["status"] == "tombstoned":
            return
        reason = "deleted by the source"
        evidence = [{"at": now, "status": None, "reason": reason}]
        self._tombstone(source, document, reason, evidence, now, run_id, counters)

    def _tombstone(
        self,
        source: SourceConfig,
        document: dict[str, Any],
        reason: str,
        evidence: list[dict[str, Any]],
        now: str,
        run_id: str,
        counters: Counters,
        aliases: Sequence[dict[str, Any]] = (),
    ) -> None:
        """One transaction: the record becomes a tombstone (identity, URL, time, reason,
        evidence kept), its chunks go, and the journal deletes its points."""
        doc_key, url = document["doc_key"], document["canonical_url"]
        old = self.state.index.get_chunks(doc_key)
        tombstoned = {
            **document,
            "status": "tombstoned",
            "tombstoned_at": now,
            "tombstone_reason": reason,
            "missing_evidence": json.dumps(evidence),
            "chunk_count": 0,
            "last_checked_at": now,
        }
        base = {"run_id": run_id, "doc_key": doc_key, "created_at": now}
        ops = [{**base, "op": "delete", "point_id": chunk.point_id} for chunk in old]
        change = {
            "run_id": run_id,
            "doc_key": doc_key,
            "source_id": source.id,
            "url": url,
            "change_type": "removed",
            "old_hash": document["content_hash"],
            "new_hash": None,
            "diff": markdown_diff(document["markdown"] or "", "", url),
            "chunks_added": 0,
            "chunks_removed": len(old),
            "chunks_kept": 0,
            "magnitude": 1.0 if old else 0.0,
            "at": now,
        }
        events = outbox_rows(change, self.config.events, now)
        self.state.index.commit_document(tombstoned, [], ops, change, aliases, events)
        counters.tombstones_created += 1

    def _apply_journal(self, counters: Counters) -> int:
        """Apply every pending journal operation, in order; return how many were applied.

        Under workers (``journal_lease``) one process at a time applies, holding the
        ``journal`` lease: two appliers could otherwise apply a page's upsert after its later
        delete. A worker that finds the lease held leaves its operations to the holder, which
        applies until the journal is empty, or to its own next try.
        """
        if self.journal_lease is None:
            return self._apply_pending(counters)
        if not self.state.journal.count():
            return 0
        with self.journal_lease("journal") as held:
            return self._apply_pending(counters) if held else 0

    def _apply_pending(self, counters: Counters) -> int:
        applied = 0
        dimension_checked = False
        while True:
            ops = self.state.journal.pending(JOURNAL_BATCH)
            if not ops:
                return applied
            store = self.store
            if not dimension_checked:
                self._check_collection_model()
                store.ensure_collection(self.embedder.dimension)
                dimension_checked = True
            for kind, group in groupby(ops, key=lambda op: op.op):
                self._apply(kind, list(group), store, counters)
            self.state.journal.remove([op.seq for op in ops])
            applied += len(ops)
            log.debug("applied %d journal operations", applied)

    def _apply(self, kind: str, ops: list[StoreOp], store: VectorStore, counters: Counters) -> None:
        if kind == "delete":
            store.delete([op.point_id for op in ops])
            counters.points_deleted += len(ops)
        elif kind == "set_payload":
            store.set_payload([(op.point_id, op.payload or {}) for op in ops])
            counters.payloads_updated += len(ops)
        else:
            vectors: dict[str, list[float]] = {}
            by_model = defaultdict(list)
            for op in ops:
                by_model[op.model_id or self.model_id].append(op)
            for model_id, model_ops in by_model.items():
                hashes = [op.text_hash for op in model_ops if op.text_hash]
                vectors.update(self._vectors_for(hashes, model_id, model_ops))
            store.upsert(
                [(op.point_id, vectors[op.text_hash or ""], op.payload or {}) for op in ops]
            )
            counters.points_upserted += len(ops)

    def _vectors_for(
        self, hashes: list[str], model_id: str, ops: list[StoreOp]
    ) -> dict[str, list[float]]:
        """Cached vectors; a text the cache lacks (it was cleared) is embedded again."""
        vectors = self.state.embeddings.get_many(hashes, model_id)
        lacking = {
            op.text_hash: (op.payload or {}).get("page_content", "")
            for op in ops
            if op.text_hash and op.text_hash not in vectors
        }
        if lacking and model_id == self.model_id:
            fresh = self.embedder.embed(list(lacking.values()))
            new = dict(zip(lacking, fresh, strict=True))
            self.state.embeddings.put(model_id, new, iso(self.clock()))
            vectors.update(new)
        return vectors
