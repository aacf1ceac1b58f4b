"""Every vector store the engine opens, behind one guard (README "Vector stores": *One store,
many processes*).

- **Failures are named.** Whatever a connector's library raises (a Rust binding's plain
  ``Exception``, an ``OSError``, a client's HTTP error) comes out as a
  :class:`~ragsync.errors.StoreError` naming the store and the operation, or as a
  :class:`~ragsync.errors.ResourceError` when the device is full or the process is out of
  files: one line, never a traceback.
- **An embedded store is shared.** For a store that lives in a folder one process at a time
  (``exclusive_folder``), the guard takes the folder's hold before the connector opens
  anything, answers other processes' reads while it holds it, and reads through the holder
  when another process does (:mod:`ragsync.embedded`).
- **No signal on a full device.** Before it opens or writes an embedded store, the guard checks
  that the device can back the store's mapped files, and reserves their space when it runs
  low (:func:`ragsync.embedded.reserve_holes`).
"""

from __future__ import annotations

import contextlib
import errno
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ragsync.embedded import (
    POLL,
    FolderHold,
    HolderFailed,
    NoHolder,
    ReadServer,
    allocates_on_read,
    ask_holder,
    asked_since,
    open_waiting,
    reserve_holes,
    socket_path,
    unallocated_bytes,
)
from ragsync.errors import RagsyncError, ResourceError, StoreError
from ragsync.models import Hit
from ragsync.resources import free_bytes, megabytes, resource_error
from ragsync.searchapi import hit_dict, hit_from_dict
from ragsync.sparse import SparseVector

T = TypeVar("T")

HANDOVER = 2.0  # seconds a read waits at least for a writer that asked to take the store
HEADROOM = 1 << 30  # bytes free beyond the holes of the store's files: no reservation needed
WRITE_MARGIN = 64 * 1024 * 1024  # bytes free beside reserved files: the next segment's files
READ_MARGIN = 8 * 1024 * 1024  # the same, to open and search a store on tmpfs
SPACE_EVERY = 2.0  # seconds between walks over the store's files while space is plenty


class Held(Exception):
    """The folder is held by another process (:func:`open_waiting` waits on it)."""


class GuardedStore:
    """A vector store with its failures named and, when embedded, shared between processes.

    Args:
        inner: the connector.
        name: how messages name the store (``qdrant_edge /srv/index, collection 'docs'``).
        wait: seconds a write waits for another process's hold (``[store] open_wait``); a
            read waits at least :data:`HANDOVER` for a writer taking the store over.
    """

    def __init__(self, inner: Any, *, name: str, wait: float = 0.0):
        self.inner = inner
        self.name = name
        self.wait = wait
        folder = getattr(inner, "exclusive_folder", None)
        self.folder: Path | None = Path(folder) if folder is not None else None
        self.hold = FolderHold(self.folder) if self.folder is not None else None
        self._lock = threading.RLock()  # the holder's reads for others beside its own calls
        self._server: ReadServer | None = None
        self._serving = False  # answering others' reads (between taking the hold and closing)
        self._holes, self._holes_at = 0, float("-inf")  # bytes of holes, when measured

    # --- what the connector says of itself -------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # collection, sparse_idf, batch_size, …

    @property
    def holding(self) -> bool:
        """Whether this process holds the embedded store (always True for a server store)."""
        return self.hold is None or self.hold.held

    def wanted_since(self, since: float) -> bool:
        """Whether another process asked for the store at or after ``since`` (Unix time)."""
        return self.folder is not None and asked_since(self.folder, since)

    # --- writes (and reads of everything): this process holds the store ------------------

    def ensure_collection(self, dimension: int, **sparse: bool) -> Any:
        return self._local(
            "create the collection",
            lambda: self.inner.ensure_collection(dimension, **sparse),
            write=True,
        )

    def drop(self) -> None:
        self._local("drop the collection", self.inner.drop, write=True)

    def upsert(self, points: Sequence[tuple[str, Sequence[float], dict]], **sparse: Any) -> None:
        self._local("upsert points", lambda: self.inner.upsert(points, **sparse), write=True)

    def set_payload(self, items: Sequence[tuple[str, dict]]) -> None:
        self._local("update payloads", lambda: self.inner.set_payload(items), write=True)

    def delete(self, point_ids: Sequence[str]) -> None:
        self._local("delete points", lambda: self.inner.delete(point_ids), write=True)

    @contextlib.contextmanager
    def writes(self) -> Iterator[None]:
        """The connector's ``writes()`` block (its operations made durable once, at the end)."""
        block = getattr(self.inner, "writes", None)
        if block is None:
            yield
            return
        manager = self._local("write", block, write=True)
        self._local("write", manager.__enter__)
        try:
            yield
        except BaseException:
            # the body's error is the one to report; the block still ends (and flushes)
            with contextlib.suppress(Exception):
                self._local("flush its writes", lambda: manager.__exit__(*sys.exc_info()))
            raise
        self._local("flush its writes", lambda: manager.__exit__(None, None, None))

    def points(self, *, with_vectors: bool = False) -> Iterator[tuple[str, dict, Any]]:
        yield from self._stream("read points", lambda: self.inner.points(with_vectors=with_vectors))

    def sparse_points(self) -> Iterator[tuple[str, SparseVector | None]]:
        yield from self._stream("read sparse vectors", self.inner.sparse_points)

    def exists(self) -> bool:
        return bool(self._local("look for the collection", self.inner.exists))

    def close(self) -> None:
        """Close the connector, stop answering others' reads and let go of the folder."""
        try:
            with self._lock:
                self._serving = False  # a read that comes now is told to ask again
                if self.holding:
                    self._call("close", self.inner.close)
        finally:
            if self._server is not None:
                server, self._server = self._server, None
                server.close()
            if self.hold is not None:
                self.hold.release()

    # --- reads: from the holder when another process holds the store ----------------------

    def search(self, vector: Sequence[float], k: int, source: str | None = None) -> list[Hit]:
        args = {"vector": [float(x) for x in vector], "k": k, "source": source}
        return self._read("search", args, lambda: self.inner.search(vector, k, source))

    def search_sparse(self, vector: SparseVector, k: int, source: str | None = None) -> list[Hit]:
        args = {
            "indices": list(vector.indices),
            "values": list(vector.values),
            "k": k,
            "source": source,
        }
        return self._read(
            "search_sparse", args, lambda: self.inner.search_sparse(vector, k, source)
        )

    def count(self, source: str | None = None) -> int:
        return int(self._read("count", {"source": source}, lambda: self.inner.count(source)))

    def _read(self, op: str, args: dict[str, Any], local: Callable[[], T]) -> T:
        if self.hold is not None and not self.hold.held:
            # a local-mode folder holds several collections: the holder answers for its own
            args = {**args, "collection": getattr(self.inner, "collection", None)}
            found, value = self._read_elsewhere(op, args)
            if found:
                return _decoded(op, value)
        return self._local(op, local)

    def _read_elsewhere(self, op: str, args: dict[str, Any]) -> tuple[bool, Any]:
        """``(True, answer)`` from the process holding the store, or ``(False, None)`` once
        this process holds it (then it reads itself). A writer that asked for the store is
        let have it: the read waits for it to answer instead."""
        assert self.hold is not None and self.folder is not None
        path = socket_path(self.folder)
        deadline = time.monotonic() + max(self.wait, HANDOVER)
        while True:
            writer_waiting = asked_since(self.folder, time.time() - HANDOVER)
            if not writer_waiting and self._take_now():
                return False, None
            try:
                return True, ask_holder(path, op, args, timeout=max(self.wait, 30.0))
            except NoHolder:
                pass
            except HolderFailed as exc:
                raise StoreError(
                    f"{self.name}: {op} in the process holding it failed: {exc}"
                ) from exc
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"{self.name}: open in {self.hold.holder()}, which does not answer reads "
                    f"(waited {max(self.wait, HANDOVER):.0f} s, [store] open_wait)"
                )
            time.sleep(POLL)

    def answer(self, op: str, args: dict[str, Any]) -> Any:
        """A read another process asked for (:class:`~ragsync.embedded.ReadServer`)."""
        with self._lock:
            if not self._serving:
                raise NoHolder(op)  # it let go meanwhile: the asker tries again
            own = getattr(self.inner, "collection", None)
            if args.get("collection") != own:
                raise ValueError(
                    f"this process holds the folder for collection {own!r}, not "
                    f"{args.get('collection')!r}: run one at a time, or give each its own path"
                )
            if op == "search":
                hits = self.inner.search(args["vector"], int(args["k"]), args.get("source"))
            elif op == "search_sparse":
                vector = SparseVector(tuple(args["indices"]), tuple(args["values"]))
                hits = self.inner.search_sparse(vector, int(args["k"]), args.get("source"))
            elif op == "count":
                return int(self.inner.count(args.get("source")))
            else:
                raise ValueError(f"unknown read {op!r}")
            return [hit_dict(hit) for hit in hits]

    # --- the hold, the space, the names of failures ---------------------------------------

    def _local(self, op: str, call: Callable[[], T], *, write: bool = False) -> T:
        self._take()
        with self._lock:  # the reservation too, never beside this process's own writes
            if write:
                self._check_space(WRITE_MARGIN)
            return self._call(op, call)

    def _stream(self, op: str, make: Callable[[], Iterator[T]]) -> Iterator[T]:
        """A connector's generator, one item at a time under the lock (others' reads go in
        between), its failures named."""
        items = self._local(op, make)
        while True:
            with self._lock:
                try:
                    item = self._call(op, lambda: next(items))
                except StopIteration:
                    return
            yield item

    def _take(self) -> None:
        """Hold the folder, waiting up to ``wait`` for another process to let go of it."""
        if self.hold is None or self.hold.held:
            return
        assert self.folder is not None

        def take() -> None:
            if not self._take_now():
                raise Held(self.hold.holder() if self.hold else "")

        try:
            open_waiting(
                take,
                held=lambda exc: isinstance(exc, Held),
                folder=self.folder,
                wait=self.wait,
                what=self.name,
            )
        except Held as exc:
            raise StoreError(
                f"{self.name}: open in another process ({exc}): waited {self.wait:.0f} s "
                "([store] open_wait); run it again when that process is done"
            ) from None

    def _take_now(self) -> bool:
        """Take the hold if nobody has it, and answer others' reads from then on."""
        assert self.hold is not None and self.folder is not None
        if self.hold.held:
            return True
        if not self.hold.try_take():
            return False
        try:
            margin = READ_MARGIN if allocates_on_read(self.folder) else None
            if margin is not None:
                self._check_space(margin)
            self._serving = True
            self._server = ReadServer(socket_path(self.folder), self.answer)
        except BaseException:
            self._serving = False
            self.hold.release()
            raise
        return True

    def _check_space(self, margin: int) -> None:
        """A :class:`ResourceError` before the store maps more than its device can back.

        Where the device has :data:`HEADROOM` beyond the holes of the store's files, nothing
        is done; below that, the holes are reserved (every page of the files backed now, so
        that no write into them can fault), and ``margin`` must stay free besides."""
        free = free_bytes(self.folder) if self.folder is not None else None
        if free is None or self.folder is None:  # a server store: its server's business
            return
        if time.monotonic() - self._holes_at > SPACE_EVERY or free < self._holes + HEADROOM:
            self._holes, self._holes_at = unallocated_bytes(self.folder), time.monotonic()
        if free >= self._holes + HEADROOM:
            return
        if self._holes:
            try:
                reserve_holes(self.folder)
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    return  # a file system that cannot reserve: the check above stands
                raise self._no_space(free, self._holes + margin) from exc
            self._holes = 0
            free = free_bytes(self.folder) or 0
        if free < margin:
            raise self._no_space(free, margin)

    def _no_space(self, free: int, needed: int) -> ResourceError:
        return ResourceError(
            f"no space left on the device: {megabytes(free)} free, and the store needs "
            f"{megabytes(needed)} more to back the files it maps (a mapped page the device "
            "cannot hold kills the process); free some space there or move [store] path",
            where=self.name,
        )

    def _call(self, op: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except StopIteration:
            raise
        except RagsyncError as exc:
            found = resource_error(exc, where=self.name, path=self.folder)
            if found is None or isinstance(exc, ResourceError):
                raise
            raise found from exc
        except Exception as exc:
            found = resource_error(exc, where=self.name, path=self.folder)
            if found is not None:
                raise found from exc
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise StoreError(f"{self.name}: cannot {op}: {first}") from exc


def _decoded(op: str, value: Any) -> Any:
    return value if op == "count" else [hit_from_dict(data) for data in value]
