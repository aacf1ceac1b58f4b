"""Load ``ragsync.toml`` into frozen dataclasses.

Every key has a default except ``sources``. Unknown keys, wrong types, missing required keys
and nonsense (a value out of its range, an empty string, a URL of the wrong scheme, a listen
address that is not ``HOST:PORT``, a path that cannot be written, a malformed secret) raise
:class:`~ragsync.errors.ConfigError` naming the file and the key (with a did-you-mean), so the
CLI exits 2 with one line. Paths are resolved relative to the config file's folder. Secrets
written as ``${ENV_VAR}`` are resolved, and then checked, where they are used
(:func:`resolve_env`, :func:`resolve_secret`), never at load time, so a run that does not need
a secret does not fail for want of it.

Example::

    config = load_config("ragsync.toml")
    config.sources[0].id          # "docs"
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from ragsync import __version__
from ragsync.configvalues import (
    ENV_REF,
    bearer_token,
    database_url,
    event_secret,
    hook_secret,
    host_pattern,
    http_url,
    parse_listen,
    store_url,
    writable_path,
)
from ragsync.errors import ConfigError
from ragsync.models import ChangeType
from ragsync.tables import TableReader, bounded, checked, duration, path_field, type_name
from ragsync.tables import parse_duration as parse_duration  # re-exported: cli, sync

DEFAULT_USER_AGENT = f"ragsync/{__version__} (+https://pypi.org/project/ragsync/)"


def resolve_env(value: str | None, *, key: str) -> str | None:
    """Replace ``${VAR}`` references in ``value`` by the environment's values.

    Raises:
        ConfigError: a referenced variable is not set (the message names ``key`` and the
            variable, never a value).
    """
    if value is None:
        return None
    return ENV_REF.sub(lambda match: _env_value(match.group(1), key), value)


def resolve_env_url(value: str | None, *, key: str) -> str | None:
    """:func:`resolve_env` for a URL: a value put into the user or password part is
    percent-encoded (RFC 3986 §3.2.1), so a password may hold ``@``, ``:`` or ``/``.

    Example::

        # PGPASSWORD='p@ss:word'
        resolve_env_url("postgresql://rs:${PGPASSWORD}@db/rs", key="state.url")
        # 'postgresql://rs:p%40ss%3Aword@db/rs'

    Raises:
        ConfigError: a referenced variable is not set.
    """
    if value is None:
        return None
    scheme, sep, rest = value.partition("://")
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    userinfo_end = len(scheme) + len(sep) + authority.rfind("@") if sep and "@" in authority else -1

    def substitute(match: re.Match[str]) -> str:
        text = _env_value(match.group(1), key)
        return quote(text, safe="") if match.start() < userinfo_end else text

    return ENV_REF.sub(substitute, value)


def resolve_secret(value: str | None, *, key: str, check: Callable[[str], None]) -> str | None:
    """:func:`resolve_env`, then ``check`` the result (e.g. a Standard Webhooks secret).

    Raises:
        ConfigError: a variable is not set, or the value fails ``check`` (the message names
            ``key`` and the variables, never the value).
    """
    resolved = resolve_env(value, key=key)
    if value is None or resolved is None:
        return None
    try:
        check(resolved)
    except ValueError as exc:
        names = ", ".join(f"${{{name}}}" for name in ENV_REF.findall(value))
        raise ConfigError(f"{names}: {exc}" if names else str(exc), key=key) from None
    return resolved


def _env_value(name: str, key: str) -> str:
    if name not in os.environ:
        raise ConfigError(f"environment variable {name} is not set", key=key)
    return os.environ[name]


def listen_address(value: str) -> None:
    """Refuse a listen address that is not ``HOST:PORT`` (see :func:`parse_listen`)."""
    parse_listen(value)


@dataclass(frozen=True)
class StateConfig:
    path: str = path_field(".ragsync/state.db")
    # A shared PostgreSQL instead of the SQLite file (workers): password as ${ENV_VAR}
    url: str | None = checked(database_url, None)
    pool_size: int = bounded(4, ge=1)  # PostgreSQL connections per process
    raw_body_retention: float = duration("7d")  # raw bodies kept (compressed) for `reindex`


@dataclass(frozen=True)
class StoreConfig:
    # auto: Qdrant Edge; a Qdrant server when url is set; local mode where path holds a
    # local-mode collection already (README "Vector stores"). Or a registered kind.
    kind: str = "auto"
    path: str = path_field(".ragsync/qdrant")
    url: str | None = checked(store_url, None)
    api_key: str | None = None
    collection: str = "ragsync"
    # Qdrant server or cluster (url): set when the collection is created
    shard_number: int | None = bounded(None, ge=1)
    replication_factor: int | None = bounded(None, ge=1)
    write_consistency_factor: int | None = bounded(None, ge=1)  # at most replication_factor
    batch_size: int = bounded(256, ge=1)  # points per write request
    timeout: float = duration("30s", positive=True)  # per request to a server
    retry_attempts: int = bounded(5, ge=1)  # per write, on transport errors, 429 and 5xx
    # Lexical sparse vectors beside the dense ones in collections ragsync creates (README
    # "Hybrid search"); a collection built without them gets them with `reindex`.
    sparse: bool = True
    # An embedded store (Edge, local mode) open in another process: how long a write waits
    # for it, asking the holder to let go (`serve` does), and a read for the holder's answer
    # (reads go through the holder; README "Vector stores").
    open_wait: float = duration("60s")


SPARSE_WEIGHT = 1.5
PAGE_WEIGHT = 0.1
SPARSE_GATE = 0.2


@dataclass(frozen=True)
class SearchConfig:
    # What `search` (CLI, Python API, serve) ranks by when not told: dense, sparse or hybrid.
    mode: Literal["dense", "sparse", "hybrid"] = "hybrid"
    # Hybrid: reciprocal-rank fusion, the sparse ranking's weight against the dense one's 1
    # (measured on both question sets: README "Hybrid search").
    sparse_weight: float = bounded(SPARSE_WEIGHT, ge=0.0)
    # Hybrid: the weight of a candidate's page coverage (the share of its page's other chunks
    # among the candidates) added to its fused score; 0 turns it off (measured: README
    # "Hybrid retrieval").
    page_weight: float = bounded(PAGE_WEIGHT, ge=0.0)
    # Hybrid: a lexical match counts fully only when its chunk's cosine to the query is within
    # this much of the best dense match's, a quarter beyond; 0 turns the gate off (measured:
    # README "Hybrid retrieval").
    sparse_gate: float = bounded(SPARSE_GATE, ge=0.0)


@dataclass(frozen=True)
class EmbedderConfig:
    kind: Literal["sentence-transformers", "http"] = "sentence-transformers"
    model: str = "all-MiniLM-L6-v2"
    # sentence-transformers: torch, or ONNX Runtime on a local export (ragsync.onnxembed);
    # auto: the collection's own backend, onnx-int8 for a new one (README "Embedding backends")
    backend: Literal["auto", "torch", "onnx", "onnx-int8"] = "auto"
    batch_size: int = bounded(64, ge=1)
    threads: int = bounded(2, ge=1)
    # kind = "http": an OpenAI-compatible /v1/embeddings service (then required)
    url: str | None = checked(http_url, None)
    api_key: str | None = None  # a ${ENV_VAR} reference, sent as a Bearer token
    model_id: str | None = None  # names model, revision, dimension; derived when absent
    dimension: int | None = bounded(None, ge=1)  # asked of the service once when absent
    max_input_tokens: int | None = bounded(None, ge=1)  # the model's window (256 for MiniLM)
    tokenizer: str | None = None  # the model's tokenizer.json (must exist), to count exactly
    concurrency: int = bounded(4, ge=1)  # requests in flight
    timeout: float = duration("60s", positive=True)
    retry_attempts: int = bounded(6, ge=1)  # per batch, on 429/5xx/transport errors


@dataclass(frozen=True)
class ChunkerConfig:
    # Measured: eval/bench_peers.py, eval/bench_retrieval.py (README "Structure-aware chunks")
    max_tokens: int = bounded(128, ge=16)  # ragsync.chunk.Chunker needs room for a heading


@dataclass(frozen=True)
class FetchConfig:
    user_agent: str = DEFAULT_USER_AGENT
    concurrency: int = bounded(8, ge=1)
    per_host_concurrency: int = bounded(2, ge=1)
    per_host_delay: float = duration("0s")  # between request starts; robots Crawl-delay raises it
    timeout: float = duration("30s", positive=True)
    max_body_bytes: int = bounded(10_000_000, ge=1)
    max_redirects: int = bounded(10, ge=0)  # 0: a redirect ends the page
    retry_base: float = duration("5s")  # backoff: full jitter over min(cap, base × 2^(n-1))
    retry_cap: float = duration("15m")  # at least retry_base
    retry_attempts: int = bounded(6, ge=1)  # then the page goes to the dead letter
    max_pause_wait: float = duration("30s")  # longer host pauses defer the host's pages


@dataclass(frozen=True)
class ExtractConfig:
    # HTML is parsed in worker processes, one page each (README "Extraction")
    workers: int | None = bounded(None, ge=1)  # default: min(2, CPU cores)
    cpu_budget: float = duration("30s", positive=True)  # CPU time one page may use, then it fails


@dataclass(frozen=True)
class ServerConfig:
    listen: str = checked(listen_address, "127.0.0.1:8787")  # HOST:PORT, IPv6 as [::1]:8787
    # /search needs "Authorization: Bearer <token>"; without it, /search answers only on a
    # loopback listen address (README "Security"). Best as ${ENV_VAR}.
    search_token: str | None = checked(bearer_token, None)


@dataclass(frozen=True)
class EventConfig:
    """One ``[[events]]`` table: an outbound change-event receiver."""

    url: str = checked(http_url)
    secret: str | None = checked(event_secret, None)  # whsec_…, or ${ENV_VAR} holding one
    types: tuple[ChangeType, ...] = ()  # empty = all
    sources: tuple[str, ...] = ()  # source ids; empty = all
    min_magnitude: float = bounded(0.0, ge=0, le=1)  # share of the chunks changed
    max_attempts: int = bounded(8, ge=1)  # then the dead letter (`ragsync events --replay-dead`)
    retry_base: float = duration("5s")
    retry_cap: float = duration("15m")
    timeout: float = duration("10s", positive=True)


@dataclass(frozen=True)
class SourceConfig:
    """One ``[[sources]]`` table: the keys every kind shares, plus the kind's own ``options``."""

    id: str
    kind: str
    every: float = duration("1h")  # how often the source is due (listing read; 0: each run) …
    cron: str | None = None  # … or a cron expression instead
    min_interval: float | None = duration(None)  # = every
    max_interval: float = duration("24h")  # adaptive per-page revisit bounds
    # Each page is asked in full (no validators) at least this often, whatever its validators
    # say: a server that answers 304 to everything is caught (README "Validators that lie").
    refetch_interval: float = duration("7d", positive=True)
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    strip_params: tuple[str, ...] = ()  # extra query parameters (globs) left out of identity
    webhook_secret: str | None = checked(hook_secret, None)  # GitHub's, or whsec_…
    missing_confirmations: int = bounded(2, ge=1)
    missing_grace: float = duration("1h")
    prune_unlisted: bool = True
    # A complete listing that leaves out more than this share of the known pages is taken as
    # broken (an empty sitemap, a home page without links), not as evidence: incomplete.
    max_unlisted_share: float = bounded(0.5, ge=0.0, le=1.0)
    # This many pages of one host (0: never), and at least outage_share of a window's 200s
    # there, arriving at one text is the host's outage page, not content
    # (README "Deletion safety", outage pages).
    outage_pages: int = bounded(3, ge=0)
    outage_share: float = bounded(0.5, ge=0.0, le=1.0)
    # A short page with a challenge, JavaScript-required or error-page marker, or a 200 with
    # Retry-After, is an outage page (false: read as content).
    outage_markers: bool = True
    # A change that keeps less than this share of a page's words is held until the
    # missing-page rule confirms it (0: never held).
    hold_shrink: float = bounded(0.1, ge=0.0, le=1.0)
    max_urls: int = bounded(1_000_000, ge=1)  # URLs read from one listing; more: incomplete
    # Hosts (globs, e.g. "*.example.org") beyond those of the source's own URLs it may fetch.
    allowed_hosts: tuple[str, ...] = checked(host_pattern, ())
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
    search: SearchConfig = SearchConfig()
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
    "search": SearchConfig,
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
    reader = TableReader(path=path, base_dir=base)
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
    sources = tuple(_read_source(reader, raw, f"sources[{i}]") for i, raw in enumerate(raw_sources))
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
    config = Config(sources=sources, events=events, base_dir=str(base), path=path, **sections)
    _check_together(reader, config)
    return config


def _check_together(reader: TableReader, config: Config) -> None:
    """Check what depends on other keys, the registry or the disk."""
    from ragsync.registry import AUTO, store_kinds

    store, fetch, embedder = config.store, config.fetch, config.embedder
    kinds = [AUTO, *store_kinds()]
    if store.kind not in kinds:
        hint, known = reader.hint(store.kind, set(kinds)), ", ".join(kinds)
        reader.fail("store.kind", f"unknown store kind {store.kind!r}{hint} (known: {known})")
    # The path is used only without a URL: a server keeps its own files.
    if not config.state.url:
        reader.check("state.path", config.state.path, partial(writable_path, folder=False))
    if not store.url:
        reader.check("store.path", store.path, partial(writable_path, folder=True))
    if (store.write_consistency_factor or 0) > (store.replication_factor or math.inf):
        reader.fail("store.write_consistency_factor", "must not exceed replication_factor")
    if embedder.kind == "http" and not embedder.url:
        reader.fail("embedder.url", 'kind = "http" needs the service URL')
    if embedder.kind == "http" and embedder.backend not in ("auto", "torch"):
        reader.fail("embedder.backend", 'applies to kind = "sentence-transformers" only')
    if embedder.tokenizer and not (reader.base_dir / embedder.tokenizer).is_file():
        reader.fail("embedder.tokenizer", f"no file {embedder.tokenizer!r}")
    ids = {source.id for source in config.sources}
    pairs = [("fetch", fetch.retry_base, fetch.retry_cap)]
    pairs += [(f"events[{i}]", e.retry_base, e.retry_cap) for i, e in enumerate(config.events)]
    for where, base, cap in pairs:
        if cap < base:
            reader.fail(f"{where}.retry_cap", "must be at least retry_base")
    for i, source in enumerate(config.sources):
        if (source.min_interval or 0) > source.max_interval:
            reader.fail(f"sources[{i}].min_interval", "must not exceed max_interval")
    urls: set[str] = set()
    for i, event in enumerate(config.events):
        for j, source_id in enumerate(event.sources):
            if source_id not in ids:
                hint = reader.hint(source_id, ids)
                reader.fail(f"events[{i}].sources[{j}]", f"no source {source_id!r}{hint}")
        if event.url in urls:  # deliveries are keyed by the receiver's URL
            reader.fail(f"events[{i}].url", "duplicate receiver URL")
        urls.add(event.url)


def _has_option(kind: str, key: str) -> bool:
    """Whether sources of ``kind`` take the key ``key`` (False when its connector cannot be
    loaded: the message about the key at fault comes first)."""
    from ragsync.registry import source_class

    try:
        return key in {f.name for f in dataclasses.fields(source_class(kind).Options)}
    except Exception:
        return False


def _read_source(reader: TableReader, raw: dict[str, Any], where: str) -> SourceConfig:
    from ragsync.registry import source_class, source_kinds  # never a connector by name

    for required in ("id", "kind"):
        if required not in raw:
            reader.fail(f"{where}.{required}", "missing required key")
    kind = raw["kind"]
    if not isinstance(kind, str):
        reader.fail(f"{where}.kind", f"must be a string, got {type_name(kind)}")
    if kind not in source_kinds():
        hint, known = reader.hint(kind, set(source_kinds())), ", ".join(source_kinds())
        reader.fail(f"{where}.kind", f"unknown source kind {kind!r}{hint} (known: {known})")
    connector = source_class(kind)
    options_cls = connector.Options
    option_names = {f.name for f in dataclasses.fields(options_cls)}
    common = {k: v for k, v in raw.items() if k in _SOURCE_COMMON}
    specific = {k: v for k, v in raw.items() if k not in _SOURCE_COMMON}
    for key in specific:
        if key not in option_names:
            elsewhere = [other for other in source_kinds() if _has_option(other, key)]
            if elsewhere:  # max_pages on a sitemap: a key of another kind
                kinds = " and ".join(repr(other) for other in elsewhere)
                reader.fail(f"{where}.{key}", f"not a key of {kind!r} sources, only of {kinds}")
            reader.unknown(f"{where}.{key}", option_names | _SOURCE_COMMON)
    source = reader.dataclass(SourceConfig, common, where, skip={"options"})
    if source.cron:
        from ragsync.schedule import validate_cron

        try:
            validate_cron(source.cron)
        except ValueError as exc:
            reader.fail(f"{where}.cron", str(exc))
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", source.id):
        reader.fail(f"{where}.id", "use only letters, digits, '-', '_' and '.'")
    options = reader.dataclass(options_cls, specific, where)
    try:
        connector.validate(options)
    except ConfigError as exc:
        reader.fail(f"{where}.{exc.key}" if exc.key else where, exc.detail)
    return dataclasses.replace(source, options=options)
