"""The documentation-site benchmark's own machinery (eval/bench_docsites.py): its oracle agrees
with the titles and outlines written by hand in the corpus, and its metric, run end to end on a
few corpus pages served on 127.0.0.1, gives ragsync the figures these pages call for and marks
a wrong title or a path under a non-heading as such. A broken oracle or metric would make the
benchmark's table meaningless."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from eval.bench_docsites import (
    LAYOUTS,
    Output,
    Site,
    Truth,
    bench,
    bench_site,
    heading_key,
    markdown,
    oracle,
    score,
)

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "docsites"
EXPECTED = {
    page["file"]: page
    for page in tomllib.loads((CORPUS / "expected.toml").read_text(encoding="utf-8"))["page"]
}
# One page per generator the benchmark's sites use, with the oracle layout of its site.
PAGES = {
    "mdbook/registry-authentication.html": "mdbook",
    "nodejs/string_decoder.html": "nodejs",
    "docbook-xsl/quick-start.html": "docbook",
}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_oracle_reads_the_hand_written_title_and_outline(page):
    truth = oracle((CORPUS / page).read_bytes(), LAYOUTS[PAGES[page]])

    assert truth is not None
    assert truth.title == EXPECTED[page]["title"]
    assert list(truth.headings) == [text for _, text in EXPECTED[page]["outline"]]


def test_headings_compare_without_markdown_marks_and_anchor_glyphs():
    assert heading_key("`cargo:token` ¶") == "cargo:token"
    assert heading_key("[Class: `StringDecoder`](#x)#") == "Class: StringDecoder"
    assert heading_key("2.7.1.\u00a0Tool-selection\n Option") == "2.7.1. Tool-selection Option"


def test_the_score_counts_wrong_titles_and_paths_under_non_headings():
    truths = {"u1": Truth("Intro", ("Intro", "Setup")), "u2": Truth("Other", ("Other",))}
    outputs = {
        "u1": Output(
            "Intro - The Book",  # the site suffix left on: wrong
            (("Intro",), ("Intro", "`Setup`"), (), ("# a comment in code",), ("Intro", "Nope")),
        )
    }  # u2 not returned

    shares = score(truths, outputs).shares()

    assert (shares["pages"], shares["returned"], shares["title_right"]) == (2, 1, 0.0)
    counts = shares["counts"]
    assert (counts["real_heading_path"], counts["no_heading_path"]) == (2, 1)
    assert counts["under_a_non_heading"] == 2
    assert (counts["headings"], counts["headings_kept"]) == (3, 2)
    assert shares["real_heading_path"] == 0.4
    assert shares["top_non_headings"] == [("# a comment in code", 1), ("Nope", 1)]


def test_ragsync_on_served_corpus_pages_gets_every_title_and_only_real_heading_paths(tmp_path):
    root = tmp_path / "site"
    for page in PAGES:
        (root / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CORPUS / page, root / page)

    result = bench(
        root, {page: LAYOUTS[name] for page, name in PAGES.items()}, tmp_path, ["ragsync"]
    )

    ragsync = result["systems"]["ragsync"]
    assert result["pages"] == ragsync["returned"] == 3, ragsync["examples"]
    assert ragsync["title_right"] == 1.0, ragsync["examples"]
    assert ragsync["chunks"] > 3
    assert ragsync["real_heading_path"] == 1.0, ragsync["examples"]
    assert ragsync["under_a_non_heading"] == 0.0
    # Every heading of the three outlines (9 + 5 + 7) is on some chunk's path.
    assert ragsync["counts"]["headings"] == ragsync["counts"]["headings_kept"] == 21


def test_a_site_not_installed_is_reported_as_skipped_not_left_out(tmp_path):
    absent = Site("absent", "mdbook", (str(tmp_path / "no-such-book"),))

    result = bench_site(absent, 10, tmp_path)

    assert result == {"skipped": f"not installed here (looked in {tmp_path / 'no-such-book'})"}
    report = {"command": "c", "cap": 10, "sites": {"absent": result}}
    assert "- absent: skipped, not installed here" in markdown(report)
