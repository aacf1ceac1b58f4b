"""Titles and heading paths on real documentation sites: ragsync against the peers' loaders.

Issue #18's acceptance benchmark. Each site is real HTML installed on this machine (nobody in
this project wrote it), copied to a temporary folder and served by a static server on
127.0.0.1 (ETag, 304, ``index.html`` for a directory). A bench start page listing the chosen
pages is added to the copy; every system is given the same pages over HTTP:

- ``ragsync``: a ``crawl`` source from the start page with ``max_depth = 1`` (the start page and
  the pages it links to, nothing further) through :class:`ragsync.sync.Syncer`, with hash
  vectors (no model: titles and heading paths do not depend on it); titles are read from the
  state DB's ``documents`` rows, heading paths from its ``chunks`` rows (``headings``).
- ``trafilatura``: each page URL fetched with httpx (``trafilatura.fetch_url`` refuses
  127.0.0.1: SSRF protection); the title is
  ``trafilatura.extract_metadata(html, default_url=url).title`` (what ``with_metadata=True``
  reports), the text ``trafilatura.extract(html, url=url, output_format="markdown")`` with
  every other option at its default; the Markdown is split as the LangChain peer's is.
- ``langchain``: ``RecursiveUrlLoader(start, max_depth=2, base_url=site directory)`` (depth 0
  is the start page, 1 the pages it links to) with its default extractor and metadata
  extractor, then ``Html2TextTransformer()``; the title is the loader's ``metadata["title"]``.
  Split with ``MarkdownHeaderTextSplitter`` on ``#``–``######`` (LangChain's way to keep
  headings) then ``RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)``, the
  settings of ``eval/peers.py``.

The oracle does not use ragsync's code: for each page, read with lxml, the main content region
is chosen by an XPath written here per generator (:data:`LAYOUTS`); the expected title is its
first ``<h1>``, else ``<title>`` without the site suffix; the real headings are its ``h1``–``h6``
texts. Texts are compared after :func:`heading_key` (inline Markdown marks ```` ` ```` ``*``
``\\`` and link syntax removed, header-anchor glyphs ¶ # § 🔗 stripped at either end,
whitespace collapsed) on both sides; titles exactly after whitespace is collapsed.

Metrics per site and system: pages (of the chosen pages, those the system returned),
**title right** (share of chosen pages), chunks, **real heading path** (non-empty and every
heading in it a real heading of that page's main content), **no heading path**, **under a
heading that is not one** (non-empty, with at least one element that is no real heading),
**headings kept** (share of the oracle's headings that appear in some chunk's path).

Usage: python eval/bench_docsites.py [--cap 150] [--sites cargo,nodejs,...] [--out DIR]
→ writes DIR/docsites.json and DIR/docsites.md (default eval/results).
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from html import escape
from pathlib import Path
from typing import Any

import lxml.html

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ragsync.testing import FastEmbedder, StaticSite  # noqa: E402

START_PAGE = "ragsync-bench-start.html"
SYSTEMS = ("ragsync", "trafilatura", "langchain")
GLYPHS = "¶#§🔗"
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_INLINE_MARKS = re.compile(r"[`*\\]")
_RUST_DOCS = Path.home() / ".rustup/toolchains"


# -- the oracle ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Where a generator puts a page's main content, read by the oracle.

    Attributes:
        generator: the generator's name, for the report.
        main: XPath of the main content region (the first match).
        exclude: XPaths of elements inside it that are not content (a table of contents).
        noise: XPaths of elements inside headings that are not heading text (anchor links).
        title_suffix: regular expression of the site name after the page's ``<title>``.
    """

    generator: str
    main: str
    exclude: tuple[str, ...] = ()
    noise: tuple[str, ...] = ()
    title_suffix: str = ""


LAYOUTS: dict[str, Layout] = {
    # mdBook: the chapter is <main>; the keyboard-help pop-up and the menu bar are outside it.
    "mdbook": Layout("mdBook", "//main", title_suffix=r"\s+-\s+The Cargo Book$"),
    # Node.js: #apicontent; a heading ends with <a class="mark">#</a> and may hold [src].
    "nodejs": Layout(
        "Node.js API docs (own generator)",
        "//*[@id='apicontent']",
        noise=(".//a[@class='mark']", ".//a[contains(@class,'srclink')]"),
        title_suffix=r"\s+\|\s+Node\.js v[0-9.]+ Documentation$",
    ),
    # DocBook XSL: the <body> minus the navigation header/footer (and its tables).
    "docbook": Layout(
        "DocBook XSL",
        "//body",
        exclude=(
            ".//div[@class='navheader']",
            ".//div[@class='navfooter']",
            ".//table[@class='nav']",
        ),
    ),
    # npm docs: <section id="content"> holds the h1 header and the page; its table of
    # contents (an h2 "Table of contents" and links) is navigation.
    "npm": Layout(
        "npm CLI docs (own generator)",
        "//section[@id='content']",
        exclude=(".//section[@id='table_of_contents']",),
    ),
}


@dataclass(frozen=True)
class Truth:
    """What the oracle reads from a page: its title and its main content's heading texts
    (:func:`heading_key` applied), in document order."""

    title: str
    headings: tuple[str, ...]


def collapse(text: str) -> str:
    """``text`` with runs of whitespace (no-break spaces included) as one space, trimmed."""
    return " ".join(text.split())


def heading_key(text: str) -> str:
    """The form in which headings are compared: Markdown link syntax reduced to its text,
    the inline marks `` ` `` ``*`` ``\\`` removed, anchor glyphs stripped at both ends,
    whitespace collapsed. Applied to the oracle's text and to every system's heading alike."""
    text = _INLINE_MARKS.sub("", _LINK.sub(r"\1", text))
    return collapse(text).strip(GLYPHS + " ").strip()


def oracle(html: bytes | str, layout: Layout) -> Truth | None:
    """Title and headings of the page ``html`` by ``layout``; None when it has no main
    content region."""
    if isinstance(html, bytes):
        tree = lxml.html.document_fromstring(html)
    else:  # lxml refuses a str that declares its encoding
        tree = lxml.html.document_fromstring(html.encode("utf-8"))
    found = tree.xpath(layout.main)
    if not found:
        return None
    main = found[0]
    for xpath in layout.exclude:
        for element in main.xpath(xpath):
            element.drop_tree()
    headings: list[tuple[str, str]] = []
    for heading in main.iter("h1", "h2", "h3", "h4", "h5", "h6"):
        for xpath in layout.noise:
            for element in heading.xpath(xpath):
                element.drop_tree()
        text = heading_key(heading.text_content())
        if text:
            headings.append((heading.tag, text))
    h1 = next((text for tag, text in headings if tag == "h1"), "")
    head = tree.find(".//title")
    title = h1 or collapse(head.text_content() if head is not None else "")
    if not h1 and layout.title_suffix:
        title = re.sub(layout.title_suffix, "", title)
    return Truth(title, tuple(text for _, text in headings))


# -- the sites -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    """A real documentation site installed on this machine.

    Attributes:
        name: its name in the report.
        layout: a key of :data:`LAYOUTS`.
        roots: candidate folders holding it (glob patterns; the first that exists is used).
        skip: file names left out: whole-site single pages, tables of contents, 404 pages.
        title_suffix: the site name after its pages' ``<title>``, when it is not the
            layout's (a regular expression).
    """

    name: str
    layout: str
    roots: tuple[str, ...]
    skip: tuple[str, ...] = ()
    title_suffix: str = ""


SITES: tuple[Site, ...] = (
    Site(
        "cargo",
        "mdbook",
        (
            str(_RUST_DOCS / "stable-*/share/doc/rust/html/cargo"),
            str(_RUST_DOCS / "*/share/doc/rust/html/cargo"),
        ),
        skip=("print.html", "toc.html", "404.html"),
    ),
    Site(
        "reference",
        "mdbook",
        (
            str(_RUST_DOCS / "stable-*/share/doc/rust/html/reference"),
            str(_RUST_DOCS / "*/share/doc/rust/html/reference"),
        ),
        skip=("print.html", "toc.html", "404.html"),
        title_suffix=r"\s+-\s+The Rust Reference$",
    ),
    Site("nodejs", "nodejs", ("/usr/share/doc/nodejs/api",), skip=("all.html",)),
    Site("valgrind", "docbook", ("/usr/share/doc/valgrind/html",)),
    Site("npm", "npm", ("/usr/lib/node_modules/npm/docs/output",)),
)


def site_root(site: Site) -> Path | None:
    """The first folder matching one of ``site.roots`` (in order, matches sorted), or None."""
    for pattern in site.roots:
        for candidate in sorted(glob.glob(pattern)):
            if Path(candidate).is_dir():
                return Path(candidate)
    return None


_REFRESH = re.compile(rb"<meta[^>]+http-equiv=[\"']?refresh", re.IGNORECASE)


def select_pages(root: Path, site: Site, cap: int) -> list[str]:
    """The first ``cap`` ``.html`` files under ``root`` (sorted paths, relative) that are
    neither in ``site.skip`` nor redirect stubs (``<meta http-equiv=refresh>``) and have a
    main content region by the site's layout."""
    layout = LAYOUTS[site.layout]
    chosen = []
    for path in sorted(root.rglob("*.html")):
        if path.name in site.skip or path.name == START_PAGE:
            continue
        body = path.read_bytes()
        if _REFRESH.search(body[:4096]) or oracle(body, layout) is None:
            continue
        chosen.append(path.relative_to(root).as_posix())
        if len(chosen) == cap:
            break
    return chosen


def write_start_page(root: Path, pages: Iterable[str]) -> str:
    """Write the bench start page (a list of links to ``pages``) into ``root``; its name."""
    links = "\n".join(f'<li><a href="{escape(page)}">{escape(page)}</a></li>' for page in pages)
    (root / START_PAGE).write_text(
        f"<!DOCTYPE html><html><head><title>Bench start</title></head>"
        f"<body><ul>\n{links}\n</ul></body></html>\n",
        encoding="utf-8",
    )
    return START_PAGE


@contextmanager
def served(root: Path) -> Iterator[StaticSite]:
    """:class:`ragsync.testing.StaticSite` on ``root`` for the ``with`` block."""
    with StaticSite(root) as site:
        yield site


# -- the systems ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    """What a system made of one page: its title and each chunk's heading path."""

    title: str
    paths: tuple[tuple[str, ...], ...]


class Unavailable(Exception):
    """A system cannot run on this machine (a package missing): reported, not scored."""


def run_ragsync(start_url: str, work: Path) -> dict[str, Output]:
    """A ``crawl`` source from ``start_url`` (``max_depth = 1``) synced once into a fresh
    state under ``work``; ``{url: Output}`` read back from the state DB (an alias URL maps
    to its document's output)."""
    from ragsync.config import config_from_mapping
    from ragsync.sync import Syncer

    source = {"id": "site", "kind": "crawl", "url": start_url, "max_depth": 1, "every": "0s"}
    config = config_from_mapping(
        {
            "sources": [source],
            "state": {"path": str(work / "state.db")},
            "store": {"path": str(work / "qdrant"), "collection": "bench"},
        },
        base_dir=work,
    )
    with Syncer(config, embedder=FastEmbedder()) as syncer:
        syncer.run()
        documents = {d["doc_key"]: d for d in syncer.state.documents.list("site")}
        paths: dict[str, list[tuple[str, ...]]] = {key: [] for key in documents}
        for doc_key, chunk in syncer.state.index.list_chunks():
            if doc_key in paths:
                paths[doc_key].append(tuple(chunk.headings))
        aliases = list(syncer.state.db.query("select url, doc_key from aliases"))
    outputs = {
        d["canonical_url"]: Output(d["title"] or "", tuple(paths[key]))
        for key, d in documents.items()
        if d["status"] != "tombstoned"
    }
    for alias in aliases:
        document = documents.get(alias["doc_key"])
        if document and document["canonical_url"] in outputs:
            outputs.setdefault(alias["url"], outputs[document["canonical_url"]])
    return outputs


def header_paths(markdown: str) -> list[tuple[str, ...]]:
    """Heading paths of ``markdown``'s chunks as the LangChain peer splits it:
    ``MarkdownHeaderTextSplitter`` on ``#``–``######``, then
    ``RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)``."""
    from langchain_text_splitters import (
        MarkdownHeaderTextSplitter,
        RecursiveCharacterTextSplitter,
    )

    levels = [("#" * level, f"Header {level}") for level in range(1, 7)]
    sections = MarkdownHeaderTextSplitter(headers_to_split_on=levels).split_text(markdown)
    chunks = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200).split_documents(
        sections
    )
    return [
        tuple(
            chunk.metadata[f"Header {level}"]
            for level in range(1, 7)
            if f"Header {level}" in chunk.metadata
        )
        for chunk in chunks
    ]


def run_trafilatura(urls: Iterable[str]) -> dict[str, Output]:
    """Each URL fetched with httpx (``trafilatura.fetch_url`` refuses loopback addresses:
    its SSRF protection) and extracted with trafilatura's defaults, Markdown output."""
    import httpx
    import trafilatura

    outputs = {}
    with httpx.Client(timeout=30) as client:
        for url in urls:
            response = client.get(url)
            if response.status_code != 200:
                continue
            html = response.text
            metadata = trafilatura.extract_metadata(html, default_url=url)
            markdown = trafilatura.extract(html, url=url, output_format="markdown") or ""
            title = (metadata.title or "") if metadata else ""
            outputs[url] = Output(title, tuple(header_paths(markdown)) if markdown else ())
    return outputs


def run_langchain(start_url: str, base_url: str) -> dict[str, Output]:
    """``RecursiveUrlLoader`` from ``start_url`` (``max_depth=2``, scope ``base_url``), then
    ``Html2TextTransformer``; raises :class:`Unavailable` without langchain-community or
    html2text."""
    try:
        import html2text  # noqa: F401
        from langchain_community.document_loaders import RecursiveUrlLoader
        from langchain_community.document_transformers import Html2TextTransformer
    except ImportError as exc:
        raise Unavailable(f"langchain-community or html2text not installed ({exc})") from exc
    loader = RecursiveUrlLoader(start_url, max_depth=2, base_url=base_url)
    documents = Html2TextTransformer().transform_documents(loader.load())
    return {
        d.metadata["source"]: Output(
            collapse(d.metadata.get("title") or ""), tuple(header_paths(d.page_content))
        )
        for d in documents
    }


# -- scoring -------------------------------------------------------------------------------


@dataclass
class Score:
    """Counters of one system on one set of pages (see :func:`score`)."""

    pages: int = 0
    returned: int = 0
    titles_right: int = 0
    chunks: int = 0
    real_path: int = 0
    no_path: int = 0
    not_heading: int = 0
    headings: int = 0
    headings_kept: int = 0
    examples: dict[str, list[str]] = field(default_factory=lambda: {"title": [], "path": []})
    non_headings: Counter[str] = field(default_factory=Counter)

    def shares(self) -> dict[str, Any]:
        def share(part: int, whole: int) -> float | None:
            return round(part / whole, 3) if whole else None

        return {
            "pages": self.pages,
            "returned": self.returned,
            "title_right": share(self.titles_right, self.pages),
            "chunks": self.chunks,
            "real_heading_path": share(self.real_path, self.chunks),
            "no_heading_path": share(self.no_path, self.chunks),
            "under_a_non_heading": share(self.not_heading, self.chunks),
            "headings_kept": share(self.headings_kept, self.headings),
            "counts": {
                "titles_right": self.titles_right,
                "real_heading_path": self.real_path,
                "no_heading_path": self.no_path,
                "under_a_non_heading": self.not_heading,
                "headings": self.headings,
                "headings_kept": self.headings_kept,
            },
            "examples": self.examples,
            # the texts most often taken for headings, with the chunks they head
            "top_non_headings": self.non_headings.most_common(5),
        }


EXAMPLES = 6


def score(truths: Mapping[str, Truth], outputs: Mapping[str, Output]) -> Score:
    """Compare one system's ``outputs`` with the oracle's ``truths`` (both by URL).

    A page the system did not return counts as a wrong title and keeps none of its
    headings. A chunk's path is real when it is non-empty and each of its headings, by
    :func:`heading_key`, is one of its page's headings; it is "under a non-heading" when it
    is non-empty and is not real.
    """
    result = Score(pages=len(truths))
    for url, truth in truths.items():
        real = set(truth.headings)
        result.headings += len(real)
        output = outputs.get(url)
        if output is None:
            if len(result.examples["title"]) < EXAMPLES:
                result.examples["title"].append(f"{url}: not returned")
            continue
        result.returned += 1
        if collapse(output.title) == truth.title:
            result.titles_right += 1
        elif len(result.examples["title"]) < EXAMPLES:
            result.examples["title"].append(f"{url}: {output.title!r}, expected {truth.title!r}")
        kept: set[str] = set()
        for path in output.paths:
            result.chunks += 1
            keys = [heading_key(heading) for heading in path]
            if not keys:
                result.no_path += 1
                continue
            kept.update(key for key in keys if key in real)
            wrong = [heading for heading, key in zip(path, keys, strict=True) if key not in real]
            if not wrong:
                result.real_path += 1
                continue
            result.not_heading += 1
            result.non_headings.update(set(wrong))
            if len(result.examples["path"]) < EXAMPLES:
                result.examples["path"].append(f"{url}: {wrong[0]!r} in {list(path)!r}")
        result.headings_kept += len(kept)
    return result


# -- one bench run -------------------------------------------------------------------------


def bench(
    root: Path,
    pages: Mapping[str, Layout],
    work: Path,
    systems: Iterable[str] = SYSTEMS,
) -> dict[str, Any]:
    """Serve ``root`` (which holds every page of ``pages``, relative paths), run each system
    on those pages and score it against the oracle.

    Returns:
        ``{"pages": n, "systems": {name: shares or {"skipped": reason}}}``.
    """
    truths = {}
    write_start_page(root, pages)
    with served(root) as server:
        base = server.base_url + "/"
        for page, layout in pages.items():
            truth = oracle((root / page).read_bytes(), layout)
            if truth is not None:
                truths[base + page] = truth
        runners: dict[str, Callable[[], dict[str, Output]]] = {
            "ragsync": lambda: run_ragsync(base + START_PAGE, work / "ragsync"),
            "trafilatura": lambda: run_trafilatura(truths),
            "langchain": lambda: run_langchain(base + START_PAGE, base),
        }
        results: dict[str, Any] = {}
        for name in systems:
            started = time.perf_counter()
            try:
                outputs = runners[name]()
            except Unavailable as exc:
                results[name] = {"skipped": str(exc)}
                continue
            results[name] = {
                **score(truths, outputs).shares(),
                "wall_s": round(time.perf_counter() - started, 2),
            }
    return {"pages": len(truths), "systems": results}


def bench_site(site: Site, cap: int, work: Path) -> dict[str, Any]:
    """Copy ``site`` to ``work``, choose at most ``cap`` pages and :func:`bench` them."""
    root = site_root(site)
    if root is None:
        return {"skipped": f"not installed here (looked in {', '.join(site.roots)})"}
    copy = work / "site"
    shutil.copytree(root, copy)
    pages = select_pages(copy, site, cap)
    layout = LAYOUTS[site.layout]
    if site.title_suffix:
        layout = replace(layout, title_suffix=site.title_suffix)
    result = bench(copy, dict.fromkeys(pages, layout), work)
    html_files = sum(1 for _ in copy.rglob("*.html")) - 1  # the start page
    return {
        "generator": layout.generator,
        "source": str(root),
        "html_files": html_files,
        "left_out": html_files - len(pages),
        **result,
    }


# -- the report ----------------------------------------------------------------------------


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


METHOD = (
    "Real documentation installed on this machine, each site served from a copy on 127.0.0.1 "
    "with a start page linking the chosen pages; every system gets the same pages. "
    "**ragsync**: a `crawl` source from the start page, `max_depth = 1`, titles and chunk "
    "heading paths read from its state DB. **trafilatura**: "
    '`extract(html, url=url, output_format="markdown")`, other options at their defaults, '
    "title from `extract_metadata`. **langchain**: `RecursiveUrlLoader(start, max_depth=2)` "
    "+ `Html2TextTransformer()`, title from the loader's metadata. Both peers' Markdown is "
    "split by `MarkdownHeaderTextSplitter` (`#`–`######`) then "
    "`RecursiveCharacterTextSplitter(1000, 200)`. The oracle reads each page's HTML with "
    "lxml: the main content region per generator, its first `<h1>` (else `<title>` without "
    "the site name) as the title, its `h1`–`h6` as the real headings. Titles must match "
    "exactly (whitespace collapsed); headings match after inline Markdown marks and anchor "
    "glyphs (¶ # § 🔗) are removed. A heading path is *real* when it is non-empty and every "
    "heading in it is a real heading of the page; *headings kept*: the page's headings that "
    "are on some chunk's path."
)


def markdown(report: dict[str, Any]) -> str:
    """The Markdown table of a report (see :func:`main`)."""
    lines = [
        f"`{report['command']}`",
        "",
        METHOD,
        "",
        "| site (generator) | system | pages | title right | chunks | real heading path "
        "| no heading path | under a heading that is not one | headings kept |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for name, site in report["sites"].items():
        if "skipped" in site:
            notes.append(f"- {name}: skipped, {site['skipped']}")
            continue
        notes.append(
            f"- {name}: {site['pages']} of {site['html_files']} HTML files of `{site['source']}` "
            f"(left out: whole-site pages, tables of contents, 404 pages, redirect stubs, "
            f"beyond the cap of {report['cap']})"
        )
        for system, row in site["systems"].items():
            if "skipped" in row:
                notes.append(f"- {name} / {system}: skipped, {row['skipped']}")
                continue
            lines.append(
                f"| {name} ({site['generator']}) | {system} | {row['returned']} of "
                f"{row['pages']} | {percent(row['title_right'])} | {row['chunks']:,} | "
                f"{percent(row['real_heading_path'])} | {percent(row['no_heading_path'])} | "
                f"{percent(row['under_a_non_heading'])} | {percent(row['headings_kept'])} |"
            )
            if row["top_non_headings"]:
                taken = ", ".join(f"{text!r} ({n})" for text, n in row["top_non_headings"][:3])
                notes.append(f"- {name} / {system}: taken for headings most often: {taken}")
    return "\n".join([*lines, "", *notes]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cap", type=int, default=150, help="pages per site at most")
    parser.add_argument("--sites", default=",".join(site.name for site in SITES))
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()
    wanted = options.sites.split(",")
    unknown = set(wanted) - {site.name for site in SITES}
    if unknown:
        parser.error(f"unknown sites: {', '.join(sorted(unknown))}")
    command = " ".join(["python eval/bench_docsites.py", *sys.argv[1:]])
    report: dict[str, Any] = {"command": command, "cap": options.cap, "sites": {}}
    for site in SITES:
        if site.name not in wanted:
            continue
        with tempfile.TemporaryDirectory(prefix=f"ragsync-docsites-{site.name}-") as work:
            report["sites"][site.name] = bench_site(site, options.cap, Path(work))
        print(site.name, json.dumps(report["sites"][site.name].get("systems", {}))[:400])
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "docsites.json").write_text(json.dumps(report, indent=2) + "\n")
    (options.out / "docsites.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
