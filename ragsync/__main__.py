"""``ragsync`` and ``python -m ragsync``: the CLI, in a process that ends without teardown.

Once a command has returned, what it wrote is closed: the command closes its stores and the
state DB, and the atexit handlers stop the extraction workers and flush the logs. What the
interpreter's teardown does after that is free memory (modules, the model session, the
tokenizer's tables): about 0.1 s after a run with nothing to do and 0.25 s after a cold sync
of 120 pages, on every run (README "Architecture"). So the process runs the atexit handlers,
flushes its standard streams and ends with ``os._exit``. A command that raised, or left
another non-daemon thread running, ends the ordinary way (which waits for that thread).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

from ragsync.cli import main


def run() -> None:
    """The ``ragsync`` command (``[project.scripts]``)."""
    try:
        main()  # standalone mode: click ends every command with SystemExit
        status = 0
    except SystemExit as stop:
        if stop.code is not None and not isinstance(stop.code, int):
            raise  # a message: the ordinary exit prints it and ends with status 1
        status = stop.code or 0
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if any(t.is_alive() and not t.daemon for t in others):
        sys.exit(status)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: the ordinary exit's status 120
            status = status or 120
    os._exit(status)


if __name__ == "__main__":
    run()
