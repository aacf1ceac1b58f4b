"""The ``ragsync`` command as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def ragsync_cli(*args: str, config: Path | str) -> subprocess.CompletedProcess[str]:
    """Run ``ragsync ARGS --config CONFIG`` as a user would: a real subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "ragsync", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
    )
