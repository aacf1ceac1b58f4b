"""The ``leases`` table: named leases (a source's listing, the journal applier, the targeted
queue) and the run lock's rows (README "Run lock"). A lease held past ``lease_until`` is free
for the taking: a killed holder frees it by running out."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from ragsync.clock import iso
from ragsync.state.repository import Repository


class Leases(Repository):
    """Named leases (``state.leases``), with the run lock built on them."""

    def claim(self, name: str, owner: str, *, now: float, until: float) -> bool:
        """Hold lease ``name`` until ``until``, unless another owner holds it past ``now``."""
        with self.state.write():
            cursor = self.db.execute(
                "insert into leases (name, owner, lease_until) values (?, ?, ?) "
                "on conflict (name) do update set owner = excluded.owner, "
                "lease_until = excluded.lease_until "
                "where leases.lease_until < ? or leases.owner = excluded.owner",
                [name, owner, until, now],
            )
        return cursor.rowcount == 1

    def claim_run_lock(
        self,
        name: str,
        owner: str,
        *,
        exclusive: bool,
        now: float,
        until: float,
        host: str,
        pid: int,
    ) -> list[dict[str, Any]]:
        """Take the run lock (README "Run lock"): lease ``run`` (``exclusive``) or
        ``worker:<owner>`` (shared). Returns the live holders in the way, empty when taken.

        Holders whose lease ran out, or whose process on this host is gone, are released, and
        the run rows of every holder that is gone are closed as "interrupted".
        """
        with self.state.write():
            self.state.lock("ragsync-run-lock")
            rows = list(
                self.db.query(
                    "select name, owner, host, pid, started_at, lease_until from leases "
                    "where (name = 'run' or name like 'worker:%') and owner != ?",
                    [owner],
                )
            )
            gone = [row for row in rows if row["lease_until"] < now or holder_dead(row, host)]
            for row in gone:
                self.db.execute(
                    "delete from leases where name = ? and owner = ?", [row["name"], row["owner"]]
                )
            live = [row for row in rows if row not in gone]
            blocking = live if exclusive else [row for row in live if row["name"] == "run"]
            if blocking:
                return [
                    {k: row[k] for k in ("name", "owner", "host", "pid", "started_at")}
                    for row in blocking
                ]
            self.db.execute(
                "insert into leases (name, owner, lease_until, host, pid, started_at) "
                "values (?, ?, ?, ?, ?, ?) on conflict (name) do update set "
                "owner = excluded.owner, lease_until = excluded.lease_until, "
                "host = excluded.host, pid = excluded.pid, started_at = excluded.started_at",
                [name, owner, until, host, pid, iso(time.time())],
            )
            self.state.runs.close_orphans(now)
        return []

    def renew(self, name: str, owner: str, until: float) -> None:
        """Extend lease ``name`` to ``until`` if ``owner`` still holds it."""
        with self.state.write():
            self.db.execute(
                "update leases set lease_until = ? where name = ? and owner = ?",
                [until, name, owner],
            )

    def release(self, name: str, owner: str) -> None:
        """Give lease ``name`` back (nothing happens when ``owner`` no longer holds it)."""
        with self.state.write():
            self.db.execute("delete from leases where name = ? and owner = ?", [name, owner])

    def list_live(self, now: float) -> dict[str, str]:
        """``{lease name: owner}`` of the leases not expired at ``now``."""
        sql = "select name, owner from leases where lease_until >= ?"
        return {row["name"]: row["owner"] for row in self.db.query(sql, [now])}

    def renew_all(self, owner: str, until: float) -> None:
        """Extend every lease and work-queue claim ``owner`` holds (its heartbeat)."""
        with self.state.write():
            self.db.execute("update leases set lease_until = ? where owner = ?", [until, owner])
            self.db.execute("update work set lease_until = ? where owner = ?", [until, owner])

    def release_all(self, owner: str) -> None:
        """Hand back everything ``owner`` holds: leases, claimed pages, host slots."""
        with self.state.write():
            self.db.execute("delete from leases where owner = ?", [owner])
            self.db.execute(
                "update work set owner = null, lease_until = null where owner = ?", [owner]
            )
            self.db.execute("delete from host_slots where owner = ?", [owner])

    def remove_all(self) -> None:
        """Forget every lease (a dry run's private copy of a state another process holds)."""
        with self.state.write():
            self.db.execute("delete from leases")


def holder_dead(lease: Mapping[str, Any], host: str) -> bool:
    """Whether a lease's holder was a process on ``host`` that no longer exists (its lease may
    not have run out yet: a process on another machine can only be waited out)."""
    if lease["host"] != host or not lease["pid"]:
        return False
    try:
        os.kill(lease["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, under another user
        return False
    return False
