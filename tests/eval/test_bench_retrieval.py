"""The retrieval benchmark's scoring (eval/bench_retrieval.py) on hand-made rankings: hit@k over
the top k chunks' pages, MRR over pages ranked by first occurrence, `also` pages as right as
the answer, and evidence found case-folded, whitespace-collapsed, through Markdown marks, in
the top 5 chunks only. No model, no server."""

from __future__ import annotations

import pytest

from eval.bench_peers import first_right, rank_scores
from eval.bench_retrieval import (
    absolute,
    by_kind,
    evidence_found,
    evidence_indexed,
    evidence_key,
    evolving_questions,
    score,
)
from eval.evolving import EvolvingSite
from eval.questionsets import Question

EVIDENCE = "By default, the Cargo home is located in $HOME/.cargo/."


def question(answer: str, *, also: tuple[str, ...] = (), kind: str = "term") -> Question:
    return Question("q", "where?", answer, EVIDENCE, kind, also)  # type: ignore[arg-type]


def test_first_right_gives_chunk_position_and_page_rank_by_first_occurrence():
    assert first_right(["a", "a", "b", "r"], {"r"}) == (4, 3)
    assert first_right(["r", "a"], {"r"}) == (1, 1)
    assert first_right(["a", "b"], {"r"}) is None


def test_hits_count_top_k_chunks_and_mrr_counts_distinct_pages():
    ranked = [
        ["right", "x", "y"],  # hit@1
        ["x", "x", "y", "right"],  # chunk 4 -> hit@5, page rank 3 -> 1/3
        ["x", "y", "x", "y", "z", "w", "right"],  # chunk 7: no hit@5, page rank 5 -> 1/5
        ["x"] * 10 + ["right"],  # past the top 10: nothing
    ]
    scores = rank_scores(ranked, [("right",)] * 4)
    assert scores["questions"] == 4
    assert scores["hit@1"] == 0.25
    assert scores["hit@5"] == 0.5
    assert scores["mrr@10"] == round((1 + 1 / 3 + 1 / 5) / 4, 3)


def test_an_also_page_is_as_right_as_the_answer():
    rankings = [[("other", "t"), ("also", "t")], [("answer", "t")], [("other", "t")]]
    questions = [question("answer", also=("also",)), question("answer"), question("answer")]
    result = score(rankings, questions)
    assert (result["hit@1"], result["hit@5"]) == (round(1 / 3, 3), round(2 / 3, 3))
    assert result["mrr@10"] == round((1 / 2 + 1) / 3, 3)


def test_evidence_is_found_case_folded_whitespace_collapsed_and_through_markdown():
    chunk = (
        "Cargo home > Intro\n\n"
        "> BY default,  the [Cargo home](x.html) is\n> located in `$HOME/.cargo/`."
    )
    assert evidence_found(["nothing here", chunk], EVIDENCE)
    assert not evidence_found(["By default, the Cargo home is located elsewhere."], EVIDENCE)
    assert evidence_key("A  `snake_case`\n**key**") == "a snake_case key"


def test_evidence_counts_only_in_the_top_five_chunks():
    hits = [("p", f"filler {n}") for n in range(5)] + [("p", EVIDENCE.upper())]
    assert score([hits], [question("p")])["evidence@5"] == 0.0
    assert score([hits[1:]], [question("p")])["evidence@5"] == 1.0
    assert evidence_indexed([text for _, text in hits], [question("p")]) == 1.0


def test_scores_split_by_kind():
    rankings = [[("a", EVIDENCE)], [("b", "")]]
    split = by_kind(rankings, [question("a"), question("a", kind="plain")])
    assert (split["term"]["hit@1"], split["plain"]["hit@1"]) == (1.0, 0.0)
    assert split["term"]["evidence@5"] == 1.0


def test_book_pages_become_urls_under_the_served_copy():
    (q,) = absolute([question("guide/a.html", also=("b.html",))], "http://127.0.0.1:9")
    assert q.pages == ("http://127.0.0.1:9/guide/a.html", "http://127.0.0.1:9/b.html")


def test_evolving_questions_take_their_fact_sentence_as_evidence():
    site = EvolvingSite(3)
    questions = evolving_questions(site, "http://h")
    assert [(q.question, q.answer) for q in questions] == site.questions("http://h")
    for q in questions:
        page = site.live[q.answer.removeprefix("http://h")]
        assert q.evidence in page.sentences()
        assert any(s.fact.sentence == q.evidence for s in page.sections)


@pytest.mark.parametrize("top", [0, 10])
def test_no_right_page_scores_zero(top):
    assert rank_scores([["x"] * top], [("r",)])["mrr@10"] == 0.0
