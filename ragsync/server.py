"""`ragsync serve`: the sync loop plus an HTTP server (starlette, served by uvicorn).

Endpoints:
    POST /hooks/{source_id}   targeted re-sync of the URLs (or API record ids) in the body
    GET  /healthz             liveness
    GET  /metrics             Prometheus text: the run counters, queue depth, lag
    GET  /status              the JSON of `ragsync status --json`

A hook is authenticated per source (``webhook_secret``) by Standard Webhooks headers
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature``; timestamps older or newer than
5 minutes are refused) or GitHub's ``X-Hub-Signature-256``; a delivery id seen before is
ignored (remembered in the state DB); bodies over 1 MiB are refused; URLs outside the source's
scope are refused with 422 (no request forgery through the hook). Accepted work is committed
to the state DB's queue before the 202 answer, and the sync loop drains the queue first.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import signal
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ragsync.clock import iso, parse_iso, utc_now
from ragsync.config import Config, resolve_env
from ragsync.models import Counters
from ragsync.pipeline.targets import owns
from ragsync.runlock import RunLocked
from ragsync.sync import Syncer

log = logging.getLogger("ragsync")
MAX_BODY = 1024 * 1024


@dataclass
class ServeLoop:
    """The sync loop of `serve`: a pass whenever something is due (targeted work at once)."""

    config: Config
    wake: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    counters: Counters = field(default_factory=Counters)
    last_ok: bool = True
    runs: int = 0

    def loop(self) -> None:
        with Syncer(self.config) as syncer:
            while not self.stop.is_set():
                if syncer.due_now():  # targeted work first, then due sources and pages
                    try:
                        result = syncer.run()
                        self.counters.add(result.counters)
                        self.last_ok, self.runs = result.ok, self.runs + 1
                    except RunLocked as exc:  # a `ragsync run` holds the state: next tick
                        log.info("%s", exc)
                    except Exception:  # the daemon outlives one failed pass; it is logged
                        log.exception("sync pass failed")
                        self.last_ok = False
                self.wake.wait(timeout=1.0)
                self.wake.clear()


def verify_hook(secret: str, body: bytes, headers: dict[str, str]) -> str | None:
    """The delivery id of a correctly signed hook, or None.

    Standard Webhooks (timestamp tolerance 5 minutes, via the ``standardwebhooks`` package) or
    GitHub's ``X-Hub-Signature-256: sha256=<hex>`` (constant-time comparison).
    """
    if "webhook-signature" in headers:
        try:
            Webhook(secret).verify(body, headers, json_parse=False)
        except (WebhookVerificationError, ValueError):
            return None
        return headers.get("webhook-id")
    github = headers.get("x-hub-signature-256", "")
    if github.startswith("sha256="):
        expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if hmac.compare_digest(github[7:], expected):
            return headers.get("x-github-delivery") or hashlib.sha256(body).hexdigest()
    return None


def create_app(config: Config, loop: ServeLoop | None = None) -> Starlette:
    """The ASGI app of `ragsync serve` (its sync loop is started by the app's lifespan)."""
    loop = loop or ServeLoop(config)
    reader = Syncer(config)  # its own state connection, used from the event loop only
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
        secret = (
            resolve_env(source.webhook_secret, key=f"{source_id}.webhook_secret")
            if source and source.webhook_secret
            else None
        )
        if source is None or not secret:
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
        outside = [url for url in urls if not owns(source, url, base_dir=config.base_dir)]
        if outside:
            return JSONResponse({"error": "outside the source's scope", "urls": outside}, 422)
        queued = reader.state.targets.add(
            source_id,
            urls,
            record_ids=ids,
            reason="webhook",
            delivery_id=delivery,
            at=iso(utc_now()),
        )
        if queued is None:
            return JSONResponse({"duplicate": True, "queued": 0}, 200)
        loop.wake.set()
        return JSONResponse({"queued": queued}, 202)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True, "runs": loop.runs, "last_run_ok": loop.last_ok})

    async def metrics(request: Request) -> Response:
        current = loop.counters.as_dict()
        for name, value in current.items():
            delta = value - getattr(exported, name)
            if delta > 0:
                totals[name].inc(delta)
                setattr(exported, name, value)
        queue_depth.set(reader.state.targets.count())
        oldest = min(
            (reader.state.documents.oldest_check(s.id) or "" for s in config.sources), default=""
        )
        if oldest:
            moment = parse_iso(oldest)
            lag.set((utc_now() - moment).total_seconds())
        last_ok.set(1 if loop.last_ok else 0)
        return PlainTextResponse(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    async def status(request: Request) -> Response:
        # The sync loop owns the store: the daemon's status does not open it.
        return JSONResponse(reader.status(count_points=False))

    thread: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        thread["loop"] = threading.Thread(target=loop.loop, name="ragsync-sync", daemon=True)
        thread["loop"].start()
        yield
        loop.stop.set()
        loop.wake.set()
        thread["loop"].join(timeout=30)  # a pass in flight finishes or is replayed later
        reader.close()

    return Starlette(
        routes=[
            Route("/hooks/{source_id}", hook, methods=["POST"]),
            Route("/healthz", healthz),
            Route("/metrics", metrics),
            Route("/status", status),
        ],
        lifespan=lifespan,
    )


def serve(config: Config, listen: str | None = None) -> None:
    """Run the daemon until SIGINT/SIGTERM (uvicorn handles both, then the lifespan ends)."""
    import uvicorn

    def exit_cleanly(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal to the
    # handler it found: ours turns a requested stop into exit code 0.
    signal.signal(signal.SIGTERM, exit_cleanly)
    signal.signal(signal.SIGINT, exit_cleanly)
    host, _, port = (listen or config.server.listen).rpartition(":")
    uvicorn.run(create_app(config), host=host or "127.0.0.1", port=int(port), log_level="warning")
