"""The ONNX Runtime backend (issue #21 part 3): the same vectors as torch from a local export,
a model id of its own per backend, strict config, and an export cache that is re-used, checked
and redone when damaged — and a run on a cached export imports no torch. Also how the local
backends call the model: ONNX in token-bounded calls on parallel runners, torch a few texts at
a time.

The export is made once for this module (a few seconds) in a folder of its own.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragsync import onnxembed
from ragsync.embed import TORCH_CALL_TEXTS, SentenceTransformerEmbedder, embedder_from_config
from ragsync.errors import ConfigError, EmbedError, ResourceError, StoreError
from ragsync.onnxembed import (
    OnnxEmbedder,
    export_name,
    manifest_path,
    mean_pool,
    model_calls,
    verified,
    write_atomically,
)
from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import example_pages, make_config, sentences, sitemap_source

# An edit of a page (a short one would wait for confirmation: README "Outage pages").
THROTTLING = f"<p>The gateway allows 50 requests a second. {sentences('throttling', 4)}</p>"

pytest.importorskip("onnxruntime")

TEXTS = [
    "hello",
    "Rotate the signing key every night, and keep two keys valid at once.",
    "## Throttling\n\nThe gateway allows 50 requests per second per client; excess requests "
    "get HTTP 429 with a Retry-After header.",
    # Longer than the model window (256 word pieces): both backends truncate it the same way.
    " ".join(f"word{i} is followed by another word" for i in range(60)),
]
URLS = [{"id": "d", "kind": "urls", "urls": ["http://127.0.0.1:1/"]}]


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def fp32(onnx_cache) -> OnnxEmbedder:
    return OnnxEmbedder(cache_dir=onnx_cache)


@pytest.fixture(scope="module")
def int8(onnx_cache) -> OnnxEmbedder:
    return OnnxEmbedder(quantize=True, cache_dir=onnx_cache)


def cosines(a: list[list[float]], b: list[list[float]]) -> list[float]:
    return [sum(x * y for x, y in zip(u, v, strict=True)) for u, v in zip(a, b, strict=True)]


def test_onnx_vectors_match_torch_for_the_same_texts(fp32, int8, real_embedder):
    assert real_embedder.count_tokens(TEXTS[-1]) > real_embedder.max_input_tokens
    torch_vectors = real_embedder.embed(TEXTS)
    fp32_vectors, int8_vectors = fp32.embed(TEXTS), int8.embed(TEXTS)

    assert all(
        len(v) == 384 and math.isclose(math.hypot(*v), 1, abs_tol=1e-5) for v in fp32_vectors
    )
    assert min(cosines(fp32_vectors, torch_vectors)) >= 0.999
    # int8 (dynamic, per channel): about 0.99 on average. Each call quantises its activations
    # with one scale, so a text's vector moves a little with the texts it is called with: the
    # short first text gets 0.979 beside its neighbours here (on eval/bench_core.py's 1,269
    # texts, 0.984 at the least against fp32, whatever the call size).
    # The mean moves with the model graph transformers builds: at least 0.99 with the
    # transformers of earlier installs, 0.9899 with 5.17 (what pip resolves beside click 8.4
    # today); a broken quantisation is far lower.
    int8_cosines = cosines(int8_vectors, torch_vectors)
    assert min(int8_cosines) >= 0.97  # room for another CPU's int8 kernels
    assert sum(int8_cosines) / len(int8_cosines) >= 0.985
    assert fp32.embed([]) == []
    # One text alone gives the vector it gets in a padded batch (the mask is honoured).
    assert min(cosines(fp32.embed(TEXTS[1:2]), fp32_vectors[1:2])) >= 0.99999


def test_torch_calls_the_model_with_a_few_texts_at_a_time(real_embedder, monkeypatch):
    """Calls of at most TORCH_CALL_TEXTS texts whatever ``batch_size`` (the pipeline's step),
    with the vectors one text alone gets."""
    from sentence_transformers import SentenceTransformer

    sizes: list[int] = []
    encode = SentenceTransformer.encode

    def spy(self, sentences, **kwargs):
        sizes.append(kwargs["batch_size"])
        return encode(self, sentences, **kwargs)

    monkeypatch.setattr(SentenceTransformer, "encode", spy)
    assert real_embedder.batch_size == 64 and TORCH_CALL_TEXTS == 16
    vectors = real_embedder.embed(TEXTS)
    assert sizes == [16]
    alone = [real_embedder.embed([text])[0] for text in TEXTS]
    assert min(cosines(vectors, alone)) >= 0.99999
    small = SentenceTransformerEmbedder(batch_size=4)
    small.embed(TEXTS[:2])
    assert sizes[-1] == 4  # a smaller batch_size is kept


def test_each_backend_has_its_own_model_id(fp32, int8, real_embedder):
    base = "all-MiniLM-L6-v2@0.1.0+sha256:53aa51172d14;dim=384;max_seq=256;norm"
    assert real_embedder.model_id == base  # unchanged: existing collections stay valid
    assert fp32.model_id == f"{base};onnx"
    assert int8.model_id == f"{base};onnx-int8"
    assert fp32.count_tokens("hello world") == real_embedder.count_tokens("hello world")
    assert (fp32.dimension, fp32.max_input_tokens) == (384, 256)


def test_config_chooses_the_backend_and_refuses_unknown_values(tmp_path):
    config = make_config(tmp_path, URLS, embedder={"backend": "onnx-int8"})
    embedder = embedder_from_config(config.embedder)
    assert isinstance(embedder, OnnxEmbedder) and embedder.quantize
    default = make_config(tmp_path, URLS).embedder  # auto: int8 for a new collection ...
    assert embedder_from_config(default).backend == "onnx-int8"
    torch = embedder_from_config(default, collection_model=embedder.model_id.split(";onnx")[0])
    assert type(torch) is SentenceTransformerEmbedder  # ... the old one's own backend
    named = make_config(tmp_path, URLS, embedder={"backend": "torch"}).embedder
    assert type(embedder_from_config(named)) is SentenceTransformerEmbedder
    with pytest.raises(ConfigError, match=r"embedder\.backend: .*did you mean 'onnx-int8'") as e:
        make_config(tmp_path, URLS, embedder={"backend": "onnx_int8"})
    assert e.value.key == "embedder.backend"
    with pytest.raises(ConfigError, match=r"embedder\.backend: applies to kind"):
        make_config(
            tmp_path, URLS, embedder={"kind": "http", "url": "http://e/", "backend": "onnx"}
        )


def test_a_missing_onnxruntime_or_another_pooling_is_a_config_error(tmp_path, monkeypatch):
    folder = tmp_path / "cls-model"
    shutil.copytree(
        SentenceTransformerEmbedder().path,
        folder,
        ignore=shutil.ignore_patterns("*.safetensors", "*.txt", "README.md"),
    )
    pooling = folder / "1_Pooling" / "config.json"
    settings = json.loads(pooling.read_text())
    settings.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(settings))
    with pytest.raises(ConfigError, match="mean pooling only.*pooling_mode_cls_token"):
        OnnxEmbedder(str(folder), cache_dir=tmp_path)
    # backend auto (the default) runs such a model on torch rather than refuse it
    auto = make_config(tmp_path, URLS, embedder={"model": str(folder)}).embedder
    assert type(embedder_from_config(auto)) is SentenceTransformerEmbedder
    monkeypatch.setattr(onnxembed, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"needs onnxruntime, a ragsync dependency"):
        OnnxEmbedder(cache_dir=tmp_path)
    assert type(embedder_from_config(auto)) is SentenceTransformerEmbedder


def test_the_export_is_reused_and_a_damaged_or_partial_one_is_made_again(
    int8, onnx_cache, tmp_path, caplog
):
    path = int8.ensure_export()
    fp32_path = onnx_cache / export_name("all-MiniLM-L6-v2", "53aa51172d14", quantize=False)
    assert path.name == "all-MiniLM-L6-v2-53aa51172d14-int8-r1.onnx"
    assert verified(path) and verified(fp32_path)
    manifest = json.loads(manifest_path(path).read_text())
    assert manifest["bytes"] == path.stat().st_size and manifest["variant"] == "int8"
    with caplog.at_level(logging.INFO, logger="ragsync"):
        assert int8.ensure_export() == path
    assert not caplog.records  # re-used, not exported again

    folder = tmp_path / "cache"
    folder.mkdir()
    for source in (path, fp32_path):  # a copy of the cache, to damage
        shutil.copy(source, folder)
        shutil.copy(manifest_path(source), folder)
    copy = OnnxEmbedder(quantize=True, cache_dir=folder)
    damaged = folder / path.name
    with damaged.open("r+b") as file:  # same size, one byte changed
        file.seek(damaged.stat().st_size // 2)
        byte = file.read(1)
        file.seek(-1, 1)
        file.write(bytes([byte[0] ^ 0xFF]))
    assert not verified(damaged)
    with caplog.at_level(logging.INFO, logger="ragsync"):
        assert copy.ensure_export() == damaged
    assert verified(damaged)
    assert [r.getMessage() for r in caplog.records] == [
        f"exporting all-MiniLM-L6-v2 to ONNX (int8) as {damaged}: once, some seconds"
    ]
    damaged.write_bytes(damaged.read_bytes()[:1000])  # a partial file
    assert not verified(damaged)
    manifest_path(damaged).unlink()  # and a file without its manifest
    assert not verified(damaged)
    assert min(cosines(copy.embed(TEXTS[:2]), int8.embed(TEXTS[:2]))) >= 0.99999
    assert verified(damaged)
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []


def test_a_failed_quantisation_names_the_missing_package_and_leaves_no_file(
    fp32, tmp_path, monkeypatch
):
    source = fp32.ensure_export()
    shutil.copy(source, tmp_path)
    shutil.copy(manifest_path(source), tmp_path)

    def no_onnx(source: Path, dest: Path) -> None:
        dest.write_bytes(b"half")
        raise ModuleNotFoundError("No module named 'onnx'", name="onnx")

    monkeypatch.setattr(onnxembed, "quantize_int8", no_onnx)
    with pytest.raises(EmbedError, match=r"needs onnx, a ragsync dependency: reinstall"):
        OnnxEmbedder(quantize=True, cache_dir=tmp_path).ensure_export()
    assert sorted(p.name for p in tmp_path.iterdir()) == [source.name, f"{source.name}.json"]


def test_a_full_device_under_the_onnx_cache_is_named_as_such(fp32, tmp_path, monkeypatch):
    source = fp32.ensure_export()
    shutil.copy(source, tmp_path)
    shutil.copy(manifest_path(source), tmp_path)

    def full(source: Path, dest: Path) -> None:
        dest.write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(onnxembed, "quantize_int8", full)
    with pytest.raises(ResourceError) as raised:
        OnnxEmbedder(quantize=True, cache_dir=tmp_path).ensure_export()
    assert str(raised.value).startswith(f"{tmp_path} (the ONNX cache): no space left on the")
    assert sorted(p.name for p in tmp_path.iterdir()) == [source.name, f"{source.name}.json"]


def test_an_interrupted_write_leaves_no_file(tmp_path):
    dest = tmp_path / "model.onnx"

    def fail(temporary: Path) -> None:
        temporary.write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(dest, fail)
    assert list(tmp_path.iterdir()) == []
    write_atomically(dest, lambda temporary: temporary.write_bytes(b"whole"))
    assert dest.read_bytes() == b"whole" and list(tmp_path.iterdir()) == [dest]


def test_model_calls_hold_each_text_once_and_fill_the_token_budget():
    import random

    rng = random.Random(3)
    for _ in range(200):
        lengths = [rng.randint(1, 300) for _ in range(rng.randint(0, 60))]
        budget = rng.choice([64, 256, 512, 1024])
        calls = model_calls(lengths, budget)
        assert sorted(i for call in calls for i in call) == list(range(len(lengths)))
        flat = [lengths[i] for call in calls for i in call]
        assert flat == sorted(flat)  # similar lengths together: little padding
        for n, call in enumerate(calls):
            padded = len(call) * lengths[call[-1]]
            assert padded <= budget or len(call) == 1  # a longer text goes alone
            if n + 1 < len(calls):  # full: the next text would not have fitted
                assert (len(call) + 1) * lengths[calls[n + 1][0]] > budget
    assert model_calls([], 512) == []


def test_runners_write_each_vector_to_its_own_text(onnx_cache):
    """Two runners make the same calls as one, so the vectors are the same, each on its text."""
    topics = ["queue", "cache", "lease", "sitemap", "robots", "journal", "webhook", "tombstone"]
    fillers = ["retries", "backoff", "deadline", "payload", "tokens", "windows", "schedule"]
    texts = [  # distinct texts of many lengths: several calls, each row its own
        f"The {topics[i % 8]} keeps its {fillers[i % 7]}. " + f"{fillers[(i + 3) % 7]} " * (i * 3)
        for i in range(40)
    ]
    one = OnnxEmbedder(quantize=True, threads=1, cache_dir=onnx_cache).embed(texts)
    two = OnnxEmbedder(quantize=True, threads=2, cache_dir=onnx_cache)
    assert len(model_calls([two.count_tokens(t) for t in texts], onnxembed.CALL_TOKENS)) > 2
    assert two.embed(texts) == one
    for i in range(0, 40, 3):  # a text alone is nearest to its own row, not a neighbour's
        alone = two.embed([texts[i]])[0]
        nearest = max(range(40), key=lambda j: cosines([alone], [one[j]])[0])
        assert nearest == i


def test_a_runners_failure_is_raised_by_embed(int8, monkeypatch):
    pooled = 0

    def pool_or_fail(*args, **kwargs):
        nonlocal pooled
        pooled += 1
        if pooled == 3:
            raise RuntimeError("pooling failed on call 3")
        return mean_pool(*args, **kwargs)

    monkeypatch.setattr(onnxembed, "mean_pool", pool_or_fail)
    with pytest.raises(RuntimeError, match="call 3"):
        int8.embed([f"text {'x ' * n}" for n in range(0, 600, 10)])
    assert pooled >= 3


def test_mean_pooling_skips_padding_and_normalises():
    import numpy as np

    hidden = np.array([[[1.0, 0.0], [3.0, 4.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])
    assert mean_pool(hidden, mask, normalize=False).tolist() == [[2.0, 2.0]]
    pooled = mean_pool(hidden, mask, normalize=True)[0]
    assert math.isclose(pooled[0], math.sqrt(0.5), rel_tol=1e-6)


def test_a_run_on_a_cached_export_imports_no_torch(int8, onnx_cache):
    int8.ensure_export()
    code = (
        "import sys; from ragsync.onnxembed import OnnxEmbedder; "
        f"v = OnnxEmbedder(quantize=True, cache_dir={str(onnx_cache)!r}).embed(['hello']); "
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers') "
        "if m in sys.modules]; print(len(v[0]), heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split() == ["384", "[]"]


@pytest.mark.e2e
def test_a_collection_embedded_by_one_backend_refuses_another(tmp_path, int8, real_embedder):
    site = DevSite(example_pages(2))
    site.start()
    try:
        config = make_config(tmp_path, [sitemap_source(site)])
        with Syncer(config, embedder=int8) as syncer:
            result = syncer.run()
            assert result.ok and result.counters.chunks_embedded > 0
            hits = syncer.search("how is throttling tuned?", k=3)
            assert hits and "throttling" in hits[0].text.lower()
            cache = syncer.engine.state.embeddings
            hashes = [chunk.chunk_hash for _, chunk in syncer.engine.state.index.list_chunks()]
            assert not cache.missing(hashes, int8.model_id)
            assert cache.missing(hashes, real_embedder.model_id) == set(hashes)
        # A changed page has vectors to write: torch's must not join the int8 collection.
        site.set_page("/guide/page-1", "Throttling", THROTTLING)
        with (
            Syncer(config, embedder=real_embedder) as syncer,
            pytest.raises(StoreError, match="onnx-int8.*ragsync reindex"),
        ):
            syncer.run()
    finally:
        site.stop()


@pytest.mark.e2e
def test_auto_backend_is_int8_for_a_new_index_and_the_collections_own_for_an_old_one(
    tmp_path, real_embedder
):
    site = DevSite(example_pages(2))
    site.start()
    try:
        new = make_config(tmp_path / "new", [sitemap_source(site)])
        assert new.embedder.backend == "auto"
        with Syncer(new) as syncer:  # no embedder injected: the config's default
            assert syncer.run().ok
            assert syncer.engine.model_id.endswith(";onnx-int8")
            assert syncer.search("how is throttling tuned?", k=1)

        # An index torch built before int8 was the default goes on with torch: nothing is
        # refused, nothing embedded again, and a changed page is embedded by torch.
        old = make_config(tmp_path / "old", [sitemap_source(site)])
        with Syncer(old, embedder=real_embedder) as syncer:
            assert syncer.run().ok
        site.set_page("/guide/page-1", "Throttling", THROTTLING)
        with Syncer(old) as syncer:
            result = syncer.run()
            assert result.ok and result.counters.chunks_embedded == 1
            assert syncer.engine.model_id == real_embedder.model_id
        with Syncer(old) as syncer:  # and its queries are embedded by torch too
            hits = syncer.search("how many requests does the gateway allow a second?", k=3)
            assert any(hit.url.endswith("page-1") for hit in hits)
            assert syncer.engine.model_id == real_embedder.model_id
        # A new collection of that index (a move to another store) keeps torch too, so its
        # points come from the cache: nothing is embedded again.
        moved = make_config(
            tmp_path / "old",
            [sitemap_source(site)],
            store={
                "kind": "qdrant_edge",
                "path": str(tmp_path / "old" / "edge"),
                "collection": "moved",
            },
        )
        with Syncer(moved) as syncer:
            result = syncer.reindex()
            assert result.ok and result.counters.chunks_embedded == 0
            assert result.counters.points_upserted > 0
            assert syncer.engine.model_id == real_embedder.model_id
    finally:
        site.stop()
