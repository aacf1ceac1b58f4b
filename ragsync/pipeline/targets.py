"""Targeted re-sync: URLs a webhook or `ragsync resync` queued, checked before anything else.

The queue is drained only after its pages are committed, so a crash leaves them queued
(README "Targeted re-sync").
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ragsync.config import Config, SourceConfig
from ragsync.errors import ConfigError
from ragsync.identity import api_record_key
from ragsync.pipeline.context import Engine, Pass
from ragsync.scope import scope_of
from ragsync.urls import redact_url

log = logging.getLogger("ragsync")


def by_source(
    config: Config, rows: Iterable[dict[str, Any]]
) -> list[tuple[SourceConfig | None, list[dict[str, Any]]]]:
    """Queued rows grouped by their ``source_id``, with its config — None (and a warning) for
    a source the config no longer has, whose rows the caller drops."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[row["source_id"]].append(row)
    found: list[tuple[SourceConfig | None, list[dict[str, Any]]]] = []
    for source_id, items in grouped.items():
        try:
            found.append((config.source(source_id), items))
        except ConfigError:
            log.warning("queued work for unknown source %r dropped", source_id)
            found.append((None, items))
    return found


def outside(source: SourceConfig, urls: Sequence[str], *, base_dir: str | Path = ".") -> list[str]:
    """The ``urls`` outside ``source``'s scope — its hosts (:mod:`ragsync.scope`) and its
    include/exclude patterns: what a webhook or `resync` may not ask ragsync to fetch. The
    scope (and its ``urls_file``) is read once for all of them."""
    scope = scope_of(source, base_dir)
    return [url for url in urls if scope.refuse_page(url) is not None]


def queue_urls(
    engine: Engine, urls: Sequence[str], *, source: str | None = None, refetch: bool = False
) -> None:
    """Put URLs on the targeted queue, each under the source that owns it; with ``refetch``,
    to be asked in full, whatever their validators say (`resync --refetch`).

    Raises:
        ValueError: a URL lies outside every source's scope (or ``source``'s).
    """
    candidates = [engine.config.source(source)] if source else list(engine.config.sources)
    scopes = [scope_of(s, engine.config.base_dir) for s in candidates]
    by_owner: dict[str, list[str]] = defaultdict(list)
    refused = []
    for url in urls:
        owner = next((scope for scope in scopes if scope.refuse_page(url) is None), None)
        if owner is None:
            refused.append(redact_url(url))  # credentials are never shown
        else:
            by_owner[owner.source_id].append(url)
    if refused:
        raise ValueError(f"outside the scope of {source or 'every source'}: " + ", ".join(refused))
    now = engine.now()
    for source_id, found in by_owner.items():
        reason = "refetch" if refetch else "resync"
        engine.state.targets.add(source_id, found, reason=reason, at=now)


def drain_targets(run: Pass) -> None:
    """Re-sync the URLs webhooks and `resync` queued, then forget them."""
    engine = run.engine
    for source, items in by_source(engine.config, engine.state.targets.list()):
        if source is None:
            engine.state.targets.remove([item["id"] for item in items])
            continue
        urls = [item["url"] for item in items if item["url"] and item["reason"] != "refetch"]
        in_full = [item["url"] for item in items if item["url"] and item["reason"] == "refetch"]
        for item in items:
            if item["record_id"]:  # an API record: its page, or a poll of the source
                document = engine.state.documents.get(api_record_key(source.id, item["record_id"]))
                if document and document["extractor"] != "record":
                    urls.append(document["canonical_url"])
        from ragsync.pipeline.source import SourceSync  # with the first page to check

        work = SourceSync(run, source, revalidate_all=True)
        if any(item["record_id"] for item in items) and source.kind == "http_api":
            outcome = work.listing()
        else:
            outcome = work.targets(urls, refetch=in_full)
        run.result.merge(source.id, outcome)
        engine.state.targets.remove([item["id"] for item in items])
