"""Resources that run out are named (README "Resource limits"): what a library raises for a
full device or an exhausted file table becomes one ResourceError, and a run out of file
descriptors stops at once instead of failing page after page."""

from __future__ import annotations

import errno
import sqlite3

import httpx
import pytest

from ragsync.errors import ResourceError
from ragsync.resources import os_resource_error, resource_error, sqlite_resource_error
from ragsync.sync import Syncer
from ragsync.testing import DevSite, FastEmbedder
from tests.support import example_pages, make_config, sitemap_source


@pytest.mark.parametrize(
    ("raised", "reason"),
    [
        (OSError(errno.ENOSPC, "No space left on device", "/srv/x"), "no space left"),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), "no space left"),
        (OSError(errno.EMFILE, "Too many open files"), "too many open files"),
        (Exception("Service error: No space left on device (os error 28)"), "no space left"),
        (Exception("Too many open files (os error 24)"), "too many open files"),
        (OSError(errno.EACCES, "Permission denied"), None),
        (Exception("Service runtime error: Tracker journal is shorter than expected"), None),
    ],
)
def test_what_libraries_raise_for_a_full_device_or_no_files_is_named(raised, reason):
    found = resource_error(raised, where="the store")
    if reason is None:
        assert found is None
    else:
        assert found is not None and reason in found.reason and found.where == "the store"


def test_sqlite_full_names_the_state_db_and_its_free_space(tmp_path):
    full = sqlite3.OperationalError("database or disk is full")
    found = sqlite_resource_error(full, str(tmp_path / "state.db"))
    assert found is not None
    assert str(found).startswith(f"{tmp_path / 'state.db'} (the state DB): no space left")
    assert " MB free)" in str(found)
    assert sqlite_resource_error(sqlite3.OperationalError("no such table: x"), "s.db") is None


def test_an_oserror_is_found_among_the_causes_of_a_client_error():
    try:
        try:
            raise OSError(errno.EMFILE, "Too many open files")
        except OSError as socket_error:
            raise httpx.ConnectError("cannot connect to 127.0.0.1:80") from socket_error
    except httpx.ConnectError as exc:
        found = os_resource_error(exc, where="fetching http://127.0.0.1/")
    assert found is not None and "too many open files" in str(found)
    assert os_resource_error(httpx.ConnectError("refused"), where="x") is None


class OutOfFiles(httpx.BaseTransport):
    """The real transport, until the process runs out of file descriptors at page ``after``."""

    def __init__(self, after: int):
        self.real = httpx.HTTPTransport()
        self.after = after
        self.pages = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if "/guide/" in request.url.path:
            self.pages += 1
            if self.pages > self.after:
                raise OSError(errno.EMFILE, "Too many open files")
        return self.real.handle_request(request)


def test_a_run_out_of_file_descriptors_stops_at_once_and_the_next_run_converges(tmp_path):
    site = DevSite(example_pages(30))
    site.start()
    try:
        config = make_config(tmp_path, [sitemap_source(site)])
        transport = OutOfFiles(after=5)
        with Syncer(config, embedder=FastEmbedder(), transport=transport) as syncer:
            with pytest.raises(ResourceError, match="too many open files") as raised:
                syncer.run()
            assert raised.value.where.startswith(f"fetching {site.base_url}/guide/")
            # it stopped with the window: no page is recorded as failing for it
            assert not syncer.state.attempts.list("docs")
            assert syncer.state.runs.get_last()["status"] == "failed"
        with Syncer(config, embedder=FastEmbedder()) as syncer:
            assert syncer.run().ok
            assert syncer.verify().clean
            assert syncer.store.count() == 30 * 4
    finally:
        site.stop()
