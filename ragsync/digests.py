"""SHA-256 of large local files (model weights, ONNX exports), remembered by their file status.

A run that embeds names its model by the weights' hash and checks its ONNX export against its
manifest: 150 MB read and hashed on every such run, about 0.15 CPU s (README "Embedding
backends"). :func:`remembered_sha256` hashes a file once and then answers from a small cache
for as long as the file's status — device, inode, size, modification and change times — is the
one it was hashed with; any write changes the change time, which no user can set. A file
modified less than :data:`RACY_SECONDS` before it was hashed is not remembered: a same-size
rewrite within a file system's timestamp granularity would otherwise look unchanged.

The cache is ``$XDG_CACHE_HOME/ragsync/digests.json`` (else ``~/.cache/…``), written
atomically; when it cannot be read or written, files are simply hashed again.

Example::

    remembered_sha256(Path("model.safetensors"))  # hashed once, then from the cache
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

RACY_SECONDS = 2.0  # a file modified this recently when hashed is hashed again next time
KEPT = 64  # files remembered (the most recently hashed)


def cache_base() -> Path:
    """ragsync's cache folder: ``$XDG_CACHE_HOME/ragsync``, else ``~/.cache/ragsync``."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base, "ragsync")


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of the file at ``path``, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _status(path: Path) -> list[int]:
    found = path.stat()
    return [found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns]


def remembered_sha256(path: Path, *, cache: Path | None = None) -> str:
    """:func:`file_sha256` of ``path``, from ``cache`` (default ``cache_base() /
    "digests.json"``) when the file's status is the one it was hashed with.

    Raises:
        OSError: ``path`` cannot be read (the cache's own faults are not raised).
    """
    cache = cache or cache_base() / "digests.json"
    key = str(path.resolve())
    status = _status(path)
    try:
        known = json.loads(cache.read_text())
        if not isinstance(known, dict):
            known = {}
    except (OSError, ValueError):
        known = {}
    entry = known.get(key)
    if isinstance(entry, list) and entry[:-1] == status and isinstance(entry[-1], str):
        return entry[-1]
    hashed_at = time.time_ns()
    digest = file_sha256(path)
    if _status(path) != status or hashed_at - max(status[3:]) < RACY_SECONDS * 1e9:
        return digest  # changed while read, or too recently to tell a rewrite apart
    known.pop(key, None)
    known[key] = [*status, digest]  # the newest last: the oldest go first
    with contextlib.suppress(OSError):
        _write(cache, dict(list(known.items())[-KEPT:]))
    return digest


def _write(cache: Path, known: dict[str, list[int | str]]) -> None:
    """Replace ``cache`` atomically (a temporary file beside it, then a rename)."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{cache.name}.", suffix=".tmp", dir=cache.parent)
    try:
        with os.fdopen(handle, "w") as file:
            json.dump(known, file)
        os.replace(name, cache)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
