"""The sparse (BM25) encoder and the fusion of rankings: pure functions (issue #19)."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from ragsync.config import PAGE_WEIGHT
from ragsync.errors import StoreError
from ragsync.models import Hit
from ragsync.retrieval import RRF_K, IndexFacts, NoSparseVectors, collapse, fuse, retrieve
from ragsync.sparse import (
    SPARSE_ID,
    SparseVector,
    dimension,
    encode,
    encode_query,
    idf,
    query_dimensions,
    stem,
    terms,
)


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("CARGO_HOME", {"cargo_home", "cargo", "home"}),
        ("HttpClient", {"httpclient", "http", "client"}),
        ("--locked", {"--locked", "lock"}),
        ("-Zbuild-std", {"-zbuild-std", "zbuild", "std"}),
        ("net.git-fetch-with-cli", {"net.git-fetch-with-cli", "net", "git", "fetch", "cli"}),
        ("std::fmt::Display", {"std::fmt::display", "std", "fmt", "display"}),
        ("build.rs", {"build.rs", "build", "rs"}),
        (r"CARGO\_TARGET\_DIR", {"cargo_target_dir", "cargo", "target", "dir"}),  # Markdown
        ("the dependencies of a crate", {"depend", "crate"}),
    ],
)
def test_code_shaped_terms_are_kept_whole_and_in_parts(text, wanted):
    assert set(terms(text)) == wanted


def test_stop_words_go_words_are_stemmed_and_garbage_is_skipped():
    assert list(terms("What is the feature for?")) == ["featur"]
    assert stem("features") == stem("feature") == stem("featured")
    assert stem("throttled") == stem("throttling") == stem("throttle")
    assert stem("status") == "status" and stem("class") == "class" and stem("x86_64") == "x86_64"
    assert list(terms("x" * 80)) == []  # a hash or base64 blob is not a term


def test_a_chunk_vector_is_bm25_term_frequency_and_a_pure_function_of_the_text():
    once = encode("cache cache cache eviction")
    assert once == encode("cache cache cache eviction")  # deterministic
    weights = once.as_dict()
    assert weights[dimension("cach")] > weights[dimension("evict")] > 0
    assert list(once.indices) == sorted(once.indices)
    # saturation: ten times the term is far from ten times the weight
    many = encode("cache " * 30).as_dict()[dimension("cach")]
    assert weights[dimension("cach")] < many < 2.2  # k1 + 1 bounds it
    assert not encode("the of and")  # nothing but stop words: an empty vector


def test_a_chunk_vector_holds_exactly_the_terms_a_query_finds():
    # Queries go through terms(); chunk vectors through a cache per compound: never apart.
    rng = random.Random(11)
    words = ["Run", "cargo", "build", "--locked", r"CARGO\_HOME", "build.rs", "the", "x" * 70]
    words += ["std::fmt::Display", "HttpClient", "throttling", "É", "日本", "-Zbuild-std", "_x"]
    for _ in range(200):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 40)))
        counts = Counter(dimension(term) for term in terms(text))
        length = sum(counts.values())
        norm = 1.2 * (1 - 0.75 + 0.75 * length / 100.0)
        wanted = {d: round(tf * 2.2 / (tf + norm), 6) for d, tf in counts.items()}
        assert encode(text).as_dict() == pytest.approx(wanted), text


def test_a_vector_survives_the_cache_encoding():
    vector = encode("Set CARGO_TARGET_DIR and pass --locked to cargo build in CI.")
    back = SparseVector.from_bytes(vector.to_bytes())
    assert back.indices == vector.indices
    assert back.values == pytest.approx(vector.values, rel=1e-6)


def test_query_vectors_are_plain_terms_or_idf_weighted():
    plain = encode_query("cargo build cargo")
    assert plain.values == (1.0, 1.0) and set(plain.indices) == query_dimensions("cargo build")
    weighted = encode_query("cargo build", {dimension("cargo"): 0.5})
    assert weighted.as_dict() == {dimension("cargo"): 0.5}  # a term no chunk has is dropped
    assert idf(1, 2) == pytest.approx(math.log(2))  # Qdrant's IDF modifier
    assert idf(5, 2) == pytest.approx(math.log(1 + 0.5 / 2.5))  # clamped to the chunk count


def hit(pid: str, score: float) -> Hit:
    return Hit(score, pid, "u", "t", (), "s", "d", pid)


def test_fusion_is_weighted_reciprocal_rank_and_keeps_both_scores():
    dense = [hit("a", 0.9), hit("b", 0.8), hit("c", 0.7)]
    sparse = [hit("c", 12.0), hit("d", 3.0)]
    fused = fuse(dense, sparse, 4, sparse_weight=1.0)
    assert [h.point_id for h in fused] == ["c", "a", "b", "d"]
    c = fused[0]
    assert c.score == pytest.approx(1 / (RRF_K + 3) + 1 / (RRF_K + 1), abs=1e-6)
    assert (c.dense_score, c.sparse_score) == (0.7, 12.0)
    assert fused[1].sparse_score is None and fused[3].dense_score is None
    assert [h.point_id for h in fuse(dense, sparse, 4, sparse_weight=0.0)][:3] == ["a", "b", "c"]
    assert [h.point_id for h in fuse(dense, sparse, 2, sparse_weight=5.0)] == ["c", "d"]


def test_fusion_of_random_rankings_is_ordered_and_bounded():
    rng = random.Random(7)
    for _ in range(200):
        ids = [str(i) for i in range(30)]
        dense = [hit(p, 1.0) for p in rng.sample(ids, rng.randint(0, 20))]
        sparse = [hit(p, 1.0) for p in rng.sample(ids, rng.randint(0, 20))]
        k = rng.randint(1, 25)
        fused = fuse(dense, sparse, k, sparse_weight=rng.random() * 3)
        assert len(fused) == min(k, len({h.point_id for h in dense + sparse}))
        assert [h.score for h in fused] == sorted((h.score for h in fused), reverse=True)


class Store:
    """A store double: canned rankings, and what it was asked."""

    def __init__(self, sparse_idf: bool = True):
        self.sparse_idf = sparse_idf
        self.asked: list[tuple] = []

    def search(self, vector, k, source=None):
        self.asked.append(("dense", k, source))
        return [hit("a", 0.9), hit("b", 0.5)][:k]

    def search_sparse(self, vector, k, source=None):
        self.asked.append(("sparse", vector, k, source))
        return [hit("b", 4.0)][:k]


def test_retrieve_by_mode_and_its_fallbacks():
    store = Store()
    index = IndexFacts(SPARSE_ID)
    embed = lambda text: [0.0]  # noqa: E731
    hybrid = retrieve("b", 2, store=store, embed=embed, index=index, mode="hybrid")
    assert [h.point_id for h in hybrid] == ["b", "a"]
    assert store.asked[0][2] == 50 and store.asked[1][1] == 200  # 50 sparse; 200 dense cosines
    sparse = retrieve("b", 1, store=store, embed=embed, index=index, mode="sparse")
    assert sparse[0].sparse_score == 4.0 and sparse[0].dense_score is None
    dense_only = IndexFacts(None)
    fallback = retrieve("b", 2, store=store, embed=embed, index=dense_only, mode="hybrid")
    assert [h.point_id for h in fallback] == ["a", "b"] and fallback[0].sparse_score is None
    with pytest.raises(NoSparseVectors, match="reindex --same-collection") as raised:
        retrieve("b", 2, store=store, embed=embed, index=dense_only, mode="sparse")
    assert isinstance(raised.value, StoreError)
    with pytest.raises(ValueError, match="mode"):
        retrieve("b", 2, store=store, embed=embed, index=index, mode="bm25")  # type: ignore[arg-type]


def held(text: str, page: str, chunk_index: int, score: float) -> Hit:
    """The chunk ``text`` as page ``page`` holds it."""
    url = f"https://docs.example.org/{page}.html"
    return Hit(
        score, text, url, page, (), "s", f"s:{url}", f"{page}-{chunk_index}", 0, 0, chunk_index
    )


class AggregateStore(Store):
    """all.html repeats readline.html: each of its texts ranks twice, the aggregate first."""

    def search(self, vector, k, source=None):
        self.asked.append(("dense", k, source))
        ranked = [
            held("line by line", "all", 900, 0.9),
            held("line by line", "readline", 3, 0.9),
            held("the line event", "all", 901, 0.8),
            held("the line event", "readline", 4, 0.8),
            held("streams", "stream", 0, 0.7),
        ]
        return ranked[:k]

    def search_sparse(self, vector, k, source=None):
        self.asked.append(("sparse", vector, k, source))
        return [held("the line event", "readline", 4, 9.0), held("the line event", "all", 901, 9.0)]


def test_a_text_held_by_several_pages_is_one_hit_on_the_page_nearest_its_start():
    store, index = AggregateStore(), IndexFacts(SPARSE_ID)
    embed = lambda text: [0.0]  # noqa: E731
    for mode in ("dense", "hybrid"):
        hits = retrieve("line", 3, store=store, embed=embed, index=index, mode=mode)
        assert len(hits) == 3, mode  # k hits, each text once
        assert sorted(h.text for h in hits) == ["line by line", "streams", "the line event"]
        for h in hits:
            if h.text != "streams":
                assert h.url.endswith("/readline.html"), (mode, h)
                assert h.also == ("https://docs.example.org/all.html",)
    [first] = retrieve("line", 1, store=store, embed=embed, index=index, mode="sparse")
    assert first.point_id == "readline-4" and first.sparse_score == 9.0 and first.also
    assert ("dense", 6, None) in store.asked  # a single ranking asks for 2k


class CatchAllStore(Store):
    """A changelog of 900 chunks, one of which matches best, and a 4-chunk guide three of whose
    chunks match a little less."""

    def search(self, vector, k, source=None):
        self.asked.append(("dense", k, source))
        changelog = [held("mentions the flag", "changelog", 7, 0.9)]
        guide = [held(f"guide {i}", "guide", i, 0.8 - i / 100) for i in range(3)]
        return (changelog + guide)[:k]

    def search_sparse(self, vector, k, source=None):
        self.asked.append(("sparse", vector, k, source))
        return [held("mentions the flag", "changelog", 7, 9.0), held("guide 0", "guide", 0, 8.0)]


def test_hybrid_prefers_the_page_whose_chunks_match_over_a_large_page_one_chunk_matches():
    asked: list[list[str]] = []

    def chunk_counts(keys):
        asked.append(list(keys))
        return {
            f"s:https://docs.example.org/{page}.html": n
            for page, n in (("changelog", 900), ("guide", 4))
        }

    index = IndexFacts(SPARSE_ID, chunk_counts=chunk_counts)
    embed = lambda text: [0.0]  # noqa: E731
    store = CatchAllStore()
    plain = retrieve("flag", 3, store=store, embed=embed, index=index, mode="hybrid", page_weight=0)
    assert plain[0].url.endswith("/changelog.html") and asked == []  # fusion alone
    hits = retrieve("flag", 3, store=store, embed=embed, index=index, mode="hybrid")
    # guide 0 passes the changelog's chunk; guides 1 and 2 gain as much, not enough to pass it
    assert [h.point_id for h in hits] == ["guide-0", "changelog-7", "guide-1"]
    assert len(asked) == 1 and len(asked[0]) == 2  # one lookup, each page once
    # the guide's coverage: 2 of its 4 chunks beside the one scored, weighted PAGE_WEIGHT
    fused = fuse(
        *collapse(store.search([0.0], 50), store.search_sparse(None, 50)), 5, sparse_weight=1.5
    )
    guide0 = next(h for h in fused if h.point_id == "guide-0")
    assert hits[0].score == pytest.approx(guide0.score + PAGE_WEIGHT * 2 / 4, abs=1e-6)


class BoilerplateStore(Store):
    """A question in plain words: the sparse ranking's best is an option repeated on every
    command page, matched on a word the corpus rarely uses, far from the question's meaning
    (cosine 0.3 against the best chunk's 0.7); a chunk sparse finds that dense never ranked."""

    def search(self, vector, k, source=None):
        self.asked.append(("dense", k, source))
        ranked = [
            held("the answer", "guide", 0, 0.7),
            held("nearby", "guide", 1, 0.6),
            held("--offline option", "cargo-add", 5, 0.3),
        ]
        return ranked[:k]

    def search_sparse(self, vector, k, source=None):
        self.asked.append(("sparse", vector, k, source))
        return [
            held("--offline option", "cargo-add", 5, 9.0),
            held("nearby", "guide", 1, 5.0),
            held("unseen", "faq", 0, 4.0),
        ]


def test_a_lexical_match_far_from_the_querys_meaning_counts_a_quarter():
    store, index = BoilerplateStore(), IndexFacts(SPARSE_ID)
    embed = lambda text: [0.0]  # noqa: E731
    opts = {"store": store, "embed": embed, "index": index, "mode": "hybrid", "page_weight": 0}
    ungated = retrieve("work without the network", 4, gate_margin=0, **opts)
    assert ungated[0].point_id == "cargo-add-5"
    hits = retrieve("work without the network", 4, **opts)
    assert [h.point_id for h in hits] == ["guide-1", "cargo-add-5", "guide-0", "faq-0"]
    # the option's vote: 1.5 / (10 + 1) a quarter; "unseen" is not among the dense candidates
    assert hits[1].score == pytest.approx(1 / 13 + 0.25 * 1.5 / 11, abs=1e-6)
    assert hits[3].score == pytest.approx(0.25 * 1.5 / 13, abs=1e-6)
    assert ("dense", 200, None) in store.asked and ("dense", 50, None) in store.asked


def test_collapse_keeps_each_rankings_order_and_one_hit_per_text():
    rng = random.Random(11)
    for _ in range(200):
        texts = [f"t{i}" for i in range(8)]
        pool = [held(rng.choice(texts), f"p{j}", rng.randint(0, 9), 0.0) for j in range(12)]
        rankings = [rng.sample(pool, rng.randint(0, 12)) for _ in range(2)]
        collapsed = collapse(*rankings)
        home: dict[str, str] = {}
        for before, after in zip(rankings, collapsed, strict=True):
            order = list(dict.fromkeys(h.text for h in before))
            assert [h.text for h in after] == order
            for h in after:
                assert home.setdefault(h.text, h.point_id) == h.point_id  # the same in both
                holders = [x for x in pool if x.text == h.text and x in rankings[0] + rankings[1]]
                assert h.chunk_index == min(x.chunk_index for x in holders)


def test_a_store_without_idf_gets_idf_weighted_queries_from_the_frequencies():
    store = Store(sparse_idf=False)
    cargo, build = dimension("cargo"), dimension("build")
    asked = []

    def frequencies(terms):
        asked.append(sorted(terms))
        return {cargo: 1, build: 4}, 4

    index = IndexFacts(SPARSE_ID, frequencies)
    retrieve("cargo build", 1, store=store, embed=lambda t: [0.0], index=index, mode="sparse")
    vector = store.asked[0][1]
    assert asked == [sorted([cargo, build])]
    assert vector.as_dict() == pytest.approx({cargo: idf(1, 4), build: idf(4, 4)}, abs=1e-6)
