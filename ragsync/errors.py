"""The ragsync error tree.

::

    RagsyncError
    ├── ConfigError            bad ragsync.toml: names the file and the key (exit code 2)
    ├── FetchError             one URL could not be fetched; ``transient``: may a retry help?
    ├── ExtractError           a body could not be turned into Markdown
    ├── StateError             the state DB is unusable (locked, newer schema, corrupt)
    ├── StoreError             the vector store refused an operation
    ├── EmbedError             the embedding service failed (after its retries)
    └── ResourceError          something a run needs ran out or went away: space on a device,
                               open files, a database server (exit code 4)

Every message names the file, key, URL or status at fault. Errors raised by lower libraries
are wrapped at the boundary with ``raise ... from``.
"""

from __future__ import annotations


class RagsyncError(Exception):
    """Base class of every error ragsync raises on purpose."""


class ConfigError(RagsyncError):
    """The configuration is invalid; the message names the file and the key.

    Example::

        ConfigError("ragsync.toml: sources[0].url: missing required key")
    """

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None):
        self.path = path
        self.key = key
        self.detail = message
        where = ": ".join(part for part in (path, key) if part)
        super().__init__(f"{where}: {message}" if where else message)


class FetchError(RagsyncError):
    """Fetching ``url`` failed. ``transient`` is True when a later retry may succeed."""

    def __init__(self, url: str, reason: str, *, status: int | None = None, transient: bool):
        self.url = url
        self.reason = reason
        self.status = status
        self.transient = transient
        super().__init__(f"{url}: {reason}")

    @classmethod
    def for_status(cls, url: str, status: int) -> FetchError:
        """A response that is not the document: 5xx and 429 are worth a retry."""
        return cls(url, f"HTTP {status}", status=status, transient=status >= 500 or status == 429)


class ExtractError(RagsyncError):
    """A fetched body could not be turned into Markdown."""

    def __init__(self, url: str, reason: str):
        self.url = url
        self.reason = reason
        super().__init__(f"{url}: {reason}")


class StateError(RagsyncError):
    """The state DB cannot be used (the message names its path)."""


class StoreError(RagsyncError):
    """The vector store refused an operation (the message names the collection)."""


class EmbedError(RagsyncError):
    """The embedding service at ``url`` failed, after its retries (the message says how)."""

    def __init__(self, url: str, reason: str, *, status: int | None = None):
        self.url = url
        self.reason = reason
        self.status = status
        super().__init__(f"{url}: {reason}")


class ResourceError(RagsyncError):
    """Something the work needs ran out or went away: the space on the device holding
    ``where`` (a path), the process's open files, or the database server at ``where`` (a
    host). Nothing committed is lost; the next run with the resource back converges.

    Example::

        ResourceError("no space left on the device", where=".ragsync/state.db (the state DB)")
    """

    def __init__(self, reason: str, *, where: str):
        self.reason = reason
        self.where = where
        super().__init__(f"{where}: {reason}")
