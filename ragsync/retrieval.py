"""The query side: dense, sparse or hybrid search over a collection (README "Hybrid search").

Hybrid search fuses both rankings' first :data:`CANDIDATES` chunks by weighted reciprocal rank
(RRF, Cormack et al. 2009): a chunk scores ``1/(RRF_K + dense rank) + g·w/(RRF_K + sparse
rank)``, ``w`` being ``[search] sparse_weight`` and ``g`` the sparse gate (:func:`sparse_gate`,
read from the cosines of the first :data:`GATE_CANDIDATES` dense chunks). Ranks, not scores,
are fused because cosine similarities and BM25 scores live on different scales; the weight,
the gate, the rank offset and the mode's default were chosen by measurement (README "Hybrid
retrieval").
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from ragsync.config import PAGE_WEIGHT, SPARSE_GATE, SPARSE_WEIGHT
from ragsync.errors import StoreError
from ragsync.models import Hit
from ragsync.sparse import encode_query, idf, query_dimensions

Mode = Literal["dense", "sparse", "hybrid"]
MODES: tuple[Mode, ...] = ("dense", "sparse", "hybrid")
# The rank offset: 10 rather than the customary 60 lets a chunk ranked first by one ranking
# outweigh one ranked middling by both (measured: README "Hybrid retrieval").
RRF_K = 10
CANDIDATES = 50  # per ranking, and at least k
# The sparse gate (README "Hybrid retrieval"): the dense candidates whose cosines it reads, and
# the weight of a lexical vote for a chunk beyond the gate, or not among those candidates.
GATE_CANDIDATES = 200
OUTSIDE_GATE = 0.25

log = logging.getLogger("ragsync")

# For a store without an IDF modifier: (document frequency by term, chunks counted).
Frequencies = Callable[[Sequence[int]], tuple[Mapping[int, int], int]]
ChunkCounts = Callable[[Sequence[str]], Mapping[str, int]]  # record keys → their chunks
Suspected = Callable[[Sequence[str]], set[str]]  # those of the record keys suspected missing


class NoSparseVectors(StoreError):
    """Sparse search was asked of a collection that holds no sparse vectors."""


@dataclass(frozen=True)
class IndexFacts:
    """What the query side knows of a collection from the state DB.

    Args:
        sparse_id: the encoder its points carry vectors of (None: dense only).
        frequencies: document frequencies, for a store that applies no IDF itself.
        chunk_counts: each page's number of chunks, by record key (:func:`with_coverage`).
        suspected: which pages are suspected missing (:func:`collapse`).
    """

    sparse_id: str | None = None
    frequencies: Frequencies | None = None
    chunk_counts: ChunkCounts | None = None
    suspected: Suspected | None = None


def fuse(
    dense: Sequence[Hit],
    sparse: Sequence[Hit],
    k: int,
    *,
    sparse_weight: float,
    offset: int = RRF_K,
    gate: Mapping[str, float] | None = None,
) -> list[Hit]:
    """The ``k`` best hits by weighted reciprocal rank (rank offset ``offset``, by default
    :data:`RRF_K`), each carrying both rankings' scores; ``gate`` scales each sparse hit's
    vote, by point id (:func:`sparse_gate`).

    Example::

        >>> a = Hit(0.9, "a", "u", "t", (), "s", "d", "A")
        >>> b = Hit(7.0, "b", "u", "t", (), "s", "d", "B")
        >>> [h.point_id for h in fuse([a, b], [b], 2, sparse_weight=1.0)]
        ['B', 'A']
    """
    fused: dict[str, float] = {}
    scores: dict[str, dict[str, float]] = {}
    first: dict[str, Hit] = {}
    for name, weight, hits in (("dense", 1.0, dense), ("sparse", sparse_weight, sparse)):
        for rank, hit in enumerate(hits, 1):
            first.setdefault(hit.point_id, hit)
            vote = weight / (offset + rank)
            if gate is not None and name == "sparse":
                vote *= gate.get(hit.point_id, 1.0)
            fused[hit.point_id] = fused.get(hit.point_id, 0.0) + vote
            scores.setdefault(hit.point_id, {})[name] = hit.score
    ranked = sorted(fused, key=lambda pid: (-fused[pid], pid))[:k]
    return [
        dataclasses.replace(
            first[pid],
            score=round(fused[pid], 6),
            dense_score=scores[pid].get("dense"),
            sparse_score=scores[pid].get("sparse"),
        )
        for pid in ranked
    ]


def sparse_gate(lexical: Sequence[Hit], near: Sequence[Hit], margin: float) -> dict[str, float]:
    """Each lexical hit's vote, by point id: whole when its chunk's cosine to the query is
    within ``margin`` of the best dense match's (``near``: the dense candidates, best first),
    :data:`OUTSIDE_GATE` otherwise or when its chunk is not among them. A lexical match counts
    fully only where the chunk's meaning is within reach of the best one: common English words
    the corpus rarely uses ("already", "own", "between") and options repeated on every command
    page no longer outvote the dense ranking, while exact terms keep theirs (measured: README
    "Hybrid retrieval").

    Example::

        >>> a = Hit(0.8, "a", "u", "t", (), "s", "d", "A")
        >>> b = Hit(0.5, "b", "u", "t", (), "s", "d", "B")
        >>> near, lexical = [a, b], [b, a, Hit(7.0, "c", "u", "t", (), "s", "d", "C")]
        >>> sparse_gate(lexical, near, 0.2)
        {'B': 0.25, 'A': 1.0, 'C': 0.25}
    """
    cosines: dict[str, float] = {}
    for hit in near:
        cosines.setdefault(hit.text, hit.score)
    best = max(cosines.values(), default=0.0)
    return {
        hit.point_id: 1.0 if cosines.get(hit.text, -2.0) >= best - margin else OUTSIDE_GATE
        for hit in lexical
    }


def collapse(*rankings: Sequence[Hit], suspected: Suspected | None = None) -> list[list[Hit]]:
    """Each ranking with one hit per chunk text, best first, so that a text held by several
    pages (an aggregate page repeating them all, such as a single-page edition) takes one
    place, not one per page.

    A text's hit, the same in every ranking, is on a page not suspected missing when it has
    one (``suspected`` says which are, asked only about texts held more than once: a page
    renamed without a redirect keeps its content under its old URL until it is tombstoned,
    and the old URL answers 404), then the one nearest its page's start (lowest
    ``chunk_index``; then by record key): on a part of an aggregate page it sits far earlier
    than on the aggregate. It names the other pages in ``also`` and keeps each ranking's score.

    Example::

        >>> part = Hit(0.8, "same", "u/fs", "t", (), "s", "fs", "A", chunk_index=2)
        >>> whole = Hit(0.8, "same", "u/all", "t", (), "s", "all", "B", chunk_index=90)
        >>> other = Hit(0.7, "other", "u/fs", "t", (), "s", "fs", "C")
        >>> [(h.point_id, h.also) for h in collapse([whole, part, other])[0]]
        [('A', ('u/all',)), ('C', ())]
    """
    holders: dict[str, dict[str, Hit]] = {}
    for hits in rankings:
        for hit in hits:
            holders.setdefault(hit.text, {}).setdefault(hit.point_id, hit)
    shared = [hit.doc_key for held in holders.values() if len(held) > 1 for hit in held.values()]
    doubtful = suspected(sorted(set(shared))) if shared and suspected is not None else set()
    chosen: dict[str, Hit] = {}
    for text, held in holders.items():
        home = min(
            held.values(),
            key=lambda hit: (hit.doc_key in doubtful, hit.chunk_index, hit.doc_key, hit.point_id),
        )
        others = sorted({hit.url for hit in held.values()} - {home.url})
        chosen[text] = dataclasses.replace(home, also=tuple(others))
    collapsed: list[list[Hit]] = []
    for hits in rankings:
        seen: set[str] = set()
        kept: list[Hit] = []
        for hit in hits:
            if hit.text not in seen:
                seen.add(hit.text)
                kept.append(dataclasses.replace(chosen[hit.text], score=hit.score))
        collapsed.append(kept)
    return collapsed


def sparse_query(query: str, store: Any, index: IndexFacts) -> Any:
    """The query's sparse vector: plain terms for a store with an IDF modifier, else each
    term weighted by its IDF over the collection."""
    if getattr(store, "sparse_idf", True) or index.frequencies is None:
        return encode_query(query)
    found = query_dimensions(query)
    frequencies, chunks = index.frequencies(sorted(found))
    weights = {t: idf(frequencies[t], chunks) for t in found if frequencies.get(t)}
    return encode_query(query, weights)


def retrieve(
    query: str,
    k: int,
    *,
    store: Any,
    embed: Callable[[str], Sequence[float]],
    index: IndexFacts,
    mode: Mode,
    sparse_weight: float = SPARSE_WEIGHT,
    page_weight: float = PAGE_WEIGHT,
    gate_margin: float = SPARSE_GATE,
    source: str | None = None,
    collection: str = "",
) -> list[Hit]:
    """The ``k`` chunks for ``query`` by ``mode``; ``hybrid`` gates each lexical vote by its
    chunk's cosine (:func:`sparse_gate`, within ``gate_margin`` of the best; 0 turns the gate
    off) and scores each fused candidate with its page's coverage too (:func:`with_coverage`,
    weighted ``page_weight``).

    A collection without sparse vectors answers ``hybrid`` densely (``sparse`` is an error):
    ``ragsync reindex --same-collection`` gives it sparse vectors.

    Raises:
        NoSparseVectors: ``mode`` is ``sparse`` and the collection has no sparse vectors.
    """
    if mode not in MODES:
        raise ValueError(f"mode: must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "dense" and index.sparse_id is None:
        if mode == "sparse":
            raise NoSparseVectors(
                f"collection {collection!r} has no sparse vectors: run `ragsync reindex "
                "--same-collection` to add them, or search with mode dense"
            )
        mode = "dense"
    # Texts held by several pages take one place each (collapse): a single ranking asks for
    # twice k so that k remain; hybrid's candidates are many more than k already.
    if mode == "dense":
        [hits] = collapse(store.search(embed(query), 2 * k, source), suspected=index.suspected)
        return [dataclasses.replace(h, dense_score=h.score) for h in hits[:k]]
    candidates = 2 * k if mode == "sparse" else max(k, CANDIDATES)
    lexical = store.search_sparse(sparse_query(query, store, index), candidates, source)
    if mode == "sparse":
        [hits] = collapse(lexical, suspected=index.suspected)
        return [dataclasses.replace(h, sparse_score=h.score) for h in hits[:k]]
    near = store.search(
        embed(query), max(k, GATE_CANDIDATES if gate_margin else CANDIDATES), source
    )
    dense, lexical = collapse(near[: max(k, CANDIDATES)], lexical, suspected=index.suspected)
    gate = sparse_gate(lexical, near, gate_margin) if gate_margin else None
    fused = fuse(dense, lexical, len(dense) + len(lexical), sparse_weight=sparse_weight, gate=gate)
    if page_weight and index.chunk_counts is not None:
        counts = index.chunk_counts(sorted({hit.doc_key for hit in fused}))
        fused = with_coverage(fused, counts, page_weight)
    return fused[:k]


def with_coverage(hits: Sequence[Hit], chunk_counts: Mapping[str, int], weight: float) -> list[Hit]:
    """``hits`` (every fused candidate) re-ranked by score + ``weight`` × their page's
    coverage: the share of the page's other chunks among the candidates, ``(candidates of the
    page − 1) / chunks of the page`` (``chunk_counts``, by record key; a page not counted
    counts its candidates). A page that several of its chunks match is more likely the answer
    than a large one (a changelog, a reference of every option) that one chunk of matches;
    dividing by the page's size keeps large pages from winning on many weak chunks (README
    "Hybrid retrieval").

    Example::

        >>> big = [Hit(0.20, f"b{i}", "u", "t", (), "s", "big", f"B{i}") for i in range(3)]
        >>> small = [Hit(0.19, f"s{i}", "v", "t", (), "s", "small", f"S{i}") for i in range(2)]
        >>> ranked = with_coverage(big + small, {"big": 300, "small": 2}, 0.1)
        >>> [h.point_id for h in ranked][:3], ranked[0].score
        (['S0', 'S1', 'B0'], 0.24)
    """
    per_page = Counter(hit.doc_key for hit in hits)

    def coverage(hit: Hit) -> float:
        found = per_page[hit.doc_key]
        return (found - 1) / max(chunk_counts.get(hit.doc_key) or found, 1)

    scored = [
        dataclasses.replace(hit, score=round(hit.score + weight * coverage(hit), 6)) for hit in hits
    ]
    return sorted(scored, key=lambda hit: (-hit.score, hit.point_id))


def index_facts(state: Any, collection: str) -> IndexFacts:
    """What the state DB (a :class:`StateDB`) knows of ``collection``: its sparse vectors, and
    its pages' sizes."""
    sparse_id = state.index.get_collection_sparse(collection)
    frequencies = partial(state.terms.frequencies, collection)
    documents = state.documents
    return IndexFacts(sparse_id, frequencies, documents.chunk_counts, documents.suspected_of)
