"""`ragsync serve`: the sync loop plus an HTTP server (starlette, served by uvicorn).

Endpoints:
    POST /hooks/{source_id}   targeted re-sync of the URLs (or API record ids) in the body
    GET  /healthz             liveness
    GET  /metrics             Prometheus text: the run counters, queue depth, lag
    GET  /status              the JSON of `ragsync status --json`
    GET  /search?q=…&k=…&source=…&mode=…   warm search (:mod:`ragsync.searchapi`: who may ask)

A hook is authenticated per source (``webhook_secret``) by Standard Webhooks headers
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature``; timestamps older or newer than
5 minutes are refused) or GitHub's ``X-Hub-Signature-256``. A delivery seen before is ignored
(remembered in the state DB): by its id, and for GitHub also by its body's digest, since
GitHub's signature covers the body and not ``X-GitHub-Delivery``. Bodies over 1 MiB are
refused; URLs outside the source's scope are refused with 422 (no request forgery through the
hook). Accepted work is committed to the state DB's queue before the 202 answer, and the sync
loop drains the queue first.

State reads and writes run in worker threads, never on the event loop, and wait at most
:data:`STATE_WAIT` for another process's write lock: a busy DB is a 503 with ``Retry-After``
(the sender retries; nothing was queued), and ``/healthz`` answers meanwhile. A source whose
secret names an unset variable is logged at start-up and its hook answers 404.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import json
import logging
import signal
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ragsync.clock import iso, parse_iso, utc_now
from ragsync.config import Config, resolve_secret
from ragsync.configvalues import bearer_token, hook_secret, parse_listen
from ragsync.embed import Embedder
from ragsync.errors import ConfigError, RagsyncError
from ragsync.models import Counters
from ragsync.pipeline.context import collection_embedder
from ragsync.pipeline.targets import outside
from ragsync.registry import open_store
from ragsync.retrieval import NoSparseVectors, index_facts
from ragsync.runlock import RunLocked
from ragsync.searchapi import (
    ParamError,
    SharedStore,
    WarmSearch,
    authorized,
    hit_dict,
    index_id,
    parse_search_params,
    search_access,
)
from ragsync.state import StateDB
from ragsync.sync import Syncer
from ragsync.urls import redact_url

log = logging.getLogger("ragsync.server")
T = TypeVar("T")
MAX_BODY = 1024 * 1024
STATE_WAIT = 2.0  # seconds a request waits for another process's write lock, then 503
RETRY_AFTER = 5  # seconds, in the 503's Retry-After
SEARCH_THREADS = 2  # queries in worker threads at once (embedding is serialised anyway)
SEARCH_QUEUE = 16  # queries waiting or running; more is a 503 with Retry-After


@dataclass
class ServeLoop:
    """The sync loop of `serve`: a pass whenever something is due (targeted work at once).

    Its vector store is ``store``, shared with ``/search`` (one open handle per process).
    """

    config: Config
    wake: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    counters: Counters = field(default_factory=Counters)
    last_ok: bool = True
    runs: int = 0
    store: SharedStore = field(init=False)

    def __post_init__(self) -> None:
        # serve's passes never wait for a store another process writes (they come again next
        # tick), its queries read through that process, and it lets go of its own when
        # another process asks (README "Vector stores").
        store = dataclasses.replace(self.config.store, open_wait=0.0)
        self.store = SharedStore(lambda: open_store(store))

    def loop(self) -> None:
        with Syncer(self.config, store=self.store) as syncer:
            while not self.stop.is_set():
                self.store.release_if_idle()
                if syncer.due_now():  # targeted work first, then due sources and pages
                    try:
                        result = syncer.run()
                        self.counters.add(result.counters)
                        self.last_ok, self.runs = result.ok, self.runs + 1
                    except RunLocked as exc:  # a `ragsync run` holds the state: next tick
                        log.debug("%s", exc)
                    except Exception:  # the daemon outlives one failed pass; it is logged
                        log.exception("sync pass failed")
                        self.last_ok = False
                self.wake.wait(timeout=1.0)
                self.wake.clear()


@dataclass(frozen=True)
class Delivery:
    """A correctly signed hook delivery.

    Attributes:
        id: the delivery id (``webhook-id``, or ``X-GitHub-Delivery``; None when a GitHub
            delivery has none).
        body_digest: for a GitHub delivery, the SHA-256 hex of its body: the part its
            signature covers, so the part a replay cannot change.
    """

    id: str | None
    body_digest: str | None = None

    @property
    def label(self) -> str:
        """The delivery's name in log lines."""
        return self.id or f"sha256:{(self.body_digest or '')[:16]}"


def verify_hook(secret: str, body: bytes, headers: dict[str, str]) -> Delivery | None:
    """The delivery of a correctly signed hook, or None.

    Standard Webhooks (timestamp tolerance 5 minutes, via the ``standardwebhooks`` package;
    the signature covers the id, so a delivery is known by its id) or GitHub's
    ``X-Hub-Signature-256: sha256=<hex>`` (constant-time comparison; the signature covers the
    body only, so a delivery is known by its body digest as well as its id).

    Args:
        secret: the source's resolved ``webhook_secret``.
        body: the raw request body.
        headers: the request headers, names in lower case.
    """
    if "webhook-signature" in headers:
        try:
            Webhook(secret).verify(body, headers, json_parse=False)
        except (WebhookVerificationError, ValueError):
            return None
        return Delivery(headers.get("webhook-id"))
    github = headers.get("x-hub-signature-256", "")
    if github.startswith("sha256="):
        expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if hmac.compare_digest(github[7:], expected):
            digest = hashlib.sha256(body).hexdigest()
            return Delivery(headers.get("x-github-delivery") or None, body_digest=digest)
    return None


def hook_secrets(config: Config) -> dict[str, str]:
    """Each source's resolved ``webhook_secret``, by source id.

    A source whose secret names an unset environment variable, or resolves to a value that
    is no webhook secret (empty, a malformed ``whsec_…``), is left out, with one warning
    naming the source and the key: its hook endpoint answers 404, as for a source without a
    secret, and the rest of the daemon runs.
    """
    secrets: dict[str, str] = {}
    for source in config.sources:
        if not source.webhook_secret:
            continue
        key = f"sources.{source.id}.webhook_secret"
        try:
            secret = resolve_secret(source.webhook_secret, key=key, check=hook_secret)
        except ConfigError as exc:
            log.warning("source %r: webhook disabled (404): %s: %s", source.id, key, exc.detail)
            continue
        if secret:  # None only for a source without the key, skipped above
            secrets[source.id] = secret
    return secrets


class StateBusy(Exception):
    """The state DB stayed locked by another writer for longer than a request may wait."""


async def off_loop(call: Callable[[], T]) -> T:
    """``call()`` in a worker thread, so that the event loop (and ``/healthz``) never waits
    for the state DB; the request waits at most :data:`STATE_WAIT` plus a grace second.

    Raises:
        StateBusy: SQLite's busy timeout ran out ("database is locked"), or the bound did
            (the abandoned call may still complete: a delivery it commits late is then a
            duplicate when the sender retries, so nothing is lost or queued twice).
    """
    with anyio.move_on_after(STATE_WAIT + 1.0):
        try:
            return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise StateBusy(str(exc)) from exc
            raise
    raise StateBusy(f"no answer from the state DB within {STATE_WAIT + 1.0:.0f} s")


def busy(exc: StateBusy) -> Response:
    """503 with ``Retry-After``: the sender retries, and nothing was queued."""
    log.warning("state DB busy, answered 503: %s", exc)
    return JSONResponse(
        {"error": "state DB busy, retry later"},
        503,
        headers={"Retry-After": str(RETRY_AFTER)},
    )


def search_token(config: Config) -> str | None:
    """``[server] search_token`` resolved; an unset variable or a bad value is logged and
    yields ``""`` (search refused, never open)."""
    try:
        return resolve_secret(
            config.server.search_token, key="server.search_token", check=bearer_token
        )
    except ConfigError as exc:
        log.warning("search disabled (403): server.search_token: %s", exc.detail)
        return ""


def create_app(
    config: Config,
    loop: ServeLoop | None = None,
    *,
    listen: str = "",
    host: str | None = None,
    embedder_factory: Callable[[], Embedder] | None = None,
) -> Starlette:
    """The ASGI app of `ragsync serve` (its sync loop is started by the app's lifespan).

    Args:
        config: the configuration.
        loop: the sync loop (default: a new one); tests pass one already stopped.
        listen: the address it is served on, for the start-up log line.
        host: the listen host, which decides who may search (default: ``[server] listen``'s).
        embedder_factory: builds the query embedder on the first search (default: the
            configured one; tests pass a slow or counting one).
    """
    loop = loop or ServeLoop(config)
    secrets = hook_secrets(config)
    token = search_token(config)
    access = (
        "off"
        if token == ""
        else search_access(host or parse_listen(config.server.listen)[0], token)
    )
    limiter = anyio.CapacityLimiter(SEARCH_THREADS)
    searching = {"now": 0}
    source_ids = {source.id for source in config.sources}
    index = index_id(config)
    # The receiver's own state connection, used from worker threads (see off_loop); its
    # waits for another writer are bounded, so a busy DB is a 503, never a hung request.
    state = StateDB.from_config(config.state)
    state.wait_for_writers_at_most(STATE_WAIT)
    warm = WarmSearch(
        embedder_factory or partial(collection_embedder, config, state),
        loop.store,
        config,
        partial(index_facts, state, config.store.collection),
    )
    reader = Syncer(config, state=state)
    registry = CollectorRegistry()
    totals = {
        name: Counter(f"ragsync_{name}", f"ragsync counter {name}", registry=registry)
        for name in Counters().as_dict()
    }
    exported = Counters()
    queue_depth = Gauge("ragsync_queue_depth", "targeted re-syncs waiting", registry=registry)
    lag = Gauge("ragsync_lag_seconds", "age of the oldest page check", registry=registry)
    last_ok = Gauge("ragsync_last_run_ok", "1 when the last pass succeeded", registry=registry)

    async def hook(request: Request) -> Response:
        source_id = request.path_params["source_id"]
        source = next((s for s in config.sources if s.id == source_id), None)
        secret = secrets.get(source_id)
        if source is None or secret is None:
            return JSONResponse({"error": f"no webhook for source {source_id!r}"}, 404)
        body = bytearray()
        async for piece in request.stream():
            body += piece
            if len(body) > MAX_BODY:
                return JSONResponse({"error": f"body over {MAX_BODY} bytes"}, 413)
        headers = {k.lower(): v for k, v in request.headers.items()}
        delivery = verify_hook(secret, bytes(body), headers)
        if delivery is None:
            return JSONResponse({"error": "invalid or missing signature"}, 401)
        try:
            payload = json.loads(body)
            urls = [str(u) for u in payload.get("urls", [])]
            ids = [str(i) for i in payload.get("ids", [])]
        except (ValueError, AttributeError, TypeError):
            return JSONResponse(
                {"error": 'body must be JSON: {"urls": [...]} or {"ids": [...]}'}, 400
            )
        try:
            # The source's scope, URL by URL, as for `resync` (README "Targeted re-sync").
            refused = await off_loop(lambda: outside(source, urls, base_dir=config.base_dir))
            if refused:  # named without credentials
                shown = [redact_url(url) for url in refused]
                return JSONResponse({"error": "outside the source's scope", "urls": shown}, 422)
            queued = await off_loop(
                lambda: state.targets.add(
                    source_id,
                    urls,
                    record_ids=ids,
                    reason="webhook",
                    delivery_id=delivery.id,
                    body_digest=delivery.body_digest,
                    at=iso(utc_now()),
                )
            )
        except StateBusy as exc:
            return busy(exc)
        if queued is None:
            log.info("hook %s: delivery %s is a duplicate, ignored", source_id, delivery.label)
            return JSONResponse({"duplicate": True, "queued": 0}, 200)
        log.info(
            "hook %s: delivery %s accepted, %d URL(s) and %d id(s) queued",
            source_id,
            delivery.label,
            len(urls),
            len(ids),
        )
        loop.wake.set()
        return JSONResponse({"queued": queued}, 202)

    async def healthz(request: Request) -> Response:
        # No state DB read: liveness must not depend on the DB's write lock.
        return JSONResponse({"ok": True, "runs": loop.runs, "last_run_ok": loop.last_ok})

    def read_gauges() -> tuple[int, str]:
        oldest = min((state.documents.oldest_check(s.id) or "" for s in config.sources), default="")
        return state.targets.count(), oldest

    async def metrics(request: Request) -> Response:
        try:
            depth, oldest = await off_loop(read_gauges)
        except StateBusy as exc:
            return busy(exc)
        current = loop.counters.as_dict()
        for name, value in current.items():
            delta = value - getattr(exported, name)
            if delta > 0:
                totals[name].inc(delta)
                setattr(exported, name, value)
        queue_depth.set(depth)
        if oldest:
            lag.set((utc_now() - parse_iso(oldest)).total_seconds())
        last_ok.set(1 if loop.last_ok else 0)
        return PlainTextResponse(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    async def status(request: Request) -> Response:
        # The sync loop owns the store: the daemon's status does not open it.
        try:
            return JSONResponse(await off_loop(lambda: reader.status(count_points=False)))
        except StateBusy as exc:
            return busy(exc)

    async def search(request: Request) -> Response:
        if access == "off":
            return JSONResponse(
                {
                    "error": "search is off: serve listens on a non-loopback address without "
                    '[server] search_token (README "Security")'
                },
                403,
            )
        if token and not authorized(request.headers.get("authorization"), token):
            return JSONResponse(
                {"error": "missing or wrong bearer token"},
                401,
                headers={"WWW-Authenticate": 'Bearer realm="ragsync"'},
            )
        raw = {name: request.query_params.getlist(name) for name in set(request.query_params)}
        try:
            query = parse_search_params(raw, source_ids)
        except ParamError as exc:
            return JSONResponse({"error": exc.message, "param": exc.param}, exc.status)
        if searching["now"] >= SEARCH_QUEUE:
            return JSONResponse(
                {"error": "too many queries in flight, retry later"},
                503,
                headers={"Retry-After": "1"},
            )
        searching["now"] += 1
        try:  # the model and the store in a worker thread: the event loop keeps answering
            hits = await anyio.to_thread.run_sync(partial(warm.search, query), limiter=limiter)
        except NoSparseVectors as exc:
            return JSONResponse({"error": str(exc), "param": "mode"}, 422)
        except RagsyncError as exc:  # e.g. the store folder held by another process
            log.warning("search failed: %s", exc)
            return JSONResponse({"error": str(exc)}, 503, headers={"Retry-After": str(RETRY_AFTER)})
        finally:
            searching["now"] -= 1
        return JSONResponse({"hits": [hit_dict(hit) for hit in hits], "index": index})

    thread: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        thread["loop"] = threading.Thread(target=loop.loop, name="ragsync-sync", daemon=True)
        thread["loop"].start()
        names = [f"{s.id} (webhook)" if s.id in secrets else s.id for s in config.sources]
        log.info("serving on %s; sources: %s", listen or "(ASGI app)", ", ".join(names))
        if access == "off":
            log.warning(
                "/search is off: set [server] search_token to search on a non-loopback address"
            )
        yield
        loop.stop.set()
        loop.wake.set()
        thread["loop"].join(timeout=30)  # a pass in flight finishes or is replayed later
        loop.store.shutdown()
        reader.close()

    return Starlette(
        routes=[
            Route("/hooks/{source_id}", hook, methods=["POST"]),
            Route("/healthz", healthz),
            Route("/metrics", metrics),
            Route("/status", status),
            Route("/search", search),
        ],
        lifespan=lifespan,
    )


def serve(config: Config, listen: str | None = None) -> None:
    """Run the daemon until SIGINT/SIGTERM (uvicorn handles both, then the lifespan ends)."""
    import numpy  # noqa: F401  (now, in one thread: a query and a sync importing it at once break it)
    import uvicorn

    def exit_cleanly(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal to the
    # handler it found: ours turns a requested stop into exit code 0.
    signal.signal(signal.SIGTERM, exit_cleanly)
    signal.signal(signal.SIGINT, exit_cleanly)
    host, port = parse_listen(listen or config.server.listen)
    if logging.getLogger().getEffectiveLevel() < logging.ERROR:  # not `-q`
        # A daemon's own lines (start, each accepted hook) are shown at the default verbosity.
        log.setLevel(min(log.getEffectiveLevel(), logging.INFO))
    shown = f"[{host}]" if ":" in host else host
    app = create_app(config, listen=f"http://{shown}:{port}", host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning")
