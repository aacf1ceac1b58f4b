"""Progress of long work: log lines by default, rich progress bars on a terminal."""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

log = logging.getLogger("ragsync")
progress_log = logging.getLogger("ragsync.progress")


class Progress(Protocol):
    """Told about long work as it happens (pages checked, texts embedded)."""

    def pages(self, source_id: str, done: int, total: int) -> None: ...

    def embedded(self, done: int, total: int) -> None: ...

    def close(self) -> None: ...


PROGRESS_STEP = 100  # pages between two progress lines at least …
PROGRESS_SHARE = 0.1  # … or this share of the pages in hand, whichever is larger


def progress_step(total: int) -> int:
    """Pages between two progress lines for ``total`` pages in hand: 100 or 10%, the larger.

    >>> progress_step(50), progress_step(5000)
    (100, 500)
    """
    return max(PROGRESS_STEP, int(total * PROGRESS_SHARE))


class LogProgress:
    """Plain log lines (the default: cron jobs, pipes, files): one per :func:`progress_step`
    pages checked, so a long first sync shows it is moving and a short run says nothing.

    Lines go to the ``ragsync.progress`` logger at INFO; the CLI shows them without ``-v``
    when stderr is not a terminal (README "CLI reference").
    """

    def __init__(self) -> None:
        # Per source: pages done at the last call and at the last line, and when (and at
        # which count) the batch of pages in hand was first reported, for the rate.
        self.last_done: dict[str, int] = {}
        self.logged: dict[str, int] = {}
        self.began: dict[str, tuple[float, int]] = {}
        self.texts = 0  # new texts embedded so far
        self.texts_done = 0  # … in the embedding call in hand

    def pages(self, source_id: str, done: int, total: int) -> None:
        now = time.monotonic()
        if source_id not in self.began or done < self.last_done[source_id]:
            self.began[source_id] = (now, done)  # a new batch of pages began
            self.logged[source_id] = 0
        self.last_done[source_id] = done
        step, last = progress_step(total), self.logged[source_id]
        crossed = done // step > last // step
        final = done == total >= PROGRESS_STEP and done != last
        if not (crossed or final):
            return
        self.logged[source_id] = done
        began, done_then = self.began[source_id]
        rate = (done - done_then) / (now - began) if now > began else 0.0
        progress_log.info(
            "%s: %d/%d pages checked (%.0f%%), %.1f pages/s, %d new texts embedded so far",
            source_id,
            done,
            total,
            100 * done / total,
            rate,
            self.texts,
        )

    def embedded(self, done: int, total: int) -> None:
        if done < self.texts_done:  # a new embedding call began
            self.texts_done = 0
        self.texts += done - self.texts_done
        self.texts_done = done
        log.debug("embedded %d/%d new chunk texts", done, total)

    def close(self) -> None:
        pass


class RichProgress:
    """Progress bars with counts and rates on a terminal (stderr), via rich."""

    def __init__(self, console: Any = None):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as RichBars

        self._bars = RichBars(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=console or Console(stderr=True),
            transient=False,
        )
        self._tasks: dict[str, Any] = {}
        self._bars.start()

    def _update(self, name: str, description: str, done: int, total: int) -> None:
        if name not in self._tasks:
            self._tasks[name] = self._bars.add_task(description, total=total, rate="")
        task = self._tasks[name]
        self._bars.update(task, completed=done, total=total)
        speed = self._bars.tasks[task].speed
        self._bars.update(task, rate=f"{speed:.1f}/s" if speed else "")

    def pages(self, source_id: str, done: int, total: int) -> None:
        self._update(f"pages:{source_id}", f"[{source_id}] pages checked", done, total)

    def embedded(self, done: int, total: int) -> None:
        self._update("embedded", "texts embedded", done, total)

    def close(self) -> None:
        self._bars.stop()
