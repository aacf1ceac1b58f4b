"""Find connectors by kind through entry points, so the engine never imports one by name.

Source connectors register under the ``ragsync.sources`` group and vector stores under
``ragsync.stores`` (see ``pyproject.toml``); a third-party package can add its own the same way.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import Any

SOURCES = "ragsync.sources"
STORES = "ragsync.stores"


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
