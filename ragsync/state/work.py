"""The work queue (``work``): pages due for a check, claimed by workers with a lease; a claim
whose lease runs out (a killed worker) comes back to the queue (README "Scaling out")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragsync.state.repository import Repository


class WorkQueue(Repository):
    """The shared work queue (``state.work``). A claim is renewed by its owner's heartbeat
    (:meth:`ragsync.state.leases.Leases.renew_all`) and ends with :meth:`finish`."""

    def add(self, source_id: str, items: Sequence[dict[str, Any]], at: str) -> None:
        """Queue pages for any worker to check, in the given order; a page already queued
        keeps its place (and its claim). Each item: ``doc_key``, ``url``, ``lastmod``,
        ``record``, ``unlisted`` (see :func:`ragsync.models.work_item`)."""
        if not items:
            return
        with self.state.write():
            first = self.db.execute("select coalesce(max(position), 0) from work").fetchone()[0]
            rows = [
                {**item, "source_id": source_id, "position": first + n, "enqueued_at": at}
                for n, item in enumerate(items, 1)
            ]
            self.db.table("work").insert_all(rows, pk="doc_key", ignore=True)

    def add_due(self, source_id: str, now: str, at: str) -> int:
        """Queue the pages of ``source_id`` whose revisit or retry time has come (not held
        back, not queued already) in one statement, so a page a worker commits at the same
        moment is either still queued or no longer due; return how many were queued.

        A source with pages still in the queue is not read again until they are checked:
        when every page is due at once (a full revalidation), reading them all at every step
        of every worker cost O(pages due) per batch (33 ms per call at 100,000 pages, README
        "Scaling out"). A page that comes due meanwhile is queued once the queue drains."""
        with self.state.write():
            queued_already = "select 1 from work where source_id = ? limit 1"
            if self.db.execute(queued_already, [source_id]).fetchone() is not None:
                return 0
            # The due pages are found through the (source_id, next_check_at) index and the
            # retries due, then joined to their documents: written as one condition with an OR
            # (due, or a retry due), PostgreSQL read every document of the source, at every
            # step of every worker (README "Scaling out").
            cursor = self.db.execute(
                "insert into work (doc_key, source_id, position, url, unlisted, enqueued_at) "
                "select d.doc_key, d.source_id, 0, d.canonical_url, 0, ? from ("
                "select doc_key from documents where source_id = ? and next_check_at <= ? "
                "union select doc_key from fetch_attempts where state = 'retrying' "
                "and next_retry_at <= ?) due join documents d on d.doc_key = due.doc_key "
                "where d.source_id = ? and d.status != 'tombstoned' and d.extractor != 'record' "
                "and not exists (select 1 from work w where w.doc_key = d.doc_key) "
                "and not exists (select 1 from fetch_attempts f where f.doc_key = d.doc_key "
                "and (f.state in ('dead', 'attention') or "
                "(f.state = 'retrying' and f.next_retry_at > ?))) "
                "on conflict (doc_key) do nothing",
                [at, source_id, now, now, source_id, now],
            )
            queued = cursor.rowcount
            cursor = self.db.execute(  # pages that failed before they were ever indexed
                "insert into work (doc_key, source_id, position, url, unlisted, enqueued_at) "
                "select f.doc_key, f.source_id, 0, f.url, 0, ? from fetch_attempts f "
                "where f.source_id = ? and f.state = 'retrying' and f.next_retry_at <= ? "
                "and f.doc_key not like ? "
                "and not exists (select 1 from documents d where d.doc_key = f.doc_key) "
                "and not exists (select 1 from work w where w.doc_key = f.doc_key) "
                "on conflict (doc_key) do nothing",
                [at, source_id, now, f"{source_id}:id:%"],
            )
        return queued + cursor.rowcount

    def claim(self, owner: str, *, now: float, until: float, limit: int) -> list[dict[str, Any]]:
        """Claim up to ``limit`` queued pages nobody holds (or whose claim expired), in queue
        order. Concurrent claimers never get the same page (SKIP LOCKED on PostgreSQL)."""
        with self.state.write():
            rows = self.db.query(
                "update work set owner = ?, lease_until = ? where doc_key in (select doc_key "
                "from work where lease_until is null or lease_until < ? order by position "
                "limit ?" + (" for update skip locked" if self.state.postgres else "") + ") "
                "returning doc_key, source_id, position, url, lastmod, record, unlisted",
                [owner, until, now, limit],
            )
            rows = list(rows)
        return sorted(rows, key=lambda row: row["position"])

    def claim_page(
        self, doc_key: str, source_id: str, owner: str, *, now: float, until: float, at: str
    ) -> bool:
        """Claim one page for ``owner`` whether or not it is queued (the target of a move):
        False when another worker holds it. The claim ends with :meth:`finish`."""
        with self.state.write():
            cursor = self.db.execute(
                "insert into work (doc_key, source_id, position, url, unlisted, owner, "
                "lease_until, enqueued_at) values (?, ?, 0, ?, 0, ?, ?, ?) "
                "on conflict (doc_key) do update set owner = excluded.owner, "
                "lease_until = excluded.lease_until "
                "where work.owner is null or work.lease_until < ? or work.owner = excluded.owner",
                [doc_key, source_id, doc_key.split(":", 1)[1], owner, until, at, now],
            )
        return cursor.rowcount == 1

    def finish(self, owner: str, doc_keys: Sequence[str]) -> None:
        """Drop checked pages from the queue (only those ``owner`` still holds)."""
        sql = "delete from work where owner = ? and doc_key in ({marks})"
        self.state.execute_in(sql, doc_keys, [owner])

    def count(self) -> int:
        """How many pages are queued, claimed or not."""
        return self.db.execute("select count(*) from work").fetchone()[0]
