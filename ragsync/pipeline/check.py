"""Checking one page: robots, fetch (conditionally), classify, identity, extract, chunk.

:meth:`PageChecker.check` runs on a fetch thread and returns one frozen
:mod:`~ragsync.pipeline.outcomes` value; any failure is the page's outcome, never the run's,
except a :class:`~ragsync.errors.ResourceError` (the state DB's server went away, its device
is full): that ends the pass, as it would the page's commit.
HTML is extracted in worker processes (README "Extraction"), never on the fetch threads.
"""

from __future__ import annotations

import dataclasses
import logging
import threading

from ragsync.config import SourceConfig
from ragsync.discovery import DiscoveryContext
from ragsync.errors import ExtractError, FetchError, ResourceError
from ragsync.extract import (
    canonical_link,
    content_hash,
    line_title,
    meta_refresh,
    normalize_markdown,
)
from ragsync.extractpool import shared_pool
from ragsync.fetch import OutOfScope
from ragsync.identity import canonical_record_key
from ragsync.links import NOINDEX, PageLinks, page_links
from ragsync.models import DocumentStatus, Extracted, Response, Verdict
from ragsync.outage import marker, not_the_page, words
from ragsync.pipeline.context import Engine
from ragsync.pipeline.outcomes import (
    Changed,
    Deleted,
    Exchange,
    Failed,
    Missing,
    NotModified,
    Outcome,
    Page,
    Skipped,
    Unchanged,
)
from ragsync.policy import HTML_TYPES, classify, is_file, raw_hash
from ragsync.politeness import HostPaused, PoliteFetcher
from ragsync.robots import RobotsPolicy, decode_robots, product_token
from ragsync.scope import RobotsScope, Scope
from ragsync.urls import canonical_url, host_of, in_scope

log = logging.getLogger("ragsync")


def extract(engine: Engine, response: Response) -> Extracted:
    """The page's Markdown, from an extraction worker process: a page over its CPU budget, or
    one that crashes its worker, fails alone (README "Extraction").

    Raises:
        ExtractError: the body could not be extracted.
    """
    pool = shared_pool(
        workers=engine.config.extract.workers, cpu_budget=engine.config.extract.cpu_budget
    )
    return pool.extract(response.body, response.headers.get("content-type", ""), response.url)


def identity(source: SourceConfig, response: Response) -> tuple[str, str | None]:
    """``(final, declared)``: the canonical form of the URL that answered (after redirects),
    and the ``rel=canonical`` it declares on the same host, if any."""
    final = canonical_url(response.url, source.strip_params)
    if not html_page(response):
        return final, None
    declared = canonical_link(response.body, response.headers, response.url)
    try:
        declared = canonical_url(declared, source.strip_params) if declared else None
    except ValueError:
        return final, None
    return final, declared if declared and host_of(declared) == host_of(final) else None


def refresh_target(response: Response) -> str | None:
    """Where a 200 HTML page sends its reader at once with ``<meta http-equiv="refresh">``:
    a redirect stub, whatever its text says (README "Deletion safety")."""
    if not html_page(response):
        return None
    content_type = response.headers.get("content-type", "")
    return meta_refresh(response.body, response.url, content_type=content_type)


def html_page(response: Response) -> bool:
    """Whether ``response`` is a 200 HTML page (where head declarations are read)."""
    return response.status == 200 and response.content_type in HTML_TYPES


def check_record(engine: Engine, page: Page) -> Outcome:
    """An API record that carries its content (or an authoritative deletion): no fetch."""
    candidate = page.candidate
    if candidate.deleted:
        return Deleted(page)
    assert candidate.content is not None
    markdown = normalize_markdown(candidate.content)
    title = candidate.title or line_title(markdown) or page.url
    extracted = Extracted(title, markdown, content_hash(markdown), "record")
    document = page.document
    if (
        document
        and document["status"] != DocumentStatus.TOMBSTONED
        and (document["content_hash"], document["title"]) == (extracted.content_hash, title)
    ):
        return Unchanged(page)
    engine.warm("embedder")
    return Changed(page, extracted=extracted, chunks=tuple(engine.chunk(markdown)))


def internal_error(page: Page, exchange: Exchange, exc: Exception) -> Failed:
    """One page's bad input (or a bug) ends that page, never the run."""
    log.debug("%s: unexpected error", page.url, exc_info=True)
    return Failed(page, exchange, reason=f"internal error: {type(exc).__name__}: {exc}")


class PageChecker:
    """Checks the pages of one source during one pass (thread-safe).

    Args:
        engine: the syncer's parts.
        source: the source the pages belong to.
        fetcher: the pass's polite fetcher.
        discovery: the source's discovery context (robots.txt is read through its cache).
        scope: the source's scope.
        follow_links: read each fetched page's outlinks and robots meta directives (a crawl
            source): a page that says ``noindex`` is not indexed.

    The checker is the scope of its page requests (a :class:`ragsync.fetch.HopScope`): every
    hop must lie in the source's scope and be allowed by the robots.txt of its own host.
    """

    def __init__(
        self,
        engine: Engine,
        source: SourceConfig,
        fetcher: PoliteFetcher,
        discovery: DiscoveryContext,
        scope: Scope,
        *,
        follow_links: bool = False,
    ):
        self.engine = engine
        self.source = source
        self.fetcher = fetcher
        self.scope = scope
        self.follow_links = follow_links
        self.robots = RobotsPolicy(
            lambda url: discovery.get_parsed(url, decode_robots, scope=RobotsScope(scope)),
            engine.config.fetch.user_agent,
        )
        self.robots_lock = threading.Lock()
        self._robots_ready: set[str] = set()  # hosts whose rules and Crawl-delay are in place

    def allowed(self, url: str) -> bool:
        """Whether robots.txt lets ragsync fetch ``url`` (its Crawl-delay goes to the gate)."""
        host = host_of(url)
        if host not in self._robots_ready:
            with self.robots_lock:  # one robots.txt fetch per host, even with many threads
                if host not in self._robots_ready:
                    self.robots.allowed(url)
                    self.fetcher.gate.set_crawl_delay(host, self.robots.crawl_delay(url))
                    self._robots_ready.add(host)
        # Once a host's rules are read they are only read: no lock, so fetch threads do not
        # queue here for every page.
        return self.robots.allowed(url)

    def refuse(self, url: str) -> str | None:
        """Why a hop to ``url`` may not be requested (outside the source: its hosts and its
        include/exclude patterns; or disallowed by its host's robots.txt), or None."""
        refusal = self.scope.refuse_page(url)
        if refusal is None and not self.allowed(url):
            refusal = self.robots.unreachable(url) or f"disallowed by robots.txt: {url}"
        return refusal

    def private_ok(self, url: str) -> bool:
        return self.scope.private_ok(url)

    def check(self, page: Page) -> Outcome:
        """Check one page; any failure is its outcome (runs on a fetch thread)."""
        exchange = Exchange()
        try:
            if page.candidate.content is not None or page.candidate.deleted:
                return check_record(self.engine, page)  # API records carry their content
            refusal = self.scope.refuse_page(page.url)
            if refusal is not None:  # a known page of a host or path the source no longer has
                if page.prunable:  # … which a complete listing left out: evidence it is gone
                    return Missing(page, reason=f"no longer listed by the source; {refusal}")
                # No evidence of anything (an unreadable urls_file lists no host): kept.
                return Skipped(page, why="out_of_scope", reason=refusal)
            if not self.allowed(page.published):
                unreachable = self.robots.unreachable(page.published)
                if unreachable:  # not a rule: the host could not be asked; retry later
                    lasting = self.robots.lasting(page.published)
                    return Failed(page, reason=unreachable, transient=not lasting)
                return Skipped(page, why="disallowed")
            document = page.document
            etag = last_modified = None
            if page.refetch:  # whatever its validators say (README "Validators that lie")
                log.debug("%s: asked in full", page.url)
            elif document and document["status"] != DocumentStatus.TOMBSTONED:
                # A page suspected missing keeps its content: its validators still name it.
                etag, last_modified = document["etag"], document["last_modified"]
            elif page.validators is not None:  # no live record: the page's own (or its alias's)
                etag, last_modified = page.validators
            exchange = Exchange(requested=True, conditional=bool(etag or last_modified))
            return self.fetch(page, exchange, etag=etag, last_modified=last_modified)
        except HostPaused as paused:
            return Skipped(page, exchange, why="deferred", reason=str(paused))
        except ResourceError:
            raise
        except Exception as exc:
            return internal_error(page, exchange, exc)

    def fetch(
        self, page: Page, exchange: Exchange, *, etag: str | None, last_modified: str | None
    ) -> Outcome:
        """Fetch (conditionally), then judge the response."""
        try:
            # A temporary redirect is not followed: the page keeps its content and is retried
            # (README "Deletion safety"); permanent ones are followed and recorded.
            response = self.fetcher.get(
                page.published,
                etag=etag,
                last_modified=last_modified,
                follow_temporary=False,
                scope=self,
                pages_only=True,
            )
        except OutOfScope as exc:
            return self.refused_hop(page, exchange, exc)
        except FetchError as exc:
            return Failed(page, exchange, reason=exc.reason, transient=exc.transient)
        exchange = dataclasses.replace(exchange, response=response)
        try:
            return self.judge(page, exchange)
        except (HostPaused, ResourceError):
            raise
        except Exception as exc:  # recorded with the status that answered
            return internal_error(page, exchange, exc)

    def judge(self, page: Page, exchange: Exchange) -> Outcome:
        """What the response says of the page: missing, a temporary redirect, moved, not
        modified, a failure, or content to read."""
        response = exchange.response
        assert response is not None
        pause_until = None
        if self.fetcher.pause_for(response.status, response.headers) is not None:
            pause_until = self.fetcher.gate.paused_until(host_of(response.url))
        verdict, reason = classify(response.status, response.content_type, response.body)
        if verdict == Verdict.MISSING:
            return Missing(page, exchange, reason=reason)
        if verdict == "temporary_redirect":
            reason = (
                f"temporary redirect (HTTP {response.status}) to {response.location}; "
                "the indexed content is kept"
            )
            return Failed(page, exchange, reason=reason, verdict=verdict, transient=True)
        moved_to = None
        if verdict == "content" and ":id:" not in page.doc_key:
            refresh = refresh_target(response)
            if refresh is not None:
                return self.refreshed(page, exchange, refresh)
        if verdict in ("content", "not_modified") and ":id:" not in page.doc_key:
            own, declared = identity(self.source, response)
            target = declared or own
            if not in_scope(target, self.source.include, self.source.exclude):
                return Missing(
                    page, exchange, reason=f"redirects out of the source to {response.url}"
                )
            if verdict == "content" and target != own:
                # A declared rel=canonical: this body is not the target's (a redirect stub,
                # a print version), so the target's own response is the content, with its
                # own validators; a target that serves nothing leaves the page as itself.
                answer = self.canonical_target(target)
                exchange = dataclasses.replace(exchange, extra=exchange.extra + 1)
                if answer is None:
                    target = own
                else:
                    response, target = answer, canonical_url(answer.url, self.source.strip_params)
                    exchange = dataclasses.replace(exchange, response=response)
            if target != page.url:
                moved_to = target  # resolved against the target record by the moves stage
        if verdict == "not_modified":
            if not exchange.conditional:
                reason = "HTTP 304 to an unconditional request"
                return Failed(page, exchange, moved_to=moved_to, reason=reason)
            return NotModified(page, exchange, moved_to=moved_to)
        if verdict != "content":
            indexed = page.document and page.document["status"] != DocumentStatus.TOMBSTONED
            file = is_file(response.status, response.content_type)
            if self.follow_links and file and not indexed:
                # A crawled link to a file never indexed (a JSON view, an image): not one of the
                # site's pages, so no failure; it links nowhere (README "Discovery"). An
                # indexed page that turns into a file fails, as below.
                links = PageLinks()
                return Skipped(page, exchange, why="not_text", reason=reason, links=links)
            transient = verdict in ("retry", "rate_limited")
            return Failed(
                page,
                exchange,
                reason=reason,
                verdict=verdict,
                transient=transient,
                pause_until=pause_until,
            )
        return self.read(page, exchange, response, moved_to=moved_to)

    def read(
        self, page: Page, exchange: Exchange, response: Response, *, moved_to: str | None
    ) -> Outcome:
        """A 200 with content: unchanged (same body or same Markdown) or changed; for a crawl
        source, with the page's outlinks, and missing when it says ``noindex``."""
        links = self.links(response)
        digest = raw_hash(response.body)
        document = page.document
        known = document if document and document["status"] != DocumentStatus.TOMBSTONED else None
        refused = self.not_the_page(page, exchange, response)
        if refused is not None:  # before noindex: a challenge page says noindex too
            return refused
        if links is not None and links.noindex:
            reason = NOINDEX
            if known is None:  # never indexed: read for its links only
                return Skipped(page, exchange, why="noindex", reason=reason, links=links)
            return Missing(page, exchange, reason=reason, links=links)  # indexed: pruned by rule
        if moved_to:
            known = None  # compared with the target record by the moves stage
        if known and known["raw_hash"] == digest:
            return Unchanged(page, exchange, raw_hash=digest, links=links)
        if known is None:  # a new page: the tokenizers load while it is extracted
            self.engine.warm("chunker")
        try:
            extracted = extract(self.engine, response)
        except ExtractError as exc:
            reason = f"parse failure: {exc.reason}"
            return Failed(page, exchange, moved_to=moved_to, reason=reason, verdict="parse_failure")
        if known and known["content_hash"] == extracted.content_hash:
            return Unchanged(page, exchange, raw_hash=digest, links=links)
        if moved_to is None:  # new text (a move's is compared by the moves stage)
            self.engine.warm("embedder")  # the model loads while the window is checked
        chunks = tuple(self.engine.chunk(extracted.markdown))
        return Changed(
            page,
            exchange,
            extracted=extracted,
            chunks=chunks,
            raw_hash=digest,
            moved_to=moved_to,
            links=links,
        )

    def not_the_page(self, page: Page, exchange: Exchange, response: Response) -> Failed | None:
        """A 200 that is not the page: one that says to come back later (``Retry-After``), or a
        short body with the marker of a bot challenge, a JavaScript-required shell or an error
        page (:func:`ragsync.outage.not_the_page`). It fails, the page keeps its content and is
        asked again at the next run (README "Deletion safety", outage pages)."""
        if not self.source.outage_markers:
            return None
        kept = "the indexed content is kept" if page.document else "not indexed"
        after = response.headers.get("retry-after")
        if after is not None:
            what = "HTTP 200 with Retry-After"
            reason = f"outage page: {what}: {after}, a temporary page, not content; {kept}"
            return outage_page(page, exchange, what, reason)
        if marker(response.body) is None:
            return None
        try:
            extracted = extract(self.engine, response)
        except ExtractError:  # read() fails it the same way
            return None
        kind = not_the_page(response.body, extracted.markdown)
        if kind is None:
            return None
        what = f"a {kind} served with HTTP 200"
        reason = (
            f"outage page: {what} ({extracted.title!r}, {words(extracted.markdown)} words), "
            f"not the page; {kept}"
        )
        return outage_page(page, exchange, what, reason)

    def links(self, response: Response) -> PageLinks | None:
        """The outlinks of a body, when the source crawls (none in a body that is not HTML)."""
        if not self.follow_links:
            return None
        if response.content_type not in HTML_TYPES:
            return PageLinks()
        agent = product_token(self.engine.config.fetch.user_agent)
        return page_links(
            response.body,
            response.headers.get("content-type", ""),
            response.url,
            response.headers,
            agent=agent,
        )

    def refused_hop(self, page: Page, exchange: Exchange, refused: OutOfScope) -> Outcome:
        """A redirect to a URL that was not requested: out of the source (evidence the page
        left it), disallowed by the target host's robots.txt, or that host's robots.txt could
        not be read (retried)."""
        target = refused.target
        if self.scope.refuse_page(target) is not None:
            return Missing(page, exchange, reason=f"redirects out of the source to {target}")
        unreachable = self.robots.unreachable(target)
        if unreachable:
            lasting = self.robots.lasting(target)
            return Failed(page, exchange, reason=unreachable, transient=not lasting)
        return Skipped(page, exchange, why="disallowed", reason=refused.reason)

    def refreshed(self, page: Page, exchange: Exchange, refresh: str) -> Outcome:
        """A redirect stub (an instant meta refresh) counts as a redirect, never as content:
        its target's response is the page's, followed hop by hop like a permanent redirect
        (stub after stub, up to ``fetch.max_redirects``). A target out of the source is
        evidence the page left it; a target that is missing makes the page missing; one that
        fails is the page's failure (README "Deletion safety")."""
        seen = {page.url}
        for _ in range(max(self.engine.config.fetch.max_redirects, 1)):
            via = f"meta refresh to {refresh}"
            if self.scope.refuse_page(refresh) is not None:
                return Missing(page, exchange, reason=f"redirects out of the source to {refresh}")
            try:
                target = canonical_url(refresh, self.source.strip_params)
            except ValueError as exc:
                return Failed(page, exchange, reason=f"{via}: {exc}")
            if target in seen:
                return Failed(page, exchange, reason=f"{via}: a redirect loop")
            seen.add(target)
            # A moved page asked again: its target's ETag, when the stub leads to the target
            etag = None
            if page.validators and page.validators_of == canonical_record_key(
                self.source.id, target
            ):
                etag = page.validators[0]
            try:
                answer = self.fetcher.get(
                    refresh, etag=etag, follow_temporary=False, scope=self, pages_only=True
                )
            except OutOfScope as exc:  # not requested: its hop lies outside the source
                return self.refused_hop(page, exchange, exc)
            except FetchError as exc:
                reason = f"{via}: {exc.reason}"
                exchange = dataclasses.replace(exchange, extra=exchange.extra + 1)
                return Failed(page, exchange, reason=reason, transient=exc.transient)
            exchange = dataclasses.replace(exchange, extra=exchange.extra + 1)
            verdict, reason = classify(answer.status, answer.content_type, answer.body)
            if verdict == "not_modified" and etag is not None:  # the target is unchanged
                exchange = dataclasses.replace(exchange, response=answer)
                return NotModified(page, exchange, moved_to=target)
            if verdict == Verdict.MISSING:
                return Missing(page, exchange, reason=f"{via}: {reason}")
            if verdict != "content":
                transient = verdict in ("retry", "rate_limited", "temporary_redirect")
                reason = f"{via}: {reason or f'HTTP {answer.status}'}"
                return Failed(page, exchange, reason=reason, verdict=verdict, transient=transient)
            next_refresh = refresh_target(answer)
            if next_refresh is None:
                exchange = dataclasses.replace(exchange, response=answer)
                final = canonical_url(answer.url, self.source.strip_params)
                if self.scope.refuse_page(final) is not None:
                    return Missing(page, exchange, reason=f"redirects out of the source to {final}")
                return self.read(
                    page, exchange, answer, moved_to=None if final == page.url else final
                )
            refresh = next_refresh
        reason = f"meta refresh: more than {self.engine.config.fetch.max_redirects} stubs"
        return Failed(page, exchange, reason=reason)

    def canonical_target(self, declared: str) -> Response | None:
        """The response of the URL a page declares canonical, fetched as a redirect target
        would be; None when it does not serve content in the source's scope."""
        try:
            target = self.fetcher.get(declared, follow_temporary=False, scope=self, pages_only=True)
        except FetchError:
            return None
        verdict, _ = classify(target.status, target.content_type, target.body)
        final = canonical_url(target.url, self.source.strip_params)
        if verdict != "content" or not in_scope(final, self.source.include, self.source.exclude):
            return None
        return target


def outage_page(page: Page, exchange: Exchange, what: str, reason: str) -> Failed:
    """A 200 that is an outage page (``what``): the page fails and keeps its content."""
    return Failed(
        page,
        exchange,
        reason=reason,
        verdict="outage",
        transient=True,
        outage=what,
        answered="responses_200_changed",
    )
