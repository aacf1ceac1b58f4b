"""The state DB (:class:`StateDB`) and its repositories; see :mod:`ragsync.state.db`."""

from ragsync.state.db import StateDB
from ragsync.state.journal import journal_op
from ragsync.state.migrations import MIGRATIONS
from ragsync.state.rows import ChangeRow, DocumentRow, JournalOpRow

__all__ = ["MIGRATIONS", "ChangeRow", "DocumentRow", "JournalOpRow", "StateDB", "journal_op"]
