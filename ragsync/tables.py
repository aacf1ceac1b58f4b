"""Read raw TOML tables into frozen dataclasses, checking each value as it goes.

A field says how it is read through its metadata, set by the helpers here: :func:`duration`
(``"90s"``, ``"1h"`` or seconds), :func:`bounded` (a range), :func:`checked` (a function that
raises ValueError) and :func:`path_field` (relative to the config file). Every string must be
non-empty, free of control characters and of malformed ``${VAR}`` references; every number
finite. :class:`TableReader` turns the first fault into a
:class:`~ragsync.errors.ConfigError` naming the file and the key (README "Configuration
reference").

Example::

    reader = TableReader(path="ragsync.toml", base_dir=Path("."))
    reader.dataclass(ChunkerConfig, {"max_tokens": 200}, "chunker")
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, Literal, TypeVar

from ragsync.configvalues import ENV_REF
from ragsync.errors import ConfigError

T = TypeVar("T")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, None: 1}
MAX_DURATION = 100 * 365 * 86400.0  # longer is a typo, and overflows datetime arithmetic


def parse_duration(value: str | int | float) -> float:
    """Seconds in a duration such as ``"90s"``, ``"15m"``, ``"1h"``, ``"7d"`` or a bare number.

    Raises:
        ValueError: the text is not a duration, or it is negative, infinite or over 100 years.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError(f"not a duration: {value!r} (use e.g. '30s', '15m', '1h', '7d')")
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"must be a duration of 0 or more, got {value!r}")
    if seconds > MAX_DURATION:
        raise ValueError(f"must be a duration under 100 years, got {value!r}")
    return seconds


def duration(default: str | None, *, positive: bool = False) -> Any:
    """A dataclass field holding seconds (0 or more; more than 0 when ``positive``), written in
    the file as a duration string or a number."""
    seconds = None if default is None else parse_duration(default)
    return field(default=seconds, metadata={"duration": True, "gt": 0 if positive else None})


def bounded(default: Any, *, ge: float | None = None, le: float | None = None) -> Any:
    """A dataclass field holding a number that must be ``>= ge`` and ``<= le`` (when given)."""
    return field(default=default, metadata={"ge": ge, "le": le})


def checked(check: Callable[[str], None], default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field whose strings ``check`` must accept (it raises ValueError)."""
    return field(default=default, metadata={"check": check})


def path_field(default: str) -> Any:
    """A dataclass field holding a path resolved against the config file's folder."""
    return field(default=default, metadata={"path": True})


class TableReader:
    """Validates raw TOML tables against dataclass fields, naming the key at fault.

    Args:
        path: the config file, named in every error.
        base_dir: the folder that relative paths are resolved against.
    """

    def __init__(self, *, path: str | None, base_dir: Path):
        self.path = path
        self.base_dir = base_dir

    def fail(self, key: str, message: str) -> typing.NoReturn:
        raise ConfigError(message, path=self.path, key=key)

    def unknown(self, key: str, allowed: set[str]) -> typing.NoReturn:
        self.fail(key, f"unknown key{self.hint(key.rsplit('.', 1)[-1], allowed)}")

    def check(self, key: str, value: Any, check: Callable[[Any], None]) -> None:
        try:
            check(value)
        except ValueError as exc:
            self.fail(key, str(exc))

    def hint(self, name: str, known: set[str]) -> str:
        close = difflib.get_close_matches(name, sorted(known), n=1)
        return f" (did you mean {close[0]!r}?)" if close else ""

    def dataclass(self, cls: type[T], raw: Any, where: str, skip: set[str] = frozenset()) -> T:  # type: ignore[assignment]
        """Build ``cls`` from the table ``raw``; ``where`` is the table's dotted name."""
        if not isinstance(raw, dict):
            self.fail(where, f"must be a table, got {type_name(raw)}")
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        hints = typing.get_type_hints(cls)
        names = set(fields) - skip
        for key in raw:
            if key not in names:
                self.unknown(f"{where}.{key}", names)
        for name in (name for name in fields if name in names and name not in raw):
            f = fields[name]
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                self.fail(f"{where}.{name}", "missing required key")
        values = {}
        for name in (name for name in fields if name in names):  # in declaration order
            f, key = fields[name], f"{where}.{name}"
            if name in raw:
                values[name] = self.value(hints[name], raw[name], key, f.metadata)
                self.limits(key, values[name], f.metadata)
            elif f.metadata.get("path"):  # default paths are relative to the file too
                values[name] = self.value(hints[name], f.default, key, f.metadata)
        return cls(**values)

    def limits(self, key: str, value: Any, meta: Mapping[str, Any]) -> None:
        """The field's range (``bounded``, ``duration``) and check (``checked``)."""
        if value is None:
            return
        ge, gt, le = meta.get("ge"), meta.get("gt"), meta.get("le")
        if ge is not None and value < ge:
            self.fail(key, f"must be at least {ge}, got {value}")
        if gt is not None and value <= gt:
            self.fail(key, f"must be more than {gt}, got {value}")
        if le is not None and value > le:
            self.fail(key, f"must be at most {le}, got {value}")
        if check := meta.get("check"):
            items = enumerate(value) if isinstance(value, tuple) else [(None, value)]
            for i, item in items:
                self.check(key if i is None else f"{key}[{i}]", item, check)

    def value(self, hint: Any, raw: Any, key: str, meta: Mapping[str, Any]) -> Any:
        if meta.get("duration"):
            try:
                return parse_duration(raw)
            except ValueError as exc:
                self.fail(key, str(exc))
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            options = [a for a in args if a is not type(None)]
            return self.value(options[0], raw, key, meta)
        if origin is Literal:
            if raw not in args:
                hint = (
                    self.hint(raw, {a for a in args if isinstance(a, str)})
                    if isinstance(raw, str)
                    else ""
                )
                self.fail(key, f"must be one of {', '.join(map(repr, args))}, got {raw!r}{hint}")
            return raw
        if origin is tuple:
            if not isinstance(raw, list):
                self.fail(key, f"must be an array, got {type_name(raw)}")
            return tuple(self.value(args[0], item, f"{key}[{i}]", {}) for i, item in enumerate(raw))
        if hint is float:
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                self.fail(key, f"must be a number, got {type_name(raw)}")
            if not math.isfinite(raw):
                self.fail(key, f"must be a finite number, got {raw}")
            return float(raw)
        if hint is int:
            if isinstance(raw, bool) or not isinstance(raw, int):
                self.fail(key, f"must be an integer, got {type_name(raw)}")
            return raw
        if hint is bool:
            if not isinstance(raw, bool):
                self.fail(key, f"must be true or false, got {type_name(raw)}")
            return raw
        if hint is str:
            if not isinstance(raw, str):
                self.fail(key, f"must be a string, got {type_name(raw)}")
            if not raw.strip():
                self.fail(key, "must not be empty")
            if any(ord(c) < 32 or ord(c) == 127 for c in raw):
                self.fail(key, "must not contain control characters (a newline, a tab, …)")
            if "${" in ENV_REF.sub("", raw):
                self.fail(key, "has a malformed ${VAR} reference (letters, digits, '_')")
            if meta.get("path"):
                return str((self.base_dir / raw).resolve()) if raw != ":memory:" else raw
            return raw
        return raw


def type_name(value: Any) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)
