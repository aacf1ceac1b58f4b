"""Shared fixtures: a real site on 127.0.0.1, the real MiniLM model behind a counting wrapper.

The helpers these fixtures use, and that tests import, are in :mod:`tests.support`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragsync.embed import SentenceTransformerEmbedder
from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import CountingEmbedder, example_pages, make_config, sitemap_source


@pytest.fixture(scope="session")
def real_embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


@pytest.fixture
def embedder(real_embedder: SentenceTransformerEmbedder) -> CountingEmbedder:
    return CountingEmbedder(real_embedder)


@pytest.fixture
def site() -> Iterator[DevSite]:
    site = DevSite(example_pages())
    site.start()
    yield site
    site.stop()


@pytest.fixture
def make_syncer(tmp_path: Path, embedder: CountingEmbedder):
    made: list[Syncer] = []

    def build(site: DevSite, path: str = "/sitemap.xml", **source: Any) -> Syncer:
        config = make_config(tmp_path, [sitemap_source(site, path, **source)])
        syncer = Syncer(config, embedder=embedder)
        made.append(syncer)
        return syncer

    yield build
    for syncer in made:
        syncer.close()
