"""The Qdrant server path (issue #9), against a stand-in speaking Qdrant's REST API on 127.0.0.1
(no Qdrant server can be installed here): collection parameters for a cluster, payload indexes,
batched writes, retries on transient errors and clear errors on the rest; in local mode, a
folder held by another process says what to do."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ragsync.config import StoreConfig
from ragsync.connectors.qdrant_store import QdrantStore
from ragsync.errors import StoreError
from ragsync.sync import Syncer
from tests.support import make_config, sitemap_source

UPDATED = {"operation_id": 1, "status": "completed"}


class FakeQdrant:
    """Answers the REST calls QdrantStore makes; ``faults`` maps a path to scripted statuses."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any, dict[str, str]]] = []
        self.faults: dict[str, list[int]] = {}
        self.exists = False
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                fake.handle(self)

            do_PUT = do_POST = do_GET  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = json.loads(handler.rfile.read(length)) if length else None
        path = handler.path.split("?", 1)[0]
        with self._lock:
            self.calls.append((handler.command, path, body, dict(handler.headers)))
            scripted = self.faults.get(path)
            status = scripted.pop(0) if scripted else 200
        if status != 200:
            result: Any = None
            reply = {"status": {"error": f"scripted {status}"}, "time": 0.0}
        elif path.endswith("/exists"):
            result = {"exists": self.exists}
        elif handler.command == "PUT" and path.count("/") == 2:  # create collection
            result, self.exists = True, True
        else:
            result = UPDATED
        if status == 200:
            reply = {"result": result, "status": "ok", "time": 0.0}
        payload = json.dumps(reply).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def writes(self, path: str) -> list[Any]:
        return [body for method, p, body, _ in self.calls if p == path and method != "GET"]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def qdrant():
    fake = FakeQdrant()
    yield fake
    fake.stop()


def point(i: int) -> tuple[str, list[float], dict]:
    return f"00000000-0000-0000-0000-00000000000{i}", [0.1, 0.2, 0.3], {"page_content": str(i)}


def test_a_cluster_collection_gets_its_parameters_indexes_and_batched_retried_writes(
    qdrant, monkeypatch
):
    monkeypatch.setenv("QDRANT_KEY", "k-123")
    monkeypatch.setenv("QDRANT_URL", qdrant.url)  # resolved where the store connects
    config = StoreConfig(
        url="${QDRANT_URL}",
        api_key="${QDRANT_KEY}",
        collection="docs",
        shard_number=3,
        replication_factor=2,
        write_consistency_factor=2,
        batch_size=2,
    )
    store = QdrantStore.from_config(config)
    store.retry_base = 0.01
    qdrant.faults["/collections/docs/points"] = [503, 429]
    try:
        store.ensure_collection(3)
        store.upsert([point(i) for i in range(5)])
        store.delete([point(i)[0] for i in range(3)])
    finally:
        store.close()

    created = qdrant.writes("/collections/docs")[0]
    assert created["vectors"] == {"size": 3, "distance": "Cosine"}
    assert (created["shard_number"], created["replication_factor"]) == (3, 2)
    assert created["write_consistency_factor"] == 2
    indexes = [body["field_name"] for body in qdrant.writes("/collections/docs/index")]
    assert indexes == ["metadata.doc_key", "metadata.url", "metadata.source"]
    upserts = [len(body["points"]) for body in qdrant.writes("/collections/docs/points")]
    assert upserts == [2, 2, 2, 2, 1]  # the first batch failed twice (503, 429), then passed
    deletes = [body["points"] for body in qdrant.writes("/collections/docs/points/delete")]
    assert [len(ids) for ids in deletes] == [2, 1]
    assert all(headers.get("api-key") == "k-123" for _, _, _, headers in qdrant.calls)


def test_a_write_that_keeps_failing_or_is_refused_raises_a_store_error(qdrant):
    store = QdrantStore("docs", url=qdrant.url, retry_attempts=3, retry_base=0.01)
    qdrant.exists = True
    qdrant.faults["/collections/docs/points/delete"] = [500, 502, 503]
    qdrant.faults["/collections/docs/points"] = [400]
    try:
        with pytest.raises(StoreError, match=rf"qdrant {qdrant.url}: delete: .*503"):
            store.delete([point(1)[0]])
        assert len(qdrant.writes("/collections/docs/points/delete")) == 3
        with pytest.raises(StoreError, match="upsert: .*400"):
            store.upsert([point(1)])
        assert len(qdrant.writes("/collections/docs/points")) == 1  # a 400 is not retried
    finally:
        store.close()


def test_qdrant_folder_held_by_another_process_says_what_to_do(tmp_path, site, embedder):
    # Local mode, waited for 1 s, then said.
    store = {"kind": "qdrant", "path": str(tmp_path / "qdrant"), "open_wait": "1s"}
    syncer = Syncer(make_config(tmp_path, [sitemap_source(site)], store=store), embedder=embedder)
    syncer.run()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from qdrant_client import QdrantClient; "
            f"c = QdrantClient(path={str(tmp_path / 'qdrant')!r}); print('ready', flush=True); "
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreError, match="another process.*waited 1 s.*store\\] url"):
            syncer.search("throttling")
    finally:
        holder.kill()
        holder.wait()
        syncer.close()
