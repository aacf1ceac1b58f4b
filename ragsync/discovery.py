"""The context a source connector discovers through (:class:`~ragsync.protocols.DiscoveryContext`).

Connectors never fetch page bodies; they read discovery documents (sitemaps, feeds, API pages)
through :meth:`DiscoveryContext.get_parsed`, which revalidates each document conditionally and
reuses the parse of an unchanged one (a 304 costs no parsing).

A listing is *complete* unless the connector said otherwise: whatever it should have listed but
could not read (a sitemap answering 503, a truncated document, a cap reached, an unreadable
``urls_file``) goes to :meth:`DiscoveryContext.incomplete`, and the engine reads
:attr:`DiscoveryContext.incomplete_reasons` after discovery. Only a complete listing is evidence
that a page is no longer listed (README, "Deletion safety").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ragsync.errors import FetchError, ResourceError
from ragsync.fetch import HopScope
from ragsync.models import Response, SourceOutcome
from ragsync.politeness import HostPaused, PoliteFetcher
from ragsync.state import StateDB

log = logging.getLogger("ragsync")
T = TypeVar("T")


class DiscoveryContext:
    """What a connector may use: polite HTTP, a parse cache, the source's checkpoint.

    Args:
        fetcher: the run's polite fetcher.
        state: the state DB (discovery cache, checkpoints, poll log).
        source_id: the source being discovered.
        base_dir: the config file's folder (for ``urls_file`` and the like).
        outcome: the source's part of the run report (counters, warnings).
        now: returns the current time as an ISO string.
        scope: where the source's requests may go (every discovery request and its redirect
            hops are checked against it; README "Security").
    """

    def __init__(
        self,
        fetcher: PoliteFetcher,
        state: StateDB,
        source_id: str,
        base_dir: Path,
        outcome: SourceOutcome,
        now: Callable[[], str],
        scope: HopScope | None = None,
    ):
        self._fetcher = fetcher
        self.state = state
        self.source_id = source_id
        self.base_dir = base_dir
        self.outcome = outcome
        self.now = now
        self.scope = scope
        self._incomplete: list[str] = []

    def get(self, url: str) -> Response:
        """GET a discovery document. Raises ``FetchError`` (a paused host is transient)."""
        self.outcome.counters.requests_sent += 1
        try:
            return self._fetcher.get(url, scope=self.scope)
        except HostPaused as paused:
            raise FetchError(url, str(paused), transient=True) from paused

    def get_parsed_or_warn(self, url: str, parse: Callable[[bytes], T], what: str) -> T | None:
        """:meth:`get_parsed`, or None when the document cannot be fetched (network error,
        timeout, any status but 200/304) or parsed: the listing is then incomplete, with the
        reason ``"{what} {url}: {why}"`` (discovery goes on with what it has)."""
        return self.get_parsed_response_or_warn(url, lambda response: parse(response.body), what)

    def get_parsed_response_or_warn(
        self, url: str, parse: Callable[[Response], T], what: str
    ) -> T | None:
        """:meth:`get_parsed_or_warn` for a ``parse`` that needs the response, not only its
        body: its final URL or a header (a feed's base URI)."""
        try:
            return self.get_parsed_response(url, parse)
        except FetchError as exc:
            self.incomplete(f"{what} {url}: {exc.reason}")
        except ValueError as exc:
            self.incomplete(f"{what} {url}: {exc}")
        return None

    def get_parsed(
        self, url: str, parse: Callable[[bytes], T], *, scope: HopScope | None = None
    ) -> T:
        """``parse(body)`` of the document at ``url``: :meth:`get_parsed_response` of its body."""
        return self.get_parsed_response(url, lambda response: parse(response.body), scope=scope)

    def get_parsed_response(
        self, url: str, parse: Callable[[Response], T], *, scope: HopScope | None = None
    ) -> T:
        """``parse(response)`` of the document at ``url``, revalidated conditionally, within
        ``scope`` (default: the source's).

        ``parse`` must return JSON-serialisable data: it is cached with the validators, and a
        304 returns the cached parse without parsing anything.

        Raises:
            FetchError: the document could not be fetched (or answered neither 200 nor 304).
            ValueError: ``parse`` refused the body, or failed on it: any exception it raises
                (lxml, zlib, a decode error, a ``KeyError`` on odd JSON) is wrapped, so that
                one hostile document is one failed document, never a failed run.
        """
        cached = self.state.discovery.get_entry(url)
        etag = cached["etag"] if cached else None
        last_modified = cached["last_modified"] if cached else None
        self.outcome.counters.requests_sent += 1
        if etag or last_modified:
            self.outcome.counters.conditional_requests_sent += 1
        try:
            response = self._fetcher.get(
                url, etag=etag, last_modified=last_modified, scope=scope or self.scope
            )
        except HostPaused as paused:
            raise FetchError(url, str(paused), transient=True) from paused
        if response.status == 304 and cached:
            self.outcome.counters.discovery_not_modified += 1
            return json.loads(cached["parsed"])  # type: ignore[no-any-return]
        if response.status != 200:
            raise FetchError.for_status(url, response.status)
        try:
            parsed = parse(response)
        except (ValueError, ResourceError):
            raise
        except Exception as exc:
            raise ValueError(f"unparseable ({type(exc).__name__}: {exc})") from exc
        self.outcome.counters.discovery_parsed += 1
        self.state.discovery.put_entry(
            {
                "url": url,
                "source_id": self.source_id,
                "etag": response.etag,
                "last_modified": response.last_modified,
                "parsed": json.dumps(parsed),
                "fetched_at": self.now(),
            }
        )
        return parsed

    def poll_started(self, window_start: str, window_end: str) -> int:
        """Log the start of a poll of ``[window_start, window_end]``; returns its id."""
        return self.state.discovery.add_poll(
            {
                "source_id": self.source_id,
                "window_start": window_start,
                "window_end": window_end,
                "started_at": self.now(),
                "outcome": "running",
            }
        )

    def poll_finished(
        self,
        poll_id: int,
        *,
        outcome: str,
        pages: int,
        records: int,
        truncated: int,
        error: str | None = None,
    ) -> None:
        """Log how a poll ended (``ok`` only once all its pages are committed)."""
        self.state.discovery.update_poll(
            poll_id,
            {
                "finished_at": self.now(),
                "outcome": outcome,
                "pages": pages,
                "records": records,
                "truncated": truncated,
                "error": error,
            },
        )

    def checkpoint(self) -> Any:
        """The source's last committed continuation (None before the first)."""
        return self.state.discovery.get_checkpoint(self.source_id)

    def warn(self, message: str) -> None:
        """Record a problem of discovery in the run report (the source is then not ok) that
        leaves the listing complete (a listed line that is not a URL, say)."""
        log.warning(message)
        self.outcome.ok = False
        self.outcome.errors.append(message)

    def incomplete(self, reason: str, *, chosen: bool = False) -> None:
        """Record that the listing misses what it should have listed (a document that could not
        be read, a cap reached), naming the URL and why; also a warning, like :meth:`warn`.
        Pages absent from an incomplete listing are not evidence of anything. ``chosen``: a
        bound the source's configuration sets (a crawl's ``max_pages`` or ``max_depth``) was
        reached: named all the same, but no warning, and the source stays ok."""
        self._incomplete.append(reason)
        if chosen:
            log.info(reason)
        else:
            self.warn(reason)

    @property
    def incomplete_reasons(self) -> list[str]:
        """Why this listing is incomplete, in order (empty: it is complete)."""
        return list(self._incomplete)
