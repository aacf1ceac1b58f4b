"""Conditional HTTP fetching with httpx (RFC 9110 §13.1: If-None-Match, If-Modified-Since).

The fetcher returns a :class:`~ragsync.models.Response` for every HTTP status (deciding what a
status means is the sync policy's job) and raises :class:`~ragsync.errors.FetchError` only when
no usable response came back: network errors and timeouts (transient), redirect loops,
over-long redirect chains, redirects without a usable ``Location`` and bodies over
``max_body_bytes`` (terminal).

A body is whole or it is a failure. One shorter than its ``Content-Length`` or a chunked one
cut before its last chunk (h11 refuses both, RFC 9112 §6.3), and a compressed one whose stream
stops before its end (:mod:`ragsync.contentcoding`: a proxy may cut a gzip body and frame the
cut as whole) are transient failures, retried like a network error; nothing of them is
returned. A stream that is not valid for its coding, and a coding ragsync cannot decode (named,
with what it decodes; ``Accept-Encoding`` offers only those), are terminal. Only a body whose
end is the connection's close (no length, not chunked) cannot be told cut from whole.

``fetch.timeout`` bounds the network time of a whole :meth:`Fetcher.get`: all hops of a
redirect chain together, each with its connect, TLS handshake, request, headers and complete
body (see :mod:`ragsync.transport`). Time spent waiting at the caller's gate for a hop's turn
(per-host spacing, a ``Retry-After`` pause) is not counted: ``fetch.max_pause_wait`` bounds
that. With an injected transport (tests pass ``httpx.MockTransport``) only the gaps between body
pieces are checked.

Redirects (RFC 9110 §15.4) are followed here, not inside httpx, so that every hop can pass the
caller's politeness gate for its own host (``gate``) and the caller's scope (``scope``: the
source's hosts, robots.txt, internal addresses; README "Security"), and the caller learns what
kind of redirect it met (``Response.redirects``, and ``follow_temporary=False``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Protocol

from ragsync.config import FetchConfig
from ragsync.errors import FetchError
from ragsync.models import REDIRECT_STATUSES, TEMPORARY_REDIRECTS, Response
from ragsync.policy import is_file
from ragsync.resources import os_resource_error
from ragsync.urls import split_url

if TYPE_CHECKING:
    import httpx

    from ragsync.contentcoding import CodingError

# httpx (and under it httpcore, h2, rich) is imported by the first request, not with this
# module: a run with nothing due sends none and should not pay for it (README "Architecture").


class HopGate(Protocol):
    """What every hop of a request passes (:class:`~ragsync.politeness.PoliteFetcher` is one)."""

    def admit(self, url: str) -> AbstractContextManager[object]:
        """Held while the hop to ``url`` runs (the host's politeness: slots, spacing, pauses)."""
        ...

    def headers_arrived(self, url: str, status: int, headers: dict[str, str]) -> None:
        """Called, within :meth:`admit`, as soon as the hop's status and headers are in, before
        its body is read (a ``Retry-After`` should pause the host from then on)."""
        ...


class HopScope(Protocol):
    """Where a request may go (:class:`ragsync.scope.Scope` is one)."""

    def refuse(self, url: str) -> str | None:
        """Why ``url`` may not be requested, or None."""
        ...

    def private_ok(self, url: str) -> bool:
        """Whether a request to ``url`` may connect to an internal address."""
        ...


class OutOfScope(FetchError):
    """A URL of the request (the first, or a redirect hop) lies outside the caller's scope:
    nothing was sent to it."""

    def __init__(self, url: str, target: str, reason: str):
        self.target = target
        super().__init__(url, reason, transient=False)


class _Ungated:
    def admit(self, url: str) -> AbstractContextManager[object]:
        return nullcontext()

    def headers_arrived(self, url: str, status: int, headers: dict[str, str]) -> None:
        pass


_UNGATED = _Ungated()


def header_text(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Response headers as ``{lowercase name: value}``, each value the latin-1 text of its raw
    bytes: lossless, since a field value may hold obs-text bytes 0x80–0xFF (RFC 9110 §5.5), so
    a validator goes back byte for byte (:func:`header_bytes`). Repeated fields are joined
    with ", " (§5.3).

    Example::

        >>> header_text([(b"ETag", b'"\\xe9t\\xe9"'), (b"Vary", b"a"), (b"vary", b"b")])
        {'etag': '"été"', 'vary': 'a, b'}
    """
    headers: dict[str, str] = {}
    for name, value in raw:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1").strip(" \t")
        if not text:  # an empty field adds no element to the list (§5.6.1)
            headers.setdefault(key, "")
        elif headers.get(key):
            headers[key] = f"{headers[key]}, {text}"
        else:
            headers[key] = text
    return headers


def header_bytes(value: str) -> bytes:
    """The bytes of a stored header value (the inverse of :func:`header_text`).

    Values stored before header values were kept as latin-1 text were decoded from UTF-8 by
    httpx: one with a character past U+00FF goes back as UTF-8, its original bytes.
    """
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")


class _UnusableLocation(Exception):
    def __init__(self, status: int, reason: str):
        self.status = status
        super().__init__(reason)


def _refuse_unparseable_location(response: httpx.Response) -> None:
    """A response hook: httpx builds a redirect's next request even when it follows none, and
    calls a Location it cannot parse a (transient) protocol error; for ragsync it is the
    server's lasting mistake, refused like a missing Location."""
    import httpx

    if response.has_redirect_location:
        try:
            httpx.URL(response.headers["Location"])
        except httpx.InvalidURL as exc:
            raise _UnusableLocation(response.status_code, str(exc)) from exc


class Fetcher:
    """An httpx client with ragsync's limits and User-Agent.

    Args:
        config: the ``[fetch]`` table.
        transport: an httpx transport (tests pass ``httpx.MockTransport``); default a
            :class:`~ragsync.transport.DeadlineTransport`, the one that enforces
            ``fetch.timeout`` on every socket operation.
    """

    def __init__(self, config: FetchConfig, transport: httpx.BaseTransport | None = None):
        self.config = config
        self._transport = transport
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()

    @property
    def client(self) -> httpx.Client:
        """The httpx client, made by the first request."""
        client = self._client
        if client is None:
            with self._client_lock:
                if self._client is None:
                    import httpx

                    from ragsync.transport import DeadlineTransport

                    transport = self._transport or DeadlineTransport(
                        max_connections=self.config.concurrency
                    )
                    from ragsync.contentcoding import accept_encoding

                    self._client = httpx.Client(
                        headers={
                            "User-Agent": self.config.user_agent,
                            "Accept-Encoding": accept_encoding(),
                        },
                        timeout=self.config.timeout,
                        follow_redirects=False,
                        transport=transport,
                        event_hooks={"response": [_refuse_unparseable_location]},
                    )
                client = self._client
        return client

    def close(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
        elif self._transport is not None:  # as the client would have closed it
            self._transport.close()

    def get(
        self,
        url: str,
        *,
        etag: str | None = None,
        last_modified: str | None = None,
        follow_temporary: bool = True,
        gate: HopGate | None = None,
        scope: HopScope | None = None,
        pages_only: bool = False,
    ) -> Response:
        """GET ``url``, conditionally when validators are given, following redirects.

        Args:
            url: the URL to fetch.
            etag / last_modified: validators of the copy held (sent on every hop).
            follow_temporary: follow 302, 303 and 307; when False, such a response is returned
                itself (``status`` 302…, ``url`` the URL that answered it, ``location`` its
                target). 301 and 308 are always followed.
            gate: what every hop passes (see :class:`HopGate`); default: nothing.
            scope: where every hop may go; a hop it refuses is not requested, and a hop to an
                internal address it does not allow is not connected. Default: anywhere.
            pages_only: a page is fetched: a 200 with a file's content type (neither HTML nor
                text: an archive, a PDF) is returned without its body, never read.

        Returns:
            The final response; ``redirects`` lists the hops followed as
            ``(status, url that answered it)``, ``requested_url`` is ``url``.

        Raises:
            FetchError: no usable response (see the module docstring); a timeout names
                ``fetch.timeout``.
            OutOfScope: a hop lies outside ``scope`` (a :class:`FetchError`).
        """
        headers: dict[bytes, bytes] = {}
        # A stored validator that cannot be a field value (CR, LF, NUL) is not sent: the
        # request goes out unconditional instead of failing.
        if etag and _sendable(etag):
            headers[b"If-None-Match"] = header_bytes(etag)
        if last_modified and _sendable(last_modified):
            headers[b"If-Modified-Since"] = header_bytes(last_modified)
        from ragsync.transport import deadline, internal_addresses

        gate = gate or _UNGATED
        followed: list[tuple[int, str]] = []
        target = url
        budget = self.config.timeout  # network time of all hops; waits at the gate are not in it
        while True:
            refusal = scope.refuse(target) if scope is not None else None
            if refusal is not None:
                raise OutOfScope(url, target, refusal)
            guard = internal_addresses(allowed=scope.private_ok(target)) if scope else nullcontext()
            with gate.admit(target), guard:
                started = time.monotonic()
                with deadline(budget):
                    arrived = partial(gate.headers_arrived, target)
                    response = self._send(url, target, headers, arrived, pages_only)
                budget -= time.monotonic() - started
            status = response.status
            if status not in REDIRECT_STATUSES or (
                status in TEMPORARY_REDIRECTS and not follow_temporary
            ):
                return replace(response, requested_url=url, redirects=tuple(followed))
            followed.append((status, response.url))
            target = self._next(url, response, followed)

    def _next(self, url: str, response: Response, followed: list[tuple[int, str]]) -> str:
        """The URL a redirect response sends the request on to."""
        import httpx

        location = response.location
        try:
            target = str(httpx.URL(location)) if location else None
        except httpx.InvalidURL:
            target = None
        if target is None:
            reason = f"HTTP {response.status} from {response.url} without a usable Location"
            raise FetchError(url, reason, status=response.status, transient=False)
        try:
            split_url(target)  # the URL Standard's reading: credentials, a broken host
        except ValueError as exc:
            reason = f"HTTP {response.status} from {response.url} to an unusable URL: {exc}"
            raise FetchError(url, reason, status=response.status, transient=False) from None
        limit = self.config.max_redirects
        if len(followed) > limit or target in {hop_url for _, hop_url in followed}:
            raise FetchError(url, f"redirect loop or chain over {limit}", transient=False)
        return target

    def _send(
        self,
        url: str,
        target: str,
        headers: dict[bytes, bytes],
        arrived: Callable[[int, dict[str, str]], None] | None,
        pages_only: bool = False,
    ) -> Response:
        """One request, no redirect followed, within the deadline of :meth:`get`; ``arrived``
        gets the status and headers before the body is read (``pages_only``: see :meth:`get`)."""
        import httpx

        from ragsync.contentcoding import CodingError, decode
        from ragsync.transport import InternalAddressRefused

        limit = self.config.max_body_bytes
        timeout = f"timeout: whole request over fetch.timeout={self.config.timeout:g}s"
        where = "" if target == url else f" (redirected to {target})"
        raw = _Received(url, limit)
        try:
            left = _left()
            if left <= 0:
                raise FetchError(url, timeout + where, transient=True)
            with self.client.stream("GET", target, headers=headers, timeout=left) as response:
                head = Response(
                    url=str(response.url),
                    status=response.status_code,
                    headers=header_text(response.headers.raw),
                    body=b"",
                    requested_url=url,
                )
                if arrived is not None:
                    arrived(head.status, head.headers)
                if pages_only and is_file(head.status, head.content_type):
                    # A file is judged by its headers alone: a tarball or a PDF a page links
                    # to costs no download, and no max_body_bytes failure.
                    return head
                raw.started = True
                body = bytearray()
                try:
                    # Decoded here from the raw bytes, not by httpx (see
                    # ragsync.contentcoding); counting decoded bytes also stops bombs.
                    pieces = decode(raw.read(_raw(response)), head.headers.get("content-encoding"))
                    for piece in pieces:
                        body += piece
                        if len(body) > limit:
                            reason = f"body larger than max_body_bytes={limit}"
                            raise FetchError(url, reason, transient=False)
                        if _left() <= 0:  # what the transport cannot see (decoding, a mock)
                            raise FetchError(url, timeout + where, transient=True)
                except CodingError as exc:
                    reason = _refused_body(exc, raw.count, len(body))
                    raise FetchError(
                        url, reason + where, status=head.status, transient=exc.transient
                    ) from exc
                return replace(head, body=bytes(body))
        except _UnusableLocation as exc:
            reason = f"HTTP {exc.status} from {target} without a usable Location ({exc})"
            raise FetchError(url, reason, status=exc.status, transient=False) from exc
        except httpx.TimeoutException as exc:
            raise FetchError(
                url, f"{timeout}{where} ({type(exc).__name__})", transient=True
            ) from exc
        except httpx.DecodingError as exc:  # see _raw: httpx decoded an in-memory response
            raise FetchError(url, f"undecodable body: {exc}{where}", transient=False) from exc
        except (OSError, httpx.TransportError) as exc:
            # Out of file descriptors is no page's fault: the run stops, whether the socket's
            # error came bare or inside httpx's (README "Resource limits").
            if (found := os_resource_error(exc, where=f"fetching {url}")) is not None:
                raise found from exc
            if not isinstance(exc, httpx.TransportError):
                raise
            cut = f" after {raw.count} body bytes" if raw.started else ""
            raise FetchError(url, f"network error{cut}: {exc}{where}", transient=True) from exc
        except InternalAddressRefused as exc:
            raise FetchError(url, f"{exc}{where}", transient=False) from exc
        except (httpx.InvalidURL, UnicodeError) as exc:  # idna refuses a host, for one
            raise FetchError(url, f"invalid URL: {exc}{where}", transient=False) from exc


def _raw(response: httpx.Response) -> Iterable[bytes]:
    """The body's bytes as they came. A response an injected transport built in memory
    (``httpx.MockTransport``'s) was read, and decoded by httpx, when it was made; its stream
    still holds the raw bytes."""
    import httpx

    if not response.is_stream_consumed:
        return response.iter_raw()
    assert isinstance(response.stream, httpx.SyncByteStream)
    return response.stream


class _Received:
    """The raw (still coded) bytes of a body as they come: counted, and at most
    ``max_body_bytes`` of them (bytes a decoder ignores, after a gzip stream's end, count
    too)."""

    def __init__(self, url: str, limit: int):
        self.url = url
        self.limit = limit
        self.count = 0
        self.started = False  # the headers are in: what fails now fails within the body

    def read(self, pieces: Iterable[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            self.count += len(piece)
            yield piece  # first: a body without a coding meets the decoded limit (and its reason)
            if self.count > self.limit:
                reason = f"body larger than max_body_bytes={self.limit} as it came (coded)"
                raise FetchError(self.url, reason, transient=False)


def _refused_body(exc: CodingError, came: int, decoded: int) -> str:
    """Why a body is refused: its coding, what is wrong, how many bytes came."""
    from ragsync.contentcoding import UnsupportedCoding

    if isinstance(exc, UnsupportedCoding):
        return f"{exc.detail}; the body is not used ({came} bytes read)"
    what = "body cut short" if exc.transient else "undecodable body"
    return f"{what}: {exc.detail} ({came} bytes came, {decoded} decoded)"


def _sendable(value: str) -> bool:
    """Whether ``value`` can go out as a field value: no CR, LF or NUL (RFC 9110 §5.5) and no
    white space at either end. Other control bytes go back as they came, as servers sent them
    (what h11 accepts too)."""
    return value == value.strip(" \t") and not any(char in value for char in "\r\n\0")


def _left() -> float:
    """Seconds left of the deadline :meth:`Fetcher.get` set."""
    from ragsync.transport import time_left

    left = time_left()
    assert left is not None, "only within Fetcher.get's deadline"
    return left
