"""Cleanups every page's tree gets before it is converted to Markdown (README "Extraction").

Generic, whatever made the page: inline code that breaks over lines is put on one line, text
loose beside blocks becomes paragraphs, each ``<pre>`` holds one ``<code>``, and the line
breaks of the source's text outside code become spaces. A
documentation generator's own rules are in :mod:`ragsync.docsites`.

Example::

    >>> import lxml.html
    >>> tree = lxml.html.fromstring("<div>Intro <code>a\\nb</code><ul><li>x</li></ul></div>")
    >>> normalize(tree)
    >>> lxml.html.tostring(tree, encoding="unicode")
    '<div><p>Intro <code>a b</code></p><ul><li>x</li></ul></div>'
"""

from __future__ import annotations

import re
from typing import Any

import lxml.html
from lxml import etree

_INLINE = {"a", "span", "em", "strong", "b", "i", "u", "small", "sub", "sup", "var", "font"}
_CONTAINERS = {"div", "section", "article", "main", "body", "figure", "blockquote"}
_HEADINGS = tuple(f"h{level}" for level in range(1, 7))
_BLOCKS = {
    *("p", "ul", "ol", "dl", "pre", "table", "div", "section", "article", "main", "blockquote"),
    *("hr", "nav", "aside", "header", "footer", "figure", "details", "form", "fieldset"),
    *("address", "center", "hgroup", "menu", "noscript"),
    *_HEADINGS,
}


def normalize(tree: Any) -> None:
    """Apply every cleanup of this module to ``tree``, in place."""
    for code in list(tree.iter("code", "tt", "kbd", "samp")):
        one_line_code(code)
    for box in list(tree.iter("body", "main", "article", "section", "div", "blockquote")):
        loose_text_paragraphs(box)
    for pre in list(tree.iter("pre")):
        split_paired_code(pre)
        code_in_pre(pre)
    soft_breaks(tree)


# Elements whose text keeps its line breaks: preformatted, code (a ``<div>`` of ``<code>``
# lines is a code block written without ``<pre>``), and what is not text at all.
_VERBATIM = {"pre", "code", "tt", "kbd", "samp", "textarea", "script", "style", "xmp", "listing"}
_WRAPPED = re.compile(r"[ \t\r]*\n[ \t\r\n]*")


def soft_breaks(tree: Any) -> None:
    """Line breaks in the source's text, outside code, as single spaces: a browser shows them
    so, but a converter keeps them, and a hard-wrapped paragraph then reached the Markdown as
    lines. A wrapped line that began ``- ``, ``1.`` or ``#`` read as a list item or a heading,
    and one under a list item ended the list there: the chunker could cut mid-sentence (the
    Cargo Book's option lists, Expat's prose). ``<br>`` is an element, and stays a break."""
    stack: list[tuple[Any, bool]] = [(tree, False)]
    while stack:
        node, verbatim = stack.pop()
        element = isinstance(node.tag, str)  # not a comment or processing instruction
        inside = verbatim or (element and node.tag in _VERBATIM)
        if element and not inside and node.text and "\n" in node.text:
            node.text = _WRAPPED.sub(" ", node.text)
        if node.tail and not verbatim and "\n" in node.tail:
            node.tail = _WRAPPED.sub(" ", node.tail)
        stack.extend((child, inside) for child in node)


def one_line_code(code: Any) -> None:
    """Inline code whose text the source breaks over lines, on one line: a converter writes
    it as a fenced block in mid-sentence, and every fence after it then opens where one
    closes (Expat's reference lost its headings and code layout that way)."""
    text = code.text_content()
    if "\n" not in text or next(code.iter("br"), None) is not None:
        return  # one line already, or lines the page breaks on purpose
    if code.getparent() is None or any(node.tag == "pre" for node in code.iterancestors()):
        return
    block = next((node for node in code.iterancestors() if node.tag not in _INLINE), None)
    around = block.text_content() if block is not None and block.tag in _CONTAINERS else ""
    if around.split() == text.split():
        return  # all of a <div>: a code block written without <pre>
    for child in list(code):
        code.remove(child)
    code.text = " ".join(text.split())


def loose_text_paragraphs(box: Any) -> None:
    """Text loose in ``box`` as paragraphs: beside blocks (``<div>Construct a parser.
    <ul>…</ul></div>``), or all of a ``<div>`` holding text and inline elements only
    (``<div>Free memory used by the parser. See <a>user data</a>.</div>``). trafilatura
    dropped such text: 31 of Expat's 32 function descriptions lost their first sentences, 8
    of them all of it. A ``<div>`` of inline elements alone (links of a menu) stays as it is."""
    children = list(box)
    if box.tag != "div" and not any(child.tag in _BLOCKS for child in children):
        return
    loose = [box.text, *(child.tail for child in children)]
    if not any(text and text.strip() for text in loose):
        return
    kept: list[Any] = []
    paragraph: Any = None

    def opened() -> Any:
        nonlocal paragraph
        if paragraph is None:
            paragraph = lxml.html.Element("p")
            kept.append(paragraph)
        return paragraph

    def add(text: str | None) -> None:
        if not text or (paragraph is None and not text.strip()):
            return
        append_text(opened(), text)

    text, box.text = box.text, None
    add(text)
    for child in children:
        tail, child.tail = child.tail, None
        box.remove(child)
        if child.tag in _BLOCKS:
            paragraph = None
            kept.append(child)
        else:  # an inline element belongs to the paragraph around it, or opens one
            opened().append(child)
        add(tail)
    box.extend(kept)


def definition_lists(tree: Any) -> None:
    """Each ``<dl>`` of ``<dt>`` and ``<dd>`` as what trafilatura renders well. It writes
    ``<dt>`` and ``<dd>`` as sibling bullets, which part a term from what defines it (Expat's
    "- `XML_Parse`" then "- Pass a buffer full of document to the parser"), and inlines the
    fences of code in a definition. Terms and definitions of inline content only become a
    ``<ul>`` of "term: definition" items (several terms of one definition joined with ", ",
    several definitions of one term one after the other); a list with blocks in it becomes a
    paragraph per term, each followed by its definitions' blocks. markdownify writes definition
    lists itself (``term`` then ``: definition``): only pages that go to trafilatura need this
    (:func:`ragsync.extract.extract`)."""
    for dl in list(tree.iter("dl")):
        items = list(dl)
        if not items or any(
            not isinstance(item.tag, str)
            or item.tag not in ("dt", "dd")
            or (item.tail and item.tail.strip())
            for item in items
        ):
            continue  # another layout (<div> groups, stray text): left as it is
        if any(node.tag in ("td", "th") for node in dl.iterancestors()):
            continue  # in a table cell, trafilatura flattens what is there (libxslt's indexes)
        if any(node.tag in _BLOCKS for item in items for node in item.iterdescendants()):
            _as_blocks(dl, items)
        else:
            _as_items(dl, items)


def layout_tables(tree: Any) -> list[Any]:
    """The tables that lay the page out, each with its own rows and cells (not those of a
    table nested in a cell, which is judged by itself). A table lays out when it has one
    column (a box: a banner, a menu, the content) or holds a heading or another table in a
    cell; a table of several columns without either is data (a table of parameters, an index).

    trafilatura writes a layout table's cell as one table row, the whole page on one line:
    libxslt's site lost every heading and list (its "Library internals" page was 6 lines for
    20 headings). :func:`as_blocks` reads them as blocks; only pages that go to trafilatura
    need this (:func:`ragsync.extract.extract`), a known generator's layout tables are read
    by its own rules."""
    found = []
    for table in tree.iter("table"):
        own = [
            element
            for element in table.iter("thead", "tbody", "tfoot", "tr", "td", "th")
            if next(element.iterancestors("table")) is table
        ]
        cells = [element for element in own if element.tag in ("td", "th")]
        rows = [element for element in own if element.tag == "tr"]  # a row's cells: its children
        one_column = all(sum(1 for cell in row if cell.tag in ("td", "th")) <= 1 for row in rows)
        holds = any(next(cell.iter("table", *_HEADINGS), None) is not None for cell in cells)
        if cells and (one_column or holds):
            found.append([table, *own])
    return found


def as_blocks(tables: list[Any]) -> None:
    """Each of :func:`layout_tables`' tables, rows and cells made a plain ``<div>``."""
    for elements in tables:
        for element in elements:
            element.tag = "div"
            element.attrib.clear()


def _as_items(dl: Any, items: list[Any]) -> None:
    listing = lxml.html.Element("ul")
    item: Any = None
    defined = False
    for entry in items:
        if entry.tag == "dt" and (item is None or defined):
            item, defined = etree.SubElement(listing, "li"), False
            _append_inline(item, "", entry)
        elif entry.tag == "dt":
            _append_inline(item, ", ", entry)
        else:
            if item is None:
                item = etree.SubElement(listing, "li")
            _append_inline(item, " " if defined else ": ", entry)
            defined = True
    listing.tail = dl.tail
    dl.getparent().replace(dl, listing)


def _as_blocks(dl: Any, items: list[Any]) -> None:
    box = lxml.html.Element("div")
    for entry in items:
        entry.tail = None
        entry.tag = "p" if entry.tag == "dt" else "div"
        box.append(entry)
        if entry.tag == "div":
            loose_text_paragraphs(entry)
    box.tail = dl.tail
    dl.getparent().replace(dl, box)


def _append_inline(target: Any, separator: str, source: Any) -> None:
    """Append ``separator`` (unless ``target`` is empty) then ``source``'s text and children."""
    append_text(target, (separator if len(target) or target.text else "") + (source.text or ""))
    for child in list(source):
        target.append(child)  # moves it, with its tail


def append_text(element: Any, text: str) -> None:
    """Add ``text`` at the end of ``element``'s content: after its last child, else its text."""
    if len(element):
        element[-1].tail = (element[-1].tail or "") + text
    else:
        element.text = (element.text or "") + text


def split_paired_code(pre: Any) -> None:
    """One ``<pre>`` per ``<code>``: Node's API docs put an ES-module and a CommonJS example
    in one ``<pre>`` (a toggle shows one), which would read as one block with the two glued."""
    codes = [child for child in pre if child.tag == "code"]
    if len(codes) < 2:
        return
    for code in codes:
        single = etree.Element("pre", {"class": pre.get("class", "")})
        single.append(code)  # moves it out of the shared <pre>
        single.tail = "\n"
        pre.addprevious(single)
    pre.drop_tree()


def code_in_pre(pre: Any) -> None:
    """A ``<pre>`` with no ``<code>`` gets its content wrapped in one: trafilatura reads a bare
    ``<pre>`` as code or as text by its content (Expat's ``#include``/``#ifndef`` block became
    text with ``\\#`` escapes), ``<pre><code>`` always as code."""
    if pre.getparent() is None or next(pre.iter("code"), None) is not None:
        return
    if any(node.tag in ("td", "th") for node in pre.iterancestors()):
        return  # a table cell holds no code block: trafilatura would inline its fences
    code = lxml.html.Element("code")
    code.text, pre.text = pre.text, None
    code.extend(list(pre))  # moves the children, their tails with them
    pre.append(code)
