"""A folder served as a plain static web server serves it, on 127.0.0.1: for real sites
saved as files (a documentation tree), in tests and benchmarks."""

from __future__ import annotations

import hashlib
import mimetypes
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from urllib.parse import unquote

from ragsync.testing.site import serve_loopback, stop_server


class StaticSite:
    """``root`` on 127.0.0.1: each file with a strong ``ETag`` (a 304 to a matching
    ``If-None-Match``) and its ``Content-Type`` by extension, ``index.html`` for a directory,
    404 for anything else. Every request is recorded in :attr:`hits` as ``(path, status,
    conditional)``. Use it as a context manager, or call :meth:`stop`.

    Attributes:
        content_types: a request path's ``Content-Type`` instead of its extension's.
        failing: request paths answering 500.
    """

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.hits: list[tuple[str, int, bool]] = []
        self.content_types: dict[str, str] = {}
        self.failing: set[str] = set()
        self.server = serve_loopback(self.handle, "GET")
        host, port = self.server.server_address[:2]
        self.base_url = f"http://{host!s}:{port}"

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        path = unquote(handler.path.split("?", 1)[0].split("#", 1)[0])
        file = (self.root / path.lstrip("/")).resolve()
        if file.is_dir():
            file = file / "index.html"
        status, body, headers = 404, b"not found", {"Content-Type": "text/plain"}
        if path in self.failing:
            status, body = 500, b"busy"
        elif self.root in file.parents and file.is_file():
            body = file.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
            kind = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
            kind = self.content_types.get(path, kind)
            status, headers = 200, {"ETag": etag, "Content-Type": kind}
            if handler.headers.get("If-None-Match") == etag:
                status, body = 304, b""
        self.hits.append((path, status, bool(handler.headers.get("If-None-Match"))))
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def stop(self) -> None:
        stop_server(self.server)

    def __enter__(self) -> StaticSite:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
