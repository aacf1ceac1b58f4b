"""Find connectors by kind through entry points, so the engine never imports one by name.

Source connectors register under the ``ragsync.sources`` group and vector stores under
``ragsync.stores`` (see ``pyproject.toml``); a third-party package can add its own the same way.
"""

from __future__ import annotations

import logging
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragsync.config import StoreConfig

SOURCES = "ragsync.sources"
STORES = "ragsync.stores"
AUTO = "auto"
EDGE_META = "ragsync-collection.json"  # what the qdrant_edge connector writes per collection
log = logging.getLogger("ragsync")
_warned: set[str] = set()


@cache
def _group(group: str) -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=group)}


def _load(group: str, kind: str, what: str) -> Any:
    found = _group(group)
    if kind not in found:
        known = ", ".join(sorted(found)) or "none installed"
        raise LookupError(f"unknown {what} kind {kind!r} (known: {known})")
    return found[kind].load()


def source_class(kind: str) -> Any:
    """The source connector class registered for ``kind`` (e.g. ``"sitemap"``).

    Raises:
        LookupError: no connector of that kind is installed.
    """
    return _load(SOURCES, kind, "source")


def store_class(kind: str) -> Any:
    """The vector-store connector class registered for ``kind`` (e.g. ``"qdrant"``)."""
    return _load(STORES, kind, "store")


def source_kinds() -> list[str]:
    """Every installed source kind."""
    return sorted(_group(SOURCES))


def store_kinds() -> list[str]:
    """Every installed vector-store kind."""
    return sorted(_group(STORES))


def store_kind(config: StoreConfig) -> str:
    """The store kind ``config`` names, with ``auto`` (the default) resolved: a Qdrant server
    when ``url`` is set; Qdrant Edge when ``path`` holds an Edge collection of that name or no
    local-mode store; else Qdrant local mode, which made that folder before Edge was the
    default (README "Vector stores")."""
    if config.kind != AUTO:
        return config.kind
    if config.url:
        return "qdrant"
    folder = Path(config.path)
    if (folder / config.collection / EDGE_META).is_file():
        return "qdrant_edge"
    return "qdrant" if (folder / "meta.json").is_file() else "qdrant_edge"


def open_store(config: StoreConfig) -> Any:
    """The vector store ``config`` describes (not yet opened: stores open on first use).

    An ``auto`` store whose folder local mode made stays in local mode, with a warning once per
    process naming the move to Qdrant Edge.
    """
    kind = store_kind(config)
    if config.kind == AUTO and kind == "qdrant" and not config.url and config.path not in _warned:
        _warned.add(config.path)
        log.warning(
            "%s is a Qdrant local-mode folder, which ragsync keeps using; local mode slows "
            "down past about 100,000 points: to move to Qdrant Edge with no text embedded "
            'again, set [store] kind = "qdrant_edge" with a new path and run `ragsync '
            'reindex`; set kind = "qdrant" to keep local mode and silence this',
            config.path,
        )
    from ragsync.storeguard import GuardedStore

    inner = store_class(kind).from_config(config)
    return GuardedStore(inner, name=store_name(config, kind), wait=config.open_wait)


def store_name(config: StoreConfig, kind: str) -> str:
    """How messages name a store: its kind, its place (a URL without its password, or a
    folder) and its collection.

    >>> from ragsync.config import StoreConfig
    >>> store_name(StoreConfig(url="http://admin:pw@db:6333", collection="docs"), "qdrant")
    "qdrant http://***@db:6333, collection 'docs'"
    """
    from ragsync.urls import redact_url

    place = redact_url(config.url) if config.url else str(Path(config.path).absolute())
    return f"{kind} {place}, collection {config.collection!r}"
