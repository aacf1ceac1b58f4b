"""Statements both state backends run as written: quoted identifiers and the one insert of a
row batch, with what a key already present means (README "Architecture")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

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
    target = ", ".join(map(ident, key))
    updates = [f"{ident(c)} = excluded.{ident(c)}" for c in columns if c not in key]
    if on_conflict == "ignore" or not updates:
        return f"{sql} on conflict ({target}) do nothing"
    return f"{sql} on conflict ({target}) do update set {', '.join(updates)}"
