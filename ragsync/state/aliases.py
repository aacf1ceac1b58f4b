"""The ``aliases`` table: record keys that now resolve to another record (a moved page)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragsync.models import DocumentStatus
from ragsync.state.repository import Repository


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
        never re-verified counts from when it was made. An alias whose target is suspected
        missing or tombstoned is left out: its own URL is asked again, since it may serve
        the content its target no longer does."""
        sql = (
            "select a.alias_key, a.doc_key, a.at, a.verified_at from aliases a "
            "left join documents d on d.doc_key = a.doc_key "
            "where a.alias_key like ? and (d.status is null or d.status = ?)"
        )
        return {
            r["alias_key"]: (r["doc_key"], r["verified_at"] or r["at"] or "")
            for r in self.db.query(sql, [f"{source_id}:%", DocumentStatus.ACTIVE])
        }

    def mark_verified(self, alias_keys: Sequence[str], at: str) -> None:
        """The aliases' URLs were requested again at ``at`` (re-verified)."""
        sql = "update aliases set verified_at = ? where alias_key in ({marks})"
        self.state.execute_in(sql, alias_keys, [at])
