"""A small, editable website on 127.0.0.1 for the quickstart, the tests and the benchmarks.

It serves pages with a sitemap (optionally an index with gzip children), robots.txt, ETag and
Last-Modified validators with 304 support, and per-request HTML noise (a CSRF token, a render
timestamp, an ad id and a random sidebar) outside the main content, and it counts every request
and byte it sends.

Example::

    site = DevSite({"/a": ("Page A", "<h1>Page A</h1><p>Hello.</p>")})
    base = site.start()               # "http://127.0.0.1:PORT"
    site.set_page("/a", "Page A", "<h1>Page A</h1><p>Edited.</p>")
    site.stop()
"""

from __future__ import annotations

import gzip
import hashlib
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape


@dataclass
class SitePage:
    title: str
    body: str
    modified: float
    status: int = 200
    location: str | None = None


@dataclass
class Hit:
    method: str
    path: str
    status: int
    conditional: bool
    bytes: int


class DevSite:
    """An in-memory website; edit it between syncs.

    Args:
        pages: ``{path: (title, main_content_html)}``.
        robots: robots.txt text (``None`` → 404).
        validators: send ETag/Last-Modified and answer conditional requests with 304.
        noise: add per-request noise around the main content.
        sitemap_index: serve ``/sitemap.xml`` as an index of two gzip children.
        latency: seconds every response takes (server think time), so that concurrent
            requests overlap; ``max_in_flight`` is the most the site ever had at once.
    """

    def __init__(
        self,
        pages: dict[str, tuple[str, str]] | None = None,
        *,
        robots: str | None = "User-agent: *\nDisallow: /private\n",
        validators: bool = True,
        noise: bool = True,
        sitemap_index: bool = False,
        latency: float = 0.0,
    ):
        self.pages: dict[str, SitePage] = {}
        self.robots = robots
        self.validators = validators
        self.noise = noise
        self.sitemap_index = sitemap_index
        self.hits: list[Hit] = []
        self.latency = latency
        self.in_flight = 0
        self.max_in_flight = 0
        # Tests install fault injection here: fault(path_and_query, headers) returns
        # (status, headers, body), or None to serve normally; it may sleep (a slow server).
        self.fault: Callable[[str, Any], tuple[int, dict[str, str], bytes] | None] | None = None
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._clock = time.time() - 86400
        for path, (title, body) in (pages or {}).items():
            self.set_page(path, title, body)

    @classmethod
    def from_folder(cls, folder: str | Path, **kwargs: Any) -> DevSite:
        """Pages from ``folder/*.html``: the first line is the title, the rest the content.

        ``index.html`` is served at ``/``, ``a-b.html`` at ``/a-b``.
        """
        pages = {}
        for file in sorted(Path(folder).glob("*.html")):
            title, _, body = file.read_text(encoding="utf-8").partition("\n")
            path = "/" if file.stem == "index" else f"/{file.stem}"
            pages[path] = (title.strip(), body)
        return cls(pages, **kwargs)

    # -- editing -------------------------------------------------------------------------

    def _tick(self) -> float:
        self._clock += 1  # strictly increasing modification times, one second apart
        return self._clock

    def set_page(self, path: str, title: str, body: str) -> None:
        with self._lock:
            self.pages[path] = SitePage(title, body, self._tick())

    def remove_page(self, path: str, status: int = 404) -> None:
        with self._lock:
            self.pages[path] = SitePage("", "", self._tick(), status=status)

    def redirect(self, old: str, new: str, status: int = 301) -> None:
        with self._lock:
            self.pages[old] = SitePage("", "", self._tick(), status=status, location=new)

    def listed(self) -> list[str]:
        return [p for p, page in self.pages.items() if page.status == 200]

    # -- serving -------------------------------------------------------------------------

    def start(self, port: int = 0, *, host: str = "127.0.0.1") -> str:
        """Serve the site on ``host`` (a loopback address: 127.0.0.2 stands for an internal
        host in the tests); returns its base URL."""
        self._server = serve_loopback(self._handle, "GET", port, host=host)
        return self.base_url

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() the site first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def stop(self) -> None:
        if self._server is not None:
            stop_server(self._server)
            self._server = None

    def requests_to(self, path: str) -> list[Hit]:
        return [hit for hit in self.hits if hit.path == path]

    def page_hits(self) -> list[Hit]:
        special = ("/robots.txt", "/sitemap")
        return [hit for hit in self.hits if not hit.path.startswith(special)]

    def sitemap(self, paths: list[str]) -> bytes:
        """The XML sitemap listing ``paths`` (with each page's lastmod)."""

        def lastmod(path: str) -> str:
            page = self.pages[path.split("?", 1)[0].split("#", 1)[0]]
            return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(page.modified))

        urls = "".join(
            f"<url><loc>{escape(self.base_url + path)}</loc>"
            f"<lastmod>{lastmod(path)}</lastmod></url>"
            for path in paths
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
        ).encode()

    def render(self, page: SitePage) -> str:
        """The HTML of one page (with the site's per-request noise unless ``noise`` is off)."""
        if not self.noise:
            noise_head = noise_side = noise_foot = ""
        else:
            token = hashlib.sha256(str(random.random()).encode()).hexdigest()[:24]
            noise_head = f'<meta name="csrf-token" content="{token}">'
            related = random.sample(["Pricing", "Changelog", "Status", "Careers", "Blog"], 3)
            noise_side = (
                '<aside class="sidebar"><h3>Related</h3><ul>'
                + "".join(f'<li><a href="/{r.lower()}">{r}</a></li>' for r in related)
                + "</ul></aside>"
            )
            noise_foot = (
                f"<p>Rendered at {time.strftime('%Y-%m-%d %H:%M:%S')} · "
                f"ad {random.randint(10000, 99999)}</p>"
                f'<form><input type="hidden" name="csrf" value="{token}"></form>'
            )
        return (
            f"<!doctype html><html><head><title>{escape(page.title)} | Example Docs</title>"
            f"{noise_head}</head><body>"
            '<header><nav><a href="/">Home</a> <a href="/guide">Guide</a></nav></header>'
            f"{noise_side}<main><article>{page.body}</article></main>"
            f"<footer>{noise_foot}<p>© Example Inc.</p></footer></body></html>"
        )

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        # In flight from arrival until the answer is ready (not while it is written: the
        # client may already have it and start its next request).
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency:
                time.sleep(self.latency)
            status, headers, body = self._answer(handler)
        finally:
            with self._lock:
                self.in_flight -= 1
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _answer(self, handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        path = handler.path.split("?", 1)[0].split("#", 1)[0]
        conditional = bool(
            handler.headers.get("If-None-Match") or handler.headers.get("If-Modified-Since")
        )
        headers: dict[str, str] = {}
        # The fault hook sees the path with its query (APIs paginate with it).
        injected = (
            self.fault(handler.path.split("#", 1)[0], handler.headers) if self.fault else None
        )
        if injected:
            status, headers, body = injected
        else:
            with self._lock:
                status, body, headers = self._respond(path, handler, headers)
        with self._lock:  # recorded before answering: hits are in the order clients saw them
            self.hits.append(Hit("GET", path, status, conditional, len(body)))
        return status, headers, body

    def _respond(
        self, path: str, handler: BaseHTTPRequestHandler, headers: dict[str, str]
    ) -> tuple[int, bytes, dict[str, str]]:
        status, body, headers = self._respond_uncached(path, handler, headers)
        if status == 200 and path.startswith(("/sitemap", "/robots.txt")) and self.validators:
            etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
            headers = {**headers, "ETag": etag}
            if handler.headers.get("If-None-Match") == etag:
                return 304, b"", headers
        return status, body, headers

    def _respond_uncached(
        self, path: str, handler: BaseHTTPRequestHandler, headers: dict[str, str]
    ) -> tuple[int, bytes, dict[str, str]]:
        if path == "/robots.txt":
            if self.robots is None:
                return 404, b"not found", {"Content-Type": "text/plain"}
            return 200, self.robots.encode(), {"Content-Type": "text/plain"}
        listed = sorted(self.listed())
        if path == "/sitemap.xml" and not self.sitemap_index:
            return 200, self.sitemap(listed), {"Content-Type": "application/xml"}
        if path == "/sitemap.xml":
            children = "".join(
                f"<sitemap><loc>{self.base_url}/sitemap-{i}.xml.gz</loc></sitemap>" for i in (1, 2)
            )
            body = (
                '<?xml version="1.0" encoding="UTF-8"?><sitemapindex '
                f'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{children}</sitemapindex>'
            ).encode()
            return 200, body, {"Content-Type": "application/xml"}
        if path in ("/sitemap-1.xml.gz", "/sitemap-2.xml.gz"):
            half = listed[::2] if path.endswith("1.xml.gz") else listed[1::2]
            return (
                200,
                gzip.compress(self.sitemap(half), mtime=0),
                {"Content-Type": "application/gzip"},
            )
        page = self.pages.get(path)
        if page is None or page.status in (404, 410):
            return (
                (page.status if page else 404),
                b"<h1>Not found</h1>",
                {"Content-Type": "text/html"},
            )
        if page.location:
            return page.status, b"", {"Location": self.base_url + page.location}
        if self.validators:
            etag = '"' + hashlib.sha256((page.title + page.body).encode()).hexdigest()[:16] + '"'
            last_modified = formatdate(page.modified, usegmt=True)
            headers = {"ETag": etag, "Last-Modified": last_modified}
            if _not_modified(handler, etag, page.modified):
                return 304, b"", headers
        body = self.render(page).encode("utf-8")
        return 200, body, {**headers, "Content-Type": "text/html; charset=utf-8"}


def serve_loopback(
    handle: Callable[[BaseHTTPRequestHandler], None],
    method: str,
    port: int = 0,
    *,
    host: str = "127.0.0.1",
) -> ThreadingHTTPServer:
    """An HTTP/1.1 server on ``host`` (a loopback address; ``port`` 0: any free one) whose
    ``method`` requests go to ``handle``, serving from a daemon thread (stop it with
    :func:`stop_server`)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: with Nagle on, the second waits for the
        # client's delayed ACK (~40 ms per response on Linux loopback).
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

    setattr(Handler, f"do_{method}", lambda handler: handle(handler))
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def stop_server(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


def _not_modified(handler: BaseHTTPRequestHandler, etag: str, modified: float) -> bool:
    """RFC 9110 §13.1.1–13.1.3: If-None-Match wins over If-Modified-Since."""
    if_none_match = handler.headers.get("If-None-Match")
    if if_none_match:
        return etag in [tag.strip() for tag in if_none_match.split(",")] or if_none_match == "*"
    since = handler.headers.get("If-Modified-Since")
    if since:
        try:
            return int(modified) <= parsedate_to_datetime(since).timestamp()
        except (TypeError, ValueError):
            return False
    return False
