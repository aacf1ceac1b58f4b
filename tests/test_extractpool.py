"""Extraction in worker processes: the same results as in-process, safe from many threads, and a
page that overruns its budget or kills its worker ends that page only.

The pages are real documentation sites installed on the machine (an mdBook and a DocBook
manual): those are what crashed and stalled extraction on the fetch threads.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ragsync import extractpool
from ragsync.errors import ExtractError
from ragsync.extract import extract_response
from ragsync.extractpool import ExtractPool, shared_pool

RUST_DOCS = Path.home() / ".rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html"
MDBOOK = RUST_DOCS / "cargo"  # the Cargo Book
DOCBOOK = Path("/usr/share/doc/valgrind/html")  # the Valgrind manual (DocBook XSL)
HTML = "text/html; charset=utf-8"


def real_pages(folder: Path, *, max_bytes: int = 100_000) -> list[tuple[str, bytes]]:
    """(url, body) of the site's pages, the single-page print versions and changelogs left out
    (max_bytes) so the stress test stays a few seconds."""
    if not folder.is_dir():
        pytest.skip(f"{folder} is not installed (the real documentation pages of this test)")
    pages = []
    for path in sorted(folder.rglob("*.html")):
        body = path.read_bytes()
        if len(body) <= max_bytes:
            pages.append((f"http://docs.test/{path.relative_to(folder)}", body))
    return pages


def slow_page() -> tuple[str, bytes]:
    """The largest single-page manual installed, its content three times over: about 5 s of
    extraction, far over a 1 s budget (which the pool rounds up to the next whole second of
    the worker's CPU, so a page of 1.8 s alone could pass)."""
    candidates = [RUST_DOCS / name / "print.html" for name in ("reference", "book", "cargo")]
    found = [path for path in candidates if path.is_file()]
    if not found:
        pytest.skip(f"no single-page manual (print.html) under {RUST_DOCS}")
    path = max(found, key=lambda p: p.stat().st_size)
    body = path.read_bytes()
    start, end = body.index(b"<main>") + len(b"<main>"), body.index(b"</main>")
    body = body[:start] + body[start:end] * 3 + body[end:]
    return f"http://docs.test/{path.parent.name}/print.html", body


def small_page() -> tuple[str, bytes]:
    return real_pages(DOCBOOK)[0]


def test_eight_threads_through_the_pool_give_the_sequential_results():
    pages = real_pages(MDBOOK) + real_pages(DOCBOOK)
    results = {}
    workers: set[int] = set()
    with ExtractPool(workers=2, cpu_budget=60) as pool:
        # Fresh threads every 16 pages, as every run's fetch pool has: threads that start
        # together reach the same parser steps together, which is when in-process extraction
        # corrupted the heap. And concurrent first, while lxml's string dictionary is young.
        for start in range(0, len(pages), 16):
            batch = pages[start : start + 16]
            with ThreadPoolExecutor(max_workers=8) as threads:
                extracted = threads.map(lambda page: pool.extract(page[1], HTML, page[0]), batch)
                results.update(zip([url for url, _ in batch], extracted, strict=True))
            workers.update(pool.pids)
        assert workers == set(pool.pids)  # no worker died (none was replaced)
    assert len(results) > 100
    assert results == {url: extract_response(body, HTML, url) for url, body in pages}


def test_light_pages_keep_one_worker_busy():
    """Pages that take milliseconds never wait long for the running worker, so the pool's other
    slot starts no process (starting one costs more CPU than a light site's pages). The wait
    for the first process to start is no such wait: counting it, 8 threads started both."""
    url, body = small_page()
    with ExtractPool(workers=2, cpu_budget=60) as pool:
        with ThreadPoolExecutor(max_workers=8) as threads:
            results = list(threads.map(lambda _: pool.extract(body, HTML, url), range(40)))
        assert len(pool.pids) == 1
    assert results == [extract_response(body, HTML, url)] * 40


def test_pages_that_wait_for_a_worker_start_the_other_slots():
    pages = real_pages(MDBOOK)[:24]
    with ExtractPool(workers=3, cpu_budget=60) as pool:
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=8) as threads:
            list(threads.map(lambda page: pool.extract(page[1], HTML, page[0]), pages))
        if time.monotonic() - started < 3 * extractpool.GROW_AFTER:
            pytest.skip("the pages took too little time to make any page wait")
        assert len(pool.pids) > 1


def test_a_page_over_its_cpu_budget_fails_alone():
    slow_url, slow_body = slow_page()
    url, body = small_page()
    with ExtractPool(workers=1, cpu_budget=1) as pool:
        assert pool.extract(body, HTML, url) == extract_response(body, HTML, url)
        (first,) = pool.pids
        started = time.monotonic()
        with pytest.raises(ExtractError) as failed:
            pool.extract(slow_body, HTML, slow_url)
        assert (failed.value.url, failed.value.reason) == (
            slow_url,
            "extraction over its time budget (1s of CPU)",
        )
        assert time.monotonic() - started < 30  # ended at its budget, not run to the end
        assert pool.pids == ()  # the worker is gone...
        assert pool.extract(body, HTML, url) == extract_response(body, HTML, url)
        assert pool.pids != (first,)  # ...and the next page has a new one


def test_a_worker_stuck_without_cpu_is_killed_at_the_wall_time_backstop():
    url, body = small_page()
    with ExtractPool(workers=1, cpu_budget=0.2) as pool:  # 10 x 0.2 s of wall time
        assert pool.extract(body, HTML, url) == extract_response(body, HTML, url)
        (pid,) = pool.pids
        os.kill(pid, signal.SIGSTOP)  # asleep: it uses no CPU, so only the wall clock ends it
        with pytest.raises(ExtractError, match=r"over its time budget \(2s of wall time\)"):
            pool.extract(body, HTML, url)
        assert pool.extract(body, HTML, url) == extract_response(body, HTML, url)
        assert pool.pids not in ((), (pid,))


def test_a_worker_killed_mid_page_fails_that_page_only():
    slow_url, slow_body = slow_page()
    url, body = small_page()
    with ExtractPool(workers=1, cpu_budget=120) as pool:
        assert pool.extract(body, HTML, url) == extract_response(body, HTML, url)
        (pid,) = pool.pids
        errors: list[ExtractError] = []

        def extract_slow_page() -> None:
            try:
                pool.extract(slow_body, HTML, slow_url)
            except ExtractError as exc:
                errors.append(exc)

        caller = threading.Thread(target=extract_slow_page)
        caller.start()
        time.sleep(0.5)  # the page is in the worker (it takes seconds)
        os.kill(pid, signal.SIGKILL)
        caller.join(timeout=60)
        assert not caller.is_alive()
        assert [(e.url, e.reason) for e in errors] == [
            (slow_url, "extractor process died (signal 9, SIGKILL)")
        ]
        assert pool.extract(body, HTML, url) == extract_response(body, HTML, url)
        assert pool.pids not in ((), (pid,))


def test_extraction_errors_come_back_as_extract_errors_and_keep_the_worker():
    url, body = small_page()
    with ExtractPool(workers=1) as pool:
        with pytest.raises(ExtractError, match="no text and no title"):
            pool.extract(b"<html><body><script>var x;</script></body></html>", HTML, "http://x/e")
        (pid,) = pool.pids
        with pytest.raises(ExtractError, match="extractor raised TypeError"):
            pool.extract("a str is not a body", HTML, "http://x/bug")  # type: ignore[arg-type]
        assert pool.extract(body, HTML, url) == extract_response(body, HTML, url)
        assert pool.pids == (pid,)


def test_no_process_starts_before_the_first_html_page():
    pool = shared_pool(workers=1, cpu_budget=7)
    assert shared_pool(workers=1, cpu_budget=7) is pool
    assert shared_pool(workers=1, cpu_budget=8) is not pool
    assert pool.pids == ()
    markdown = pool.extract(b"# Notes\n\nplain text", "text/markdown", "http://x/notes.md")
    assert markdown.extractor == "text"
    assert pool.pids == ()  # text needs no parser: it never leaves this process
    url, body = small_page()
    assert pool.extract(body, HTML, url) == extract_response(body, HTML, url)
    assert len(pool.pids) == 1
    pool.close()
    assert pool.pids == ()
    assert shared_pool(workers=1, cpu_budget=7) is not pool  # a closed pool is replaced


def test_workers_do_not_rerun_the_callers_script(tmp_path):
    # multiprocessing's spawn and forkserver re-run the parent's __main__ in every worker; a
    # script without an `if __name__ == "__main__":` guard would run (and sync) twice.
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from ragsync.extractpool import ExtractPool\n"
        "print('script ran', flush=True)\n"
        "with ExtractPool(workers=1) as pool:\n"
        "    html = b'<html><head><title>T</title></head><body><p>Hello there.</p></body></html>'\n"
        "    print(pool.extract(html, 'text/html', 'http://x/').markdown, end='')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    # The page's title heads its Markdown (README "Documentation sites").
    assert (done.returncode, done.stdout) == (0, "script ran\n# T\n\nHello there.\n"), done.stderr


def test_a_worker_imports_the_extractor_not_the_sync_machinery():
    # A worker starts on the critical path of a cold sync: `import ragsync` must not pull in
    # the syncer, the state DB or the stores (ragsync/__init__.py loads them on first use).
    program = "import sys, ragsync.extractpool; print(sorted(m for m in sys.modules if m in {"
    program += "'ragsync.sync', 'ragsync.state', 'ragsync.config', 'sqlite_utils'}))"
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
