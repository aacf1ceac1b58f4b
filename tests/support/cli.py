"""The ``ragsync`` command as a user runs it, and as a crash kills it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path


def ragsync_cli(*args: str, config: Path | str) -> subprocess.CompletedProcess[str]:
    """Run ``ragsync ARGS --config CONFIG`` as a user would: a real subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "ragsync", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def ragsync_run(config: Path, *, kill_on: str | None = None, kill_after: float | None = None):
    """Run `ragsync -vv run`; SIGKILL it when a stderr line contains ``kill_on`` or after
    ``kill_after`` seconds. Returns the exit code (-9 when killed)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragsync", "-vv", "run", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    timer = None
    if kill_after is not None:
        timer = threading.Timer(kill_after, lambda: proc.poll() is None and proc.kill())
        timer.start()
    assert proc.stderr is not None
    for line in proc.stderr:
        if kill_on and kill_on in line:
            os.kill(proc.pid, signal.SIGKILL)
            break
    proc.wait(timeout=300)
    if timer:
        timer.cancel()
    return proc.returncode
