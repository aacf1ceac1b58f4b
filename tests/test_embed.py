"""The OpenAI-compatible HTTP embedder against a local service serving the real MiniLM model
(issue #9): same vectors as the in-process model, batching, a concurrency limit, Retry-After
and backoff, clear errors, and a whole sync through it."""

from __future__ import annotations

import math

import pytest

from ragsync.embed import HttpEmbedder, embedder_from_config
from ragsync.errors import ConfigError, EmbedError
from ragsync.sync import Syncer
from ragsync.testing import DevSite, EmbeddingServer
from tests.support import example_pages, make_config, sitemap_source


@pytest.fixture
def service(real_embedder):
    server = EmbeddingServer(real_embedder, delay=0.2)  # wide enough to see overlap
    url = server.start()
    yield server, url
    server.stop()


def test_vectors_match_the_local_model_in_batches_with_bounded_concurrency(service, real_embedder):
    server, url = service
    embedder = HttpEmbedder(url, batch_size=4, concurrency=2, retry_base=0.01)
    texts = [f"Rotate the signing key number {i} every night." for i in range(10)]

    vectors = embedder.embed(texts)

    local = real_embedder.embed(texts)
    assert len(vectors) == 10
    for mine, theirs in zip(vectors, local, strict=True):
        assert math.dist(mine, theirs) < 1e-4  # same model, answers sorted by index
    assert [len(r["input"]) for r in server.requests] == [4, 4, 2]
    assert server.max_in_flight == 2  # three batches, never more than two in flight
    assert embedder.dimension == 384 and len(server.requests) == 4  # one probe for the size
    assert embedder.model_id == "all-MiniLM-L6-v2@http;dim=384"
    assert embedder.count_tokens("hello world") == real_embedder.count_tokens("hello world")


def test_429_and_503_are_retried_after_retry_after_then_backoff(service):
    server, url = service
    server.faults = [(429, {"Retry-After": "0"}), (503, {}), (502, {})]
    embedder = HttpEmbedder(url, retry_base=0.01, retry_attempts=4)
    assert len(embedder.embed(["one text"])) == 1
    assert len(server.requests) == 4


def test_a_service_that_keeps_failing_raises_a_clear_error(service):
    server, url = service
    server.faults = [(503, {"Retry-After": "0"})] * 3
    with pytest.raises(EmbedError, match=r"gave up after 3 attempts \(HTTP 503"):
        HttpEmbedder(url, retry_base=0.01, retry_attempts=3).embed(["x"])
    server.faults = [(400, {})]
    with pytest.raises(EmbedError, match="HTTP 400") as error:
        HttpEmbedder(url, retry_base=0.01).embed(["x"])
    assert error.value.url == url and error.value.status == 400
    with pytest.raises(EmbedError, match="not 5-d"):
        HttpEmbedder(url, dimension=5).embed(["x"])


def test_config_builds_it_with_the_api_key_from_the_environment(
    tmp_path, monkeypatch, real_embedder
):
    server = EmbeddingServer(real_embedder, api_key="s3cret")
    url = server.start()
    try:
        table = {"kind": "http", "url": url, "api_key": "${EMBED_KEY}", "model_id": "minilm@v1"}
        config = make_config(
            tmp_path, [{"id": "d", "kind": "urls", "urls": ["http://127.0.0.1:1/"]}], embedder=table
        )
        with pytest.raises(ConfigError, match="embedder.api_key: environment variable EMBED_KEY"):
            embedder_from_config(config.embedder)
        monkeypatch.setenv("EMBED_KEY", "s3cret")
        embedder = embedder_from_config(config.embedder)
        assert embedder.model_id == "minilm@v1" and len(embedder.embed(["x"])[0]) == 384
        assert server.requests[-1]["authorization"] == "Bearer s3cret"
        monkeypatch.setenv("EMBED_KEY", "wrong")
        with pytest.raises(EmbedError, match="HTTP 401"):
            embedder_from_config(config.embedder).embed(["x"])
        with pytest.raises(ConfigError, match="embedder.url"):  # refused when loaded
            make_config(
                tmp_path,
                [{"id": "d", "kind": "urls", "urls": ["http://127.0.0.1:1/"]}],
                embedder={"kind": "http"},
            )
    finally:
        server.stop()


@pytest.mark.e2e
def test_a_whole_sync_through_the_http_embedder(tmp_path, real_embedder, service):
    server, url = service
    site = DevSite(example_pages(2))
    site.start()
    try:
        config = make_config(
            tmp_path,
            [sitemap_source(site)],
            embedder={"kind": "http", "url": url, "batch_size": 3},
        )
        with Syncer(config) as syncer:
            first = syncer.run()
            assert first.ok and first.counters.chunks_embedded == 8
            hits = syncer.search("how is throttling tuned?", k=3)
            assert hits and "throttling" in hits[0].text.lower()
            sent = len(server.requests)
            again = syncer.run()
        assert again.counters.chunks_embedded == 0 and len(server.requests) == sent
    finally:
        site.stop()
