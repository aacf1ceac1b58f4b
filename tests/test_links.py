"""The outlinks a crawl follows (:mod:`ragsync.links`)."""

from __future__ import annotations

from ragsync.links import MAX_LINKS, page_links, robots_directives

BASE = "https://docs.example.org/book/ch1.html"


def links(html: str, **kwargs) -> tuple[str, ...]:
    return page_links(html.encode(), "text/html; charset=utf-8", BASE, **kwargs).links


def test_links_are_absolute_without_fragment_deduplicated_in_page_order():
    html = (
        '<a href="ch2.html#sec">2</a><a href="ch2.html">2 again</a><A HREF="../index.html">up</A>'
        '<a href="/top">top</a><a href="?page=2">q</a><area href="map.html">'
        '<a href="#only-a-fragment">same page</a><a href=" \tch3.html\n">spaces</a>'
    )
    assert links(html) == (
        "https://docs.example.org/book/ch2.html",
        "https://docs.example.org/index.html",
        "https://docs.example.org/top",
        "https://docs.example.org/book/ch1.html?page=2",
        "https://docs.example.org/book/map.html",
        "https://docs.example.org/book/ch1.html",
        "https://docs.example.org/book/ch3.html",
    )


def test_only_http_links_and_no_link_without_href():
    html = (
        '<a href="mailto:a@example.org">m</a><a href="javascript:go()">j</a>'
        '<a href="ftp://example.org/f">f</a><a name="anchor">n</a><a href="">e</a>'
        '<a href="data:text/html,hi">d</a><link href="style.css" rel="stylesheet">'
        '<a href="HTTP://Other.example/x">other host</a>'
    )
    assert links(html) == ("HTTP://Other.example/x",)  # canonicalised by the listing


def test_base_href_resolves_relative_links():
    html = '<base href="https://docs.example.org/v2/"><a href="a.html">a</a>'
    assert links(html) == ("https://docs.example.org/v2/a.html",)
    html = '<base href="../shared/"><a href="a.html">a</a>'
    assert links(html) == ("https://docs.example.org/shared/a.html",)


def test_rel_nofollow_links_are_left_out():
    html = (
        '<a rel="nofollow" href="a.html">a</a><a rel="noopener NoFollow" href="b.html">b</a>'
        '<a rel="next" href="c.html">c</a>'
    )
    assert links(html) == ("https://docs.example.org/book/c.html",)


def test_meta_robots_nofollow_none_and_noindex():
    found = page_links(
        b'<meta name="robots" content="nofollow"><a href="a">a</a>', "text/html", BASE
    )
    assert found.nofollow and not found.noindex and found.links == ()
    found = page_links(b'<meta name="ROBOTS" content="None"><a href="a">a</a>', "text/html", BASE)
    assert found.nofollow and found.noindex and found.links == ()
    found = page_links(
        b'<meta name="robots" content="noindex"><a href="a">a</a>', "text/html", BASE
    )
    assert found.noindex and found.links == ("https://docs.example.org/book/a",)
    found = page_links(b'<meta name="ragsync" content="noindex">', "text/html", BASE)
    assert found.noindex
    found = page_links(b'<meta name="googlebot" content="noindex, nofollow">', "text/html", BASE)
    assert not found.noindex and not found.nofollow


def test_x_robots_tag_header():
    body = b'<a href="a">a</a>'
    found = page_links(body, "text/html", BASE, {"x-robots-tag": "noindex, nofollow"})
    assert found.noindex and found.nofollow and found.links == ()
    found = page_links(body, "text/html", BASE, {"x-robots-tag": "otherbot: noindex"})
    assert not found.noindex and found.links


def test_robots_directives_for_an_agent():
    assert robots_directives("noindex,NOFOLLOW") == {"noindex", "nofollow"}
    assert robots_directives("ragsync: noindex") == {"noindex"}
    assert robots_directives("googlebot: noindex") == set()
    assert robots_directives("") == set()


def test_charset_from_the_header_or_a_meta_tag():
    body = '<a href="café.html">c</a>'.encode("latin-1")
    found = page_links(body, "text/html; charset=ISO-8859-1", BASE)
    assert found.links == ("https://docs.example.org/book/café.html",)
    found = page_links(b'<meta charset="latin-1">' + body, "text/html", BASE)
    assert found.links == ("https://docs.example.org/book/café.html",)
    found = page_links(body, "text/html; charset=no-such-charset", BASE)  # never raises
    assert len(found.links) == 1


def test_a_page_with_too_many_links_is_cut_and_says_so():
    html = "".join(f'<a href="p{i}.html">{i}</a>' for i in range(MAX_LINKS + 5))
    found = page_links(html.encode(), "text/html", BASE)
    assert found.truncated and len(found.links) == MAX_LINKS


def test_broken_markup_never_raises():
    for html in ("<a href='x", "<a href=x.html", "<<<>>><a/href=y>", "<!-- <a href=z>", "\x00<a"):
        page_links(html.encode(), "text/html", BASE)
