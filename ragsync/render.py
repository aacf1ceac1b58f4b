"""What `ragsync run`, `plan`, `status` and `verify` print for people (``--json`` prints the
report as it is)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

from ragsync.clock import duration_text, parse_iso
from ragsync.models import Hit

if TYPE_CHECKING:
    from ragsync.verify import VerifyReport

SECONDS_SHOWN = timedelta(minutes=10)  # a moment closer than this is named to the second


def moment_text(timestamp: str, now: datetime | None = None) -> str:
    """A stored UTC timestamp as ``14:05 UTC`` when it falls today (UTC), else as
    ``2026-12-01 14:05 UTC``; to the second when it is less than 10 minutes away (a source
    due every 10 seconds read "not due until 08:54 UTC" for a minute).

        >>> now = datetime(2026, 12, 1, 8, 53, 40, tzinfo=UTC)
        >>> moment_text("2026-12-01T08:53:50Z", now), moment_text("2026-12-01T09:05:00Z", now)
        ('08:53:50 UTC', '09:05 UTC')
        >>> moment_text("2026-12-02T00:00:05Z", datetime(2026, 12, 1, 23, 59, 50, tzinfo=UTC))
        '2026-12-02 00:00:05 UTC'
    """
    moment = parse_iso(timestamp)
    now = (now or datetime.now(UTC)).astimezone(UTC)
    shape = "%H:%M:%S" if abs(moment - now) < SECONDS_SHOWN else "%H:%M"
    return (
        f"{moment:{shape}} UTC" if moment.date() == now.date() else f"{moment:%Y-%m-%d {shape}} UTC"
    )


def not_requested(sources: dict[str, Any], now: datetime | None = None) -> list[str]:
    """Why a source sent fewer requests than it could have: its listing not due (until when,
    by which cadence), pages not due yet, held back or deferred. Ends with the ``--all`` hint
    when it would change anything: a paused host's pages wait for the pause with it too."""
    lines = []
    helps = False
    for source_id, outcome in sources.items():
        counters, not_due = outcome["counters"], outcome.get("listing_not_due")
        parts = []
        if not_due and not_due["until"]:
            cadence = (
                f"cron {not_due['cron']!r}"
                if not_due["cron"]
                else f"every {duration_text(not_due['every'] or 0)}"
            )
            parts.append(f"not due until {moment_text(not_due['until'], now)} ({cadence})")
        if counters["not_due"]:
            parts.append(f"{counters['not_due']} page(s) not due yet (adaptive revisit)")
        if counters["held_back"]:
            parts.append(
                f"{counters['held_back']} page(s) held back (retry not due, dead letter or "
                "needs attention)"
            )
        helps = helps or bool(parts)
        if counters["deferred"]:
            parts.append(f"{counters['deferred']} page(s) deferred (host paused)")
        if parts:
            nothing = "nothing requested: " if not counters["requests_sent"] else ""
            lines.append(f"source {source_id}: {nothing}{'; '.join(parts)}")
    if helps:
        lines.append("use --all to request everything now")
    return lines


def print_report(report: dict[str, Any], *, quiet: bool = False) -> None:
    """The run report on stderr; with ``quiet`` only when something failed (cron mails it)."""
    if quiet and report["ok"]:
        return
    counters = {k: v for k, v in report["counters"].items() if v}
    state = "ok" if report["ok"] else "finished with errors"
    click.echo(f"run {report['run_id']}: {state}", err=True)
    width = max((len(k) for k in counters), default=0)
    for name, value in counters.items():
        click.echo(f"  {name:<{width}}  {value}", err=True)
    for source_id, outcome in report["sources"].items():
        for error in outcome["errors"][:20]:
            click.echo(f"  [{source_id}] {error}", err=True)
        if len(outcome["errors"]) > 20:
            click.echo(f"  [{source_id}] … {len(outcome['errors']) - 20} more", err=True)
        for line in outcome.get("outages", []):
            click.echo(f"  [{source_id}] {line}", err=True)
        for reason in outcome.get("listing_incomplete", []):
            if reason not in outcome["errors"]:  # a bound the source chose: no error, named
                click.echo(f"  [{source_id}] listing incomplete: {reason}", err=True)
    for line in not_requested(report["sources"]):
        click.echo(line, err=True)


def print_plan(report: dict[str, Any]) -> None:
    """The dry run (see :func:`ragsync.dryrun.dry_run`) as lines on stdout."""
    counters = report["counters"]
    click.echo(
        f"would request {counters['requests_sent']} URLs "
        f"({counters['conditional_requests_sent']} conditional): "
        f"{counters['responses_304']} unchanged (304), "
        f"{counters['responses_200_unchanged']} unchanged (same content), "
        f"{counters['responses_200_changed']} changed"
    )
    click.echo(
        f"would embed {report['embedding']['texts']} new texts "
        f"({report['embedding']['tokens']} model tokens), reuse {counters['chunks_reused']} "
        f"from the cache, upsert {counters['points_upserted']} points, delete "
        f"{counters['points_deleted']}"
    )
    for doc in report["documents"]:
        click.echo(
            f"  {doc['change']:<8} {doc['url']}  +{doc['chunks_added']} "
            f"-{doc['chunks_removed']} ={doc['chunks_kept']}"
        )
    for line in not_requested(report["sources"]):
        click.echo(line)


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
    points_text = "unavailable (see the warning above)" if points is None else str(points)
    click.echo(
        f"points in the store: {points_text}; schedule lag: {report['lag_seconds']:.0f} s; "
        f"targeted queue: {report['queue_depth']}"
    )
    if report["pending_journal"]:
        click.echo(
            f"the index is behind the state: {report['pending_journal']} journal operations "
            "pending (the next run applies them; so does verify --repair)"
        )
    if report["work_queue"] or report["leases"]:
        held = ", ".join(f"{name} by {owner}" for name, owner in sorted(report["leases"].items()))
        click.echo(f"workers: {report['work_queue']} pages queued; leases: {held or 'none'}")
    for host, until in report["host_pauses"].items():
        click.echo(f"host {host} paused until {until} (Retry-After / rate limit)")
    for host in report.get("host_validators", []):
        caught = (
            f"{host['lies']} page(s) changed under the validators they answered 304 to "
            f"(the last: {host['last_lie_url']} at {host['last_lie_at']})"
        )
        if host["distrusted_since"]:
            click.echo(
                f"host {host['host']}: validators distrusted since {host['distrusted_since']}, "
                f"{caught}: its pages are asked in full until one changes with new validators"
            )
        else:
            click.echo(f"host {host['host']}: {caught}; distrusted at {host['distrust_after']}")
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
        print_suspected(s.get("suspected_missing", []))
        for title, key in (
            ("dead letter", "dead_letter"),
            ("needs attention", "needs_attention"),
            ("retrying", "retrying"),
            ("refused", "refused"),
            ("not found, never indexed", "missing"),
        ):
            items = s.get(key, [])
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


def print_suspected(items: list[dict[str, Any]]) -> None:
    """A source's pages suspected missing, each with when it is tombstoned at the earliest."""
    if not items:
        return
    click.echo(f"  suspected missing ({len(items)}), content still indexed:")
    for item in items[:20]:
        more, reason = item["observations_needed"], item["reason"] or "missing"
        # A permanent redirect, once confirmed, moves the record rather than removing it.
        fate = "moved" if reason.startswith("redirects permanently") else "tombstoned"
        click.echo(
            f"    {item['url']}: {reason} — since {item['since']}, "
            f"{item['observations']}/{item['confirmations']} observation(s); {fate} at the "
            f"earliest {item['tombstone_at_earliest']}"
            + (
                f" ({more} more checks must find it missing)"
                if more > 1
                else " (at the first check from then that still finds it missing)"
            )
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


def print_verify(report: VerifyReport) -> None:
    """What `verify` found: the points expected and in the store, each kind of drift (with a
    few point ids), pending journal operations, and what to do about them."""
    click.echo(f"points expected {report.points_expected}, in store {report.points_in_store}")
    for name in ("missing", "orphans", "drift", "sparse_drift"):
        ids = getattr(report, name)
        click.echo(f"{name}: {len(ids)}" + (f" (e.g. {', '.join(ids[:3])})" if ids else ""))
    click.echo(f"pending journal operations: {report.pending_journal}")
    if report.repaired:
        click.echo("repaired: the store now matches the state DB")
    elif (
        not report.clean
        and report.pending_journal
        and not (report.missing or report.orphans or report.drift or report.sparse_drift)
    ):
        click.echo("the next `ragsync run` applies the pending operations (or verify --repair)")
    elif not report.clean:
        click.echo("run `ragsync verify --repair` to fix")


def render_hit(rank: int, hit: Hit) -> str:
    """One search hit as ``ragsync search`` prints it: rank, score (a hybrid hit's fused score,
    then both rankings' scores), title, heading path, URL and the start of its text."""
    path = " > ".join(hit.headings) or hit.title
    excerpt = " ".join(hit.text.split())[:200]
    parts = {"dense": hit.dense_score, "sparse": hit.sparse_score}
    # A hybrid hit's fused score is neither ranking's: both are shown, "—" for a ranking that
    # did not find the chunk; a single mode's score is its ranking's own.
    fused = hit.score not in parts.values()
    scores = ", ".join(f"{name} {'—' if v is None else f'{v:.3f}'}" for name, v in parts.items())
    scores = f" ({scores})" if fused and any(v is not None for v in parts.values()) else ""
    also = f"   also on {', '.join(hit.also)}\n" if hit.also else ""
    head = f"{rank}. {hit.score:.3f}{scores}  {hit.title}\n   {path}\n   {hit.url}\n"
    return f"{head}{also}   {excerpt}\n"
