"""The ``ragsync`` process ends without the interpreter's teardown, and loses nothing by it:
atexit handlers run, standard streams are flushed, exit statuses are kept, and a thread the
command left running is waited for (ragsync/__main__.py)."""

from __future__ import annotations

import subprocess
import sys


def run_command(body: str, tmp_path) -> subprocess.CompletedProcess:
    """``ragsync.__main__.run`` with the CLI replaced by ``body`` (a function ``main``)."""
    program = (
        "import atexit, os, sys, threading, time\n"
        "import ragsync.__main__ as entry\n"
        f"{body}\n"
        "entry.main = main\n"
        "entry.run()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


def test_atexit_handlers_run_and_buffered_output_is_flushed(tmp_path):
    done = run_command(
        "def main():\n"
        "    atexit.register(lambda: open('atexit-ran', 'w').close())\n"
        "    sys.stdout.write('x' * 100_000)  # no newline: still in the buffer\n"
        "    sys.exit(0)\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "x" * 100_000
    assert (tmp_path / "atexit-ran").exists()


def test_exit_statuses_and_messages_are_kept(tmp_path):
    assert run_command("def main():\n    sys.exit(3)\n", tmp_path).returncode == 3
    assert run_command("def main():\n    pass\n", tmp_path).returncode == 0
    message = run_command("def main():\n    sys.exit('ragsync: no such file')\n", tmp_path)
    assert (message.returncode, message.stderr.strip()) == (1, "ragsync: no such file")
    raised = run_command("def main():\n    raise ValueError('boom')\n", tmp_path)
    assert raised.returncode == 1 and "ValueError: boom" in raised.stderr


def test_a_thread_the_command_left_running_is_waited_for(tmp_path):
    done = run_command(
        "def main():\n"
        "    def late():\n"
        "        time.sleep(0.5)\n"
        "        open('thread-ended', 'w').close()\n"
        "    threading.Thread(target=late).start()\n"
        "    sys.exit(0)\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "thread-ended").exists()


def test_the_installed_command_runs_this_entry_point():
    from importlib.metadata import entry_points

    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "ragsync"]
    assert script.value == "ragsync.__main__:run"
