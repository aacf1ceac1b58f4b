"""Warm search (issue #19, part 3): `serve`'s GET /search on a real uvicorn on 127.0.0.1, the
Python API keeping its model, and `ragsync search` using a running serve."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragsync.config import Config, load_config
from ragsync.retrieval import MODES
from ragsync.searchapi import hit_dict
from ragsync.server import ServeLoop, create_app
from ragsync.sync import Syncer
from ragsync.testing import HashEmbedder
from tests.support import ragsync_cli
from tests.support.asgi import free_port, uvicorn_thread

TOKEN = "test-search-token-0123456789"
QUESTION = "how are requests throttled?"


@contextmanager
def served(
    config: Config, factory: Callable[[], Any], *, host: str | None = None, port: int = 0
) -> Iterator[str]:
    """The app of `ragsync serve` (sync loop stopped) under uvicorn on 127.0.0.1, in a thread:
    requests reach its event loop over TCP, so a handler that blocked it would hold /healthz."""
    loop = ServeLoop(config)
    loop.stop.set()
    app = create_app(config, loop, host=host, embedder_factory=factory)
    with uvicorn_thread(app, port) as base:
        yield base


class Factory:
    """Builds the query embedder, counting how often (a model load each time)."""

    def __init__(self, embedder: Any):
        self.embedder = embedder
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        return self.embedder


class SlowEmbedder(HashEmbedder):
    """A query embedding that takes ``delay`` seconds, and says when it started."""

    def __init__(self, delay: float):
        super().__init__()
        self.delay = delay
        self.started = threading.Event()

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.started.set()
        time.sleep(self.delay)
        return super().embed(texts)


def ids(hits: list[dict[str, Any]]) -> list[str]:
    return [hit["point_id"] for hit in hits]


def write_config(tmp_path: Path, site_url: str, port: int, **server: str) -> Path:
    lines = [f'[server]\nlisten = "127.0.0.1:{port}"']
    lines += [f'{key} = "{value}"' for key, value in server.items()]
    lines += [
        f'[state]\npath = "{tmp_path / "state.db"}"',
        f'[store]\npath = "{tmp_path / "qdrant"}"\ncollection = "test"',
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{site_url}/sitemap.xml"\nevery = "0s"',
    ]
    path = tmp_path / "ragsync.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def indexed(tmp_path, site, embedder) -> tuple[Path, Config]:
    """The example site synced into a local Qdrant store; the config file's path and config."""
    path = write_config(tmp_path, site.base_url, free_port())
    config = load_config(path)
    with Syncer(config, embedder=embedder) as syncer:
        assert syncer.run().ok
    return path, config


def test_search_answers_like_the_python_api_and_loads_the_model_once(indexed, embedder):
    path, config = indexed
    with Syncer(config, embedder=embedder) as syncer:
        expected = [hit_dict(hit) for hit in syncer.search(QUESTION, k=3)]
    factory = Factory(embedder)
    with served(config, factory) as base:
        answers = [
            httpx.get(base + "/search", params={"q": QUESTION, "k": 3}, timeout=60)
            for _ in range(3)
        ]
        only_docs = httpx.get(base + "/search", params={"q": QUESTION, "source": "docs"})
    assert [a.status_code for a in answers] == [200, 200, 200]
    hits = answers[0].json()["hits"]
    # The Python API's hits, field by field (a score may differ in its last float digit).
    assert [{**h, "score": pytest.approx(h["score"])} for h in expected] == hits
    assert len(hits) == 3
    assert {"url", "title", "headings", "text", "score", "source"} <= set(hits[0])
    assert all([h["point_id"] for h in a.json()["hits"]] == ids(hits) for a in answers)
    assert factory.calls == 1  # one model for three queries
    assert len(only_docs.json()["hits"]) == 5  # k defaults to 5
    # Each mode, as the Python API ranks it; a hybrid hit carries both scores.
    with Syncer(config, embedder=embedder) as syncer:
        by_mode = {m: [h.point_id for h in syncer.search(QUESTION, k=3, mode=m)] for m in MODES}
    with served(config, Factory(embedder)) as base:
        for mode in MODES:
            answer = httpx.get(base + "/search", params={"q": QUESTION, "k": 3, "mode": mode})
            assert ids(answer.json()["hits"]) == by_mode[mode], mode
        fused = answer.json()["hits"]
        assert any(h["dense_score"] is not None and h["sparse_score"] is not None for h in fused)
    # The store was released at shutdown: another process (here, this one) may open it.
    with Syncer(config, embedder=embedder) as syncer:
        assert syncer.search(QUESTION, k=1)[0].url == hits[0]["url"]


@pytest.mark.parametrize(
    ("query", "status", "param"),
    [
        ("", 400, "q"),
        ("?q=", 400, "q"),
        ("?q=x&q=y", 400, "q"),
        ("?q=" + "x" * 2001, 400, "q"),
        ("?q=x&k=five", 400, "k"),
        ("?q=x&k=0", 422, "k"),
        ("?q=x&k=101", 422, "k"),
        ("?q=x&source=nope", 422, "source"),
        ("?q=x&mode=bm25", 400, "mode"),
    ],
)
def test_parameter_errors_are_json_naming_the_parameter(tmp_path, site, query, status, param):
    config = load_config(write_config(tmp_path, site.base_url, free_port()))
    factory = Factory(HashEmbedder())
    with served(config, factory) as base:
        answer = httpx.get(base + "/search" + query)
    assert answer.status_code == status
    assert answer.json()["param"] == param and answer.json()["error"]
    assert factory.calls == 0  # refused before any model is loaded


def test_a_token_is_required_once_set_and_search_is_off_on_an_open_address(
    tmp_path, site, monkeypatch
):
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)
    path = write_config(tmp_path, site.base_url, free_port(), search_token="${SEARCH_TOKEN}")
    config = load_config(path)
    with served(config, Factory(HashEmbedder()), host="0.0.0.0") as base:
        url = base + "/search?q=hello"
        missing = httpx.get(url)
        wrong = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}x"})
        right = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert missing.status_code == wrong.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert right.status_code == 200 and right.json()["hits"] == []  # nothing indexed yet
    open_config = load_config(write_config(tmp_path, site.base_url, free_port()))
    with served(open_config, Factory(HashEmbedder()), host="0.0.0.0") as base:
        refused = httpx.get(base + "/search?q=hello")
    assert refused.status_code == 403 and "search_token" in refused.json()["error"]
    monkeypatch.delenv("SEARCH_TOKEN")  # the token's variable unset: refused, never open
    with served(config, Factory(HashEmbedder())) as base:
        assert httpx.get(base + "/search?q=hello").status_code == 403


def test_healthz_answers_while_a_search_is_in_flight(tmp_path, site):
    config = load_config(write_config(tmp_path, site.base_url, free_port()))
    slow = SlowEmbedder(delay=3.0)
    with served(config, Factory(slow)) as base:
        answers: list[httpx.Response] = []
        query = threading.Thread(
            target=lambda: answers.append(httpx.get(base + "/search?q=slow", timeout=60))
        )
        query.start()
        assert slow.started.wait(30)
        started = time.monotonic()
        health = httpx.get(base + "/healthz", timeout=10)
        waited = time.monotonic() - started
        in_flight = query.is_alive()
        query.join(60)
    assert health.status_code == 200 and health.json()["ok"] is True
    assert in_flight and waited < 2.5  # answered during the 3 s query, not after it
    assert answers[0].status_code == 200


def test_syncer_search_keeps_its_model_between_calls(tmp_path, site, monkeypatch):
    import onnxruntime

    loads = []
    real = onnxruntime.InferenceSession

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any):
            loads.append(args)
            super().__init__(*args, **kwargs)

    # The default backend (int8, README "Embedding backends") loads the model as a session.
    monkeypatch.setattr(onnxruntime, "InferenceSession", Counting)
    config = load_config(write_config(tmp_path, site.base_url, free_port()))
    with Syncer(config) as syncer:  # the configured model, built by the syncer
        for question in ("one", "two", "three"):
            assert syncer.search(question) == []  # nothing indexed: the model still runs
    assert len(loads) == 1


def test_cli_search_uses_a_running_serve_and_otherwise_says_it_would_be_faster(indexed, embedder):
    path, config = indexed
    port = int(config.server.listen.rsplit(":", 1)[1])
    factory = Factory(embedder)
    with served(config, factory, port=port):
        warm = ragsync_cli("search", QUESTION, "-k", "2", "--json", config=path)
    assert warm.returncode == 0, warm.stderr
    assert factory.calls == 1  # the serve embedded the query
    assert "would answer faster" not in warm.stderr and "serve answers" not in warm.stderr
    cold = ragsync_cli("search", QUESTION, "-k", "2", "--json", config=path)
    assert cold.returncode == 0, cold.stderr
    # The same hits either way.
    assert ids(json.loads(cold.stdout)) == ids(json.loads(warm.stdout)) != []
    assert "a running `ragsync serve` answers in milliseconds" in cold.stderr
    assert len(cold.stderr.strip().splitlines()) == 1


def test_cli_search_falls_back_with_one_line_when_serve_answers_for_another_index(
    indexed, tmp_path, site
):
    path, config = indexed
    port = int(config.server.listen.rsplit(":", 1)[1])
    (tmp_path / "other").mkdir()
    other = load_config(write_config(tmp_path / "other", site.base_url, port))
    with served(other, Factory(HashEmbedder()), port=port):
        answer = ragsync_cli("search", QUESTION, "-k", "1", config=path)
    assert answer.returncode == 0, answer.stderr
    lines = answer.stderr.strip().splitlines()
    assert lines == [
        f"ragsync: serve at http://127.0.0.1:{port}/search serves another index; searching locally"
    ]
    assert answer.stdout.startswith("1. ")  # the local search's hit
