"""The fusion benchmark (eval/bench_fusion.py) on hand-made candidate lists: each grid cell
re-fuses the same two rankings with its own rank offset and weight, and the report counts the
halves where the default offset beats 60. No model, no server."""

from __future__ import annotations

from eval.bench_fusion import markdown, scores
from eval.questionsets import Question
from ragsync.models import Hit


def hit(url: str, score: float = 1.0) -> Hit:
    return Hit(score, url, url, "t", (), "s", url, url)


def question(answer: str) -> Question:
    return Question("q", "where?", answer, "evidence", "term")


def test_the_offset_decides_between_one_rankings_first_and_both_rankings_middle():
    # "top" is first in the dense ranking only; "both" is sixth in each ranking.
    filler = [hit(f"d{i}") for i in range(4)]
    dense = [hit("top"), *filler, hit("both")]
    sparse = [hit(f"s{i}") for i in range(5)] + [hit("both")]
    lists = [(dense, sparse)]
    # Sparse weight 0.5: top scores 1/(o+1), both 1.5/(o+6), the sparse first 0.5/(o+1).
    assert scores(lists, [question("top")], 2, 0.5)["hit@1"] == 1.0  # 1/3 > 1.5/8
    assert scores(lists, [question("both")], 60, 0.5)["hit@1"] == 1.0  # 1.5/66 > 1/61
    assert scores(lists, [question("top")], 60, 0.5)["hit@1"] == 0.0


def test_the_report_has_every_cell_and_counts_the_halves():
    lists = [([hit("a"), hit("b")], [hit("b")])]
    cells = {f"{o}/{w:g}": scores(lists, [question("b")], o, w) for o in (10, 60) for w in (1,)}
    halves = [
        {"10": {"hit@1": 1.0, "hit@5": 1.0, "mrr@10": 1.0}, "60": s}
        for s in (
            {"hit@1": 0.5, "hit@5": 1.0, "mrr@10": 0.5},
            {"hit@1": 1.0, "hit@5": 0.5, "mrr@10": 1.0},
        )
    ]
    result = {
        "command": "python eval/bench_fusion.py",
        "default_offset": 10,
        "grid": {"set": cells},
        "book_kinds": {"term": {"10": cells["10/1"]}},
        "book_halves": halves,
    }
    text = markdown(result, [10, 60], [1.0])
    assert "| 10 | 1.000 / 1.000 / 1.000 |" in text and "| 60 |" in text
    assert "better / worse on hit@1 in 1 / 0, on hit@5 in 1 / 0, on MRR@10 in 1 / 0" in text


def test_page_coverage_lifts_a_page_many_of_whose_chunks_are_candidates():
    # "big" (300 chunks) has the best chunk; "small" (3 chunks) has the next two.
    dense = [
        Hit(1.0, "b0", "big", "t", (), "s", "big", "b0"),
        Hit(1.0, "s0", "small", "t", (), "s", "small", "s0"),
        Hit(1.0, "s1", "small", "t", (), "s", "small", "s1"),
    ]
    lists, counts = [(dense, [])], {"big": 300, "small": 3}
    assert scores(lists, [question("big")], 10, 1.5)["hit@1"] == 1.0
    assert scores(lists, [question("small")], 10, 1.5, 0.1, counts)["hit@1"] == 1.0
    cells = {"0": scores(lists, [question("small")], 10, 1.5)}
    cells["0.1"] = scores(lists, [question("small")], 10, 1.5, 0.1, counts)
    result = {
        "command": "python eval/bench_fusion.py",
        "default_offset": 10,
        "grid": {"set": {"10/1.5": cells["0"]}},
        "book_kinds": {},
        "book_halves": [],
        "page_weight": 0.1,
        "coverage": {"cargo-book": cells},
        "book_page_halves": [cells, cells],
    }
    text = markdown(result, [10], [1.5])
    assert "| 0.1 | 1.000 / 1.000 / 1.000 |" in text and "| 0 | 0.000 / 1.000 / 0.500 |" in text
    assert "page weight 0.1 against none is better / worse on hit@1 2 / 0" in text
