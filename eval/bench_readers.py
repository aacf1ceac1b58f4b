"""What a reader in another process costs a writer of an embedded store, by design.

The two designs README "Vector stores" (*One store, many processes*) compares, on one Qdrant
Edge store of ``--points`` points (384-d, sparse vectors too, payloads as ragsync writes):

1. **Read through the holder** (what ragsync does): a reader process searches back to back
   through the writer's socket while the writer upserts; measured: the reader's latency per
   search, and the writer's upsert time against the same upserts with no reader.
2. **Hand the store over** (the alternative): per reader, the writer closes the store and
   opens it again; measured: close + open + first search, the pause a writer would take per
   reader.

Usage::

    python eval/bench_readers.py [--points 20000] [--json eval/results/readers.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ragsync.config import StoreConfig  # noqa: E402
from ragsync.registry import open_store  # noqa: E402
from ragsync.sparse import SparseVector  # noqa: E402

DIM = 384
BATCH = 256
READER = """
import json, random, sys, time
sys.path.insert(0, sys.argv[1])
from ragsync.config import StoreConfig
from ragsync.registry import open_store
store = open_store(StoreConfig(kind="qdrant_edge", path=sys.argv[2], collection="bench"))
random.seed(3)
took = []
deadline = time.monotonic() + float(sys.argv[3])
while time.monotonic() < deadline:
    vector = [random.gauss(0, 1) for _ in range(384)]
    started = time.perf_counter()
    hits = store.search(vector, 5)
    took.append(time.perf_counter() - started)
    assert len(hits) == 5
print(json.dumps({"searches": len(took), "holding": store.holding, "took": took}))
"""


def points(start: int, count: int, rng: random.Random) -> tuple[list, list]:
    made, sparse = [], []
    for i in range(start, start + count):
        vector = [rng.gauss(0, 1) for _ in range(DIM)]
        payload = {
            "page_content": f"chunk {i} " + "words of a documentation page " * 20,
            "metadata": {"source": "docs", "url": f"https://docs.example/{i // 4}", "chunk": i},
        }
        made.append((f"00000000-0000-4000-8000-{i:012d}", vector, payload))
        terms = sorted(rng.sample(range(1, 30000), 24))
        sparse.append(SparseVector(tuple(terms), tuple(rng.random() for _ in terms)))
    return made, sparse


def upsert_seconds(store, start: int, count: int, rng: random.Random) -> float:
    made, sparse = points(start, count, rng)
    began = time.perf_counter()
    for at in range(0, count, BATCH):
        with store.writes():
            store.upsert(made[at : at + BATCH], sparse=sparse[at : at + BATCH])
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=20000)
    parser.add_argument("--writes", type=int, default=4096, help="points upserted per trial")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rng = random.Random(7)
    folder = Path(tempfile.mkdtemp(prefix="bench-readers-"))
    config = StoreConfig(kind="qdrant_edge", path=str(folder), collection="bench")
    store = open_store(config)
    store.ensure_collection(DIM, sparse=True)
    upsert_seconds(store, 0, args.points, rng)
    next_id = args.points

    alone = []
    for _ in range(3):
        alone.append(upsert_seconds(store, next_id, args.writes, rng))
        next_id += args.writes
    beside = []
    reader_runs = []
    for _ in range(3):
        reader = subprocess.Popen(
            [sys.executable, "-c", READER, str(ROOT), str(folder), "6"],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.5)  # its imports: then it searches back to back
        beside.append(upsert_seconds(store, next_id, args.writes, rng))
        next_id += args.writes
        out, _ = reader.communicate(timeout=120)
        reader_runs.append(json.loads(out))
    assert not any(run["holding"] for run in reader_runs)
    latencies = [t for run in reader_runs for t in run["took"]]

    handover = []
    query = [rng.gauss(0, 1) for _ in range(DIM)]
    for _ in range(5):
        began = time.perf_counter()
        store.close()
        store = open_store(config)
        store.search(query, 5)
        handover.append(time.perf_counter() - began)
    store.close()

    result = {
        "points": args.points,
        "writes_per_trial": args.writes,
        "upsert_s_alone": alone,
        "upsert_s_with_reader": beside,
        "writer_ratio_with_reader": statistics.median(beside) / statistics.median(alone),
        "reader_searches": len(latencies),
        "reader_search_ms_median": 1000 * statistics.median(latencies),
        "reader_search_ms_p95": 1000 * sorted(latencies)[int(0.95 * len(latencies))],
        "handover_s_median": statistics.median(handover),
    }
    print(f"Qdrant Edge, {args.points} points; {args.writes} points upserted per trial")
    print(f"  writer, alone:            {statistics.median(alone):.2f} s (median of 3)")
    print(
        f"  writer, a reader beside:  {statistics.median(beside):.2f} s "
        f"({result['writer_ratio_with_reader']:.2f}x)"
    )
    print(
        f"  reader through the holder: {result['reader_search_ms_median']:.1f} ms median, "
        f"{result['reader_search_ms_p95']:.1f} ms p95 ({len(latencies)} searches)"
    )
    print(f"  hand-over (close, open, search): {result['handover_s_median'] * 1000:.0f} ms each")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
