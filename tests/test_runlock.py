"""One run at a time per state (issue #15): a second pass exits at once (code 3) or waits
(--wait), workers share the state with each other but never with a pass, and a lock left by a
killed process is released, never deadlocked, its run row closed as "interrupted"."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from ragsync.errors import ResourceError
from ragsync.runlock import RunLock, RunLocked, heartbeat
from ragsync.state import StateDB
from ragsync.testing import DevSite
from tests.support import example_pages, page, ragsync_cli, sentences, state_table, state_target


@pytest.fixture
def two_handles(tmp_path):
    """One state DB opened twice, as two processes would."""
    target = state_target(tmp_path)
    first, second = StateDB(target), StateDB(target)
    yield first, second
    first.close()
    second.close()


def test_a_pass_excludes_a_pass_and_workers_but_workers_share(two_handles):
    one, two = two_handles
    run = RunLock(one)
    run.acquire()
    with pytest.raises(RunLocked, match="held by a run"):
        RunLock(two).acquire()
    with pytest.raises(RunLocked):
        RunLock(two, owner="w1", shared=True).acquire()
    run.release()

    worker_a, worker_b = (
        RunLock(one, owner="wa", shared=True),
        RunLock(two, owner="wb", shared=True),
    )
    worker_a.acquire()
    worker_b.acquire()  # workers run side by side
    with pytest.raises(RunLocked, match="workers"):
        RunLock(two).acquire()
    worker_a.release()
    worker_b.release()
    again = RunLock(two)
    again.acquire()  # free again
    again.release()


def test_a_lock_whose_process_is_gone_or_whose_lease_ran_out_is_released(two_handles):
    one, two = two_handles
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    now = time.time()
    here = socket.gethostname()
    taken = one.leases.claim_run_lock(
        "run", "ghost", exclusive=True, now=now, until=now + 600, host=here, pid=dead.pid
    )
    assert taken == []
    one.runs.add("r-ghost", "2026-11-30T12:00:00.000000Z", owner="ghost")
    lock = RunLock(two)
    lock.acquire()  # at once: its process is gone from this machine
    assert [r["run_id"] for r in two.runs.list_interrupted()] == ["r-ghost"]
    lock.release()

    # A holder on another machine: only its lease can tell, and it binds until it runs out.
    taken = one.leases.claim_run_lock(
        "run", "remote", exclusive=True, now=now, until=now + 600, host="elsewhere", pid=1
    )
    assert taken == []
    with pytest.raises(RunLocked, match="elsewhere"):
        RunLock(two).acquire()
    later = RunLock(two, clock=lambda: time.time() + 601)
    later.acquire()
    later.release()


def write_config(folder: Path, base: str) -> Path:
    folder.mkdir(exist_ok=True)
    ((key, value),) = state_table(folder).items()
    path = folder / "ragsync.toml"
    path.write_text(
        f"[state]\n{key} = {json.dumps(value)}\n\n"
        '[store]\npath = "qdrant"\ncollection = "lock"\n\n'
        "[fetch]\nconcurrency = 4\n\n"
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nevery = "0s"\n'
        f'url = "{base}/sitemap.xml"\n'
    )
    return path


def thirty_pages() -> dict[str, tuple[str, str]]:
    return {
        f"/doc/{i}": page(f"Topic {i}", {f"Part {i}": [sentences(f"topic {i}", 2)]})
        for i in range(30)
    }


def start_run(config: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ragsync", "run", "--json", *extra, "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def changes_per_url(config: Path) -> Counter[str]:
    state = StateDB(state_target(config.parent))
    try:
        return Counter(row["url"] for row in state.runs.list_changes())
    finally:
        state.close()


@pytest.mark.parametrize("wait", [False, True])
def test_two_runs_started_together_never_interleave(tmp_path, wait):
    site = DevSite(thirty_pages(), latency=0.02)
    site.start()
    try:
        config = write_config(tmp_path / "c", site.base_url)
        extra = ("--wait",) if wait else ()
        runs = [start_run(config, *extra), start_run(config, *extra)]
        outcomes = [(run.wait(timeout=300), *run.communicate()) for run in runs]
        codes = sorted(code for code, _, _ in outcomes)
        if wait:
            assert codes == [0, 0], outcomes
        else:
            assert codes == [0, 3], outcomes
            refused = next(err for code, _, err in outcomes if code == 3)
            assert "held by a run" in refused and "nothing was done" in refused
        bodies = Counter(hit.path for hit in site.hits if hit.status == 200)
        assert all(bodies[f"/doc/{i}"] == 1 for i in range(30)), bodies
        per_url = changes_per_url(config)
        assert len(per_url) == 30 and set(per_url.values()) == {1}
        verify = ragsync_cli("verify", "--json", config=config)
        assert verify.returncode == 0, verify.stdout + verify.stderr
    finally:
        site.stop()


def test_a_killed_run_is_closed_as_interrupted_and_its_lock_does_not_block(tmp_path):
    site = DevSite(example_pages(12), latency=0.3)
    site.start()
    try:
        config = write_config(tmp_path / "c", site.base_url)
        victim = subprocess.Popen(
            [sys.executable, "-m", "ragsync", "-v", "run", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 60
        while not any(h.path.startswith("/guide/") for h in site.hits):
            assert time.time() < deadline and victim.poll() is None
            time.sleep(0.05)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        shown = ragsync_cli("status", config=config).stdout
        assert "died mid-run" in shown, shown  # before any other run closed it

        began = time.time()
        again = ragsync_cli("run", "--json", config=config)
        assert again.returncode == 0, again.stderr
        assert time.time() - began < 60  # never waited for the dead run's 60 s lease
        status = json.loads(ragsync_cli("status", "--json", config=config).stdout)
        assert len(status["interrupted_runs"]) == 1 and status["running"] == []
        assert status["last_run"]["status"] == "ok"
        shown = ragsync_cli("status", config=config).stdout
        assert "latest interrupted run: " + status["interrupted_runs"][0]["run_id"] in shown
    finally:
        site.stop()


def test_a_dry_run_works_while_another_process_holds_the_state(tmp_path, site, embedder):
    from ragsync.sync import Syncer
    from tests.support import make_config, sitemap_source

    syncer = Syncer(make_config(tmp_path, [sitemap_source(site)]), embedder=embedder)
    other = RunLock(syncer.state, owner="another-process")
    other.acquire()
    try:
        with pytest.raises(RunLocked):
            syncer.run()
        plan = syncer.plan()  # on its own copy of the state: the lock is not in its way
        assert plan["counters"]["documents_created"] == 4
    finally:
        other.release()
        syncer.close()


def test_two_threads_of_one_process_never_interleave_either(two_handles):
    """An asyncio app's `await syncer.arun()` twice: the second waits, or is refused."""
    one, _ = two_handles
    lock = RunLock(one)
    lock.acquire()
    lock.acquire()  # the holding thread may nest
    outcome: list[str] = []

    def second(wait: bool) -> None:
        try:
            lock.acquire(wait=wait)
        except RunLocked as exc:
            outcome.append(f"refused: {exc}")
            return
        outcome.append("taken")
        lock.release()

    refused = threading.Thread(target=second, args=(False,))
    refused.start()
    refused.join()
    assert outcome[0].startswith("refused") and f"pid {os.getpid()}" in outcome[0]
    waiting = threading.Thread(target=second, args=(True,))
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive()  # still waiting while the first thread holds it
    lock.release()
    lock.release()
    waiting.join(5)
    assert outcome[1:] == ["taken"]
    assert one.leases.list_live(time.time()) == {}


GONE = ResourceError("the connection to the database server was lost", where="PostgreSQL db")


def test_a_heartbeat_that_keeps_failing_says_so_once_until_it_beats_again(caplog):
    """Beats every 20 s of a run whose database server went away: one warning line (the run
    ends with its own message), not a traceback per beat; a bug shows its traceback, once."""
    bug = ValueError("a bug")
    beats = [GONE, GONE, GONE, None, bug, bug, None, GONE, GONE]
    stop = threading.Event()

    def renew() -> None:
        failure = beats.pop(0)
        if not beats:
            stop.set()
        if failure is not None:
            raise failure

    with caplog.at_level(logging.WARNING, logger="ragsync"):
        heartbeat(stop, 0.001, renew, "run lock")
    said = "run lock: heartbeat failed (the next beats try again): "
    assert [(record.getMessage(), bool(record.exc_info)) for record in caplog.records] == [
        (said + str(GONE), False),  # once for the streak, one line
        (said + "a bug", True),  # once, with its traceback
        (said + str(GONE), False),  # the next streak, after a beat that worked
    ]


def test_a_release_that_fails_after_the_block_failed_leaves_the_blocks_error(
    two_handles, monkeypatch
):
    """The server went away: the block's ResourceError is the one raised, not the release's,
    and the lock is free again in this process (the lease runs out in the state)."""
    one, _ = two_handles
    lock = RunLock(one, heartbeat=False)

    def gone(*args: object) -> None:
        raise ResourceError("lost again", where="PostgreSQL db")

    monkeypatch.setattr(one.leases, "release", gone)
    with pytest.raises(ResourceError, match="lost$"), lock.held():
        raise GONE
    with pytest.raises(ResourceError, match="lost again"), lock.held():
        pass  # the block did its work: the release's error is the news
    monkeypatch.undo()
    outcome: list[str] = []

    def another_thread() -> None:
        lock.acquire()  # RunLocked if this process still held it
        lock.release()
        outcome.append("taken")

    other = threading.Thread(target=another_thread)
    other.start()
    other.join(5)
    assert outcome == ["taken"]
