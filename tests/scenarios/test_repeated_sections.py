"""A page that repeats a section under one heading holds each chunk text once.

FastAPI's pages show a tabbed example again under the same heading, its second tab each time
with the tip "Prefer to use the Annotated version if possible.". Chunk boundaries depend on
content, so the repeat is cut where the first was and gives the same chunk text twice: it is
stored once, at its first place, and counted in ``chunks_folded``. Through the evolving
benchmark site's steps (``eval/bench_peers.py``'s ``STEPS``, checked by ``eval/evolving.py``'s
``check_index``) with such an example on every page, no page holds a text twice and the
embedding efficiency stays 1.0; an index that stored a repeat is folded by ``reindex``.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections import Counter

import pytest

from eval.bench_peers import STEPS
from eval.evolving import EvolvingSite, Page, check_index
from ragsync.chunkdiff import chunk_payload
from ragsync.models import Counters
from ragsync.pipeline.journal import apply_journal
from ragsync.state import journal_op

TIP = (
    '<div class="admonition tip"><p class="admonition-title">Tip</p>'
    "<p>Prefer to use the <code>Annotated</code> version if possible.</p></div>"
)


def code(name: str, *, annotated: bool) -> str:
    """A FastAPI endpoint of the component ``name`` (about 100 tokens: a chunk of its own)."""
    arg = (
        "q: Annotated[str | None, Query(max_length=50)] = None"
        if annotated
        else "q: str | None = Query(default=None, max_length=50)"
    )
    lines = [
        *(["from typing import Annotated", ""] if annotated else []),
        "from fastapi import FastAPI, Query",
        "",
        "app = FastAPI()",
        "",
        f'@app.get("/{name.replace(" ", "-")}/items/")',
        f"async def read_items({arg}):",
        '    results = {"items": [{"item_id": "Foo"}, {"item_id": "Bar"}]}',
        "    if q:",
        '        results.update({"q": q})',
        "    return results",
    ]
    return '<div class="highlight"><pre><code>' + "\n".join(lines) + "</code></pre></div>"


def tabbed_example(name: str, n: int) -> str:
    """mkdocs-material's tabbed set: the endpoint with Annotated, then without, after a tip."""
    return (
        f'<div class="tabbed-set tabbed-alternate" data-tabs="{n}:2">'
        f'<input checked="checked" id="__tabbed_{n}_1" name="__tabbed_{n}" type="radio">'
        f'<input id="__tabbed_{n}_2" name="__tabbed_{n}" type="radio">'
        f'<div class="tabbed-labels"><label for="__tabbed_{n}_1">Python 3.10+</label>'
        f'<label for="__tabbed_{n}_2">Python 3.10+ - non-Annotated</label></div>'
        '<div class="tabbed-content">'
        f'<div class="tabbed-block">{code(name, annotated=True)}</div>'
        f'<div class="tabbed-block">{TIP}{code(name, annotated=False)}</div>'
        "</div></div>"
    )


class RepeatingSite(EvolvingSite):
    """The evolving site, every page ending with an "Example" section that shows its tabbed
    example twice (FastAPI includes one source file again, other lines highlighted)."""

    def _publish(self, path: str, page: Page) -> None:
        self.live[path] = page
        example = (
            "<h2>Example</h2>"
            + tabbed_example(page.name, 1)
            + "<p>The same example again, other lines highlighted.</p>"
            + tabbed_example(page.name, 2)
        )
        self.site.set_page(path, page.title, page.html() + "\n" + example)


@pytest.fixture
def repeating():
    """Start a :class:`RepeatingSite` of ``pages`` pages; returns it and its base URL."""
    started: list[RepeatingSite] = []

    def start(pages: int) -> tuple[RepeatingSite, str]:
        site = RepeatingSite(pages, seed=3)
        started.append(site)
        return site, site.site.start()

    yield start
    for site in started:
        site.site.stop()


def points_of(syncer) -> list[tuple[str, str]]:
    """Every point as ``(url, text)``, as eval/bench_peers.py reads an index back."""
    return [(p["metadata"]["url"], p["page_content"]) for _, p, _ in syncer.store.points()]


def test_no_page_holds_a_text_twice_at_any_step_of_the_evolving_site(repeating, make_syncer):
    site, base = repeating(8)
    # as eval/bench_peers.py configures ragsync: one 404/410 deletes a page
    syncer = make_syncer(site.site, missing_confirmations=1, missing_grace="0s")
    seen: set[str] = set()
    rows = []
    for step, mutate in STEPS:
        mutate(site)
        result = syncer.run()
        assert result.ok, step
        points = points_of(syncer)
        texts = {text for _, text in points}
        minimum, embedded = len(texts - seen), result.counters.chunks_embedded
        seen |= texts
        check = check_index(points, site.truth(base), site.gen.sentences)
        rows.append(
            {
                "step": step,
                "duplicate_chunks": check["duplicate_chunks"],
                "missing_pages": check["missing_pages"],
                "stale_pages": check["stale_pages"],
                # eval/bench_peers.py's embedding_efficiency: new texts over texts embedded
                "efficiency": round(minimum / embedded, 3) if embedded else 1.0,
            }
        )
        if step == "cold sync":
            cold, pages = result.counters, len(site.live)
    exact = {"duplicate_chunks": 0, "missing_pages": 0, "stale_pages": 0, "efficiency": 1.0}
    assert rows == [{"step": step, **exact} for step, _ in STEPS]
    assert cold.chunks_folded == pages  # every page repeats one chunk text: each stored once


def test_reindex_folds_a_stored_repeat_without_embedding(repeating, make_syncer, embedder):
    site, _ = repeating(2)
    syncer = make_syncer(site.site)
    assert syncer.run().ok
    doc_key, first = store_a_repeat(syncer)
    assert syncer.verify().clean  # the state is the truth: the store holds what it says
    url = doc_key.split(":", 1)[1]
    assert Counter(points_of(syncer))[(url, first.text)] == 2
    embedded = len(embedder.texts)

    result = syncer.reindex()
    assert result.ok
    assert max(Counter(points_of(syncer)).values()) == 1
    # only the page whose chunks change is committed: its repeat folded, its point deleted
    assert (result.counters.chunks_folded, result.counters.points_deleted) == (1, 1)
    assert result.counters.points_upserted == 0 and len(embedder.texts) == embedded
    assert [c.point_id for c in syncer.state.index.get_chunks(doc_key)].count(first.point_id) == 1
    assert syncer.verify().clean


def store_a_repeat(syncer):
    """Give one page a second chunk row and point for its repeated text, as a state written
    without folding holds them (the id of a text's second place took an occurrence number);
    return the page's key and the chunk repeated."""
    doc_key, first = next(
        (key, chunk)
        for key, chunk in syncer.state.index.list_chunks()
        if "\n\nTip\n\nPrefer to use" in chunk.text
    )
    held = syncer.state.index.get_chunks(doc_key)
    if [c.chunk_hash for c in held].count(first.chunk_hash) > 1:  # stored twice already
        return doc_key, first
    name = f"{doc_key}\n{first.chunk_hash}\n{syncer.engine.model_id}\n1"
    repeat = dataclasses.replace(
        first,
        point_id=str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
        chunk_index=len(held),
    )
    document = syncer.state.documents.get(doc_key)
    payload = chunk_payload(repeat, document=document, model_id=syncer.engine.model_id)
    row = {"doc_key": doc_key, **vars(repeat), "headings": json.dumps(list(repeat.headings))}
    upsert = journal_op(
        "upsert",
        repeat.point_id,
        doc_key=doc_key,
        payload=payload,
        text_hash=repeat.chunk_hash,
        model_id=syncer.engine.model_id,
    )
    with syncer.state.write():
        syncer.state.put_rows("chunks", [row])
        syncer.state.journal.add([upsert])
    apply_journal(syncer.engine, Counters())
    return doc_key, first
