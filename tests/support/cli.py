"""The ``ragsync`` command as a user runs it, and as a crash kills it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path


def ragsync_cli(
    *args: str, config: Path | str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``ragsync ARGS --config CONFIG`` as a user would: a real subprocess (``env``: its
    whole environment)."""
    return subprocess.run(
        [sys.executable, "-m", "ragsync", *args, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def write_cli_config(
    folder: Path,
    base: str,
    *,
    state: str,
    store: str,
    extra: str = "",
    every: str = "0s",
    name: str = "ragsync",
) -> Path:
    """``folder/NAME.toml`` for the ``ragsync`` command: the ``[state]`` and ``[store]``
    tables' bodies (TOML), ``extra`` tables, and the sitemap source ``docs`` of the site at
    ``base``, due ``every``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(
        f"[state]\n{state}\n\n[store]\n{store}\n\n{extra}\n\n"
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nevery = "{every}"\n'
        f'url = "{base}/sitemap.xml"\n'
    )
    return path


def store_texts(config: Path) -> dict[str, tuple[str, str]]:
    """Point id -> (url, text) of every point in the store ``config`` names."""
    from ragsync.config import load_config
    from ragsync.registry import open_store

    store = open_store(load_config(config).store)
    try:
        return {
            pid: (payload["metadata"]["url"], payload["page_content"])
            for pid, payload, _ in store.points()
        }
    finally:
        store.close()


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
