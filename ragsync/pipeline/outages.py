"""Outage pages: what a window's pages served that is not the page is held back, never indexed.

:class:`Watch` judges each window of one source's pass before anything of it is stored (the
rules are :mod:`ragsync.outage`'s; README "Deletion safety", *Outage pages*):

- pages of one host that had content of their own arriving at one text, ``outage_pages`` of
  them or more — in this window, or held back by that text in earlier windows and runs (their
  ``fetch_attempts`` rows say so) — and at least ``outage_share`` of the window's 200s from
  that host, serve the host's outage page: each page serving it fails (verdict ``outage``),
  keeping its content, and is asked again at the next run. That text stays the host's outage
  page while a record is held by it;
- a change that looks like an outage but may be real — a long page shrunk to a small part
  of itself, a crawl's start page that loses its links, two records of distinct texts
  arriving at one, a record turning into a copy of another
  (:func:`ragsync.pipeline.duplicates.store_once` asks :meth:`Watch.hold`) — waits for the
  missing-page rule's confirmations (``missing_confirmations`` observations of that same text
  spanning ``missing_grace``); one that would retire a record (a copy, records converging) is
  also never confirmed in or right after a pass whose listing is incomplete. Until then it
  fails (verdict ``held``) and the page keeps its content.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence, Set

from ragsync.clock import duration_text, epoch, iso
from ragsync.config import SourceConfig
from ragsync.discovery import DiscoveryContext
from ragsync.models import DocumentStatus, SourceOutcome
from ragsync.outage import outage_shapes, shape, shrinks, words
from ragsync.pipeline.context import Engine
from ragsync.pipeline.outcomes import Changed, Failed, Outcome, Unchanged
from ragsync.policy import missing_step
from ragsync.state.attempts import Held
from ragsync.urls import host_of

log = logging.getLogger("ragsync")

Arrival = tuple[str, str]
"""``(host, shape)``: pages serving one text on one host."""


class Watch:
    """One source's outage watch for one pass.

    Args:
        engine: the syncer's parts.
        source: the source.
        discovery: its discovery context (what its listing found wrong so far).
        report: the source's part of the run report (outages are named there).
        fresh: the records created or restored earlier in this pass (they have nothing older
            to keep: never held).
    """

    def __init__(
        self,
        engine: Engine,
        source: SourceConfig,
        discovery: DiscoveryContext,
        report: SourceOutcome,
        *,
        fresh: Set[str],
    ):
        self.engine, self.source, self.discovery = engine, source, discovery
        self.report, self.fresh = report, fresh
        self.listing = False  # whether this pass reads the source's listing (listing_pass)
        self.crawl = False  # … by crawling it
        self._held: dict[str, Held] | None = None  # records held back, by doc key
        self._evidence: dict[Arrival, set[str]] = defaultdict(set)  # records held by each text
        self._outages: set[Arrival] = set()
        self._decided: dict[tuple[str, str], Outcome] = {}  # (doc key, digest): this pass's word
        self._named: dict[tuple[str, str], int] = {}  # pages held, by (host, outage page)
        self._lines: dict[tuple[str, str], int] = {}  # … and the report line that says so

    def listing_pass(self, *, crawl: bool) -> None:
        """This pass reads the source's listing (``crawl``: by crawling it, so that its
        completeness is known only at its end)."""
        self.listing, self.crawl = True, crawl

    @property
    def held(self) -> dict[str, Held]:
        """The records of the source held back by what they served (read once per pass; an
        outage rule turned off forgets what the outage pages held)."""
        if self._held is None:
            rows = self.engine.state.attempts.held(self.source.id)
            self._held = {key: held for key, _, held in rows}
            if self.source.outage_pages > 0:
                for key, url, held in rows:
                    if held.shape is not None:
                        self.remember(key, (host_of(url), held.shape), held)
        return self._held

    def remember(self, doc_key: str, arrival: Arrival, held: Held) -> None:
        self._evidence[arrival].add(doc_key)
        if held.kind == "outage":
            self._outages.add(arrival)

    def judge(
        self,
        outcomes: Sequence[Outcome],
        *,
        suspect: Callable[[Outcome], str | None] | None = None,
    ) -> list[Outcome]:
        """A window's outcomes, each page that served an outage page, or a change that waits
        for its confirmation, turned into a :class:`Failed` that keeps the page's content.
        ``suspect`` names one more reason a change may be an outage (a crawl's start page
        that loses its links: :meth:`ragsync.pipeline.crawl.Crawl.drops_links`)."""
        arrivals: dict[Arrival, list[int]] = defaultdict(list)
        answered: Counter[str] = Counter()
        for index, outcome in enumerate(outcomes):
            if isinstance(outcome, Failed) and outcome.outage:  # one page's marker
                self.name(host_of(outcome.page.url), outcome.outage)
            if isinstance(outcome, Changed | Unchanged) and outcome.exchange.status == 200:
                answered[host_of(outcome.page.url)] += 1
            if (arrival := arrived(outcome)) is not None:
                arrivals[arrival].append(index)
        held = self.held
        # Only records with content of their own make an outage page: URLs new to the source
        # that serve one page (/, /index.html, /en/) are its copies (README "Identity").
        evidence = {
            arrival: self._evidence[arrival]
            | {outcomes[i].page.doc_key for i in at if self.keeps_content(outcomes[i])}
            for arrival, at in arrivals.items()
        }
        self._outages |= outage_shapes(
            {arrival: len(keys) for arrival, keys in evidence.items()},
            answered,
            min_pages=self.source.outage_pages,
            share=self.source.outage_share,
        )
        judged = list(outcomes)
        for i, arrival in self.indexed_outages(outcomes):
            document = outcomes[i].page.document
            assert document is not None
            before = held.get(outcomes[i].page.doc_key)
            judged[i] = self.outage(outcomes[i], arrival, before, title=document["title"] or "")
        for arrival, at in arrivals.items():
            if arrival in self._outages:
                for i in at:
                    outcome = outcomes[i]
                    assert isinstance(outcome, Changed) and outcome.extracted is not None
                    before = held.get(outcome.page.doc_key)
                    judged[i] = self.outage(outcome, arrival, before, title=outcome.extracted.title)
                continue
            # Records of distinct texts arriving at one: a site-wide page, or a real merge.
            records = [i for i in at if self.keeps_content(outcomes[i])]
            converging = len({previous_hash(outcomes[i]) for i in records})
            for i in at:
                outcome = outcomes[i]
                if converging >= 2 and i in records:
                    merged = f"{converging} pages of distinct texts now serve one page"
                    judged[i] = self.hold(outcome, merged, retires=True)
                elif (why := self.suspicion(outcome, suspect)) is not None:
                    judged[i] = self.hold(outcome, why)
        return judged

    def indexed_outages(self, outcomes: Sequence[Outcome]) -> list[tuple[int, Arrival]]:
        """The pages of ``outcomes`` found unchanged whose indexed content is their host's
        outage page (one read as content, alone in its window, before the outage was found):
        held as the others, they are asked again at every run, not at their revisit time, and
        get their content back when the site does."""
        hosts = {host for host, _ in self._outages}
        found: list[tuple[int, Arrival]] = []
        for i, outcome in enumerate(outcomes):
            document = outcome.page.document
            host = host_of(outcome.page.url)
            if host not in hosts or not isinstance(outcome, Unchanged) or document is None:
                continue
            arrival = (host, shape(document["markdown"] or "", document["title"] or ""))
            if arrival in self._outages:
                found.append((i, arrival))
        return found

    def keeps_content(self, outcome: Outcome) -> bool:
        """Whether the page has content of its own indexed before this pass (what a change
        that looks like an outage would cost)."""
        document = outcome.page.document
        return (
            document is not None
            and document["status"] != DocumentStatus.TOMBSTONED
            and outcome.page.doc_key not in self.fresh
        )

    def suspicion(
        self, outcome: Outcome, suspect: Callable[[Outcome], str | None] | None
    ) -> str | None:
        """Why a page's change looks like an outage (it then waits for its confirmation):
        it shrank to a small part of itself, or ``suspect`` says why; or None."""
        assert isinstance(outcome, Changed) and outcome.extracted is not None
        document = outcome.page.document
        if not self.keeps_content(outcome) or document is None:
            return None
        before, after = words(document["markdown"] or ""), words(outcome.extracted.markdown)
        if shrinks(before, after, share=self.source.hold_shrink):
            return f"its text shrank from {before} to {after} words"
        return suspect(outcome) if suspect is not None else None

    def hold(
        self, outcome: Outcome, why: str, digest: str | None = None, *, retires: bool = False
    ) -> Outcome:
        """``outcome`` itself once the missing-page rule confirms the change (``digest``, its
        content hash, seen ``missing_confirmations`` times over ``missing_grace``; when it
        ``retires`` a record, after a complete listing too), else a :class:`Failed` that keeps
        the page's content."""
        text = outcome.extracted if isinstance(outcome, Changed) else None
        digest = digest or (text.content_hash if text else "")
        decided = self._decided.get((outcome.page.doc_key, digest))
        if decided is not None:  # judged in this pass already (a copy's change, then its copy)
            return decided
        source, now = self.source, self.engine.clock().timestamp()
        before = self.held.get(outcome.page.doc_key)
        seen, since = (
            (before.count, epoch(before.since))
            if before and before.kind == "change" and before.digest == digest
            else (0, None)
        )
        count, first, confirmed = missing_step(
            seen, since, now, confirmations=source.missing_confirmations, grace=source.missing_grace
        )
        blocked = self.listing_blocks(seen_before=seen > 0) if retires else None
        if confirmed and blocked is None:
            log.info("%s: %s, confirmed (%d observations)", outcome.page.url, why, count)
            self._decided[(outcome.page.doc_key, digest)] = outcome
            return outcome
        earliest = iso(first + source.missing_grace)
        wait = blocked or (
            f"{count} of missing_confirmations = {source.missing_confirmations} observations "
            f"since {iso(first)}, over missing_grace = {duration_text(source.missing_grace)}: "
            f"not before {earliest}"
        )
        reason = f"{why}: held until confirmed ({wait}); the indexed content is kept"
        page_shape = shape(text.markdown, text.title) if text else None
        held = Held("change", digest, count, iso(first), page_shape)
        if page_shape is not None and source.outage_pages > 0:
            self.remember(outcome.page.doc_key, (host_of(outcome.page.url), page_shape), held)
        failed = held_failure(outcome, "held", reason, held)
        self._decided[(outcome.page.doc_key, digest)] = failed
        return failed

    def listing_blocks(self, *, seen_before: bool) -> str | None:
        """Why a record may not be retired now, or None: the source's last listing was
        incomplete, or this pass's is so far. A crawl's listing is known complete only at its
        end, so what a crawl pass holds is confirmed by a later pass (``seen_before``)."""
        if self.listing and self.discovery.incomplete_reasons:
            return "this pass's listing is incomplete"
        if self.listing and self.crawl and not seen_before:
            return "a crawl's listing is known complete only at its end"
        last = self.engine.state.runs.get_listing(self.source.id)
        if last is not None and not last["complete"]:
            return "the last listing was incomplete"
        return None

    def outage(
        self, outcome: Outcome, arrival: Arrival, before: Held | None, *, title: str
    ) -> Failed:
        """A page that served the host's outage page (titled ``title``): it fails, keeping
        its content."""
        now = iso(self.engine.clock())
        count, since = (
            (before.count + 1, before.since)
            if before and before.kind == "outage" and before.digest == arrival[1]
            else (1, now)
        )
        kept = "its indexed content is kept" if self.keeps_content(outcome) else "not indexed"
        reason = (
            f"suspected outage: {arrival[0]} serves one page ({title!r}) for many of its "
            f"URLs, seen here {count} time(s) since {since}; not content: {kept}, and the page "
            "is asked again at the next run"
        )
        self.name(arrival[0], f"suspected outage: one page ({title!r}) for many URLs")
        held = Held("outage", arrival[1], count, since, arrival[1])
        if self.keeps_content(outcome):
            self.remember(outcome.page.doc_key, arrival, held)
        return held_failure(outcome, "outage", reason, held)

    def name(self, host: str, what: str) -> None:
        """Count one more page of ``host`` held by an outage page (``what``), in one line of
        the run report per host and outage page (and a warning when it is first seen)."""
        key = (host, what)
        count = self._named.get(key, 0) + 1
        self._named[key] = count
        line = (
            f"{host}: {what}: {count} page(s) held; nothing is replaced or retired, and they "
            "are asked again at the next run"
        )
        if count == 1:
            self._lines[key] = len(self.report.outages)
            self.report.outages.append(line)
            log.warning(
                "%s: %s: %s (the run's report counts the pages held)", self.source.id, host, what
            )
        else:
            self.report.outages[self._lines[key]] = line


def previous_hash(outcome: Outcome) -> str:
    """The content hash a page's record held before this pass."""
    document = outcome.page.document
    assert document is not None
    return document["content_hash"] or ""


def arrived(outcome: Outcome) -> Arrival | None:
    """``(host, shape)`` of the text a changed page arrived at, or None (not changed, moved,
    or an API record, whose content is the provider's word)."""
    if not isinstance(outcome, Changed) or outcome.extracted is None:
        return None
    page = outcome.page
    if outcome.moved_to or outcome.moved_from or ":id:" in page.doc_key:
        return None
    return host_of(page.url), shape(outcome.extracted.markdown, outcome.extracted.title)


def held_failure(outcome: Outcome, verdict: str, reason: str, held: Held) -> Failed:
    """``outcome``'s page failing as held back by the watch (``held``): it keeps its content
    and is asked again at the next run."""
    return Failed(
        outcome.page,
        outcome.exchange,
        reason=reason,
        verdict=verdict,
        transient=True,
        held=held,
        answered=outcome.response_counter(),
    )
