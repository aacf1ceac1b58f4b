"""`ragsync serve` and its webhook receiver (issue #5, first part)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from standardwebhooks.webhooks import Webhook
from starlette.testclient import TestClient

from ragsync.server import ServeLoop, create_app
from ragsync.testing import DevSite
from tests.support import example_pages, make_config, page, sentences, sitemap_source

SECRET = "whsec_" + base64.b64encode(b"hook secret for the docs source!").decode()


def signed(
    body: dict, *, secret: str = SECRET, when: datetime | None = None, msg_id: str | None = None
) -> tuple[bytes, dict]:
    raw = json.dumps(body)
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    when = when or datetime.now(UTC)
    signature = Webhook(secret).sign(msg_id, when, raw)
    return raw.encode(), {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": signature,
        "content-type": "application/json",
    }


@pytest.fixture
def client(tmp_path, monkeypatch, site):
    monkeypatch.setenv("DOCS_HOOK_SECRET", SECRET)
    config = make_config(
        tmp_path,
        [
            sitemap_source(site, webhook_secret="${DOCS_HOOK_SECRET}"),
            {"id": "nohook", "kind": "urls", "urls": [site.base_url + "/"]},
        ],
    )
    worker = ServeLoop(config)
    worker.stop.set()  # no sync loop: these tests look at the receiver alone
    with TestClient(create_app(config, worker)) as test_client:
        yield test_client, site


def queue_depth(client):
    metrics = client.get("/metrics").text
    for family in text_string_to_metric_families(metrics):
        if family.name == "ragsync_queue_depth":
            return family.samples[0].value
    raise AssertionError("no queue depth gauge")


def test_signature_checks_each_with_its_status_and_nothing_queued_when_refused(client):
    client, site = client
    url = site.base_url + "/guide/page-1"
    ok_body, ok_headers = signed({"urls": [url]})
    cases = []
    body, headers = signed({"urls": [url]}, secret="whsec_" + base64.b64encode(b"x" * 32).decode())
    cases.append(("wrong secret", body, headers, 401))
    cases.append(("tampered body", ok_body.replace(b"page-1", b"page-2"), ok_headers, 401))
    body, headers = signed({"urls": [url]}, when=datetime.now(UTC) - timedelta(minutes=10))
    cases.append(("expired timestamp", body, headers, 401))
    cases.append(("missing headers", ok_body, {"content-type": "application/json"}, 401))
    body, headers = signed({"urls": [url], "pad": "x" * (1024 * 1024)})
    cases.append(("oversized body", body, headers, 413))
    body, headers = signed({"urls": ["http://169.254.169.254/latest/meta-data", url]})
    cases.append(("out-of-scope URL", body, headers, 422))
    for name, body, headers, status in cases:
        response = client.post("/hooks/docs", content=body, headers=headers)
        assert response.status_code == status, name
        assert SECRET not in response.text and "hook secret" not in response.text
        assert queue_depth(client) == 0, name
    assert (
        "169.254.169.254"
        in client.post("/hooks/docs", content=cases[-1][1], headers=cases[-1][2]).json()["urls"][0]
    )

    assert client.post("/hooks/nope", content=ok_body, headers=ok_headers).status_code == 404
    assert client.post("/hooks/nohook", content=ok_body, headers=ok_headers).status_code == 404

    accepted = client.post("/hooks/docs", content=ok_body, headers=ok_headers)
    assert accepted.status_code == 202 and accepted.json() == {"queued": 1}
    assert queue_depth(client) == 1
    replayed = client.post("/hooks/docs", content=ok_body, headers=ok_headers)
    assert replayed.status_code == 200 and replayed.json()["duplicate"] is True
    assert queue_depth(client) == 1  # a replayed delivery id queues nothing


def test_github_style_signature(client):
    client, site = client
    body = json.dumps({"urls": [site.base_url + "/guide/page-0"]}).encode()
    good = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {"x-hub-signature-256": good, "x-github-delivery": "d-1"}
    assert client.post("/hooks/docs", content=body, headers=headers).status_code == 202
    bad = {"x-hub-signature-256": "sha256=" + "0" * 64, "x-github-delivery": "d-2"}
    assert client.post("/hooks/docs", content=body, headers=bad).status_code == 401


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_resyncs_exactly_the_hooked_page(tmp_path):
    site = DevSite(example_pages(3))
    site_url = site.start()
    port = free_port()
    config = tmp_path / "ragsync.toml"
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:{port}"\n[[sources]]\nid = "docs"\nkind = "sitemap"\n'
        f'url = "{site.base_url}/sitemap.xml"\nwebhook_secret = "${{DOCS_HOOK_SECRET}}"\n'
        'every = "1h"\n'
    )
    env = {**os.environ, "DOCS_HOOK_SECRET": SECRET}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragsync", "serve", "-c", str(config)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the first full sync
            try:
                if httpx.get(base + "/healthz").json()["runs"] >= 1:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        else:
            raise AssertionError("serve never finished its first sync")
        edited = "Hooks make this edit searchable within seconds."
        site.set_page(
            "/guide/page-2",
            *page(
                "Guide 2: throttling",
                {"About throttling": [sentences("throttling")], "Fresh": [edited]},
            ),
        )
        seen = len(site.hits)
        body, headers = signed({"urls": [site.base_url + "/guide/page-2"]})
        answer = httpx.post(base + "/hooks/docs", content=body, headers=headers)
        assert answer.status_code == 202 and answer.json() == {"queued": 1}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if httpx.get(base + "/healthz").json()["runs"] >= 2:
                break
            time.sleep(0.2)
        metrics = {
            s.name: s.value
            for f in text_string_to_metric_families(httpx.get(base + "/metrics").text)
            for s in f.samples
        }
        assert metrics["ragsync_responses_200_changed_total"] == 4  # 3 first, then 1
        assert metrics["ragsync_queue_depth"] == 0
        status = httpx.get(base + "/status").json()
        assert status["sources"]["docs"]["documents"]["active"] == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        site.stop()
    assert proc.returncode == 0, proc.stderr.read().decode()[-2000:]
    requested = [h.path for h in site.hits[seen:] if h.path.startswith("/guide/")]
    assert requested == ["/guide/page-2"]  # only the hooked page was re-synced
    from ragsync.sync import Syncer

    with Syncer.from_config(config) as syncer:  # verified through the vector store
        hits = syncer.search(edited, k=1)
    assert hits[0].url == site_url + "/guide/page-2" and edited in hits[0].text


def test_resync_cli_uses_the_same_queue_and_refuses_out_of_scope(tmp_path, site):
    config = tmp_path / "ragsync.toml"
    config.write_text(
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{site.base_url}/sitemap.xml"\n'
    )
    run = [sys.executable, "-m", "ragsync"]
    assert subprocess.run([*run, "run", "-c", str(config)], capture_output=True).returncode == 0
    site.set_page("/guide/page-0", "Guide 0", "<h1>Guide 0</h1><p>" + sentences("z") + "</p>")
    seen = len(site.hits)
    proc = subprocess.run(
        [*run, "resync", site.base_url + "/guide/page-0", "--json", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["counters"]["documents_updated"] == 1
    assert [h.path for h in site.hits[seen:] if h.path.startswith("/guide/")] == ["/guide/page-0"]
    refused = subprocess.run(
        [*run, "resync", "http://169.254.169.254/", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "outside the scope" in refused.stderr
