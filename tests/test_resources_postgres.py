"""Which database errors are a server that went away (a ResourceError, exit code 4) and which
stay what they are: a SQL error is a bug, a refused password a configuration error."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors
from psycopg_pool import PoolClosed, PoolTimeout

from ragsync.resources import postgres_resource_error

WHERE = "PostgreSQL db:5432/rag (the state DB)"
REFUSED = (
    'connection failed: connection to server at "10.0.0.5", port 5432 failed: Connection '
    "refused\n\tIs the server running on that host and accepting TCP/IP connections?"
)
FATAL = 'connection failed: connection to server at "10.0.0.5", port 5432 failed: FATAL:  '


@pytest.mark.parametrize(
    ("error", "connecting", "reason"),
    [
        (
            errors.AdminShutdown("terminating connection due to administrator command"),
            False,
            "lost",
        ),
        (errors.CrashShutdown("terminating connection because of crash"), False, "lost"),
        (errors.ConnectionFailure("server closed the connection unexpectedly"), False, "lost"),
        (psycopg.OperationalError("the connection is closed"), False, "lost"),
        (psycopg.OperationalError("consuming input failed: EOF"), False, "lost"),
        (PoolTimeout("couldn't get a connection after 15.00 sec"), False, "in time"),
        (psycopg.OperationalError(REFUSED), True, "(Connection refused)"),
        (psycopg.OperationalError(FATAL + "the database system is shutting down"), True, "(the"),
        (psycopg.OperationalError(FATAL + "sorry, too many clients already"), True, "(sorry"),
        # The server answered and refused: a wrong password is no outage.
        (psycopg.OperationalError(FATAL + 'password authentication failed for "rs"'), True, None),
        (psycopg.OperationalError(FATAL + 'database "rag" does not exist'), True, None),
        # Not the server going away: a bug, a statement cancelled, this process's own pool.
        (errors.UndefinedTable('relation "journal" does not exist'), False, None),
        (errors.SyntaxError("syntax error at or near"), False, None),
        (errors.QueryCanceled("canceling statement due to statement timeout"), False, None),
        (errors.LockNotAvailable("could not obtain lock"), False, None),
        (PoolClosed("the pool 'ragsync-state' is closed"), False, None),
        (ValueError("not a database error"), False, None),
    ],
)
def test_a_server_that_went_away_is_a_resource_error_and_nothing_else_is(error, connecting, reason):
    found = postgres_resource_error(error, WHERE, connecting=connecting)
    if reason is None:
        assert found is None
        return
    assert found is not None and found.where == WHERE
    assert reason in found.reason and "run again when it is" in found.reason
    assert str(found).startswith(f"{WHERE}: ")
