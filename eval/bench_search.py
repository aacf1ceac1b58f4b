"""Warm search latency: `serve`'s ``GET /search`` (real HTTP on 127.0.0.1) and ``Syncer.search``.

Per store kind (Qdrant local mode, the default; Qdrant Edge) and size, a store is filled with
seeded random normalised 384-d vectors and ragsync-shaped payloads (as eval/bench_stores.py
does), each with the BM25 sparse vector of its text (60 words drawn from a Zipf-distributed
vocabulary of 30,000, so posting lists are as skewed as a real corpus's), the collection
recorded as holding them; then queried with the real MiniLM model embedding each query:

- serve: the app of `ragsync serve` (its sync loop stopped) under uvicorn on 127.0.0.1; one
  keep-alive client; 3 warm-up queries (the model load), then ``--queries`` timed ones per
  search mode (dense, sparse, hybrid);
- Syncer.search (the default mode, hybrid): one Syncer given the already-loaded model, so what
  is timed is one query embedding plus the store, reopened on each call (the Python API
  releases the store after each search so that another process may open an embedded store).

Usage: python eval/bench_search.py [--sizes 10000,100000] [--stores qdrant,qdrant_edge]
[--page-weight W] [--sparse-gate G]
→ eval/results/search.json and search.md.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

DIM = 384
BATCH = 2048
TOPICS = (
    "rotate the API keys",
    "configure the webhook secret",
    "retry a failed page",
    "change the embedding model",
    "delete a source",
    "throttle requests per host",
    "read the change log",
    "run several workers",
    "verify the vector store",
    "limit the crawl depth",
)


VOCABULARY = 30_000
WORDS_PER_CHUNK = 60
MODES = ("dense", "sparse", "hybrid")


def text(i: int, rng: Any) -> str:
    """Chunk ``i``'s text: topic words and Zipf-drawn vocabulary words (``w123``)."""
    ranks = rng.zipf(1.2, WORDS_PER_CHUNK)
    words = [f"w{r}" for r in ranks if r < VOCABULARY]
    return f"{TOPICS[i % len(TOPICS)]}: " + " ".join(words)


def payload(i: int, body: str, *, source: str = "docs") -> dict[str, Any]:
    """The LangChain-shaped payload ragsync writes for chunk ``i`` (6 chunks a page)."""
    page = i // 6
    return {
        "page_content": body,
        "metadata": {
            "doc_key": f"{source}:https://docs.example/{page}",
            "url": f"https://docs.example/{page}",
            "title": f"Page {page}",
            "headings": [f"Page {page}", f"Section {i % 6}"],
            "source": source,
            "chunk_index": i % 6,
        },
    }


def points(count: int, seed: int = 3) -> list[tuple[str, list[float], dict[str, Any]]]:
    """``count`` points (id, unit vector, payload), the same for the same seed."""
    import numpy as np

    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((count, DIM)).astype("float32")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [str(uuid.UUID(int=int(rng.integers(1, 2**63)) << 64 | i)) for i in range(count)]
    return [(ids[i], vectors[i].tolist(), payload(i, text(i, rng))) for i in range(count)]


def queries(n: int) -> list[str]:
    """``n`` distinct questions (no embedding cache can answer one from another)."""
    return [f"how do I {TOPICS[i % len(TOPICS)]} (case {i})?" for i in range(n)]


def percentiles(latencies_ms: list[float]) -> dict[str, float]:
    """p50 and p95 (nearest rank) of ``latencies_ms``, rounded to 0.1 ms."""
    ordered = sorted(latencies_ms)

    def rank(p: float) -> float:
        return ordered[max(0, min(len(ordered) - 1, round(p * len(ordered) + 0.5) - 1))]

    return {"p50_ms": round(statistics.median(ordered), 1), "p95_ms": round(rank(0.95), 1)}


def build(kind: str, count: int, folder: Path, search: dict[str, float] | None = None) -> Any:
    """A config whose store of ``kind`` holds ``count`` points (``search``: its ``[search]``
    table, hybrid search's ``page_weight`` and ``sparse_gate``; none: the defaults); returns
    the config."""
    from ragsync.config import config_from_mapping
    from ragsync.registry import store_class
    from ragsync.sparse import SPARSE_ID, encode
    from ragsync.state import StateDB

    path = folder / ("qdrant" if kind == "qdrant" else "edge")
    data = {
        "state": {"path": str(folder / "state.db")},
        "store": {"kind": kind, "path": str(path), "collection": "bench", "batch_size": BATCH},
        "sources": [{"id": "docs", "kind": "urls", "urls": ["https://docs.example/"]}],
    }
    if search:
        data["search"] = search
    config = config_from_mapping(data, base_dir=folder)
    store = store_class(kind).from_config(config.store)
    store.ensure_collection(DIM, sparse=True)
    made = points(count)
    for start in range(0, count, BATCH * 5):
        batch = made[start : start + BATCH * 5]
        store.upsert(batch, sparse=[encode(body["page_content"]) for _, _, body in batch])
    store.close()
    state = StateDB.from_config(config.state)  # the collection holds sparse vectors
    state.index.put_collection("bench", "bench", DIM, "2026-12-01T00:00:00Z")
    state.index.put_collection_sparse("bench", SPARSE_ID)
    # The pages, with their chunk counts: hybrid search looks up its candidates' pages.
    pages = sorted({body["metadata"]["doc_key"] for _, _, body in made})
    rows = [
        {
            "doc_key": key,
            "source_id": "docs",
            "canonical_url": key.removeprefix("docs:"),
            "status": "active",
            "first_seen_at": "2026-12-01T00:00:00Z",
            "chunk_count": 6,
        }
        for key in pages
    ]
    with state.write():
        state.db.table("documents").insert_all(rows, pk="doc_key")
    state.close()
    return config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def time_serve(config: Any, embedder: Any, texts: list[str]) -> dict[str, dict[str, float]]:
    """Latencies of ``GET /search`` per mode on a real uvicorn server on 127.0.0.1."""
    import httpx
    import uvicorn

    from ragsync.server import ServeLoop, create_app

    loop = ServeLoop(config)
    loop.stop.set()
    port = free_port()
    app = create_app(config, loop, embedder_factory=lambda: embedder)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    latencies: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            for query in texts[:3]:  # warm-up: the store opens
                client.get("/search", params={"q": query, "k": 10}).raise_for_status()
            for query in texts[3:]:
                for mode in MODES:
                    started = time.perf_counter()
                    answer = client.get("/search", params={"q": query, "k": 10, "mode": mode})
                    latencies[mode].append((time.perf_counter() - started) * 1000)
                    assert answer.status_code == 200 and len(answer.json()["hits"]) == 10, mode
    finally:
        server.should_exit = True
        thread.join(60)
    return {mode: percentiles(values) for mode, values in latencies.items()}


def time_syncer(config: Any, embedder: Any, texts: list[str]) -> dict[str, float]:
    """Latencies of ``Syncer.search`` (the model already loaded)."""
    from ragsync.sync import Syncer

    latencies = []
    with Syncer(config, embedder=embedder) as syncer:
        syncer.search(texts[0], k=10)
        for text in texts[1:]:
            started = time.perf_counter()
            assert len(syncer.search(text, k=10)) == 10
            latencies.append((time.perf_counter() - started) * 1000)
    return percentiles(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--stores", default="qdrant,qdrant_edge")
    parser.add_argument("--queries", type=int, default=100, help="timed queries through serve")
    parser.add_argument(
        "--syncer-queries", type=int, default=10, help="timed Syncer.search calls (each reopens)"
    )
    parser.add_argument(
        "--page-weight", type=float, default=None, help="[search] page_weight (default: its own)"
    )
    parser.add_argument(
        "--sparse-gate", type=float, default=None, help="[search] sparse_gate (default: its own)"
    )
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()
    from ragsync.embed import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    embedder.embed(["warm up"])
    texts = queries(options.queries + 3)
    embed_ms = []
    for query in texts[:30]:
        started = time.perf_counter()
        embedder.embed([query])
        embed_ms.append((time.perf_counter() - started) * 1000)
    rows = []
    for count in [int(s) for s in options.sizes.split(",")]:
        for kind in options.stores.split(","):
            with tempfile.TemporaryDirectory(prefix=f"search-{kind}-") as folder:
                started = time.perf_counter()
                search = {
                    key: value
                    for key, value in (
                        ("page_weight", options.page_weight),
                        ("sparse_gate", options.sparse_gate),
                    )
                    if value is not None
                }
                config = build(kind, count, Path(folder), search)
                build_s = time.perf_counter() - started
                row = {"store": kind, "points": count, "build_s": round(build_s, 1)}
                row["serve"] = time_serve(config, embedder, texts)
                row["syncer"] = time_syncer(config, embedder, texts[: options.syncer_queries + 1])
                row["embed_only"] = percentiles(embed_ms)
                rows.append(row)
                print(json.dumps(row), flush=True)
    write(rows, options)


def write(rows: list[dict[str, Any]], options: argparse.Namespace) -> None:
    """eval/results/search.json and search.md from the measured rows."""
    out = options.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "search.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        f"Real MiniLM query embedding; k = 10; {options.queries} timed queries through serve, "
        f"{options.syncer_queries} through Syncer.search; 2 CPU cores.",
        "",
        "| store | points | serve /search p50 / p95 ms: dense | sparse | hybrid "
        "| Syncer.search p50 / p95 ms | query embedding alone p50 ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        serve = " | ".join(f"{r['serve'][m]['p50_ms']} / {r['serve'][m]['p95_ms']}" for m in MODES)
        lines.append(
            f"| {r['store']} | {r['points']:,} | {serve} "
            f"| {r['syncer']['p50_ms']} / {r['syncer']['p95_ms']} | {r['embed_only']['p50_ms']} |"
        )
    (out / "search.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
