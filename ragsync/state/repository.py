"""The base of the state DB's repositories: each holds one group of tables and reaches them
through the shared :class:`~ragsync.state.StateDB` (its connection, transactions and locks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragsync.state.db import StateDB


class Repository:
    """One group of tables of ``state``; ``db`` is its sqlite-utils (or PostgreSQL) database."""

    def __init__(self, state: StateDB) -> None:
        self.state = state

    @property
    def db(self) -> Any:
        return self.state.db
