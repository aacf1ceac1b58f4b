"""remembered_sha256: a large file is hashed once, and again whenever it may have changed."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from ragsync import digests
from ragsync.digests import remembered_sha256

RACY = 0.05  # RACY_SECONDS in these tests, so that a file can age quickly


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files actually hashed (read), in order."""
    monkeypatch.setattr(digests, "RACY_SECONDS", RACY)
    hashed: list[Path] = []
    real = digests.file_sha256

    def counting(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(digests, "file_sha256", counting)
    return hashed


def aged(path: Path, data: bytes) -> Path:
    """``path`` holding ``data``, last modified an hour ago and changed over RACY ago."""
    path.write_bytes(data)
    past = time.time() - 3600
    os.utime(path, (past, past))
    time.sleep(2 * RACY)
    return path


def test_a_file_is_hashed_once_while_its_status_holds(tmp_path: Path, reads: list[Path]) -> None:
    weights = aged(tmp_path / "model.safetensors", b"w" * 100_000)
    cache = tmp_path / "cache" / "digests.json"
    expected = hashlib.sha256(b"w" * 100_000).hexdigest()
    assert remembered_sha256(weights, cache=cache) == expected
    assert remembered_sha256(weights, cache=cache) == expected
    assert remembered_sha256(weights, cache=cache) == expected
    assert reads == [weights]


def test_a_same_size_rewrite_with_its_old_times_is_hashed_again(
    tmp_path: Path, reads: list[Path]
) -> None:
    """Putting the modification time back does not hide a change: the change time moves."""
    path = aged(tmp_path / "export.onnx", b"a" * 4096)
    cache = tmp_path / "digests.json"
    before = path.stat()
    remembered_sha256(path, cache=cache)
    path.write_bytes(b"b" * 4096)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    time.sleep(2 * RACY)  # not a racy file: only its change time tells
    assert path.stat().st_size == before.st_size
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert remembered_sha256(path, cache=cache) == hashlib.sha256(b"b" * 4096).hexdigest()
    assert reads == [path, path]


def test_a_file_modified_just_before_it_was_hashed_is_not_remembered(
    tmp_path: Path, reads: list[Path]
) -> None:
    """Within the file system's timestamp granularity a rewrite could keep every time."""
    path = tmp_path / "fresh.onnx"
    path.write_bytes(b"x" * 10)
    cache = tmp_path / "digests.json"
    remembered_sha256(path, cache=cache)
    remembered_sha256(path, cache=cache)
    assert reads == [path, path]
    assert not cache.exists()


@pytest.mark.parametrize("fault", ["unwritable", "garbage"])
def test_a_cache_that_cannot_be_used_only_costs_a_hash(
    tmp_path: Path, reads: list[Path], fault: str
) -> None:
    path = aged(tmp_path / "weights", b"y" * 1000)
    cache = tmp_path / "digests.json"
    if fault == "unwritable":
        cache.mkdir()  # neither readable as a file nor replaceable
    else:
        cache.write_text("[not json")
    for _ in range(2):
        assert remembered_sha256(path, cache=cache) == hashlib.sha256(b"y" * 1000).hexdigest()
    assert len(reads) == (2 if fault == "unwritable" else 1)


def test_only_the_most_recently_hashed_files_are_kept(
    tmp_path: Path, reads: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(digests, "KEPT", 2)
    cache = tmp_path / "digests.json"
    files = [aged(tmp_path / f"f{n}", bytes([n]) * 10) for n in range(3)]
    for path in files:
        remembered_sha256(path, cache=cache)
    reads.clear()
    for path in reversed(files):  # f2 and f1 remembered; f0 hashed again
        remembered_sha256(path, cache=cache)
    assert reads == [files[0]]
