"""DeadlineTransport's connections: kept alive per origin, never shared across origins or
across the private-network guard, a connection the server closed is not reused, and a
request waiting for a connection ends by the deadline."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from ragsync.transport import DeadlineTransport, deadline, internal_addresses
from tests.support.rawserver import RawServer, read_request

NOT_MODIFIED = b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\n\r\n'


def keep_alive(conn):
    """Answer every request on the connection with a 304 until the client closes it."""
    while read_request(conn):
        conn.sendall(NOT_MODIFIED)


def answer_once(conn):
    """Answer one request, then close the connection without saying so."""
    if read_request(conn):
        conn.sendall(NOT_MODIFIED)


def get(client: httpx.Client, url: str) -> int:
    with deadline(5):
        return client.get(url).status_code


def test_sequential_requests_to_one_origin_share_one_connection():
    server = RawServer(keep_alive)
    client = httpx.Client(transport=DeadlineTransport(max_connections=4))
    try:
        assert [get(client, f"{server.url}/p/{n}") for n in range(20)] == [304] * 20
        assert server.connections == 1
    finally:
        client.close()
        server.stop()


def test_each_origin_has_its_own_connections():
    one, two = RawServer(keep_alive), RawServer(keep_alive)
    client = httpx.Client(transport=DeadlineTransport(max_connections=1))
    try:
        for n in range(5):  # alternating: with one connection allowed, each origin keeps its own
            assert get(client, f"{one.url}/{n}") == get(client, f"{two.url}/{n}") == 304
        assert (one.connections, two.connections) == (1, 1)
    finally:
        client.close()
        one.stop()
        two.stop()


def test_a_connection_the_server_closed_is_not_reused():
    server = RawServer(answer_once)
    client = httpx.Client(transport=DeadlineTransport(max_connections=2))
    try:
        for n in range(3):
            assert get(client, f"{server.url}/{n}") == 304
            time.sleep(0.05)  # the server's close reaches the client's idle socket
        assert server.connections == 3
    finally:
        client.close()
        server.stop()


def test_guarded_requests_do_not_reuse_connections_opened_where_internal_was_allowed():
    server = RawServer(keep_alive)
    client = httpx.Client(transport=DeadlineTransport(max_connections=2))
    try:
        with internal_addresses(allowed=True):
            assert get(client, f"{server.url}/a") == 304
        with internal_addresses(allowed=False), pytest.raises(Exception, match="internal"):
            get(client, f"{server.url}/b")
        assert server.connections == 1
    finally:
        client.close()
        server.stop()


def test_a_request_waiting_for_a_connection_ends_by_the_deadline():
    release = threading.Event()

    def stall(conn):
        read_request(conn)
        release.wait(10)
        conn.sendall(NOT_MODIFIED)

    server = RawServer(stall)
    client = httpx.Client(transport=DeadlineTransport(max_connections=1))
    first = threading.Thread(target=lambda: get(client, f"{server.url}/slow"))
    first.start()
    try:
        time.sleep(0.2)  # the first request holds the origin's only connection
        started = time.monotonic()
        with deadline(0.5), pytest.raises(httpx.TimeoutException):
            client.get(f"{server.url}/waiting")
        assert time.monotonic() - started < 5  # it did not hang
    finally:
        release.set()
        first.join(10)
        client.close()
        server.stop()
