"""Pure decisions: what a document's new chunk list means for the vector store.

No I/O here. Point ids are deterministic (:func:`ragsync.identity.point_id`), so a chunk whose text
did not change keeps its id and is never rewritten; only added chunks are upserted, only removed
chunks are deleted, and kept chunks whose payload moved (index, headings, title) get a payload
update without a new vector.

A document holds each chunk text once. A page that repeats a section under the same heading
(FastAPI's pages repeat a tabbed example, each time with the tip "Prefer to use the Annotated
version if possible.") gives the same chunk text twice, since chunk boundaries depend on
content (:mod:`ragsync.chunk`); a second point would hold the same text and vector, stored and
searched twice, and take a second place of a top k with the same hit. The repeat is folded
into the text's first place. Every chunk row, and so every point in every store, is made
here, so the rule holds for a run, a plan, ``reindex`` and ``verify --repair`` alike.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from ragsync.identity import point_id
from ragsync.models import Chunk, ChunkDiff, StoredChunk

DIFF_LIMIT = 20_000


def diff_chunks(
    doc_key: str,
    old: Sequence[StoredChunk],
    new: Sequence[Chunk],
    *,
    model_id: str,
    now: str,
    document_payload_changed: bool = False,
) -> tuple[list[StoredChunk], ChunkDiff]:
    """The document's new stored chunks and the diff that turns ``old`` into them.

    A chunk whose text came earlier in ``new`` is folded into that first one (counted in
    :attr:`ChunkDiff.folded`, not stored); stored chunks are numbered in order from 0. A repeat
    in ``old`` (a state that stored one text twice) is therefore removed the next time the
    document is diffed, and nothing is embedded for it.

    Example::

        stored, diff = diff_chunks("docs:https://x/a", old, chunks, model_id=m, now=t)
        [c.point_id for c in diff.add]      # upsert these (embedding absent texts first)
        [c.point_id for c in diff.remove]   # delete these
    """
    previous = {c.point_id: c for c in old}
    seen: set[str] = set()
    stored: list[StoredChunk] = []
    add: list[StoredChunk] = []
    keep: list[StoredChunk] = []
    repayload: list[StoredChunk] = []
    for chunk in new:
        if chunk.chunk_hash in seen:
            continue
        seen.add(chunk.chunk_hash)
        pid = point_id(doc_key, chunk.chunk_hash, model_id)
        before = previous.get(pid)
        item = StoredChunk(
            point_id=pid,
            chunk_index=len(stored),
            chunk_hash=chunk.chunk_hash,
            text=chunk.text,
            headings=chunk.headings,
            tokens=chunk.tokens,
            last_changed_at=before.last_changed_at if before else now,
        )
        stored.append(item)
        if before is None:
            add.append(item)
            continue
        keep.append(item)
        if document_payload_changed or (before.chunk_index, before.headings) != (
            item.chunk_index,
            item.headings,
        ):
            repayload.append(item)
    current = {c.point_id for c in stored}
    remove = [c for c in old if c.point_id not in current]
    diff = ChunkDiff(
        tuple(add), tuple(remove), tuple(keep), tuple(repayload), len(new) - len(stored)
    )
    return stored, diff


def chunk_payload(chunk: StoredChunk, *, document: Mapping[str, Any], model_id: str) -> dict:
    """The LangChain-compatible point payload of ``chunk`` (``page_content`` + ``metadata``)."""
    return {
        "page_content": chunk.text,
        "metadata": {
            "url": document["canonical_url"],
            "source": document["source_id"],
            "title": document["title"],
            "headings": list(chunk.headings),
            "chunk_index": chunk.chunk_index,
            "chunk_hash": chunk.chunk_hash,
            "doc_key": document["doc_key"],
            "model": model_id,
            "last_changed_at": chunk.last_changed_at,
        },
    }


def magnitude(diff: ChunkDiff) -> float:
    """Share of the document's chunks that changed: (added + removed) / all involved."""
    total = len(diff.add) + len(diff.remove) + len(diff.keep)
    return round((len(diff.add) + len(diff.remove)) / total, 4) if total else 0.0


def markdown_diff(old: str, new: str, name: str, limit: int = DIFF_LIMIT) -> str:
    """A unified diff of two Markdown texts, cut to ``limit`` characters."""
    diff = "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), name, name, n=1
        )
    )
    return diff if len(diff) <= limit else diff[:limit] + "\n… (diff cut)\n"
