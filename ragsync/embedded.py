"""An embedded vector store (Qdrant Edge, Qdrant local mode) is one process's at a time.

A command that finds its folder held by another process waits for it, bounded by ``[store]
open_wait``, and asks the holder to let go by touching a file in the store's folder
(:data:`WANTED`). ``ragsync serve``, which keeps the store open for a while after a query so
that the next one is fast, lets go within about a second of being asked (README "Vector
stores").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

WANTED = ".wanted"  # in the store's folder: its modification time says when it was asked for
POLL = 0.25  # seconds between attempts to open a held store

log = logging.getLogger("ragsync")


def ask_release(folder: Path) -> None:
    """Ask whoever holds the store in ``folder`` to let go of it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / WANTED).touch()
    except OSError as exc:  # a read-only folder: the holder keeps it until it is done
        log.debug("%s: cannot ask for the store: %s", folder, exc)


def asked_since(folder: Path, since: float) -> bool:
    """Whether another process asked for the store in ``folder`` at or after ``since`` (Unix
    time)."""
    try:
        return (folder / WANTED).stat().st_mtime >= since
    except OSError:
        return False


def open_waiting(
    opener: Callable[[], T],
    *,
    held: Callable[[Exception], bool],
    folder: Path,
    wait: float,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``opener()``, tried again every :data:`POLL` seconds for up to ``wait`` seconds while
    it fails because another process holds the store (``held(error)``), asking the holder to
    let go. Any other error, or the last one once ``wait`` has passed, is raised."""
    deadline = clock() + wait
    warned = False
    while True:
        try:
            return opener()
        except Exception as exc:
            if not held(exc) or clock() >= deadline:
                raise
        ask_release(folder)
        if not warned:
            log.warning(
                "%s is open in another process (`ragsync serve` lets go when asked); "
                "waiting up to %.0f s ([store] open_wait)",
                what,
                wait,
            )
            warned = True
        sleep(POLL)
