"""Turn an HTML page into clean, normalised Markdown and the hash that says whether it changed.

A page of a known documentation generator (mdBook, Sphinx, rustdoc, DocBook, …: see
``ragsync.docsites``) is its main content element with the generator's chrome removed, headings
and fenced code (with its language) kept. Any other page goes to trafilatura, which finds the
main content (menus, sidebars, footers, ads and forms dropped); markdownify is the fallback for
pages trafilatura rejects, given the main content element only; a page with no text but a title
(an embedded form, a video) is its title. The title is the page's own (main ``<h1>``, else
``<title>`` without the site name, else ``og:title``), never a hidden or navigation element.
The hash is taken over the normalised Markdown, so per-request noise in the HTML (CSRF tokens,
timestamps, ad ids, random sidebars) changes nothing.

These functions are single-threaded: trafilatura and lxml must not run on several threads of
one process at once. The engine calls them through ``ragsync.extractpool``.
"""

from __future__ import annotations

import copy
import hashlib
import re
import unicodedata
from collections.abc import Iterator
from html import unescape as html_unescape
from typing import Any
from urllib.parse import urljoin

from ragsync import docsites, encoding, htmlprep
from ragsync.errors import ExtractError
from ragsync.models import Extracted, media_type
from ragsync.policy import TEXT_TYPES

_FENCE = re.compile(r"^\s*(```|~~~)")
# CommonMark: an ATX heading is indented by 3 spaces at most, its #s followed by a space or tab.
_ATX = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_SPACES = re.compile(r"[ \t\u00a0]+")
# A fence opened at the end of a line of text: trafilatura writes a <pre> inside a list item so
# ("- An example would be ```"). The fence's closing line then read as an opener, and the rest
# of the page as code (GCC 12's release notes: 25 of 30 headings lost). See _fence_after_text.
_FENCE_AFTER_TEXT = re.compile(r"^(.*\S)[ \t]*(```|~~~)[ \t]*$")
_CONTAINER_MARKS = re.compile(r"^(?:[ \t]*(?:>|[-*+]|\d+[.)])(?=[ \t]|$))+")
_BLANKS = re.compile(r"\n{3,}")
_WORD = re.compile(r"\w+")
_NOISE_TAGS = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "iframe")


def content_hash(markdown: str) -> str:
    """sha256 of normalised Markdown (hex)."""
    return hashlib.sha256(markdown.encode("utf-8")).hexdigest()


def normalize_markdown(markdown: str) -> str:
    """Unicode NFC, no trailing spaces, runs of spaces collapsed outside code, ≤1 blank line.

    Fenced code keeps its inner spacing: indentation is meaning there.
    """
    text = unicodedata.normalize("NFC", markdown).replace("\r\n", "\n").replace("\r", "\n")
    lines: list[str] = []
    in_code = False
    for line in text.split("\n"):
        opener = None if in_code else _fence_after_text(line)
        if opener:  # "An example would be ```": the converter's fence after a list item's text
            line, fence = opener.group(1), opener.group(2)
            lines.append(_SPACES.sub(" ", line.strip()))
            lines.append(fence)
            in_code = True
            continue
        if _FENCE.match(line):
            in_code = not in_code
            lines.append(line.strip())
            continue
        if in_code:
            lines.append(line.rstrip())
            continue
        indent = len(line) - len(line.lstrip(" "))
        body = _SPACES.sub(" ", line.strip())
        if body.startswith("#") and not _ATX.match(line):
            # Not a heading where it stood ("#\xa0comment", "\xa0# comment" in text laid out
            # with no-break spaces): collapsing its spaces must not make it one.
            body = "\\" + body
        # Keep list nesting (leading spaces) but nothing else.
        lines.append((" " * indent + body) if body and indent and _is_list_item(body) else body)
    return _BLANKS.sub("\n\n", "\n".join(lines)).strip() + "\n"


def _fence_after_text(line: str) -> re.Match[str] | None:
    """The match of a fence opened at the end of a line of text (groups: the text, the
    fence), when the text's own inline code is closed (``a `b` c ```"``, not ``a ```b```"``)
    and the line is not a fence itself."""
    match = _FENCE_AFTER_TEXT.match(line)
    if match is None or _FENCE.match(line):
        return None
    text = match.group(1)
    if "```" in text or "~~~" in text or text.count("`") % 2:
        return None
    if not _CONTAINER_MARKS.sub("", text).strip():
        return None  # "> ```", "- ```": a fence in a block quote or list item, not after text
    return match


def _is_list_item(line: str) -> bool:
    return bool(re.match(r"([-*+]|\d+[.)])\s", line))


def decode_body(body: bytes, content_type: str, url: str) -> str:
    """The text of ``body``, its encoding found as browsers find it (``ragsync.encoding``): a
    byte-order mark, the ``Content-Type`` charset, a page's ``<meta charset>``, else UTF-8,
    a detected encoding or windows-1252. A declaration that lies is survivable (a
    windows-1252 page served as UTF-8); bytes that are no text in any encoding (NUL bytes)
    and the Encoding Standard's replacement encoding (ISO-2022-KR, HZ…, which browsers
    never decode) are not.

    >>> decode_body("\\ufeffZürich".encode(), "text/plain; charset=iso-8859-1", "http://x/z")
    'Zürich'

    Raises:
        ExtractError: the body is not text.
    """
    if media_type(content_type) in TEXT_TYPES:
        decoded = encoding.decode_text(body, content_type)
    else:
        decoded = encoding.decode_html(body, content_type)
    if decoded.encoding == "replacement" or "\0" in decoded.text[:4096]:
        raise ExtractError(
            url, f"body is not text (charset: {decoded.encoding}, from {decoded.source})"
        )
    return decoded.text


_LINK_TAG = re.compile(r"<link\b[^>]*>", re.I)
_META_TAG = re.compile(r"<meta\b[^>]*>", re.I)
_ATTR = re.compile(r"""([a-zA-Z-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))""")
_LINK_HEADER = re.compile(r"""<([^>]*)>\s*;[^,]*?\brel\s*=\s*"?canonical"?""", re.I)
# HTML Living Standard, "shared declarative refresh steps": a delay, then ; or , and an
# optional ``url=``, the URL optionally quoted.
_REFRESH = re.compile(
    r"""^\s*(?P<delay>[0-9.]*)\s*[;,]?\s*(?:url\s*=\s*)?(?P<q>["']?)(?P<url>.*?)(?P=q)\s*$""",
    re.I | re.S,
)


def _head_tags(
    pattern: re.Pattern[str], body: bytes, content_type: str
) -> Iterator[dict[str, str]]:
    """The attributes (name lowercased, value unescaped) of each tag ``pattern`` finds in the
    first 64 KiB of ``body``, read in the page's encoding: where ``<head>`` declarations live."""
    head = encoding.decode_html(body[:65536], content_type, partial=True).text
    for tag in pattern.findall(head):
        yield {
            m.group(1).lower(): html_unescape(m.group(2) or m.group(3) or m.group(4) or "").strip()
            for m in _ATTR.finditer(tag)
        }


def canonical_link(body: bytes, headers: dict[str, str], base_url: str) -> str | None:
    """The page's declared canonical URL: ``Link: <…>; rel="canonical"`` or
    ``<link rel="canonical" href="…">`` in the first 64 KiB, resolved against ``base_url``."""
    match = _LINK_HEADER.search(headers.get("link", ""))
    if match:
        return urljoin(base_url, match.group(1).strip())
    for attrs in _head_tags(_LINK_TAG, body, headers.get("content-type", "")):
        if attrs.get("rel", "").lower().split() == ["canonical"] and attrs.get("href"):
            return urljoin(base_url, attrs["href"])
    return None


def meta_refresh(body: bytes, base_url: str, *, content_type: str = "") -> str | None:
    """Where an *instant* ``<meta http-equiv="refresh">`` (delay 0) in the first 64 KiB of
    ``body`` sends the reader (resolved against ``base_url``), or None: no such tag, a refresh
    without a URL (a reload), one back to ``base_url`` itself, or a delayed one (a page of its
    own that moves on after a while, as search engines read it: content, not a redirect).
    ``content_type`` (the response's) takes part in finding the page's encoding.

    mdBook, Sphinx's redirect extensions and many static sites publish moved pages as such
    stubs; their text is "Redirecting to …", never the target's content.

    Example::

        >>> meta_refresh(b'<meta http-equiv="refresh" content="0; URL=../reference/a.html">',
        ...              "http://docs.test/guide/a.html")
        'http://docs.test/reference/a.html'
        >>> meta_refresh(b"<meta content='0, url=/new' http-equiv=Refresh>", "http://x/old")
        'http://x/new'
        >>> meta_refresh(b"<meta http-equiv=refresh content='5; url=/new'>", "http://x/") is None
        True
        >>> meta_refresh(b'<meta http-equiv="refresh" content="0">', "http://x/live") is None
        True
        >>> meta_refresh(b'<meta name="description" content="0; url=/x">', "http://x/") is None
        True
    """
    for attrs in _head_tags(_META_TAG, body, content_type):
        if attrs.get("http-equiv", "").lower() != "refresh":
            continue
        match = _REFRESH.match(attrs.get("content", ""))
        if match is None or not match.group("url").strip():
            return None
        try:
            instant = float(match.group("delay") or "0") == 0
        except ValueError:  # "1.2.3": not a delay a browser reads
            return None
        resolved = urljoin(base_url, match.group("url").strip())
        return resolved if instant and resolved != base_url else None
    return None


# How ragsync calls trafilatura (the side-by-side benchmark gives its peers the same settings).
TRAFILATURA_OPTIONS: dict[str, Any] = {
    "output_format": "markdown",
    "include_formatting": True,
    "include_comments": False,
    "include_tables": True,
    "include_links": False,
    "include_images": False,
    "deduplicate": False,
    # Precision mode keeps navigation text out of short pages, where the default mode falls
    # back to a baseline that flattens headings and keeps menus.
    "favor_precision": True,
}


def line_title(markdown: str) -> str:
    """The title of a text without markup of its own: its first line, ``#`` marks dropped."""
    return markdown.split("\n", 1)[0].lstrip("# ").strip()


def extract_response(body: bytes, content_type: str, url: str) -> Extracted:
    """What ragsync indexes for a fetched body.

    Args:
        body: the response body as fetched.
        content_type: the ``Content-Type`` header value, parameters included (its charset
            decides the decoding).
        url: the page's final URL, named in errors.

    Returns:
        For ``text/plain`` and Markdown: the normalised text, titled by its first line
        (extractor ``"text"``). For anything else: :func:`extract` of the decoded HTML.

    Raises:
        ExtractError: the body is not text, or the page has neither text nor a title.

    Example::

        >>> extract_response(b"# Hello\\n\\nWorld", "text/markdown", "http://x/h").title
        'Hello'
    """
    text = decode_body(body, content_type, url)
    if media_type(content_type) in TEXT_TYPES:
        markdown = normalize_markdown(text)
        return Extracted(line_title(markdown) or url, markdown, content_hash(markdown), "text")
    return extract(text, url)


def extract(html: str, url: str) -> Extracted:
    """Clean Markdown of ``html`` (the page at ``url``).

    A page of a known documentation generator is converted from its main content element
    (extractor ``"docs:<generator>"``); any other page by trafilatura (``"trafilatura"``), else
    markdownify of its main content element (``"markdownify"``).

    A page with no text but a title (a newsletter form in an iframe, an embedded video) is
    indexed as ``# <title>`` (extractor ``"title"``), as LangChain's and LlamaIndex's loaders
    index it: the page exists and its title is what a search for it would match.

    Raises:
        ExtractError: the page has neither text (trafilatura, then markdownify) nor a title.
    """
    import trafilatura  # deferred: a run of 304s never parses HTML

    page = docsites.read(html)
    title = page.title if page else ""
    markdown: str | None = None
    if page and page.markdown.strip():
        # A known documentation generator: its main content element, chrome removed, is the
        # page; trafilatura drops link-only and title-page headings there (README "Extraction").
        markdown, extractor = page.markdown, f"docs:{page.generator}"
    else:
        try:
            # One parse per page: trafilatura reads the tree docsites.read parsed and cleaned
            # (it copies it first), and the title is the one read there; its metadata pass
            # (author, date, tags, site name: nothing ragsync uses) is never run.
            if page is None:
                markdown = trafilatura.extract(html, url=url, **TRAFILATURA_OPTIONS)
            else:
                markdown = _trafilatura(page.tree, url)
            extractor = "trafilatura"
            if markdown and not _has_body(markdown):
                # Headings alone (a page of links under a heading): markdownify keeps the rest.
                markdown = None
        except Exception:  # trafilatura raises many kinds on broken markup; the fallback decides
            markdown = None
    if not markdown or not markdown.strip():
        markdown = _markdownify_main(html)
        extractor = "markdownify"
    title = " ".join(title.split())
    if (not markdown or not markdown.strip()) and title:
        markdown = f"# {title}"
        extractor = "title"
    if not markdown or not markdown.strip():
        raise ExtractError(url, "no text and no title in the page (trafilatura and markdownify)")
    normalized = normalize_markdown(markdown)
    title = title or _first_heading(normalized) or url
    if title != url:
        normalized = with_title_heading(normalized, title)
    return Extracted(
        title=title, markdown=normalized, content_hash=content_hash(normalized), extractor=extractor
    )


def with_title_heading(markdown: str, title: str) -> str:
    r"""``markdown`` with its title heading every section: the title leads every chunk's
    heading path (README "Structure-aware chunks"). A page whose content has no level-1
    heading (trafilatura dropped it; DocBook reference pages start at level 2 with "Name")
    gets the title as one, unless its first heading is the title (section numbers aside) and
    every later heading nests under it; a first heading that is the title but has siblings is
    promoted to level 1.

    Example::

        >>> with_title_heading("## Name\n\nxsltproc — a tool", "xsltproc")
        '# xsltproc\n\n## Name\n\nxsltproc — a tool'
        >>> with_title_heading("## FAQ\n\nText\n\n## Install\n\nMore", "FAQ")
        '# FAQ\n\nText\n\n## Install\n\nMore'
        >>> with_title_heading("### 2.7 Thread Safety\n\n#### Locks\n\nText", "Thread Safety")
        '### 2.7 Thread Safety\n\n#### Locks\n\nText'
        >>> with_title_heading("## 1.1 Http Objects\n\nText", "1.1 Http Objects")
        '## 1.1 Http Objects\n\nText'
        >>> with_title_heading("# Install\n\nText", "Setup")
        '# Install\n\nText'
        >>> with_title_heading("```sh\n# build it\nmake\n```", "Build")
        '# Build\n\n```sh\n# build it\nmake\n```'
    """
    lines = markdown.split("\n")
    headings = list(_headings(lines))
    if any(level == 1 for _, level, _ in headings):
        return markdown
    unnumbered = docsites.SECTION_NUMBER.sub
    if not headings or unnumbered("", headings[0][2]) != unnumbered("", title):
        return f"# {title}\n\n{markdown}"
    at, level, text = headings[0]
    if all(later > level for _, later, _ in headings[1:]):
        return markdown  # the title heads every section already
    lines[at] = f"# {text}"
    return "\n".join(lines)


def _headings(lines: list[str]) -> Iterator[tuple[int, int, str]]:
    """``(line index, level, text)`` of the ATX headings among ``lines``, outside fenced code
    (a ``# comment`` in a shell block is no heading)."""
    fence = ""
    for at, line in enumerate(lines):
        marker = re.match(r"\s*(```|~~~)", line)
        if marker and (not fence or marker.group(1) == fence):
            fence = "" if fence else marker.group(1)
            continue
        heading = None if fence else re.match(r"(#{1,6})\s+(.+?)\s*$", line)
        if heading:
            yield at, len(heading.group(1)), heading.group(2)


def _trafilatura(tree: Any, url: str) -> str:
    """trafilatura's Markdown of the page ``tree`` (docsites' cleaned tree, changed here).

    Its definition lists are rewritten first and its layout tables read as blocks
    (:func:`ragsync.htmlprep.layout_tables`). When that reading holds less than half of the
    page's words, the page is read with its tables too, and that reading is kept if the
    blocks' holds less than half of its words: trafilatura then judged the content
    boilerplate (libxslt's symbol lists, all links: 8 words of 629). A page without a content
    frame is read framed (:func:`_framed`). README "Extraction"."""
    import trafilatura

    def read(page: Any) -> str:
        framed = _framed(page)
        if framed is not None:
            whole = trafilatura.extract(framed, url=url, **TRAFILATURA_OPTIONS)
            if whole and whole.strip():
                return str(whole)
        return trafilatura.extract(page, url=url, **TRAFILATURA_OPTIONS) or ""

    htmlprep.definition_lists(tree)
    tables = htmlprep.layout_tables(tree)
    if not tables:
        return read(tree)
    with_tables = copy.deepcopy(tree)
    htmlprep.as_blocks(tables)
    htmlprep.definition_lists(tree)  # those that were in the tables' cells
    blocks = read(tree)
    kept = _words(blocks)
    if 2 * kept >= _words(tree.text_content()):
        return blocks  # at least half of all the page's words: the tables' reading has no more
    tabled = read(with_tables)
    return blocks if 2 * kept >= _words(tabled) else tabled


def _words(text: str) -> int:
    return len(_WORD.findall(text))


def _framed(tree: Any) -> Any:
    """A copy of ``tree`` with its body's content in one ``<main>``, or None when trafilatura
    finds a content frame of its own in ``tree`` (an ``<article>``, a ``<main>``, a ``div``
    whose class or id says content).

    A page without one (LaTeX2HTML, hand-written pages, old sites) was read by trafilatura's
    recovery of loose paragraphs, code and tables alone: its headings and lists were lost, and
    of an item that begins ``<b>term</b>: If <code>True</code>…`` only the code and the text
    after it were kept. Framed, the page gets trafilatura's main pass, which keeps them and
    still prunes what looks like boilerplate. README "Extraction"."""
    from trafilatura.xpaths import BODY_XPATH

    if tree.find(".//body") is None or tree.find(".//article") is not None:
        return None
    if tree.find(".//main") is not None:  # BODY_XPATH takes both; these two cost nothing
        return None
    if any(found is not None for expr in BODY_XPATH for found in expr(tree)):
        return None
    framed = copy.deepcopy(tree)
    body = framed.find(".//body")
    main = body.makeelement("main", {})
    main.text, body.text = body.text, None
    main.extend(list(body))
    body.append(main)
    return framed


def _markdownify_main(html: str) -> str:
    """markdownify of the main content element only: whole pages keep menus and footers."""
    import lxml.html
    from markdownify import markdownify

    try:
        tree = lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return ""
    for element in list(tree.iter(*_NOISE_TAGS)):
        element.drop_tree()
    main = tree
    for xpath in (".//main", ".//article", './/*[@role="main"]', ".//body"):
        found = tree.xpath(xpath)
        if found:
            main = found[0]
            break
    return markdownify(
        lxml.html.tostring(main, encoding="unicode"),
        heading_style="ATX",
        bullets="-",
        bs4_options="lxml",
    )


def _has_body(markdown: str) -> bool:
    """Whether ``markdown`` has a line that is not a heading."""
    return any(line.strip() and not line.startswith("#") for line in markdown.split("\n"))


def _first_heading(markdown: str) -> str:
    match = re.search(r"^#{1,6}\s+(.+)$", markdown, flags=re.M)
    return match.group(1).strip() if match else ""
