"""Helpers the tests import (fixtures stay in ``tests/conftest.py``).

The fuzz suite's origin and mutators, the raw socket server and the rate-limited origin are
modules of their own here: :mod:`tests.support.fuzzing`, :mod:`tests.support.mutators`,
:mod:`tests.support.rawserver`, :mod:`tests.support.rateorigin`.
"""

from tests.support.backends import (
    TEST_STATE,
    TEST_STORE,
    make_config,
    postgres_database,
    postgres_url,
    sitemap_source,
    state_table,
    state_target,
    store_table,
)
from tests.support.cli import ragsync_cli, ragsync_run, store_texts, write_cli_config
from tests.support.doubles import Clock, CountingEmbedder
from tests.support.pages import example_pages, page, sentences

__all__ = [
    "TEST_STATE",
    "TEST_STORE",
    "Clock",
    "CountingEmbedder",
    "example_pages",
    "make_config",
    "page",
    "postgres_database",
    "postgres_url",
    "ragsync_cli",
    "ragsync_run",
    "sentences",
    "sitemap_source",
    "state_table",
    "state_target",
    "store_table",
    "store_texts",
    "write_cli_config",
]
