"""Pages, sitemaps and feeds in real encodings, synced end to end from a site on 127.0.0.1 and
searched (README "Extraction", "Discovery"): each is read in the encoding a browser would
read it in."""

from __future__ import annotations

from urllib.parse import quote

from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import make_config, page, sentences, sitemap_source


def html(title: str, text: str, head: str = "") -> str:
    return (
        f"<!doctype html><html><head>{head}<title>{title}</title></head>"
        f"<body><main><h1>{title}</h1><p>{text}</p></main></body></html>"
    )


def test_a_utf8_page_with_a_byte_order_mark_served_as_latin1_is_found_as_zurich(tmp_path, embedder):
    """The byte-order mark comes first (the HTML Standard's encoding sniffing): the header's
    ISO-8859-1 would read every ü as Ã¼."""
    site = DevSite(
        {
            "/geneva": page("Geneva", {"Lake": [sentences("geneva lake jet")]}),
            "/zurich": ("placeholder", "<p>served by the fault below</p>"),
        }
    )
    body = "\ufeff" + html(
        "Zürich",
        "Zürich liegt am Zürichsee. Die Bahnhofstrasse führt vom Hauptbahnhof zum See, "
        "und die Altstadt ist für Fussgänger.",
    )
    site.fault = lambda path, headers: (
        (200, {"Content-Type": "text/html; charset=iso-8859-1"}, body.encode("utf-8"))
        if path == "/zurich"
        else None
    )
    site.start()
    try:
        config = make_config(tmp_path, [sitemap_source(site)])
        with Syncer(config, embedder=embedder) as syncer:
            result = syncer.run()
            assert result.ok, result.to_dict()
            url = site.base_url + "/zurich"
            markdown = syncer.state.documents.get(f"docs:{url}")["markdown"]
            sparse = syncer.search("Zürich", k=3, mode="sparse")
            dense = syncer.search("Zürich Bahnhofstrasse", k=3)
    finally:
        site.stop()
    assert markdown.startswith("# Zürich") and "Ã" not in markdown
    assert "Zürich liegt am Zürichsee" in markdown
    assert sparse and sparse[0].url == url and "Zürich" in sparse[0].text
    assert dense[0].url == url


PAGES = {
    # path: (Content-Type, bytes)
    "/café.html": (
        "text/html",
        html(
            "Crème brûlée",
            "Le café de la gare sert une crème brûlée — 5 € — “déjà vu”.",
            '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">',
        ).encode("cp1252"),
    ),
    "/東京.html": (
        "text/html; charset=Shift_JIS",
        html("東京", "東京タワー ①番線 は 晴れ です。").encode("cp932"),
    ),
    "/北京.html": (
        "text/html",
        html("北京", "北京烤鸭 𠀀 很 好吃。", '<meta charset="gb18030">').encode("gb18030"),
    ),
    "/zürich.html": (
        "text/html; charset=iso-8859-1",
        b"\xfe\xff" + html("Zürich", "Zürichsee Bahnhofstrasse Altstadt.").encode("utf-16-be"),
    ),
}


def sitemap_utf16(base: str) -> bytes:
    """The sitemap in UTF-16LE with a byte-order mark, its URLs' paths written as IRIs."""
    urls = "".join(
        f"<url><loc>{base}{path}</loc><lastmod>2026-03-0{i + 1}</lastmod></url>"
        for i, path in enumerate(PAGES)
        if path != "/東京.html"
    )
    xml = (
        '<?xml version="1.0" encoding="UTF-16"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
    )
    return b"\xff\xfe" + xml.encode("utf-16-le")


def feed_shift_jis(base: str) -> bytes:
    """A Shift_JIS feed whose title has ①, which Python's shift_jis (and libxml2's) lack."""
    return (
        '<?xml version="1.0" encoding="Shift_JIS"?><rss version="2.0"><channel>'
        "<title>東京①ニュース</title><item><title>東京①</title>"
        f"<link>{base}/東京.html</link><guid>東京-1</guid></item></channel></rss>"
    ).encode("cp932")


def test_pages_sitemaps_and_feeds_in_real_encodings_are_indexed_and_found(tmp_path, embedder):
    site = DevSite(robots=None)
    site.start()
    served = {quote(path): answer for path, answer in PAGES.items()}
    served["/sitemap.xml"] = ("application/xml", sitemap_utf16(site.base_url))
    served["/feed.xml"] = ("application/rss+xml", feed_shift_jis(site.base_url))

    def fault(path, headers):
        if path in served:
            content_type, body = served[path]
            return 200, {"Content-Type": content_type}, body
        return None

    site.fault = fault
    sources = [
        sitemap_source(site),
        {"id": "news", "kind": "feed", "url": site.base_url + "/feed.xml"},
    ]
    try:
        config = make_config(tmp_path, sources)
        with Syncer(config, embedder=embedder) as syncer:
            result = syncer.run()
            assert result.ok, result.to_dict()
            markdown = {
                doc["canonical_url"].removeprefix(site.base_url): doc["markdown"]
                for doc in syncer.state.documents.list()
            }
            found = {
                word: syncer.search(word, k=1, mode="sparse")[0].url.removeprefix(site.base_url)
                for word in ("crème", "東京タワー", "北京烤鸭", "zürichsee")
            }
    finally:
        site.stop()
    assert set(markdown) == {quote(path) for path in PAGES}
    assert "crème brûlée — 5 € — “déjà vu”" in markdown[quote("/café.html")]
    assert "東京タワー ①番線" in markdown[quote("/東京.html")]
    assert "北京烤鸭 𠀀" in markdown[quote("/北京.html")]
    assert "Zürichsee Bahnhofstrasse" in markdown[quote("/zürich.html")]
    assert found == {
        "crème": quote("/café.html"),
        "東京タワー": quote("/東京.html"),
        "北京烤鸭": quote("/北京.html"),
        "zürichsee": quote("/zürich.html"),
    }
