"""How the ``ragsync`` command ends: each error as one line on stderr, and an exit code.

Exit codes: 0 success; 1 the run finished but some work failed (or a store, a fetch, the
state refused an operation: the line names it); 2 usage or configuration error; 3 another
process holds the state (a pass or workers): nothing was done (``--wait`` waits); 4 something
the work needs ran out or went away (space on a device, open files, a database server): the
line names it, and nothing committed is lost (README "Resource limits").
"""

from __future__ import annotations

import logging
import sqlite3
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from ragsync.errors import ConfigError, RagsyncError, ResourceError
from ragsync.resources import resource_error
from ragsync.runlock import RunLocked


def errors_to_exit_codes(func: Callable[..., Any]) -> Callable[..., Any]:
    """A command whose errors end it with their line and exit code."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ConfigError as exc:
            click.echo(f"ragsync: configuration error: {exc}", err=True)
            sys.exit(2)
        except RunLocked as exc:
            click.echo(f"ragsync: {exc}", err=True)
            sys.exit(3)
        except ResourceError as exc:
            ran_out(exc, exc)
        except RagsyncError as exc:
            if exc.__cause__ is not None:  # a library's error, named: -v shows where it came
                traceback_if_verbose(exc)
            click.echo(f"ragsync: {exc}", err=True)
            sys.exit(1)
        except (OSError, sqlite3.Error) as exc:  # one that no layer named: name it here
            found = resource_error(exc)
            if found is None:
                raise
            ran_out(found, exc)

    return wrapper


def ran_out(error: ResourceError, cause: BaseException) -> None:
    """One line naming what ran out and where (the traceback too with -v), then exit 4."""
    traceback_if_verbose(cause)
    click.echo(f"ragsync: {error}", err=True)
    sys.exit(4)


def traceback_if_verbose(error: BaseException) -> None:
    """With -v, the traceback of ``error`` (and its causes) before its one line."""
    context = click.get_current_context(silent=True)
    if context is not None and (context.find_root().obj or {}).get("verbose"):
        logging.getLogger("ragsync").error("traceback", exc_info=error)
