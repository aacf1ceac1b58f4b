"""The Python API: :class:`Syncer`, a thin facade over the pipeline.

Each public method delegates: a pass is :func:`ragsync.pipeline.runs.run_pass` (journal replay,
targeted work, each due source through :class:`ragsync.pipeline.source.SourceSync`: listing →
check → moves → commit → journal), and the side jobs live in their own modules —
:mod:`ragsync.pipeline.targets` (targeted re-sync), :mod:`ragsync.reindex`,
:mod:`ragsync.status`, :mod:`ragsync.repair` (verify and repair) and :mod:`ragsync.dryrun`
(the dry run behind `ragsync plan`). See README "Architecture".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from ragsync.clock import Clock, iso, parse_iso
from ragsync.config import Config, SourceConfig, load_config, parse_duration
from ragsync.dryrun import dry_run
from ragsync.embed import Embedder
from ragsync.models import Change, Hit, SyncResult
from ragsync.pipeline.context import Engine
from ragsync.pipeline.runs import EVENTS_DEADLINE, run_pass, source_due
from ragsync.pipeline.targets import queue_urls
from ragsync.progress import Progress
from ragsync.protocols import VectorStore
from ragsync.repair import verify
from ragsync.retrieval import Mode, index_facts, retrieve
from ragsync.runlock import RunLock
from ragsync.state import StateDB
from ragsync.status import status
from ragsync.verify import VerifyReport

log = logging.getLogger("ragsync")


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
        self.engine = Engine(
            config,
            state or StateDB.from_config(config.state),
            embedder=embedder,
            store=store,
            transport=transport,
            clock=clock,
            progress=progress,
        )
        self.state = self.engine.state
        # One pass at a time per state DB, across processes (README "Run lock").
        self.run_lock = RunLock(self.state)

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
        self.engine.close()

    @property
    def clock(self) -> Clock:
        return self.engine.clock

    @property
    def embedder(self) -> Embedder:
        return self.engine.embedder

    @property
    def store(self) -> VectorStore:
        return self.engine.store

    @property
    def model_id(self) -> str:
        return self.engine.model_id

    def _sources(self, source: str | None) -> list[SourceConfig]:
        return [self.config.source(source)] if source else list(self.config.sources)

    # -- passes -----------------------------------------------------------------------------

    def run(
        self,
        *,
        source: str | None = None,
        revalidate_all: bool = False,
        targeted_only: bool = False,
        wait: bool = False,
        refetch: bool = False,
    ) -> SyncResult:
        """One sync pass: replay the journal, then revalidate every source's pages.

        Args:
            source: only this source id (``ConfigError`` if unknown).
            revalidate_all: also request pages held back (retry not yet due, dead letter,
                needs attention).
            targeted_only: only drain the targeted queue (webhooks, `resync`).
            wait: when another process holds the state (a pass, or workers), wait for it
                instead of raising ``RunLocked``.
            refetch: as ``revalidate_all``, and every page is asked in full, whatever its
                validators say (README "Validators that lie"); unchanged text is not
                embedded again.

        Returns:
            The run report; ``ok`` is False when some page or discovery step failed.

        Raises:
            RunLocked: another process holds the state and ``wait`` is False.
        """
        sources = self._sources(source)
        with self.run_lock.held(wait=wait):
            return run_pass(
                self.engine,
                sources,
                owner=self.run_lock.owner,
                revalidate_all=revalidate_all,
                targeted_only=targeted_only,
                refetch=refetch,
            )

    async def arun(
        self, *, source: str | None = None, revalidate_all: bool = False, refetch: bool = False
    ) -> SyncResult:
        """:meth:`run` in a worker thread, so an asyncio app's event loop never blocks."""
        import asyncio  # only for the async API: a plain run does without it

        return await asyncio.to_thread(
            self.run, source=source, revalidate_all=revalidate_all, refetch=refetch
        )

    def plan(
        self, *, source: str | None = None, revalidate_all: bool = False, refetch: bool = False
    ) -> dict[str, Any]:
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
        return dry_run(
            self.engine, self._sources(source), revalidate_all=revalidate_all, refetch=refetch
        )

    def due_now(self) -> bool:
        """Whether a pass would do anything now (targeted work, a due source or page)."""
        now = self.clock()
        if self.state.targets.count():
            return True
        if any(source_due(self.engine, source, now) for source in self.config.sources):
            return True
        next_due = self.state.runs.next_due([source.id for source in self.config.sources])
        return next_due is not None and next_due <= iso(now)

    def watch(self, *, stop: threading.Event | None = None, max_sleep: float = 300.0) -> None:
        """Run, then sleep until the next due item (a source, a page, a retry); repeat until
        ``stop`` is set. A signal that interrupts a pass abandons it safely: the next pass
        replays the journal first."""
        stop = stop or threading.Event()
        while not stop.is_set():
            self.run(wait=True)  # a `ragsync run` in progress: take the next turn
            next_due = self.state.runs.next_due([source.id for source in self.config.sources])
            wait = max_sleep
            if next_due:
                seconds = (parse_iso(next_due) - self.clock()).total_seconds()
                wait = min(max_sleep, max(1.0, seconds))
            if self.state.targets.count():
                wait = 1.0
            log.info("next pass in %.0f s", wait)
            stop.wait(wait)

    def resync(
        self,
        urls: Sequence[str],
        *,
        source: str | None = None,
        wait: bool = False,
        refetch: bool = False,
    ) -> SyncResult:
        """Re-sync these URLs now, through the same queue the webhook receiver fills; with
        ``refetch``, each is asked in full, whatever its validators say (README "Validators
        that lie").

        Raises:
            ValueError: a URL lies outside every source's scope (or ``source``'s).
            RunLocked: another process holds the state (the URLs stay queued for its next
                pass) and ``wait`` is False.
        """
        queue_urls(self.engine, urls, source=source, refetch=refetch)
        return self.run(targeted_only=True, wait=wait)

    async def aresync(
        self, urls: Sequence[str], *, source: str | None = None, refetch: bool = False
    ) -> SyncResult:
        """:meth:`resync` in a worker thread (see :meth:`arun`)."""
        import asyncio

        return await asyncio.to_thread(self.resync, urls, source=source, refetch=refetch)

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
        from ragsync.reindex import reindex  # the extraction stages: not for a plain run

        sources = self._sources(source)
        with self.run_lock.held():
            return reindex(
                self.engine, sources, owner=self.run_lock.owner, same_collection=same_collection
            )

    # -- reading ----------------------------------------------------------------------------

    def deliver_events(self, deadline: float = EVENTS_DEADLINE) -> int:
        """Deliver due change events for up to ``deadline`` seconds; return how many arrived."""
        dispatcher = self.engine.dispatcher()
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
                    since = iso(parse_iso(since))
                except ValueError:
                    raise ValueError(
                        f"since: {since!r} is neither a duration ('2h') nor an ISO timestamp"
                    ) from None
        rows = self.state.runs.list_changes(since)
        return [
            Change.from_row(row) for row in rows if source is None or row["source_id"] == source
        ]

    def search(
        self, query: str, k: int = 5, *, source: str | None = None, mode: Mode | None = None
    ) -> list[Hit]:
        """The ``k`` chunks for ``query`` (what an app would retrieve), ranked by ``mode``:
        ``"dense"``, ``"sparse"`` or ``"hybrid"`` (None: ``[search] mode``; README "Hybrid
        search"). The model stays loaded between calls.

        Example::

            for hit in syncer.search("cargo build --locked", k=3):
                print(f"{hit.score:.3f} {hit.url} {' > '.join(hit.headings)}")

        Raises:
            StoreError: ``mode`` is ``"sparse"`` and the collection has no sparse vectors.
        """
        collection = self.config.store.collection
        try:
            return retrieve(
                query,
                k,
                store=self.store,
                embed=lambda text: self.embedder.embed([text])[0],
                index=index_facts(self.state, collection),
                mode=mode or self.config.search.mode,
                sparse_weight=self.config.search.sparse_weight,
                page_weight=self.config.search.page_weight,
                gate_margin=self.config.search.sparse_gate,
                source=source,
                collection=collection,
            )
        finally:
            self.engine.release_store()

    async def asearch(
        self, query: str, k: int = 5, *, source: str | None = None, mode: Mode | None = None
    ) -> list[Hit]:
        """:meth:`search` in a worker thread (see :meth:`arun`)."""
        import asyncio

        return await asyncio.to_thread(self.search, query, k, source=source, mode=mode)

    def status(self, *, count_points: bool = True) -> dict[str, Any]:
        """Per source: documents by state, what is failing (since when, why), the dead letter
        and the attention list; plus the last run, pending journal work, host pauses and — with
        workers — the shared work queue and the leases held.

        Example::

            for source_id, s in syncer.status()["sources"].items():
                print(source_id, s["documents"], len(s["dead_letter"]))
        """
        return status(self.engine, count_points=count_points)

    def verify(self, *, repair: bool = False) -> VerifyReport:
        """Compare the state DB with the vector store; with ``repair``, make the store match.

        Repair replays the journal, then writes the missing points (vectors from the cache;
        only texts the cache lacks are embedded), deletes orphans and rewrites drifted payloads,
        all through the journal.

        Example::

            report = syncer.verify(repair=True)
            print(report.to_dict())
        """
        if not repair:
            return verify(self.engine, repair=False)
        with self.run_lock.held():
            return verify(self.engine, repair=True)
