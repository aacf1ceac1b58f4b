"""The ``ragsync`` command: parse flags, call the Python API, render the result.

Exit codes: 0 success; 1 the run finished but some work failed; 2 usage or configuration error.
``--json`` output goes to stdout alone; human output and logs go to stderr.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from ragsync import __version__
from ragsync.errors import ConfigError, RagsyncError

CONFIG_OPTION = click.option(
    "--config",
    "-c",
    "config_path",
    default="ragsync.toml",
    envvar="RAGSYNC_CONFIG",
    show_default=True,
    help="Path to ragsync.toml.",
)


def _errors_to_exit_codes(func: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ConfigError as exc:
            click.echo(f"ragsync: configuration error: {exc}", err=True)
            sys.exit(2)
        except RagsyncError as exc:
            click.echo(f"ragsync: {exc}", err=True)
            sys.exit(1)

    return wrapper


@click.group()
@click.version_option(__version__, prog_name="ragsync")
@click.option("-v", "--verbose", count=True, help="More log lines on stderr (-vv for debug).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors on stderr.")
def main(verbose: int, quiet: bool) -> None:
    """Keep a RAG vector index exactly in sync with its web sources."""
    level = (
        logging.ERROR
        if quiet
        else (logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING)
    )
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )
    for noisy in ("httpx", "httpcore", "trafilatura", "sentence_transformers"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


@main.command()
@CONFIG_OPTION
@click.option(
    "--all",
    "revalidate_all",
    is_flag=True,
    help="Also request pages held back (retry not due, dead letter, needs attention).",
)
@click.option("--source", "source_id", help="Only this source id.")
@click.option("--json", "as_json", is_flag=True, help="Print the run report as JSON on stdout.")
@_errors_to_exit_codes
def run(config_path: str, revalidate_all: bool, source_id: str | None, as_json: bool) -> None:
    """One sync pass over the configured sources, then exit."""
    from ragsync.sync import Syncer

    with Syncer.from_config(config_path) as syncer:
        result = syncer.run(source=source_id, revalidate_all=revalidate_all)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        _print_report(result.to_dict())
    sys.exit(0 if result.ok else 1)


def _print_report(report: dict[str, Any]) -> None:
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


@main.command()
@CONFIG_OPTION
@click.argument("query")
@click.option(
    "-k", "k", default=5, show_default=True, type=click.IntRange(1, 100), help="Number of hits."
)
@click.option("--source", "source_id", help="Only hits from this source id.")
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON on stdout.")
@_errors_to_exit_codes
def search(config_path: str, query: str, k: int, source_id: str | None, as_json: bool) -> None:
    """Query the index: what an app would retrieve for QUERY."""
    from ragsync.sync import Syncer

    with Syncer.from_config(config_path) as syncer:
        if source_id:
            syncer.config.source(source_id)
        hits = syncer.search(query, k=k, source=source_id)
    if as_json:
        click.echo(json.dumps([hit.__dict__ for hit in hits], indent=2, default=list))
        return
    if not hits:
        click.echo("no hits (has `ragsync run` indexed anything yet?)", err=True)
    for rank, hit in enumerate(hits, 1):
        path = " > ".join(hit.headings) or hit.title
        excerpt = " ".join(hit.text.split())[:200]
        click.echo(f"{rank}. {hit.score:.3f}  {hit.title}\n   {path}\n   {hit.url}\n   {excerpt}\n")


if __name__ == "__main__":  # pragma: no cover
    main()
