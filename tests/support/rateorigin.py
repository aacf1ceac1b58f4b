"""A rate-limited origin for the pause tests, run in its own process so that its clock readings
are not delayed by the client's threads (one GIL would shift every timestamp it takes).

It serves ``/robots.txt``, ``/sitemap.xml`` and ``PAGES`` HTML pages ``/p/N``; it thinks
``THINK`` seconds per request and answers a share ``SHARE`` of page requests (drawn by a seeded
RNG) with ``429`` and ``Retry-After: RETRY_AFTER`` (delta-seconds, or with ``--date`` an
HTTP-date; with ``--slow-body`` the 429's body follows its headers over 300 ms).
``GET /_records`` answers JSON: ``arrivals`` ``[[t, path], ...]`` (when each request had
arrived) and ``limited`` ``[[sent, ends, path], ...]`` (when each 429's headers had been sent,
when its pause ends), on one monotonic clock.

Usage: ``python rateorigin.py PAGES SHARE RETRY_AFTER THINK SEED [--date] [--slow-body]``;
prints the port.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TEXT = (
    "The {0} setting controls how the service behaves when traffic grows quickly. Operators "
    "usually change {0} during a maintenance window and watch the logs. Every change to {0} is "
    "recorded in the audit trail with the operator's name."
)


def main(
    pages: int, share: float, retry_after: int, think: float, seed: int, *, date: bool, slow: bool
) -> None:
    rng = random.Random(seed)
    lock = threading.Lock()
    arrivals: list[tuple[float, str]] = []
    limited: list[tuple[float, float, str]] = []
    bodies = {
        f"/p/{i}": (
            f"<!doctype html><html><head><title>Page {i}</title></head><body><main><article>"
            f"<h1>Page {i}</h1><h2>About</h2><p>{TEXT.format(f'topic {i}')}</p>"
            "</article></main></body></html>"
        ).encode()
        for i in range(pages)
    }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            arrived = time.monotonic()
            path = self.path
            if path == "/_records":
                with lock:
                    self.answer(200, {}, json.dumps({"arrivals": arrivals, "limited": limited}))
                return
            with lock:
                arrivals.append((arrived, path))
                limit = path.startswith("/p/") and rng.random() < share
            time.sleep(think)
            if limit:
                # An HTTP-date has whole seconds: the pause ends at that second, maybe sooner
                # than retry_after from now (RFC 9110 §10.2.3).
                moment = time.time() + retry_after
                value = formatdate(moment, usegmt=True) if date else str(retry_after)
                date_ends = time.monotonic() + retry_after - moment % 1
                body = b"slow down, " * 30
                self.send_response(429)
                self.send_header("Retry-After", value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()  # the 429 has left: the client may pause from now on
                sent = time.monotonic()
                with lock:
                    limited.append((sent, date_ends if date else sent + retry_after, path))
                for start in range(0, len(body), 30):
                    if slow:
                        time.sleep(0.03)
                    self.wfile.write(body[start : start + 30])
            elif path == "/robots.txt":
                self.answer(200, {"Content-Type": "text/plain"}, "User-agent: *\nAllow: /\n")
            elif path == "/sitemap.xml":
                base = f"http://127.0.0.1:{self.server.server_address[1]}"
                locs = "".join(f"<url><loc>{base}{p}</loc></url>" for p in bodies)
                xmlns = "http://www.sitemaps.org/schemas/sitemap/0.9"
                self.answer(200, {}, f'<urlset xmlns="{xmlns}">{locs}</urlset>')
            elif path in bodies:
                self.answer(200, {"Content-Type": "text/html; charset=utf-8"}, bodies[path])
            else:
                self.answer(404, {}, "not found")

        def answer(self, status: int, headers: dict[str, str], body: str | bytes) -> None:
            data = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        int(args[0]),
        float(args[1]),
        int(args[2]),
        float(args[3]),
        int(args[4]),
        date="--date" in args,
        slow="--slow-body" in args,
    )
