"""Statements both state backends run as written: quoted identifiers and the one insert of a
row batch, with what a key already present means (README "Architecture")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

OnConflict = Literal["fail", "update", "ignore"]


def ident(name: str) -> str:
    """``name`` quoted as an SQL identifier.

    >>> ident('odd"name')
    '"odd""name"'
    """
    return '"' + name.replace('"', '""') + '"'


def insert_sql(
    table: str, columns: Sequence[str], key: Sequence[str] = (), on_conflict: OnConflict = "fail"
) -> str:
    """An insert of one row of ``columns`` into ``table`` (``?`` placeholders). A row whose
    ``key`` is taken fails (``fail``), is left alone (``ignore``), or has its other given
    columns overwritten (``update``; columns not given keep their values).

    >>> insert_sql("t", ["k", "v"], ["k"], "update")
    'insert into "t" ("k", "v") values (?, ?) on conflict ("k") do update set "v" = excluded."v"'
    >>> insert_sql("t", ["k"], ["k"], "update")
    'insert into "t" ("k") values (?) on conflict ("k") do nothing'
    """
    sql = (
        f"insert into {ident(table)} ({', '.join(map(ident, columns))}) "
        f"values ({', '.join('?' * len(columns))})"
    )
    if on_conflict == "fail":
        return sql
    assert key, f"insert_sql: on_conflict={on_conflict!r} needs the key columns"
    target = ", ".join(map(ident, key))
    updates = [f"{ident(c)} = excluded.{ident(c)}" for c in columns if c not in key]
    if on_conflict == "ignore" or not updates:
        return f"{sql} on conflict ({target}) do nothing"
    return f"{sql} on conflict ({target}) do update set {', '.join(updates)}"


def row_params(rows: Iterable[Mapping[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """The columns of ``rows`` (every key any row has, in order of appearance) and each row's
    values in that order (None for a column it lacks).

    >>> row_params([{"a": 1}, {"a": 2, "b": 3}])
    (['a', 'b'], [[1, None], [2, 3]])
    """
    rows = list(rows)
    columns = list(dict.fromkeys(name for row in rows for name in row))
    return columns, [[row.get(name) for name in columns] for row in rows]
