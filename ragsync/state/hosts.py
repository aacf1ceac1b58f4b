"""Politeness shared by every process (README "Politeness"): ``hosts`` (pauses, the next start
a host allows, its robots Crawl-delay, whether its validators are trusted) and ``host_slots``
(one leased row per request in flight, so a killed worker frees its slots)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from typing import Any

from ragsync.state.repository import Repository


class Hosts(Repository):
    """Per-host pauses, delays, request slots and validator trust (``state.hosts``)."""

    def watched(self) -> dict[str, bool]:
        """``{host: whether its validators are distrusted}`` for the hosts with pages caught
        changing under their validators (README "Validators that lie"): the pages of a
        distrusted host are asked in full."""
        sql = (
            "select host, validators_distrusted_at from hosts "
            "where validator_lies > 0 or validators_distrusted_at is not null"
        )
        return {
            row["host"]: row["validators_distrusted_at"] is not None for row in self.db.query(sql)
        }

    def caught_lie(self, host: str, url: str, *, at: str, distrust_after: int) -> int:
        """Count a page of ``host`` (``url``) caught changing under the validators it had, and
        return how many there were since its validators were last shown right: at
        ``distrust_after``, its validators are distrusted."""
        with self.state.write():
            self.db.execute(
                "insert into hosts (host) values (?) on conflict (host) do nothing", [host]
            )
            self.db.execute(
                "update hosts set validator_lies = coalesce(validator_lies, 0) + 1, "
                "validator_lie_url = ?, validator_lie_at = ?, validators_distrusted_at = case "
                "when validators_distrusted_at is null and coalesce(validator_lies, 0) + 1 >= ? "
                "then ? else validators_distrusted_at end where host = ?",
                [url, at, distrust_after, at, host],
            )
            row = self.db.execute(
                "select validator_lies from hosts where host = ?", [host]
            ).fetchone()
        return int(row[0])

    def shown_right(self, hosts: Iterable[str]) -> None:
        """A page of each of ``hosts`` changed and came with new validators, as they should:
        its count of lies starts again from none, and its validators are trusted."""
        keys = sorted(set(hosts))
        if not keys:
            return
        self.state.execute_in(
            "update hosts set validator_lies = 0, validator_lie_url = null, "
            "validator_lie_at = null, validators_distrusted_at = null where host in ({marks}) "
            "and (validator_lies > 0 or validators_distrusted_at is not null)",
            keys,
        )

    def list_validators(self) -> builtins.list[dict[str, Any]]:
        """Hosts with pages caught changing under their validators: ``host``, ``lies``,
        ``last_lie_url``, ``last_lie_at``, ``distrusted_since`` (None while still trusted)."""
        sql = (
            "select host, validator_lies as lies, validator_lie_url as last_lie_url, "
            "validator_lie_at as last_lie_at, validators_distrusted_at as distrusted_since "
            "from hosts where validator_lies > 0 or validators_distrusted_at is not null "
            "order by host"
        )
        return list(self.db.query(sql))

    def list_pauses(self) -> dict[str, float]:
        """``{host: Unix time before which no request may go}`` for every recorded pause."""
        sql = "select host, paused_until from hosts where paused_until is not null"
        return {row["host"]: row["paused_until"] for row in self.db.query(sql)}

    def pause(self, host: str, until: float, reason: str, at: str) -> None:
        """Pause ``host`` until ``until``, replacing any pause it had."""
        with self.state.write():
            self.db.table("hosts").upsert(
                {"host": host, "paused_until": until, "reason": reason, "updated_at": at},
                pk="host",
            )

    def pause_at_least(self, host: str, until: float, reason: str, at: str) -> float:
        """Pause ``host`` until ``until`` unless a longer pause runs; return the pause's end."""
        with self.state.write():
            self.db.execute(
                "insert into hosts (host, paused_until, reason, updated_at) values (?, ?, ?, ?) "
                "on conflict (host) do update set paused_until = case when "
                "coalesce(hosts.paused_until, 0) >= excluded.paused_until then hosts.paused_until "
                "else excluded.paused_until end, reason = excluded.reason, "
                "updated_at = excluded.updated_at",
                [host, until, reason, at],
            )
            return self.paused_until(host)

    def paused_until(self, host: str) -> float:
        """When ``host``'s pause ends (Unix time; 0.0 when it never had one)."""
        row = self.db.execute("select paused_until from hosts where host = ?", [host]).fetchone()
        return float(row[0] or 0.0) if row else 0.0

    def put_crawl_delay(self, host: str, seconds: float) -> None:
        """Record ``host``'s robots Crawl-delay."""
        with self.state.write():
            self.db.execute(
                "insert into hosts (host, crawl_delay) values (?, ?) "
                "on conflict (host) do update set crawl_delay = excluded.crawl_delay",
                [host, seconds],
            )

    def claim_slot(
        self,
        host: str,
        owner: str,
        *,
        limit: int,
        min_delay: float,
        clock: Callable[[], float],
        lease: float,
    ) -> tuple[int, float, float, float] | None:
        """One request slot of ``host`` for ``owner``: ``(slot, start, paused_until, now)``,
        or None while ``limit`` unexpired slots are taken. ``clock`` is read once the host's row
        is locked, so time spent waiting for the lock does not eat into the delay.

        ``start`` is the time the request may start: the host's next free start time, which
        moves on by its delay (``min_delay``, or its robots Crawl-delay when longer). The caller
        checks ``paused_until`` against what it is willing to wait and gives the slot back.
        """
        with self.state.write():
            self.db.execute(
                "insert into hosts (host) values (?) on conflict (host) do nothing", [host]
            )
            paused, next_start, crawl_delay = self.db.execute(
                "select paused_until, next_start, crawl_delay from hosts where host = ?"
                + self.state.for_update,
                [host],
            ).fetchone()
            now = clock()
            taken = {
                row[0]
                for row in self.db.execute(
                    "select slot from host_slots where host = ? and lease_until >= ?", [host, now]
                ).fetchall()
            }
            free = [slot for slot in range(limit) if slot not in taken]
            if not free:
                return None
            start = max(now, paused or 0.0, next_start or 0.0)
            delay = max(min_delay, crawl_delay or 0.0)
            self.db.execute("update hosts set next_start = ? where host = ?", [start + delay, host])
            self.db.execute(
                "insert into host_slots (host, slot, owner, lease_until) values (?, ?, ?, ?) "
                "on conflict (host, slot) do update set owner = excluded.owner, "
                "lease_until = excluded.lease_until",
                [host, free[0], owner, now + lease],
            )
            return free[0], start, float(paused or 0.0), now

    def release_slot(self, host: str, slot: int, owner: str) -> None:
        """Give a request slot back (nothing happens when ``owner`` no longer holds it)."""
        with self.state.write():
            self.db.execute(
                "delete from host_slots where host = ? and slot = ? and owner = ?",
                [host, slot, owner],
            )
