"""An embedded vector store (Qdrant Edge, Qdrant local mode) is one process's at a time, and
every process can read it (README "Vector stores": *One store, many processes*).

- **The hold.** The process that opens the store holds an ``flock`` on :data:`LOCK` in its
  folder first (:class:`FolderHold`), so no other ragsync process ever asks the library to
  open files that are open elsewhere: a failed ``EdgeShard.load`` beside a writer truncates the
  writer's sparse-vector journal, and its next flush fails.
- **Reads elsewhere.** While it holds the store, a process answers reads (searches, counts) for
  the others on a Unix socket beside it (:class:`ReadServer`, :func:`ask_holder`): a search in
  an app never waits for a run, and never interrupts it.
- **Writes wait.** A command that must write waits for the hold, bounded by ``[store]
  open_wait``, and asks the holder to let go by touching :data:`WANTED` in the folder.
  ``ragsync serve``, which keeps the store open for a while after a query so that the next one
  is fast, lets go within about a second of being asked.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import socket
import socketserver
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

WANTED = ".wanted"  # in the store's folder: its modification time says when it was asked for
LOCK = "ragsync.lock"  # in the store's folder: flock-ed by the process that has it open
SOCKET = "ragsync.sock"  # in the store's folder when the path fits (else the temp folder)
POLL = 0.25  # seconds between attempts to open a held store
MAX_SOCKET_PATH = 100  # bytes: sun_path holds 108 on Linux, 104 on macOS
MAX_REQUEST = 4 * 1024 * 1024  # bytes of one read request (a query vector and its terms)
MAX_READERS = 16  # reads answered at once; more are told to ask again
READ_TIMEOUT = 10.0  # seconds an asker has to send its request

log = logging.getLogger("ragsync")


def ask_release(folder: Path) -> None:
    """Ask whoever holds the store in ``folder`` to let go of it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / WANTED).touch()
    except OSError as exc:  # a read-only folder: the holder keeps it until it is done
        log.debug("%s: cannot ask for the store: %s", folder, exc)


def asked_since(folder: Path, since: float) -> bool:
    """Whether another process asked for the store in ``folder`` at or after ``since`` (Unix
    time)."""
    try:
        return (folder / WANTED).stat().st_mtime >= since
    except OSError:
        return False


def open_waiting(
    opener: Callable[[], T],
    *,
    held: Callable[[Exception], bool],
    folder: Path,
    wait: float,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """``opener()``, tried again every :data:`POLL` seconds for up to ``wait`` seconds while
    it fails because another process holds the store (``held(error)``), asking the holder to
    let go. Any other error, or the last one once ``wait`` has passed, is raised."""
    deadline = clock() + wait
    warned = False
    while True:
        try:
            return opener()
        except Exception as exc:
            if not held(exc) or clock() >= deadline:
                raise
        ask_release(folder)
        if not warned:
            log.warning(
                "%s is open in another process (`ragsync serve` lets go when asked); "
                "waiting up to %.0f s ([store] open_wait)",
                what,
                wait,
            )
            warned = True
        sleep(POLL)


_HOLDS: weakref.WeakSet[FolderHold] = weakref.WeakSet()


def _forget_holds_in_child() -> None:
    for hold in list(_HOLDS):
        hold.forget()


os.register_at_fork(after_in_child=_forget_holds_in_child)


class FolderHold:
    """This process's hold of an embedded store's folder: an exclusive ``flock`` on
    :data:`LOCK`, which the kernel lets go of when the process dies, however it dies."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.since = 0.0  # Unix time it was taken
        self._fd: int | None = None
        _HOLDS.add(self)

    def forget(self) -> None:
        """In a forked child: the lock is the parent's (a shared open file), so the child
        neither holds it nor may unlock it."""
        self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_take(self) -> bool:
        """Take the hold unless another process (or another hold in this one) has it."""
        if self._fd is not None:
            return True
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except PermissionError:  # another user's store: it can still be read through its holder
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)  # who holds it, for the messages of those who wait
        os.write(fd, json.dumps({"pid": os.getpid(), "since": time.time()}).encode())
        self._fd, self.since = fd, time.time()
        return True

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def holder(self) -> str:
        """Who holds the folder, as messages name it ("pid 1234"), from its lock file."""
        try:
            pid = json.loads((self.folder / LOCK).read_text())["pid"]
        except (OSError, ValueError, KeyError, TypeError):
            return "another process"
        return "this process (another store object)" if pid == os.getpid() else f"pid {pid}"


def socket_path(folder: Path) -> Path:
    """Where the holder of the store in ``folder`` answers reads: :data:`SOCKET` in the folder,
    or, when that path is too long for a Unix socket, a name derived from the folder's real
    path in ``/tmp/ragsync-UID`` (the same for every process of the user; not ``TMPDIR``,
    which a service's private /tmp changes)."""
    near = folder / SOCKET
    if len(os.fsencode(near.absolute())) <= MAX_SOCKET_PATH:
        return near.absolute()
    digest = hashlib.sha256(os.fsencode(folder.resolve())).hexdigest()[:16]
    return Path("/tmp") / f"ragsync-{os.getuid()}" / f"{digest}.sock"


def private_folder(path: Path) -> None:
    """Make the folder of a socket outside the store (``/tmp/ragsync-UID``) this user's alone,
    so that nobody else can bind its name first."""
    folder = path.parent
    if folder.name != f"ragsync-{os.getuid()}":
        return
    folder.mkdir(mode=0o700, exist_ok=True)
    info = folder.lstat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077 or not folder.is_dir():
        raise PermissionError(f"{folder}: not a private folder of this user")


class NoHolder(Exception):
    """Nothing answers reads for the store (nobody holds it, or its holder is not ragsync)."""


class HolderFailed(Exception):
    """The holder answered a read with an error (its message)."""


class ReadServer:
    """Answers reads for other processes while this one holds the store: one JSON request
    line, ``{"op": ..., "args": {...}}``, one JSON answer line, ``{"ok": value}`` or
    ``{"error": message}``, per connection.

    Args:
        path: the socket's path (:func:`socket_path`).
        answer: ``answer(op, args)``, the value to send (raises: its message is sent).
    """

    def __init__(self, path: Path, answer: Callable[[str, dict[str, Any]], Any]):
        self.path = path
        answer_of = answer

        slots = threading.BoundedSemaphore(MAX_READERS)

        class Handler(socketserver.StreamRequestHandler):
            timeout = READ_TIMEOUT  # an asker that sends nothing is let go

            def handle(self) -> None:
                if not slots.acquire(blocking=False):
                    self._reply({"gone": True})  # too many at once: the asker asks again
                    return
                try:
                    line = self.rfile.readline(MAX_REQUEST)
                    try:
                        request = json.loads(line)
                        op, args = str(request["op"]), dict(request.get("args") or {})
                        reply = {"ok": answer_of(op, args)}
                    except NoHolder:  # it let go of the store meanwhile: the asker tries again
                        reply = {"gone": True}
                    except Exception as exc:  # the asker raises it as its own error
                        reply = {"error": str(exc).splitlines()[0] if str(exc) else repr(exc)}
                    self._reply(reply)
                except OSError:  # an asker that gave up, or sent nothing in time
                    pass
                finally:
                    slots.release()

            def _reply(self, reply: dict[str, Any]) -> None:
                with contextlib.suppress(OSError):
                    self.wfile.write(json.dumps(reply).encode() + b"\n")

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True
            request_queue_size = 64

        private_folder(path)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a dead holder's: this process holds the folder now
        self._server = Server(str(path), Handler)
        os.chmod(path, 0o600)  # this user's processes only, like the store's files
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},  # close() waits for the loop: a search's own cost
            name="ragsync-store-reads",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def ask_holder(path: Path, op: str, args: dict[str, Any], *, timeout: float) -> Any:
    """One read answered by the process that holds the store.

    Raises:
        NoHolder: nothing listens on ``path``.
        HolderFailed: the holder answered with an error, or not within ``timeout`` seconds.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(str(path))
        except (OSError, ValueError) as exc:  # nobody listens, its queue is full, no access
            raise NoHolder(str(path)) from exc
        try:
            conn.sendall(json.dumps({"op": op, "args": args}).encode() + b"\n")
            with conn.makefile("rb") as answers:
                line = answers.readline()
        except TimeoutError as exc:
            raise HolderFailed(f"no answer on {path} within {timeout:.0f} s") from exc
        except OSError as exc:  # it let go of the store as we asked: ask again
            raise NoHolder(str(path)) from exc
    if not line:
        raise NoHolder(str(path))  # it closed as it let go of the store
    try:
        reply = json.loads(line)
        if reply.get("gone"):
            raise NoHolder(str(path))
        if "error" in reply:
            raise HolderFailed(str(reply["error"]))
        return reply["ok"]
    except (ValueError, KeyError, AttributeError, TypeError) as exc:
        raise HolderFailed(f"{path} answered something that is not a read's answer") from exc


def unallocated_bytes(folder: Path) -> int:
    """How much the store's files in ``folder`` can still grow into the device without
    growing in length: the holes of its sparse files (Qdrant maps 32 MiB files it fills as it
    writes, and on tmpfs as it reads). A mapped page the device cannot back is a SIGBUS,
    which no Python code can catch, so the space is checked, or reserved, before."""
    return sum(max(0, size - used) for _, size, used in _files(folder))


def reserve_holes(folder: Path) -> None:
    """Back every page of the store's files with space on the device now
    (``posix_fallocate``: the content stays as it is), so that no mapped page of them can
    fault for want of space later.

    Raises:
        OSError: ``ENOSPC`` when the device cannot hold them.
    """
    for path, size, used in _files(folder):
        if size > used:
            fd = os.open(path, os.O_RDWR)
            try:
                os.posix_fallocate(fd, 0, size)
            finally:
                os.close(fd)


def _files(folder: Path) -> list[tuple[str, int, int]]:
    """``(path, length, bytes allocated)`` of every file under ``folder``."""
    found = []
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with contextlib.suppress(OSError):
                info = os.stat(path)
                found.append((path, info.st_size, info.st_blocks * 512))
    return found


def allocates_on_read(folder: Path) -> bool:
    """Whether reading a hole of a mapped file takes space on ``folder``'s device: true of
    memory file systems (tmpfs), where a search on a nearly full device is a SIGBUS too."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return False  # not Linux: disks map holes to the zero page
    place, kind = str(folder.resolve()), ""
    best = -1
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
        inside = place == point or place.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best:  # a later mount on the same point hides the earlier
            best, kind = len(point), fields[2]
    return kind in {"tmpfs", "shmem"}
