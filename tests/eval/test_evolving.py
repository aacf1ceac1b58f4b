"""The benchmark's own yardsticks: the evolving site's ground truth and the index checker
(eval/evolving.py). A checker that cannot see a stale or missing page would make every
"exact" figure in the README meaningless."""

from __future__ import annotations

import httpx
import pytest

from eval.evolving import EvolvingSite, check_index, sentences_in


@pytest.fixture
def evolving():
    site = EvolvingSite(20, seed=3)
    base = site.site.start()
    yield site, base
    site.site.stop()


def index_of(site: EvolvingSite, base: str) -> list[tuple[str, str]]:
    """A perfect index: one point per section, its text as a splitter would leave it."""
    points = []
    for path, page in site.live.items():
        points.append((base + path, f"# {page.title}\n\n{' '.join(page.intro)}"))
        for section in page.sections:
            body = "\n\n".join(" ".join(p) for p in section.paragraphs)
            items = "\n".join(f"- {item}" for item in section.items)
            points.append((base + path, f"{page.title} > {section.heading}\n\n{body}\n{items}"))
    return points


def test_a_perfect_index_is_exact_and_each_defect_is_counted(evolving):
    site, base = evolving
    truth, known = site.truth(base), site.gen.sentences
    points = index_of(site, base)
    assert check_index(points, truth, known) == {
        "missing_pages": 0,
        "stale_pages": 0,
        "duplicate_chunks": 0,
        "points": len(points),
    }
    site.edit_paragraphs(0.1)  # two pages
    site.remove_pages(0.1)  # two pages
    after = site.truth(base)
    edited = {url for url in after if after[url] != truth[url]}
    removed = set(truth) - set(after)
    assert edited and len(removed) == 2
    found = check_index(points, after, known)
    assert found["stale_pages"] == len(edited | removed)  # old text, or a URL that is gone
    assert found["missing_pages"] == len(edited)  # their new text is in no point
    fresh = index_of(site, base)
    assert check_index(fresh, after, known)["stale_pages"] == 0
    assert check_index(fresh + fresh[:3], after, known)["duplicate_chunks"] == 3
    assert check_index(fresh[1:], after, known)["missing_pages"] == 1


def test_steps_change_what_the_site_serves_and_the_truth_with_it(evolving):
    site, base = evolving
    site.rename_pages(0.05)
    site.remove_pages(0.1)
    site.add_pages(0.1)
    truth = site.truth(base)
    with httpx.Client() as client:
        listed = client.get(base + "/sitemap.xml").text
        for url in truth:
            assert f"<loc>{url}</loc>" in listed
            page = client.get(url)
            assert page.status_code == 200 and page.headers["etag"]
            assert (
                client.get(url, headers={"If-None-Match": page.headers["etag"]}).status_code == 304
            )
        gone = [p for p, page in site.site.pages.items() if page.status != 200]
        assert len(gone) == 3 and all(base + p not in truth for p in gone)
        statuses = sorted(client.get(base + p).status_code for p in gone)
        assert statuses == [301, 404, 410]
    question, answer = site.questions(base)[0]
    assert answer in truth and question.endswith("?")


def test_sentences_in_reads_markdown_as_splitters_leave_it():
    text = "Title > Timeouts\n\n## Timeouts\n- First one. Second one.\n* Third."
    assert sentences_in(text) == [
        "Title > Timeouts",
        "Timeouts",
        "First one.",
        "Second one.",
        "Third.",
    ]
