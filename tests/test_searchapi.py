"""The pure parts of warm search (ragsync/searchapi.py): parameters, access, the shared store."""

from __future__ import annotations

import pytest

from ragsync.config import config_from_mapping
from ragsync.errors import ConfigError
from ragsync.models import Hit
from ragsync.searchapi import (
    ParamError,
    SearchParams,
    SharedStore,
    authorized,
    hit_dict,
    hit_from_dict,
    index_id,
    is_loopback,
    parse_search_params,
    search_access,
)
from ragsync.searchclient import serve_url

SOURCES = {"docs", "blog"}


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"q": ["rotate keys"]}, SearchParams("rotate keys", 5, None)),
        ({"q": ["  x  "], "k": ["1"]}, SearchParams("x", 1, None)),
        ({"q": ["x"], "k": ["100"], "source": ["blog"]}, SearchParams("x", 100, "blog")),
        ({"q": ["x"], "source": [""]}, SearchParams("x", 5, None)),
        ({"q": ["x"], "mode": ["sparse"]}, SearchParams("x", 5, None, "sparse")),
        ({"q": ["x"], "mode": [""]}, SearchParams("x", 5, None, None)),
    ],
)
def test_valid_parameters(params, expected):
    assert parse_search_params(params, SOURCES) == expected


@pytest.mark.parametrize(
    ("params", "param", "status"),
    [
        ({}, "q", 400),
        ({"q": [""]}, "q", 400),
        ({"q": ["   "]}, "q", 400),
        ({"q": ["x" * 2001]}, "q", 400),
        ({"q": ["a", "b"]}, "q", 400),
        ({"q": ["x"], "k": ["ten"]}, "k", 400),
        ({"q": ["x"], "k": ["-1"]}, "k", 400),
        ({"q": ["x"], "k": ["2.5"]}, "k", 400),
        ({"q": ["x"], "k": ["٣"]}, "k", 400),  # a digit, but not an ASCII one
        ({"q": ["x"], "k": ["0"]}, "k", 422),
        ({"q": ["x"], "k": ["101"]}, "k", 422),
        ({"q": ["x"], "source": ["nope"]}, "source", 422),
        ({"q": ["x"], "mode": ["bm25"]}, "mode", 400),
        ({"q": ["x"], "mode": ["dense", "sparse"]}, "mode", 400),
    ],
)
def test_parameter_errors_name_the_parameter(params, param, status):
    with pytest.raises(ParamError) as caught:
        parse_search_params(params, SOURCES)
    assert (caught.value.param, caught.value.status) == (param, status)


@pytest.mark.parametrize(
    ("host", "token", "access"),
    [
        ("127.0.0.1", None, "loopback"),
        ("127.0.0.2", None, "loopback"),
        ("::1", None, "loopback"),
        ("localhost", None, "loopback"),
        ("0.0.0.0", None, "off"),
        ("::", None, "off"),
        ("192.168.1.5", None, "off"),
        ("myhost", None, "off"),  # a name may resolve to any interface
        ("0.0.0.0", "t" * 32, "token"),
        ("127.0.0.1", "t" * 32, "token"),  # a token, once set, is always required
    ],
)
def test_who_may_search(host, token, access):
    assert search_access(host, token) == access
    assert search_access(host, None) == ("loopback" if is_loopback(host) else "off")


def test_bearer_header():
    token = "s3cret-token-0123456789"
    assert authorized(f"Bearer {token}", token)
    assert authorized(f"bearer {token}", token)  # the scheme is case-insensitive
    for header in (None, "", token, f"Basic {token}", f"Bearer {token}x", "Bearer "):
        assert not authorized(header, token)


def test_search_token_is_a_strict_config_key():
    base = {"sources": [{"id": "docs", "kind": "urls", "urls": ["https://x.example/"]}]}
    for bad in ("short", "has space in it 0123", "x" * 257, ""):
        with pytest.raises(ConfigError) as caught:
            config_from_mapping({**base, "server": {"search_token": bad}})
        assert caught.value.key == "server.search_token"
    with pytest.raises(ConfigError) as caught:
        config_from_mapping({**base, "server": {"search_tokn": "x" * 20}})
    assert "search_token" in str(caught.value)  # did you mean
    for good in ("${RAGSYNC_SEARCH_TOKEN}", "a" * 16, "AbC-._~+/0123456789=="):
        config = config_from_mapping({**base, "server": {"search_token": good}})
        assert config.server.search_token == good


def test_hits_round_trip_through_json():
    hit = Hit(0.5, "text", "https://x/", "T", ("A", "B"), "docs", "docs:https://x/", "id-1")
    assert hit_from_dict(hit_dict(hit)) == hit
    assert hit_dict(hit)["headings"] == ["A", "B"]


def test_serve_url_and_index_id():
    base = {"sources": [{"id": "docs", "kind": "urls", "urls": ["https://x.example/"]}]}
    config = config_from_mapping({**base, "server": {"listen": "[::]:9001"}})
    assert serve_url(config) == "http://[::1]:9001/search"
    other = config_from_mapping({**base, "store": {"collection": "other"}})
    assert index_id(config) != index_id(other)
    assert index_id(config) == index_id(config_from_mapping(base))


class FakeStore:
    def __init__(self, log: list[str]):
        self.log = log
        log.append("open")

    def search(self, vector, k, source=None):
        return []

    def close(self):
        self.log.append("close")


def test_shared_store_stays_open_while_queries_are_recent():
    log: list[str] = []
    now = [0.0]
    shared = SharedStore(lambda: FakeStore(log), keep_open=60, clock=lambda: now[0])
    shared.search([0.0], 1)
    shared.close()  # the engine's release after a pass: a query was just made
    assert log == ["open"]
    now[0] = 59
    shared.release_if_idle()
    shared.search([0.0], 1)  # no reopen
    assert log == ["open"]
    now[0] = 120
    shared.release_if_idle()  # idle for 61 s
    assert log == ["open", "close"]
    shared.search([0.0], 1)
    shared.shutdown()
    assert log == ["open", "close", "open", "close"]


def test_shared_store_without_queries_closes_after_each_pass_as_before():
    log: list[str] = []
    shared = SharedStore(lambda: FakeStore(log), keep_open=60)
    shared.store  # noqa: B018 - a pass opens it
    shared.close()
    assert log == ["open", "close"]
