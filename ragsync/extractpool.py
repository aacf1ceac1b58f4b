"""Extraction in worker processes: one page at a time per process, a CPU-time budget per page.

Why processes and not the fetch threads: trafilatura and lxml are not safe on several threads
of one process. lxml gives each thread its own libxml2 string dictionary, but a thread's first
parse adopts the dictionary already attached to the parser it parses with, and trafilatura
parses every page with one module-level ``HTMLParser``: the fetch threads end up inserting into
one dictionary with the GIL released (``deepcopy`` of a tree: ``xmlCopyDoc`` →
``xmlDictLookup``), which corrupts the heap (segfault, ``double free or corruption``). lxml also
serialises each compiled ``XPath`` object with a lock, and trafilatura keeps about forty of
them at module level, so one evaluation that never ends stops every thread at that expression.
In a process of its own a page can do neither, and a page that overruns its budget or kills its
process ends that page, never the run.

The budget is CPU seconds, enforced by the kernel (``RLIMIT_CPU``): what a page costs does not
depend on how loaded the machine is, while its wall time does (the 8.4 MB single-page Node.js
manual takes 14 s of CPU, and from 16 s of wall time on an idle 2-core machine to 57 s on a busy
one). A worker that is stuck without using CPU is killed after ``WALL_FACTOR`` times the budget
of wall time.

Example::

    pool = shared_pool(workers=2, cpu_budget=30)
    extracted = pool.extract(response.body, response.headers["content-type"], response.url)
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import math
import os
import queue
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from ragsync.errors import ExtractError
from ragsync.extract import extract_response
from ragsync.models import Extracted, media_type
from ragsync.policy import TEXT_TYPES

DEFAULT_CPU_BUDGET = 30.0  # CPU seconds per page: twice the slowest real page measured (14 s
# for an 8.4 MB manual); fetch.max_body_bytes allows 10 MB.
WALL_FACTOR = 10  # wall time a page may take, in budgets: only a worker stuck asleep reaches it
# A page waits this long for a running worker before another one starts (starting one costs
# about 0.2 CPU s: an interpreter importing trafilatura).
GROW_AFTER = 0.2
START_TIMEOUT = 120.0  # a new worker imports trafilatura (~0.5 s; much longer on a loaded host)

# The worker's whole program: the parent's import path first, so it runs the parent's ragsync.
# Once the parent closes the socket the worker holds nothing: it ends without the interpreter's
# teardown (0.1 s of freeing trafilatura and lxml, which the parent's close waits for).
_BOOT = (
    "import os, sys; sys.path[:] = sys.argv[3:]; "
    "from ragsync.extractpool import serve; serve(int(sys.argv[1]), float(sys.argv[2])); "
    "sys.stderr.flush(); os._exit(0)"
)


def default_workers() -> int:
    """Worker processes when none are configured: two, or one on a one-core machine.

    Extraction is CPU-bound and a run also embeds, so more processes than cores only queue.
    """
    return max(1, min(2, os.cpu_count() or 1))


class _WorkerLost(Exception):
    """The worker process is gone (killed for its budget, or died); ``reason`` says which."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _Worker:
    """One worker process and the parent's end of its socket; used by one thread at a time."""

    def __init__(self, process: subprocess.Popen[bytes], conn: Connection):
        self.process = process
        self.conn = conn

    @classmethod
    def start(cls, cpu_budget: float) -> _Worker:
        """A new worker, ready for its first page, which kills itself when a page uses more
        than ``cpu_budget`` CPU seconds.

        A fresh interpreter (fork + exec at once), never a fork that keeps running this
        process's code: the parent has httpx, embedding and heartbeat threads, and
        multiprocessing's spawn and forkserver would re-run the parent's ``__main__`` script
        in every worker. Its own process group keeps a terminal's Ctrl-C for the parent.

        Raises:
            _WorkerLost: the worker did not come up.
        """
        ours, theirs = socket.socketpair()
        with theirs:
            path = [entry or os.getcwd() for entry in sys.path if isinstance(entry, str)]
            process = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(theirs.fileno()), repr(cpu_budget), *path],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # stdout may be the CLI's --json output
                process_group=0,
            )
        worker = cls(process, Connection(ours.detach()))
        try:
            if worker.conn.poll(START_TIMEOUT) and worker.conn.recv() == "ready":
                return worker
            reason = f"extractor process did not start in {START_TIMEOUT:g}s"
        except (EOFError, OSError):  # it exited while importing
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
            reason = _died(process.returncode, "extractor process did not start")
        worker.stop(kill=True)
        raise _WorkerLost(reason)

    def run(self, job: tuple[bytes, str, str], cpu_budget: float) -> tuple[str, Any]:
        """The worker's reply to ``job``.

        Raises:
            _WorkerLost: a budget ran out (the process is gone) or the process died.
        """
        wall = WALL_FACTOR * cpu_budget
        try:
            self.conn.send(job)
            if not self.conn.poll(wall):
                self.stop(kill=True)
                raise _WorkerLost(f"extraction over its time budget ({wall:g}s of wall time)")
            reply: tuple[str, Any] = self.conn.recv()
            return reply
        except (EOFError, OSError):  # the socket broke: the process is dead or dying
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)  # a dying process has not always exited yet
            self.stop(kill=True)
            if self.process.returncode == -signal.SIGXCPU:  # the kernel enforced RLIMIT_CPU
                reason = f"extraction over its time budget ({cpu_budget:g}s of CPU)"
            else:
                reason = _died(self.process.returncode, "extractor process died")
            raise _WorkerLost(reason) from None

    def stop(self, *, kill: bool = False) -> None:
        """End the process: at once with ``kill``, else by closing its socket (it exits when
        idle), killed if it is still there after 2 s."""
        if kill and self.process.poll() is None:
            self.process.kill()
        self.conn.close()
        try:
            self.process.wait(timeout=None if kill else 2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _died(returncode: int | None, what: str) -> str:
    """``what`` and how the process ended: "(signal 11, SIGSEGV)", "(exit code 1)"."""
    if returncode is not None and returncode < 0:
        try:
            name = f", {signal.Signals(-returncode).name}"
        except ValueError:
            name = ""
        return f"{what} (signal {-returncode}{name})"
    return f"{what} (exit code {returncode})"


def serve(fd: int, cpu_budget: float) -> None:
    """A worker process's main loop: one page per message on socket ``fd``, until it closes;
    a page that uses more than ``cpu_budget`` CPU seconds ends the process (SIGXCPU)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    faulthandler.enable()  # a crash prints the worker's Python stack to stderr
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))  # SIGXCPU would dump a core
    import markdownify  # noqa: F401  (loaded before "ready", so no page pays for it)
    import trafilatura  # noqa: F401

    conn = Connection(fd)
    try:
        conn.send("ready")
        while True:
            body, content_type, url = conn.recv()
            _limit_cpu(cpu_budget)
            reply: tuple[str, Any]
            try:
                reply = ("ok", extract_response(body, content_type, url))
            except ExtractError as exc:
                reply = ("error", exc.reason)
            except Exception as exc:  # any bug in a parser is this page's failure, not the run's
                reply = ("error", f"extractor raised {type(exc).__name__}: {exc}")
            conn.send(reply)
    except (EOFError, OSError):  # the parent closed the socket, or is gone
        return


def _limit_cpu(seconds: float) -> None:
    """Let this process use ``seconds`` more CPU (rounded up to whole seconds), then SIGXCPU."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    limit = math.ceil(usage.ru_utime + usage.ru_stime + seconds)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (limit, hard))


class ExtractPool:
    """Worker processes that turn fetched bodies into :class:`Extracted`, one page each at a time.

    Thread-safe: fetch threads call :meth:`extract` concurrently; a call waits for a free
    worker. Processes start on first need (a run of 304s starts none) and are reused; a worker
    that overruns the budget is killed, one that dies is replaced by the next page that needs it.

    Args:
        workers: at most this many worker processes (default :func:`default_workers`).
        cpu_budget: CPU seconds a page may use in its worker (rounded up to whole seconds);
            ``WALL_FACTOR`` times as many wall seconds end a worker that is stuck asleep.

    Example::

        with ExtractPool(workers=2, cpu_budget=30) as pool:
            extracted = pool.extract(body, "text/html; charset=utf-8", url)
    """

    def __init__(
        self, *, workers: int | None = None, cpu_budget: float = DEFAULT_CPU_BUDGET
    ) -> None:
        self.workers = default_workers() if workers is None else workers
        self.cpu_budget = cpu_budget
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, not {self.workers}")
        if not cpu_budget > 0:
            raise ValueError(f"cpu_budget must be positive, not {cpu_budget}")
        # LIFO: the warmest worker first, so a trickle of pages keeps a single process busy.
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()
        self._live: set[_Worker] = set()
        self._free = self.workers  # slots without a process: started when pages wait (_take)
        self._starting = 0  # processes being started
        self._up_since = 0.0  # when the newest process came up (time.monotonic)
        self._lock = threading.Lock()
        self._closed = False

    def extract(self, body: bytes, content_type: str, url: str) -> Extracted:
        """What ragsync indexes for a fetched body: :func:`ragsync.extract.extract_response`,
        run in a worker process within the budget (text and Markdown need no parser and stay
        in this process).

        Args:
            body: the response body as fetched.
            content_type: the ``Content-Type`` header value, parameters included.
            url: the page's final URL, named in errors.

        Raises:
            ExtractError: the page has no text and no title, is not text, raised inside the
                extractor, overran the budget ("extraction over its time budget (30s of
                CPU)") or
                its process died ("extractor process died (signal 11, SIGSEGV)").
            RuntimeError: the pool is closed.
        """
        if media_type(content_type) in TEXT_TYPES:
            return extract_response(body, content_type, url)
        worker = self._take()
        if worker is None:
            try:
                worker = self._start()
            except _WorkerLost as lost:
                raise ExtractError(url, lost.reason) from None
        try:
            status, value = worker.run((body, content_type, url), self.cpu_budget)
        except _WorkerLost as lost:
            self._forget(worker)
            raise ExtractError(url, lost.reason) from None
        except BaseException:  # e.g. KeyboardInterrupt while waiting: the worker's state is unknown
            self._forget(worker)
            worker.stop(kill=True)
            raise
        self._idle.put(worker)
        if status == "ok":
            extracted: Extracted = value
            return extracted
        raise ExtractError(url, value)

    @property
    def pids(self) -> tuple[int, ...]:
        """Process ids of the running workers (none before the first page)."""
        with self._lock:
            return tuple(w.process.pid for w in self._live if w.process.pid is not None)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop every worker process; later :meth:`extract` calls raise RuntimeError."""
        with self._lock:
            self._closed = True
            live, self._live = self._live, set()
        for worker in live:
            worker.stop()

    def __enter__(self) -> ExtractPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take(self) -> _Worker | None:
        """An idle worker, or None when the caller took a free slot and starts its process.

        A slot's process starts only when a page has waited :data:`GROW_AFTER` for a running
        one (counted from when the newest came up: the wait for a process to start is not a
        wait for a busy one) and none is starting, or when none runs at all: light pages keep
        one process busy, heavy ones soon have every slot's (README "Extraction").

        Raises:
            RuntimeError: the pool is closed.
        """
        since = time.monotonic()
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("the extract pool is closed")
                running = self._free < self.workers
            try:
                return self._idle.get(timeout=GROW_AFTER) if running else self._idle.get_nowait()
            except queue.Empty:
                with self._lock:
                    waited = time.monotonic() - max(since, self._up_since)
                    if self._free and not self._starting and (not running or waited >= GROW_AFTER):
                        self._free -= 1
                        self._starting += 1
                        return None

    def _start(self) -> _Worker:
        """Start the process of the slot :meth:`_take` gave (returned to the pool on failure)."""
        try:
            worker = _Worker.start(self.cpu_budget)
        except BaseException:
            with self._lock:
                self._starting -= 1
                self._free += 1
            raise
        with self._lock:
            self._starting -= 1
            self._up_since = time.monotonic()
            if not self._closed:
                self._live.add(worker)
                return worker
        worker.stop(kill=True)
        raise RuntimeError("the extract pool is closed")

    def _forget(self, worker: _Worker) -> None:
        """``worker`` is gone: its slot is free again."""
        with self._lock:
            self._live.discard(worker)
            self._free += 1


_shared: dict[tuple[int, float], ExtractPool] = {}
_shared_lock = threading.Lock()


def shared_pool(
    *, workers: int | None = None, cpu_budget: float = DEFAULT_CPU_BUDGET
) -> ExtractPool:
    """The process-wide pool with these settings: built on first use, closed at exit.

    Every syncer of a process shares it, so a test suite that builds hundreds of syncers pays
    for starting the workers (about half a second) once, and a run of 304s pays nothing.
    """
    key = (default_workers() if workers is None else workers, float(cpu_budget))
    with _shared_lock:
        pool = _shared.get(key)
        if pool is None or pool.closed:
            pool = _shared[key] = ExtractPool(workers=key[0], cpu_budget=key[1])
        return pool


@atexit.register
def _close_shared() -> None:
    with _shared_lock:
        pools = list(_shared.values())
        _shared.clear()
    for pool in pools:
        pool.close()


def _forget_shared_in_child() -> None:
    """A forked child must not talk to its parent's workers: it builds its own pool if needed."""
    global _shared_lock
    _shared.clear()
    _shared_lock = threading.Lock()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_forget_shared_in_child)
