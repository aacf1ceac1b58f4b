"""`ragsync worker` with its state DB statements and its lease and claim calls counted and
timed, for `eval/bench_workers.py --probe` (eval only: ragsync's behaviour is unchanged; the
wrappers add a clock read and a dict update per call).

Usage: RAGSYNC_PROBE_OUT=DIR python -m eval.workerprobe worker -c ragsync.toml --until-idle …
       → DIR/<pid>.json at exit: per statement (placeholder runs collapsed) calls and seconds,
       per transaction count and seconds, per lease/claim method calls and seconds, and which
       thread made them (the heartbeat's renewals overlap the work, the rest is on its path).
       With RAGSYNC_PROBE_PROFILE=1, also DIR/<pid>.prof (cProfile of the whole worker).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_LOCK = threading.Lock()
STATEMENTS: dict[str, list[float]] = {}  # sql → [calls, seconds, rows sent (executemany)]
CALLS: dict[str, list[float]] = {}  # "Class.method" or "…@heartbeat" → [calls, seconds]
TRANSACTIONS = [0, 0.0]  # outermost transactions: count, seconds (body and commit)
_MARKS = re.compile(r"\?(?:\s*,\s*\?)+")


def _add(table: dict[str, list[float]], key: str, seconds: float, rows: int = 0) -> None:
    with _LOCK:
        entry = table.setdefault(key, [0, 0.0, 0])
        entry[0] += 1
        entry[1] += seconds
        entry[2] += rows


def _statement(method: Any) -> Any:
    @functools.wraps(method)
    def timed(self: Any, sql: str, params: Any = (), *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return method(self, sql, params, *args, **kwargs)
        finally:
            rows = len(params) if method.__name__ == "execute_many" else 0
            key = " ".join(_MARKS.sub("?…", sql).split())
            _add(STATEMENTS, key, time.perf_counter() - started, rows)

    return timed


def _call(name: str, method: Any) -> Any:
    @functools.wraps(method)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            thread = threading.current_thread().name
            key = name + ("@heartbeat" if "_heartbeat" in thread else "")
            _add(CALLS, key, time.perf_counter() - started)

    return timed


def install() -> None:
    """Wrap the PostgreSQL backend's statements and transactions, and the work queue's,
    leases' and host slots' methods."""
    from ragsync.state import hosts, leases, postgres, work

    for name in ("execute", "query", "execute_many"):
        setattr(postgres.PgDatabase, name, _statement(getattr(postgres.PgDatabase, name)))
    original = postgres.PgDatabase.transaction

    @contextlib.contextmanager
    def transaction(self: Any) -> Iterator[None]:
        outer = getattr(self._local, "conn", None) is None
        started = time.perf_counter()
        try:
            with original(self):
                yield
        finally:
            if outer:
                with _LOCK:
                    TRANSACTIONS[0] += 1
                    TRANSACTIONS[1] += time.perf_counter() - started

    postgres.PgDatabase.transaction = transaction  # type: ignore[method-assign]
    for cls, methods in (
        (work.WorkQueue, ("claim", "claim_page", "finish", "add", "add_due", "count")),
        (
            leases.Leases,
            (
                "claim",
                "renew",
                "renew_all",
                "release",
                "release_all",
                "list_live",
                "claim_run_lock",
            ),
        ),
        (hosts.Hosts, ("claim_slot", "release_slot")),
    ):
        for method in methods:
            setattr(cls, method, _call(f"{cls.__name__}.{method}", getattr(cls, method)))
    # The heartbeat thread is named after its target: the Thread(target=…) default name
    # holds the target's name in Python ≥ 3.10 ("Thread-3 (_heartbeat)").


def dump(folder: Path) -> None:
    import ragsync

    with _LOCK:
        data = {
            "pid": os.getpid(),
            "ragsync": ragsync.__file__,
            "statements": {
                k: {"calls": v[0], "s": v[1], "rows": v[2]} for k, v in STATEMENTS.items()
            },
            "calls": {k: {"calls": v[0], "s": v[1]} for k, v in CALLS.items()},
            "transactions": {"count": TRANSACTIONS[0], "s": TRANSACTIONS[1]},
        }
    (folder / f"{os.getpid()}.json").write_text(json.dumps(data))


def main() -> None:
    folder = Path(os.environ["RAGSYNC_PROBE_OUT"])
    folder.mkdir(parents=True, exist_ok=True)
    install()
    atexit.register(dump, folder)
    from ragsync.cli import main as cli

    sys.argv = ["ragsync", *sys.argv[1:]]
    if os.environ.get("RAGSYNC_PROBE_PROFILE"):
        import cProfile

        profile = cProfile.Profile()
        atexit.register(lambda: profile.dump_stats(str(folder / f"{os.getpid()}.prof")))
        profile.enable()
    cli()


if __name__ == "__main__":
    main()
