"""Change log and outbound change events (issue #6): a transactional outbox delivered at
least once, signed per Standard Webhooks, in order per document, with a replayable dead letter."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from standardwebhooks.webhooks import Webhook

from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import example_pages, make_config, page, ragsync_run, sentences, sitemap_source

SECRET = "whsec_" + base64.b64encode(b"a test secret of enough length!!").decode()


class Receiver:
    """A webhook receiver on 127.0.0.1 that verifies every signature with standardwebhooks."""

    def __init__(self, fail_first: int = 0):
        self.fail_first = fail_first
        self.calls = 0
        self.events: list[dict] = []
        self.bad_signatures = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.calls += 1
                    failing = receiver.calls <= receiver.fail_first
                    try:
                        event = Webhook(SECRET).verify(body, dict(self.headers))
                    except Exception:
                        receiver.bad_signatures += 1
                        event = None
                    if event is not None and not failing:
                        receiver.events.append(event)
                status = 500 if failing or event is None else 204
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.stop()


def events_table(receiver, **extra):
    return {
        "events": [
            {
                "url": receiver.url,
                "secret": SECRET,
                "retry_base": "0.01s",
                "retry_cap": "0.05s",
                **extra,
            }
        ]
    }


def test_events_survive_a_failing_receiver_and_keep_per_document_order(
    tmp_path, receiver, embedder
):
    receiver.fail_first = 6
    site = DevSite(example_pages(3))
    site.start()
    try:
        config = make_config(
            tmp_path,
            [sitemap_source(site, missing_confirmations=2, missing_grace="0s")],
            **events_table(receiver),
        )
        with Syncer(config, embedder=embedder) as syncer:
            syncer.run()  # 3 created
            body = site.pages["/guide/page-1"].body
            for n in range(2):  # two updates of one page
                site.set_page("/guide/page-1", "Guide 1", body + f"<p>Edit number {n}.</p>")
                syncer.run()
            site.remove_page("/guide/page-2", status=410)
            for _ in range(3):
                syncer.run()
            for _ in range(20):  # let the retries come due
                if not syncer.state.outbox.list("pending"):
                    break
                syncer.deliver_events(deadline=1)
            changes = syncer.changes()
            assert [c.change_type for c in changes].count("created") == 3
            assert syncer.changes(source="nope") == []
            assert syncer.changes(since="1h") == changes
            delivered_rows = {row["event_id"] for row in syncer.state.outbox.list("delivered")}
    finally:
        site.stop()
    assert receiver.bad_signatures == 0
    assert receiver.calls > len(receiver.events) >= len(changes)  # some deliveries failed
    delivered = {e["id"] for e in receiver.events}
    assert delivered == delivered_rows
    assert len(delivered) == len(changes) == 6  # 3 created, 2 updated, 1 removed: none lost
    page1 = [e["type"] for e in receiver.events if e["url"].endswith("/guide/page-1")]
    assert page1[0] == "document.created" and page1[1:] == ["document.updated"] * 2
    removed = [e for e in receiver.events if e["type"] == "document.removed"]
    assert removed[0]["url"].endswith("/guide/page-2") and removed[0]["chunks_removed"] == 4
    event = receiver.events[0]
    assert set(event) >= {
        "id",
        "type",
        "source",
        "url",
        "doc_key",
        "timestamp",
        "old_hash",
        "new_hash",
        "chunks_added",
        "chunks_removed",
        "magnitude",
        "diff_excerpt",
    }


def test_a_receiver_that_never_recovers_leaves_a_replayable_dead_letter(tmp_path, embedder):
    receiver = Receiver(fail_first=10_000)
    site = DevSite({"/a": page("A", {"S": [sentences("alpha")]})})
    site.start()
    try:
        config_path = tmp_path / "ragsync.toml"
        config_path.write_text(
            f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{site.base_url}/sitemap.xml"\n'
            f'[[events]]\nurl = "{receiver.url}"\nsecret = "{SECRET}"\nmax_attempts = 2\n'
            'retry_base = "0s"\n'
        )
        run = subprocess.run(
            [sys.executable, "-m", "ragsync", "run", "--json", "-c", str(config_path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert json.loads(run.stdout)["counters"]["events_delivered"] == 0
        dead = subprocess.run(
            [sys.executable, "-m", "ragsync", "events", "--dead", "--json", "-c", str(config_path)],
            capture_output=True,
            text=True,
        )
        [row] = json.loads(dead.stdout)
        assert row["state"] == "dead" and row["attempts"] == 2 and row["last_error"] == "HTTP 500"
        receiver.fail_first = 0  # the receiver is fixed
        replay = subprocess.run(
            [sys.executable, "-m", "ragsync", "events", "--replay-dead", "-c", str(config_path)],
            capture_output=True,
            text=True,
        )
        assert "requeued 1 event(s); delivered 1" in replay.stderr
        assert [e["id"] for e in receiver.events] == [row["event_id"]]
    finally:
        receiver.stop()
        site.stop()


def test_killing_the_run_between_commit_and_delivery_loses_no_event(tmp_path, receiver):
    site = DevSite(example_pages(2))
    base = site.start()
    try:
        folder = tmp_path / "k"
        folder.mkdir()
        config = folder / "ragsync.toml"
        config.write_text(
            f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{site.base_url}/sitemap.xml"\n'
            f'[[events]]\nurl = "{receiver.url}"\nsecret = "{SECRET}"\n'
        )
        assert ragsync_run(config, kill_on="committed") == -9
        assert receiver.events == []
        assert ragsync_run(config) == 0
    finally:
        site.stop()
    assert sorted(e["url"] for e in receiver.events) == [
        base + "/guide/page-0",
        base + "/guide/page-1",
    ]


def test_filters_and_a_bad_secret(tmp_path, receiver, embedder):
    from ragsync.errors import ConfigError

    site = DevSite(example_pages(1))
    site.start()
    try:
        source = [sitemap_source(site)]
        config = make_config(tmp_path, source, **events_table(receiver, types=["removed"]))
        with Syncer(config, embedder=embedder) as syncer:
            assert syncer.run().counters.events_delivered == 0  # only "created" happened
            assert syncer.state.outbox.list() == []
        # A malformed secret is refused when the configuration is read (issue #17).
        with pytest.raises(ConfigError, match=r"events\[0\]\.secret"):
            make_config(
                tmp_path / "b", source, events=[{"url": receiver.url, "secret": "not base64 !!"}]
            )
    finally:
        site.stop()
