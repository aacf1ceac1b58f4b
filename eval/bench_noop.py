"""A no-op `ragsync run` on a state DB of 100,000 documents with nothing due: time and memory.

The state is real: a small site is synced for real, then its document and chunk rows are cloned
under new keys until the state holds ``--documents`` documents (each with its chunks) and an
embedding cache of one vector per chunk. Every document's next check lies a day ahead and the
source's listing is not due, so the run must find nothing to do without reading the whole state
or loading the model. Measured as a fresh process: wall time and peak RSS (``wait4``).

Usage: python eval/bench_noop.py [--documents 100000] → eval/results/noop.json and noop.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from eval.evolving import EvolvingSite  # noqa: E402

SEED_PAGES = 20


def measure_rss(command: list[str]) -> tuple[float, float, dict]:
    """Wall seconds, peak RSS in MB (the child's own, from ``os.wait4``) and its JSON report."""
    read, write = os.pipe()
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child: stdout into the pipe, stderr dropped, then exec
        os.dup2(write, 1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(read)
        os.execv(command[0], command)
    os.close(write)
    with os.fdopen(read) as pipe:
        out = pipe.read()
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({code})")
    return wall, usage.ru_maxrss / 1024, json.loads(out)


def clone(db: sqlite3.Connection, table: str, copies: int, rewrite: dict[str, str]) -> None:
    """Insert ``copies`` copies of every row of ``table``; ``rewrite`` maps a column to an SQL
    expression over the original columns and ``n`` (the copy number)."""
    columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
    select = ", ".join(rewrite.get(column, column) for column in columns)
    db.execute(
        f"WITH RECURSIVE copy(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM copy WHERE n < ?) "
        f"INSERT INTO {table} ({', '.join(columns)}) SELECT {select} FROM {table}, copy",
        (copies,),
    )


def build_state(work: Path, documents: int) -> Path:
    evolving = EvolvingSite(SEED_PAGES)
    base = evolving.site.start()
    config = work / "ragsync.toml"
    config.write_text(
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{base}/sitemap.xml"\nevery = "1d"\n'
    )
    try:
        subprocess.run(
            [sys.executable, "-m", "ragsync", "run", "--json", "--config", str(config)],
            check=True,
            capture_output=True,
        )
    finally:
        evolving.site.stop()
    db = sqlite3.connect(work / ".ragsync" / "state.db")
    seeded = db.execute("SELECT count(*) FROM documents").fetchone()[0]
    copies = -(-documents // seeded) - 1
    later = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(time.time() + 86400))
    with db:
        suffix = "'/copy-' || n"
        clone(
            db,
            "documents",
            copies,
            {
                "doc_key": f"doc_key || {suffix}",
                "url": f"url || {suffix}",
                "canonical_url": f"canonical_url || {suffix}",
            },
        )
        db.execute("UPDATE documents SET next_check_at = ?", (later,))
        clone(
            db,
            "chunks",
            copies,
            {"point_id": f"point_id || {suffix}", "doc_key": f"doc_key || {suffix}"},
        )
        # one cached vector per chunk, as a state that embedded them all would hold
        clone(
            db,
            "embedding_cache",
            copies,
            {"text_hash": f"text_hash || {suffix}", "vector": "randomblob(length(vector))"},
        )
    db.execute("VACUUM")
    db.close()
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ragsync-noop-"))
    started = time.perf_counter()
    config = build_state(work, options.documents)
    db = sqlite3.connect(work / ".ragsync" / "state.db")
    sizes = {
        table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("documents", "chunks", "embedding_cache")
    }
    db.close()
    state_mb = (work / ".ragsync" / "state.db").stat().st_size / 2**20
    print(f"state built in {time.perf_counter() - started:.0f} s: {sizes}, {state_mb:.0f} MB")
    command = [sys.executable, "-m", "ragsync", "run", "--json", "--config", str(config)]
    runs = [measure_rss(command) for _ in range(3)]
    wall, rss, report = min(runs)
    counters = report["counters"]
    result = {
        "documents": sizes["documents"],
        "chunks": sizes["chunks"],
        "cached_vectors": sizes["embedding_cache"],
        "state_mb": round(state_mb),
        "wall_s": round(wall, 2),
        "wall_s_runs": [round(r[0], 2) for r in runs],
        "peak_rss_mb": round(max(r[1] for r in runs)),
        "requests_sent": counters["requests_sent"],
        "chunks_embedded": counters["chunks_embedded"],
    }
    print(json.dumps(result))
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "noop.json").write_text(json.dumps(result, indent=2) + "\n")
    (options.out / "noop.md").write_text(
        "| no-op run, nothing due | documents | chunks | state DB | wall s (best of 3) "
        "| peak RSS | requests |\n|---|---:|---:|---:|---:|---:|---:|\n"
        f"| `ragsync run` | {result['documents']:,} | {result['chunks']:,} | "
        f"{result['state_mb']:,} MB | {result['wall_s']} | {result['peak_rss_mb']} MB | "
        f"{result['requests_sent']} |\n"
    )


if __name__ == "__main__":
    main()
