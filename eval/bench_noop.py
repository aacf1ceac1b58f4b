"""`ragsync run` and `ragsync status` on a large state DB: nothing due, 1% due, and the status.

The state is real: a small site is synced for real, then its document and chunk rows are cloned
under new keys by bulk SQL until the state holds ``--documents`` documents (each with its chunks)
and an embedding cache of one vector per chunk. Every document's next check lies a day ahead
and the source's listing is not due. Measured as fresh processes, wall time and peak RSS
(``wait4``), for each size:

- the no-op run: nothing is due, so it must find nothing to do without reading the whole state
  or loading the model (best of 3);
- the due run: 1% of the pages (every hundredth row) made due, against a loopback origin on the
  site's address that answers 304 to every conditional request. Its cost must grow with the due
  pages, not the state size: the per-page figure, (due wall − no-op wall) / due pages, is the
  same at 100k and 1M;
- `ragsync status --json` (best of 3).

Each state is deleted once measured. At 1,000,000 documents it holds 8.4M chunks and as many
cached vectors, about 29 GB on disk: the generation (bulk ``INSERT … SELECT``, no journal) takes
minutes, and the run refuses to start without room for it.

Usage: python eval/bench_noop.py [--documents 100000] [--due-share 0.01] [--name noop]
→ eval/results/noop.json and noop.md. The scale run (``make bench-1m``): ``--documents
100000,1000000 --name noop-1m``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from eval.evolving import EvolvingSite  # noqa: E402
from ragsync.testing import serve_loopback, stop_server  # noqa: E402

SEED_PAGES = 20
BYTES_PER_DOCUMENT = 31_000  # measured: 2.9 GB at 100,000 documents (8.35 chunks each)
# The politeness limits set for throughput (one loopback host): the due run's cost is the
# state's, not a per-host queue's.
FETCH = "[fetch]\nconcurrency = 16\nper_host_concurrency = 16\n"


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
    """Insert ``copies`` copies of every row of ``table`` (as it is now); ``rewrite`` maps a
    column to an SQL expression over the original columns and ``n`` (the copy number).

    The originals are read from a temporary copy: inserting into the table a SELECT reads would
    make SQLite materialise the whole result first. The originals form the outer loop, so new
    keys arrive in runs of neighbours and the B-trees grow at a few pages at a time.
    """
    columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
    select = ", ".join(rewrite.get(column, column) for column in columns)
    db.execute(f"CREATE TEMP TABLE seed_{table} AS SELECT * FROM main.{table}")
    db.execute(
        f"WITH RECURSIVE copy(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM copy WHERE n < ?) "
        f"INSERT INTO main.{table} ({', '.join(columns)}) "
        f"SELECT {select} FROM seed_{table} CROSS JOIN copy",
        (copies,),
    )
    db.execute(f"DROP TABLE seed_{table}")


def seed(work: Path) -> tuple[Path, int]:
    """Sync a small site for real; return the config and the port the site answered on."""
    evolving = EvolvingSite(SEED_PAGES)
    base = evolving.site.start()
    config = work / "ragsync.toml"
    config.write_text(
        f'{FETCH}[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{base}/sitemap.xml"\n'
        'every = "1d"\n'
    )
    try:
        subprocess.run(
            [sys.executable, "-m", "ragsync", "run", "--json", "--config", str(config)],
            check=True,
            capture_output=True,
        )
    finally:
        evolving.site.stop()
    return config, int(base.rsplit(":", 1)[1])


def build_state(work: Path, documents: int) -> tuple[Path, int]:
    """A state of ``documents`` documents, every one due a day from now; return the config
    and the seed site's port."""
    config, port = seed(work)
    db = sqlite3.connect(work / ".ragsync" / "state.db", isolation_level=None)
    # A throwaway file built once: no journal, no fsync, a large page cache.
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    db.execute("PRAGMA cache_size = -1000000")
    db.execute("PRAGMA temp_store = MEMORY")
    seeded = db.execute("SELECT count(*) FROM documents").fetchone()[0]
    copies = -(-documents // seeded) - 1
    later = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(time.time() + 86400))
    db.execute("BEGIN")
    db.execute("UPDATE documents SET next_check_at = ?", (later,))
    suffix = "'/copy-' || n"
    clone(
        db,
        "documents",
        copies,
        {
            "doc_key": f"doc_key || {suffix}",
            "canonical_url": f"canonical_url || {suffix}",
            # distinct content: a page holding another's content would be its duplicate
            "raw_hash": f"raw_hash || {suffix}",
            "content_hash": f"content_hash || {suffix}",
        },
    )
    clone(
        db,
        "chunks",
        copies,
        {"point_id": f"point_id || {suffix}", "doc_key": f"doc_key || {suffix}"},
    )
    # one cached vector per chunk, as a state that embedded them all would hold
    clone(db, "embedding_cache", copies, {"text_hash": f"text_hash || {suffix}"})
    db.execute("COMMIT")
    db.execute("PRAGMA journal_mode = WAL")
    db.close()
    return config, port


def serve_304(port: int) -> Any:
    """The origin on the seed site's address: 304 to every conditional request (echoing the
    validator), 404 otherwise (robots.txt)."""

    def handle(handler: BaseHTTPRequestHandler) -> None:
        etag = handler.headers.get("If-None-Match")
        if etag or handler.headers.get("If-Modified-Since"):
            handler.send_response(304)
            if etag:
                handler.send_header("ETag", etag)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        handler.send_response(404)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return serve_loopback(handle, "GET", port)


def make_due(state: Path, share: float) -> int:
    """Make every ``1/share``-th document due now; return how many."""
    db = sqlite3.connect(state)
    step = round(1 / share)
    with db:
        cursor = db.execute(
            "UPDATE documents SET next_check_at = '2000-01-01T00:00:00.000000Z' "
            "WHERE rowid % ? = 0 AND status = 'active'",
            (step,),
        )
    db.close()
    return cursor.rowcount


def measure(work: Path, config: Path, port: int, share: float) -> dict[str, Any]:
    """No-op, due and status figures on the state in ``work``."""
    state = work / ".ragsync" / "state.db"
    db = sqlite3.connect(state)
    sizes = {
        table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("documents", "chunks", "embedding_cache")
    }
    db.close()
    state_mb = state.stat().st_size / 2**20
    run = [sys.executable, "-m", "ragsync", "run", "--json", "--config", str(config)]
    noop = [measure_rss(run) for _ in range(3)]
    status = [
        measure_rss([sys.executable, "-m", "ragsync", "status", "--json", "--config", str(config)])
        for _ in range(3)
    ]
    server = serve_304(port)
    try:
        due = []
        for _ in range(2):
            pages = make_due(state, share)
            wall, rss, report = measure_rss(run)
            due.append((wall, rss, report["counters"], pages))
    finally:
        stop_server(server)
    noop_wall = min(r[0] for r in noop)
    due_wall, due_rss, counters, pages = min(due, key=lambda r: r[0])
    return {
        "documents": sizes["documents"],
        "chunks": sizes["chunks"],
        "cached_vectors": sizes["embedding_cache"],
        "state_mb": round(state_mb),
        "noop_wall_s": round(noop_wall, 2),
        "noop_wall_s_runs": [round(r[0], 2) for r in noop],
        "noop_peak_rss_mb": round(max(r[1] for r in noop)),
        "noop_requests_sent": noop[0][2]["counters"]["requests_sent"],
        "noop_chunks_embedded": noop[0][2]["counters"]["chunks_embedded"],
        "status_wall_s": round(min(r[0] for r in status), 2),
        "status_peak_rss_mb": round(max(r[1] for r in status)),
        "due_pages": pages,
        "due_wall_s": round(due_wall, 2),
        "due_wall_s_runs": [round(r[0], 2) for r in due],
        "due_peak_rss_mb": round(due_rss),
        "due_requests_sent": counters["requests_sent"],
        "due_chunks_embedded": counters["chunks_embedded"],
        "due_ms_per_page": round((due_wall - noop_wall) / max(pages, 1) * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--documents", default="100000", help="sizes, comma-separated")
    parser.add_argument("--due-share", type=float, default=0.01)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--keep", action="store_true", help="keep each state (its path printed)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--name", default="noop", help="results file name (.json, .md)")
    parser.add_argument("--build", nargs=2, metavar=("DIR", "DOCUMENTS"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.build:
        print(build_state(Path(options.build[0]), int(options.build[1]))[1])
        return

    rows = []
    for documents in [int(size) for size in options.documents.split(",")]:
        free = shutil.disk_usage(options.work).free
        if free < documents * BYTES_PER_DOCUMENT * 1.2:
            raise SystemExit(
                f"{options.work}: {free / 2**30:.0f} GB free; {documents:,} documents need "
                f"{documents * BYTES_PER_DOCUMENT * 1.2 / 2**30:.0f} GB"
            )
        work = Path(tempfile.mkdtemp(prefix="ragsync-noop-", dir=options.work))
        try:
            started = time.perf_counter()
            # In a child process: this one stays small, as the children it forks start as
            # copies of it (their peak RSS would count its pages).
            built = subprocess.run(
                [sys.executable, __file__, "--build", str(work), str(documents)],
                check=True,
                capture_output=True,
                text=True,
            )
            config, port = work / "ragsync.toml", int(built.stdout)
            built_s = time.perf_counter() - started
            print(
                f"state of {documents:,} documents built in {built_s:.0f} s in {work}", flush=True
            )
            row = {**measure(work, config, port, options.due_share), "build_s": round(built_s)}
        finally:
            if not options.keep:
                shutil.rmtree(work, ignore_errors=True)
        print(json.dumps(row), flush=True)
        rows.append(row)
    write(rows, options.out, options.name)


def write(rows: list[dict[str, Any]], out: Path, name: str = "noop") -> None:
    """eval/results/noop.json and noop.md (or ``name``.json, .md) from the measured rows."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        "Each command a fresh process; wall (best of 3; due: best of 2) and peak RSS from "
        "`wait4`; the due pages answered 304 by a loopback origin; 2 CPU cores.",
        "",
        "| documents | chunks | state DB | no-op run s | no-op RSS | no-op requests "
        "| `status` s | due pages | due run s | due RSS | ms per due page |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['documents']:,} | {r['chunks']:,} | {r['state_mb']:,} MB | {r['noop_wall_s']} "
            f"| {r['noop_peak_rss_mb']} MB | {r['noop_requests_sent']} | {r['status_wall_s']} "
            f"| {r['due_pages']:,} | {r['due_wall_s']} | {r['due_peak_rss_mb']} MB "
            f"| {r['due_ms_per_page']} |"
        )
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
