"""The ``crawl`` source's config and its start pages (the crawl itself: tests/scenarios)."""

from __future__ import annotations

import pytest

from ragsync.config import load_config
from ragsync.errors import ConfigError
from ragsync.protocols import Crawler
from ragsync.registry import source_class
from ragsync.urls import start_directory


def write(tmp_path, source: str):
    path = tmp_path / "ragsync.toml"
    path.write_text(f'[[sources]]\nid = "book"\nkind = "crawl"\n{source}\n', encoding="utf-8")
    return path


def test_a_crawl_source_reads_its_start_pages_and_caps(tmp_path):
    config = load_config(
        write(
            tmp_path,
            'url = "https://docs.example.org/book/"\n'
            'urls = ["https://docs.example.org/book/", "https://docs.example.org/guide/intro.html"]\n'
            "max_depth = 20\nmax_pages = 100",
        )
    )
    source = config.sources[0]
    crawler = source_class("crawl")(source.options)
    assert isinstance(crawler, Crawler)
    assert crawler.start_urls == (
        "https://docs.example.org/book/",
        "https://docs.example.org/guide/intro.html",
    )
    assert (crawler.max_depth, crawler.max_pages) == (20, 100)
    assert [start_directory(url) for url in crawler.start_urls] == [
        "https://docs.example.org/book/",
        "https://docs.example.org/guide/",
    ]


@pytest.mark.parametrize(
    ("source", "key", "fragment"),
    [
        ("", "sources[0].url", "give the start page"),
        ('url = "ftp://docs.example.org/"', "sources[0].url", "http(s) URL"),
        ('urls = ["https://u:p@docs.example.org/"]', "sources[0].urls[0]", "credentials"),
        ('url = "https://a.example/"\nmax_pages = 0', "sources[0].max_pages", "at least 1"),
        ('url = "https://a.example/"\nmax_depth = -1', "sources[0].max_depth", "at least 0"),
        ('url = "https://a.example/"\nmax_dept = 3', "sources[0].max_dept", "did you mean"),
    ],
)
def test_a_bad_crawl_source_names_the_key(tmp_path, source, key, fragment):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, source))
    assert key in str(info.value) and fragment in str(info.value), str(info.value)
