"""Load ``ragsync.toml`` into frozen dataclasses.

Every key has a default except ``sources``. Unknown keys, wrong types and missing required keys
raise :class:`~ragsync.errors.ConfigError` naming the file and the key (with a did-you-mean).
Paths are resolved relative to the config file's folder. Secrets are only ``${ENV_VAR}``
references and are resolved where they are used (:func:`resolve_env`), never at load time, so a
run that does not need a secret does not fail for want of it.

Example::

    config = load_config("ragsync.toml")
    config.sources[0].id          # "docs"
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from ragsync import __version__
from ragsync.errors import ConfigError

T = TypeVar("T")

DEFAULT_USER_AGENT = f"ragsync/{__version__} (+https://pypi.org/project/ragsync/)"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, None: 1}
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def parse_duration(value: str | int | float) -> float:
    """Seconds in a duration such as ``"90s"``, ``"15m"``, ``"1h"``, ``"7d"`` or a bare number.

    Raises:
        ValueError: the text is not a duration.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        return float(value)
    match = _DURATION.match(value)
    if not match:
        raise ValueError(f"not a duration: {value!r} (use e.g. '30s', '15m', '1h', '7d')")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def resolve_env(value: str | None, *, key: str) -> str | None:
    """Replace ``${VAR}`` references in ``value`` by the environment's values.

    Raises:
        ConfigError: a referenced variable is not set (the message names ``key`` and the
            variable, never a value).
    """
    if value is None:
        return None

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ConfigError(f"environment variable {name} is not set", key=key)
        return os.environ[name]

    return _ENV_REF.sub(substitute, value)


def duration(default: str) -> Any:
    """A dataclass field holding seconds, written in the file as a duration string."""
    return field(default=parse_duration(default), metadata={"duration": True})


def path_field(default: str) -> Any:
    """A dataclass field holding a path resolved against the config file's folder."""
    return field(default=default, metadata={"path": True})


@dataclass(frozen=True)
class StateConfig:
    path: str = path_field(".ragsync/state.db")
    # A shared PostgreSQL instead of the SQLite file (workers): password as ${ENV_VAR}
    url: str | None = None
    pool_size: int = 4  # PostgreSQL connections per process
    raw_body_retention: float = duration("7d")  # raw bodies kept (compressed) for `reindex`


@dataclass(frozen=True)
class StoreConfig:
    kind: str = "qdrant"
    path: str = path_field(".ragsync/qdrant")
    url: str | None = None
    api_key: str | None = None
    collection: str = "ragsync"
    # Qdrant server or cluster (url): set when the collection is created
    shard_number: int | None = None
    replication_factor: int | None = None
    write_consistency_factor: int | None = None
    batch_size: int = 256  # points per write request
    timeout: float = duration("30s")  # per request to a server
    retry_attempts: int = 5  # per write, on transport errors, 429 and 5xx (backoff, jitter)


@dataclass(frozen=True)
class EmbedderConfig:
    kind: Literal["sentence-transformers", "http"] = "sentence-transformers"
    model: str = "all-MiniLM-L6-v2"
    batch_size: int = 64
    threads: int = 2
    # kind = "http": an OpenAI-compatible /v1/embeddings service
    url: str | None = None
    api_key: str | None = None  # a ${ENV_VAR} reference, sent as a Bearer token
    model_id: str | None = None  # names model, revision, dimension; derived when absent
    dimension: int | None = None  # asked of the service once when absent
    max_input_tokens: int | None = None  # the model's window (256 for MiniLM)
    tokenizer: str | None = None  # the model's tokenizer.json, to count tokens exactly
    concurrency: int = 4  # requests in flight
    timeout: float = duration("60s")
    retry_attempts: int = 6  # per batch, on 429/5xx/transport errors


@dataclass(frozen=True)
class ChunkerConfig:
    max_tokens: int = 160


@dataclass(frozen=True)
class FetchConfig:
    user_agent: str = DEFAULT_USER_AGENT
    concurrency: int = 8
    per_host_concurrency: int = 2
    per_host_delay: float = duration("0s")  # between request starts; robots Crawl-delay raises it
    timeout: float = 30.0
    max_body_bytes: int = 10_000_000
    max_redirects: int = 10
    retry_base: float = duration("5s")  # backoff: full jitter over min(cap, base × 2^(n-1))
    retry_cap: float = duration("15m")
    retry_attempts: int = 6  # then the page goes to the dead letter
    max_pause_wait: float = duration("30s")  # longer host pauses defer the host's pages


@dataclass(frozen=True)
class ExtractConfig:
    # HTML is parsed in worker processes, one page each (README "Extraction")
    workers: int | None = None  # default: min(2, CPU cores)
    cpu_budget: float = duration("30s")  # CPU time one page may use; over it, the page fails


@dataclass(frozen=True)
class ServerConfig:
    listen: str = "127.0.0.1:8787"


@dataclass(frozen=True)
class EventConfig:
    """One ``[[events]]`` table: an outbound change-event receiver."""

    url: str
    secret: str | None = None  # a ${ENV_VAR} reference
    types: tuple[str, ...] = ()  # created / updated / removed / restored; empty = all
    sources: tuple[str, ...] = ()  # empty = all
    min_magnitude: float = 0.0
    max_attempts: int = 8  # then the dead letter (`ragsync events --replay-dead`)
    retry_base: float = duration("5s")
    retry_cap: float = duration("15m")
    timeout: float = duration("10s")


@dataclass(frozen=True)
class SourceConfig:
    """One ``[[sources]]`` table: the keys every kind shares, plus the kind's own ``options``."""

    id: str
    kind: str
    every: float = duration("1h")  # how often the source is due (its listing is read) …
    cron: str | None = None  # … or a cron expression instead
    min_interval: float | None = field(default=None, metadata={"duration": True})  # = every
    max_interval: float = duration("24h")  # adaptive per-page revisit bounds
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    strip_params: tuple[str, ...] = ()  # extra query parameters (globs) left out of identity
    webhook_secret: str | None = None
    missing_confirmations: int = 2
    missing_grace: float = duration("1h")
    prune_unlisted: bool = True
    max_urls: int = 1_000_000  # URLs read from one listing; more: a warning, listing incomplete
    # Hosts (globs, e.g. "*.example.org") beyond those of the source's own URLs it may fetch.
    allowed_hosts: tuple[str, ...] = ()
    # Fetch from loopback, link-local and private addresses (README "Security").
    allow_private_networks: bool = False
    options: Any = None  # the connector's own frozen dataclass (e.g. the sitemap url)


@dataclass(frozen=True)
class Config:
    """The whole configuration. ``base_dir`` is the folder of the file it came from."""

    sources: tuple[SourceConfig, ...]
    state: StateConfig = StateConfig()
    store: StoreConfig = StoreConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    chunker: ChunkerConfig = ChunkerConfig()
    extract: ExtractConfig = ExtractConfig()
    fetch: FetchConfig = FetchConfig()
    server: ServerConfig = ServerConfig()
    events: tuple[EventConfig, ...] = ()
    base_dir: str = "."
    path: str | None = None

    def source(self, source_id: str) -> SourceConfig:
        """The source called ``source_id``.

        Raises:
            ConfigError: no such source (the message lists the known ids).
        """
        for source in self.sources:
            if source.id == source_id:
                return source
        known = ", ".join(s.id for s in self.sources)
        raise ConfigError(f"no source with id {source_id!r} (known: {known})", path=self.path)


_SECTIONS: dict[str, type] = {
    "state": StateConfig,
    "store": StoreConfig,
    "embedder": EmbedderConfig,
    "chunker": ChunkerConfig,
    "extract": ExtractConfig,
    "fetch": FetchConfig,
    "server": ServerConfig,
}
_SOURCE_COMMON = {f.name for f in dataclasses.fields(SourceConfig)} - {"options"}


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate a ``ragsync.toml``.

    Raises:
        ConfigError: the file is missing, is not valid TOML, or a key is unknown, of the wrong
            type or missing (the message names the file and the key).
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            "file not found (create one with `ragsync init`)", path=str(file)
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", path=str(file)) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", path=str(file)) from exc
    return config_from_mapping(data, base_dir=file.resolve().parent, path=str(file))


def config_from_mapping(
    data: Mapping[str, Any], *, base_dir: str | os.PathLike[str] = ".", path: str | None = None
) -> Config:
    """Build a :class:`Config` from already-parsed TOML data (see :func:`load_config`)."""
    base = Path(base_dir).resolve()
    reader = _Reader(path=path, base_dir=base)
    allowed = set(_SECTIONS) | {"sources", "events"}
    for key in data:
        if key not in allowed:
            reader.unknown(key, allowed)
    sections: dict[str, Any] = {
        name: reader.dataclass(cls, data.get(name, {}), name) for name, cls in _SECTIONS.items()
    }
    raw_sources = data.get("sources")
    if raw_sources is None:
        raise ConfigError(
            "missing required key (add at least one [[sources]] table)", path=path, key="sources"
        )
    if not isinstance(raw_sources, list) or not all(isinstance(s, dict) for s in raw_sources):
        raise ConfigError("must be an array of tables ([[sources]])", path=path, key="sources")
    if not raw_sources:
        raise ConfigError("at least one [[sources]] table is required", path=path, key="sources")
    sources = tuple(reader.source(raw, f"sources[{i}]") for i, raw in enumerate(raw_sources))
    seen: set[str] = set()
    for i, source in enumerate(sources):
        if source.id in seen:
            raise ConfigError(
                f"duplicate source id {source.id!r}", path=path, key=f"sources[{i}].id"
            )
        seen.add(source.id)
    raw_events = data.get("events", [])
    if not isinstance(raw_events, list):
        raise ConfigError("must be an array of tables ([[events]])", path=path, key="events")
    events = tuple(
        reader.dataclass(EventConfig, raw, f"events[{i}]") for i, raw in enumerate(raw_events)
    )
    return Config(sources=sources, events=events, base_dir=str(base), path=path, **sections)


class _Reader:
    """Validates raw TOML tables against dataclass fields, naming the key at fault."""

    def __init__(self, *, path: str | None, base_dir: Path):
        self.path = path
        self.base_dir = base_dir

    def fail(self, key: str, message: str) -> typing.NoReturn:
        raise ConfigError(message, path=self.path, key=key)

    def unknown(self, key: str, allowed: set[str]) -> typing.NoReturn:
        name = key.rsplit(".", 1)[-1]
        close = difflib.get_close_matches(name, sorted(allowed), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        self.fail(key, f"unknown key{hint}")

    def dataclass(self, cls: type[T], raw: Any, where: str, skip: set[str] = frozenset()) -> T:  # type: ignore[assignment]
        """Build ``cls`` from the table ``raw``; ``where`` is the table's dotted name."""
        if not isinstance(raw, dict):
            self.fail(where, f"must be a table, got {_type_name(raw)}")
        fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        hints = typing.get_type_hints(cls)
        names = set(fields) - skip
        for key in raw:
            if key not in names:
                self.unknown(f"{where}.{key}", names)
        values = {}
        for name in names:
            f = fields[name]
            key = f"{where}.{name}"
            if name not in raw:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    self.fail(key, "missing required key")
                if f.metadata.get("path"):  # default paths are relative to the file too
                    values[name] = self.value(hints[name], f.default, key, f.metadata)
                continue
            value = self.value(hints[name], raw[name], key, f.metadata)
            values[name] = value
        return cls(**values)

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
                self.fail(key, f"must be one of {', '.join(map(repr, args))}, got {raw!r}")
            return raw
        if origin is tuple:
            if not isinstance(raw, list):
                self.fail(key, f"must be an array, got {_type_name(raw)}")
            return tuple(self.value(args[0], item, f"{key}[{i}]", {}) for i, item in enumerate(raw))
        if hint is float:
            if isinstance(raw, bool) or not isinstance(raw, int | float):
                self.fail(key, f"must be a number, got {_type_name(raw)}")
            return float(raw)
        if hint is int:
            if isinstance(raw, bool) or not isinstance(raw, int):
                self.fail(key, f"must be an integer, got {_type_name(raw)}")
            return raw
        if hint is bool:
            if not isinstance(raw, bool):
                self.fail(key, f"must be true or false, got {_type_name(raw)}")
            return raw
        if hint is str:
            if not isinstance(raw, str):
                self.fail(key, f"must be a string, got {_type_name(raw)}")
            if meta.get("path"):
                return str((self.base_dir / raw).resolve()) if raw != ":memory:" else raw
            return raw
        return raw

    def source(self, raw: dict[str, Any], where: str) -> SourceConfig:
        from ragsync.registry import source_class  # the registry, never a connector by name

        for required in ("id", "kind"):
            if required not in raw:
                self.fail(f"{where}.{required}", "missing required key")
        kind = raw["kind"]
        if not isinstance(kind, str):
            self.fail(f"{where}.kind", f"must be a string, got {_type_name(kind)}")
        try:
            connector = source_class(kind)
        except LookupError as exc:
            self.fail(f"{where}.kind", str(exc))
        options_cls = connector.Options
        option_names = {f.name for f in dataclasses.fields(options_cls)}
        common = {k: v for k, v in raw.items() if k in _SOURCE_COMMON}
        specific = {k: v for k, v in raw.items() if k not in _SOURCE_COMMON}
        for key in specific:
            if key not in option_names:
                self.unknown(f"{where}.{key}", option_names | _SOURCE_COMMON)
        source = self.dataclass(SourceConfig, common, where, skip={"options"})
        if source.cron:
            from ragsync.schedule import validate_cron

            try:
                validate_cron(source.cron)
            except ValueError as exc:
                self.fail(f"{where}.cron", str(exc))
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", source.id):
            self.fail(f"{where}.id", "use only letters, digits, '-', '_' and '.'")
        options = self.dataclass(options_cls, specific, where)
        try:
            connector.validate(options)
        except ConfigError as exc:
            self.fail(f"{where}.{exc.key}" if exc.key else where, exc.detail)
        return dataclasses.replace(source, options=options)


def _type_name(value: Any) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)
