"""A device that fills mid-run (README "Resource limits"): the run stops with one line naming
what ran out and where (exit code 4), readers never die by a signal, and once there is space
again the next run converges to the index a sync done alone makes.

The state folder is a small tmpfs the test mounts (CI runs as root); elsewhere it is skipped.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from ragsync.testing import DevSite
from tests.support import example_pages, ragsync_cli, store_texts, write_cli_config

SIZE_MB = 400  # the store's sparse files are about 230 MB long


@pytest.fixture
def tmpfs(tmp_path):
    """A tmpfs of :data:`SIZE_MB` at ``tmp_path/small``, unmounted at the end."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    point = tmp_path / "small"
    point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m", "tmpfs", str(point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def fill(folder: Path) -> Path:
    """Write a file in ``folder`` until the device is full; return it."""
    filler = folder / f"filler-{uuid.uuid4().hex[:6]}"
    chunk = b"\0" * (1 << 20)
    with filler.open("wb") as out, contextlib.suppress(OSError):
        while True:
            out.write(chunk)
            out.flush()
    assert os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize < (1 << 20)
    return filler


def write_config(folder: Path, base: str, *, state: Path, store: Path) -> Path:
    return write_cli_config(
        folder,
        base,
        state=f'path = "{state}"',
        store=f'kind = "qdrant_edge"\npath = "{store}"\ncollection = "docs"',
        extra="[fetch]\nconcurrency = 2",
    )


@pytest.mark.parametrize("on_tmpfs", ["state", "state_and_store"])
def test_a_device_that_fills_mid_run_is_one_line_and_the_next_run_converges(
    tmp_path, tmpfs, on_tmpfs
):
    site = DevSite(example_pages(60), latency=0.05)
    base = site.start()
    try:
        store = tmpfs / "edge" if on_tmpfs == "state_and_store" else tmp_path / "edge"
        config = write_config(tmp_path / "run", base, state=tmpfs / "state.db", store=store)
        fillers: list[Path] = []
        asked: list[str] = []

        def fill_at_the_20th_page(path: str, headers: object) -> None:
            asked.append(path)
            if len(asked) == 20:  # mid-run: pages are in, more are coming
                fillers.append(fill(tmpfs))

        site.fault = fill_at_the_20th_page
        done = ragsync_cli("run", config=config)
        site.fault = None
        lines = done.stderr.splitlines()
        assert fillers, done.stderr
        assert done.returncode == 4, done.stderr
        assert "Traceback" not in done.stderr, done.stderr
        last = lines[-1]
        assert "no space left on the device" in last, done.stderr
        assert str(tmpfs) in last, last  # names the file or the store on the full device

        # Readers on the full device: an answer or one line, never a signal.
        for args in (("status", "--json"), ("search", "replication", "-k", "2")):
            done = ragsync_cli(*args, config=config)
            assert done.returncode >= 0, f"{args}: died by signal {-done.returncode}"
            assert "Traceback" not in done.stderr, done.stderr
            assert done.returncode in (0, 1, 4), done.stderr

        for filler in fillers:
            filler.unlink()
        again = ragsync_cli("run", config=config)
        assert again.returncode == 0, again.stderr
        verified = ragsync_cli("verify", config=config)
        assert verified.returncode == 0, verified.stdout + verified.stderr

        alone_folder = tmp_path / "alone"
        alone = write_config(
            alone_folder, base, state=alone_folder / "state.db", store=alone_folder / "edge"
        )
        assert ragsync_cli("run", config=alone).returncode == 0
        assert store_texts(config) == store_texts(alone) and len(store_texts(alone)) >= 180
    finally:
        site.stop()


def test_a_store_on_a_nearly_full_tmpfs_is_refused_with_a_message_not_a_signal(tmp_path, tmpfs):
    """The trial's case: a store whose mapped files the device cannot back (a nearly full
    tmpfs) is never opened: reads and writes say so, and a run with space again works."""
    site = DevSite(example_pages(5))
    base = site.start()
    try:
        config = write_config(
            tmp_path / "run", base, state=tmp_path / "state.db", store=tmpfs / "edge"
        )
        assert ragsync_cli("run", config=config).returncode == 0
        site.set_page("/guide/page-1", "Changed", "<p>" + "A changed page. " * 30 + "</p>")
        filler = fill(tmpfs)
        try:
            for args in (("status", "--json"), ("search", "replication"), ("run",)):
                done = ragsync_cli(*args, config=config)
                assert done.returncode >= 0, f"{args}: killed by a signal"
                assert "Traceback" not in done.stderr, done.stderr
            assert done.returncode == 4 and "no space left on the device" in done.stderr
        finally:
            filler.unlink()
        assert ragsync_cli("run", config=config).returncode == 0
    finally:
        site.stop()


def test_reserving_the_holes_of_a_sparse_file_backs_every_page(tmpfs):
    from ragsync.embedded import reserve_holes, unallocated_bytes

    folder = tmpfs / "store"
    folder.mkdir()
    with (folder / "chunk_0.mmap").open("wb") as out:
        out.write(b"data")
        out.truncate(32 << 20)  # as Qdrant makes them: long, and mostly a hole
    assert unallocated_bytes(folder) > 30 << 20
    reserve_holes(folder)
    assert unallocated_bytes(folder) == 0
    assert (folder / "chunk_0.mmap").read_bytes()[:4] == b"data"
    fill(tmpfs)
    with pytest.raises(OSError) as raised:
        with (folder / "more.mmap").open("wb") as out:
            out.truncate(4 << 20)
        reserve_holes(folder)
    assert raised.value.errno == errno.ENOSPC
