"""Duplicates: two URLs of a source's host that serve the same page are stored once.

A page whose extracted content and title a record of its source on the same host holds
already — a record checked in this same pass and found serving it, or, in the same window, the
record indexed with it already, else the page with the shortest URL — is not indexed a second
time: its URL becomes an alias of that record, as a confirmed
move would make it (README "Identity"). The alias is re-verified like any other: after
``max_interval`` its URL is requested again, and if it then serves a page of its own, its
record comes back; while its target is suspected missing or gone, its own URL is asked. A page
that had a record of its own retires it; its content stays in the index under the record that
holds it, so nothing is lost.

Only records checked in this pass can hold a page: a record not yet checked may be about to
move away (a renamed page's old URL holds the content its new URL serves, until its 301 is
seen), and the URL that stays is the one to keep. The exceptions: an alias asked again, whose
page the record it stands for holds (:func:`alias_targets`), and a tombstoned page served
again, whose page an active record may have taken while it was gone (:func:`comes_back`).
And a record indexed before the pass that still serves its page when it is checked takes it
back from one created or restored earlier in the pass (:func:`reclaims`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence, Set

from ragsync.config import SourceConfig
from ragsync.models import DocumentStatus
from ragsync.pipeline.context import Engine
from ragsync.pipeline.outages import Watch
from ragsync.pipeline.outcomes import (
    Changed,
    Document,
    Duplicate,
    NotModified,
    Origin,
    Outcome,
    Unchanged,
)
from ragsync.urls import host_of

Holder = tuple[str, str, Document | None]
"""``(record key, canonical URL, its row)`` of the record holding a content."""
Content = tuple[str, str, str]
"""``(host, content hash, title)``: what two URLs serving one page have in common."""


def store_once(
    engine: Engine,
    source: SourceConfig,
    outcomes: Sequence[Outcome],
    *,
    checked_since: str,
    fresh: Set[str] = frozenset(),
    watch: Watch | None = None,
) -> list[Outcome]:
    """The outcomes with every page whose content and title another record holds turned into
    a :class:`Duplicate` of that record.

    Args:
        engine: the syncer's parts.
        source: the pages' source.
        outcomes: a window's outcomes, moves resolved.
        checked_since: records of the source last checked at or after this time (the pass's
            start) may hold a page of the window; ``""``: any active record.
        fresh: the records created or restored earlier in this pass: one holding the page of
            a record indexed before the pass yields it (see :func:`reclaims`).
        watch: the source's outage watch: a record with content of its own turns into a copy
            only once that is confirmed, as the missing-page rule confirms an absence
            (:meth:`~ragsync.pipeline.outages.Watch.hold`); until then it keeps its content.

    The holder is an active record on the page's host outside the window checked since
    ``checked_since`` (for a tombstoned page served again, any active one), else the page
    of the window that holds it already, else the one with the shortest URL. API records
    and pages the listing left out are never merged.
    """
    served = [(o, content) for o in outcomes if (content := served_content(o)) is not None]
    if not served:
        return list(outcomes)
    window = {o.page.doc_key for o in outcomes}
    hashes = sorted({digest for _, (_, digest, _) in served})
    holders = holding_outside(
        [
            *engine.state.documents.holding(source.id, hashes, checked_since),
            *alias_targets(engine, sorted(window)),
        ],
        window,
    )
    # A tombstoned page served again may be a copy of an active record not checked yet: it
    # holds the page already (see comes_back).
    returning = sorted({content[1] for o, content in served if comes_back(o)})
    standing = (
        holding_outside(engine.state.documents.holding(source.id, returning, ""), window)
        if returning and checked_since
        else {}
    )
    duplicates: dict[int, Outcome] = {}
    yielded: list[Outcome] = []  # records of this pass retired as copies of older ones
    for outcome, content in sorted(served, key=lambda item: claim_order(*item)):
        page = outcome.page
        holder = holders.get(content)
        if holder is None and comes_back(outcome) and content in standing:
            holder = holders[content] = standing[content]
        if holder is not None and holder[0] in fresh and reclaims(outcome, fresh):
            taken = holder[2]  # the record that took the page earlier in the pass
            if taken is not None:
                yielded.append(Duplicate(page, moved_from=taken, served=content[1:]))
                holder = None
        if holder is None:
            if is_copy_unchanged(outcome):  # its holder no longer holds what it served:
                continue  # asked in full (commit_one)
            holder = holders[content] = (page.doc_key, page.url, page.document)
        key, url, document = holder
        if key == page.doc_key:
            continue
        if watch is not None and watch.keeps_content(outcome):
            why = f"serves the same page as {url}"
            waiting = watch.hold(outcome, why, content[1], retires=True)
            if waiting is not outcome:
                duplicates[id(outcome)] = waiting
                continue
        origin: Document | Origin = page.document or Origin(
            doc_key=page.doc_key, canonical_url=page.url
        )
        held = dataclasses.replace(page, doc_key=key, url=url, document=document)
        duplicates[id(outcome)] = Duplicate(
            held,
            outcome.exchange,
            moved_from=origin,
            links=outcome.links,
            answered=outcome.response_counter(),
            served=content[1:],
        )
    return [*(duplicates.get(id(o), o) for o in outcomes), *yielded]


def holding_outside(rows: Sequence[Document], window: set[str]) -> dict[Content, Holder]:
    """The holder of each content among ``rows`` (the first of each), leaving out the records
    of the window: one the window changes may no longer hold it."""
    holders: dict[Content, Holder] = {}
    for row in rows:
        if row["doc_key"] not in window:
            url = row["canonical_url"]
            content = (host_of(url), row["content_hash"] or "", row["title"] or "")
            holders.setdefault(content, (row["doc_key"], url, row))
    return holders


def reclaims(outcome: Outcome, fresh: Set[str]) -> bool:
    """Whether the page is indexed under a record active before this pass: it keeps its page
    from a record that took it earlier in the pass (created or restored), which is retired as
    its copy. A new-user trial: libffi's new c.html, in the window before
    The-Closure-API.html's, took its page (that record tombstoned, every point deleted and
    written again); npm's npm-global.html, a copy of folders.html, both edited alike, came
    first, was restored, and folders.html was retired as its copy. (A page renamed without a
    redirect is not one: its old URL answers 404, and serves nothing to reclaim.)"""
    document = outcome.page.document
    return (
        document is not None
        and document["status"] == DocumentStatus.ACTIVE
        and outcome.page.doc_key not in fresh
    )


def took_page(outcome: Outcome) -> bool:
    """A record created or restored by this outcome (what :func:`store_once` calls fresh)."""
    document = outcome.page.document
    return isinstance(outcome, Changed) and (
        document is None or document["status"] == DocumentStatus.TOMBSTONED
    )


def comes_back(outcome: Outcome) -> bool:
    """A tombstoned page served again. It may be a copy of an active record that took its
    page while it was gone, and that record is kept though not checked yet in this pass:
    libffi's c.html, served again as The-Closure-API.html, came back before its holder's
    window, took the page back, and the holder was retired as its copy. (A page renamed
    away and back comes back this way too: a copy of the record it was renamed to, until
    that record's redirect back is confirmed as a move, which gives the page back.)"""
    document = outcome.page.document
    return (
        isinstance(outcome, Changed)
        and document is not None
        and document["status"] == DocumentStatus.TOMBSTONED
    )


def alias_targets(engine: Engine, keys: Sequence[str]) -> list[Document]:
    """The active records that those of ``keys`` that are aliases stand for: an alias asked
    again (re-verified) that still serves its target's page stays its alias, whether or not
    the target was checked in this pass. Before, a copy re-verified before its holder took
    the page back, and the holder, checked later in the pass, was retired as its copy: a
    removed and a restored change, and every point rewritten, at each re-verification."""
    targets = engine.state.aliases.targets_of(keys)
    if not targets:
        return []
    rows = engine.state.documents.get_many(sorted(set(targets.values())))
    return [row for row in rows.values() if row["status"] == DocumentStatus.ACTIVE]


def served_content(outcome: Outcome) -> Content | None:
    """``(host, content hash, title)`` of the page an outcome found served under its own URL,
    or None (not served, moved, an API record, or left out by the listing). Pages on two
    hosts are never merged, as a ``rel=canonical`` to another host moves nothing (README
    "Identity")."""
    page = outcome.page
    if outcome.moved_to or outcome.moved_from or page.prunable or ":id:" in page.doc_key:
        return None
    if is_copy_unchanged(outcome):
        assert page.copy_of is not None
        return host_of(page.url), *page.copy_of
    if isinstance(outcome, Changed) and outcome.extracted is not None:
        return host_of(page.url), outcome.extracted.content_hash, outcome.extracted.title
    document = page.document
    if (
        isinstance(outcome, Unchanged | NotModified)
        and document is not None
        and document["status"] == DocumentStatus.ACTIVE
    ):
        return host_of(page.url), document["content_hash"] or "", document["title"] or ""
    return None


def is_copy_unchanged(outcome: Outcome) -> bool:
    """A copy's URL asked again with the validators of what it served, answering 304."""
    return isinstance(outcome, NotModified) and outcome.page.copy_of is not None


def claim_order(outcome: Outcome, content: Content) -> tuple[bool, int, int, str]:
    """The order in which a window's pages claim their content: the record that holds it
    already first (the npm docs' package-json.html, indexed, was retired as a copy of
    npm-json.html when that shorter URL came up in its window), then a record indexed with
    another content (edited to this one), then the shortest URL; a copy's 304 after every
    page that may hold it."""
    document = outcome.page.document
    if document is None or document["status"] != DocumentStatus.ACTIVE:
        rank = 2
    elif (document["content_hash"], document["title"]) == content[1:]:
        rank = 0
    else:
        rank = 1
    return is_copy_unchanged(outcome), rank, *shortest(outcome.page.url)


def shortest(url: str) -> tuple[int, str]:
    """The order in which URLs serving the same page are preferred: the shortest first."""
    return len(url), url
