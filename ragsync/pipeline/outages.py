"""Outage pages: what a window's pages served that is not the page is held back, never indexed.

:class:`Watch` judges each window of one source's pass before anything of it is stored (the
rules are :mod:`ragsync.outage`'s; README "Deletion safety", *Outage pages*):

- pages of one host arriving at one text, ``outage_pages`` of them or more and at least
  ``outage_share`` of the window's 200s from that host, serve the host's outage page: each
  fails (verdict ``outage``), keeping its content, and is asked again at the next run. While
  any page is held so (its attempt row says so, across runs), that text is the host's outage
  page for every page of the source that serves it, one or many;
- a change that looks like an outage but may be real — a long page shrunk to a small part
  of itself, two records of distinct texts arriving at one, a record turning into a copy of
  another (:func:`ragsync.pipeline.duplicates.store_once` asks :meth:`Watch.hold`) — waits
  for the missing-page rule's confirmations (``missing_confirmations`` observations of that
  same text spanning ``missing_grace``), and is never confirmed in a pass whose listing is
  incomplete or after an incomplete one: until then it fails (verdict ``held``) and the page
  keeps its content.
"""

from __future__ import annotations

import logging
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence, Set

from ragsync.clock import epoch, iso
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
        self.listing = False  # whether this pass reads the source's listing
        self.crawl = False  # … by crawling it
        self._outages: set[Arrival] | None = None
        self._decided: dict[tuple[str, str], Outcome] = {}  # (doc key, digest): this pass's word
        self._named: dict[tuple[str, str], int] = {}  # pages held, by (host, outage page)
        self._lines: dict[tuple[str, str], int] = {}  # … and the report line that says so

    @property
    def outages(self) -> set[Arrival]:
        """The outage pages known: found in this pass, or still holding a page back."""
        if self._outages is None:
            held = self.engine.state.attempts.outage_pages(self.source.id)
            self._outages = {(host_of(url), digest) for url, digest in held}
        return self._outages

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
            if isinstance(outcome, Changed | Unchanged) and outcome.exchange.status == 200:
                answered[host_of(outcome.page.url)] += 1
            if (arrival := arrived(outcome)) is not None:
                arrivals[arrival].append(index)
        # Only pages with content of their own make an outage page: URLs new to the source
        # that serve one page (/, /index.html, /en/) are its copies (README "Identity").
        found = outage_shapes(
            {
                arrival: sum(self.keeps_content(outcomes[i]) for i in at)
                for arrival, at in arrivals.items()
            },
            answered,
            min_pages=self.source.outage_pages,
            share=self.source.outage_share,
        )
        self.outages.update(found)
        judged = list(outcomes)
        for outcome in outcomes:
            if isinstance(outcome, Failed) and outcome.verdict == "outage":  # one page's marker
                what = re.split(r" \(|, ", outcome.reason, maxsplit=1)[0]
                self.name(host_of(outcome.page.url), what)
        for arrival, at in arrivals.items():
            if arrival in self.outages:
                for i in at:
                    judged[i] = self.outage(outcomes[i], arrival)
                continue
            # Records of distinct texts arriving at one: a site-wide page, or a real merge.
            records = [i for i in at if self.keeps_content(outcomes[i])]
            converging = len({previous_hash(outcomes[i]) for i in records})
            for i in at:
                why = self.suspicion(outcomes[i], converging if i in records else 0)
                if why is None and suspect is not None and self.keeps_content(outcomes[i]):
                    why = suspect(outcomes[i])
                if why is not None:
                    judged[i] = self.hold(outcomes[i], why)
        return judged

    def keeps_content(self, outcome: Outcome) -> bool:
        """Whether the page has content of its own indexed before this pass (what a change
        that looks like an outage would cost)."""
        document = outcome.page.document
        return (
            document is not None
            and document["status"] != DocumentStatus.TOMBSTONED
            and outcome.page.doc_key not in self.fresh
        )

    def suspicion(self, outcome: Outcome, converging: int) -> str | None:
        """Why a change looks like an outage (it then waits for its confirmation), or None."""
        assert isinstance(outcome, Changed) and outcome.extracted is not None
        if converging >= 2:
            return f"{converging} pages of distinct texts now serve one page"
        document = outcome.page.document
        if not self.keeps_content(outcome) or document is None:
            return None
        before, after = words(document["markdown"] or ""), words(outcome.extracted.markdown)
        if shrinks(before, after, share=self.source.hold_shrink):
            return f"its text shrank from {before} to {after} words"
        return None

    def hold(self, outcome: Outcome, why: str, digest: str | None = None) -> Outcome:
        """``outcome`` itself once the missing-page rule confirms the change (``digest``, its
        content hash, seen ``missing_confirmations`` times over ``missing_grace``, and the
        listing complete), else a :class:`Failed` that keeps the page's content."""
        if digest is None:
            assert isinstance(outcome, Changed) and outcome.extracted is not None
            digest = outcome.extracted.content_hash
        decided = self._decided.get((outcome.page.doc_key, digest))
        if decided is not None:  # judged in this pass already (a copy's change, then its copy)
            return outcome if not isinstance(decided, Failed) else decided
        source, now = self.source, self.engine.clock().timestamp()
        before = Held.of(self.engine.state.attempts.get(outcome.page.doc_key))
        seen, since = (
            (before.count, epoch(before.since))
            if before and before.kind == "change" and before.digest == digest
            else (0, None)
        )
        count, first, confirmed = missing_step(
            seen, since, now, confirmations=source.missing_confirmations, grace=source.missing_grace
        )
        if confirmed and self.listing_complete(seen_before=seen > 0):
            log.info("%s: %s, confirmed (%d observations)", outcome.page.url, why, count)
            self._decided[(outcome.page.doc_key, digest)] = outcome
            return outcome
        reason = (
            f"{why}: held until confirmed ({count}/{source.missing_confirmations} observations "
            f"since {iso(first)}, over missing_grace, with a complete listing); the indexed "
            "content is kept"
        )
        held = Failed(
            outcome.page,
            outcome.exchange,
            reason=reason,
            verdict="held",
            transient=True,
            held=Held("change", digest, count, iso(first)),
        )
        self._decided[(outcome.page.doc_key, digest)] = held
        return held

    def listing_complete(self, *, seen_before: bool) -> bool:
        """Whether a change may be confirmed now: the source's last listing was complete, and
        so is this pass's so far. A crawl's listing is known complete only at its end, so a
        change a crawl pass holds is confirmed by a later pass (``seen_before``)."""
        if self.listing and (self.discovery.incomplete_reasons or (self.crawl and not seen_before)):
            return False
        last = self.engine.state.runs.get_listing(self.source.id)
        return last is None or bool(last["complete"])

    def outage(self, outcome: Outcome, arrival: Arrival) -> Failed:
        """A page that served the host's outage page: it fails, keeping its content."""
        assert isinstance(outcome, Changed) and outcome.extracted is not None
        before = Held.of(self.engine.state.attempts.get(outcome.page.doc_key))
        now = iso(self.engine.clock())
        count, since = (
            (before.count + 1, before.since)
            if before and before.kind == "outage" and before.digest == arrival[1]
            else (1, now)
        )
        title = outcome.extracted.title
        reason = (
            f"suspected outage: {arrival[0]} serves one page ({title!r}) for many URLs, seen "
            f"{count} time(s) since {since}; not content: the indexed content is kept and the "
            "page is asked again at the next run"
        )
        self.name(arrival[0], f"suspected outage: one page ({title!r}) for many URLs")
        return Failed(
            outcome.page,
            outcome.exchange,
            reason=reason,
            verdict="outage",
            transient=True,
            held=Held("outage", arrival[1], count, since),
        )

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
            log.warning("%s: %s", self.source.id, line)
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
