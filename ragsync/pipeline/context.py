"""The parts every stage works with, built once per :class:`~ragsync.sync.Syncer`.

:class:`Engine` holds the long-lived parts (config, state, clock, progress, the embedder, the
chunker and the vector store, built lazily so that a run with nothing to embed does not load the
model and one with nothing to write never opens the store; the tokenizers and the model load
ahead, in a thread, once a window holds a new page or a page whose text changed, even when
its texts turn out to be cached, as for a moved page or a revert: :meth:`Engine.warm`).
:class:`Pass` adds what one pass over the sources uses: the polite fetcher and its host gate,
the event dispatcher and the run report (README "Architecture").
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from ragsync.chunk import Chunker
from ragsync.clock import Clock, iso, utc_now
from ragsync.config import Config
from ragsync.embed import Embedder, embedder_from_config
from ragsync.events import Dispatcher
from ragsync.models import Chunk, SyncResult
from ragsync.politeness import PoliteFetcher
from ragsync.progress import LogProgress, Progress
from ragsync.protocols import VectorStore
from ragsync.registry import open_store
from ragsync.state import StateDB

log = logging.getLogger("ragsync")


def collection_embedder(config: Config, state: StateDB) -> Embedder:
    """The configured embedder, on the backend the configured collection (else the index)
    was built with when ``[embedder] backend = "auto"`` (README "Embedding backends")."""
    made_by = state.index.model_for(config.store.collection)
    return embedder_from_config(config.embedder, config.base_dir, collection_model=made_by)


LeaseHook = Callable[[str], AbstractContextManager[bool]]
"""A named lease as a context manager yielding whether it is held (workers)."""
ClaimHook = Callable[[str, str], bool]
"""Claims a page another worker may be checking: (source id, doc key) -> taken (workers)."""


class Engine:
    """The long-lived parts of a syncer.

    Args:
        config: the configuration.
        state: the state DB.
        embedder: an injected embedder (the caller's to close), or None for the configured one.
        store: an injected vector store, or None for the configured one.
        transport: an httpx transport for fetching (tests).
        clock: returns "now" as an aware datetime.
        progress: told about long work.
    """

    def __init__(
        self,
        config: Config,
        state: StateDB,
        *,
        embedder: Embedder | None = None,
        store: VectorStore | None = None,
        transport: Any = None,
        clock: Clock | None = None,
        progress: Progress | None = None,
    ):
        self.config = config
        self.state = state
        self.transport = transport
        self.clock: Clock = clock or utc_now
        self.progress: Progress = progress or LogProgress()
        self.random = random.Random()
        self._embedder = embedder
        self._owns_embedder = embedder is None
        self._store = store
        # Set by ragsync.worker.Worker; None for a single process.
        self.journal_lease: LeaseHook | None = None
        self.claim_page: ClaimHook | None = None
        self.warned: set[str] = set()  # warnings given once per engine (e.g. no sparse vectors)
        self._warming: dict[str, threading.Thread] = {}  # parts loading ahead (warm)
        self._warming_lock = threading.Lock()  # fetch threads call warm() at the same time
        self._embedder_lock = threading.Lock()

    def now(self) -> str:
        """The clock's "now" as a stored timestamp."""
        return iso(self.clock())

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            with self._embedder_lock:  # fetch threads may be the first to need it
                if self._embedder is None:
                    self._embedder = collection_embedder(self.config, self.state)
        return self._embedder

    def warm(self, part: Literal["chunker", "embedder"]) -> None:
        """Start loading what a window is about to need, in a thread, once per engine and part,
        so that the load overlaps the window's fetching and extraction instead of following
        them. A fetch thread calls it: ``"chunker"`` (the tokenizers) for a new page about to
        be extracted, ``"embedder"`` (the model) for a page found to hold new text (whose
        texts may still be cached: a moved page, a revert). A run of 304s and unchanged pages
        (noisy bytes included) therefore loads neither. Building or loading happens in the
        thread: a failure there is left to the first use to report."""
        if part in self._warming:
            return

        def load() -> None:
            try:
                if part == "chunker":
                    self.chunker.warm()
                else:
                    warm = getattr(self.embedder, "warm", None)
                    if warm is not None:
                        warm()
            except Exception:  # noqa: BLE001 - the first use raises it again, in context
                log.debug("loading the %s ahead failed", part, exc_info=True)

        with self._warming_lock:
            if part not in self._warming:
                thread = threading.Thread(target=load, name=f"ragsync-warm-{part}", daemon=True)
                self._warming[part] = thread
                thread.start()

    def chunk(self, markdown: str) -> list[Chunk]:
        """``markdown``'s chunks, once any load of the tokenizers started ahead is done."""
        self._loaded("chunker")
        return self.chunker.chunk(markdown)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The vectors of ``texts``, once any load of the model started ahead is done."""
        self._loaded("embedder")
        return self.embedder.embed(texts)

    def _loaded(self, part: Literal["chunker", "embedder"]) -> None:
        """Wait for a load of ``part`` that :meth:`warm` started: using it meanwhile imports the
        same modules from two threads at once, which numpy does not survive ("cannot import
        name '__cpu_features__' from partially initialized module"; a `run --watch` test
        failed so once the model id stopped taking 0.1 s to compute)."""
        with self._warming_lock:
            loading = self._warming.get(part)
        if loading is not None and loading is not threading.current_thread():
            loading.join()

    @property
    def store(self) -> VectorStore:
        if self._store is None:
            self._store = open_store(self.config.store)
        return self._store

    @cached_property
    def chunker(self) -> Chunker:
        return Chunker(
            self.config.chunker.max_tokens,
            self.embedder.count_tokens,
            self.embedder.max_input_tokens,
            tokens_add_up=getattr(self.embedder, "tokens_add_up", False),
        )

    @cached_property
    def model_id(self) -> str:
        return self.embedder.model_id

    def dispatcher(self) -> Dispatcher | None:
        """The outbound event dispatcher (None without ``[[events]]``); built before any work
        so that a bad secret fails fast."""
        if not self.config.events:
            return None
        return Dispatcher(self.state, self.config.events, transport=self.transport)

    def release_store(self) -> None:
        """Close the vector store (its local folder lock) after a run; reopened on demand."""
        if self._store is not None:
            self._store.close()

    def close(self) -> None:
        """Wait for any load started ahead (:meth:`warm`: never leave a model half-loaded at
        exit), then release the store, an HTTP embedder this engine built, and the state DB."""
        with self._warming_lock:
            loading = list(self._warming.values())
        try:
            for thread in loading:
                thread.join()
        finally:
            self.release_store()
            close_embedder = getattr(self._embedder, "close", None)
            if self._owns_embedder and close_embedder is not None:
                close_embedder()
            self.state.close()


@dataclass(frozen=True)
class Pass:
    """One pass over the sources: the engine, the fetcher every request of the pass goes
    through, its event dispatcher and the run report the stages add to; with ``refetch``,
    every page it checks is asked in full (`run --refetch`)."""

    engine: Engine
    fetcher: PoliteFetcher
    result: SyncResult
    dispatcher: Dispatcher | None = None
    refetch: bool = False
