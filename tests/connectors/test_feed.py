"""The feed connector: RSS 2.0, RSS 1.0, Atom 1.0; dropping off a feed is never a deletion."""

from __future__ import annotations

from pathlib import Path

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
