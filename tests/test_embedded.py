"""An embedded store open in another process (README "Vector stores"): a command waits for it,
bounded by ``[store] open_wait``, asking the holder to let go; ``serve`` lets go when asked; a
run that an error ends is recorded as failed."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ragsync.config import config_from_mapping
from ragsync.embedded import WANTED, asked_since, open_waiting
from ragsync.errors import StoreError
from ragsync.registry import open_store
from ragsync.searchapi import SharedStore
from ragsync.sync import Syncer
from ragsync.testing import DevSite, FastEmbedder
from tests.support import example_pages


class Held(Exception):
    pass


class Time:
    """A clock that sleeping moves on."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def wait_for(opener: Callable[[], str], folder: Path, wait: float, clock: Time) -> str:
    """``open_waiting`` of ``opener`` on the fake clock, a :class:`Held` error meaning held."""
    held = lambda exc: isinstance(exc, Held)  # noqa: E731
    return open_waiting(
        opener,
        held=held,
        folder=folder,
        wait=wait,
        what="the store",
        sleep=clock.sleep,
        clock=clock,
    )


def test_open_waiting_asks_the_holder_and_opens_once_it_lets_go(tmp_path, caplog):
    clock, tries = Time(), []

    def opener() -> str:
        tries.append(clock.now)
        if len(tries) < 4:
            raise Held("Can't init WAL: Kind(WouldBlock)")
        return "store"

    with caplog.at_level(logging.WARNING, logger="ragsync"):
        assert wait_for(opener, tmp_path / "store", 10, clock) == "store"
    assert len(tries) == 4
    assert (tmp_path / "store" / WANTED).is_file() and asked_since(tmp_path / "store", 0)
    assert [r.getMessage() for r in caplog.records].count(
        "the store is open in another process (`ragsync serve` lets go when asked); "
        "waiting up to 10 s ([store] open_wait)"
    ) == 1


def test_open_waiting_is_bounded_and_passes_other_errors_at_once(tmp_path):
    clock, calls, broken = Time(), [], []

    def held() -> str:
        calls.append(clock.now)
        raise Held("WouldBlock")

    def corrupt() -> str:
        broken.append(clock.now)
        raise ValueError("broken")

    with pytest.raises(Held):
        wait_for(held, tmp_path, 2, clock)
    assert 8 <= len(calls) <= 10 and calls[-1] >= 2
    with pytest.raises(ValueError):
        wait_for(corrupt, tmp_path / "other", 60, clock)
    assert len(broken) == 1  # not waited for, and nobody asked to let go
    assert not (tmp_path / "other" / WANTED).exists()


def config(tmp_path: Path, site: DevSite, kind: str, open_wait: str):
    store = {
        "kind": kind,
        "path": str(tmp_path / kind),
        "collection": "docs",
        "open_wait": open_wait,
    }
    source = {"id": "docs", "kind": "sitemap", "url": site.base_url + "/sitemap.xml", "every": "0s"}
    data = {"state": {"path": str(tmp_path / "state.db")}, "store": store, "sources": [source]}
    return config_from_mapping(data, base_dir=tmp_path)


@pytest.mark.parametrize("kind", ["qdrant_edge", "qdrant"])
def test_a_run_waits_for_the_store_serve_holds_and_serve_lets_go(tmp_path, kind):
    site = DevSite(example_pages(3))
    site.start()
    try:
        first = config(tmp_path, site, kind, "30s")
        with Syncer(first, embedder=FastEmbedder()) as syncer:
            assert syncer.run().ok
        # serve's store, open after a query (as serve keeps it for 5 minutes); its loop asks it
        # to let go when idle or asked, as serve's does each second; and queries keep coming.
        shared = SharedStore(lambda: open_store(first.store))
        query = FastEmbedder().embed(["how are requests throttled?"])[0]
        assert shared.search(query, 3) and shared.recently_queried()
        stop = threading.Event()
        answered, refused = [0], [0]

        def serve_loop() -> None:
            while not stop.wait(0.5):
                shared.release_if_idle()

        def queries() -> None:
            while not stop.wait(0.01):  # 100 a second: serve must not take the store back
                try:
                    shared.search(query, 3)
                    answered[0] += 1
                except StoreError:  # it would be serve's 503 + Retry-After
                    refused[0] += 1

        threads = [threading.Thread(target=serve_loop), threading.Thread(target=queries)]
        for thread in threads:
            thread.start()
        try:
            site.set_page("/guide/page-1", "Changed", "<p>" + "A changed page. " * 20 + "</p>")
            with Syncer(first, embedder=FastEmbedder()) as syncer:
                result = syncer.run()  # needs the store: waits, serve lets go
            assert result.ok and result.counters.points_upserted >= 1, result.to_dict()
            # every query was answered: by serve's own store, then through the run holding it
            assert refused[0] == 0 and answered[0] > 0
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert shared.search(query, 3)  # and serve takes the store back once the run is done
        assert shared.inner is not None and shared.inner.holding
        shared.shutdown()

        # Without anyone letting go, a run fails after open_wait, and is recorded as failed.
        holder = open_store(first.store)
        holder.count()
        try:
            site.set_page("/guide/page-1", "Again", "<p>" + "Changed again. " * 20 + "</p>")
            with Syncer(config(tmp_path, site, kind, "0s"), embedder=FastEmbedder()) as syncer:
                with pytest.raises(StoreError, match="another process"):
                    syncer.run()
                last = syncer.state.runs.get_last()
                assert last["status"] == "failed" and not last["ok"]
        finally:
            holder.close()
    finally:
        site.stop()


def test_a_local_mode_folder_that_fails_otherwise_is_not_waited_for(tmp_path, monkeypatch):
    import qdrant_client

    from connectors.qdrant_store import QdrantStore

    def broken(**kwargs):
        raise RuntimeError("unsupported storage version")

    monkeypatch.setattr(qdrant_client, "QdrantClient", broken)
    store = QdrantStore("docs", path=str(tmp_path / "q"), open_wait=30)
    started = time.monotonic()
    with pytest.raises(StoreError, match="unsupported storage version") as raised:
        store.count()
    assert "another process" not in str(raised.value)
    assert time.monotonic() - started < 5 and not (tmp_path / "q" / WANTED).exists()


def test_a_read_through_the_holder_is_refused_for_another_collection_of_its_folder(tmp_path):
    """Local mode keeps every collection under one folder, held as one: the holder answers
    only for the collection it has open, never with another's points."""
    from ragsync.config import StoreConfig

    folder = str(tmp_path / "qdrant")
    b = open_store(StoreConfig(kind="qdrant", path=folder, collection="b"))
    b.ensure_collection(3)
    b.upsert([("00000000-0000-4000-8000-000000000001", [1.0, 0.0, 0.0], {"metadata": {}})])
    b.close()
    a = open_store(StoreConfig(kind="qdrant", path=folder, collection="a"))
    a.ensure_collection(3)
    a.upsert(
        [
            (f"00000000-0000-4000-8000-00000000001{i}", [0.0, 1.0, 0.0], {"metadata": {}})
            for i in range(5)
        ]
    )
    try:  # a holds the folder; b is read through it
        reader = open_store(StoreConfig(kind="qdrant", path=folder, collection="b"))
        with pytest.raises(StoreError, match="holds the folder for collection 'a', not 'b'"):
            reader.count()
        assert not reader.holding
    finally:
        a.close()
    assert reader.count() == 1  # once a let go, b reads its own
    reader.close()
