"""Resources that run out, as messages (README "Resource limits").

A full device, a process out of file descriptors or a database server that went away reach
ragsync as a library's own exception: ``sqlite3.OperationalError("database or disk is
full")``, an ``OSError`` with ``ENOSPC``, a Rust binding's ``"No space left on device (os
error 28)"``, psycopg's ``OperationalError("the connection is closed")``.
:func:`resource_error` turns each into a :class:`~ragsync.errors.ResourceError` naming what ran
out and where, which the command line prints as one line (exit code 4);
:func:`postgres_resource_error` does so for a PostgreSQL server.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from pathlib import Path

from ragsync.errors import ResourceError

NO_SPACE = {errno.ENOSPC, errno.EDQUOT}
NO_FILES = {errno.EMFILE, errno.ENFILE}
# What libraries that do not raise OSError say (SQLite; the Rust bindings' io::Error text)
SPACE_WORDS = ("database or disk is full", "no space left on device", "os error 28")
FILES_WORDS = ("too many open files", "os error 24", "os error 23")
# SQLSTATEs of a server that went away or has no room for a connection: class 08 (connection
# exception); admin_shutdown, crash_shutdown and cannot_connect_now (a restart, a crash, a
# server starting or stopping); too_many_connections. Any other error (a SQL error, a lock
# wait cancelled) is a bug or a conflict, not a resource.
SERVER_GONE_STATES = ("57P01", "57P02", "57P03", "53300")
# What a server that answered a connection attempt says when it cannot take one now
SERVER_BUSY_WORDS = ("the database system is", "too many clients")


def megabytes(count: float) -> str:
    """``count`` bytes as MB with one decimal (``"1.4 MB"``)."""
    return f"{count / 1_000_000:.1f} MB"


def free_bytes(path: str | Path) -> int | None:
    """Free bytes on the device holding ``path`` (its nearest existing parent), or None."""
    place = Path(path).absolute()
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        return shutil.disk_usage(place).free
    except OSError:
        return None


def no_space(where: str, path: str | Path | None = None) -> ResourceError:
    """The error for a full device; ``path`` is measured for how much is free."""
    free = free_bytes(path) if path is not None else None
    left = f" ({megabytes(free)} free)" if free is not None else ""
    return ResourceError(f"no space left on the device{left}: free some space there", where=where)


def no_files(where: str) -> ResourceError:
    soft = _soft_file_limit()
    limit = f" (the limit is {soft}; raise it with `ulimit -n`)" if soft else ""
    return ResourceError(f"too many open files in this process{limit}", where=where)


def _soft_file_limit() -> int | None:
    try:
        import resource

        return int(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    except (ImportError, OSError, ValueError):
        return None


def resource_error(
    exc: BaseException, *, where: str | None = None, path: str | Path | None = None
) -> ResourceError | None:
    """The :class:`ResourceError` ``exc`` stands for, or None when it is another failure.

    Args:
        where: what to name (``".ragsync/state.db (the state DB)"``); default: the file the
            error names, else ``path``.
        path: a file on the device to measure the free space of.
    """
    if isinstance(exc, ResourceError):
        return exc
    code = exc.errno if isinstance(exc, OSError) else None
    text = str(exc).lower()
    filename = getattr(exc, "filename", None) if isinstance(exc, OSError) else None
    place = where or (str(filename) if filename else None) or (str(path) if path else None)
    probe = path if path is not None else filename
    if code in NO_SPACE or (code is None and any(word in text for word in SPACE_WORDS)):
        return no_space(place or "a file ragsync writes", probe)
    if code in NO_FILES or (code is None and any(word in text for word in FILES_WORDS)):
        return no_files(place or "this process")
    return None


def sqlite_resource_error(exc: sqlite3.Error, path: str) -> ResourceError | None:
    """For the SQLite state DB at ``path``: a full device, or a file it cannot open because
    the process is out of file descriptors."""
    where = f"{path} (the state DB)"
    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return no_space(where, path)
    found = resource_error(exc, where=where, path=path)
    if found is None and "unable to open database file" in str(exc) and _out_of_files():
        return no_files(where)
    return found


def _out_of_files() -> bool:
    """Whether this process cannot open one more file."""
    try:
        os.close(os.open(os.devnull, os.O_RDONLY))
    except OSError as exc:
        return exc.errno in NO_FILES
    return False


def os_resource_error(exc: BaseException, *, where: str) -> ResourceError | None:
    """The :class:`ResourceError` of the first ``OSError`` out of space or files in ``exc``'s
    chain of causes (a client library's error raised from the socket's), else None."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, OSError) and link.errno in NO_SPACE | NO_FILES:
            return resource_error(link, where=where)
        link = link.__cause__ or link.__context__
    return None


def postgres_resource_error(
    exc: BaseException, where: str, *, connecting: bool = False
) -> ResourceError | None:
    """For the PostgreSQL server named ``where``: the :class:`ResourceError` that a connection
    lost or refused, or no pooled connection in time, stands for; None for any other error.

    Args:
        connecting: ``exc`` comes from opening a connection. A server that answered and
            refused it (a wrong password, no such database) is a configuration error: None.
    """
    import psycopg
    from psycopg_pool import PoolClosed, PoolTimeout, TooManyRequests

    if isinstance(exc, PoolTimeout):
        return ResourceError(
            "no connection to the database server in time (it is down or unreachable, or "
            "every pooled connection stayed busy): run again when it is back",
            where=where,
        )
    if not isinstance(exc, psycopg.OperationalError) or isinstance(
        exc, (PoolClosed, TooManyRequests)
    ):
        return None  # also a closed pool or a full wait queue: this process's doing
    text = str(exc)
    if exc.sqlstate is None and connecting:  # libpq's own text: "... failed: <why>"
        if "FATAL:" in text and not any(word in text for word in SERVER_BUSY_WORDS):
            return None
        why = text.splitlines()[0].rpartition("failed: ")[2].replace("FATAL:", "").strip()
        return ResourceError(
            f"cannot connect to the database server ({why}): run again when it is up",
            where=where,
        )
    state = exc.sqlstate
    if state is None or state.startswith("08") or state in SERVER_GONE_STATES:
        return ResourceError(
            "the connection to the database server was lost (it restarted or stopped): "
            "run again when it is back",
            where=where,
        )
    return None
