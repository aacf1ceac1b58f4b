"""Hostile input to the webhook receiver of `ragsync serve` (issue #17, item 6).

A replayed GitHub delivery, a state DB held locked by another process, a secret whose
variable is unset, the scope check per URL, and the daemon's own log lines.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook
from starlette.testclient import TestClient

from ragsync.clock import iso, utc_now
from ragsync.config import Config
from ragsync.pipeline import targets
from ragsync.server import ServeLoop, create_app
from ragsync.state import StateDB
from ragsync.testing import DevSite
from tests.support import make_config, sitemap_source
from tests.support.asgi import uvicorn_thread

SECRET = "whsec_" + base64.b64encode(b"hook secret for the docs source!").decode()


def standard(body: dict[str, Any], *, msg_id: str | None = None) -> tuple[bytes, dict]:
    """A Standard Webhooks delivery of ``body``, signed with :data:`SECRET`."""
    raw = json.dumps(body)
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    when = datetime.now(UTC)
    return raw.encode(), {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": Webhook(SECRET).sign(msg_id, when, raw),
        "content-type": "application/json",
    }


def github(body: bytes, delivery: str | None) -> dict[str, str]:
    """GitHub's headers for ``body``: the signature covers the body only."""
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {"x-hub-signature-256": signature, "content-type": "application/json"}
    if delivery is not None:
        headers["x-github-delivery"] = delivery
    return headers


def docs_config(tmp_path, site: DevSite, **source: Any) -> Config:
    return make_config(
        tmp_path, [sitemap_source(site, webhook_secret="${DOCS_HOOK_SECRET}", **source)]
    )


def receiver(config: Config) -> TestClient:
    """The receiver alone: its sync loop is stopped before it starts."""
    loop = ServeLoop(config)
    loop.stop.set()
    return TestClient(create_app(config, loop, listen="http://127.0.0.1:8787"))


def queued_rows(config: Config) -> list[dict[str, Any]]:
    state = StateDB(config.state.path)
    try:
        return state.targets.list()
    finally:
        state.close()


@pytest.fixture
def docs(tmp_path, monkeypatch, site) -> Iterator[tuple[TestClient, DevSite, Config]]:
    monkeypatch.setenv("DOCS_HOOK_SECRET", SECRET)
    config = docs_config(tmp_path, site)
    with receiver(config) as client:
        yield client, site, config


def test_github_replay_with_a_new_or_missing_delivery_id_is_a_duplicate(docs):
    client, site, config = docs
    body = json.dumps({"urls": [site.base_url + "/guide/page-0"]}).encode()
    first = client.post("/hooks/docs", content=body, headers=github(body, "d-1"))
    assert first.status_code == 202 and first.json() == {"queued": 1}
    for replay in ("d-2", None, "d-1"):  # the signature does not cover the delivery id
        again = client.post("/hooks/docs", content=body, headers=github(body, replay))
        assert again.status_code == 200, replay
        assert again.json() == {"duplicate": True, "queued": 0}, replay
    # Another body is another delivery, with or without an id.
    other = json.dumps({"urls": [site.base_url + "/guide/page-1"]}).encode()
    assert client.post("/hooks/docs", content=other, headers=github(other, None)).status_code == 202
    assert [row["url"] for row in queued_rows(config)] == [
        site.base_url + "/guide/page-0",
        site.base_url + "/guide/page-1",
    ]


def test_standard_webhooks_dedupe_by_id_only(docs):
    """Their signature covers the id: the same body under a new id is a new delivery."""
    client, site, config = docs
    payload = {"urls": [site.base_url + "/guide/page-2"]}
    body, headers = standard(payload, msg_id="msg_one")
    assert client.post("/hooks/docs", content=body, headers=headers).status_code == 202
    assert client.post("/hooks/docs", content=body, headers=headers).status_code == 200
    body, headers = standard(payload, msg_id="msg_two")
    assert client.post("/hooks/docs", content=body, headers=headers).status_code == 202
    assert len(queued_rows(config)) == 2


@pytest.mark.parametrize("value", [None, "", "whsec_not-base64!"], ids=["unset", "empty", "bad"])
def test_an_unset_or_malformed_secret_is_a_startup_warning_and_a_404(
    tmp_path, monkeypatch, site, caplog, value
):
    if value is None:
        monkeypatch.delenv("DOCS_HOOK_SECRET", raising=False)
    else:
        monkeypatch.setenv("DOCS_HOOK_SECRET", value)
    config = docs_config(tmp_path, site)
    body, headers = standard({"urls": [site.base_url + "/guide/page-0"]})
    with caplog.at_level(logging.WARNING, logger="ragsync"), receiver(config) as client:
        answer = client.post("/hooks/docs", content=body, headers=headers)
        assert client.get("/healthz").status_code == 200
    assert answer.status_code == 404 and "Traceback" not in answer.text
    warned = [r.getMessage() for r in caplog.records if "DOCS_HOOK_SECRET" in r.getMessage()]
    assert len(warned) == 1 and "'docs'" in warned[0] and "\n" not in warned[0]
    assert queued_rows(config) == []


def test_serve_logs_its_start_and_each_accepted_hook(tmp_path, monkeypatch, site, caplog):
    monkeypatch.setenv("DOCS_HOOK_SECRET", SECRET)
    config = docs_config(tmp_path, site)
    page_0 = json.dumps({"urls": [site.base_url + "/guide/page-0"]}).encode()
    page_1, headers = standard({"urls": [site.base_url + "/guide/page-1"]}, msg_id="msg_log")
    with caplog.at_level(logging.INFO, logger="ragsync"), receiver(config) as client:
        accepted = client.post("/hooks/docs", content=page_0, headers=github(page_0, "g-7"))
        assert accepted.status_code == 202
        assert client.post("/hooks/docs", content=page_1, headers=headers).status_code == 202
        assert client.post("/hooks/docs", content=page_1, headers=headers).status_code == 200
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("ragsync")]
    started = [line for line in lines if "http://127.0.0.1:8787" in line]
    assert len(started) == 1 and "docs" in started[0]
    accepted_lines = [line for line in lines if "accepted" in line]
    assert len(accepted_lines) == 2  # the duplicate is not an accepted hook
    assert "docs" in accepted_lines[0] and "g-7" in accepted_lines[0]
    assert "1 URL" in accepted_lines[0]
    assert "msg_log" in accepted_lines[1] and "1 URL" in accepted_lines[1]


def test_each_url_goes_through_the_source_scope(docs, monkeypatch):
    """The receiver asks the source's scope about every URL and refuses the lot when one is
    outside, naming it without credentials."""
    client, site, config = docs
    asked = []

    def outside(source, urls, *, base_dir):
        asked.append((source.id, list(urls)))
        return targets.outside(source, urls, base_dir=base_dir)

    monkeypatch.setattr("ragsync.server.outside", outside)
    inside = site.base_url + "/guide/page-0"
    metadata = "http://169.254.169.254/latest/meta-data/"
    secret = "http://admin:hunter2@169.254.169.254/latest/"
    body, headers = standard({"urls": [inside, metadata, secret]})
    answer = client.post("/hooks/docs", content=body, headers=headers)
    assert answer.status_code == 422
    assert answer.json()["urls"] == [metadata, "http://***@169.254.169.254/latest/"]
    assert "hunter2" not in answer.text
    assert asked == [("docs", [inside, metadata, secret])]
    assert queued_rows(config) == []


def test_a_urls_file_source_refuses_hooks_for_other_hosts(tmp_path, monkeypatch, site):
    monkeypatch.setenv("DOCS_HOOK_SECRET", SECRET)
    (tmp_path / "urls.txt").write_text(site.base_url + "/guide/page-0\n")
    config = make_config(
        tmp_path,
        [
            {
                "id": "docs",
                "kind": "urls",
                "urls_file": "urls.txt",
                "webhook_secret": "${DOCS_HOOK_SECRET}",
            }
        ],
    )
    with receiver(config) as client:
        body, headers = standard({"urls": ["http://evil.example/x"]})
        answer = client.post("/hooks/docs", content=body, headers=headers)
    assert answer.status_code == 422
    assert queued_rows(config) == []


def test_an_idle_serve_writes_no_run_rows(tmp_path, site):
    """Rows no pass handles (a retry of a source no longer configured, a retry of an API
    record, which its listing refreshes) do not make the daemon pass every second."""
    config = make_config(tmp_path, [sitemap_source(site, every="1h")])
    state = StateDB(config.state.path)
    now = utc_now()
    past = iso(now - timedelta(minutes=1))
    state.runs.put_source_run("docs", iso(now), iso(now + timedelta(hours=1)))  # listed
    for key, source_id in (("gone:http://x.example/a", "gone"), ("docs:id:42", "docs")):
        state.attempts.add(
            key,
            "http://x.example/a",
            source_id=source_id,
            status=503,
            error="HTTP 503",
            at=past,
            state="retrying",
            next_retry_at=past,
        )
    loop = ServeLoop(config)
    thread = threading.Thread(target=loop.loop, name="test-serve-loop")
    thread.start()
    time.sleep(2.5)  # the loop looks for due work once a second
    loop.stop.set()
    loop.wake.set()
    thread.join(30)
    assert loop.runs == 0
    assert state.db.execute("select count(*) from runs").fetchone()[0] == 0
    assert site.hits == []
    state.close()


# -- the receiver under a held write lock: a real server, a real event loop ---------------


@pytest.fixture
def served(tmp_path, monkeypatch, site) -> Iterator[tuple[str, DevSite, Config]]:
    """The receiver served by uvicorn on 127.0.0.1, in a thread: requests reach its event
    loop over TCP, so a handler that blocked the loop would hold every other request."""
    monkeypatch.setenv("DOCS_HOOK_SECRET", SECRET)
    config = docs_config(tmp_path, site)
    loop = ServeLoop(config)
    loop.stop.set()
    with uvicorn_thread(create_app(config, loop)) as base:
        yield base, site, config


def test_a_held_write_lock_gives_503_with_retry_after_and_healthz_keeps_answering(served):
    base, site, config = served
    body, headers = standard({"urls": [site.base_url + "/guide/page-0"]})
    holder = sqlite3.connect(config.state.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write transaction, held
    answers: list[httpx.Response] = []
    try:
        hook = threading.Thread(
            target=lambda: answers.append(
                httpx.post(base + "/hooks/docs", content=body, headers=headers, timeout=60)
            )
        )
        hook.start()
        latencies = []
        while hook.is_alive():  # /healthz while the hook waits for the lock
            started = time.monotonic()
            assert httpx.get(base + "/healthz", timeout=10).status_code == 200
            latencies.append(time.monotonic() - started)
            time.sleep(0.05)
        hook.join()
    finally:
        holder.execute("ROLLBACK")
    assert len(latencies) >= 3 and max(latencies) < 1.0, latencies
    (answer,) = answers
    assert answer.status_code == 503 and int(answer.headers["retry-after"]) > 0
    assert queued_rows(config) == []  # nothing queued, nothing remembered
    retried = httpx.post(base + "/hooks/docs", content=body, headers=headers, timeout=30)
    assert retried.status_code == 202 and retried.json() == {"queued": 1}
    holder.close()


@pytest.mark.parametrize("url", ["https://docs.example.org]/a", "http://[::1/x", "ftp://x/"])
def test_a_url_that_is_no_url_gets_422_naming_it(docs, url):
    client, site, config = docs
    body, headers = standard({"urls": [url]})
    answer = client.post("/hooks/docs", content=body, headers=headers)
    assert answer.status_code == 422 and answer.json()["urls"] == [url]
    assert queued_rows(config) == []
