"""The ``ragsync`` command: parse flags, call the Python API, render the result.

Errors become one line on stderr and an exit code (:mod:`ragsync.exitcodes`). ``--json``
output goes to stdout alone; human output and logs go to stderr.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import click

from ragsync import __version__
from ragsync.errors import ConfigError
from ragsync.exitcodes import errors_to_exit_codes
from ragsync.render import print_plan, print_report, print_status, print_verify, render_hit

CONFIG_OPTION = click.option(
    "--config",
    "-c",
    "config_path",
    default="ragsync.toml",
    envvar="RAGSYNC_CONFIG",
    show_default=True,
    help="Path to ragsync.toml.",
)


def _progress() -> Any:
    """Progress bars on a terminal (stderr), plain log lines otherwise (one per 100 pages or
    10%); none with -q."""
    from ragsync.progress import LogProgress, RichProgress

    if not _quiet() and sys.stderr.isatty():
        return RichProgress()
    return LogProgress()


@click.group()
@click.version_option(__version__, prog_name="ragsync")
@click.option("-v", "--verbose", count=True, help="More log lines on stderr (-vv for debug).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors on stderr.")
@click.pass_context
def main(ctx: click.Context, verbose: int, quiet: bool) -> None:
    """Keep a RAG vector index exactly in sync with its web sources."""
    ctx.obj = {"quiet": quiet, "verbose": verbose}
    level = (
        logging.ERROR
        if quiet
        else (logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING)
    )
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )
    # Progress lines (one per 100 pages or 10%) show without -v, so a long sync under cron or
    # in a pipe says it is moving; on a terminal, `run` shows bars instead.
    logging.getLogger("ragsync.progress").setLevel(level if quiet else min(level, logging.INFO))
    for noisy in ("httpx", "httpcore", "trafilatura", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
    # psycopg's warnings (reconnection attempts): a server gone ends in one line; -v shows them
    logging.getLogger("psycopg").setLevel(logging.WARNING if verbose else logging.ERROR)


@main.command()
@click.argument("path", default="ragsync.toml", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.option(
    "--url",
    help="Probe this site (robots.txt Sitemap: lines, sitemap.xml, feeds, else a crawl) and "
    "write a source for it.",
)
def init(path: str, force: bool, url: str | None) -> None:
    """Write a starter ragsync.toml at PATH; with --url (or a URL as PATH), the site's source."""
    from importlib.resources import files

    if "://" in path:  # `ragsync init https://docs.example.com/`: the site, not the file
        if url:
            message = f"{path!r} is a URL, not the file to write (the site is --url {url})"
            raise click.BadParameter(message, param_hint="PATH")
        url, path = path, "ragsync.toml"
    target = Path(path)
    if target.exists() and not force:
        click.echo(f"ragsync: {target} already exists (use --force to overwrite it)", err=True)
        sys.exit(2)
    if url:
        from ragsync.initsite import probe_site, site_config

        try:
            choice = probe_site(url)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--url") from None
        text, said = site_config(choice), f'kind = "{choice.kind}": {choice.reason}'
    else:
        text = files("ragsync").joinpath("starter.toml").read_text(encoding="utf-8")
        said = "edit its [[sources]] table, then run `ragsync run`"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    click.echo(f"wrote {target}: {said}", err=True)


@main.command()
@CONFIG_OPTION
@click.option(
    "--all",
    "revalidate_all",
    is_flag=True,
    help="Everything now: sources and pages not yet due, and pages held back (retry not "
    "due, dead letter, needs attention).",
)
@click.option("--refetch", is_flag=True, help="As --all, each page asked in full (no validators).")
@click.option("--source", "source_id", help="Only this source id.")
@click.option("--json", "as_json", is_flag=True, help="Print the run report as JSON on stdout.")
@click.option("--watch", is_flag=True, help="Stay up: run whatever falls due, until stopped.")
@click.option(
    "--wait",
    is_flag=True,
    help="When another process holds the state, wait for it (default: exit 3 at once).",
)
@errors_to_exit_codes
def run(
    config_path: str,
    revalidate_all: bool,
    refetch: bool,
    source_id: str | None,
    as_json: bool,
    watch: bool,
    wait: bool,
) -> None:
    """One sync pass over what is due (then exit), or --watch to keep going."""
    from ragsync.sync import Syncer

    if watch and refetch:
        raise click.BadParameter("--refetch is one pass: not with --watch", param_hint="--refetch")
    if watch:
        import signal
        import threading

        stop = threading.Event()

        def request_stop(signum: int, frame: Any) -> None:
            stop.set()
            raise KeyboardInterrupt  # abandons a pass in flight; the journal makes it safe

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)
        with Syncer.from_config(config_path) as syncer:
            try:
                syncer.watch(stop=stop)
            except KeyboardInterrupt:
                click.echo("ragsync: stopped", err=True)
        return

    _with_progress(
        config_path,
        lambda syncer: syncer.run(
            source=source_id, revalidate_all=revalidate_all, wait=wait, refetch=refetch
        ),
        as_json=as_json,
    )


@main.command()
@CONFIG_OPTION
@click.option(
    "--until-idle",
    is_flag=True,
    help="Exit once nothing is due, queued, claimed or waiting in the journal anywhere.",
)
@click.option(
    "--lease",
    default="60s",
    show_default=True,
    help="How long a claim outlives a worker that stopped renewing it (died).",
)
@click.option("--batch", default=64, show_default=True, help="Pages claimed at a time.")
@click.option("--id", "worker_id", help="This worker's name in leases (default: host-pid-random).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the worker's report as JSON on stdout."
)
@errors_to_exit_codes
def worker(
    config_path: str,
    until_idle: bool,
    lease: str,
    batch: int,
    worker_id: str | None,
    as_json: bool,
) -> None:
    """One of many processes sharing the state DB: claim due pages, sync them, repeat.

    SIGTERM or Ctrl-C finishes the batch in hand and hands back the rest; a second one stops
    at once (what the worker held comes free when its lease runs out).
    """
    import signal
    import threading

    from ragsync.config import parse_duration
    from ragsync.sync import Syncer
    from ragsync.worker import Worker

    try:
        lease_seconds = parse_duration(lease)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--lease") from None
    stop = threading.Event()

    def request_stop(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    with Syncer.from_config(config_path) as syncer:
        runner = Worker(syncer, worker_id=worker_id, lease=lease_seconds, batch=batch)
        result = runner.run(until_idle=until_idle, stop=stop)
    _report(result, as_json=as_json)


def _report(result: Any, *, as_json: bool) -> None:
    """Print a run report (JSON on stdout, or the summary on stderr) and exit 0 or 1."""
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        print_report(result.to_dict(), quiet=_quiet())
    sys.exit(0 if result.ok else 1)


def _with_progress(config_path: str, action: Callable[[Any], Any], *, as_json: bool) -> None:
    """Open the syncer with progress display, run ``action(syncer)``, report the result."""
    from ragsync.sync import Syncer

    progress = _progress()
    try:
        with Syncer.from_config(config_path, progress=progress) as syncer:
            result = action(syncer)
    finally:
        progress.close()
    _report(result, as_json=as_json)


def _quiet() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.find_root().obj and ctx.find_root().obj.get("quiet"))


@main.command()
@CONFIG_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@errors_to_exit_codes
def status(config_path: str, as_json: bool) -> None:
    """Per source: documents by state, what is failing and why, the dead letter."""
    from ragsync.sync import Syncer

    with Syncer.from_config(config_path) as syncer:
        report = syncer.status()
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    print_status(report, table=sys.stdout.isatty())


@main.command()
@CONFIG_OPTION
@click.option("--source", "source_id", help="Only this source id.")
@click.option("--all", "revalidate_all", is_flag=True, help="As `run --all` would.")
@click.option("--refetch", is_flag=True, help="As `run --refetch` would.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@errors_to_exit_codes
def plan(
    config_path: str, source_id: str | None, revalidate_all: bool, refetch: bool, as_json: bool
) -> None:
    """What `run` would fetch, embed, upsert and delete — writing nothing."""
    from ragsync.sync import Syncer

    with Syncer.from_config(config_path) as syncer:
        report = syncer.plan(source=source_id, revalidate_all=revalidate_all, refetch=refetch)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    print_plan(report)


@main.command()
@CONFIG_OPTION
@click.option("--source", "source_id", help="Only this source id.")
@click.option(
    "--same-collection",
    is_flag=True,
    help="After a model change, replace the vectors in the configured collection.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@errors_to_exit_codes
def reindex(config_path: str, source_id: str | None, same_collection: bool, as_json: bool) -> None:
    """Re-extract, re-chunk, re-embed from retained bodies: no network, only new texts."""

    _with_progress(
        config_path,
        lambda syncer: syncer.reindex(source=source_id, same_collection=same_collection),
        as_json=as_json,
    )


@main.command()
@CONFIG_OPTION
@click.option("--since", help="A duration back from now ('2h', '7d') or an ISO timestamp.")
@click.option("--source", "source_id", help="Only this source id.")
@click.option("--json", "as_json", is_flag=True, help="Print the changes as JSON.")
@errors_to_exit_codes
def changes(config_path: str, since: str | None, source_id: str | None, as_json: bool) -> None:
    """The append-only change log: what was created, updated, removed or restored."""
    from ragsync.sync import Syncer

    with Syncer.from_config(config_path) as syncer:
        if source_id:
            syncer.config.source(source_id)
        try:
            found = syncer.changes(since=since, source=source_id)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--since") from None
    if as_json:
        click.echo(json.dumps([change.__dict__ for change in found], indent=2))
        return
    if not found:
        click.echo("no changes" + (f" since {since}" if since else ""), err=True)
    for change in found:
        click.echo(
            f"{change.at}  {change.change_type:<8} {change.url}  "
            f"+{change.chunks_added} -{change.chunks_removed} ={change.chunks_kept} "
            f"({change.magnitude:.0%})"
        )


@main.command()
@CONFIG_OPTION
@click.option("--dead", is_flag=True, help="Only the dead letter.")
@click.option("--replay", "replay_id", help="Send this event id again.")
@click.option("--replay-dead", is_flag=True, help="Send every dead event again.")
@click.option("--json", "as_json", is_flag=True, help="Print events as JSON.")
@errors_to_exit_codes
def events(
    config_path: str, dead: bool, replay_id: str | None, replay_dead: bool, as_json: bool
) -> None:
    """Outbound change events: pending, delivered, dead; replay the dead letter."""

    from ragsync.clock import iso, utc_now
    from ragsync.sync import Syncer

    with Syncer.from_config(config_path) as syncer:
        if replay_id or replay_dead:
            count = syncer.state.outbox.replay(
                event_id=replay_id, dead=replay_dead, at=iso(utc_now())
            )
            delivered = syncer.deliver_events()
            click.echo(f"requeued {count} event(s); delivered {delivered} now", err=True)
            if replay_id and not count:
                click.echo(f"ragsync: no event {replay_id!r}", err=True)
                sys.exit(2)
            return
        rows = syncer.state.outbox.list("dead" if dead else None)
    if as_json:
        click.echo(
            json.dumps([{k: v for k, v in row.items() if k != "payload"} for row in rows], indent=2)
        )
        return
    for row in rows:
        error = f"  ({row['last_error']})" if row["last_error"] else ""
        click.echo(
            f"{row['event_id']}  {row['state']:<9} {row['type']:<8} {row['doc_key']}  "
            f"→ {row['endpoint']}  attempts {row['attempts']}{error}"
        )


@main.command()
@CONFIG_OPTION
@click.option("--repair", is_flag=True, help="Make the vector store match the state DB.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@errors_to_exit_codes
def verify(config_path: str, repair: bool, as_json: bool) -> None:
    """Compare the state DB with the vector store (missing, orphan, drifted points)."""
    from ragsync.sync import Syncer

    with Syncer.from_config(config_path) as syncer:
        report = syncer.verify(repair=repair)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        print_verify(report)
    sys.exit(0 if report.clean or report.repaired else 1)


@main.command()
@CONFIG_OPTION
@click.option("--listen", help="HOST:PORT (default: [server] listen, 127.0.0.1:8787).")
@errors_to_exit_codes
def serve(config_path: str, listen: str | None) -> None:
    """The daemon: sync loop + webhook receiver, /healthz, /metrics, /status, /search."""
    from ragsync.config import load_config
    from ragsync.configvalues import parse_listen
    from ragsync.server import serve as run_server

    config = load_config(config_path)
    try:
        parse_listen(listen or config.server.listen)
    except ValueError as exc:
        raise ConfigError(str(exc), key="--listen") from None
    run_server(config, listen)


@main.command()
@CONFIG_OPTION
@click.argument("urls", nargs=-1, required=True)
@click.option("--source", "source_id", help="The source these URLs belong to.")
@click.option("--refetch", is_flag=True, help="Ask each URL in full, whatever its validators say.")
@click.option("--json", "as_json", is_flag=True, help="Print the run report as JSON.")
@errors_to_exit_codes
def resync(
    config_path: str, urls: tuple[str, ...], source_id: str | None, refetch: bool, as_json: bool
) -> None:
    """Re-sync these URLs now (the path webhooks take), whatever the schedule says."""
    from ragsync.sync import Syncer

    with Syncer.from_config(config_path) as syncer:
        try:
            result = syncer.resync(list(urls), source=source_id, refetch=refetch)
        except ValueError as exc:
            click.echo(f"ragsync: {exc}", err=True)
            sys.exit(2)
    _report(result, as_json=as_json)


@main.command()
@CONFIG_OPTION
@click.argument("query")
@click.option(
    "-k", "k", default=5, show_default=True, type=click.IntRange(1, 100), help="Number of hits."
)
@click.option("--source", "source_id", help="Only hits from this source id.")
@click.option(
    "--mode",
    type=click.Choice(["dense", "sparse", "hybrid"]),
    help="Rank by meaning (dense), by exact terms (sparse) or both fused (hybrid). "
    "Default: [search] mode.",
)
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON on stdout.")
@errors_to_exit_codes
def search(
    config_path: str, query: str, k: int, source_id: str | None, mode: str | None, as_json: bool
) -> None:
    """Query the index: what an app would retrieve for QUERY (through a running `serve`
    on [server] listen when one answers)."""
    from ragsync.config import load_config
    from ragsync.searchapi import hit_dict
    from ragsync.searchclient import search as warm_or_local
    from ragsync.sync import Syncer

    config = load_config(config_path)

    def local() -> list[Any]:
        with Syncer(config) as syncer:
            return syncer.search(query, k=k, source=source_id, mode=cast(Any, mode))

    note = (lambda line: None) if _quiet() else (lambda line: click.echo(line, err=True))
    hits = warm_or_local(config, query, k, source_id, local=local, note=note, mode=mode)
    if as_json:
        click.echo(json.dumps([hit_dict(hit) for hit in hits], indent=2))
        return
    if not hits:
        click.echo("no hits (has `ragsync run` indexed anything yet?)", err=True)
    for rank, hit in enumerate(hits, 1):
        click.echo(render_hit(rank, hit))


if __name__ == "__main__":  # pragma: no cover
    main()
