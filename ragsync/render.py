"""What `ragsync status` prints for people (``--json`` prints the report as it is)."""

from __future__ import annotations

from typing import Any

import click


def print_status(report: dict[str, Any], *, table: bool = False) -> None:
    """The status report (see :meth:`ragsync.sync.Syncer.status`) as lines on stdout; with
    ``table``, a per-source summary table too (on a terminal)."""
    last = report["last_run"]
    if last:
        outcome = "ok" if last["ok"] else "finished with errors"
        if last["status"] == "interrupted":
            outcome = "interrupted (its process died mid-run; the journal replayed its work)"
        click.echo(f"last run {last['run_id']} ({last['finished_at']}): {outcome}")
    elif not report["running"]:
        click.echo("no run yet: `ragsync run` starts the first sync")
    for run in report["running"]:
        if run["alive"]:
            click.echo(f"run {run['run_id']} in progress since {run['started_at']}")
        else:
            click.echo(
                f"run {run['run_id']} (started {run['started_at']}) died mid-run: the next "
                "run replays what it left and closes it as interrupted"
            )
    interrupted = report["interrupted_runs"]
    if interrupted and (not last or last["run_id"] != interrupted[0]["run_id"]):
        latest = interrupted[0]
        click.echo(
            f"latest interrupted run: {latest['run_id']} (started {latest['started_at']}, "
            f"closed {latest['finished_at']})"
        )
    points = report["points_in_store"]
    points_text = "unavailable (the store is in use)" if points is None else str(points)
    click.echo(
        f"points in the store: {points_text}; schedule lag: {report['lag_seconds']:.0f} s; "
        f"targeted queue: {report['queue_depth']}"
    )
    if report["pending_journal"]:
        click.echo(f"journal: {report['pending_journal']} operations pending (next run applies)")
    if report["work_queue"] or report["leases"]:
        held = ", ".join(f"{name} by {owner}" for name, owner in sorted(report["leases"].items()))
        click.echo(f"workers: {report['work_queue']} pages queued; leases: {held or 'none'}")
    for host, until in report["host_pauses"].items():
        click.echo(f"host {host} paused until {until} (Retry-After / rate limit)")
    if table:
        status_table(report)
    for source_id, s in report["sources"].items():
        docs = ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in s["documents"].items())
        click.echo(f"\n[{source_id}] {s['kind']}: {docs}")
        if s["oldest_check"]:
            click.echo(
                f"  oldest check: {s['oldest_check']}; lag {s['lag_seconds']:.0f} s; "
                f"points in the store: {s.get('points_in_store', '—')}"
            )
        listing = s["listing"]
        if listing and not listing["complete"]:
            click.echo(
                f"  last listing ({listing['at']}) INCOMPLETE, so no page counts as unlisted:"
            )
            for reason in listing["reasons"][:10]:
                click.echo(f"    {reason}")
        if "polls" in s:
            last = s["polls"]["last"]
            click.echo(
                f"  last poll: {last['outcome']}, window {last['window_start']} → "
                f"{last['window_end']}, {last['records'] or 0} records"
            )
            for gap in s["polls"]["gaps"]:
                click.echo(f"  GAP never covered by a successful poll: {gap['from']} → {gap['to']}")
        for title, key in (
            ("dead letter", "dead_letter"),
            ("needs attention", "needs_attention"),
            ("retrying", "retrying"),
            ("refused", "refused"),
        ):
            items = s[key]
            if not items:
                continue
            click.echo(f"  {title} ({len(items)}):")
            for item in items[:20]:
                when = f", next try {item['next_retry_at']}" if item["next_retry_at"] else ""
                click.echo(
                    f"    {item['url']}: {item['reason']} — failing since "
                    f"{item['since']}, {item['attempts']} attempt(s){when}"
                )
            if len(items) > 20:
                click.echo(f"    … {len(items) - 20} more (--json lists all)")


def status_table(report: dict[str, Any]) -> None:
    """The per-source summary as a table (on a terminal)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="ragsync status")
    for column in (
        "source",
        "kind",
        "active",
        "suspected",
        "tombstoned",
        "retrying",
        "dead",
        "attention",
        "oldest check",
    ):
        table.add_column(column, justify="right" if column not in ("source", "kind") else "left")
    for source_id, s in report["sources"].items():
        docs, failing = s["documents"], s["failing"]
        table.add_row(
            source_id,
            s["kind"],
            str(docs.get("active", 0)),
            str(docs.get("suspected_missing", 0)),
            str(docs.get("tombstoned", 0)),
            str(failing.get("retrying", 0)),
            str(failing.get("dead", 0)),
            str(failing.get("attention", 0)),
            s["oldest_check"] or "—",
        )
    Console().print(table)
