"""A small OpenAI-compatible embedding service on 127.0.0.1 for the tests and benchmarks.

It serves any embedder (the real MiniLM model in the HTTP embedder's tests, :class:`HashEmbedder`
where only the plumbing is under test), counts requests and the most it ever had in flight,
and takes scripted faults: ``server.faults`` is a list of ``(status, headers)`` answered, in
order, before serving.

Example::

    server = EmbeddingServer(HashEmbedder(), delay=0.05)   # a remote service's latency
    url = server.start()   # "http://127.0.0.1:PORT/v1/embeddings"
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ragsync.testing.site import serve_loopback, stop_server


class HashEmbedder:
    """Deterministic unit vectors derived from each text's hash: no model, no CPU to speak of.

    Equal texts get equal vectors and different texts unrelated ones, which is all a test of
    the sync machinery (workers, stores, the journal) needs from an embedder.
    """

    def __init__(self, dimension: int = 384):
        self.dimension = dimension

    def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = []
        for text in texts:
            rng = random.Random(hashlib.sha256(text.encode("utf-8")).digest())
            values = [rng.gauss(0.0, 1.0) for _ in range(self.dimension)]
            norm = sum(v * v for v in values) ** 0.5 or 1.0
            vectors.append([v / norm for v in values])
        return vectors


class FastEmbedder:
    """A whole embedder (the ``Embedder`` protocol) for thousands of pages: hash vectors
    (:class:`HashEmbedder`) and a whitespace token count. Deterministic, no model, no
    tokenizer: for tests and benchmarks of what is not the model (titles, chunks, the sync
    machinery)."""

    model_id = "fast-hash@1;dim=32"
    dimension = 32
    max_input_tokens = 256

    def __init__(self) -> None:
        self._vectors = HashEmbedder(self.dimension)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self._vectors.embed(list(texts))


class EmbeddingServer:
    def __init__(self, embedder: Any, *, delay: float = 0.0, api_key: str | None = None):
        self.embedder = embedder
        self.delay = delay  # seconds per request, so overlapping requests can be seen
        self.api_key = api_key
        self.faults: list[tuple[int, dict[str, str]]] = []
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()  # one encode at a time; requests still overlap
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> str:
        self._server = serve_loopback(self._handle, "POST")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1/embeddings"

    def stop(self) -> None:
        if self._server is not None:
            stop_server(self._server)

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length", 0)))
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            fault = self.faults.pop(0) if self.faults else None
            request = json.loads(body)
            self.requests.append(
                {"input": request["input"], "authorization": handler.headers.get("Authorization")}
            )
        try:
            time.sleep(self.delay)
            if self.api_key and handler.headers.get("Authorization") != f"Bearer {self.api_key}":
                fault = (401, {})
            if fault:
                status, headers, payload = fault[0], fault[1], b'{"error": "scripted"}'
            else:
                with self._model_lock:
                    vectors = self.embedder.embed(request["input"])
                status, headers = 200, {}
                payload = json.dumps(
                    {
                        "object": "list",
                        "model": request["model"],
                        # in reverse order: clients must sort by index
                        "data": [
                            {"object": "embedding", "index": i, "embedding": v}
                            for i, v in reversed(list(enumerate(vectors)))
                        ],
                    }
                ).encode()
        finally:
            with self._lock:
                self.in_flight -= 1
        handler.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)
