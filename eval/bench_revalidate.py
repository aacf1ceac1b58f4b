"""Revalidation throughput: conditional requests per second of one `ragsync run` process.

A state of N pages (default 20,000) spread over 10 loopback hosts (127.0.0.1 … 127.0.0.10, each
its own host for politeness), every page indexed with an ETag and due (its revisit time has
passed; the source's listing is not due, so the run checks the known pages). Every origin
answers a canned ``304 Not Modified`` to a request whose ``If-None-Match`` matches. The origins
are one asyncio process of raw HTTP/1.1 keep-alive protocol handlers (no framework), so they
are not the bottleneck: their own capacity is measured first, by a load generator process.

The state is real: 10 pages (one per host) are synced by a real `ragsync run`, then their
document rows are cloned under new URLs (as ``eval/bench_noop.py`` does) until the state holds
N documents. Politeness is set for throughput: ``per_host_concurrency`` = ``fetch.concurrency``,
``per_host_delay`` 0.

For each ``fetch.concurrency``: a fresh `ragsync run --json` process; the revalidation rate is
the pages the origins answered divided by the time from their first page request to their last
(seen by the origins), and the total is the process's wall time, imports and state included.

HTTP/2 is not measured: ragsync's transport speaks HTTP/1.1 (``ragsync/transport.py``).

``--baseline DIR`` runs each concurrency also with the ragsync of another checkout (its
``ragsync`` package imported from DIR), alternating with this one, on the same state.

Usage: python eval/bench_revalidate.py [--pages 20000] [--concurrency 8 16 32 64]
[--repeat 1] [--baseline DIR] → eval/results/revalidate.json and revalidate.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

HOSTS = [f"127.0.0.{n}" for n in range(1, 11)]
ETAG = b'"v1"'
NOT_MODIFIED = b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\nServer: origin\r\n\r\n'
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


def page_body(head: bytes) -> bytes:
    """A 200 for a request without a matching validator: a small text page with the ETag."""
    path = head.split(b" ", 2)[1]
    body = b"Page " + path + b"\n\nA revalidation benchmark page at " + path + b".\n"
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nETag: "
        + ETAG
        + b"\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


class Stats:
    """What the origins answered, and when the first and last page request came."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.not_modified = self.full = self.robots = 0
        self.first = self.last = 0.0

    def page(self) -> None:
        now = time.monotonic()
        if not self.first:
            self.first = now
        self.last = now

    def as_dict(self) -> dict[str, float]:
        return {
            "not_modified": self.not_modified,
            "full": self.full,
            "robots": self.robots,
            "span_s": self.last - self.first,
        }


class Origin(asyncio.Protocol):
    """HTTP/1.1 keep-alive: every request head (GET, no body) gets its canned answer."""

    def __init__(self, stats: Stats):
        self.stats = stats
        self.buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        out = []
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
            if head.startswith(b"GET /robots.txt "):
                self.stats.robots += 1
                out.append(NOT_FOUND)
                continue
            self.stats.page()
            if b'\r\nif-none-match: "v1"' in head.lower():
                self.stats.not_modified += 1
                out.append(NOT_MODIFIED)
            else:
                self.stats.full += 1
                out.append(page_body(head))
        if out:
            self.transport.write(b"".join(out))  # type: ignore[attr-defined]


def serve_origins(hosts: list[str], control: Connection, port: int = 0) -> None:
    """The origin process: one listening socket per host, then answer ``control``: "stats"
    (and reset them) or "stop"."""
    loop = asyncio.new_event_loop()
    stats = Stats()
    servers = [
        loop.run_until_complete(loop.create_server(lambda: Origin(stats), host, port, backlog=512))
        for host in hosts
    ]
    control.send(
        [f"http://{h}:{s.sockets[0].getsockname()[1]}" for h, s in zip(hosts, servers, strict=True)]
    )
    stop = loop.create_future()

    def command() -> None:
        what = control.recv()
        if what == "stop":
            stop.set_result(None)
        else:
            control.send(stats.as_dict())
            stats.reset()

    loop.add_reader(control.fileno(), command)
    loop.run_until_complete(stop)


class Origins:
    """The origin process, started and stopped by the benchmark."""

    def __init__(self, hosts: list[str], port: int = 0):
        self.control, child = multiprocessing.Pipe()
        self.process = multiprocessing.Process(target=serve_origins, args=(hosts, child, port))
        self.process.start()
        self.bases: list[str] = self.control.recv()

    def stats(self) -> dict[str, float]:
        self.control.send("stats")
        return self.control.recv()

    def stop(self) -> None:
        self.control.send("stop")
        self.process.join(5)


# -- the origin's own capacity ----------------------------------------------------------------


async def hammer(bases: list[str], connections: int, seconds: float) -> int:
    """Keep-alive clients, one request in flight each, spread over the origins: answers got."""
    request = b'GET /p/1 HTTP/1.1\r\nHost: x\r\nIf-None-Match: "v1"\r\n\r\n'
    done = 0
    end = time.monotonic() + seconds

    async def client(base: str) -> None:
        nonlocal done
        host, port = base.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        while time.monotonic() < end:
            writer.write(request)
            await reader.readuntil(b"\r\n\r\n")
            done += 1
        writer.close()

    await asyncio.gather(*(client(bases[i % len(bases)]) for i in range(connections)))
    return done


def load_process(bases: list[str], connections: int, seconds: float, out: Connection) -> None:
    out.send(asyncio.run(hammer(bases, connections, seconds)))


def origin_capacity(origins: Origins, *, clients: int = 2, connections: int = 32) -> dict:
    """Requests/s the origin process answers to ``clients`` load processes (each
    ``connections`` keep-alive connections, one request in flight on each)."""
    seconds = 3.0
    pipes = []
    for _ in range(clients):
        mine, theirs = multiprocessing.Pipe()
        process = multiprocessing.Process(
            target=load_process, args=(origins.bases, connections, seconds, theirs)
        )
        process.start()
        pipes.append((process, mine))
    answered = sum(pipe.recv() for _, pipe in pipes)
    for process, _ in pipes:
        process.join()
    origins.stats()  # reset
    return {
        "requests_per_s": round(answered / seconds),
        "load_processes": clients,
        "connections": clients * connections,
    }


# -- the state ---------------------------------------------------------------------------------


def write_config(work: Path, concurrency: int) -> Path:
    config = work / "ragsync.toml"
    config.write_text(
        "[fetch]\n"
        f"concurrency = {concurrency}\n"
        f"per_host_concurrency = {concurrency}\n"
        'per_host_delay = "0s"\n'
        "[[sources]]\n"
        'id = "docs"\nkind = "urls"\nurls_file = "urls.txt"\n'
        'every = "1d"\nmin_interval = "1h"\n'
    )
    return config


def ragsync_run(config: Path, *extra: str, root: Path = HERE.parent) -> tuple[float, float, dict]:
    """A `ragsync run --json` process (the ragsync of checkout ``root``): its wall time, its
    CPU time (user + system: less sensitive than wall time to a loaded machine) and report."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ragsync", "run", "--json", "--config", str(config), *extra],
        capture_output=True,
        text=True,
        cwd=root,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if done.returncode not in (0, 1):
        raise SystemExit(f"ragsync run failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, cpu, json.loads(done.stdout)


def build_state(work: Path, origins: Origins, pages: int) -> Path:
    """A real sync of one page per host, then its document rows cloned up to ``pages``."""
    per_host = -(-pages // len(origins.bases))
    (work / "urls.txt").write_text("".join(f"{base}/p/0\n" for base in origins.bases))
    config = write_config(work, 8)
    ragsync_run(config)
    db = sqlite3.connect(work / ".ragsync" / "state.db")
    seeded = db.execute("select count(*) from documents where etag is not null").fetchone()[0]
    assert seeded == len(origins.bases), f"seed run indexed {seeded} pages"
    columns = [row[1] for row in db.execute("PRAGMA table_info(documents)")]
    rewrite = {
        column: f"replace({column}, '/p/0', '/p/' || n)"
        for column in ("doc_key", "url", "canonical_url", "title", "markdown")
    }
    # Each clone a page of its own (the same content under two URLs of a host is one page,
    # README "Concepts"), and each host's pages their own content.
    key = rewrite["doc_key"]
    rewrite.update({column: f"{column} || '@' || {key}" for column in ("raw_hash", "content_hash")})
    select = ", ".join(rewrite.get(column, column) for column in columns)
    with db:
        db.execute(
            "WITH RECURSIVE copy(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM copy WHERE n < ?) "
            f"INSERT INTO documents ({', '.join(columns)}) SELECT {select} FROM documents, copy",
            (per_host - 1,),
        )
    db.close()
    (work / "urls.txt").write_text(
        "".join(f"{base}/p/{n}\n" for base in origins.bases for n in range(per_host))
    )
    return config


def make_due(work: Path) -> int:
    """Every page due now (its revisit time passed); the listing stays not due."""
    db = sqlite3.connect(work / ".ragsync" / "state.db")
    with db:
        db.execute("update documents set next_check_at = '2000-01-01T00:00:00.000000Z'")
    count = db.execute("select count(*) from documents").fetchone()[0]
    db.close()
    return int(count)


def revalidate(work: Path, config: Path, origins: Origins, concurrency: int, root: Path) -> dict:
    """One `ragsync run` over the state with every page due: what the origins saw, and the
    process's wall time."""
    pages = make_due(work)
    wall, cpu, report = ragsync_run(config, root=root)
    seen = origins.stats()
    counters = report["counters"]
    return {
        "concurrency": concurrency,
        "pages": pages,
        "responses_304": counters["responses_304"],
        "conditional_requests_sent": counters["conditional_requests_sent"],
        "origin_304": seen["not_modified"],
        "origin_200": seen["full"],
        "revalidation_s": round(seen["span_s"], 2),
        "requests_per_s": round(seen["not_modified"] / max(seen["span_s"], 1e-9)),
        "total_s": round(wall, 2),
        "pages_per_s_total": round(counters["responses_304"] / wall),
        "cpu_s": round(cpu, 2),
        "pages_per_cpu_s": round(counters["responses_304"] / cpu),
        "ok": report["ok"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--repeat", type=int, default=1, help="runs per concurrency (best kept)")
    parser.add_argument("--baseline", type=Path, help="another checkout, run side by side")
    parser.add_argument("--port", type=int, default=0, help="one port for every origin")
    parser.add_argument("--work", type=Path, help="keep the state here (reused when present)")
    parser.add_argument("--serve", action="store_true", help="only serve the origins")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()

    work = options.work or Path(tempfile.mkdtemp(prefix="ragsync-revalidate-"))
    work.mkdir(parents=True, exist_ok=True)
    origins = Origins(HOSTS, options.port)
    if options.serve:  # for profiling a run by hand against a kept state
        print(" ".join(origins.bases), flush=True)
        try:
            origins.process.join()
        finally:
            origins.stop()
        return
    rows = []
    try:
        capacity = origin_capacity(origins)
        print(f"origin capacity: {capacity}", flush=True)
        if (work / "urls.txt").exists():
            config = work / "ragsync.toml"
        else:
            config = build_state(work, origins, options.pages)
        origins.stats()  # the seed run's requests
        systems = [("this", HERE.parent)]
        if options.baseline:
            systems.append(("baseline", options.baseline.resolve()))
        for concurrency in options.concurrency:
            write_config(work, concurrency)
            best: dict[str, dict] = {}
            for _ in range(options.repeat):
                for system, root in systems:
                    row = revalidate(work, config, origins, concurrency, root)
                    row["system"] = system
                    print(json.dumps(row), flush=True)
                    if system not in best or row["requests_per_s"] > best[system]["requests_per_s"]:
                        best[system] = row
            rows += best.values()
    finally:
        origins.stop()
    result = {
        "pages": options.pages,
        "hosts": len(HOSTS),
        "origin_capacity": capacity,
        "runs": rows,
        "baseline": str(options.baseline) if options.baseline else None,
        "cores": os.cpu_count(),
    }
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "revalidate.json").write_text(json.dumps(result, indent=2) + "\n")
    (options.out / "revalidate.md").write_text(markdown(result))
    print(markdown(result))


def markdown(result: dict) -> str:
    capacity = result["origin_capacity"]
    lines = [
        f"{result['pages']:,} pages on {result['hosts']} loopback hosts, every page due, every "
        f"origin answering 304; one `ragsync run` process per row; per_host_concurrency = "
        f"fetch.concurrency, per_host_delay 0; {result['cores']} CPU cores. Origin capacity "
        f"(one asyncio process, {capacity['connections']} keep-alive connections from "
        f"{capacity['load_processes']} load processes): {capacity['requests_per_s']:,} "
        "requests/s.",
        "",
        "| ragsync | fetch.concurrency | pages | 304s | revalidation s | conditional requests/s "
        "| total s (process) | pages/s (total) | CPU s | pages per CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["runs"]:
        lines.append(
            f"| {row['system']} | {row['concurrency']} | {row['pages']:,} | "
            f"{row['responses_304']:,} | {row['revalidation_s']} | {row['requests_per_s']:,} | "
            f"{row['total_s']} | {row['pages_per_s_total']:,} | {row['cpu_s']} | "
            f"{row['pages_per_cpu_s']:,} |"
        )
    if result.get("baseline"):
        lines += ["", f"baseline: the ragsync of `{result['baseline']}`, run alternately."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
