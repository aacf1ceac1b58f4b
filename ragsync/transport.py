"""The sockets under ragsync's HTTP clients: every operation ends by the request's deadline.

httpx's timeouts bound each socket operation (one connect, one read, one write), so a server
that sends a byte every few seconds keeps a request alive for ever. Here the caller sets a
deadline for its thread (:func:`deadline`), and every socket operation of
:class:`DeadlineTransport` — connect, TLS handshake, each write, each read — gets at most the time
left before it, and raises a timeout once it has passed: the whole request (connect, sending,
headers and the complete body) ends by the deadline.

Sockets are opened in one place, :meth:`DeadlineBackend.connect_tcp`, which resolves the host
itself (``socket.getaddrinfo``) and connects to each address in turn: the place to vet an address
before connecting to it. Within :func:`internal_addresses` ``(allowed=False)`` it refuses every
loopback, link-local, private and unique-local address (:func:`internal_address`)
— the resolved address, at connect time, so a name that resolves to a public address when
checked and to an internal one when used (DNS rebinding) is still refused (README "Security").

Not bounded: name resolution (the system resolver has its own timeouts), and anything done by a
transport other than :class:`DeadlineTransport` (tests inject ``httpx.MockTransport``, which has
no sockets).

Example::

    client = httpx.Client(transport=DeadlineTransport(max_connections=8))
    with deadline(30):
        response = client.get("https://example.org/", timeout=30)
"""

from __future__ import annotations

import ipaddress
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any

import httpcore
import httpx

# Monotonic time by which the current thread's request must end (None: no deadline). A
# ContextVar, not a field of the transport: each fetch thread runs one request at a time, while
# pooled connections pass from thread to thread.
_DEADLINE: ContextVar[float | None] = ContextVar("ragsync_request_deadline", default=None)


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every socket operation of a :class:`DeadlineTransport` started in this block, in this
    thread, ends within ``seconds`` from now (or by an enclosing block's deadline, if sooner)."""
    end = time.monotonic() + seconds
    outer = _DEADLINE.get()
    token = _DEADLINE.set(end if outer is None else min(outer, end))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def time_left() -> float | None:
    """Seconds left before the current deadline (negative once passed), or None without one."""
    end = _DEADLINE.get()
    return None if end is None else end - time.monotonic()


def _bounded(timeout: float | None, expired: type[Exception]) -> float | None:
    """``timeout`` cut to the time left; raises ``expired`` once the deadline has passed."""
    left = time_left()
    if left is None:
        return timeout
    if left <= 0:
        raise expired("deadline passed")
    return left if timeout is None else min(timeout, left)


@contextmanager
def _mapped(timed_out: type[Exception], failed: type[Exception]) -> Iterator[None]:
    """Socket errors as the httpcore errors httpcore's own sync backend raises."""
    try:
        yield
    except TimeoutError as exc:  # socket.timeout is TimeoutError since 3.10
        raise timed_out(str(exc) or "timed out") from exc
    except OSError as exc:  # ssl.SSLError too
        raise failed(str(exc)) from exc


def _readable(sock: socket.socket) -> bool:
    """Whether an idle socket has something to read: the server closed it or broke protocol,
    so the pool must not reuse it."""
    if sock.fileno() < 0:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


class DeadlineStream(httpcore.NetworkStream):
    """A connected socket (plain or TLS) whose every operation ends by the thread's deadline."""

    def __init__(self, sock: socket.socket):
        self._sock = sock

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _mapped(httpcore.ReadTimeout, httpcore.ReadError):
            self._sock.settimeout(_bounded(timeout, httpcore.ReadTimeout))
            return self._sock.recv(max_bytes)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        with _mapped(httpcore.WriteTimeout, httpcore.WriteError):
            view = memoryview(buffer)
            while view:  # the time left is re-read before each send
                self._sock.settimeout(_bounded(timeout, httpcore.WriteTimeout))
                view = view[self._sock.send(view) :]

    def close(self) -> None:
        self._sock.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        try:
            with _mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
                # CPython bounds the whole handshake, not each of its reads, by the socket's
                # timeout (one deadline inside SSLSocket.do_handshake).
                self._sock.settimeout(_bounded(timeout, httpcore.ConnectTimeout))
                tls = ssl_context.wrap_socket(self._sock, server_hostname=server_hostname)
        except BaseException:
            self._sock.close()
            raise
        return DeadlineStream(tls)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":  # httpcore asks it for the ALPN protocol; SSLSocket answers
            return self._sock if isinstance(self._sock, ssl.SSLSocket) else None
        if info == "client_addr":
            return self._sock.getsockname()
        if info == "server_addr":
            return self._sock.getpeername()
        if info == "socket":
            return self._sock
        if info == "is_readable":
            return _readable(self._sock)
        return None


# IPv6 prefixes that carry an IPv4 address in their last 32 bits: NAT64 (RFC 6052, RFC 8215)
# and the deprecated IPv4-compatible form. A DNS64 resolver maps 169.254.169.254 to one of these.
_IPV4_IN_IPV6 = tuple(
    ipaddress.IPv6Network(prefix) for prefix in ("64:ff9b::/96", "64:ff9b:1::/48", "::/96")
)


def internal_address(address: str) -> bool:
    """Whether an IP address is not on the public internet: loopback, link-local, private,
    unique-local, shared (CGNAT), multicast, unspecified or reserved — also when an IPv6
    address carries such an IPv4 address (IPv4-mapped, NAT64, 6to4, Teredo).

        >>> [internal_address(a) for a in ("127.0.0.2", "169.254.169.254", "10.1.2.3", "fd00::1")]
        [True, True, True, True]
        >>> internal_address("93.184.215.14"), internal_address("::ffff:127.0.0.1")
        (False, True)
        >>> nat64, six_to_four, compatible = "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1", "::10.0.0.1"
        >>> [internal_address(a) for a in (nat64, six_to_four, compatible)]
        [True, True, True]
    """
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(
        address.split("%", 1)[0]
    )
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip.sixtofour is not None:
            ip = ip.sixtofour
        elif ip.teredo is not None:
            ip = ip.teredo[1]  # the client's address
        elif any(ip in net for net in _IPV4_IN_IPV6):  # (::1 and :: stay internal)
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return not ip.is_global or ip.is_multicast or ip.is_unspecified


# Whether the current thread's request may connect to internal addresses (None: no guard, as
# for callers outside a source's scope). A ContextVar for the same reason as the deadline.
_INTERNAL_OK: ContextVar[bool | None] = ContextVar("ragsync_internal_ok", default=None)


class InternalAddressRefused(Exception):
    """The host resolved only to internal addresses, which the request may not reach."""

    def __init__(self, host: str, address: str):
        self.host, self.address = host, address
        super().__init__(
            f"refused: {host} resolves to {address}, an internal (loopback, link-local or "
            "private) address; set allow_private_networks = true on the source to allow it"
        )


@contextmanager
def internal_addresses(*, allowed: bool) -> Iterator[None]:
    """Within the block, this thread's connections may (or may not) go to internal
    addresses."""
    token = _INTERNAL_OK.set(allowed)
    try:
        yield
    finally:
        _INTERNAL_OK.reset(token)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend: TCP connections whose operations respect the deadline."""

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        """Resolve ``host`` and connect to its addresses in turn (as ``socket.create_connection``
        does), each attempt bounded by the time left.

        Raises:
            httpcore.ConnectTimeout: the deadline passed (or every attempt timed out).
            httpcore.ConnectError: the name did not resolve, or no address accepted.
            InternalAddressRefused: only internal addresses, and the request may reach none.
        """
        with _mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
            addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        if _INTERNAL_OK.get() is False:
            public = [a for a in addresses if not internal_address(str(a[4][0]))]
            if not public:
                raise InternalAddressRefused(host, str(addresses[0][4][0]))
            addresses = public
        error: OSError | None = None
        for family, kind, proto, _, address in addresses:
            sock = socket.socket(family, kind, proto)
            try:
                for option in socket_options or ():
                    sock.setsockopt(*option)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if local_address:
                    sock.bind((local_address, 0))
                sock.settimeout(_bounded(timeout, httpcore.ConnectTimeout))
                sock.connect(address)
                return DeadlineStream(sock)
            except OSError as exc:
                sock.close()
                error = exc
            except BaseException:
                sock.close()
                raise
        if isinstance(error, TimeoutError):
            raise httpcore.ConnectTimeout(f"connecting to {host}:{port} timed out") from error
        raise httpcore.ConnectError(f"cannot connect to {host}:{port}: {error}") from error


# httpcore's errors → httpx's, the most specific first (httpx's own transport maps the same).
_HTTPX_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextmanager
def _httpx_errors() -> Iterator[None]:
    try:
        yield
    except tuple(core for core, _ in _HTTPX_ERRORS) as exc:
        mapped = next(ours for core, ours in _HTTPX_ERRORS if isinstance(exc, core))
        raise mapped(str(exc)) from exc


class _ResponseStream(httpx.SyncByteStream):
    """A response body with httpcore's errors as httpx's; closing it gives its connection
    back (``done``)."""

    def __init__(self, stream: Iterable[bytes], done: Callable[[], None]):
        self._stream = stream
        self._done: Callable[[], None] | None = done

    def __iter__(self) -> Iterator[bytes]:
        with _httpx_errors():
            yield from self._stream

    def close(self) -> None:
        try:
            close = getattr(self._stream, "close", None)
            if close is not None:
                close()
        finally:
            done, self._done = self._done, None
            if done is not None:
                done()


class _OriginPool:
    """Kept-alive connections to one origin (on one side of the private-network guard): at
    most ``max_connections`` requests at once; the most recently used idle connection first.

    httpcore's own pool looks through all its connections and queued requests for every
    request it places (time in proportion to their product: at 32 requests in flight to a
    host, most of a 304's CPU time), and a pool shared by many hosts closes one host's idle
    connection to open another's. A request here takes an idle connection or opens one.
    """

    def __init__(
        self, origin: httpcore.Origin, *, max_connections: int, ssl_context: ssl.SSLContext
    ):
        self.origin = origin
        self.ssl_context = ssl_context
        self.slots = threading.BoundedSemaphore(max_connections)
        self.lock = threading.Lock()
        self.idle: list[httpcore.HTTPConnection] = []
        self.in_flight = 0
        self.used = time.monotonic()

    def send(self, request: httpcore.Request) -> tuple[httpcore.Response, Callable[[], None]]:
        """The response to ``request`` and the call that gives its connection back (once the
        response is closed).

        Raises:
            httpcore.PoolTimeout: no connection came free within the request's pool timeout
                or the deadline.
        """
        timeout = _bounded(request.extensions.get("timeout", {}).get("pool"), httpcore.PoolTimeout)
        if not self.slots.acquire(timeout=-1 if timeout is None else timeout):
            raise httpcore.PoolTimeout(f"no connection to {self.origin} came free")
        try:
            while True:
                connection, reused = self._connection()
                try:
                    response = connection.handle_request(request)
                except httpcore.ConnectionNotAvailable:
                    connection.close()  # a kept-alive one the server closed meanwhile
                    if reused:
                        continue
                    raise
                except BaseException:
                    connection.close()
                    raise
                return response, partial(self._give_back, connection)
        except BaseException:
            self.slots.release()
            raise

    def _connection(self) -> tuple[httpcore.HTTPConnection, bool]:
        """An idle connection still usable (not expired, not closed by the server), else a
        new one; and whether it was reused."""
        while True:
            with self.lock:
                connection = self.idle.pop() if self.idle else None
            if connection is None:
                return (
                    httpcore.HTTPConnection(
                        origin=self.origin,
                        ssl_context=self.ssl_context,
                        keepalive_expiry=KEEPALIVE_EXPIRY,
                        network_backend=_BACKEND,
                    ),
                    False,
                )
            if connection.is_idle() and not connection.has_expired():
                return connection, True
            connection.close()

    def _give_back(self, connection: httpcore.HTTPConnection) -> None:
        if connection.is_idle():  # kept alive (HTTP/1.1 closes it when it cannot be)
            with self.lock:
                self.idle.append(connection)
        else:
            connection.close()
        self.slots.release()

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for connection in idle:
            connection.close()


KEEPALIVE_EXPIRY = 5.0  # seconds an idle connection is kept
_BACKEND = DeadlineBackend()


class DeadlineTransport(httpx.BaseTransport):
    """An httpx transport (HTTP/1.1, a :class:`_OriginPool` per origin) on
    :class:`DeadlineBackend`. A pool unused for ``KEEPALIVE_EXPIRY`` with nothing in flight is
    closed, so idle connections do not pile up across the hosts of a long run.

    Args:
        max_connections: connections open at once to one origin (requests beyond wait for one).
        ssl_context: TLS settings (default: httpx's, certifi roots and ``SSL_CERT_FILE``).
    """

    def __init__(self, *, max_connections: int, ssl_context: ssl.SSLContext | None = None):
        self._context = ssl_context or httpx.create_ssl_context()
        self._max_connections = max_connections
        self._lock = threading.Lock()
        # Keyed by the guard too: a connection opened where internal addresses were allowed
        # must never carry a request that may not reach them (another source's consent is not
        # this one's), so guarded requests only reuse connections that passed the guard.
        self._pools: dict[tuple[bool, bytes, bytes, int | None], _OriginPool] = {}
        self._swept = time.monotonic()

    def _take(self, guarded: bool, origin: httpcore.Origin) -> _OriginPool:
        """The origin's pool, its in-flight count raised; idle pools of other origins that
        expired are closed on the way (at most once per ``KEEPALIVE_EXPIRY``)."""
        now = time.monotonic()
        key = (guarded, origin.scheme, origin.host, origin.port)
        expired: list[_OriginPool] = []
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                pool = self._pools[key] = _OriginPool(
                    origin, max_connections=self._max_connections, ssl_context=self._context
                )
            pool.in_flight += 1
            pool.used = now
            if now - self._swept > KEEPALIVE_EXPIRY:
                self._swept = now
                for other, idle in list(self._pools.items()):
                    if not idle.in_flight and now - idle.used > KEEPALIVE_EXPIRY:
                        expired.append(self._pools.pop(other))
        for idle in expired:
            idle.close()
        return pool

    def _done(self, pool: _OriginPool) -> None:
        with self._lock:
            pool.in_flight -= 1
            pool.used = time.monotonic()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        url = request.url
        core_url = httpcore.URL(
            scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
        )
        core_request = httpcore.Request(
            method=request.method,
            url=core_url,
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        scheme = url.raw_scheme.decode("ascii")
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported protocol {scheme!r} in {url}")
        pool = self._take(_INTERNAL_OK.get() is False, core_url.origin)
        try:
            with _httpx_errors():
                response, give_back = pool.send(core_request)
        except BaseException:
            self._done(pool)
            raise
        assert isinstance(response.stream, Iterable)

        def done() -> None:
            give_back()
            self._done(pool)

        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream, done),
            extensions=response.extensions,
        )

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
