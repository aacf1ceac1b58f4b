"""Quickstart: serve the example site on 127.0.0.1:8765, sync it twice, then query it.

Run with ``make demo``. The second sync shows the point of ragsync: nothing changed, so only
conditional requests go out, nothing is embedded and nothing is written.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ragsync.testing import DevSite

HERE = Path(__file__).resolve().parent
PORT = 8765


def ragsync(*args: str) -> None:
    command = [sys.executable, "-m", "ragsync", *args, "--config", str(HERE / "ragsync.toml")]
    print(f"\n$ ragsync {' '.join(args)}", flush=True)
    subprocess.run(command, check=False)


def main() -> None:
    site = DevSite.from_folder(HERE / "site")
    try:
        site.start(PORT)
    except OSError as exc:
        sys.exit(f"cannot serve the example site on 127.0.0.1:{PORT}: {exc}")
    try:
        ragsync("run")  # first sync: fetch, extract, chunk, embed, write
        ragsync("run", "--all")  # revalidate everything now: nothing changed, 304s only
        ragsync("search", "how do I rotate a key that leaked?", "-k", "3")
    finally:
        site.stop()


if __name__ == "__main__":
    main()
