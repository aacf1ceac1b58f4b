"""What checking a page can come to: one frozen type per outcome.

A :class:`Page` is the work item (a listed or known page, with its stored record). Checking it
(:mod:`ragsync.pipeline.check`) yields exactly one outcome; resolving moves
(:mod:`ragsync.pipeline.moves`) may turn an outcome into another; the commit stage
(:mod:`ragsync.pipeline.commit`) dispatches on the outcome's type. Each outcome names the
response counter it adds to (README "Architecture").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal, TypedDict

from ragsync.links import PageLinks
from ragsync.models import Candidate, Chunk, Counters, Extracted, Response
from ragsync.state.aliases import Asked
from ragsync.state.attempts import Held
from ragsync.state.rows import DocumentRow

Document = DocumentRow
"""A ``documents`` row of the state DB."""


class Origin(TypedDict):
    """The record a never-indexed URL stood for before it moved: its key and URL only."""

    doc_key: str
    canonical_url: str


@dataclass(frozen=True)
class Page:
    """A page to check.

    Attributes:
        doc_key: its record key (see :func:`ragsync.identity.record_key`).
        url: its canonical URL.
        candidate: what the listing said of it (``lastmod``, an API record's content).
        document: its stored record, if any.
        unlisted: a known page a complete listing left out.
        prunable: … and the source's policy counts that as evidence it is gone.
        validators: ``(etag, last_modified)`` to send when no record holds them (a crawled
            page read for its links only: it says noindex; a copy's URL asked again).
        asked: for an alias asked again conditionally, what makes it so (its validators are
            ``validators``; README "Identity").
        refetch: asked in full, without the validators it has: its refetch is due, its host's
            validators are distrusted, or a full answer was asked for (README "Validators that
            lie").
    """

    doc_key: str
    url: str
    candidate: Candidate
    document: Document | None = None
    unlisted: bool = False
    prunable: bool = False
    validators: tuple[str | None, str | None] | None = None
    asked: Asked | None = None
    refetch: bool = False

    @property
    def copy_of(self) -> tuple[str, str] | None:
        """A copy's ``(content hash, title)`` as it served them: a 304 keeps it a copy of the
        record holding them."""
        return self.asked.copy_of if self.asked else None

    @property
    def validators_of(self) -> str | None:
        """A moved page's target, whose ETag its old URL is asked with: a 304 says the target
        is unchanged."""
        return self.asked.target if self.asked and not self.asked.copy_of else None

    @property
    def published(self) -> str:
        """The URL requested and matched against robots.txt: as the source wrote it, or the
        canonical URL when the source did not write it (a known page, a moved record)."""
        return self.candidate.published or self.url


@dataclass(frozen=True)
class Exchange:
    """The HTTP side of a check: whether a request went out (conditionally) and what
    answered (after redirects; for a declared ``rel=canonical``, the target's response)."""

    requested: bool = False
    conditional: bool = False
    response: Response | None = None
    extra: int = 0  # requests beyond the page's own: a declared canonical's, a stub's target

    @property
    def status(self) -> int | None:
        return self.response.status if self.response is not None else None


NO_REQUEST = Exchange()


@dataclass(frozen=True)
class Outcome:
    """Base of the outcomes.

    Attributes:
        page: the page checked (after a confirmed move: its target record's).
        exchange: the request and response.
        moved_to: the canonical URL the page redirects to permanently or declares as
            ``rel=canonical``, when not its own (resolved by the moves stage).
        moved_from: after a confirmed move, the record the page came from (retired after the
            commit).
        links: for a crawl source, the outlinks of the body that answered (None when no body
            was read: a 304 keeps the stored ones; README "Discovery").
        counter: the response counter the outcome adds to.
    """

    page: Page
    exchange: Exchange = NO_REQUEST
    moved_to: str | None = None
    moved_from: Document | Origin | None = None
    links: PageLinks | None = None
    counter: ClassVar[str | None] = None

    def count(self, counters: Counters) -> None:
        """Add this check's request and response to ``counters``."""
        counters.requests_sent += self.exchange.requested + self.exchange.extra
        counters.conditional_requests_sent += self.exchange.conditional
        name = self.response_counter()
        if name is None:
            return
        if not self.exchange.requested and isinstance(self, Changed | Unchanged | Missing):
            # Records with inline content and reindexed pages had no HTTP response; a page
            # outside the source's scope was not requested.
            return
        setattr(counters, name, getattr(counters, name) + 1)

    def response_counter(self) -> str | None:
        """The name of the :class:`~ragsync.models.Counters` field this outcome adds to."""
        return self.counter


@dataclass(frozen=True)
class Changed(Outcome):
    """New or edited content, extracted and chunked."""

    extracted: Extracted | None = None
    chunks: tuple[Chunk, ...] = ()
    raw_hash: str = ""
    counter: ClassVar[str | None] = "responses_200_changed"


@dataclass(frozen=True)
class Unchanged(Outcome):
    """A 200 whose body (raw hash) or extracted content equals the stored one."""

    raw_hash: str = ""
    counter: ClassVar[str | None] = "responses_200_unchanged"


@dataclass(frozen=True)
class NotModified(Outcome):
    """A 304 to a conditional request."""

    counter: ClassVar[str | None] = "responses_304"


@dataclass(frozen=True)
class Missing(Outcome):
    """Evidence the page is gone: a 404/410, a redirect out of the source, or a URL now
    outside the source's scope (not requested)."""

    reason: str = ""
    counter: ClassVar[str | None] = "responses_404"


@dataclass(frozen=True)
class Failed(Outcome):
    """The page could not be checked; its last good content stays (see
    :func:`ragsync.policy.failure_step`)."""

    reason: str = ""
    # See ragsync.policy.classify; "parse_failure" after extraction; "outage" / "held": not
    # the page, or a change waiting for confirmation (ragsync.pipeline.outages).
    verdict: str | None = None
    transient: bool = False
    pause_until: float | None = None  # Unix time the host is paused until (Retry-After etc.)
    held: Held | None = None  # what the page served that is held back
    outage: str = ""  # the outage page a page's own response was ("a bot challenge …")
    answered: str | None = None  # a held page's response counter: what came over the wire

    def response_counter(self) -> str | None:
        return self.answered


@dataclass(frozen=True)
class Deleted(Outcome):
    """The source says the record is deleted (an API's deleted flag): authoritative."""


@dataclass(frozen=True)
class Skipped(Outcome):
    """Not requested: robots.txt disallows it, its host is paused past ``max_pause_wait``, or it
    lies outside the source's scope; or a crawled page never indexed, read for its links only:
    it asks not to be indexed (``noindex``), or it is a file, not a text page (``not_text``), or
    it is a crawl's start page that redirects temporarily to the site's pages (``entry``: its
    one link is the redirect's target)."""

    why: Literal["disallowed", "deferred", "out_of_scope", "noindex", "not_text", "entry"] = (
        "disallowed"
    )
    reason: str = ""

    def response_counter(self) -> str | None:
        return {
            "disallowed": "robots_disallowed",
            "deferred": "deferred",
            "noindex": "noindex",
            "not_text": "not_text",
            "entry": None,  # the entry's own redirect: no failure, nothing retried
        }.get(self.why, "out_of_scope")


@dataclass(frozen=True)
class Moving(Outcome):
    """A permanent move to ``moved_to`` not yet confirmed: evidence only, the record keeps its
    content. ``step`` is the missing-page rule's ``(observations, since)``."""

    step: tuple[int, float] = field(default=(0, 0.0))


@dataclass(frozen=True)
class MovedOnly(Outcome):
    """A confirmed move whose target's content is handled elsewhere (by its own page in the
    batch, or by the worker holding it): only the old record (``moved_from``) is retired."""


@dataclass(frozen=True)
class Duplicate(MovedOnly):
    """A page whose content another record of its source holds (``page`` is that record's):
    stored once, its URL an alias of that record (``moved_from`` retired after the commit).
    ``answered`` is the response counter of the check that found it; ``served``, the
    ``(content hash, title)`` the copy's URL served (what its re-verification compares)."""

    answered: str | None = None
    served: tuple[str, str] | None = None

    def count(self, counters: Counters) -> None:
        super().count(counters)
        counters.duplicates += 1

    def response_counter(self) -> str | None:
        return self.answered


def stored_content(document: Document) -> Extracted:
    """The content a record holds, as if it had just been extracted."""
    return Extracted(
        document["title"] or "",
        document["markdown"] or "",
        document["content_hash"] or "",
        document["extractor"] or "",
    )
