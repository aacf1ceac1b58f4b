"""`fetch.timeout` bounds a whole request, and event delivery its whole budget, against real
servers on 127.0.0.1 that drip their answers a byte at a time (a per-read timeout never fires
on those: every byte comes well within it)."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
import time
from datetime import UTC, datetime

import pytest

from ragsync.config import EventConfig, FetchConfig
from ragsync.errors import FetchError
from ragsync.events import Dispatcher, outbox_rows
from ragsync.fetch import Fetcher
from ragsync.politeness import HostGate, PoliteFetcher
from ragsync.state import StateDB
from ragsync.sync import Syncer
from ragsync.testing import DevSite
from ragsync.transport import DeadlineTransport
from ragsync.urls import host_of
from tests.support import example_pages, make_config
from tests.support.rawserver import RawServer, drip, read_request, request_path

# Slack for "it did not hang": the deadline plus a generous margin for a loaded machine.
SLACK = 3.0


def dripping_page(conn):
    read_request(conn)
    drip_body(conn)


def drip_body(conn, *, every=0.5):
    """Headers at once, then a 1000-byte body one byte every ``every`` seconds."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 1000\r\n\r\n")
    drip(conn, b"x" * 1000, every)


def dripping_headers(conn):
    read_request(conn)
    drip(conn, b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Slow: " + b"y" * 200, 0.3)


def timed_failure(fetcher, url):
    started = time.monotonic()
    with pytest.raises(FetchError) as info:
        fetcher.get(url)
    return info.value, time.monotonic() - started


@pytest.mark.parametrize("handler", [dripping_page, dripping_headers])
def test_a_dripping_server_is_cut_at_fetch_timeout(handler):
    server = RawServer(handler)
    fetcher = Fetcher(FetchConfig(timeout=1.5))
    try:
        error, elapsed = timed_failure(fetcher, server.url + "/slow")
    finally:
        fetcher.close()
        server.stop()
    assert error.transient and error.url == server.url + "/slow"
    assert "timeout: whole request over fetch.timeout=1.5s" in error.reason
    assert 1.4 <= elapsed < 1.5 + SLACK


def test_a_stalled_tls_handshake_is_cut_at_fetch_timeout():
    def stall(conn):
        conn.recv(4096)  # the ClientHello
        conn.sendall(b"\x16\x03\x03\x40\x00")  # a handshake record of 16 KiB follows… slowly
        drip(conn, b"\x02" * 1000, 0.3)

    server = RawServer(stall)
    fetcher = Fetcher(FetchConfig(timeout=1.5))
    try:
        error, elapsed = timed_failure(fetcher, f"https://127.0.0.1:{server.port}/")
    finally:
        fetcher.close()
        server.stop()
    assert error.transient and "fetch.timeout=1.5s" in error.reason
    assert elapsed < 1.5 + SLACK


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1: ``(certfile, keyfile)``."""
    if not shutil.which("openssl"):
        pytest.skip("needs the openssl command")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


def tls_server(certificate, answer):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)

    def handle(conn):
        with context.wrap_socket(conn, server_side=True) as tls:
            answer(tls)

    return RawServer(handle)


def tls_fetcher(certificate, **config):
    client_context = ssl.create_default_context(cafile=certificate[0])
    transport = DeadlineTransport(max_connections=2, ssl_context=client_context)
    return Fetcher(FetchConfig(**config), transport=transport)


def test_tls_works_and_its_body_is_bounded_too(certificate):
    def hello(tls):
        while read_request(tls):  # keep-alive: two requests on one connection
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")

    server = tls_server(certificate, hello)
    fetcher = tls_fetcher(certificate, timeout=5)
    try:
        for _ in range(2):
            response = fetcher.get(f"https://127.0.0.1:{server.port}/")
            assert (response.status, response.body) == (200, b"hello")
        assert server.connections == 1
    finally:
        fetcher.close()
        server.stop()

    server = tls_server(certificate, dripping_page)
    fetcher = tls_fetcher(certificate, timeout=1.5)
    try:
        error, elapsed = timed_failure(fetcher, f"https://127.0.0.1:{server.port}/")
    finally:
        fetcher.close()
        server.stop()
    assert "fetch.timeout=1.5s" in error.reason and elapsed < 1.5 + SLACK


def test_a_dripping_page_fails_alone_and_the_run_goes_on(tmp_path, embedder):
    def origin(conn):
        head = read_request(conn)
        if request_path(head) == "/robots.txt":
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            head = read_request(conn)
        if head:
            drip_body(conn)

    site = DevSite(example_pages(3))
    site.start()
    slow = RawServer(origin)
    good = [site.base_url + path for path in site.listed() if path.startswith("/guide/")]
    try:
        config = make_config(
            tmp_path,
            [{"id": "docs", "kind": "urls", "urls": [*good, slow.url + "/drip"]}],
            fetch={"timeout": 1.5},
        )
        with Syncer(config, embedder=embedder) as syncer:
            started = time.monotonic()
            result = syncer.run()
            elapsed = time.monotonic() - started
            [attempt] = syncer.state.attempts.list("docs")
            documents = syncer.state.documents.list("docs")
            points = syncer.store.count()
    finally:
        slow.stop()
        site.stop()
    assert elapsed < 60  # it ends (the page drips for 500 s)
    assert not result.ok
    assert attempt["url"] == slow.url + "/drip" and attempt["state"] == "retrying"
    assert "fetch.timeout=1.5s" in attempt["last_error"]
    assert sorted(d["canonical_url"] for d in documents) == sorted(good)
    assert {d["status"] for d in documents} == {"active"}
    assert points > 0


def dripping_receiver(conn):
    read_request(conn)
    drip(conn, b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", 0.3)  # 14 s


def deliver_one(tmp_path, endpoint_timeout, deadline):
    """One due event to a dripping receiver: ``(seconds deliver_due took, the outbox row)``."""
    server = RawServer(dripping_receiver)
    state = StateDB(tmp_path / "state.db")
    endpoint = EventConfig(url=server.url + "/hook", timeout=endpoint_timeout)
    change = {
        "change_type": "created",
        "source_id": "docs",
        "url": "https://x.org/a",
        "doc_key": "docs:https://x.org/a",
        "at": "2026-01-01T00:00:00Z",
        "old_hash": None,
        "new_hash": "h",
        "chunks_added": 1,
        "chunks_removed": 0,
        "magnitude": 1.0,
        "diff": "",
    }
    state.db.table("outbox").insert_all(outbox_rows(change, [endpoint], iso_now()), pk="seq")
    dispatcher = Dispatcher(state, [endpoint])
    try:
        started = time.monotonic()
        assert dispatcher.deliver_due(deadline) == 0
        elapsed = time.monotonic() - started
    finally:
        dispatcher.close()
        server.stop()
    [event] = state.outbox.list()
    state.close()
    return elapsed, event


def iso_now():
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_event_delivery_ends_at_its_deadline_and_keeps_the_event(tmp_path):
    elapsed, event = deliver_one(tmp_path, endpoint_timeout=10.0, deadline=2.0)
    assert elapsed < 2.0 + SLACK
    # Cut by the delivery deadline, not by the receiver's own timeout: still pending, due at
    # once, and no failed attempt.
    assert event["state"] == "pending" and event["attempts"] == 0
    assert event["next_attempt_at"] <= iso_now()


def test_a_receiver_over_its_own_timeout_is_a_failed_attempt(tmp_path):
    elapsed, event = deliver_one(tmp_path, endpoint_timeout=1.0, deadline=5.0)
    assert elapsed < 1.0 + SLACK
    assert event["state"] == "pending" and event["attempts"] == 1
    assert event["last_error"].startswith("timeout: delivery over events timeout=1s")


def test_one_deadline_per_thread():
    """Each fetch thread's deadline is its own: a slow page does not shorten a fast one."""
    server = RawServer(
        lambda conn: (
            drip_body(conn, every=0.05)
            if request_path(read_request(conn)) == "/slow"
            else conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        )
    )
    fetcher = Fetcher(FetchConfig(timeout=1.0))
    outcome = {}

    def slow():
        try:
            fetcher.get(server.url + "/slow")
        except FetchError as exc:
            outcome["slow"] = exc.reason

    thread = threading.Thread(target=slow)
    thread.start()
    try:
        time.sleep(0.8)
        outcome["fast"] = fetcher.get(server.url + "/fast").body  # starts late, ends past 1 s
        time.sleep(0.5)
        outcome["late"] = fetcher.get(server.url + "/fast").body
    finally:
        thread.join()
        fetcher.close()
        server.stop()
    assert outcome["fast"] == outcome["late"] == b"ok"
    assert "fetch.timeout=1s" in outcome["slow"]


def test_waiting_at_the_gate_is_not_network_time():
    """A Retry-After pause waited out at the host gate does not eat into fetch.timeout."""
    server = RawServer(
        lambda conn: (
            read_request(conn) and conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        )
    )
    gate = HostGate(per_host_concurrency=1, min_delay=0, max_wait=5)
    polite = PoliteFetcher(Fetcher(FetchConfig(timeout=0.5)), gate, default_pause=1)
    gate.pause(host_of(server.url), 1.0)
    try:
        started = time.monotonic()
        assert polite.get(server.url + "/a").body == b"ok"
    finally:
        polite.fetcher.close()
        server.stop()
    assert time.monotonic() - started >= 0.9  # it waited, then had its whole 0.5 s
