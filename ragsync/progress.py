"""Progress of long work: log lines by default, rich progress bars on a terminal."""

from __future__ import annotations

import logging
from typing import Any, Protocol

log = logging.getLogger("ragsync")


class Progress(Protocol):
    """Told about long work as it happens (pages checked, texts embedded)."""

    def pages(self, source_id: str, done: int, total: int) -> None: ...

    def embedded(self, done: int, total: int) -> None: ...

    def close(self) -> None: ...


class LogProgress:
    """Plain periodic log lines (the default: cron jobs, pipes, files)."""

    def pages(self, source_id: str, done: int, total: int) -> None:
        log.info("%s: %d/%d pages checked", source_id, done, total)

    def embedded(self, done: int, total: int) -> None:
        log.info("embedded %d/%d new chunk texts", done, total)

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
