"""A TCP server on 127.0.0.1 that answers with raw bytes: for what http.server cannot do
(drip a status line byte by byte, send obs-text header bytes, stall a TLS handshake)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable


class RawServer:
    """Each accepted connection goes to ``handle(conn)`` on its own daemon thread.

    Example::

        server = RawServer(lambda conn: conn.sendall(b"HTTP/1.1 204 No Content\\r\\n\\r\\n"))
        server.url  # "http://127.0.0.1:PORT"
        server.stop()
    """

    def __init__(self, handle: Callable[[socket.socket], None]):
        self.handle = handle
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.connections = 0
        self._stopped = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stopped:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()

    def _run(self, conn: socket.socket) -> None:
        try:
            self.handle(conn)
        except OSError:
            pass  # the client gave up (what the deadline tests expect)
        finally:
            conn.close()

    def stop(self) -> None:
        self._stopped = True
        self.listener.close()


def read_request(conn: socket.socket) -> bytes:
    """The request head (up to the blank line), b"" when the client closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(4096)
        if not piece:
            return b""
        data += piece
    return data


def request_path(head: bytes) -> str:
    """The request target of a request head."""
    return head.split(b" ", 2)[1].decode("latin-1") if head else ""


def drip(conn: socket.socket, data: bytes, every: float) -> None:
    """Send ``data`` one byte at a time, ``every`` seconds apart."""
    for i in range(len(data)):
        conn.sendall(data[i : i + 1])
        time.sleep(every)
