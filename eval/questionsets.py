"""Hand-written retrieval question sets (issue #19): load them typed, and check them against
the documentation corpus they were written from.

A question set is a TOML file in `eval/questions/` with one `[[question]]` table per question:
`id`, `question`, `answer` (the page that answers it best, relative to the corpus root),
`evidence` (a verbatim span of that page's `<main>` text, 10-200 characters after whitespace
collapsing), `kind` (`term` or `plain`) and optionally `also` (pages that answer equally well).

Run by hand against an installed corpus:
`python -m eval.questionsets [--corpus DIR] [eval/questions/cargo-book.toml]`.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

import lxml.html

QUESTIONS_DIR = Path(__file__).resolve().parent / "questions"
CARGO_BOOK = QUESTIONS_DIR / "cargo-book.toml"
# Where rustup installs the Cargo Book the cargo-book set was written from.
INSTALLED_CARGO_BOOK = (
    Path.home() / ".rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html/cargo"
)

Kind = Literal["term", "plain"]
KINDS: tuple[Kind, ...] = ("term", "plain")
EVIDENCE_MIN = 10
EVIDENCE_MAX = 200
FIELDS = frozenset({"id", "question", "answer", "evidence", "kind", "also"})
REQUIRED = ("id", "question", "answer", "evidence", "kind")


@dataclass(frozen=True)
class Question:
    """One hand-written question and where its answer lives."""

    id: str
    question: str
    answer: str
    evidence: str
    kind: Kind
    also: tuple[str, ...] = ()

    @property
    def pages(self) -> tuple[str, ...]:
        """Every page counted as a right answer: `answer` first, then `also`."""
        return (self.answer, *self.also)


class QuestionSetError(ValueError):
    """A question set file is malformed, or disagrees with its corpus; the message lists
    every problem, each naming the file or question id and the page at fault."""


def collapse(text: str) -> str:
    """Whitespace-collapsed text: runs of whitespace become one space, ends trimmed."""
    return " ".join(text.split())


def load(path: Path = CARGO_BOOK) -> tuple[Question, ...]:
    """Read a question set and check its shape (not its corpus: see `validate`).

    Args:
        path: the TOML file.

    Returns:
        The questions in file order.

    Raises:
        QuestionSetError: a missing or unknown field, an unknown kind, evidence outside
            10-200 characters, or a duplicate id or question; all problems, named by id.
    """
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    problems: list[str] = []
    questions: list[Question] = []
    seen_ids: set[str] = set()
    seen_texts: set[str] = set()
    for n, raw in enumerate(data.get("question", []), start=1):
        name = f"{path.name}: question {raw.get('id', f'#{n}')}"
        missing = [key for key in REQUIRED if not isinstance(raw.get(key), str) or not raw[key]]
        unknown = sorted(set(raw) - FIELDS)
        if missing or unknown:
            problems.append(f"{name}: missing {missing}, unknown {unknown}")
            continue
        also = raw.get("also", [])
        if not isinstance(also, list) or not all(isinstance(page, str) for page in also):
            problems.append(f"{name}: also must be a list of page paths")
            continue
        if raw["kind"] not in KINDS:
            problems.append(f"{name}: kind {raw['kind']!r} is not one of {KINDS}")
        evidence = collapse(raw["evidence"])
        if not EVIDENCE_MIN <= len(evidence) <= EVIDENCE_MAX:
            problems.append(
                f"{name}: evidence is {len(evidence)} characters, not {EVIDENCE_MIN}-{EVIDENCE_MAX}"
            )
        if raw["id"] in seen_ids:
            problems.append(f"{name}: duplicate id")
        text_key = collapse(raw["question"]).casefold()
        if text_key in seen_texts:
            problems.append(f"{name}: duplicate question {raw['question']!r}")
        if raw["answer"] in also:
            problems.append(f"{name}: answer {raw['answer']} is also listed in also")
        seen_ids.add(raw["id"])
        seen_texts.add(text_key)
        questions.append(
            Question(
                id=raw["id"],
                question=collapse(raw["question"]),
                answer=raw["answer"],
                evidence=evidence,
                kind=cast(Kind, raw["kind"]),
                also=tuple(also),
            )
        )
    if problems:
        raise QuestionSetError("\n".join(problems))
    return tuple(questions)


def is_stub(html: bytes) -> bool:
    """True for a redirect stub: a page whose `<meta http-equiv="refresh">` sends elsewhere."""
    tree = lxml.html.fromstring(html)
    return any(
        (meta.get("http-equiv") or "").strip().lower() == "refresh" for meta in tree.iter("meta")
    )


def main_text(html: bytes) -> str | None:
    """The whitespace-collapsed text of a page's `<main>` element, or None if it has none."""
    found = lxml.html.fromstring(html).xpath("//main")
    return collapse(found[0].text_content()) if found else None


def page_problems(corpus: Path, page: str, *, evidence: str | None) -> list[str]:
    """What is wrong with one answer page: missing, outside the corpus, a stub, no `<main>`,
    or (when `evidence` is given) not containing the evidence."""
    path = (corpus / page).resolve()
    if not path.is_relative_to(corpus.resolve()):
        return [f"page {page} is outside the corpus"]
    if not path.is_file():
        return [f"page {page} does not exist"]
    html = path.read_bytes()
    if is_stub(html):
        return [f"page {page} is a redirect stub"]
    text = main_text(html)
    if text is None:
        return [f"page {page} has no <main> element"]
    if evidence is not None and evidence not in text:
        return [f"page {page} does not contain the evidence {evidence!r}"]
    return []


def validate(questions: Iterable[Question], corpus: Path) -> None:
    """Check a question set against the corpus it was written from.

    Every answer page must exist under `corpus`, not be a redirect stub, and contain its
    question's evidence in its `<main>` text (whitespace-collapsed); every `also` page must
    exist and not be a stub.

    Args:
        questions: from `load`.
        corpus: the documentation's root directory (e.g. `INSTALLED_CARGO_BOOK`).

    Raises:
        QuestionSetError: every problem, each naming the question id and the page.
    """
    problems: list[str] = []
    for q in questions:
        found = page_problems(corpus, q.answer, evidence=q.evidence)
        for page in q.also:
            found += page_problems(corpus, page, evidence=None)
        problems += [f"question {q.id}: {problem}" for problem in found]
    if problems:
        raise QuestionSetError(
            f"{len(problems)} problem(s) against {corpus}:\n" + "\n".join(problems)
        )


def summary(questions: Sequence[Question]) -> dict[str, int]:
    """Counts a report quotes: questions, distinct answer pages, and questions per kind."""
    counts = {"questions": len(questions), "pages": len({q.answer for q in questions})}
    counts.update({kind: sum(q.kind == kind for q in questions) for kind in KINDS})
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("questions", nargs="?", type=Path, default=CARGO_BOOK)
    parser.add_argument("--corpus", type=Path, default=INSTALLED_CARGO_BOOK)
    args = parser.parse_args(argv)
    questions = load(args.questions)
    print(" ".join(f"{key}={value}" for key, value in summary(questions).items()))
    try:
        validate(questions, args.corpus)
    except QuestionSetError as error:
        print(error, file=sys.stderr)
        return 1
    print(f"all {len(questions)} questions pass against {args.corpus}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
