"""One source during one pass: its pages found due, checked in windows, and committed.

:class:`SourceSync` has one method per kind of work, each returning the source's part of the
run report:

- :meth:`~SourceSync.listing`: read the listing (or, for workers, queue its due pages);
- :meth:`~SourceSync.known`: the known pages whose own revisit time came (listing not due);
- :meth:`~SourceSync.targets`: URLs a webhook or `ragsync resync` asked for;
- :meth:`~SourceSync.claimed`: pages a worker took from the shared work queue.

A window of pages is fetched, extracted and chunked on a thread pool, then embedded and
committed on the calling thread (README "Architecture").
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence, Set
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeGuard

from ragsync.config import SourceConfig
from ragsync.discovery import DiscoveryContext
from ragsync.identity import canonical_record_key
from ragsync.models import Candidate, Checkpoint, DocumentStatus, SourceOutcome, work_item
from ragsync.pipeline.check import PageChecker
from ragsync.pipeline.commit import commit_outcomes
from ragsync.pipeline.context import Pass
from ragsync.pipeline.crawl import Crawl
from ragsync.pipeline.duplicates import took_page
from ragsync.pipeline.listing import SourceListing, WorkItem, guarded, lastmod_moved
from ragsync.pipeline.outages import Watch
from ragsync.pipeline.outcomes import Changed, Document, Moving, NotModified, Outcome, Page
from ragsync.policy import DISTRUST_AFTER, validators_kept
from ragsync.protocols import Crawler
from ragsync.registry import source_class
from ragsync.scope import scope_of
from ragsync.urls import host_of

log = logging.getLogger("ragsync")

Found = Iterator[Candidate | Checkpoint]
"""What a connector's ``discover`` yields."""
WINDOW_PAGES = 64  # pages fetched, then embedded and committed together


def live(document: Document | None) -> TypeGuard[Document]:
    """Whether a stored record holds content (active or suspected missing)."""
    return document is not None and document["status"] != DocumentStatus.TOMBSTONED


def refetch_due(
    document: Document | None,
    validators: tuple[str | None, str | None] | None,
    *,
    wanted: bool,
    now: str,
) -> bool:
    """Whether a page that has validators to send is asked in full without them: ``wanted``
    (asked for, or its host's validators are distrusted), or its record's refetch time came
    (README "Validators that lie"). A page without validators is asked in full anyway.

        >>> row = {"status": "active", "etag": '"v1"', "last_modified": None,
        ...        "refetch_at": "2026-12-07T00:00:00.000000Z"}
        >>> refetch_due(row, None, wanted=False, now="2026-12-01T00:00:00.000000Z")
        False
        >>> refetch_due(row, None, wanted=False, now="2026-12-08T00:00:00.000000Z")
        True
        >>> refetch_due({**row, "etag": None}, None, wanted=True, now="2026-12-08T00:00:00Z")
        False
    """
    if live(document):
        if not (document["etag"] or document["last_modified"]):
            return False
        refetch_at = document.get("refetch_at")
        return wanted or (refetch_at is not None and refetch_at <= now)
    return wanted and validators is not None and any(validators)


def disputed(outcome: Outcome) -> bool:
    """Whether a page answered 304 to its validators while the listing's lastmod for it moved
    since it was last checked: the listing says it changed, its validators say it did not."""
    page, document = outcome.page, outcome.page.document
    return (
        isinstance(outcome, NotModified)
        and outcome.exchange.conditional
        and outcome.moved_to is None
        and page.asked is None
        and live(document)
        and document["lastmod_hint"] is not None
        and lastmod_moved(page.candidate, document["lastmod_hint"])
    )


def kept_validators(outcome: Outcome) -> bool | None:
    """For a page whose content changed, whether its answer still carries the validators its
    record was stored with (see :func:`ragsync.policy.validators_kept`); None otherwise."""
    document, response = outcome.page.document, outcome.exchange.response
    if not isinstance(outcome, Changed) or outcome.moved_to or response is None:
        return None
    if not live(document):
        return None
    stored = (document["etag"], document["last_modified"])
    return validators_kept(stored, (response.etag, response.last_modified))


class SourceSync:
    """Checks one source's pages during a pass.

    Args:
        run: the pass (engine, fetcher, run report).
        source: the source.
        revalidate_all: also check pages held back (retry not yet due, dead letter, needs
            attention) and pages not due.
    """

    def __init__(self, run: Pass, source: SourceConfig, *, revalidate_all: bool = False):
        engine = run.engine
        self.run, self.engine, self.source = run, engine, source
        self.revalidate_all = revalidate_all
        self.report = SourceOutcome()
        self.connector = source_class(source.kind)(source.options)
        self.scope = scope_of(source, engine.config.base_dir)
        self.discovery = DiscoveryContext(
            run.fetcher,
            engine.state,
            source.id,
            Path(engine.config.base_dir),
            self.report,
            engine.now,
            scope=self.scope,
        )
        # What a page missing from the listing means (see ragsync.protocols.Source.listing).
        self.listing_kind = getattr(self.connector, "listing", "complete")
        self.prunable = source.prune_unlisted and self.listing_kind == "complete"
        # A crawl source's listing follows its pages' links (README "Discovery").
        self.crawl: Crawl | None = None
        if isinstance(self.connector, Crawler):
            self.crawl = Crawl(engine, source, self.connector, self.scope, self.discovery)
        self.checker = PageChecker(
            engine,
            source,
            run.fetcher,
            self.discovery,
            self.scope,
            follow_links=self.crawl is not None,
        )
        self.window = max(WINDOW_PAGES, engine.config.fetch.concurrency * 2)
        self.fresh: set[str] = set()  # records created or restored in this pass
        self.watch = Watch(engine, source, self.discovery, self.report, fresh=self.fresh)

    def _listed(self, *, due_info: bool = True) -> SourceListing:
        # Read once per source: when each known page is due and the lastmod it was checked at.
        info = self.engine.state.documents.due_hints(self.source.id) if due_info else {}
        return SourceListing(self.engine, self.source, self.discovery, info, scope=self.scope)

    # -- the kinds of work ----------------------------------------------------------------

    def listing(self, *, queue: bool = False) -> SourceOutcome:
        """Read the source's listing and check its due pages (with ``queue``, put them on the
        shared work queue instead), then the known pages a complete listing left out."""
        source, counters = self.source, self.report.counters
        self.watch.listing_pass(crawl=self.crawl is not None)
        listed = self._listed()
        # The pages known before the listing: it may commit new ones (README "Deletion safety")
        known = self.engine.state.documents.in_force(source.id) if self.prunable else {}
        found = guarded(self.connector.discover(self.discovery), self.discovery, source)
        with self._pool() as pool:
            # Only a complete listing is evidence that a page it left out is gone. After an
            # incomplete one, the pages it did not list are checked on their own schedule, as
            # any page, and keep their state (README "Deletion safety").
            if self.crawl is not None:
                self.crawl_levels(pool, listed, found, queue=queue)
                distrusted = self.judge_listing(listed, known)
            else:
                distrusted = self.batches(pool, listed, found, queue=queue, known=known)
            self.report.incomplete = list(self.discovery.incomplete_reasons)
            if self.report.incomplete:
                counters.listings_incomplete += 1
            if self.listing_kind == "changes":
                return self.report
            complete = not self.report.incomplete
            if complete:  # a broken link no longer listed is no longer worth naming
                self.engine.state.attempts.drop_missing(source.id, listed.seen)
            # A page the source's scope no longer has goes all the same: that is the
            # configuration's decision, not the distrusted listing's evidence.
            work = [
                (key, cand, complete or (distrusted and self.out_of_scope(cand.url)))
                for key, cand in listed.unlisted()
            ]
            self.check(pool, listed, work, queue=queue)
        return self.report

    def judge_listing(self, listed: SourceListing, known: dict[str, str]) -> bool:
        """Whether the listing, read whole and complete so far, is taken as broken
        (:meth:`distrust`)."""
        return (
            bool(known) and not self.discovery.incomplete_reasons and self.distrust(listed, known)
        )

    def distrust(self, listed: SourceListing, known: dict[str, str]) -> bool:
        """Whether a complete listing leaves out more than ``max_unlisted_share`` of the pages
        in scope known before it (an empty sitemap, a home page without links: a site rarely
        drops most of its pages at once); it is then incomplete (README "Deletion safety")."""
        in_scope = [key for key, url in known.items() if not self.out_of_scope(url)]
        left_out = [key for key in in_scope if key not in listed.seen]
        share = self.source.max_unlisted_share
        if len(left_out) <= len(in_scope) * share:
            return False
        self.discovery.incomplete(
            f"the listing leaves out {len(left_out)} of the {len(in_scope)} pages known "
            f"(more than max_unlisted_share = {share:g}): taken as broken, so leaving it out "
            "is no evidence that a page is gone; each is still checked on its own schedule, "
            "and one that answers 404 goes by the missing-page rule"
        )
        return True

    def out_of_scope(self, url: str) -> bool:
        return self.scope.refuse_page(url) is not None

    def batches(
        self,
        pool: ThreadPoolExecutor,
        listed: SourceListing,
        found: Found,
        *,
        queue: bool,
        known: dict[str, str],
    ) -> bool:
        """Check the listed pages in batches, each closed by the checkpoint after it; returns
        whether the listing is taken as broken (:meth:`distrust`), judged once it is read
        whole, before its last batch is checked: no page of a pass whose listing is
        incomplete is retired as a copy (README "Deletion safety", outage pages)."""
        distrusted = False
        for batch, checkpoint in listed.batches(found):
            if checkpoint is None:  # the listing's end: what it left out is known
                distrusted = self.judge_listing(listed, known)
            self.report.counters.candidates_discovered += len(batch)
            work = [(key, cand, False) for key, cand in batch]
            self.check(pool, listed, work, queue=queue)
            if checkpoint is not None:  # only now: everything it covers is committed
                self.engine.state.discovery.put_checkpoint(
                    self.source.id, checkpoint.value, self.engine.now()
                )
        return distrusted

    def crawl_levels(
        self, pool: ThreadPoolExecutor, listed: SourceListing, found: Found, *, queue: bool
    ) -> None:
        """Check a crawl source's pages level by level: the start pages, then the links of each
        level's pages not seen yet, until none are left or a cap is reached."""
        assert self.crawl is not None
        self.crawl.queue = queue
        starts = (item for item in found if isinstance(item, Candidate))
        level = listed.candidates(starts, in_order=True)
        while level := self.crawl.admit(level, listed.seen):
            listed.admitted(level)
            self.report.counters.candidates_discovered += len(level)
            self.check(pool, listed, [(key, cand, False) for key, cand in level], queue=queue)
            links = self.crawl.next_level(level, failing=listed.failing)
            level = listed.candidates(links, in_order=True)

    def known(self, due: Sequence[tuple[str, str]]) -> SourceOutcome:
        """Check known pages ``(doc key, URL)`` whose own revisit (or retry) time came."""
        # Found due by the schedule already: reading every page's revisit time would cost a
        # run the size of the state, not of the due pages.
        listed = self._listed(due_info=False)
        with self._pool() as pool:
            self.check(pool, listed, [(key, Candidate(url=url), False) for key, url in due])
        return self.report

    def targets(self, urls: Sequence[str], *, refetch: Sequence[str] = ()) -> SourceOutcome:
        """Check these URLs (targeted re-sync), as the listing would have proposed them; those
        of ``refetch`` are asked in full, whatever their validators say."""
        listed = self._listed()
        in_full = listed.candidates([Candidate(url=url) for url in refetch])
        found = in_full + listed.candidates([Candidate(url=url) for url in urls])
        work = [(key, cand, False) for key, cand in found]
        with self._pool() as pool:
            self.check(pool, listed, work, refetch={key for key, _ in in_full})
        return self.report

    def claimed(self, items: Sequence[WorkItem]) -> SourceOutcome:
        """Check pages claimed from the work queue (already found due), without discovery."""
        listed = self._listed(due_info=False)
        with self._pool() as pool:
            self.check(pool, listed, list(items), due_already=True)
        return self.report

    # -- checking -------------------------------------------------------------------------

    @contextlib.contextmanager
    def _pool(self) -> Iterator[ThreadPoolExecutor]:
        """The fetch threads; an error that ends the pass (a ResourceError) leaves the pages
        not started yet unstarted."""
        pool = ThreadPoolExecutor(max_workers=self.engine.config.fetch.concurrency)
        try:
            yield pool
        finally:
            pool.shutdown(cancel_futures=True)  # after a window, none is left to cancel

    def check(
        self,
        pool: ThreadPoolExecutor,
        listed: SourceListing,
        work: list[WorkItem],
        *,
        due_already: bool = False,
        queue: bool = False,
        refetch: Set[str] = frozenset(),
    ) -> None:
        """Check (or, with ``queue``, put on the work queue) the due ones of ``work``, a window
        at a time: fetched in ``pool``, then committed. ``listed`` is the listing the work
        came from: what it has seen grows by the pages found moved. The pages of ``refetch``
        (record keys) are asked in full.

        A 304 the listing disputes (its lastmod for the page moved since the page was last
        checked) is settled at once: the page is asked again, in full (README "Validators that
        lie")."""
        engine, source, counters = self.engine, self.source, self.report.counters
        if not self.revalidate_all and not due_already:
            work, held_back, not_due = listed.due(work)
            counters.held_back += held_back
            counters.not_due += not_due
        if queue:
            engine.state.work.add(
                source.id,
                [work_item(key, cand, unlisted=unlisted) for key, cand, unlisted in work],
                engine.now(),
            )
            counters.pages_queued += len(work)
            return
        for start in range(0, len(work), self.window):
            part = work[start : start + self.window]
            checked = self.check_window(pool, listed, part, refetch=refetch)
            disputes = {outcome.page.doc_key for outcome in checked if disputed(outcome)}
            if disputes:
                counters.validator_disagreements += len(disputes)
                again = [item for item in part if item[0] in disputes]
                self.settle(self.check_window(pool, listed, again, refetch=disputes))
            engine.progress.pages(source.id, start + len(part), len(work))

    def check_window(
        self,
        pool: ThreadPoolExecutor,
        listed: SourceListing,
        part: list[WorkItem],
        *,
        refetch: Set[str],
    ) -> list[Outcome]:
        """Check one window of pages in ``pool`` and commit it; returns the outcomes as checked
        (before moves are resolved). A page is asked in full when it is one of ``refetch``,
        when the pass asks every page so (`run --refetch`), when its host's validators are
        distrusted, or when its refetch time came."""
        engine, source, counters = self.engine, self.source, self.report.counters
        keys = [key for key, _, _ in part]
        documents = engine.state.documents.get_many(keys)
        validators: dict[str, tuple[str | None, str | None]] = {}
        # An alias asked again: conditionally when it can be (README "Identity").
        asked = engine.state.aliases.asked_again(keys)
        if self.crawl is not None:
            documents, validators = self.crawl.prepare(keys, documents)
            asked = self.crawl.conditional(asked)
        watched = engine.state.hosts.watched()  # {host: its validators distrusted}
        now = engine.now()
        batch = []
        for key, candidate, unlisted in part:
            alias, document = asked.get(key), documents.get(key)
            held = (alias.etag, alias.last_modified) if alias else validators.get(key)
            host = host_of(candidate.published or candidate.url)
            # A page held back is asked in full: a 304 would forget what it served.
            wanted = (
                self.run.refetch
                or key in refetch
                or watched.get(host, False)
                or key in self.watch.held
            )
            in_full = refetch_due(document, held, wanted=wanted, now=now)
            batch.append(
                Page(
                    key,
                    candidate.url,
                    candidate,
                    document,
                    unlisted=unlisted,
                    prunable=unlisted and self.prunable,
                    validators=None if in_full else held,
                    asked=alias,
                    refetch=in_full,
                )
            )
        # Outage pages are judged before a crawl stores the links read: a held page's stored
        # links stand.
        suspect = self.crawl.drops_links if self.crawl is not None else None
        checked = self.watch.judge(list(pool.map(self.checker.check, batch)), suspect=suspect)
        if self.crawl is not None:
            checked = self.crawl.store(checked)
        counters.refetches += sum(o.page.refetch and o.exchange.requested for o in checked)
        for host, (until, reason) in self.run.fetcher.take_new_pauses().items():
            # At least: a longer pause another worker set meanwhile stands.
            engine.state.hosts.pause_at_least(host, until, reason, engine.now())
        result = self.run.result
        resolved = commit_outcomes(
            engine,
            source,
            checked,
            self.report,
            result.run_id,
            checked_since=result.started_at,
            fresh=self.fresh,
            watch=self.watch,
        )
        # A listed URL that moved lists its target: not to be verified as unlisted.
        for item in resolved:
            if took_page(item):
                self.fresh.add(item.page.doc_key)
            if item.page.unlisted:
                continue
            if item.moved_from is not None:
                listed.seen.add(item.page.doc_key)
            elif isinstance(item, Moving) and item.moved_to:
                listed.seen.add(canonical_record_key(source.id, item.moved_to))
        # A page that changed with new validators shows its host's validators work.
        engine.state.hosts.shown_right(
            host
            for outcome in checked
            if kept_validators(outcome) is False
            and outcome.exchange.response is not None
            and (host := host_of(outcome.exchange.response.url)) in watched
        )
        return checked

    def settle(self, outcomes: Sequence[Outcome]) -> None:
        """The full answers of pages whose 304 the listing disputed: one whose content had
        changed under the validators it had was lied about. After ``DISTRUST_AFTER`` such
        pages on one host since its validators were last shown right, the host's validators
        are distrusted: its pages are asked in full (README "Validators that lie")."""
        for outcome in outcomes:
            response = outcome.exchange.response
            if kept_validators(outcome) is not True or response is None:
                continue
            self.report.counters.validator_lies += 1
            host, url = host_of(response.url), outcome.page.url
            log.info("%s: changed under the validators it answered 304 to", url)
            lies = self.engine.state.hosts.caught_lie(
                host, url, at=self.engine.now(), distrust_after=DISTRUST_AFTER
            )
            if lies == DISTRUST_AFTER:
                log.warning(
                    "%s: %d pages changed under the validators they answered 304 to (the "
                    "last: %s): its validators are distrusted, and its pages asked in full "
                    "until one changes with new validators",
                    host,
                    lies,
                    url,
                )
