"""Runs and their schedule: ``runs`` (one row per run or worker pass), ``schedule`` (when each
source was last listed, whether completely, and when it is due again) and ``changes`` (the
append-only change log runs write through :meth:`ragsync.state.index.Index.commit_document`)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ragsync.clock import iso
from ragsync.state.leases import holder_dead
from ragsync.state.repository import Repository
from ragsync.state.rows import ChangeRow


class Runs(Repository):
    """Runs, the source schedule and the change log (``state.runs``)."""

    def add(self, run_id: str, started_at: str, *, owner: str | None = None) -> None:
        """Record a run as running; ``owner`` is the run-lock holder (see
        :meth:`close_orphans`)."""
        with self.state.write():
            self.db.table("runs").insert(
                {"run_id": run_id, "started_at": started_at, "status": "running", "owner": owner},
                pk="run_id",
            )

    def finish(
        self, run_id: str, *, finished_at: str, ok: bool, counters: dict, sources: dict
    ) -> None:
        with self.state.write():
            self.db.table("runs").update(
                run_id,
                {
                    "finished_at": finished_at,
                    "ok": int(ok),
                    "status": "ok" if ok else "failed",
                    "counters": json.dumps(counters),
                    "sources": json.dumps(sources),
                },
            )

    def list_running(self, now: float, host: str) -> list[dict[str, Any]]:
        """Runs recorded as running, each with ``alive``: whether its holder still holds
        the run lock (a dead one is closed as "interrupted" by the next run)."""
        holders = {
            row["owner"]: row
            for row in self.db.query(
                "select owner, host, pid from leases where lease_until >= ?", [now]
            )
        }
        found = []
        for row in self.db.query(
            "select run_id, started_at, owner from runs where status = 'running' "
            "order by started_at"
        ):
            holder = holders.get(row["owner"])
            found.append({**row, "alive": holder is not None and not holder_dead(holder, host)})
        return found

    def list_interrupted(self, limit: int = 5) -> list[dict[str, Any]]:
        """The latest runs closed as "interrupted" (their process died mid-run)."""
        sql = (
            "select run_id, started_at, finished_at, owner from runs "
            "where status = 'interrupted' order by started_at desc limit ?"
        )
        return list(self.db.query(sql, [limit]))

    def close_orphans(self, now: float) -> int:
        """Close as "interrupted" the running runs whose owner holds no live lease (a killed
        `run` or worker); returns how many."""
        with self.state.write():
            cursor = self.db.execute(
                "update runs set status = 'interrupted', ok = 0, finished_at = ? "
                "where status = 'running' and (owner is null or owner not in "
                "(select owner from leases where lease_until >= ?))",
                [iso(time.time()), now],
            )
        return cursor.rowcount

    def get_last(self) -> dict[str, Any] | None:
        """The latest finished run, or None."""
        sql = "select * from runs where finished_at is not null order by started_at desc limit 1"
        return next(iter(self.db.query(sql)), None)

    def list_changes(self, since: str | None = None) -> list[ChangeRow]:
        """The change log, oldest first; with ``since``, the changes at or after it."""
        if since is None:
            return list(self.db.query("select * from changes order by id"))
        return list(self.db.query("select * from changes where at >= ? order by id", [since]))

    # -- the source schedule ----------------------------------------------------------------

    def next_run_at(self, source_id: str) -> str | None:
        """When ``source_id`` is due to be listed again, if it ever was listed."""
        schedule = self.schedule_of(source_id)
        return schedule[1] if schedule else None

    def schedule_of(self, source_id: str) -> tuple[str, str] | None:
        """``(last listing, next listing)`` of ``source_id``, if it was ever listed."""
        sql = "select last_run_at, next_run_at from schedule where source_id = ?"
        row = self.db.execute(sql, [source_id]).fetchone()
        return (row[0], row[1]) if row else None

    def bring_forward(self, source_id: str, last_run_at: str, next_run_at: str) -> bool:
        """Make ``source_id``'s next listing ``next_run_at`` if it is scheduled later, and its
        last listing was at ``last_run_at`` (not one another process just read); True if so."""
        sql = (
            "update schedule set next_run_at = ? "
            "where source_id = ? and last_run_at = ? and next_run_at > ?"
        )
        with self.state.write():
            cursor = self.db.execute(sql, [next_run_at, source_id, last_run_at, next_run_at])
        return bool(cursor.rowcount)

    def put_source_run(
        self,
        source_id: str,
        last_run_at: str,
        next_run_at: str,
        *,
        incomplete: Sequence[str] = (),
    ) -> None:
        """A source's listing was read: when, when it is due next, and whether it was
        complete (``incomplete`` lists why not)."""
        with self.state.write():
            self.db.table("schedule").upsert(
                {
                    "source_id": source_id,
                    "last_run_at": last_run_at,
                    "next_run_at": next_run_at,
                    "listing_complete": int(not incomplete),
                    "listing_reasons": json.dumps(list(incomplete)) if incomplete else None,
                },
                pk="source_id",
            )

    def get_listing(self, source_id: str) -> dict[str, Any] | None:
        """``{"at", "complete", "reasons"}`` of the source's last listing, or None."""
        sql = (
            "select last_run_at, listing_complete, listing_reasons from schedule "
            "where source_id = ?"
        )
        row = next(iter(self.db.query(sql, [source_id])), None)
        if row is None or row["listing_complete"] is None:
            return None
        return {
            "at": row["last_run_at"],
            "complete": bool(row["listing_complete"]),
            "reasons": json.loads(row["listing_reasons"] or "[]"),
        }

    def next_due(self, source_ids: Sequence[str]) -> str | None:
        """The earliest time a pass over ``source_ids`` has something to do: a listing, a page
        check or a retry — the rows :meth:`ragsync.state.documents.Documents.list_due` would
        return, and nothing a pass never handles (records refreshed by their API, rows of a
        source no longer configured): such a row would keep a daemon passing, idle, forever."""
        if not source_ids:
            return None
        marks = ",".join("?" * len(source_ids))
        sql = (
            f"select min(t) from (select min(next_run_at) as t from schedule "
            f"where source_id in ({marks}) "
            f"union all select min(next_check_at) from documents where source_id in ({marks}) "
            "and status != 'tombstoned' and extractor != 'record' "
            f"union all select min(next_retry_at) from fetch_attempts where source_id in ({marks}) "
            "and state = 'retrying' and doc_key not like source_id || ':id:%') as due"
        )
        ids = list(source_ids)
        return self.db.execute(sql, ids * 3).fetchone()[0]
