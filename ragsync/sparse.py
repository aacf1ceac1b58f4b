"""Lexical sparse vectors: BM25 term weights of a chunk text, a pure function of the text.

Dense MiniLM vectors miss the exact terms developers type (``--locked``, ``CARGO_HOME``,
``build.rs``, ``rust-version``, an error message); a lexical vector catches them. Each chunk
gets one beside its dense vector, keyed by the same chunk hash (README "Hybrid search"):

- the tokenizer keeps code-shaped terms whole *and* splits them, so ``snake_case``,
  ``--flags``, ``CamelCase``, ``a.b`` paths and ``kebab-case`` match either way;
- a document term's weight is BM25's saturated term frequency with a fixed average length
  (``k1`` 1.2, ``b`` 0.75), so the vector depends on the chunk alone and never has to be
  recomputed when other chunks change; the inverse document frequency is applied at query time
  (by Qdrant's IDF modifier, or from the state DB's document frequencies for pgvector);
- a term's dimension is a 32-bit hash of it (below pgvector's 10⁹ limit), so there is no
  vocabulary to keep.

The encoder id (:data:`SPARSE_ID`) names all of that: another tokenizer or weighting is another
id, and a collection built with one never receives another's vectors.
"""

from __future__ import annotations

import hashlib
import math
import re
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import Any

SPARSE_ID = "bm25-en1"  # tokenizer, stemmer, weighting and hashing below: change → new id
SPARSE_NAME = "bm25"  # the named sparse vector in Qdrant collections (and a pgvector column)
SPARSE_DIM = 1_000_000_000  # pgvector's sparsevec limit; Qdrant takes any uint32
K1 = 1.2
B = 0.75
AVERAGE_TERMS = 100.0  # a fixed average chunk length in terms (chunks are ~160 tokens)
MAX_TERM = 64  # longer "terms" are hashes, base64 or minified code: not worth matching

# A compound: an optional flag dash, then word characters joined by . : / - (``std::fmt``,
# ``build.rs``, ``rust-version``, ``--locked``).
_COMPOUND = re.compile(r"(?:--?)?[^\W_]\w*(?:(?:::|[./:-])\w+)*|_\w+")
# Markdown's backslash escapes (``CARGO\_HOME`` in a chunk is ``CARGO_HOME`` on the page).
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
_SEPARATORS = re.compile(r"::|[./:_-]+")
_HUMPS = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
STOP_WORDS = frozenset(
    """a about an and are as at be but by can could do does for from how i if in into is it its
    me my no not of on or so such than that the their them then there these they this to was
    we what when where which while who why will with would you your""".split()
)


@dataclass(frozen=True)
class SparseVector:
    """Non-zero dimensions in ascending order, and their weights."""

    indices: tuple[int, ...]
    values: tuple[float, ...]

    def __bool__(self) -> bool:
        return bool(self.indices)

    def to_bytes(self) -> bytes:
        """``uint32`` indices then ``float32`` values (the cache's encoding)."""
        return array("I", self.indices).tobytes() + array("f", self.values).tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> SparseVector:
        half = len(data) // 2
        values = array("f", data[half:]).tolist()
        return cls(tuple(array("I", data[:half])), tuple(values))

    @classmethod
    def of(cls, found: Any) -> SparseVector | None:
        """From a store client's sparse vector (anything with ``indices`` and ``values``);
        None stays None."""
        return None if found is None else cls(tuple(found.indices), tuple(found.values))

    def as_dict(self) -> dict[int, float]:
        return dict(zip(self.indices, self.values, strict=True))


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """A word's Snowball (Porter2) English stem: ``throttled`` and ``throttling`` match.

    >>> [stem(w) for w in ("dependencies", "throttled", "throttling", "status", "x86")]
    ['depend', 'throttl', 'throttl', 'status', 'x86']
    """
    if not word.isalpha():
        return word
    return str(_english().stemWord(word))


@lru_cache(maxsize=1)
def _english() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("english")


def _parts(compound: str) -> list[str]:
    """A compound's words: split at separators and case humps, lower-cased."""
    words = []
    for piece in _SEPARATORS.split(compound.lstrip("-")):
        words += [w.lower() for w in _HUMPS.split(piece) if w]
    return words


def terms(text: str) -> Iterator[str]:
    r"""The terms of ``text``, in order: every word (stop words dropped, stemmed), and
    each code-shaped compound whole as well.

    >>> print(" ".join(terms(r"Run cargo build --locked, CARGO\_HOME and build.rs")))
    run cargo build --locked lock cargo_home cargo home build.rs build rs
    """
    for match in _COMPOUND.finditer(_ESCAPED.sub(r"\1", text)):
        yield from _compound_terms(match.group())


def _compound_terms(compound: str) -> tuple[str, ...]:
    """The terms one compound of :func:`terms` yields (none for one over :data:`MAX_TERM`)."""
    if len(compound) > MAX_TERM:
        return ()
    parts = _parts(compound)
    whole = len(parts) > 1 or compound.startswith("-") or "_" in compound
    words = tuple(stem(word) for word in parts if word not in STOP_WORDS)
    return (compound.lower(), *words) if whole else words


@lru_cache(maxsize=50_000)
def _compound_dimensions(compound: str) -> tuple[int, ...]:
    """The dimensions of a compound's terms. Cached: a page's text repeats its words, and
    hashing every occurrence was most of :func:`encode`'s time (the frequent words carry the
    hits, so the cache stays small: about 10 MB full)."""
    return tuple(dimension(term) for term in _compound_terms(compound))


def dimension(term: str) -> int:
    """The term's dimension: 32 bits of its BLAKE2b hash, below :data:`SPARSE_DIM`."""
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big") % SPARSE_DIM


def _vector(weights: Mapping[int, float]) -> SparseVector:
    ordered = sorted(weights.items())
    return SparseVector(tuple(i for i, _ in ordered), tuple(round(w, 6) for _, w in ordered))


def encode(text: str) -> SparseVector:
    """A chunk text's vector: each term's BM25 term-frequency weight (IDF comes at query time).

    Two terms hashed to one dimension (rare at 10⁹) add their frequencies.
    """
    compounds = [c for c in _COMPOUND.findall(_ESCAPED.sub(r"\1", text)) if len(c) <= MAX_TERM]
    counts = Counter(chain.from_iterable(map(_compound_dimensions, compounds)))
    length = sum(counts.values())
    norm = K1 * (1 - B + B * length / AVERAGE_TERMS)
    return _vector({i: tf * (K1 + 1) / (tf + norm) for i, tf in counts.items()})


def query_dimensions(text: str) -> set[int]:
    """The dimensions of a query's distinct terms."""
    return {dimension(term) for term in terms(text)}


def encode_query(text: str, idf: Mapping[int, float] | None = None) -> SparseVector:
    """A query's vector: 1 per distinct term, or the term's IDF when ``idf`` is given (a
    store without an IDF modifier); a term no chunk has is dropped then."""
    found = query_dimensions(text)
    if idf is None:
        return _vector(dict.fromkeys(found, 1.0))
    return _vector({i: idf[i] for i in found if idf.get(i, 0.0) > 0})


def idf(document_frequency: int, documents: int) -> float:
    """BM25's inverse document frequency, as Qdrant's IDF modifier computes it."""
    df = min(document_frequency, documents)
    return math.log(1 + (documents - df + 0.5) / (df + 0.5))


def with_sparse(
    points: Sequence[tuple[str, Sequence[float], dict]],
    sparse: Sequence[SparseVector] | None,
    sparse_of: Callable[[SparseVector], Any],
) -> Iterator[tuple[str, Any, dict]]:
    """``(id, vectors, payload)`` of each point as Qdrant takes it: the dense vector alone, or
    ``{"": dense, SPARSE_NAME: sparse_of(its sparse vector)}`` when it has one with terms
    (``sparse`` is aligned with ``points``; ``sparse_of`` makes the client's sparse type)."""
    lexicals = sparse if sparse is not None else [None] * len(points)
    for (pid, dense, payload), lexical in zip(points, lexicals, strict=True):
        vector = [float(x) for x in dense]
        yield pid, {"": vector, SPARSE_NAME: sparse_of(lexical)} if lexical else vector, payload
