"""The ``aliases`` table: record keys that now resolve to another record (a moved page)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ragsync.models import DocumentStatus
from ragsync.state.repository import Repository


class Copy(NamedTuple):
    """What a copy's URL served when it was last found a copy (README "Identity")."""

    etag: str | None
    last_modified: str | None
    content_hash: str
    title: str


class AliasRow(NamedTuple):
    """An alias as the listing sees it (:meth:`Aliases.verified`)."""

    target: str  # the record key it stands for
    verified_at: str  # when its URL was last requested ("": due now)
    copy: Copy | None  # a copy whose target still holds what it served, with validators


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

    def verified(self, source_id: str) -> dict[str, AliasRow]:
        """Each alias of one source, by its record key; an alias never re-verified counts
        from when it was made. An alias whose target is suspected missing or tombstoned is
        left out: its own URL is asked again, since it may serve the content its target no
        longer does."""
        sql = (
            "select a.alias_key, a.doc_key, a.at, a.verified_at, a.etag, a.last_modified, "
            "a.content_hash, a.title, "
            "a.content_hash = d.content_hash and a.title = d.title as held "
            "from aliases a left join documents d on d.doc_key = a.doc_key "
            "where a.alias_key like ? and (d.status is null or d.status = ?)"
        )
        return {
            r["alias_key"]: AliasRow(
                r["doc_key"],
                r["at"] or "" if r["verified_at"] is None else r["verified_at"],
                Copy(r["etag"], r["last_modified"], r["content_hash"], r["title"])
                if r["held"] and (r["etag"] or r["last_modified"])
                else None,
            )
            for r in self.db.query(sql, [f"{source_id}:%", DocumentStatus.ACTIVE])
        }

    def mark_verified(self, alias_keys: Sequence[str], at: str) -> None:
        """The aliases' URLs were requested again at ``at`` (re-verified)."""
        sql = "update aliases set verified_at = ? where alias_key in ({marks})"
        self.state.execute_in(sql, alias_keys, [at])

    def unverify(self, alias_key: str) -> None:
        """The alias's URL answered 304 while its target no longer holds what it served: it is
        due again, and asked in full (its stored validators describe content no record
        holds)."""
        sql = (
            "update aliases set verified_at = '', etag = null, last_modified = null "
            "where alias_key = ?"
        )
        with self.state.write():
            self.db.execute(sql, [alias_key])
