"""The hand-written Cargo Book question set (#19) and its checker (eval/questionsets.py).

The set must be big and varied enough to measure retrieval with, and every question must
point at a real page holding its evidence; the checker that proves that is itself tested on a
tiny corpus built here, so it is exercised even where no Rust docs are installed. The check
against the installed Cargo Book runs where rustup put it (`python -m eval.questionsets` runs
it by hand).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.questionsets import (
    CARGO_BOOK,
    EVIDENCE_MAX,
    EVIDENCE_MIN,
    INSTALLED_CARGO_BOOK,
    KINDS,
    Question,
    QuestionSetError,
    collapse,
    is_stub,
    load,
    main,
    summary,
    validate,
)

PAGE = """<!DOCTYPE html><html><head><title>Config</title></head><body>
<nav><p>Sidebar: the jobs setting lives in the navigation too.</p></nav>
<main><h1>Configuration</h1>
<p>Sets the maximum number of
   compiler processes to run in <code>parallel</code>.</p></main></body></html>"""
STUB = """<!DOCTYPE html><html><head>
<meta http-equiv="Refresh" content="0; URL=config.html"></head>
<body><main><p>Sets the maximum number of compiler processes to run in parallel.</p></main>
<p>Redirecting to config.html</p></body></html>"""
EVIDENCE = "Sets the maximum number of compiler processes to run in parallel."


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "config.html").write_text(PAGE, encoding="utf-8")
    (tmp_path / "reference" / "old-config.html").write_text(STUB, encoding="utf-8")
    (tmp_path / "nomain.html").write_text("<html><body><p>" + EVIDENCE, encoding="utf-8")
    return tmp_path


def question(qid: str, answer: str, evidence: str = EVIDENCE, also=()) -> Question:
    return Question(qid, f"question {qid}?", answer, evidence, "term", tuple(also))


def problems_of(questions, corpus: Path) -> str:
    with pytest.raises(QuestionSetError) as raised:
        validate(questions, corpus)
    return str(raised.value)


# The shipped set -------------------------------------------------------------------------


def test_the_cargo_book_set_is_big_and_varied_enough_to_measure_with():
    questions = load(CARGO_BOOK)
    counts = summary(questions)

    assert counts["questions"] >= 60
    assert counts["pages"] >= 40
    assert counts["term"] > 0 and counts["plain"] > 0
    assert {q.kind for q in questions} <= set(KINDS)
    assert len({q.id for q in questions}) == len(questions)
    assert len({q.question.casefold() for q in questions}) == len(questions)
    assert len({q.evidence for q in questions}) == len(questions)
    assert all(EVIDENCE_MIN <= len(q.evidence) <= EVIDENCE_MAX for q in questions)
    assert all(q.answer.endswith(".html") and not q.answer.startswith("/") for q in questions)
    assert not {q.answer for q in questions} & {"print.html", "toc.html"}


def test_the_cargo_book_set_names_its_corpus_and_authorship_in_its_header():
    header = CARGO_BOOK.read_text(encoding="utf-8").split("[[question]]", 1)[0]

    assert "rustc 1.95.0" in header
    assert "share/doc/rust/html/cargo" in header
    assert "by hand" in header and "before any retrieval" in header


@pytest.mark.skipif(
    not INSTALLED_CARGO_BOOK.is_dir(),
    reason=f"no Cargo Book at {INSTALLED_CARGO_BOOK}; check by hand: "
    "python -m eval.questionsets --corpus DIR",
)
def test_every_question_holds_against_the_installed_cargo_book():
    validate(load(CARGO_BOOK), INSTALLED_CARGO_BOOK)
    # The book's own redirect stubs are recognised as such.
    assert is_stub((INSTALLED_CARGO_BOOK / "commands/cargo-git-checkout.html").read_bytes())
    assert not is_stub((INSTALLED_CARGO_BOOK / "reference/config.html").read_bytes())


# The loader ------------------------------------------------------------------------------


def test_load_rejects_bad_kinds_evidence_lengths_duplicates_and_unknown_fields(tmp_path):
    path = tmp_path / "set.toml"
    path.write_text(
        """
[[question]]
id = "a"
question = "How?"
answer = "x.html"
evidence = "long enough evidence"
kind = "vague"

[[question]]
id = "b"
question = "Why?"
answer = "x.html"
evidence = "short"
kind = "term"

[[question]]
id = "c"
question = "  how? "
answer = "x.html"
evidence = "long enough evidence"
kind = "plain"

[[question]]
id = "d"
question = "When?"
answer = "x.html"
evidence = "long enough evidence"
kind = "plain"
page = "y.html"
""",
        encoding="utf-8",
    )

    with pytest.raises(QuestionSetError) as raised:
        load(path)

    lines = str(raised.value).splitlines()
    assert len(lines) == 4
    assert "question a: kind 'vague'" in lines[0]
    assert "question b: evidence is 5 characters" in lines[1]
    assert "question c: duplicate question" in lines[2]
    assert "question d:" in lines[3] and "unknown ['page']" in lines[3]


def test_load_collapses_whitespace_and_keeps_also_pages(tmp_path):
    path = tmp_path / "set.toml"
    path.write_text(
        '[[question]]\nid = "a"\nquestion = "How  do\\nI?"\nanswer = "x.html"\n'
        'also = ["y.html"]\nevidence = "  Sets the\\n  maximum "\nkind = "plain"\n',
        encoding="utf-8",
    )

    (q,) = load(path)

    assert (q.question, q.evidence, q.pages) == (
        "How do I?",
        "Sets the maximum",
        ("x.html", "y.html"),
    )
    assert collapse(" a \t b\n") == "a b"


# The validator on a tiny corpus ----------------------------------------------------------


def test_a_page_whose_main_text_holds_the_evidence_passes(corpus):
    # The evidence spans a line break and a <code> element: compared after collapsing.
    validate([question("ok", "reference/config.html")], corpus)


def test_a_missing_page_fails_naming_question_and_page(corpus):
    assert "question q1: page reference/gone.html does not exist" in problems_of(
        [question("q1", "reference/gone.html")], corpus
    )


def test_a_redirect_stub_fails_even_though_it_holds_the_evidence(corpus):
    assert "question q2: page reference/old-config.html is a redirect stub" in problems_of(
        [question("q2", "reference/old-config.html")], corpus
    )


def test_evidence_not_on_the_page_fails(corpus):
    message = problems_of([question("q3", "reference/config.html", "Sets the minimum")], corpus)

    assert "question q3: page reference/config.html does not contain the evidence" in message
    assert "'Sets the minimum'" in message


def test_evidence_outside_main_does_not_count(corpus):
    message = problems_of(
        [question("q4", "reference/config.html", "the jobs setting lives in the navigation")],
        corpus,
    )

    assert "question q4: page reference/config.html does not contain the evidence" in message


def test_a_page_without_main_or_outside_the_corpus_fails(corpus):
    message = problems_of([question("q5", "nomain.html"), question("q6", "../escape.html")], corpus)

    assert "question q5: page nomain.html has no <main> element" in message
    assert "question q6: page ../escape.html is outside the corpus" in message


def test_also_pages_must_exist_and_not_be_stubs(corpus):
    message = problems_of(
        [
            question(
                "q7",
                "reference/config.html",
                also=["reference/old-config.html", "reference/missing.html"],
            )
        ],
        corpus,
    )

    assert "question q7: page reference/old-config.html is a redirect stub" in message
    assert "question q7: page reference/missing.html does not exist" in message


def test_every_problem_is_reported_at_once(corpus):
    message = problems_of(
        [
            question("ok", "reference/config.html"),
            question("q1", "reference/gone.html"),
            question("q2", "reference/old-config.html"),
        ],
        corpus,
    )

    assert message.startswith("2 problem(s)")
    assert "question ok" not in message


def test_the_command_line_check_exits_nonzero_on_a_failing_corpus(corpus, tmp_path, capsys):
    path = tmp_path / "set.toml"
    path.write_text(
        '[[question]]\nid = "a"\nquestion = "How?"\nanswer = "reference/config.html"\n'
        f'evidence = "{EVIDENCE}"\nkind = "term"\n\n'
        '[[question]]\nid = "b"\nquestion = "Why?"\nanswer = "reference/gone.html"\n'
        f'evidence = "{EVIDENCE}"\nkind = "plain"\n',
        encoding="utf-8",
    )

    assert main([str(path), "--corpus", str(corpus)]) == 1
    out, err = capsys.readouterr()
    assert "questions=2 pages=2 term=1 plain=1" in out
    assert "question b: page reference/gone.html does not exist" in err
