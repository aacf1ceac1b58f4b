"""Documentation-site pages: their title, their main content and its heading outline.

Documentation generators wrap the page in chrome that general-purpose extraction mistakes for
content (mdBook's keyboard-help pop-up, whose ``<h2>`` became every page's title), and mark
their headings in ways it drops (a heading whose whole text is an anchor link, DocBook's
title-page headings). This module knows the generators by their markers. For a page of a known
generator it removes the chrome, makes every heading plain text and converts the main content
element to Markdown with fenced code blocks that keep their language; for any page it gives the
title the page itself shows (README "Extraction").

Pure functions over an HTML string; like :mod:`ragsync.extract`, single-threaded (lxml).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import lxml.html
from lxml import etree

from ragsync import htmlprep

HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
# Header-anchor glyphs generators append or prepend to heading text (Sphinx ¶, rustdoc §,
# GitHub's link emoji). A "#" anchor (Node, MkDocs) is removed as the element it is, never
# stripped from text: "C#" ends in one.
GLYPHS = "¶§🔗"
_SEPARATORS = (" | ", " - ", " — ", " – ", " · ", " :: ")
SECTION_NUMBER = re.compile(r"^(?:[0-9A-Z]+\.)*[0-9]+\.?\s+")  # "2.7 ", "A.1. "
_LANG_CLASS = re.compile(r"^(?:language|lang|highlight|sourceCode)-([A-Za-z0-9_+#.-]+)$")
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_PLAIN_LANGS = {"default", "none", "text", "plaintext", "notranslate", "console-output"}


@dataclass(frozen=True)
class Generator:
    """How one documentation generator marks its pages.

    Attributes:
        name: the generator's name, as tests and logs show it.
        markers: XPath expressions; the page is this generator's when any matches.
        main: XPath expressions of the main content element, the first that matches wins.
        chrome: XPath expressions of elements removed before conversion (navigation, pop-ups,
            copy buttons, anchors).
        layout: XPath expressions of tables used for layout, read as a run of blocks (their
            cells can hold headings, which a Markdown table cannot).
        preformatted: XPath expressions of text laid out line by line with ``<br>`` and
            no-break spaces, read as a code block (shell comments there are not headings).
        heading_title: the title is the main content's first heading (its section number
            left out) rather than ``<title>``, which names something else (Texinfo: the node
            and the manual, "Arrays Unions Enums (libffi: the portable …)").
    """

    name: str
    markers: tuple[str, ...]
    main: tuple[str, ...]
    chrome: tuple[str, ...] = ()
    layout: tuple[str, ...] = ()
    preformatted: tuple[str, ...] = ()
    heading_title: bool = False


def _meta_generator(prefix: str) -> str:
    return (
        "//meta[translate(@name,'GENRATO','genrato')='generator']"
        f"[starts-with(translate(@content,'ABCDEFGHIJKLMNOPQRSTUVWXYZ','abcdefghijklmnopqrstuvwxyz'),"
        f"'{prefix}')]"
    )


def _has_class(name: str) -> str:
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


GENERATORS: tuple[Generator, ...] = (
    Generator(
        "mdbook",
        ("//*[@id='mdbook-help-container']", "//*[@id='mdbook-menu-bar']", "//*[@id='menu-bar']"),
        ("//main",),
        (
            "//*[@id='mdbook-help-container']",
            "//nav",
            f"//*[{_has_class('nav-wrapper')}]",
            # The Rust Reference's rule ids ("[abi.intro]") and its railroad diagrams, drawn
            # as SVG text and hidden until asked for.
            f"//a[{_has_class('rule-link')}]",
            f"//*[{_has_class('grammar-hidden')}]",
        ),
    ),
    Generator(
        "rustdoc",
        (_meta_generator("rustdoc"),),
        ("//*[@id='main-content']",),
        (
            "//*[@id='copy-path']",
            "//rustdoc-breadcrumbs",
            f"//*[{_has_class('rustdoc-breadcrumbs')}]",
            f"//*[{_has_class('out-of-band')}]",
            f"//*[{_has_class('sub-heading')}]",
            f"//summary[{_has_class('hideme')}]",
            f"//a[{_has_class('anchor')} or {_has_class('doc-anchor')}]",
            f"//*[{_has_class('src')}][self::a]",
        ),
    ),
    Generator(
        "nodejs",
        ("//*[@id='apicontent']",),
        ("//*[@id='apicontent']",),
        (
            f"//a[{_has_class('mark')}]",
            f"//a[{_has_class('srclink')}]",
            "//*[@id='toc']",
            "//*[@id='gtoc']",
        ),
    ),
    Generator(
        "mkdocs-material",
        (f"//*[{_has_class('md-content')}]",),
        (f"//article[{_has_class('md-content__inner')}]", f"//*[{_has_class('md-content')}]"),
        (
            f"//a[{_has_class('md-content__button')}]",
            f"//*[{_has_class('md-source-file')}]",
            f"//*[{_has_class('md-clipboard')}]",
        ),
    ),
    Generator(
        "docusaurus",
        (f"//*[{_has_class('theme-doc-markdown')}]",),
        (f"//*[{_has_class('theme-doc-markdown')}]",),
        (f"//a[{_has_class('hash-link')}]", f"//*[{_has_class('theme-edit-this-page')}]"),
    ),
    Generator(
        "sphinx",
        (f"//a[{_has_class('headerlink')}]", f"//*[{_has_class('sphinxsidebar')}]"),
        (
            "//article[@role='main']",
            "//*[@role='main']",
            f"//div[{_has_class('body')}]",
            "//main",
        ),
        (f"//*[{_has_class('sphinxsidebar')}]", f"//*[{_has_class('related')}]"),
    ),
    Generator(
        "npm-docs",
        ("//section[@id='content']/div[@id='_content']",),
        ("//section[@id='content']",),
        ("//*[@id='table_of_contents']", "//footer[@id='edit']"),
    ),
    Generator(
        "docbook",
        (_meta_generator("docbook xsl"), _meta_generator("gtk-doc"), _meta_generator("libxml2")),
        ("//body",),
        (
            f"//div[{_has_class('navheader')} or {_has_class('navfooter')}]",
            "//table[@summary='Navigation header' or @summary='Navigation footer']",
            f"//table[{_has_class('navigation')}]",
            f"//div[{_has_class('toc')}]",
            f"//div[{_has_class('footer')}]",
            # A FAQ's lists of its questions, before it and in each of its sections.
            f"//div[{_has_class('qandaset')}]/dl",
            f"//table[@summary='Q and A Div' or @summary='Q and A Set']//tr[{_has_class('toc')}]",
            "//hr",
        ),
        # A FAQ (qandaset): its sections' headings, questions and answers in table cells.
        ("//table[@summary='Q and A Div' or @summary='Q and A Set']",),
        (f"//div[{_has_class('literallayout')}]",),
    ),
    Generator(
        "texinfo",
        (_meta_generator("makeinfo"), _meta_generator("texi2html")),
        ("//body",),
        (
            f"//div[{_has_class('header')} or {_has_class('nav-panel')}]",
            "//hr",
            # The ¶ beside each definition, the menus of a node's subsections, the manual's
            # table of contents, and an index's entries and letter bars.
            f"//a[{_has_class('copiable-anchor')} or {_has_class('copiable-link')}]",
            f"//ul[{_has_class('section-toc')} or {_has_class('mini-toc')}]",
            f"//table[{_has_class('menu')}]",
            f"//div[{_has_class('contents')} or {_has_class('shortcontents')}]",
            "//table[starts-with(@class, 'index-')]",
            f"//table[.//a[{_has_class('summary-letter')}]]",
        ),
        heading_title=True,
    ),
)

# Chrome on any page: hidden elements (never content a reader sees), pop-up dialogs, copy and
# edit buttons, skip links, header-anchor links whose text is only a glyph.
_HIDDEN = (
    "//*[@hidden]",
    "//*[@aria-hidden='true']",
    "//*[contains(translate(@style,' ',''),'display:none')]",
    "//*[@role='dialog']",
    "//template",
    "//script",
    "//style",
    "//noscript",
)
_COMMON_CHROME = (
    f"//a[{_has_class('headerlink')}]",
    "//button",
    "//a[starts-with(@href,'#')][starts-with(normalize-space(.),'Skip to')]",
    "//a[normalize-space(.)='Edit this page']",
)


@dataclass(frozen=True)
class DocPage:
    """What :func:`read` makes of a page.

    Attributes:
        title: the page's own title (main ``<h1>``, else ``<title>`` without the site name,
            else ``og:title``); ``""`` when it has none.
        generator: the documentation generator recognised, or ``""``.
        markdown: the main content as Markdown for a recognised generator, else ``""``.
        tree: the page without hidden elements and header-anchor chrome, headings as plain
            text: what a general extractor is given (one parse per page).
    """

    title: str
    generator: str
    markdown: str
    tree: Any = field(repr=False, compare=False)


def read(html: str) -> DocPage | None:
    """Title, generator and (for a known generator) Markdown of ``html``.

    Returns:
        None when lxml cannot parse the page.

    Example::

        >>> page = read('<title>Intro - My Book</title><div id="menu-bar"></div>'
        ...             '<main><h1><a class="header" href="#i">Intro</a></h1><p>Hi.</p></main>')
        >>> page.title, page.generator, page.markdown.split("\\n")[0]
        ('Intro', 'mdbook', '# Intro')
    """
    try:
        # lxml refuses a str that declares its encoding (XHTML output of xsltproc).
        tree = lxml.html.fromstring(_XML_DECLARATION.sub("", html, count=1))
    except (ValueError, etree.ParserError):
        return None
    generator = detect(tree)
    titles = tree.xpath("//title[not(ancestor::svg)]")
    head_title = " ".join((titles[0].text_content() if titles else "").split())
    og_title = _og_meta(tree, "og:title")
    site_name = _og_meta(tree, "og:site_name")
    _remove(tree, _HIDDEN)
    if generator:
        _remove(tree, generator.chrome)
    _remove(tree, _COMMON_CHROME)
    if generator:
        for table in [t for xpath in generator.layout for t in tree.xpath(xpath)]:
            _as_blocks(table)
        for block in [b for xpath in generator.preformatted for b in tree.xpath(xpath)]:
            _as_pre(block)
    for heading in list(tree.iter(*HEADINGS)):
        _flatten_heading(heading)
    htmlprep.normalize(tree)
    main = main_element(tree, generator)
    title = page_title(main, head_title, og_title, site_name)
    if generator and generator.heading_title:
        first = next(filter(None, map(heading_text, main.iter(*HEADINGS))), "")
        title = SECTION_NUMBER.sub("", first) or title
    markdown = to_markdown(main) if generator else ""
    return DocPage(title, generator.name if generator else "", markdown, tree)


def detect(tree: Any) -> Generator | None:
    """The documentation generator whose markers ``tree`` carries, or None."""
    for generator in GENERATORS:
        if any(tree.xpath(marker) for marker in generator.markers):
            return generator
    return None


def main_element(tree: Any, generator: Generator | None) -> Any:
    """The main content element: the generator's own, else ``<main>``, ``role=main``,
    ``<article>``, else ``<body>`` (or the whole tree)."""
    candidates = generator.main if generator else ()
    for xpath in (*candidates, "//main", "//*[@role='main']", "//article", "//body"):
        found = tree.xpath(xpath)
        if found:
            return found[0]
    return tree


def page_title(main: Any, head_title: str, og_title: str, site_name: str = "") -> str:
    """The title the page shows: the main content's first visible ``<h1>`` outside
    navigation — unless it is a site banner (it is the site's name, or it sits in a layout
    table as the libxslt docs' does) while ``<title>`` does not hold it but names another of
    the page's headings, which is then the title; else the first heading when ``<title>`` is a
    label naming nothing (``libxslt: ``); else ``<title>`` cut after the main
    content's first heading when it starts with it (section numbers ignored), or without the
    part equal to ``og:site_name`` (``site_name``), or without its last `` | ``/`` - ``/`` — ``/``
    `` · `` part; else ``og:title``.

    Example::

        >>> page_title(lxml.html.fromstring("<div><h2>Usage</h2></div>"), "Usage | Node.js", "")
        'Usage'
        >>> page_title(lxml.html.fromstring("<div></div>"), "Acme Docs · Install", "", "Acme Docs")
        'Install'
        >>> banner = "<table><tr><td><h1>The XSLT C library</h1><h2>FAQ</h2></td></tr></table>"
        >>> page_title(lxml.html.fromstring(banner), "FAQ", "")
        'FAQ'
        >>> page_title(lxml.html.fromstring("<div><h1>Widgets</h1><h2>FAQ</h2></div>"), "FAQ", "")
        'Widgets'
        >>> page_title(lxml.html.fromstring("<div><h2>API Modules</h2></div>"), "libxslt: ", "")
        'API Modules'
    """
    headings = [h for h in main.iter(*HEADINGS) if not _in_chrome(h, main)]
    texts = [heading_text(h) for h in headings]
    for heading, text in zip(headings, texts, strict=True):
        if heading.tag == "h1" and text:
            banner = text == site_name or bool(heading.xpath("ancestor::table"))
            if banner and head_title and text not in head_title and head_title in texts:
                return head_title  # the h1 is the site's name, the <title> the page's heading
            return text
    if head_title.strip().endswith(":") and texts and texts[0]:
        return texts[0]  # "libxslt: ", a label naming nothing (the devhelp modules page)
    if head_title:
        if headings:
            first = SECTION_NUMBER.sub("", heading_text(headings[0]))
            if first and head_title.startswith(first):
                rest = head_title[len(first) :]
                if not rest or not rest[0].isalnum():
                    return first
        for separator in _SEPARATORS:
            if separator not in head_title:
                continue
            first_part, rest = head_title.split(separator, 1)
            if site_name and first_part.strip() == site_name:  # "Site | Page"
                return rest.strip()
            return head_title.rsplit(separator, 1)[0].strip()
        return head_title
    return og_title


def heading_text(heading: Any) -> str:
    """A heading's text without anchor glyphs, whitespace collapsed."""
    text = " ".join(heading.text_content().split())
    return text.strip(GLYPHS + " ").strip()


def to_markdown(main: Any) -> str:
    """Markdown of the (cleaned) main content element: ATX headings, ``-`` bullets, fenced
    code blocks with the language their class names (``language-x``, ``highlight-x``)."""
    from markdownify import markdownify

    return str(
        markdownify(
            lxml.html.tostring(main, encoding="unicode"),
            heading_style="ATX",
            bullets="-",
            code_language_callback=_code_language,
            escape_underscores=False,
            escape_asterisks=False,
            # Link targets are noise to a reader of the text, as trafilatura's output has none.
            strip=["a", "img"],
            # libxml2 builds the soup: Python's html.parser took 60% of a page's extraction.
            bs4_options="lxml",
        )
    )


def _code_language(pre: Any) -> str:
    """The language of a ``<pre>`` (a BeautifulSoup tag): from its class, its ``<code>``'s,
    or its wrapper's (Sphinx puts ``highlight-python`` on the enclosing ``<div>``)."""
    code = pre.find("code")
    for element in (code, pre, pre.parent, pre.parent.parent if pre.parent else None):
        if element is None or not hasattr(element, "get"):
            continue
        for name in element.get("class") or ():
            match = _LANG_CLASS.match(name)
            if match and match.group(1).lower() not in _PLAIN_LANGS:
                return match.group(1).lower()
            if name == "rust":  # rustdoc: <pre class="rust rust-example-rendered">
                return name
    return ""


def _og_meta(tree: Any, name: str) -> str:
    for meta in tree.xpath(f"//meta[@property='{name}' or @name='{name}']"):
        content = " ".join((meta.get("content") or "").split())
        if content:
            return content
    return ""


def _remove(tree: Any, xpaths: tuple[str, ...]) -> None:
    for xpath in xpaths:
        for element in tree.xpath(xpath):
            if element.getparent() is not None:
                element.drop_tree()


def _as_blocks(table: Any) -> None:
    """Read a layout table as a run of blocks: the table, its row groups, rows and cells
    become plain ``<div>`` elements, in document order."""
    for element in [table, *table.iter("thead", "tbody", "tfoot", "tr", "td", "th")]:
        element.tag = "div"
        element.attrib.clear()


def _as_pre(block: Any) -> None:
    """Replace ``block`` with a ``<pre>`` of its text: a line per ``<br>``, no-break spaces
    as spaces."""
    for br in block.iter("br"):  # the source's own line break after a <br> is not another
        tail = br.tail or ""
        br.tail = "\n" + (tail[1:] if tail.startswith("\n") else tail)
    pre = lxml.html.Element("pre")
    pre.text = block.text_content().replace("\xa0", " ").strip("\n")
    pre.tail = block.tail
    block.getparent().replace(block, pre)


def _flatten_heading(heading: Any) -> None:
    """Replace a heading's children by its text: a heading whose whole text is a link (mdBook)
    or whose anchor glyph trails it (Sphinx ¶, Node #) becomes plain heading text."""
    for br in heading.iter("br"):  # "Release Series<br>Changes" reads as two words
        br.tail = " " + (br.tail or "")
    text = heading_text(heading)
    if not text:  # an anchor alone, or an icon: no heading at all
        heading.drop_tree()
        return
    tail = heading.tail
    for child in list(heading):
        heading.remove(child)
    heading.text = text
    heading.tail = tail
    for name in list(heading.attrib):
        if name not in ("id", "class"):
            del heading.attrib[name]


def _in_chrome(element: Any, main: Any) -> bool:
    """Whether ``element`` sits in page navigation: a ``<nav>``, ``<aside>``, ``<footer>``, or a
    ``<header>`` that is not inside the main content."""
    node = element.getparent()
    while node is not None and node is not main:
        if node.tag in ("nav", "aside", "footer"):
            return True
        if node.tag == "header" and not _contains(main, node):
            return True
        node = node.getparent()
    return False


def _contains(ancestor: Any, element: Any) -> bool:
    return any(node is ancestor for node in element.iterancestors())
