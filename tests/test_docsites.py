"""Extraction of real documentation-site pages: title, heading outline, no chrome, no headings
made from code.

The corpus (``tests/fixtures/docsites``) is real pages from eight generators, saved as files;
``expected.toml`` holds each page's title and heading outline, written by hand from its HTML.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import lxml.html
import pytest

from ragsync.chunk import split_blocks
from ragsync.extract import extract

CORPUS = Path(__file__).parent / "fixtures" / "docsites"
PAGES = tomllib.loads((CORPUS / "expected.toml").read_text(encoding="utf-8"))["page"]
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_EXTRACTED: dict[str, tuple[str, str]] = {}


def extracted(page: dict) -> tuple[str, str]:
    """(title, Markdown) of a corpus page, extracted once per test session."""
    if page["file"] not in _EXTRACTED:
        html = (CORPUS / page["file"]).read_text(encoding="utf-8")
        result = extract(html, f"http://docs.test/{page['file']}")
        _EXTRACTED[page["file"]] = (result.title, result.markdown)
    return _EXTRACTED[page["file"]]


def outline(markdown: str) -> list[list[object]]:
    """[level, text] of every ATX heading outside fenced code."""
    found: list[list[object]] = []
    in_code = False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
        elif not in_code and (match := _HEADING.match(line)):
            found.append([len(match.group(1)), match.group(2)])
    return found


def code_comment_lines(html: str) -> set[str]:
    """Lines of the page's ``<pre>`` blocks that would read as Markdown headings."""
    tree = lxml.html.fromstring(re.sub(r"^\s*<\?xml[^>]*\?>", "", html))
    return {
        line.strip()
        for pre in tree.iter("pre")
        for line in pre.text_content().split("\n")
        if re.match(r"\s*#{1,6}\s", line)
    }


def ids(page: dict) -> str:
    return str(page["file"])


@pytest.mark.parametrize("page", PAGES, ids=ids)
def test_title_is_the_pages_own(page):
    assert extracted(page)[0] == page["title"]


@pytest.mark.parametrize("page", PAGES, ids=ids)
def test_heading_outline_survives(page):
    assert outline(extracted(page)[1]) == page["outline"]


@pytest.mark.parametrize("page", PAGES, ids=ids)
def test_no_chrome(page):
    html = (CORPUS / page["file"]).read_text(encoding="utf-8")
    text = " ".join(lxml.html.fromstring(html.encode("utf-8")).text_content().split())
    markdown = extracted(page)[1]
    for chrome in page["chrome"]:
        assert chrome in text, f"{chrome!r} is not on the page: the check would prove nothing"
        assert chrome not in markdown, f"{chrome!r} reached the Markdown"


@pytest.mark.parametrize("page", PAGES, ids=ids)
def test_no_heading_comes_from_code(page):
    html = (CORPUS / page["file"]).read_text(encoding="utf-8")
    comments = code_comment_lines(html)
    markdown = extracted(page)[1]
    headings = {f"{'#' * level} {text}" for level, text in outline(markdown)}
    assert not headings & comments
    # and the chunker, which splits at headings, sees none of them either
    chunker_headings = {text for level, text in split_blocks(markdown) if level}
    assert not chunker_headings & {comment.lstrip("# ").rstrip("# ") for comment in comments}


def test_the_corpus_has_code_comments_and_six_generators():
    """The code-heading check is not vacuous, and the corpus is as wide as promised."""
    pages_with_comments = [
        page["file"]
        for page in PAGES
        if code_comment_lines((CORPUS / page["file"]).read_text(encoding="utf-8"))
    ]
    assert len(pages_with_comments) >= 3
    assert len({page["file"].split("/")[0] for page in PAGES}) >= 6


def test_code_blocks_keep_their_language():
    markdown = extracted(next(p for p in PAGES if p["file"].endswith("source-replacement.html")))
    assert "```toml\n# The `source` table is where all keys" in markdown[1]


def test_paired_node_examples_are_two_code_blocks():
    """Node's ES-module and CommonJS flavours of one example share a <pre>."""
    page = next(p for p in PAGES if p["file"] == "nodejs/string_decoder.html")
    markdown = extracted(page)[1]
    assert "```js\nimport { StringDecoder } from 'node:string_decoder';\n```" in markdown
    assert "```js\nconst { StringDecoder } = require('node:string_decoder');\n```" in markdown
    assert "€const" not in markdown


def test_node_history_and_added_in_are_kept():
    page = next(p for p in PAGES if p["file"] == "nodejs/string_decoder.html")
    markdown = extracted(page)[1]
    assert "Added in: v0.9.3" in markdown
    assert "| v8.0.0 | Each invalid character is now replaced by a single" in markdown
