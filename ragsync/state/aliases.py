"""The ``aliases`` table: record keys that now resolve to another record (a moved page)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ragsync.models import DocumentStatus
from ragsync.state.repository import Repository


class Asked(NamedTuple):
    """An alias asked again, with what makes the request conditional (README "Identity")."""

    target: str  # the record key it stands for
    etag: str | None  # the validators to send: a copy's own, a move's target's
    last_modified: str | None
    copy_of: tuple[str, str] | None  # a copy's (content hash, title); None for a move


class Aliases(Repository):
    """``alias_key`` → ``doc_key`` (``state.aliases``): a URL that redirects, or declares a
    canonical, to a page indexed under another key."""

    def put(self, alias: Mapping[str, Any]) -> None:
        """Add or replace one alias: ``{alias_key, doc_key, url, at}``."""
        with self.state.write():
            self.db.table("aliases").upsert(alias, pk="alias_key")

    def targets(self, source_id: str) -> dict[str, str]:
        """``{alias record key: target record key}`` for one source."""
        sql = "select alias_key, doc_key from aliases where alias_key like ?"
        return {r["alias_key"]: r["doc_key"] for r in self.db.query(sql, [f"{source_id}:%"])}

    def targets_of(self, alias_keys: Sequence[str]) -> dict[str, str]:
        """``{alias record key: target record key}`` for those of ``alias_keys`` that are
        aliases (a crawl's start pages: not the whole source's table)."""
        sql = "select alias_key, doc_key from aliases where alias_key in ({marks})"
        return {r["alias_key"]: r["doc_key"] for r in self.state.query_in(sql, alias_keys)}

    def verified(self, source_id: str) -> dict[str, tuple[str, str]]:
        """``{alias record key: (target record key, verified_at)}`` for one source; an alias
        never re-verified counts from when it was made ("": due now). An alias whose target
        is suspected missing or tombstoned is left out: its own URL is asked again, since it
        may serve the content its target no longer does."""
        sql = (
            "select a.alias_key, a.doc_key, a.at, a.verified_at from aliases a "
            "left join documents d on d.doc_key = a.doc_key "
            "where a.alias_key like ? and (d.status is null or d.status = ?)"
        )
        return {
            r["alias_key"]: (
                r["doc_key"],
                r["at"] or "" if r["verified_at"] is None else r["verified_at"],
            )
            for r in self.db.query(sql, [f"{source_id}:%", DocumentStatus.ACTIVE])
        }

    def asked_again(self, alias_keys: Sequence[str]) -> dict[str, Asked]:
        """Those of ``alias_keys`` whose URL can be asked again conditionally: a copy whose
        target still holds the content and title it served, with the validators its URL
        answered; a moved page, with its target's ETag (its redirect leads there, and a 304
        says the target is unchanged). Never a target's Last-Modified: a date is compared,
        not matched, and an old URL serving an older page of its own again would answer 304
        to it. Their target is active."""
        sql = (
            "select a.alias_key, a.doc_key, a.content_hash, a.title, a.etag, a.last_modified, "
            "d.etag as target_etag "
            "from aliases a join documents d on d.doc_key = a.doc_key "
            "where d.status = ? and (a.content_hash is null "
            "or (a.content_hash = d.content_hash and a.title = d.title)) "
            "and a.alias_key in ({marks})"
        )
        asked: dict[str, Asked] = {}
        for r in self.state.query_in(sql, alias_keys, [DocumentStatus.ACTIVE]):
            copy = r["content_hash"] is not None
            etag, modified = (r["etag"], r["last_modified"]) if copy else (r["target_etag"], None)
            if etag or modified:
                copy_of = (r["content_hash"], r["title"]) if copy else None
                asked[r["alias_key"]] = Asked(r["doc_key"], etag, modified, copy_of)
        return asked

    def forget(self, alias_key: str) -> None:
        """If ``alias_key`` is an alias, its URL answered 404/410: it stands for nothing any
        more (listed again, it is a URL never indexed that answered 404). Found by a read, so
        that the many such URLs that are no alias take no write lock."""
        if self.targets_of([alias_key]):
            with self.state.write():
                self.db.execute("delete from aliases where alias_key = ?", [alias_key])

    def mark_verified(self, alias_keys: Sequence[str], at: str) -> None:
        """The aliases' URLs were requested again at ``at`` (re-verified)."""
        sql = "update aliases set verified_at = ? where alias_key in ({marks})"
        self.state.execute_in(sql, alias_keys, [at])

    def unverify_copies(self, doc_key: str, content_hash: str, title: str) -> None:
        """The record ``doc_key`` now holds another content or title: its copies serve what it
        no longer holds, so they are due again and asked in full (a copy's page would
        otherwise be indexed nowhere until its re-verification)."""
        # Found by a read: most records that change have no copy, and take no write lock.
        sql = (
            "select alias_key from aliases where doc_key = ? and content_hash is not null "
            "and (content_hash <> ? or title <> ?)"
        )
        for row in self.db.query(sql, [doc_key, content_hash, title]):
            self.unverify(row["alias_key"])

    def unverify(self, alias_key: str) -> None:
        """The copy's URL serves what its target no longer holds (a 304 after its holder
        changed, or its holder changed since): it is due again, and asked in full, since its
        stored validators describe content no record holds."""
        sql = (
            "update aliases set verified_at = '', etag = null, last_modified = null "
            "where alias_key = ?"
        )
        with self.state.write():
            self.db.execute(sql, [alias_key])
