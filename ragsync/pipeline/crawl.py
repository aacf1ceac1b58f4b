"""A crawl source's listing: its start pages, then their links in scope, breadth first.

The pages of one level are checked and committed like any listed pages (a window at a time);
the next level is the links of this level's pages: as read from the bodies fetched now, or, for
a page that answered 304 or was not due, as stored when it was last read
(``state.crawl_links``). So a page linked from a page changed in this pass is found in this
pass, and a crawl that finds nothing changed costs one conditional request per page.

The crawl is a complete listing — evidence that a known page it did not reach is gone (README
"Deletion safety") — only when it ran to its end: no cap reached (``max_depth``, ``max_pages``),
no page of it that failed, no page whose links are unknown.

With workers (``list_source(..., queue=True)``) the pages are queued, not checked, so only
stored links are known: a listing reaches one level past the pages read so far, and stays
incomplete until every page's links are stored.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence, Set
from dataclasses import dataclass
from typing import Literal, cast

from ragsync.clock import iso
from ragsync.config import SourceConfig
from ragsync.discovery import DiscoveryContext
from ragsync.identity import canonical_record_key
from ragsync.links import MAX_LINKS, NOINDEX, PageLinks
from ragsync.models import Candidate, DocumentStatus
from ragsync.pipeline.context import Engine
from ragsync.pipeline.listing import Listed
from ragsync.pipeline.outcomes import Document, Failed, Missing, NotModified, Outcome, Skipped
from ragsync.policy import missing_step
from ragsync.protocols import CRAWL_MAX_DEPTH, CRAWL_MAX_PAGES, Crawler
from ragsync.scope import Scope, hostname
from ragsync.state.aliases import Asked
from ragsync.state.crawl import LinksRow
from ragsync.urls import canonical_url, start_directory, with_slash

log = logging.getLogger("ragsync")

Validators = tuple[str | None, str | None]
"""``(etag, last_modified)``."""
FAILURES_NAMED = 5  # pages named per level in an incomplete reason; the rest counted


@dataclass(frozen=True)
class Checked:
    """What the crawl keeps of one page's check until its level ends (never its content: a
    level may hold thousands of pages).

    Attributes:
        reader: the record whose links the check read: the page's, or its move target's.
        kind: ``failed``; ``gone`` (missing, no body read: a 404, a redirect out);
            ``not_modified`` (a 304: links as stored); ``deferred`` (its host is paused); or
            ``read`` (its body was read, or it is not the crawl's: disallowed, out of scope).
        failure: why it failed.
    """

    reader: str
    kind: Literal["failed", "gone", "not_modified", "deferred", "read"]
    failure: str = ""

    @classmethod
    def of(cls, source_id: str, outcome: Outcome) -> Checked:
        reader = outcome.page.doc_key
        if outcome.moved_to:
            reader = canonical_record_key(source_id, outcome.moved_to)
        if isinstance(outcome, Failed) and outcome.verdict != "held":
            # A change held until confirmed is no failure: the page answered, its stored
            # links stand (README "Deletion safety", outage pages).
            return cls(reader, "failed", outcome.reason)
        if isinstance(outcome, Missing) and outcome.links is None:
            return cls(reader, "gone")
        if isinstance(outcome, NotModified):
            return cls(reader, "not_modified")
        if isinstance(outcome, Skipped) and outcome.why == "deferred":
            return cls(reader, "deferred")
        return cls(reader, "read")


def start_pages(source: SourceConfig, urls: Sequence[str]) -> Iterator[tuple[str, str]]:
    """The record keys and canonical URLs of a crawl's start pages (a URL that is not one has
    none)."""
    for url in urls:
        try:
            canonical = canonical_url(url, source.strip_params)
        except ValueError:
            continue
        yield canonical_record_key(source.id, canonical), canonical


def named(items: Sequence[str]) -> str:
    """The first :data:`FAILURES_NAMED` of ``items``, and how many more there are.

    >>> named(["a", "b"])
    'a; b'
    """
    more = len(items) - FAILURES_NAMED
    return "; ".join(items[:FAILURES_NAMED]) + (f" (and {more} more)" if more > 0 else "")


def gone(documents: dict[str, Document], key: str) -> bool:
    """Whether the record ``key`` is a tombstone (in ``documents``, its rows by key)."""
    document = documents.get(key)
    return document is not None and document["status"] == DocumentStatus.TOMBSTONED


class Crawl:
    """One crawl source's listing during one pass (see the module docstring).

    Args:
        engine: the syncer's parts.
        source: the source.
        crawler: its connector (start pages, caps).
        scope: its scope (hosts, ``allowed_hosts``, ``include``/``exclude``).
        discovery: its discovery context (the listing's completeness).
        queue: the pages are put on the work queue, not checked now: only stored links are
            known, so a page never read makes the crawl incomplete.
    """

    def __init__(
        self,
        engine: Engine,
        source: SourceConfig,
        crawler: Crawler,
        scope: Scope,
        discovery: DiscoveryContext,
        *,
        queue: bool = False,
    ):
        self.engine, self.source, self.crawler = engine, source, crawler
        self.scope, self.discovery, self.queue = scope, discovery, queue
        self.start_hosts = frozenset(hostname(url) for url in crawler.start_urls)
        # Each start page's directory, by its record key; and the key and URL of the start
        # page with a slash after its path, the directory it may turn out to be (narrow).
        starts = dict(start_pages(source, crawler.start_urls))
        self.start_keys = frozenset(starts)
        self.directories = {key: start_directory(url) for key, url in starts.items()}
        self.own_directories = dict(self.directories)  # before any redirect narrows them
        self.slashed: dict[str, tuple[str, str]] = {}
        for key, url in starts.items():
            slashed = with_slash(url)
            self.slashed[key] = (canonical_record_key(source.id, slashed), slashed)
        # Where a start page moved in a past pass, or leads as an entry (settle).
        for key, target in engine.state.aliases.targets_of(sorted(self.start_keys)).items():
            self.narrow(key, target)
        # The start pages' stored links as this pass begins (only the crawl writes them, once
        # per pass): what an entry led to before (settle).
        self.start_rows = engine.state.crawl_links.rows(self.start_keys)
        for key, (links, skipped, _) in self.start_rows.items():
            if skipped == "entry" and links:
                self.stay_under(key, links[0])
        self.depth = -1  # of the level being checked; the start pages are depth 0
        self.pages = 0  # pages admitted so far
        self.cut = False  # max_pages reached: the listing is incomplete
        self.checked: dict[str, Checked] = {}  # the level's pages checked so far, by key
        # Of the window being checked: why each page without a record was read for its links
        # only ("noindex", "not_text"), the pages whose links are stored, and those whose
        # stored links are not empty.
        self.links_only: dict[str, str] = {}
        self.read: set[str] = set()
        self.linking: set[str] = set()

    def narrow(self, key: str, target: str) -> None:
        """The start page ``key`` moved permanently to the record ``target``: when that is
        itself plus a slash (a directory asked without it, "/book" → "/book/"), the crawl stays
        under that directory, not under its parent ("/", the whole site)."""
        slashed = self.slashed.get(key)
        if slashed is not None and slashed[0] == target:
            self.stay_under(key, slashed[1])

    def stay_under(self, key: str, url: str) -> None:
        """For the rest of this pass, the crawl of start page ``key`` stays under ``url``'s
        directory, when that lies within the start page's own."""
        directory = start_directory(url)
        if directory != self.directories[key] and directory.startswith(self.own_directories[key]):
            self.directories[key] = directory
            log.info(
                "%s: the start page redirects to %s: the crawl stays under that directory",
                self.source.id,
                url,
            )

    def entry(self, outcome: Outcome) -> Skipped | None:
        """A start page with no content of its own that redirects temporarily to a directory
        below its own on its host ("/" → "/en/latest/" on Read the Docs) as the crawl's entry:
        not a failure; its one link is the target, once confirmed (:meth:`settle`). None for
        any other outcome: a start page with content keeps it through a temporary redirect (a
        maintenance window), and a target that is a page rather than a directory, not below
        the start page's directory, carries a query, or lies off the start pages' hosts or out
        of scope fails as any temporary redirect does (README "Discovery")."""
        response = outcome.exchange.response
        if not (
            isinstance(outcome, Failed)
            and outcome.verdict == "temporary_redirect"
            and outcome.page.doc_key in self.start_keys
            and response is not None
            and response.location
        ):
            return None
        document = outcome.page.document
        if document is not None and document["status"] != DocumentStatus.TOMBSTONED:
            return None
        try:
            target = canonical_url(response.location, self.source.strip_params)
        except ValueError:
            return None
        below = start_directory(outcome.page.url)
        if (
            hostname(target) not in self.start_hosts
            or self.scope.refuse_page(target) is not None
            or "?" in target
            or start_directory(target) != target
            or target == below
            or not target.startswith(below)
        ):
            return None
        reason = f"redirects temporarily (HTTP {response.status}) to {target}"
        links = PageLinks(links=(target,))
        return Skipped(outcome.page, outcome.exchange, why="entry", reason=reason, links=links)

    def settle(self, key: str, url: str, target: str) -> bool:
        """Whether the entry ``key`` (at ``url``) is followed to ``target`` in this pass.

        The first target a start page is seen with is; a new one (a home page sent to a
        maintenance directory, or whose links were read otherwise before) only once the
        missing-page rule confirms it: seen ``missing_confirmations`` times over
        ``missing_grace``. Until then the crawl follows the links stored before, and the
        listing is incomplete, so nothing counts as unlisted (README "Deletion safety")."""
        links, skipped, pending = self.start_rows.get(key, (None, None, None))
        if links is None or (skipped == "entry" and links == [target]):
            return self.enter(key, target)
        same = pending is not None and pending["target"] == target
        count, since, confirmed = missing_step(
            pending["count"] if pending and same else 0,
            pending["since"] if pending and same else None,
            self.engine.clock().timestamp(),
            confirmations=self.source.missing_confirmations,
            grace=self.source.missing_grace,
        )
        if confirmed:
            return self.enter(key, target)
        self.engine.state.crawl_links.set_pending(
            key, {"target": target, "count": count, "since": since}
        )
        self.discovery.incomplete(
            f"crawl: the start page {url} redirects to {target} (seen {count} times since "
            f"{iso(since)}), not where it led before; its earlier links are followed until "
            "the missing-page rule confirms the change"
        )
        return False

    def enter(self, key: str, target: str) -> bool:
        """Follow the entry ``key`` to ``target`` in this pass: the crawl stays under the
        target's directory. A target the crawl would not follow after all (the source's
        ``include`` patterns leave it out) leaves the listing incomplete: a crawl that reached
        nothing from its start page is no evidence against the pages it knew."""
        self.stay_under(key, target)
        if self.follows(target):
            return True
        self.discovery.incomplete(f"crawl: the start page redirects to {target}, not followed")
        return False

    def follows(self, url: str) -> bool:
        """Whether a link to ``url`` is part of the crawl: in the source's scope (hosts and
        ``include``/``exclude``), and under a start page's directory — unless the source has
        ``include`` patterns (they say which paths) or the link is to another host that
        ``allowed_hosts`` admits (its whole site)."""
        if self.scope.refuse_page(url) is not None:
            return False
        if self.source.include:
            return True
        try:
            canonical = canonical_url(url, self.source.strip_params)
        except ValueError:
            return False
        if hostname(canonical) not in self.start_hosts:
            return True
        return canonical.startswith(tuple(self.directories.values()))

    def admit(self, level: list[Listed], seen: set[str]) -> list[Listed]:
        """The pages of the next level that fit the caps; the rest leave the crawl incomplete
        and are taken out of ``seen`` (known ones are then checked on their own schedule)."""
        if not level:
            return []
        self.depth += 1
        room = self.crawler.max_pages - self.pages
        if self.depth > self.crawler.max_depth:
            self.discovery.incomplete(
                f"crawl cut at max_depth={self.crawler.max_depth}: "
                f"{len(level)} pages linked at depth {self.depth} not followed",
                chosen=self.crawler.max_depth != CRAWL_MAX_DEPTH,
            )
            room = 0
        elif len(level) > room and not self.cut:  # named once: deeper levels are cut too
            self.cut = True
            self.discovery.incomplete(
                f"crawl cut at max_pages={self.crawler.max_pages}: "
                f"{len(level) - room} pages linked at depth {self.depth} not followed",
                chosen=self.crawler.max_pages != CRAWL_MAX_PAGES,
            )
        admitted, dropped = level[:room], level[room:]
        seen.difference_update(key for key, _ in dropped)
        self.pages += len(admitted)
        if admitted:
            log.info(
                "%s: crawl depth %d: %d pages (%d in all)",
                self.source.id,
                self.depth,
                len(admitted),
                self.pages,
            )
        self.checked = {}
        return admitted

    def drops_links(self, outcome: Outcome) -> str | None:
        """Why a start page's change looks like an outage (it then waits for confirmation,
        :class:`~ragsync.pipeline.outages.Watch`): it keeps no more than
        ``1 - max_unlisted_share`` of the links it had, as a listing that leaves out that many
        pages is taken as broken (README "Deletion safety"), or None."""
        key = outcome.page.doc_key
        if key not in self.start_keys or outcome.links is None or key not in self.start_rows:
            return None
        own = outcome.page.url
        before = {url for url in self.start_rows[key][0] if url != own and self.follows(url)}
        if len(before) < 2:
            return None
        kept = len(before & set(outcome.links.links))
        if kept > len(before) * (1 - self.source.max_unlisted_share):
            return None
        return f"the crawl's start page now links to {kept} of the {len(before)} pages it linked to"

    def prepare(
        self, keys: Sequence[str], documents: dict[str, Document]
    ) -> tuple[dict[str, Document], dict[str, Validators]]:
        """The stored records of a window's pages ``keys``, as the check should see them, and
        the validators of those read for their links only. A page whose links are not stored
        is requested without validators (a 304 would leave its links unknown)."""
        stored = self.engine.state.crawl_links.links(keys)
        self.read = set(stored)
        self.linking = {key for key, links in stored.items() if links}
        records = {
            key: doc
            if key in stored
            else cast(Document, {**doc, "etag": None, "last_modified": None})
            for key, doc in documents.items()
        }
        unrecorded = [key for key in keys if key in stored and key not in documents]
        links_only = self.engine.state.crawl_links.validators(unrecorded)
        self.links_only = {key: skipped for key, (_, _, skipped) in links_only.items()}
        return records, {key: (etag, modified) for key, (etag, modified, _) in links_only.items()}

    def conditional(self, asked: dict[str, Asked]) -> dict[str, Asked]:
        """Those of the window's aliases ``asked`` again that can be asked conditionally in a
        crawl: a 304 keeps the links stored, so the page whose links it stands for must have
        them (a copy's own; a moved page's target's)."""
        targets = [alias.target for alias in asked.values() if not alias.copy_of]
        linked = self.engine.state.crawl_links.links(targets) if targets else {}
        return {
            key: alias
            for key, alias in asked.items()
            if (key in self.read if alias.copy_of else alias.target in linked)
        }

    def store(self, outcomes: Sequence[Outcome]) -> list[Outcome]:
        """Store the links read in a window, before it is committed (a crash in between costs
        a re-read, never a stale graph); remember what :meth:`next_level` needs of them.
        Returns the outcomes to commit: a page read for its links only that answered 304 is
        skipped (it has no record to update); a file that is a start page, or that stands where
        the crawl holds a page's links, fails (its links are not lost to it)."""
        rows: list[LinksRow] = []
        kept: list[Outcome] = []
        answered: list[str] = []  # pages read for their links only: no failure stands
        for outcome in outcomes:
            page = outcome.page
            key = page.doc_key
            asked_again = page.copy_of or page.validators_of  # an alias, not a links-only page
            if isinstance(outcome, NotModified) and page.document is None and not asked_again:
                exchange = outcome.exchange
                if self.links_only.get(key) == "not_text":
                    outcome = Skipped(page, exchange, why="not_text", reason="a file (HTTP 304)")
                else:
                    outcome = Skipped(page, exchange, why="noindex", reason=NOINDEX)
            elif (
                isinstance(outcome, Skipped)
                and outcome.why == "not_text"
                and (key in self.start_keys or key in self.linking)
            ):
                outcome = Failed(outcome.page, outcome.exchange, reason=outcome.reason)
            elif (entry := self.entry(outcome)) is not None:
                outcome = entry
            kept.append(outcome)
            if isinstance(outcome, Skipped) and outcome.why in ("noindex", "not_text", "entry"):
                answered.append(key)  # read for its links only: it answered
            checked = Checked.of(self.source.id, outcome)
            self.checked[key] = checked
            if key in self.start_keys and outcome.moved_to:
                self.narrow(key, checked.reader)
            if outcome.links is None:
                continue
            entering = isinstance(outcome, Skipped) and outcome.why == "entry"
            if entering and not self.settle(key, outcome.page.url, outcome.links.links[0]):
                continue  # its stored links stand
            response = outcome.exchange.response
            validators: Validators = (None, None)
            skipped = None
            if isinstance(outcome, Skipped) and response is not None:  # no record holds them
                skipped = outcome.why
                if outcome.why != "entry":  # a redirect is asked again unconditionally
                    validators = (response.etag, response.last_modified)
            rows.append((checked.reader, outcome.links.links, validators, skipped))
            if outcome.links.truncated:
                self.discovery.incomplete(
                    f"crawl: {outcome.page.url} has more than {MAX_LINKS} links; "
                    "the rest were not followed"
                )
        self.engine.state.crawl_links.put(self.source.id, rows, self.engine.now())
        # A failure such a page had (a 500 before it served its file) ends here: it is not
        # committed, and a due retry would otherwise ask it on every run.
        self.engine.state.attempts.clear(answered)
        return kept

    def next_level(
        self, level: list[Listed], *, failing: Set[str] = frozenset()
    ) -> list[Candidate]:
        """The links of ``level``'s pages that the crawl follows, in page order (the listing
        drops those already seen). A page that failed, or was held back until the retry of
        its failure (``failing``: its links are as last read), or whose links are unknown,
        leaves the crawl incomplete; a page proven gone links to nothing. A crawl that
        counted as complete while its start page was held back ended a maintenance window's
        runs with exit codes 1, 0, 1, …"""
        checks = self.checked
        keys = [key for key, _ in level]
        readers = {key: checked.reader for key, checked in checks.items()}
        documents = self.engine.state.documents.get_many(keys)
        # A page this pass proved gone (a 404 that confirmed its tombstone) links to nothing;
        # one only suspected missing keeps its links, as it keeps its content. A page that says
        # noindex is tombstoned too, but its links were read from the body it served.
        self.engine.state.crawl_links.forget(
            [
                key
                for key, checked in checks.items()
                if checked.kind == "gone" and gone(documents, key)
            ]
        )
        stored = self.engine.state.crawl_links.links([*keys, *readers.values()])
        failed: list[str] = []
        unknown: list[str] = []
        links: dict[str, None] = {}
        for key, candidate in level:
            checked = checks.get(key)
            if checked is not None and checked.kind == "failed":
                failed.append(f"{candidate.url}: {checked.failure}")
            elif checked is None and key in failing:
                failed.append(f"{candidate.url}: failing, held back until its retry")
            found = stored.get(readers.get(key, key))
            if found is None:
                if self.links_unknown(checked, documents.get(key)):
                    unknown.append(candidate.url)
                continue
            links.update(dict.fromkeys(found))
        if failed:
            self.discovery.incomplete(f"crawl: {len(failed)} pages failed: {named(failed)}")
        if unknown:
            self.discovery.incomplete(
                f"crawl: the links of {len(unknown)} pages are not known yet: {named(unknown)}"
            )
        return [Candidate(url=url) for url in links if self.follows(url)]

    def links_unknown(self, checked: Checked | None, document: Document | None) -> bool:
        """Whether a page without stored links may have links nobody read: it was not read in
        this pass (not due, held back, deferred, queued) yet has content, or is new and queued
        or deferred. A page missing, disallowed or out of scope links to nothing; a failed one
        is counted as failed."""
        if checked is None or checked.kind == "not_modified":
            if self.queue:
                return True
            return document is not None and document["status"] != DocumentStatus.TOMBSTONED
        return checked.kind == "deferred"
