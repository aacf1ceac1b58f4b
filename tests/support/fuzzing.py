"""The fuzz suite's parts (tests/scenarios/test_fuzz.py): an origin on 127.0.0.1 that serves raw
bytes, a bounded run of ragsync in a child process, and the invariants every run must keep.

The mutators themselves are in :mod:`tests.support.mutators`; what they mutate is in
``tests/fixtures/fuzz/``.

A run happens in a forked child process with a hard time bound: a run that hangs is killed
(its whole process group) and reported as hung, instead of hanging the test session. The child
resolves loopback names only, so no mutated URL ever leaves the machine.
"""

from __future__ import annotations

import ipaddress
import json
import multiprocessing
import os
import signal
import socket
import threading
import time
import traceback
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lxml import etree

from ragsync.config import Config
from ragsync.encoding import decode_xml, utf8_xml
from ragsync.scope import hostname
from ragsync.state import StateDB
from ragsync.sync import Syncer
from ragsync.testing import FastEmbedder, serve_loopback, stop_server
from ragsync.urls import canonical_url, host_of

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "fuzz"


def fixture(name: str) -> bytes:
    """The bytes of ``fixtures/fuzz/<name>`` (see its SOURCES.md)."""
    return (FIXTURES / name).read_bytes()


def short(value: Any, limit: int = 160) -> str:
    """``repr(value)`` cut to ``limit`` characters, for failure messages."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 20]}…({len(text)} chars)"


# -- the embedder ---------------------------------------------------------------------------


# -- the origin -----------------------------------------------------------------------------

Headers = tuple[tuple[bytes, bytes], ...]


@dataclass(frozen=True)
class Answer:
    """What the origin sends for one path: raw status, raw header bytes and body.

    ``matches`` are the validator values (as a client parses them back: surrounding
    whitespace gone) that make a conditional request get ``304``; ``drip`` sends the body one
    byte every ``drip`` seconds (a slow server), the status line and headers too with
    ``drip_head``.
    """

    status: int = 200
    headers: Headers = ()
    body: bytes = b""
    matches: frozenset[bytes] = frozenset()
    drip: float = 0.0
    drip_head: bool = False


def text_page(text: str, *headers: tuple[bytes, bytes]) -> Answer:
    """A ``text/plain`` page (cheap to extract) with extra ``headers``."""
    return Answer(200, ((b"Content-Type", b"text/plain; charset=utf-8"), *headers), text.encode())


@dataclass(frozen=True)
class Request:
    """One request the origin received: the port's index, the target, and the raw bytes of
    the validators it carried (None when absent)."""

    port: int
    path: str
    if_none_match: bytes | None
    if_modified_since: bytes | None


Route = Answer | Callable[[Request], Answer]
DEFAULT_ROBOTS = b"User-agent: *\nDisallow: /private/\n"


class FuzzOrigin:
    """HTTP/1.1 on 127.0.0.1, ``ports`` listening ports (each port is a host of its own for
    robots.txt, pauses and politeness), answering from ``routes[(port index, path)]``.

    Answers are written byte for byte (obs-text, odd header names, lies about encodings), so
    anything a broken server sends can be sent. A path without a route gets ``default``:
    ``/robots.txt`` gets ``robots`` (an ETag and 304 included), anything else a 404.

    Example::

        origin = FuzzOrigin(ports=2)
        origin.routes[(1, "/a")] = text_page("hello")
        origin.url(1, "/a")      # "http://127.0.0.1:PORT/a"
        origin.stop()
    """

    def __init__(self, ports: int = 1, *, robots: bytes = DEFAULT_ROBOTS):
        self.routes: dict[tuple[int, str], Route] = {}
        self.robots = robots
        self.default: Callable[[Request], Answer] | None = None
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._servers: list[ThreadingHTTPServer] = [
            serve_loopback(self._handle, "GET") for _ in range(ports)
        ]
        for server in self._servers:  # a client hanging up mid-request is what fuzzing does
            server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self._index = {server.server_address[1]: i for i, server in enumerate(self._servers)}

    def base(self, port: int = 0) -> str:
        return f"http://127.0.0.1:{self._servers[port].server_address[1]}"

    def url(self, port: int, path: str) -> str:
        return self.base(port) + path

    def port_of(self, url: str) -> int | None:
        """The index of the port ``url`` points at (None: not this origin)."""
        parts = urlsplit(url)
        if parts.hostname not in ("127.0.0.1", "localhost"):
            return None
        try:
            return self._index.get(parts.port or 80)
        except ValueError:
            return None

    def stop(self) -> None:
        # All at once: each server notices a shutdown only at its next poll (0.5 s).
        stopping = [threading.Thread(target=stop_server, args=(s,)) for s in self._servers]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()

    def reset(self, *, robots: bytes = DEFAULT_ROBOTS) -> None:
        """Forget every route, request and default answer (between batches)."""
        with self._lock:
            self.routes.clear()
            self.requests.clear()
        self.default = None
        self.robots = robots

    def requests_to(self, port: int, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if (r.port, r.path) == (port, path)]

    # -- serving ------------------------------------------------------------------------

    def _answer(self, request: Request) -> Answer:
        route = self.routes.get((request.port, request.path))
        if route is None and request.path == "/robots.txt":
            route = Answer(
                200,
                ((b"Content-Type", b"text/plain"), (b"ETag", b'"robots"')),
                self.robots,
                frozenset({b'"robots"'}),
            )
        if route is None and self.default is not None:
            route = self.default
        if route is None:
            return Answer(404, ((b"Content-Type", b"text/plain"),), b"not found")
        return route(request) if callable(route) else route

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        def raw(name: str) -> bytes | None:
            value = handler.headers.get(name)  # http.server decodes header bytes as latin-1
            return None if value is None else value.encode("latin-1")

        port = self._index[handler.server.server_address[1]]
        request = Request(port, handler.path, raw("If-None-Match"), raw("If-Modified-Since"))
        with self._lock:
            self.requests.append(request)
        answer = self._answer(request)
        status, body = answer.status, answer.body
        if answer.matches and (
            request.if_none_match in answer.matches or request.if_modified_since in answer.matches
        ):
            status, body = 304, b""
        reason = BaseHTTPRequestHandler.responses.get(status, ("Whatever",))[0].encode()
        head = [b"HTTP/1.1 %d %s" % (status, reason)]
        head += [name + b": " + value for name, value in answer.headers]
        if status != 304 and status >= 200 and status != 204:
            head.append(b"Content-Length: %d" % len(body))
        if answer.drip:
            head.append(b"Connection: close")
            handler.close_connection = True
        response = b"\r\n".join(head) + b"\r\n\r\n" + body
        try:
            if not answer.drip:
                handler.wfile.write(response)
                return
            start = 0 if answer.drip_head else len(response) - len(body)
            handler.wfile.write(response[:start])
            for i in range(start, len(response)):
                handler.wfile.write(response[i : i + 1])
                handler.wfile.flush()
                time.sleep(answer.drip)
        except OSError:  # the client gave up (a deadline): what a slow server sees
            handler.close_connection = True


# -- a bounded run --------------------------------------------------------------------------


@dataclass
class RunOutcome:
    """How one run ended: its report, or the exception it raised, or the bound it passed."""

    report: dict[str, Any] | None
    error: str | None
    hung: bool
    seconds: float
    refused_names: list[str] = field(default_factory=list)

    def problems(self, bound: float) -> list[str]:
        if self.hung:
            return [f"the run did not return within {bound:g} s (killed)"]
        if self.error:
            return [f"the run raised:\n{self.error}"]
        return []


def _loopback_only() -> list[str]:
    """Resolve loopback names only (in this process): a mutated URL naming any other host
    fails at once, as an unresolvable name does. Returns the list the refused names go to."""
    real = socket.getaddrinfo
    refused: list[str] = []

    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
        try:
            loopback = ipaddress.ip_address(name.strip("[]")).is_loopback
        except ValueError:
            loopback = name.lower().rstrip(".") == "localhost"
        if not loopback:
            refused.append(name)
            raise socket.gaierror(socket.EAI_NONAME, f"fuzz: {name!r} is not a loopback name")
        return real(host, *args, **kwargs)

    socket.getaddrinfo = guarded  # type: ignore[assignment]
    return refused


def _child(config: Config, out: str, revalidate_all: bool) -> None:
    os.setpgrp()  # a hung run is killed together with whatever it started
    refused = _loopback_only()
    payload: dict[str, Any]
    try:
        with Syncer(config, embedder=FastEmbedder()) as syncer:
            result = syncer.run(revalidate_all=revalidate_all)
        report = result.to_dict()
        json.dumps(report)  # the report must be serialisable (`run --json`)
        payload = {"report": report, "error": None}
    except BaseException:
        payload = {"report": None, "error": traceback.format_exc()}
    payload["refused_names"] = refused
    Path(out).write_text(json.dumps(payload))


def run_bounded(
    config: Config, out: Path, *, bound: float, revalidate_all: bool = False
) -> RunOutcome:
    """``Syncer(config).run()`` in a forked child, killed after ``bound`` seconds.

    The parent must hold no open handle on the state DB or the vector store meanwhile.
    """
    context = multiprocessing.get_context("fork")
    process = context.Process(target=_child, args=(config, str(out), revalidate_all))
    started = time.monotonic()
    process.start()
    process.join(bound)
    hung = process.is_alive()
    if hung:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            process.kill()
        process.join(10)
    seconds = time.monotonic() - started
    if hung or not out.exists():
        error = None if hung else f"the run's process died (exit code {process.exitcode})"
        return RunOutcome(None, error, hung, seconds)
    payload = json.loads(out.read_text())
    return RunOutcome(payload["report"], payload["error"], False, seconds, payload["refused_names"])


# -- invariants -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Listed:
    """A page some listing points at, and the fuzz case it belongs to."""

    case_id: str
    url: str
    detail: str


def doc_key(source_id: str, url: str) -> str | None:
    try:
        return f"{source_id}:{canonical_url(url)}"
    except ValueError:
        return None


def report_problems(report: dict[str, Any]) -> list[str]:
    """The run report is whole: finished, counters as numbers, every failed source says why,
    and no listing was ended by an exception inside its connector (``discovery failed: …``,
    the engine's safety net: a defect it hides)."""
    problems = []
    if not report.get("finished_at"):
        problems.append("the run report has no finished_at")
    for name, value in report["counters"].items():
        if not isinstance(value, int) or value < 0:
            problems.append(f"counter {name} = {value!r}")
    for source_id, outcome in report["sources"].items():
        if not outcome["ok"] and not outcome["errors"]:
            problems.append(f"source {source_id} failed without an error in the report")
        for reason in outcome["listing_incomplete"]:
            if not isinstance(reason, str) or not reason.strip():
                problems.append(f"source {source_id}: an empty incomplete-listing reason")
            elif reason.startswith("discovery failed"):  # the connector raised: a hidden defect
                problems.append(f"source {source_id}: {short(reason, 300)}")
    return problems


def page_problems(
    state: StateDB,
    report: dict[str, Any],
    source_id: str,
    listed: Iterable[Listed],
    *,
    disallowed: Callable[[str], bool],
    source_hosts: frozenset[str] = frozenset({"127.0.0.1"}),
) -> list[str]:
    """Every listed page ended indexed or with a recorded reason.

    A reason is: a ``fetch_attempts`` row with ``last_error``; a move (an alias to another
    record); robots.txt (``disallowed(url)``, counted in ``robots_disallowed``); a paused
    host (counted in ``deferred``); or a host outside ``source_hosts`` (counted in
    ``out_of_scope``). Also: no attempt row is without its reason, and none is
    the engine's safety net (``internal error: …``: an exception nothing expected).
    """
    counters = report["sources"].get(source_id, {}).get("counters", {})
    documents = {d["doc_key"]: d for d in state.documents.list(source_id)}
    attempts = {a["doc_key"]: a for a in state.attempts.list(source_id)}
    aliases = state.aliases.targets(source_id)
    paused = set(state.hosts.list_pauses())  # paused at some point (a short pause may be over)
    problems = [
        f"{a['url']}: attempt without a reason ({a['state']})"
        for a in attempts.values()
        if not (a["last_error"] or "").strip()
    ]
    # The engine's safety net caught an exception nothing else expected: a defect it hides.
    problems += [
        f"{short(a['url'], 100)}: {short(a['last_error'], 300)}"
        for a in attempts.values()
        if (a["last_error"] or "").startswith("internal error")
    ]
    unexplained: dict[str, list[Listed]] = {}
    checked: set[str] = set()
    for page in listed:
        key = doc_key(source_id, page.url)
        if key is None or key in checked:
            continue  # not a URL (the listing drops it with a warning), or seen already
        checked.add(key)
        document = documents.get(key)
        if document is not None and document["status"] != "tombstoned":
            continue
        if key in attempts or key in aliases:
            continue
        if disallowed(page.url) and counters.get("robots_disallowed"):
            continue
        if hostname(page.url) not in source_hosts and counters.get("out_of_scope"):
            continue  # another host than the source's: never requested (README "Security")
        if host_of(key.split(":", 1)[1]) in paused and counters.get("deferred"):
            continue
        unexplained.setdefault(page.case_id, []).append(page)
    for case_id, pages in unexplained.items():
        more = f" (and {len(pages) - 1} more)" if len(pages) > 1 else ""
        problems.append(
            f"{case_id}: {short(pages[0].url, 100)}{more} neither indexed nor given a reason"
            f" ({pages[0].detail})"
        )
    return problems


def store_problems(config: Config) -> list[str]:
    """The vector store holds exactly the indexed chunks (``verify().clean``)."""
    with Syncer(config, embedder=FastEmbedder()) as syncer:
        report = syncer.verify()
    if report.clean:
        return []
    return [f"verify is not clean: {short(report.to_dict(), 600)}"]


# -- what a discovery document is, judged without the connector -----------------------------

_STRICT_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


def sitemap_verdict(body: bytes) -> str:
    """``"whole"`` or ``"broken"``: whether a sitemap body can be read whole, judged
    independently of ``ragsync.connectors.sitemap`` (zlib for the gzip layer, every member; the
    documented decoding, ``ragsync.encoding.decode_xml``, whose text must not be in doubt; a
    strict lxml parse for XML; a text sitemap is whole when a line is an http(s) URL). A
    listing of a broken document must say it is incomplete; a listing of a whole one must
    not."""
    if body[:2] == b"\x1f\x8b":
        unpacked = bytearray()
        rest = body
        while rest[:2] == b"\x1f\x8b":  # each gzip member; bytes after the last are ignored
            inflater = zlib.decompressobj(31)
            try:
                unpacked += inflater.decompress(rest, 50 * 1024 * 1024 + 1 - len(unpacked))
            except zlib.error:
                return "broken"
            if not inflater.eof or len(unpacked) > 50 * 1024 * 1024:
                return "broken"
            rest = inflater.unused_data
        body = bytes(unpacked)
    decoded = decode_xml(body)
    if decoded.doubt:
        return "broken"  # listed, but a URL in it may be misread
    if "<!ENTITY" in decoded.text[:65536].upper():
        return "broken"  # refused as hostile, by design
    if not decoded.text.lstrip(" \t\r\n").startswith("<"):
        lines = decoded.text.splitlines()
        urls = [line for line in lines if line.strip().startswith(("http://", "https://"))]
        return "whole" if urls else "broken"
    try:
        root = etree.fromstring(utf8_xml(decoded.text), _STRICT_XML)
    except etree.XMLSyntaxError:
        return "broken"
    return "whole" if etree.QName(root).localname in ("urlset", "sitemapindex") else "broken"
