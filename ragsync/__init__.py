"""ragsync keeps a RAG vector index exactly in sync with the web sources it was built from.

Example::

    import ragsync

    with ragsync.Syncer.from_config("ragsync.toml") as syncer:
        result = syncer.run()               # SyncResult: counters + per-source outcomes
        hits = syncer.search("how do I rotate keys?", k=5)
"""

__version__ = "0.1.0"

import importlib  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from ragsync.errors import (  # noqa: E402
    ConfigError,
    ExtractError,
    FetchError,
    RagsyncError,
    StateError,
    StoreError,
)
from ragsync.models import Change, Counters, Hit, SyncResult  # noqa: E402

if TYPE_CHECKING:
    from ragsync.config import Config, load_config
    from ragsync.sync import Syncer

# Loaded on first use: a process that needs only part of ragsync (an extraction worker, which
# starts on the critical path of a cold sync) does not import the sync machinery.
_LAZY = {"Config": "ragsync.config", "load_config": "ragsync.config", "Syncer": "ragsync.sync"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ragsync' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Change",
    "Config",
    "ConfigError",
    "Counters",
    "ExtractError",
    "FetchError",
    "Hit",
    "RagsyncError",
    "StateError",
    "StoreError",
    "SyncResult",
    "Syncer",
    "__version__",
    "load_config",
]
