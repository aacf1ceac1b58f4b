"""`ragsync worker`: many processes sharing one PostgreSQL state (and a pgvector store).

The acceptance test runs four real worker processes against a 2,000-page site on 127.0.0.1:
every page is fetched once per pass, per-host limits hold in aggregate, the index equals the
state exactly, and a worker killed with SIGKILL mid-pass loses nothing (its claims are taken
over once their lease runs out). The smaller tests pin the pieces: claims, the shared host gate,
and commits of one page racing from two workers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from ragsync.connectors.pgvector_store import PgVectorStore
from ragsync.models import StoredChunk
from ragsync.politeness import HostPaused, SharedHostGate
from ragsync.state import StateDB
from ragsync.testing import DevSite, EmbeddingServer, HashEmbedder
from tests.support import page, postgres_database, ragsync_cli, sentences

PAGES = 2000
PER_HOST = 3
BATCH = 40


@pytest.fixture(params=["sqlite", "postgres"])
def shared(request, tmp_path):
    """One state DB opened twice, as two workers would (SQLite file or PostgreSQL)."""
    if request.param == "postgres":
        target = postgres_database("w_" + tmp_path.name.lower()[:40].replace("-", "_"))
    else:
        target = str(tmp_path / "state.db")
    first, second = StateDB(target), StateDB(target)
    yield first, second
    first.close()
    second.close()


def queue(state: StateDB, n: int) -> None:
    items = [
        {"doc_key": f"docs:u{i}", "url": f"http://x/u{i}", "lastmod": None, "record": None}
        | {"unlisted": 0}
        for i in range(n)
    ]
    state.work.add("docs", items, "t")


def test_claims_are_disjoint_and_expired_claims_come_back(shared):
    one, two = shared
    queue(one, 10)
    queue(one, 10)  # queued twice: still once
    a = one.work.claim("a", now=100.0, until=110.0, limit=4)
    b = two.work.claim("b", now=100.0, until=110.0, limit=100)
    assert [r["doc_key"] for r in a] == [f"docs:u{i}" for i in range(4)]  # queue order
    assert {r["doc_key"] for r in b} == {f"docs:u{i}" for i in range(4, 10)}
    assert two.work.claim("c", now=105.0, until=115.0, limit=100) == []
    two.work.finish("b", [r["doc_key"] for r in b])
    # "a" died at 100: after its lease ran out (110) its four pages go to whoever asks.
    assert two.work.claim("c", now=109.0, until=120.0, limit=100) == []
    taken = two.work.claim("c", now=111.0, until=120.0, limit=100)
    assert {r["doc_key"] for r in taken} == {f"docs:u{i}" for i in range(4)}
    one.work.finish("a", [r["doc_key"] for r in a])  # too late: "c" holds them now
    assert one.work.count() == 4
    two.work.finish("c", [r["doc_key"] for r in taken])
    assert one.work.count() == 0


def test_leases_exclude_other_owners_until_they_expire(shared):
    one, two = shared
    assert one.leases.claim("journal", "a", now=0.0, until=10.0)
    assert one.leases.claim("journal", "a", now=5.0, until=15.0)  # renewing is fine
    assert not two.leases.claim("journal", "b", now=14.0, until=20.0)
    assert two.leases.list_live(14.0) == {"journal": "a"}
    assert two.leases.claim("journal", "b", now=16.0, until=20.0)
    one.leases.release("journal", "a")  # not a's any more: nothing happens
    assert two.leases.list_live(17.0) == {"journal": "b"}


def gates_of(shared, delay: float) -> list[SharedHostGate]:
    return [
        SharedHostGate(
            state,
            owner=f"w{n}",
            per_host_concurrency=2,
            min_delay=delay,
            max_wait=0.5,
            slot_lease=30,
            poll=0.002,
        )
        for n, state in enumerate(shared)
    ]


def hammer(gates: list[SharedHostGate], hold: float) -> tuple[int, list[float]]:
    """Four threads per gate, three requests each: (most in flight at once, start times)."""
    lock = threading.Lock()
    count = {"in": 0, "max": 0}
    starts: list[float] = []

    def request(gate: SharedHostGate) -> None:
        for _ in range(3):
            with gate.request("http://site"):
                with lock:
                    starts.append(time.time())
                    count["in"] += 1
                    count["max"] = max(count["max"], count["in"])
                time.sleep(hold)
                with lock:
                    count["in"] -= 1

    threads = [threading.Thread(target=request, args=(g,)) for g in gates for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return count["max"], sorted(starts)


def test_the_shared_gate_holds_across_workers(shared):
    """Two gates (two workers): never more than the host's limit in flight, starts spaced by
    the host's delay, and a Crawl-delay or pause set through one gate binds the other."""
    most, _ = hammer(gates_of(shared, 0.0), hold=0.03)
    assert most == 2  # reached, never passed
    one, two = gates_of(shared, 0.04)
    _, starts = hammer([one, two], hold=0.0)
    assert starts[-1] - starts[0] >= 0.9 * 0.04 * (len(starts) - 1)
    one.set_crawl_delay("http://site", 0.3)
    with two.request("http://site"):
        began = time.time()
    with two.request("http://site"):  # the other worker's Crawl-delay applies
        assert time.time() - began >= 0.25
    one.pause("http://site", 60)
    with pytest.raises(HostPaused), two.request("http://site"):
        pass


def chunk(pid: str) -> StoredChunk:
    return StoredChunk(pid, 0, "c" + pid, "text " + pid, ("T",), 1, "t0")


def test_racing_commits_of_one_page_leave_no_orphan(shared):
    """Two workers plan the same page against the same old chunks and commit one after the
    other: replaying the journal (in order, and again) leaves exactly the last commit's points."""
    one, two = shared
    doc = {
        "doc_key": "docs:a",
        "source_id": "docs",
        "canonical_url": "http://x/a",
        "status": "active",
        "first_seen_at": "t",
    }
    one.index.commit_document(doc, [chunk("p1"), chunk("p2")], [], None)
    planned_delete = [{"op": "delete", "point_id": "p2", "doc_key": "docs:a"}]
    one.index.commit_document(
        doc, [chunk("p1"), chunk("p3")], [*planned_delete, {"op": "upsert", "point_id": "p3"}], None
    )
    two.index.commit_document(
        doc, [chunk("p1"), chunk("p4")], [*planned_delete, {"op": "upsert", "point_id": "p4"}], None
    )
    index = {"p1", "p2"}
    ops = one.journal.pending(1000)
    for _ in range(2):  # a replay after a crash applies the same operations again
        for op in ops:
            if op.op == "delete":
                index.discard(op.point_id)
            else:
                index.add(op.point_id)
        assert index == {"p1", "p4"} == {c.point_id for c in two.index.get_chunks("docs:a")}


# -- four real worker processes ---------------------------------------------------------------


def site_pages(edit: set[int] = frozenset()) -> dict[str, tuple[str, str]]:
    pages = {}
    for i in range(PAGES):
        topic = f"widget {i}" + (" revised" if i in edit else "")
        pages[f"/p/{i}"] = page(f"Widget {i}", {f"About widget {i}": [sentences(topic, 2)]})
    return pages


CONFIG = """
[state]
url = "${{RAGSYNC_STATE_URL}}"

[store]
kind = "pgvector"
url = "{pg}"
collection = "workers"

[embedder]
kind = "http"
url = "{embed}"
model_id = "hash-384"
dimension = 384

[fetch]
concurrency = {concurrency}
per_host_concurrency = {per_host}

[[sources]]
id = "docs"
kind = "sitemap"
url = "{site}/sitemap.xml"
every = "1h"
"""


def start_worker(config: Path, name: str, log: Path, state_url: str) -> subprocess.Popen:
    """A `ragsync worker --until-idle` process; the state URL (a secret in real life) comes
    from the environment, as the config file refers to it."""
    return subprocess.Popen(
        [sys.executable, "-m", "ragsync", "-v", "worker", "--config", str(config)]
        + ["--until-idle", "--lease", "3s", "--batch", str(BATCH), "--id", name],
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        env={**os.environ, "RAGSYNC_STATE_URL": state_url},
    )


def wait_all(procs: list[subprocess.Popen]) -> list[int]:
    return [proc.wait(timeout=600) for proc in procs]


def tails(folder: Path) -> dict[str, str]:
    return {log.name: log.read_text()[-1500:] for log in sorted(folder.glob("*.log"))}


def index_and_state(
    state_url: str, db_url: str, collection: str = "workers"
) -> tuple[Counter, set[str], set[str]]:
    """(point ids in the store with their count, chunk point ids in the state, doc keys)."""
    store = PgVectorStore(collection, url=db_url)
    try:
        points = Counter(pid for pid, _, _ in store.points())
    finally:
        store.close()
    state = StateDB(state_url)
    try:
        chunks = {chunk.point_id for _, chunk in state.index.list_chunks()}
        active = {d["doc_key"] for d in state.documents.list() if d["status"] == "active"}
        assert state.journal.count() == 0 and state.work.count() == 0
    finally:
        state.close()
    return points, chunks, active


def test_four_workers_share_one_postgres_state(tmp_path):
    site = DevSite(site_pages(), latency=0.01)
    base = site.start()
    embedding = EmbeddingServer(HashEmbedder())
    name = tmp_path.name.lower()[:40].replace("-", "_")
    state_url, db_url = postgres_database("s_" + name), postgres_database("v_" + name)
    embed_url = embedding.start()
    config, slow = tmp_path / "ragsync.toml", tmp_path / "victim.toml"
    for path, concurrency in ((config, 4), (slow, 1)):
        path.write_text(
            CONFIG.format(
                pg=db_url, embed=embed_url, site=base, per_host=PER_HOST, concurrency=concurrency
            )
        )
    expected = {f"docs:{base}/p/{i}" for i in range(PAGES)}
    try:
        # Pass 1: one worker is killed (SIGKILL) right after it claimed its first batch (it
        # fetches one page at a time, so it still holds most of the batch when it dies).
        victim_log = tmp_path / "w0.log"
        victim = start_worker(slow, "w0", victim_log, state_url)
        others = [
            start_worker(config, f"w{n}", tmp_path / f"w{n}.log", state_url) for n in (1, 2, 3)
        ]
        deadline = time.time() + 300
        while "claimed" not in victim_log.read_text() and time.time() < deadline:
            time.sleep(0.05)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        watcher = StateDB(state_url)
        orphaned = {r["doc_key"] for r in watcher.db.query("select * from work where owner='w0'")}
        watcher.close()
        assert wait_all(others) == [0, 0, 0], tails(tmp_path)

        points, chunks, active = index_and_state(state_url, db_url)
        assert active == expected, sorted(expected ^ active)[:5]  # nothing lost
        assert orphaned and orphaned <= active  # the victim's claims were taken over
        watcher = StateDB(state_url)
        runs = {row["owner"]: row["status"] for row in watcher.db.query("select * from runs")}
        watcher.close()
        assert runs["w0"] == "interrupted" and runs["w1"] == "ok", runs  # closed by the others
        assert set(points) == chunks and max(points.values()) == 1  # no orphan, no duplicate
        fetched = Counter(hit.path for hit in site.page_hits())
        assert set(fetched) == {f"/p/{i}" for i in range(PAGES)}
        # Only pages the victim held can have been fetched twice.
        twice = {path: n for path, n in fetched.items() if n > 1}
        assert sum(n - 1 for n in twice.values()) <= BATCH, (twice, len(orphaned))
        assert 2 <= site.max_in_flight <= PER_HOST, site.max_in_flight

        # Pass 2: 10% of the pages change; everything is due again; four workers, no kill.
        edited = set(range(0, PAGES, 10))
        for path, (title, body) in site_pages(edited).items():
            if int(path.rsplit("/", 1)[1]) in edited:
                site.set_page(path, title, body)
        site.hits.clear()
        site.max_in_flight = 0
        state = StateDB(state_url)  # time passes: the listing and every page are due again
        long_ago = "2000-01-01T00:00:00Z"
        state.runs.put_source_run("docs", long_ago, long_ago)
        with state.write():
            state.db.execute("update documents set next_check_at = ?", [long_ago])
        state.close()
        workers = [
            start_worker(config, f"v{n}", tmp_path / f"v{n}.log", state_url) for n in range(4)
        ]
        assert wait_all(workers) == [0, 0, 0, 0], tails(tmp_path)

        fetched = Counter(hit.path for hit in site.page_hits())
        twice = {path: n for path, n in fetched.items() if n > 1}
        assert set(fetched) == {f"/p/{i}" for i in range(PAGES)} and not twice, twice
        changed = {hit.path for hit in site.page_hits() if hit.status == 200}
        assert changed == {f"/p/{i}" for i in edited}  # the rest answered 304
        assert 2 <= site.max_in_flight <= PER_HOST, site.max_in_flight
        points, chunks, active = index_and_state(state_url, db_url)
        assert active == expected, sorted(expected ^ active)[:5]
        assert set(points) == chunks and max(points.values()) == 1
        state = StateDB(state_url)
        texts = {i: state.index.get_chunks(f"docs:{base}/p/{i}")[0].text for i in (0, 1, 10)}
        state.close()
        assert "revised" in texts[0] and "revised" in texts[10] and "revised" not in texts[1]
    finally:
        embedding.stop()
        site.stop()


def test_status_shows_the_work_queue_and_who_holds_what(tmp_path, site):
    """What an operator sees of the workers: pages queued and the leases held (and by whom)."""
    config = tmp_path / "ragsync.toml"
    config.write_text(
        f'[state]\npath = "state.db"\n[[sources]]\nid = "docs"\nkind = "sitemap"\n'
        f'url = "{site.base_url}/sitemap.xml"\n'
    )
    state = StateDB(tmp_path / "state.db")
    queue(state, 3)
    now = time.time()
    state.leases.claim("journal", "host-a-12", now=now, until=now + 600)
    state.leases.claim("source:docs", "host-b-7", now=now - 700, until=now - 100)  # expired
    state.close()
    shown = ragsync_cli("status", config=config)
    assert shown.returncode == 0, shown.stderr
    assert "workers: 3 pages queued; leases: journal by host-a-12" in shown.stdout
    status = json.loads(ragsync_cli("status", "--json", config=config).stdout)
    assert (status["work_queue"], status["leases"]) == (3, {"journal": "host-a-12"})


class CountingHashEmbedder(HashEmbedder):
    """The embedding service's model, counting every text it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.texts.update(texts)
        return super().embed(texts)


RENAME_CONFIG = (
    CONFIG
    + """missing_confirmations = 1
missing_grace = "0s"

[[events]]
url = "http://127.0.0.1:9/closed"
"""
)


def test_pages_renamed_during_a_pass_are_committed_and_embedded_once(tmp_path):
    """Three workers; seven pages move (301) to new URLs with new text. The old URL (unlisted,
    at the end of the queue) and the new one (listed first) are checked by different workers
    at the same time: each new page gets one "created" row and one event, and exactly its new
    texts are embedded, once each."""
    pages = 200
    renamed = set(range(3, pages, 29))  # seven pages, spread over the workers' batches
    site = DevSite(
        {
            f"/p/{i}": page(f"Widget {i}", {f"About {i}": [sentences(f"widget {i}", 2)]})
            for i in range(pages)
        },
        latency=0.01,
    )
    base = site.start()
    model = CountingHashEmbedder()
    embedding = EmbeddingServer(model)
    name = tmp_path.name.lower()[:40].replace("-", "_")
    state_url, db_url = postgres_database("r_" + name), postgres_database("rv_" + name)
    config = tmp_path / "ragsync.toml"
    config.write_text(
        RENAME_CONFIG.format(
            pg=db_url, embed=embedding.start(), site=base, per_host=4, concurrency=4
        ).replace('collection = "workers"', 'collection = "renames"')
    )
    try:
        first = [start_worker(config, f"a{n}", tmp_path / f"a{n}.log", state_url) for n in range(3)]
        assert wait_all(first) == [0, 0, 0], tails(tmp_path)
        for i in renamed:
            site.set_page(
                f"/q/{i}",
                f"Gadget {i}",
                page(f"Gadget {i}", {f"Using gadget {i}": [sentences(f"gadget {i}", 3)]})[1],
            )
            site.redirect(f"/p/{i}", f"/q/{i}")
        state = StateDB(state_url)
        long_ago = "2000-01-01T00:00:00Z"
        state.runs.put_source_run("docs", long_ago, long_ago)
        with state.write():
            state.db.execute("update documents set next_check_at = ?", [long_ago])
        state.close()
        model.texts.clear()
        second = [
            start_worker(config, f"b{n}", tmp_path / f"b{n}.log", state_url) for n in range(3)
        ]
        assert wait_all(second) == [0, 0, 0], tails(tmp_path)

        state = StateDB(state_url)
        try:
            rows = Counter(
                (row["url"].removeprefix(base), row["change_type"])
                for row in state.runs.list_changes()
            )
            events = Counter(
                (row["doc_key"].removeprefix(f"docs:{base}"), row["type"])
                for row in state.outbox.list()
            )
            new_texts = {
                chunk.text
                for i in renamed
                for chunk in state.index.get_chunks(f"docs:{base}/q/{i}")
            }
            assert state.aliases.targets("docs") == {
                f"docs:{base}/p/{i}": f"docs:{base}/q/{i}" for i in renamed
            }
        finally:
            state.close()
        for i in renamed:
            assert rows[(f"/q/{i}", "created")] == 1, rows
            assert rows[(f"/p/{i}", "removed")] == 1, rows
            assert events[(f"/q/{i}", "created")] == 1, events
        assert set(model.texts) == new_texts and set(model.texts.values()) == {1}, model.texts
        points, chunks, active = index_and_state(state_url, db_url, "renames")
        assert set(points) == chunks and max(points.values()) == 1
        assert len(active) == pages
    finally:
        embedding.stop()
        site.stop()


def test_a_worker_drops_raw_bodies_past_their_retention(tmp_path, site):
    """Raw bodies (kept for `reindex`) are pruned under workers too, not only by `run`."""
    config = tmp_path / "ragsync.toml"
    config.write_text(
        f'[state]\npath = "state.db"\n[embedder]\nkind = "http"\nurl = "{{embed}}"\n'
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{site.base_url}/sitemap.xml"\n'
    )
    embedding = EmbeddingServer(HashEmbedder())
    config.write_text(config.read_text().replace("{embed}", embedding.start()))
    try:
        first = ragsync_cli("run", config=config)
        assert first.returncode == 0, first.stderr
        state = StateDB(tmp_path / "state.db")
        keys = [d["doc_key"] for d in state.documents.list()]
        assert len(keys) >= 2 and all(state.index.get_raw_body(key) for key in keys)
        with state.write():  # the first page's body is older than the 7 days kept
            state.db.execute(
                "update raw_bodies set fetched_at = '2000-01-01T00:00:00Z' where doc_key = ?",
                [keys[0]],
            )
        state.close()
        worker = ragsync_cli("worker", "--until-idle", config=config)
        assert worker.returncode == 0, worker.stderr
        state = StateDB(tmp_path / "state.db")
        assert state.index.get_raw_body(keys[0]) is None
        assert state.index.get_raw_body(keys[1]) is not None
        state.close()
    finally:
        embedding.stop()
