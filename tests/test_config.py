"""Config loading: frozen dataclasses, and errors that name the file and the key."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from ragsync.config import load_config, parse_duration, resolve_env
from ragsync.errors import ConfigError

MINIMAL = """
[[sources]]
id = "docs"
kind = "sitemap"
url = "https://example.org/sitemap.xml"
"""


def write(tmp_path, text):
    path = tmp_path / "ragsync.toml"
    path.write_text(text)
    return path


def test_minimal_file_gets_defaults_and_paths_relative_to_the_file(tmp_path):
    config = load_config(write(tmp_path, MINIMAL))
    assert config.sources[0].id == "docs"
    assert config.sources[0].options.url == "https://example.org/sitemap.xml"
    assert config.state.path == str(tmp_path / ".ragsync" / "state.db")
    assert config.store.path == str(tmp_path / ".ragsync" / "qdrant")
    assert config.chunker.max_tokens == 128
    assert (config.store.kind, config.embedder.backend) == ("auto", "auto")
    assert config.sources[0].missing_grace == 3600
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.chunker.max_tokens = 1  # type: ignore[misc]


def test_urls_source_and_durations(tmp_path):
    config = load_config(
        write(
            tmp_path,
            """
[[sources]]
id = "pages"
kind = "urls"
urls = ["https://example.org/a"]
every = "15m"
missing_grace = "2h"
refetch_interval = "3d"
""",
        )
    )
    source = config.sources[0]
    assert source.options.urls == ("https://example.org/a",)
    assert (source.every, source.missing_grace) == (900, 7200)
    assert source.refetch_interval == 3 * 86400
    assert load_config(write(tmp_path, MINIMAL)).sources[0].refetch_interval == 7 * 86400


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        (
            MINIMAL + "\n[chunker]\nmax_tokns = 100\n",
            "chunker.max_tokns",
            "did you mean 'max_tokens'",
        ),
        (MINIMAL + '\n[chunker]\nmax_tokens = "big"\n', "chunker.max_tokens", "must be an integer"),
        ('[[sources]]\nid = "docs"\nkind = "sitemap"\n', "sources[0].url", "missing required key"),
        (
            MINIMAL.replace('id = "docs"\n', 'id = "docs"\nevry = "1h"\n'),
            "sources[0].evry",
            "did you mean 'every'",
        ),
        (MINIMAL.replace('"sitemap"', '"sitemp"'), "sources[0].kind", "unknown source kind"),
        (MINIMAL + '\n[fetch]\ntimeout = "soon"\n', "fetch.timeout", "not a duration"),
        (
            MINIMAL.replace('kind = "sitemap"', 'kind = "sitemap"\nrefetch_interval = "0s"'),
            "sources[0].refetch_interval",
            "more than 0",
        ),
        (
            MINIMAL.replace('kind = "sitemap"', 'kind = "sitemap"\nevery = "often"'),
            "sources[0].every",
            "not a duration",
        ),
        ('[state]\npath = "x.db"\n', "sources", "missing required key"),
        (MINIMAL + MINIMAL, "sources[1].id", "duplicate source id"),
        (MINIMAL + '\n[stat]\npath = "x"\n', "stat", "did you mean 'state'"),
        (MINIMAL + '\n[server]\nlisten_on = "x"\n', "server.listen_on", "did you mean"),
        (MINIMAL + '\n[[events]]\nsecret = "x"\n', "events[0].url", "missing required key"),
        ('[[sources]]\nid = "p"\nkind = "urls"\n', "sources[0].urls", "give `urls"),
        (
            MINIMAL.replace('kind = "sitemap"', 'kind = "sitemap"\nmax_pages = 5'),
            "sources[0].max_pages",
            "not a key of 'sitemap' sources, only of 'crawl' and 'http_api'",
        ),
    ],
)
def test_bad_config_names_file_and_key(tmp_path, text, key, fragment):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message and key in message and fragment in message


def test_invalid_toml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(write(tmp_path, "[[sources]\n"))
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("name", "text", "key"),
    [
        ("unknown key", MINIMAL + "\n[fetch]\nconcurency = 2\n", "fetch.concurency"),
        ("wrong type", MINIMAL + '\n[embedder]\nbatch_size = "64"\n', "embedder.batch_size"),
        ("missing source url", '[[sources]]\nid = "d"\nkind = "sitemap"\n', "sources[0].url"),
    ],
)
def test_cli_exits_2_naming_the_key(tmp_path, name, text, key):
    path = write(tmp_path, text)
    proc = subprocess.run(
        [sys.executable, "-m", "ragsync", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, (name, proc.stderr)
    assert key in proc.stderr and str(path) in proc.stderr
    assert proc.stdout == ""


def test_durations_and_env_references(monkeypatch):
    assert parse_duration("90s") == 90 and parse_duration("1.5h") == 5400
    assert parse_duration(30) == 30
    with pytest.raises(ValueError):
        parse_duration("1 fortnight")
    monkeypatch.setenv("RAGSYNC_TEST_SECRET", "s3cr3t")
    assert resolve_env("Bearer ${RAGSYNC_TEST_SECRET}", key="k") == "Bearer s3cr3t"
    monkeypatch.delenv("RAGSYNC_TEST_SECRET")
    with pytest.raises(ConfigError, match="RAGSYNC_TEST_SECRET is not set") as info:
        resolve_env("${RAGSYNC_TEST_SECRET}", key="store.api_key")
    assert "store.api_key" in str(info.value)
