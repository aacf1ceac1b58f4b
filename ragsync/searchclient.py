"""`ragsync search`: ask a running `ragsync serve` first, else search in this process.

A serve on ``[server] listen`` answers from a loaded model and an open store in milliseconds,
where a fresh process loads the model (seconds) and opens the store. So the command sends one
``GET /search`` there: nothing listening (connection refused, the usual case without a serve)
means a local search without a word; a serve that answers badly (an error, a timeout, another
index) means a local search after one line on stderr. A local search that took over
:data:`SLOW` seconds ends with one line saying that a running serve would answer faster.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from ragsync.config import Config, resolve_secret
from ragsync.configvalues import bearer_token, parse_listen
from ragsync.errors import ConfigError
from ragsync.models import Hit
from ragsync.searchapi import hit_from_dict, index_id

CONNECT_TIMEOUT = 1.0  # a serve on this machine accepts at once; nothing there is refused
# A serve that accepted may be loading its model for its first query (seconds): wait for it
# rather than load a second copy here.
READ_TIMEOUT = 30.0
SLOW = 1.0  # seconds of local search after which serve is suggested


@dataclass(frozen=True)
class ServeAnswer:
    """What a serve said: its hits, or None with the reason (None when nothing listened)."""

    hits: list[Hit] | None
    note: str | None = None


def serve_url(config: Config) -> str:
    """The ``/search`` URL of the serve ``[server] listen`` describes (a wildcard listen
    address is reached through loopback).

    >>> from ragsync.config import Config, ServerConfig
    >>> serve_url(Config(sources=(), server=ServerConfig(listen="0.0.0.0:9000")))
    'http://127.0.0.1:9000/search'
    """
    host, port = parse_listen(config.server.listen)
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/search"


def ask_serve(
    config: Config,
    query: str,
    k: int,
    source: str | None,
    *,
    mode: str | None = None,
    transport: httpx.BaseTransport | None = None,
) -> ServeAnswer:
    """One ``GET /search`` to the configured serve (with the Bearer token when one is set).

    Returns:
        the hits; or no hits and no note when nothing listens; or no hits and a one-line
        note when a serve answered with an error, too late, or for another index.
    """
    url = serve_url(config)
    headers = {}
    try:
        token = resolve_secret(
            config.server.search_token, key="server.search_token", check=bearer_token
        )
    except ConfigError:
        token = None  # serve then refuses, and says so in the note
    if token:
        headers["Authorization"] = f"Bearer {token}"
    params: dict[str, str | int] = {"q": query, "k": k}
    if source:
        params["source"] = source
    if mode:
        params["mode"] = mode
    timeout = httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT)
    try:
        with httpx.Client(transport=transport, timeout=timeout, trust_env=False) as client:
            answer = client.get(url, params=params, headers=headers)
    except httpx.ConnectError:
        return ServeAnswer(None)  # no serve running
    except httpx.HTTPError as exc:
        return ServeAnswer(None, f"serve at {url} did not answer ({type(exc).__name__})")
    try:
        body = answer.json()
    except ValueError:
        body = {}
    if answer.status_code != 200:
        error = body.get("error", "") if isinstance(body, dict) else ""
        return ServeAnswer(None, f"serve at {url} answered {answer.status_code} {error}".strip())
    if not isinstance(body, dict) or body.get("index") != index_id(config):
        return ServeAnswer(None, f"serve at {url} serves another index")
    try:
        return ServeAnswer([hit_from_dict(hit) for hit in body["hits"]])
    except (KeyError, TypeError, ValueError):
        return ServeAnswer(None, f"serve at {url} answered something that is not search hits")


def search(
    config: Config,
    query: str,
    k: int,
    source: str | None,
    *,
    local: Callable[[], list[Hit]],
    note: Callable[[str], None],
    mode: str | None = None,
) -> list[Hit]:
    """Hits from a running serve, else from a local search (see the module docstring).

    Args:
        local: the same search in this process (``Syncer.search``).
        mode: ``dense``, ``sparse`` or ``hybrid`` (None: the configured default).
        note: receives the one-line remarks for stderr.

    Raises:
        ConfigError: ``source`` names no source.
        RagsyncError: the local search failed (e.g. the store folder is held elsewhere).
    """
    if source:
        config.source(source)
    answer = ask_serve(config, query, k, source, mode=mode)
    if answer.hits is not None:
        return answer.hits
    if answer.note:
        note(f"ragsync: {answer.note}; searching locally")
    started = time.monotonic()
    hits = local()
    took = time.monotonic() - started
    if took > SLOW and answer.note is None:
        note(
            f"ragsync: this search took {took:.1f} s, mostly loading the model; a running "
            "`ragsync serve` answers in milliseconds (and `ragsync search` uses it)"
        )
    return hits
