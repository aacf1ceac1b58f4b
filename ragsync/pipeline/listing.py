"""Listing a source: discover, then canonicalise, scope, alias, dedupe and order; the due filter;
the known pages a listing left out.

:class:`SourceListing` keeps what one source's listing has seen during a pass, so that a page
comes up once however often it is listed, and reads once when each known page is due.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from datetime import timedelta

from ragsync.clock import iso
from ragsync.config import SourceConfig
from ragsync.discovery import DiscoveryContext
from ragsync.errors import ResourceError
from ragsync.identity import api_record_key, canonical_record_key
from ragsync.models import AttemptState, Candidate, Checkpoint
from ragsync.pipeline.context import Engine
from ragsync.scope import Scope
from ragsync.urls import canonical_url, clean_url, in_scope

log = logging.getLogger("ragsync")

Listed = tuple[str, Candidate]
"""A listed page: ``(record key, candidate)``."""
WorkItem = tuple[str, Candidate, bool]
"""A page to check: ``(record key, candidate, unlisted)``."""
REFUSALS_NAMED = 20  # out-of-scope URLs named in the run report per listing; the rest counted
DueInfo = dict[str, tuple[str | None, str | None]]
"""``{record key: (next_check_at, lastmod checked at)}`` of a source's known pages."""


def page_due(item: WorkItem, info: DueInfo, now: str) -> bool:
    """A page is due when new, when its adaptive revisit time has come, or when the listing's
    lastmod moved since it was last checked (a hint that may bring a check forward, never one
    that skips it).

        >>> page = ("s:https://a.example/x", Candidate("https://a.example/x", "2026-02-01"), False)
        >>> page_due(page, {}, "2026-03-01")
        True
        >>> page_due(page, {page[0]: ("2026-04-01", "2026-01-01")}, "2026-03-01")
        True
        >>> page_due(page, {page[0]: ("2026-04-01", "2026-02-01")}, "2026-03-01")
        False
    """
    key, candidate, _ = item
    if key not in info:
        return True
    next_check_at, lastmod_hint = info[key]
    if next_check_at is None or next_check_at <= now:
        return True
    return lastmod_moved(candidate, lastmod_hint)


def lastmod_moved(candidate: Candidate, checked_at: str | None) -> bool:
    """Whether the listing's lastmod for ``candidate`` is later than the one it was last
    checked at (``checked_at``; None: it had none)."""
    return bool(candidate.lastmod and candidate.lastmod > (checked_at or ""))


def guarded(
    found: Iterator[Candidate | Checkpoint], ctx: DiscoveryContext, source: SourceConfig
) -> Iterator[Candidate | Checkpoint]:
    """The connector's listing, bounded by ``max_urls``; an exception inside the connector
    (hostile input, a bug) ends this source's listing as incomplete instead of the run, but a
    :class:`~ragsync.errors.ResourceError` (the state DB's server went away, its device is
    full) ends the run."""
    listed = 0
    try:
        for item in found:
            if not isinstance(item, Checkpoint):
                listed += 1
                if listed > source.max_urls:
                    ctx.incomplete(f"listing cut at max_urls={source.max_urls} URLs")
                    return
            yield item
    except ResourceError:
        raise
    except Exception as exc:
        log.debug("discovery of source %s failed", source.id, exc_info=True)
        ctx.incomplete(f"discovery failed: {type(exc).__name__}: {exc}")
    finally:
        close = getattr(found, "close", None)
        if close is not None:  # a connector reports what it skipped when it is closed
            close()


class SourceListing:
    """One source's listing during one pass.

    Args:
        engine: the syncer's parts.
        source: the source.
        discovery: its discovery context (warnings, completeness).
        info: when each known page is due (empty for pages already found due: workers'
            claims).
        scope: the source's scope: a listed URL outside it is a recorded skip, never a request
            (a sitemap may only list URLs of its own host, unless the source allows more).
    """

    def __init__(
        self,
        engine: Engine,
        source: SourceConfig,
        discovery: DiscoveryContext,
        info: DueInfo,
        *,
        scope: Scope,
    ):
        self.engine = engine
        self.source = source
        self.discovery = discovery
        self.info = info
        self.scope = scope
        # Pages that came up in this pass: never twice (pages committed during the run are
        # absent from ``info``).
        self.seen: set[str] = set()
        self.reverifying: set[str] = set()  # aliases of a crawl level, asked once admitted
        self.failing: set[str] = set()  # pages held back until the retry of their failure

    def batches(
        self, found: Iterator[Candidate | Checkpoint]
    ) -> Iterator[tuple[list[Listed], Checkpoint | None]]:
        """Batches of new candidates, each closed by the checkpoint that follows it."""
        batch: list[Candidate] = []
        for item in found:
            if isinstance(item, Checkpoint):
                yield self.candidates(batch), item
                batch = []
            else:
                batch.append(item)
        yield self.candidates(batch), None

    def candidates(self, found: Iterable[Candidate], *, in_order: bool = False) -> list[Listed]:
        """Canonical, in-scope, de-duplicated candidates; newest ``lastmod`` first, or in the
        order found (``in_order``: a crawl's level, in page order, so that ``max_pages`` takes
        the same pages on every pass rather than new ones first).

        A URL known to redirect (an alias) stands for its target record, so a renamed page is
        requested once, at its new URL — until the alias is due for re-verification
        (``max_interval`` after it was last confirmed): then the URL itself is requested, and
        if it serves its own page again its record comes back.
        """
        source, state, seen = self.source, self.engine.state, self.seen
        aliases = state.aliases.verified(source.id)
        stale = iso(self.engine.clock() - timedelta(seconds=source.max_interval))
        reverify: list[str] = []
        unique: dict[str, Candidate] = {}
        for candidate in found:
            if candidate.record_id is not None:  # an API record: the provider's id is the key
                key = api_record_key(source.id, candidate.record_id)
                fetched = candidate.content is None and not candidate.deleted  # its url_field
                refusal = self.scope.refuse_page(candidate.url) if fetched else None
                if refusal is not None:
                    self.refused(refusal, key)
                    continue
                if key not in seen:
                    unique[key] = candidate
                    seen.add(key)
                continue
            try:
                url = canonical_url(candidate.url, source.strip_params)
            except ValueError as exc:
                self.discovery.warn(str(exc))
                continue
            key = canonical_record_key(source.id, url)
            refusal = self.scope.refuse(url)  # another host: named, whatever the patterns say
            if refusal is not None:
                self.refused(refusal, key)
                continue
            if not in_scope(url, source.include, source.exclude):
                continue  # the source's own filter: not wanted, not a refusal
            published = clean_url(candidate.url).partition("#")[0]
            if key in aliases:
                target, verified_at = aliases[key]
                if verified_at > stale:
                    key = target
                    url = published = key.split(":", 1)[1]
                elif key not in seen:
                    reverify.append(key)
                    self.info.pop(key, None)  # due now, whatever its tombstone's schedule says
            if key in seen:
                continue
            seen.add(key)
            unique[key] = Candidate(
                url=url,
                lastmod=candidate.lastmod,
                priority=candidate.priority,
                published=published if published != url else None,
            )
        if in_order:  # a crawl's level: only the pages its caps admit are requested
            self.reverifying.update(reverify)
            return list(unique.items())
        if reverify:  # requested in this pass: confirmed again, or restored
            state.aliases.mark_verified(reverify, self.engine.now())

        # Work order: new pages and pages whose lastmod moved first (lastmod is a hint for
        # ordering only: every listed page is revalidated all the same), then newest lastmod.
        def order(item: Listed) -> tuple[float, bool, str]:
            key, candidate = item
            moved = key not in self.info or (candidate.lastmod or "") > (self.info[key][1] or "")
            return candidate.priority, moved, candidate.lastmod or ""

        return sorted(unique.items(), key=order, reverse=True)

    def admitted(self, level: Sequence[Listed]) -> None:
        """The pages of a crawl level its caps admitted: an alias among them is asked again
        in this pass (re-verified)."""
        keys = [key for key, _ in level if key in self.reverifying]
        if keys:
            self.engine.state.aliases.mark_verified(keys, self.engine.now())
            self.reverifying.difference_update(keys)

    def refused(self, reason: str, key: str) -> None:
        """Record a listed URL outside the scope: counted, and named in the run report (the
        first few of each listing). It is still *listed*: a page indexed under it before is
        kept, never taken for gone (README "Security")."""
        self.seen.add(key)
        counters = self.discovery.outcome.counters
        counters.out_of_scope += 1
        if counters.out_of_scope <= REFUSALS_NAMED:
            self.discovery.warn(f"not requested: {reason}")
        elif counters.out_of_scope == REFUSALS_NAMED + 1:
            self.discovery.warn("not requested: more listed URLs outside the source's hosts")

    def unlisted(self) -> list[Listed]:
        """Known pages the source no longer lists: verified by fetch, never dropped unseen."""
        return [
            (key, Candidate(url=url))
            for key, url in self.engine.state.documents.in_force(self.source.id).items()
            if key not in self.seen
        ]

    def due(self, work: list[WorkItem]) -> tuple[list[WorkItem], int, int]:
        """The items due now: ``(due, held back, not due)``. Held back: a retry not yet due,
        the dead letter, needs attention; a page whose retry is due is due whatever its
        revisit time says; a URL never indexed that answered 404/410 waits for its next check
        like a page, and like a page is due at once when the listing's lastmod moved."""
        now = self.engine.now()
        held, retry, later = self.engine.state.attempts.retry_gates(self.source.id, now)
        self.failing.update(key for key, _, _ in work if held.get(key) == AttemptState.RETRYING)
        free = [item for item in work if item[0] not in held]
        due = [
            item
            for item in free
            if item[0] in retry
            or (
                later[item[0]] is not None and lastmod_moved(item[1], later[item[0]])
                if item[0] in later
                else page_due(item, self.info, now)
            )
        ]
        return due, len(work) - len(free), len(free) - len(due)
