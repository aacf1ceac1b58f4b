"""The feed connector: RSS 2.0, RSS 1.0, Atom 1.0; dropping off a feed is never a deletion."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from ragsync.connectors.feed import parse_feed
from ragsync.testing import DevSite
from tests.support import page, sentences

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.parametrize(
    ("name", "version", "entries"),
    [
        (
            "rss2.xml",
            "rss20",
            [
                (
                    "post-2",
                    "https://blog.example.org/posts/second?utm_source=rss",
                    "2026-11-03T10:00:00Z",
                ),
                (
                    "https://blog.example.org/posts/first",
                    "https://blog.example.org/posts/first",
                    "2026-11-02T09:00:00Z",
                ),
            ],
        ),
        (
            "rss1.rdf",
            "rss10",
            [
                (
                    "https://blog.example.org/posts/first",
                    "https://blog.example.org/posts/first",
                    "2026-11-02T09:00:00Z",
                ),
            ],
        ),
        (
            "atom.xml",
            "atom10",
            [
                ("urn:uuid:2", "https://blog.example.org/posts/second", "2026-11-03T10:00:00Z"),
            ],
        ),
    ],
)
def test_parse_feed(name, version, entries):
    parsed = parse_feed((FIXTURES / name).read_bytes())
    assert parsed["version"] == version
    assert [(e["id"], e["link"], e["updated"]) for e in parsed["entries"]] == entries


@pytest.mark.parametrize("body", [b"<html><body>not a feed</body></html>", b"{}", b""])
def test_not_a_feed(body):
    with pytest.raises(ValueError, match="not a feed"):
        parse_feed(body)


def test_a_feed_declaring_entities_is_refused():
    bomb = (
        (FIXTURES / "rss2.xml")
        .read_bytes()
        .replace(
            b"<rss", b'<!DOCTYPE rss [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><rss', 1
        )
    )
    with pytest.raises(ValueError, match="hostile XML refused"):
        parse_feed(bomb)


def feed_xml(base, paths):
    items = "".join(
        f"<item><title>{p}</title><link>{base}{p}</link><guid>{p}</guid>"
        f"<pubDate>Tue, 0{i + 1} Nov 2026 10:00:00 GMT</pubDate></item>"
        for i, p in enumerate(paths)
    )
    return (
        f'<?xml version="1.0"?><rss version="2.0"><channel><title>b</title>'
        f"<link>{base}/</link><description>d</description>{items}</channel></rss>"
    ).encode()


def test_feed_entries_are_indexed_and_dropping_off_is_not_a_deletion(make_syncer):
    posts = {f"/posts/{i}": page(f"Post {i}", {"Body": [sentences(f"post {i}")]}) for i in range(3)}
    site = DevSite(posts)
    site.start()
    listed = ["/posts/0", "/posts/1", "/posts/2"]
    site.fault = lambda path, headers: (
        (200, {"Content-Type": "application/rss+xml"}, feed_xml(site.base_url, listed))
        if path == "/feed.xml"
        else None
    )
    try:
        syncer = make_syncer(site, "/feed.xml", kind="feed")
        assert syncer.run().counters.documents_created == 3
        checkpoint = syncer.state.discovery.get_checkpoint("docs")
        assert checkpoint["newest"] == "2026-11-03T10:00:00Z"
        assert sorted(checkpoint["ids"]) == listed
        listed[:] = ["/posts/2"]  # two entries drop off the feed
        for _ in range(3):
            result = syncer.run()
            assert result.ok and result.counters.tombstones_created == 0
        statuses = {d["canonical_url"]: d["status"] for d in syncer.state.documents.list()}
        assert set(statuses.values()) == {"active"} and len(statuses) == 3
    finally:
        site.stop()


def test_feed_options_are_validated(tmp_path):
    from ragsync.config import load_config
    from ragsync.errors import ConfigError

    path = tmp_path / "ragsync.toml"
    path.write_text('[[sources]]\nid = "blog"\nkind = "feed"\nurl = "ftp://x"\n')
    with pytest.raises(ConfigError, match=r"sources\[0\]\.url"):
        load_config(path)


# --- relative entry links (#17) --------------------------------------------------------------
ATOM_BASES = b"""<?xml version="1.0"?>
<feed xmlns="http://www.w3.org/2005/Atom" xml:base="/blog/">
  <title>t</title><id>urn:feed</id><updated>2026-11-03T10:00:00Z</updated>
  <entry><id>1</id><title>a</title><updated>2026-11-03T10:00:00Z</updated>
    <link href="posts/a"/></entry>
  <entry xml:base="https://docs.example.org/x/"><id>2</id><title>b</title>
    <updated>2026-11-03T10:00:00Z</updated><link href="b"/></entry>
  <entry><id>3</id><title>c</title><updated>2026-11-03T10:00:00Z</updated>
    <link href="/abs/c"/></entry>
</feed>"""
RSS_RELATIVE = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
<item><title>a</title><link>posts/a.html</link></item>
<item><title>b</title><link>https://abs.example.org/b</link></item>
<item><title>c</title><guid isPermaLink="true">../c</guid></item>
<item><title>no link</title><description>x</description></item>
<item><title>script</title><link>javascript:alert(1)</link></item>
<item><title>mail</title><link>mailto:a@example.org</link></item>
</channel></rss>"""


def links(parsed):
    return [e["link"] for e in parsed["entries"]]


@pytest.mark.parametrize(
    ("content_location", "expected"),
    [
        (  # xml:base, itself relative, against the feed's URL
            None,
            [
                "https://site.example.org/blog/posts/a",
                "https://docs.example.org/x/b",
                "https://site.example.org/abs/c",
            ],
        ),
        (  # … against Content-Location, resolved against the feed's URL
            "https://mirror.example.org/feeds/all.atom",
            [
                "https://mirror.example.org/blog/posts/a",
                "https://docs.example.org/x/b",
                "https://mirror.example.org/abs/c",
            ],
        ),
        (
            "/v2/feed.atom",
            [
                "https://site.example.org/blog/posts/a",
                "https://docs.example.org/x/b",
                "https://site.example.org/abs/c",
            ],
        ),
    ],
)
def test_relative_atom_links_resolve_against_xml_base(content_location, expected):
    parsed = parse_feed(
        ATOM_BASES, url="https://site.example.org/feeds/all.atom", content_location=content_location
    )
    assert links(parsed) == expected and parsed["unresolved"] == 0


def test_relative_rss_links_resolve_against_the_feed_url_and_the_rest_are_counted():
    parsed = parse_feed(RSS_RELATIVE, url="https://site.example.org/feeds/rss.xml")
    assert links(parsed) == [
        "https://site.example.org/feeds/posts/a.html",
        "https://abs.example.org/b",
        "https://site.example.org/c",
    ]
    assert parsed["unresolved"] == 3  # no link, javascript:, mailto:


def test_relative_rss_links_resolve_against_content_location():
    parsed = parse_feed(
        RSS_RELATIVE,
        url="https://site.example.org/feeds/rss.xml",
        content_location="https://site.example.org/en/rss.xml",
    )
    assert links(parsed)[0] == "https://site.example.org/en/posts/a.html"


def test_relative_feed_links_are_indexed_and_unresolvable_ones_warned(make_syncer):
    posts = {f"/posts/{i}": page(f"Post {i}", {"Body": [sentences(f"post {i}")]}) for i in range(3)}
    site = DevSite(posts)
    site.start()
    body = (
        b'<?xml version="1.0"?><rss version="2.0"><channel><title>b</title>'
        b"<item><title>0</title><link>posts/0</link></item>"  # against the feed's URL
        b"<item><title>1</title><link>/posts/1</link></item>"
        b"<item><title>2</title><link>../posts/2</link></item>"
        b"<item><title>x</title><link>javascript:void(0)</link></item>"
        b"</channel></rss>"
    )
    site.fault = lambda path, headers: (
        (200, {"Content-Type": "application/rss+xml"}, body) if path == "/feed.xml" else None
    )
    try:
        syncer = make_syncer(site, "/feed.xml", kind="feed")
        result = syncer.run()
        assert result.counters.documents_created == 3
        urls = sorted(d["canonical_url"] for d in syncer.state.documents.list())
        assert urls == [f"{site.base_url}/posts/{i}" for i in range(3)]
        outcome = result.sources["docs"]
        assert any("1 entries without a link" in error for error in outcome.errors)
    finally:
        site.stop()


def test_a_feed_behind_a_redirect_resolves_against_where_it_was_fetched(make_syncer):
    posts = {"/blog/posts/0": page("Post 0", {"Body": [sentences("post 0")]})}
    site = DevSite(posts)
    site.start()
    body = (
        b'<?xml version="1.0"?><rss version="2.0"><channel><title>b</title>'
        b"<item><title>0</title><link>posts/0</link></item></channel></rss>"
    )

    def fault(path, headers):
        if path == "/feed.xml":
            return 301, {"Location": f"{site.base_url}/blog/feed.xml"}, b""
        if path == "/blog/feed.xml":
            return 200, {"Content-Type": "application/rss+xml"}, body
        return None

    site.fault = fault
    try:
        syncer = make_syncer(site, "/feed.xml", kind="feed")
        assert syncer.run().counters.documents_created == 1
        (document,) = syncer.state.documents.list()
        assert document["canonical_url"] == f"{site.base_url}/blog/posts/0"
    finally:
        site.stop()


def test_a_feed_is_read_in_the_charset_its_response_names(make_syncer):
    """RFC 7303 §3: the ``Content-Type`` charset names the encoding of a feed that has no
    byte-order mark (over HTTP, feedparser never sees it unless it is passed on); ① is in
    Shift_JIS as browsers read it, not in Python's shift_jis."""
    paths = ["/東京/①.html", "/東京/②.html"]
    site = DevSite({quote(p): page(p, {"Body": [sentences(f"tokyo {p}")]}) for p in paths})
    base = site.start()
    body = feed_xml(base, paths).decode().replace('<?xml version="1.0"?>', "")
    site.fault = lambda path, headers: (
        (200, {"Content-Type": "application/rss+xml; charset=Shift_JIS"}, body.encode("cp932"))
        if path == "/feed.xml"
        else None
    )
    try:
        syncer = make_syncer(site, "/feed.xml", kind="feed")
        result = syncer.run()
        indexed = {d["canonical_url"] for d in syncer.state.documents.list()}
    finally:
        site.stop()
    assert result.ok and result.counters.documents_created == 2
    assert indexed == {base + quote(p) for p in paths}
