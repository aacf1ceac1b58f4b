"""Each outcome adds to the counters the run report promises, and to no other."""

from __future__ import annotations

import pytest

from ragsync.models import Candidate, Counters, work_candidate, work_item
from ragsync.pipeline.outcomes import (
    NO_REQUEST,
    Changed,
    Deleted,
    Exchange,
    Failed,
    Missing,
    MovedOnly,
    Moving,
    NotModified,
    Outcome,
    Page,
    Skipped,
    Unchanged,
)

PAGE = Page("docs:https://a.example/x", "https://a.example/x", Candidate("https://a.example/x"))
ASKED = Exchange(requested=True, conditional=True)


def counted(outcome: Outcome) -> dict[str, int]:
    counters = Counters()
    outcome.count(counters)
    return {name: value for name, value in counters.as_dict().items() if value}


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (Changed(PAGE, ASKED), {"responses_200_changed": 1}),
        (Unchanged(PAGE, ASKED), {"responses_200_unchanged": 1}),
        (NotModified(PAGE, ASKED), {"responses_304": 1}),
        (Missing(PAGE, ASKED), {"responses_404": 1}),
        (Failed(PAGE, ASKED), {}),
        (Moving(PAGE, ASKED), {}),
        (MovedOnly(PAGE, ASKED), {}),
        (Skipped(PAGE, ASKED, why="deferred"), {"deferred": 1}),
    ],
)
def test_a_request_counts_once_and_its_answer_by_kind(outcome, expected):
    assert counted(outcome) == {"requests_sent": 1, "conditional_requests_sent": 1, **expected}


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        # API records carry their content and reindexed pages are not fetched: no response
        (Changed(PAGE, NO_REQUEST), {}),
        (Unchanged(PAGE, NO_REQUEST), {}),
        (Deleted(PAGE), {}),
        (Skipped(PAGE, why="disallowed"), {"robots_disallowed": 1}),
        (Failed(PAGE, reason="robots.txt unreachable", transient=True), {}),
    ],
)
def test_no_request_no_response_counter(outcome, expected):
    assert counted(outcome) == expected


def test_a_page_is_requested_as_published_also_through_the_work_queue():
    published = "https://a.example/search?q=rag&page=2&utm_source=x"
    listed = Candidate("https://a.example/search?page=2&q=rag", "2026-01-01", published=published)
    key, queued, unlisted = work_candidate(work_item("docs:k", listed, unlisted=False) | {})
    assert (key, queued, unlisted) == ("docs:k", listed, False)
    assert Page(key, queued.url, queued).published == published
    # A page the source did not write (a known page, a moved record): its canonical URL.
    assert PAGE.published == PAGE.url
    assert work_item("docs:k", PAGE.candidate, unlisted=True)["record"] is None
