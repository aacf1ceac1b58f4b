"""Pure chunk planning: a table of cases."""

from __future__ import annotations

import dataclasses
import hashlib
import uuid

from ragsync.chunkdiff import chunk_payload, diff_chunks, magnitude
from ragsync.models import Chunk

KEY, MODEL, T0, T1 = "docs:https://x/a", "m@1", "t0", "t1"


def chunks(*texts, headings=("H",)):
    return [
        Chunk(i, t, headings, hashlib.sha256(t.encode()).hexdigest(), len(t.split()))
        for i, t in enumerate(texts)
    ]


def test_first_plan_adds_everything():
    stored, diff = diff_chunks(KEY, [], chunks("a", "b"), model_id=MODEL, now=T0)
    assert len(diff.add) == 2 and not diff.remove and not diff.keep
    assert all(c.last_changed_at == T0 for c in stored)


def test_same_chunks_plan_nothing():
    old, _ = diff_chunks(KEY, [], chunks("a", "b"), model_id=MODEL, now=T0)
    stored, diff = diff_chunks(KEY, old, chunks("a", "b"), model_id=MODEL, now=T1)
    assert not diff.changed and stored == old


def test_edit_replaces_one_chunk_and_keeps_ids_and_times_of_others():
    old, _ = diff_chunks(KEY, [], chunks("a", "b", "c"), model_id=MODEL, now=T0)
    stored, diff = diff_chunks(KEY, old, chunks("a", "B", "c"), model_id=MODEL, now=T1)
    assert [c.text for c in diff.add] == ["B"] and [c.text for c in diff.remove] == ["b"]
    assert [c.point_id for c in diff.keep] == [old[0].point_id, old[2].point_id]
    assert [c.last_changed_at for c in stored] == [T0, T1, T0]
    assert not diff.repayload


def test_insertion_shifts_indexes_and_updates_payloads_not_vectors():
    old, _ = diff_chunks(KEY, [], chunks("a", "b"), model_id=MODEL, now=T0)
    _, diff = diff_chunks(KEY, old, chunks("new", "a", "b"), model_id=MODEL, now=T1)
    assert [c.text for c in diff.add] == ["new"]
    assert [c.text for c in diff.repayload] == ["a", "b"]
    assert magnitude(diff) == round(1 / 3, 4)


def test_a_text_the_document_repeats_is_stored_once_at_its_first_place():
    stored, diff = diff_chunks(
        KEY, [], chunks("a", "tip", "b", "tip", "tip"), model_id=MODEL, now=T0
    )
    assert [(c.chunk_index, c.text) for c in stored] == [(0, "a"), (1, "tip"), (2, "b")]
    assert [c.text for c in diff.add] == ["a", "tip", "b"] and diff.folded == 2


def test_folding_the_same_repeat_again_changes_nothing():
    old, _ = diff_chunks(KEY, [], chunks("a", "tip", "tip"), model_id=MODEL, now=T0)
    stored, diff = diff_chunks(KEY, old, chunks("a", "tip", "tip"), model_id=MODEL, now=T1)
    assert stored == old and not diff.changed and diff.folded == 1


def test_a_stored_repeat_is_deleted_and_nothing_is_embedded():
    first, _ = diff_chunks(KEY, [], chunks("a", "tip"), model_id=MODEL, now=T0)
    tip = first[1]
    # a second place of the text, under the id a state without folding gave it
    second = uuid.uuid5(uuid.NAMESPACE_URL, f"{KEY}\n{tip.chunk_hash}\n{MODEL}\n1")
    repeat = dataclasses.replace(tip, point_id=str(second), chunk_index=2)
    stored, diff = diff_chunks(
        KEY, [*first, repeat], chunks("a", "tip", "tip"), model_id=MODEL, now=T1
    )
    assert stored == first and diff.folded == 1
    assert not diff.add and diff.remove == (repeat,) and diff.changed


def test_ids_depend_on_record_and_model():
    a, _ = diff_chunks(KEY, [], chunks("x"), model_id=MODEL, now=T0)
    b, _ = diff_chunks("docs:https://x/b", [], chunks("x"), model_id=MODEL, now=T0)
    c, _ = diff_chunks(KEY, [], chunks("x"), model_id="m@2", now=T0)
    assert len({a[0].point_id, b[0].point_id, c[0].point_id}) == 3


def test_title_change_repayloads_every_kept_chunk():
    old, _ = diff_chunks(KEY, [], chunks("a", "b"), model_id=MODEL, now=T0)
    _, diff = diff_chunks(
        KEY, old, chunks("a", "b"), model_id=MODEL, now=T1, document_payload_changed=True
    )
    assert len(diff.repayload) == 2 and not diff.add


def test_payload_is_langchain_shaped():
    stored, _ = diff_chunks(KEY, [], chunks("text"), model_id=MODEL, now=T0)
    document = {"canonical_url": "https://x/a", "source_id": "docs", "title": "A", "doc_key": KEY}
    payload = chunk_payload(stored[0], document=document, model_id=MODEL)
    assert payload["page_content"] == "text"
    assert payload["metadata"]["doc_key"] == KEY and payload["metadata"]["headings"] == ["H"]
