"""ragsync keeps a RAG vector index exactly in sync with the web sources it was built from.

Example::

    import ragsync

    with ragsync.Syncer.from_config("ragsync.toml") as syncer:
        result = syncer.run()               # SyncResult: counters + per-source outcomes
        hits = syncer.search("how do I rotate keys?", k=5)
"""

__version__ = "0.1.0"

from ragsync.config import Config, load_config  # noqa: E402
from ragsync.errors import (  # noqa: E402
    ConfigError,
    ExtractError,
    FetchError,
    RagsyncError,
    StateError,
    StoreError,
)
from ragsync.models import Change, Counters, Hit, SyncResult  # noqa: E402
from ragsync.sync import Syncer  # noqa: E402

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
