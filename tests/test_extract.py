"""Extraction: clean Markdown, structure kept, per-request noise ignored."""

from __future__ import annotations

from pathlib import Path

import lxml.html
import pytest

from ragsync.chunk import split_blocks
from ragsync.extract import (
    content_hash,
    extract,
    extract_response,
    meta_refresh,
    normalize_markdown,
)
from ragsync.htmlprep import normalize
from ragsync.testing import DevSite

BODY = """<h1>Key rotation</h1>
<p>This page explains how to rotate <b>API keys</b> safely,
with enough text to count as content.</p>
<h2>Steps</h2>
<ul><li>Back up the old key</li><li>Tell your team</li></ul>
<pre><code>acme-vault rotate --key old
  echo   done</code></pre>
<table><tr><th>Step</th><th>Time</th></tr><tr><td>Create</td><td>1 min</td></tr></table>
<h3>Verify</h3>
<p>Check the logs for errors after rotation completes and watch the dashboards.</p>"""


def rendered(noise: bool = True) -> str:
    site = DevSite({"/k": ("Key rotation", BODY)}, noise=noise)
    return site.render(site.pages["/k"])


def test_structure_is_kept():
    md = extract(rendered(), "http://x/k").markdown
    assert "# Key rotation" in md and "## Steps" in md and "### Verify" in md
    assert "- Back up the old key" in md
    assert "```\nacme-vault rotate --key old\n  echo   done\n```" in md
    assert "| Step | Time |" in md
    assert "**API keys**" in md


def test_per_request_noise_changes_nothing():
    pages = {rendered() for _ in range(5)}
    assert len(pages) == 5  # the HTML really differs every time
    results = {extract(html, "http://x/k") for html in pages}
    assert len({r.content_hash for r in results}) == 1
    md = next(iter(results)).markdown
    for noise in ("csrf", "Rendered at", "Related", "Changelog", "Example Inc"):
        assert noise not in md


def test_title_comes_from_the_page():
    assert extract(rendered(), "http://x/k").title.startswith("Key rotation")


def test_markdownify_fallback_for_pages_trafilatura_rejects(monkeypatch):
    import trafilatura

    monkeypatch.setattr(trafilatura, "extract", lambda *a, **k: None)
    html = (
        "<html><body><nav>Menu</nav><header>Top</header><main><h2>Tiny</h2>"
        "<ul><li>alpha</li></ul><p>Short.</p></main><footer>Foot</footer></body></html>"
    )
    result = extract(html, "http://x/tiny")
    assert result.extractor == "markdownify"
    assert result.markdown == "## Tiny\n\n- alpha\n\nShort.\n"


def test_short_page_keeps_its_heading_and_drops_the_menu():
    html = "<html><body><nav>Menu</nav><main><h2>Tiny</h2><p>Short.</p></main></body></html>"
    assert extract(html, "http://x/tiny").markdown == "## Tiny\n\nShort.\n"


def test_a_page_with_no_text_is_an_extract_error():
    import pytest

    from ragsync.errors import ExtractError

    with pytest.raises(ExtractError, match="http://x/empty"):
        extract("<html><body><script>var x;</script> </body></html>", "http://x/empty")


def test_normalisation():
    text = "Caf\u0065\u0301  au   lait  \n\n\n\nNext\t line   \n```\n  keep   this\n```\n"
    assert normalize_markdown(text) == "Café au lait\n\nNext line\n```\n  keep   this\n```\n"


NEWSLETTER = """<!doctype html><html><head><meta charset="utf-8">
<title>Newsletter | Acme Docs</title></head><body>
<header><nav><a href="/">Home</a> <a href="/guide/">Guide</a></nav></header>
<main><iframe src="https://forms.example.net/acme/newsletter" height="600"></iframe></main>
<footer>© Acme</footer></body></html>"""


def test_a_title_only_page_is_its_title():
    result = extract(NEWSLETTER, "http://x/newsletter")
    assert (result.title, result.markdown, result.extractor) == (
        "Newsletter",
        "# Newsletter\n",
        "title",
    )
    assert result.content_hash == content_hash("# Newsletter\n")


def test_extract_response_html_is_extract_of_the_decoded_body():
    body = rendered(noise=False).encode("windows-1252")
    via_response = extract_response(body, "text/html; charset=windows-1252", "http://x/k")
    assert via_response == extract(rendered(noise=False), "http://x/k")


def test_extract_response_text_is_normalised_and_titled_by_its_first_line():
    body = "# Release notes  \r\n\r\n\r\nCafé   au lait\n".encode("latin-1")
    result = extract_response(body, "text/markdown; charset=ISO-8859-1", "http://x/notes.md")
    assert result == extract_response(body, "Text/Markdown; charset=latin-1", "http://x/notes.md")
    assert (result.title, result.markdown, result.extractor) == (
        "Release notes",
        "# Release notes\n\nCafé au lait\n",
        "text",
    )


# Headings and titles on documentation sites (issue #18); whole real pages are in
# tests/test_docsites.py, these are the single rules on markup copied from real generators.

PROSE = (
    "<p>" + "A paragraph that is long enough to count as the content of this page. " * 4 + "</p>"
)


def test_node_src_link_and_anchor_stay_out_of_the_heading():
    # Node's API docs (assert.html): the h3 carries a [src] link, a '#' anchor and an empty
    # legacy anchor.
    html = (
        "<html><head><title>Assert | Node.js v20.20.2 Documentation</title></head><body>"
        '<div id="column1"><header><h1>Node.js v20.20.2 documentation</h1></header>'
        '<div role="main" id="apicontent"><section><h2>Assert<span><a class="mark" '
        'href="#assert" id="assert">#</a></span></h2>' + PROSE + "</section><section>"
        '<h3>Class: assert.AssertionError<a class="srclink" href="https://example.org/l#L143">'
        '[src]</a><span><a class="mark" href="#class-assertassertionerror" '
        'id="class-assertassertionerror">#</a></span><a aria-hidden="true" class="legacy" '
        'id="assert_class_assert_assertionerror"></a></h3>' + PROSE + "</section></div></div>"
        "</body></html>"
    )
    result = extract(html, "http://x/assert.html")
    assert result.title == "Assert"
    assert "## Assert\n" in result.markdown
    assert "### Class: assert.AssertionError\n" in result.markdown
    assert "[src]" not in result.markdown and "Node.js v20" not in result.markdown


def test_mkdocs_material_headerlink_and_edit_button_are_chrome():
    html = (
        "<html><head><title>Extending OpenAPI - FastAPI</title></head><body>"
        '<header class="md-header"><h1>FastAPI</h1></header><main><div class="md-content">'
        '<article class="md-content__inner md-typeset"><a href="https://example.org/edit" '
        'title="Edit this page" class="md-content__button md-icon">Edit this page</a>'
        '<h1 id="extending-openapi">Extending OpenAPI<a class="headerlink" '
        'href="#extending-openapi" title="Permanent link">¶</a></h1>' + PROSE + '<h2 id="o">'
        'Overview<a class="headerlink" href="#o" title="Permanent link">¶</a></h2>'
        + PROSE
        + '<div class="highlight"><pre><span></span><code class="language-python"># a comment\n'
        "app = FastAPI()\n</code></pre></div></article></div></main></body></html>"
    )
    result = extract(html, "http://x/openapi/")
    assert result.title == "Extending OpenAPI"
    assert result.markdown.startswith("# Extending OpenAPI\n")
    assert "## Overview\n" in result.markdown
    assert "```python\n# a comment\napp = FastAPI()\n```" in result.markdown
    assert "¶" not in result.markdown and "Edit this page" not in result.markdown


@pytest.mark.parametrize(
    "chrome",
    [
        '<div role="dialog"><h1>Keyboard shortcuts</h1></div>',
        "<div hidden><h1>Hidden</h1></div>",
        '<div style="display: none"><h1>Not shown</h1></div>',
        '<div aria-hidden="true"><h1>Not read</h1></div>',
        "<nav><h1>Menu</h1></nav>",
    ],
)
def test_title_is_never_a_hidden_or_navigation_heading(chrome):
    html = (
        "<html><head><title>Install guide | Example Docs</title></head><body>"
        + chrome
        + "<article><h2>Before you start</h2>"
        + PROSE
        + "</article></body></html>"
    )
    assert extract(html, "http://x/i").title == "Install guide"


def test_title_from_og_title_when_the_page_has_no_other():
    html = (
        '<html><head><meta property="og:title" content="Release notes"></head><body>'
        "<article>" + PROSE + "</article></body></html>"
    )
    assert extract(html, "http://x/r").title == "Release notes"


def test_a_main_h1_beats_the_site_header():
    html = (
        "<html><head><title>Site</title></head><body><header><h1>Example Site</h1></header>"
        "<main><h1>Key rotation</h1>" + PROSE + "</main></body></html>"
    )
    assert extract(html, "http://x/k").title == "Key rotation"


def test_headings_alone_from_trafilatura_fall_back_to_markdownify():
    # trafilatura keeps the heading of a page of links and drops the links (a TOC page)
    html = (
        "<html><head><title>Contents</title></head><body><h1>GCC 12 Release Series<br>"
        "Changes</h1><h2>Contents</h2><ul><li><a href='a.html'>1. Reference</a></li>"
        "<li><a href='b.html'>2. Objects</a></li></ul></body></html>"
    )
    result = extract(html, "http://x/contents.html")
    # <title> names the page's h2, but the h1 is no banner (not the site's name, not in a
    # layout table): the h1 is the title.
    assert result.title == "GCC 12 Release Series Changes"
    assert "1. Reference" in result.markdown and "2. Objects" in result.markdown


def test_meta_refresh_names_the_target_of_a_real_mdbook_stub():
    stub = Path(__file__).parent / "fixtures/docsites/mdbook/redirect-stub-build-cache.html"
    html = stub.read_bytes()
    url = "http://docs.test/cargo/guide/build-cache.html"
    assert meta_refresh(html, url) == "http://docs.test/cargo/reference/build-cache.html"
    page = (stub.parent / "source-replacement.html").read_bytes()
    assert meta_refresh(page, "http://docs.test/cargo/reference/source-replacement.html") is None


@pytest.mark.parametrize(
    ("content", "target"),
    [
        ("0; url=/b", "http://x/b"),
        ("0;URL='b?q=1#f'", "http://x/b?q=1#f"),
        ('0, url="https://y.test/"', "https://y.test/"),
        ("0.0;url=b", "http://x/b"),
        ('3, url="https://y.test/"', None),  # delayed: a page of its own
        ("1.2.3; url=b", None),
        ("0", None),
        ("0; url=http://x/a", None),
        ("", None),
    ],
)
def test_meta_refresh_parses_the_declarative_refresh(content, target):
    html = f"<html><head><meta http-equiv='refresh' content='{content}'></head></html>"
    if "'" in content:
        html = f'<html><head><meta http-equiv="Refresh" content="{content}"></head></html>'
    assert meta_refresh(html.encode(), "http://x/a") == target


def test_title_drops_the_og_site_name_wherever_it_stands():
    html = (
        '<html><head><title>Acme Docs | Install the agent</title><meta property="og:site_name" '
        'content="Acme Docs"></head><body><article><h2>Before you start</h2>'
        + PROSE
        + "</article></body></html>"
    )
    assert extract(html, "http://x/install").title == "Install the agent"


EXPAT = Path(__file__).parent / "fixtures" / "docsites" / "handwritten" / "expat-reference.html"
FIXTURES = Path(__file__).parent / "fixtures" / "docsites"


def test_a_hand_written_reference_keeps_its_headings_code_and_descriptions():
    """Expat's reference (one large hand-written page, read by trafilatura) wraps long
    ``<code>`` names across lines, and writes each function's description as text directly in
    a ``<div>`` beside a list. The first made a fence in mid-sentence, after which every fence
    and heading of the page read inside out (157 of 265 chunks under one wrong heading); the
    second lost 31 of 32 descriptions' opening sentences."""
    html = EXPAT.read_text(encoding="utf-8")
    markdown = extract(html, "http://docs.test/expat/reference.html").markdown
    lines = markdown.split("\n")
    assert not [line for line in lines if "```" in line and not line.lstrip().startswith("```")]
    assert "the functions `XML_SetBillionLaughsAttackProtectionMaximumAmplification` and" in (
        markdown
    )
    headings = [text for level, text in split_blocks(markdown) if level]  # outside code
    html_headings = lxml.html.fromstring(html.encode()).xpath("//h1|//h2|//h3|//h4")
    assert len(headings) == len(html_headings) == 94  # every heading, none made from code
    assert "Construct a new parser. If encoding is non-null, it specifies a" in markdown
    assert "Free memory used by the parser. Your application is responsible" in markdown
    assert "    void *buff = XML_GetBuffer(p, BUFF_SIZE);" in markdown  # indentation kept
    assert "\\#define" not in markdown and "#define BUFF_SIZE 10240" in markdown


def test_a_page_without_a_content_frame_keeps_its_lists_and_headings():
    """A page without ``<article>``, ``<main>`` or a content ``div`` (LaTeX2HTML, hand-written
    pages) went to trafilatura's recovery of loose paragraphs, code and tables: httplib2's
    reference lost its heading and three of its eight members (``follow_redirects``,
    ``follow_all_redirects``, ``ignore_etag``: of an entry only the text from its first
    ``<code>`` on was kept, or nothing)."""
    html = (FIXTURES / "latex2html" / "httplib2-http-objects.html").read_text(encoding="utf-8")
    markdown = extract(html, "http://docs.test/ref/http-objects.html").markdown
    plain = markdown.replace("\\", "").replace("`", "").replace("*", "")
    members = lxml.html.fromstring(html.encode()).xpath("//dt//tt[@class]")
    assert len(members) == 8
    for member in members:
        definition = next(member.iterancestors("dt")).getnext()  # its <dd>
        opening = " ".join(definition.text_content().split()[:6])
        assert member.text in plain and opening in plain, (member.text, opening)
    assert [text for level, text in split_blocks(markdown) if level] == ["1.1.1 Http Objects"]


def test_a_fence_opened_after_a_list_items_text_goes_on_its_own_line():
    """trafilatura writes a ``<pre>`` inside a list item as "- An example would be ```": the
    fence's closing line then read as an opener, and the rest of the page as code (GCC 12's
    release notes lost 25 of their 30 headings after the Ada section's example, and the
    example's indentation). A fence in a block quote or list item is a fence already."""
    markdown = normalize_markdown(
        "- An example would be ```\ntype Sign is (Neg, Pos);\n  (case S is\n```\n"
        "## After\n\nUse `a` here ```\nx\n```\n> ```\n> code\n> ```\n- ```\ny\n```\n"
        "Inline ```a``` stays\n"
    )
    assert markdown.startswith("- An example would be\n```\ntype Sign is (Neg, Pos);\n  (case")
    assert "Use `a` here\n```\nx\n```" in markdown
    assert "> ```\n> code\n> ```\n- ```\ny\n```\nInline ```a``` stays" in markdown
    assert [text for level, text in split_blocks(markdown) if level] == ["After"]

    html = (FIXTURES / "handwritten" / "gcc-12-news.html").read_text(encoding="utf-8")
    page = extract(html, "http://docs.test/gcc-12/NEWS.html").markdown
    html_headings = lxml.html.fromstring(html.encode()).xpath("//h1|//h2|//h3|//h4")
    assert len([text for level, text in split_blocks(page) if level]) == len(html_headings) == 30
    assert "An example would be\n```\ntype Sign is (Neg, Zero, Pos);\n" in page
    assert "\n  (case (S1, S2) is\n     when (Neg, Neg) | (Pos, Pos) => Pos," in page


def test_a_page_laid_out_in_tables_keeps_its_headings_and_lists():
    """trafilatura wrote a layout table's cell as one table row: libxslt's "Library
    internals" came out as 6 lines, its 18 section headings and its lists run together in one
    cell. A table of one column, or one holding a heading or a table, is read as blocks.
    Where the blocks keep less than
    half the words (a page of symbol lists, all links, that trafilatura then judged
    boilerplate), the page is read with its tables."""
    html = (FIXTURES / "libxslt" / "internals.html").read_text(encoding="utf-8")
    markdown = extract(html, "http://docs.test/internals.html").markdown
    tree = lxml.html.fromstring(html.encode())
    sections = [" ".join(h.text_content().split()) for h in tree.xpath("//h3")]
    headings = [text for level, text in split_blocks(markdown) if level]
    assert len(sections) == 18 and set(sections) <= set(headings)
    assert "\n- parsing files\n- building the in-memory DOM structure" in markdown
    assert "Main Menu" not in markdown  # the menu's boxes: trafilatura prunes them as blocks

    html = (FIXTURES / "libxslt" / "APIfiles.html").read_text(encoding="utf-8")
    symbols = extract(html, "http://docs.test/APIfiles.html").markdown
    assert "Module attributes: xsltApplyAttributeSet xsltFreeAttributeSetsHashes" in symbols


def test_a_page_of_layout_tables_is_not_flattened_into_one_cell():
    """libxslt's API pages nest a table of each function's parameters in layout tables:
    framed in one ``<main>`` with the layout tables kept, they came out as one table cell
    holding every function. The layout tables are read as blocks, and each parameter table,
    of two columns without headings, stays a table: a row per parameter."""
    html = (FIXTURES / "libxslt" / "libxslt-extensions.html").read_text(encoding="utf-8")
    markdown = extract(html, "http://docs.test/html/libxslt-extensions.html").markdown
    assert "| *`URI`*: | the namespace prefix (possibly NULL) |" in markdown
    assert sum(1 for line in markdown.split("\n") if line.startswith("| *`")) > 80


@pytest.mark.parametrize(
    "html",
    [
        "<div><p><code>$ ./configure<br>\n$ make<br>\n$ make install</code></p></div>",
        '<div class="highlight"><code>def f():\n    return 1</code></div>',
    ],
    ids=["lines broken with br", "a code block without pre"],
)
def test_code_laid_out_in_lines_keeps_them(html):
    """Only inline code that the source wraps goes on one line (a review found both of
    these joined into one line)."""
    tree = lxml.html.fromstring(html)
    normalize(tree)
    assert "\n" in tree.xpath("//code")[0].text_content()


def test_the_source_line_breaks_of_prose_are_spaces():
    """HTML shows a hard-wrapped paragraph as one, but the Markdown kept its lines: a wrapped
    line that began with ``-`` or ``#`` read as a list item or a heading, and one under a list
    item ended the list, so the chunker could cut mid-sentence (the Cargo Book's option lists:
    one of its pages had 3 such false block ends)."""
    html = (
        "<html><head><title>Locking</title></head><body><main><h1>Locking</h1>"
        "<p>Cargo exits with an error when the lock file is\n- as it says -\nmissing or\n"
        "# stale.</p><ul><li><code>json</code>: Emit JSON messages. See\nthe reference\n"
        "for more details.</li><li>second</li></ul>"
        "<pre>keep\n  these lines</pre><p>one<br>two</p></main></body></html>"
    )
    markdown = extract(html, "http://docs.test/locking.html").markdown
    assert "when the lock file is - as it says - missing or # stale." in markdown
    assert "- `json`: Emit JSON messages. See the reference for more details.\n- second" in (
        markdown
    )
    assert "keep\n  these lines" in markdown
    assert "one two" not in markdown and "two" in markdown  # a <br> is the page's own break
    assert [text for level, text in split_blocks(markdown) if level] == ["Locking"]


@pytest.mark.parametrize(
    "page", ["mdbook/source-replacement.html", "handwritten/expat-reference.html"]
)
def test_real_pages_paragraphs_are_single_lines(page):
    """Both sources wrap their paragraphs at 70-80 columns (17 of source-replacement's 23
    prose blocks and 110 of Expat's came out as several lines)."""
    html = (FIXTURES / page).read_text(encoding="utf-8")
    markdown = extract(html, f"http://docs.test/{page}").markdown
    prose = [
        text
        for level, text in split_blocks(markdown)
        if not level
        and not text.lstrip().startswith(("```", "-", "*", "|", ">"))
        and not text[:1].isdigit()
    ]
    assert len(prose) > 10
    assert [text for text in prose if "\n" in text] == []


def test_a_definition_list_keeps_each_term_with_its_definition():
    """trafilatura wrote ``<dt>`` and ``<dd>`` as sibling bullets (Expat's "- `XML_Parse`"
    then "- Pass a buffer full of document to the parser") and put a definition's code fence
    in mid-line."""
    expat = extract(EXPAT.read_text(encoding="utf-8"), "http://docs.test/expat.html").markdown
    assert "- `XML_ParserCreate`: Create a new parser object.\n" in expat
    assert "- `XML_Parse`: Pass a buffer full of document to the parser\n" in expat
    html = (
        "<html><head><title>Glossary</title></head><body><main><h1>Glossary</h1>"
        "<p>The terms this manual uses, each with what it means here.</p>"
        "<dl><dt>crate</dt><dt>package</dt><dd>A unit of <em>compilation</em>.</dd>"
        "<dt>edition</dt><dd>A language era.</dd><dd>Chosen per crate.</dd></dl>"
        "<dl><dt>block</dt><dd>Loose text. <p>A paragraph.</p><pre>code\n here</pre></dd></dl>"
        "<table><tr><td>name</td><td><dl><dt>cell</dt><dd>kept as it was</dd></dl></td></tr>"
        "<tr><td>other</td><td>plain</td></tr></table>"
        "</main></body></html>"
    )
    markdown = extract(html, "http://docs.test/glossary.html").markdown
    assert "- crate, package: A unit of *compilation*.\n" in markdown
    assert "- edition: A language era. Chosen per crate.\n" in markdown
    assert "\nblock\n\nLoose text.\n\nA paragraph.\n\n```\ncode\n here\n```\n" in markdown
    assert "cell: kept" not in markdown  # a data table's cell's list is left to trafilatura
