"""Extraction speed in-process vs through the worker pool, on a real installed mdBook; and the
crash of in-process extraction on threads, reproduced.

Speed: the Cargo Book's pages (every ``*.html`` under ``--site``) extracted one after another in
this process, then through an :class:`ExtractPool` of 1 and 2 workers fed by 8 threads (as the
fetch threads feed it); plus the pool's start-up cost (a fresh pool's first tiny page).

Repro (``--repro N``): N fresh processes each extract the first 48 pages of ``--site`` the way
ragsync did before the pool (``extract_response`` on 8 threads, a fresh thread pool every 16
pages, as every run's fetch pool is fresh); counts the runs that die. ``--own-dict``
first gives each thread its own libxml2 string dictionary (a throwaway parse with a parser of
its own), which is the control: the crash needs the shared dictionary.

Usage: python eval/bench_extract.py [--site DIR] [--repro N [--own-dict]]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ragsync.extract import extract_response  # noqa: E402
from ragsync.extractpool import ExtractPool  # noqa: E402

RUST_DOCS = Path.home() / ".rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html"
HTML = "text/html; charset=utf-8"
TINY = b"<html><head><title>T</title></head><body><p>Hello there.</p></body></html>"

REPRO = """
import sys, threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from ragsync.extract import extract_response
own_dict = sys.argv[1] == "1"
paths = [p for p in sorted(Path(sys.argv[2]).rglob("*.html")) if p.stat().st_size < 3e6]
pages = [p.read_bytes() for p in paths[:48]]
local = threading.local()
def one(body):
    if own_dict and not getattr(local, "done", False):
        import lxml.etree
        lxml.etree.fromstring(b"<a/>", lxml.etree.XMLParser())  # adopt a dict of its own
        local.done = True
    try:
        extract_response(body, "text/html", "http://x/")
    except Exception:
        pass
for start in range(0, len(pages), 16):
    with ThreadPoolExecutor(8) as threads:
        list(threads.map(one, pages[start:start + 16]))
"""


def pages_of(site: Path) -> list[tuple[str, bytes]]:
    return [
        (f"http://docs.test/{p.relative_to(site)}", p.read_bytes())
        for p in sorted(site.rglob("*.html"))
    ]


def through_pool(pages: list[tuple[str, bytes]], workers: int) -> float:
    """Seconds for all pages through a fresh pool (started before the clock)."""
    with ExtractPool(workers=workers, cpu_budget=120) as pool:
        with ThreadPoolExecutor(max(2, workers)) as warm:  # start every worker first
            list(warm.map(lambda _: pool.extract(TINY, HTML, "http://x/"), range(workers * 4)))
        started = time.perf_counter()
        with ThreadPoolExecutor(8) as threads:
            list(threads.map(lambda page: pool.extract(page[1], HTML, page[0]), pages))
        return time.perf_counter() - started


def bench(site: Path) -> None:
    pages = pages_of(site)
    extract_response(TINY, HTML, "http://x/")  # imports, outside the clock
    started = time.perf_counter()
    slowest = max((_timed(url, body) for url, body in pages), key=lambda t: t[0])
    sequential = time.perf_counter() - started
    print(f"{len(pages)} pages, {sum(len(b) for _, b in pages) / 1e6:.1f} MB, from {site}")
    print(f"in-process, sequential: {sequential:6.1f} s  {len(pages) / sequential:5.1f} pages/s")
    print(f"  slowest page: {slowest[0]:.2f} s ({slowest[1]})")
    for workers in (1, 2):
        took = through_pool(pages, workers)
        print(
            f"pool, {workers} worker(s), 8 threads: {took:6.1f} s  {len(pages) / took:5.1f} pages/s"
        )
    with ExtractPool(workers=1) as pool:
        for label in ("fresh pool, first page (starts a worker)", "same pool, next page"):
            started = time.perf_counter()
            pool.extract(TINY, HTML, "http://x/")
            print(f"{label}: {time.perf_counter() - started:.3f} s")


def _timed(url: str, body: bytes) -> tuple[float, str]:
    started = time.perf_counter()
    extract_response(body, HTML, url)
    return time.perf_counter() - started, url


def repro(site: Path, runs: int, own_dict: bool) -> None:
    died = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", REPRO, "1" if own_dict else "0", str(site)],
            capture_output=True,
            text=True,
            cwd=HERE.parent,
        )
        if done.returncode != 0:
            first = next((line for line in done.stderr.splitlines() if line.strip()), "")
            died.append(f"exit {done.returncode}: {first}")
    print(f"{len(died)} of {runs} runs died" + (" (own dict per thread)" if own_dict else ""))
    for line in died:
        print("  " + line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site", type=Path, default=RUST_DOCS / "cargo")
    parser.add_argument("--repro", type=int, default=0, metavar="N")
    parser.add_argument("--own-dict", action="store_true")
    args = parser.parse_args()
    if args.repro:
        repro(args.site, args.repro, args.own_dict)
    else:
        bench(args.site)


if __name__ == "__main__":
    main()
