"""The http_api connector: pagination, checkpoints, watermark with overlap, deletion flags,
the poll log and its gaps (issue #3)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

from ragsync.clock import iso, parse_iso
from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import make_config


class Api:
    """A paginated change API: ?since=ISO&cursor=N, 5 records a page, newest last."""

    def __init__(self, count: int, *, link: bool = False):
        self.records = [
            {
                "id": i,
                "title": f"Record {i}",
                "body": f"Record number {i} describes widget {i}.",
                "updated": f"2026-11-01T00:{i:02d}:00Z",
                "deleted": False,
            }
            for i in range(count)
        ]
        self.link = link
        self.requests: list[dict] = []
        self.block_at: int | None = None
        self.blocked = threading.Event()
        self.release = threading.Event()

    def __call__(self, path, headers):
        if not path.startswith("/api/changes"):
            return None
        query = {k: v[0] for k, v in parse_qs(urlsplit(path).query).items()}
        self.requests.append(query)
        cursor = int(query.get("cursor", 0))
        if self.block_at is not None and cursor == self.block_at:
            self.blocked.set()
            self.release.wait(30)
        since = query.get("since", "")
        matching = sorted(
            (r for r in self.records if r["updated"] >= since), key=lambda r: r["updated"]
        )
        page = matching[cursor : cursor + 5]
        more = cursor + 5 < len(matching)
        body: dict = {"data": {"items": page}}
        response_headers = {"Content-Type": "application/json"}
        if more and self.link:
            nxt = f"/api/changes?cursor={cursor + 5}" + (f"&since={since}" if since else "")
            response_headers["Link"] = f'<{nxt}>; rel="next"'
        elif more:
            body["next_cursor"] = str(cursor + 5)
        return 200, response_headers, json.dumps(body).encode()

    def touch(self, i, **fields):
        self.records[i].update(fields, updated=f"2026-11-01T01:{i:02d}:00Z")


def api_source(site, **extra):
    return {
        "id": "api",
        "kind": "http_api",
        "url": site.base_url + "/api/changes",
        "items": "data.items",
        "id_field": "id",
        "title_field": "title",
        "content_fields": ["body"],
        "updated_field": "updated",
        "deleted_field": "deleted",
        "next": "next_cursor",
        "cursor_param": "cursor",
        "since_param": "since",
        "overlap": "2m",
        "page_size": 5,
        **extra,
    }


def test_pages_watermark_updates_deletions_and_gaps(tmp_path, embedder):
    api = Api(12)
    site = DevSite({})
    site.start()
    site.fault = api
    try:
        config = make_config(tmp_path, [api_source(site)])
        with Syncer(config, embedder=embedder) as syncer:
            first = syncer.run()
            assert first.ok and first.counters.documents_created == 12
            assert [r.get("cursor") for r in api.requests] == [None, "5", "10"]
            assert first.counters.requests_sent == 3  # no page fetches: records carry content
            doc = syncer.state.documents.get("api:id:3")
            assert "widget 3" in doc["markdown"] and doc["title"] == "Record 3"

            api.touch(3, body="Record 3 now describes gadget 3.")
            api.touch(5, deleted=True)
            api.requests.clear()
            second = syncer.run()
            # The next poll starts at the watermark minus the 2 minute overlap.
            assert api.requests[0]["since"] == "2026-11-01T00:09:00Z"
            assert second.counters.documents_updated == 1
            assert second.counters.tombstones_created == 1
            assert "gadget" in syncer.state.documents.get("api:id:3")["markdown"]
            assert syncer.state.documents.get("api:id:5")["status"] == "tombstoned"
            hits = {h.doc_key for h in syncer.search("widget 5", k=12)}
            assert "api:id:5" not in hits and "api:id:4" in hits

            polls = syncer.state.discovery.list_polls("api")
            assert [p["outcome"] for p in polls] == ["ok", "ok"]
            assert polls[0]["records"] == 12 and polls[0]["truncated"] == 2  # two full pages
            assert syncer.status()["sources"]["api"]["polls"]["gaps"] == []
            # Force a gap: pretend the second poll asked for a later window than it did (a day
            # after the first poll's end: a fixed date would pass, as 2026-12-01 did).
            later = iso(parse_iso(polls[0]["window_end"]) + timedelta(days=1))
            syncer.state.discovery.update_poll(polls[1]["id"], {"window_start": later})
            gaps = syncer.status()["sources"]["api"]["polls"]["gaps"]
            assert gaps == [{"from": polls[0]["window_end"], "to": later}]
    finally:
        site.stop()


def test_link_header_continuation(tmp_path, embedder):
    api = Api(7, link=True)
    site = DevSite({})
    site.start()
    site.fault = api
    try:
        config = make_config(tmp_path, [api_source(site, next="link")])
        with Syncer(config, embedder=embedder) as syncer:
            assert syncer.run().counters.documents_created == 7
        assert [r.get("cursor") for r in api.requests] == [None, "5"]
    finally:
        site.stop()


def test_killed_mid_pagination_resumes_from_the_last_committed_page(tmp_path):
    api = Api(30)
    site = DevSite({})
    site.start()
    site.fault = api
    config = tmp_path / "ragsync.toml"
    source = api_source(site)
    lines = [f"{k} = {json.dumps(v)}" for k, v in source.items()]
    config.write_text("[[sources]]\n" + "\n".join(lines) + "\n")
    command = [sys.executable, "-m", "ragsync", "run", "--config", str(config)]
    try:
        api.block_at = 15  # the 4th page hangs: pages 1–3 are committed by then
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert api.blocked.wait(120)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        api.release.set()
        api.block_at = None
        resumed_from = len(api.requests)
        rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
    finally:
        api.release.set()
        site.stop()
    # The rerun started where the killed run's last committed page pointed ...
    assert api.requests[resumed_from].get("cursor") == "15"
    # ... and nothing was lost.
    with Syncer.from_config(config) as syncer:
        keys = {d["doc_key"] for d in syncer.state.documents.list() if d["status"] == "active"}
        assert keys == {f"api:id:{i}" for i in range(30)}
        assert syncer.verify().clean
        polls = syncer.state.discovery.list_polls("api")
        assert polls[-1]["outcome"] == "ok"
