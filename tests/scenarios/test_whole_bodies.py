"""A body is whole or it is a failure: a known page whose response comes compressed and cut
short — framed as whole, a ``Content-Length`` matching the cut bytes, as a proxy that truncated
and re-framed it sends — keeps its points, fails transiently with the usual retries, and
converges once a whole body comes back."""

from __future__ import annotations

import gzip
import random
import time
import zlib
from collections.abc import Callable

import brotli
import pytest
import zstandard

from ragsync.sync import Syncer
from ragsync.testing import DevSite
from tests.support import make_config, page, sentences, sitemap_source

FAST_RETRIES = {"retry_base": "0.05s", "retry_cap": "0.2s"}
CODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": lambda body: gzip.compress(body, mtime=0),
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": zstandard.ZstdCompressor().compress,
}
TOPICS = ["retention", "replication", "throttling", "encryption", "sharding", "caching"]


def guide(title: str, edit: str = "") -> tuple[str, str]:
    """A page of six sections: a cut keeps the first ones, a valid-looking shorter page."""
    return page(title, {f"{title} {t}": [sentences(f"{t} {edit}".strip(), 4)] for t in TOPICS})


def syncer_for(tmp_path, site, embedder, name="s") -> Syncer:
    config = make_config(tmp_path / name, [sitemap_source(site)], fetch=FAST_RETRIES)
    return Syncer(config, embedder=embedder)


def points(syncer: Syncer) -> dict[str, dict]:
    """The index, without the times a later write stamps."""
    try:
        return {
            pid: {
                **payload,
                "metadata": {
                    k: v for k, v in payload["metadata"].items() if k != "last_changed_at"
                },
            }
            for pid, payload, _ in syncer.store.points()
        }
    finally:
        syncer.store.close()


class CodedBodies:
    """A fault hook serving ``paths`` as their real page coded with ``coding[path]``, cut to
    ``cut[path]`` bytes while ``cutting`` (DevSite frames the cut: its Content-Length is the
    cut's); records each request's Accept-Encoding."""

    def __init__(self, site: DevSite, coding: dict[str, str], cut: dict[str, int]):
        self.site = site
        self.coding = coding
        self.cut = cut
        self.cutting = True
        self.accepted: list[str] = []
        self.sent: dict[str, int] = {}

    def __call__(self, path: str, headers) -> tuple[int, dict[str, str], bytes] | None:
        if path not in self.coding:
            return None
        self.accepted.append(headers.get("Accept-Encoding", ""))
        coded = CODERS[self.coding[path]](self.site.render(self.site.pages[path]).encode())
        if self.cutting:
            coded = coded[: self.cut[path]] if path in self.cut else coded[: len(coded) * 3 // 5]
        self.sent[path] = len(coded)
        headers = {
            "Content-Type": "text/html; charset=utf-8",
            "Content-Encoding": self.coding[path],
        }
        return 200, headers, coded


@pytest.mark.parametrize("coding", sorted(CODERS))
def test_a_cut_compressed_body_keeps_the_page_until_a_whole_one_comes(tmp_path, embedder, coding):
    site = DevSite({"/guide/a": guide("Alpha"), "/guide/b": guide("Beta")})
    site.start()
    try:
        syncer = syncer_for(tmp_path, site, embedder)
        assert syncer.run().ok
        before = points(syncer)
        key = f"docs:{site.base_url}/guide/a"
        good = syncer.state.documents.get(key)
        site.set_page("/guide/a", *guide("Alpha", "edited"))  # due again, and changed
        faults = CodedBodies(site, {"/guide/a": coding}, {})
        site.fault = faults

        result = syncer.run()

        # Nothing of it was extracted: the old content and every old point stay ...
        assert points(syncer) == before
        assert syncer.state.documents.get(key)["content_hash"] == good["content_hash"]
        # ... and it is a transient failure, retried with the usual backoff.
        assert not result.ok and result.counters.retries_scheduled == 1
        attempt = syncer.state.attempts.get(key)
        assert attempt["state"] == "retrying" and attempt["attempts"] == 1
        assert attempt["next_retry_at"] > attempt["last_attempt_at"]  # the usual backoff
        error = attempt["last_error"]
        assert f"body cut short: the {coding} stream stops before its end" in error, error
        assert f"({faults.sent['/guide/a']} bytes came," in error
        assert all(coding in accepted.split(", ") for accepted in faults.accepted)

        faults.cutting = False  # whole bodies again, still compressed
        for _ in range(10):
            time.sleep(0.3)  # the retry is due
            result = syncer.run()
            if result.ok and not syncer.state.attempts.list():
                break
        assert result.ok, result.to_dict()["sources"]["docs"]["errors"]
        assert "edited" in syncer.state.documents.get(key)["markdown"]
        site.fault = None
        reference = syncer_for(tmp_path, site, embedder, name="reference")
        assert reference.run().ok
        assert points(syncer) == points(reference)
        syncer.close()
        reference.close()
    finally:
        site.stop()


def test_bodies_cut_at_random_offsets_are_never_indexed(tmp_path, embedder):
    """Sixteen known pages, edited, served in every coding cut at random offsets, three rounds:
    not one point changes, and a state that never saw them indexes nothing."""
    paths = [f"/guide/p{i}" for i in range(16)]
    # No per-request noise: each page renders to the same bytes, so a drawn cut is a cut.
    site = DevSite({path: guide(f"Page {i}") for i, path in enumerate(paths)}, noise=False)
    site.start()
    try:
        syncer = syncer_for(tmp_path, site, embedder)
        assert syncer.run().ok
        before = points(syncer)
        for i, path in enumerate(paths):
            site.set_page(path, *guide(f"Page {i}", "edited"))
        rng = random.Random(37)
        faults = CodedBodies(site, {}, {})
        site.fault = faults
        drawn = 0
        for _ in range(3):
            for path in paths:
                faults.coding[path] = rng.choice(sorted(CODERS))
                whole = len(CODERS[faults.coding[path]](site.render(site.pages[path]).encode()))
                faults.cut[path] = rng.randrange(whole)  # 0 … all but the last byte
            drawn += len(paths)

            syncer.run(revalidate_all=True)

            assert points(syncer) == before
            for path in paths:
                attempt = syncer.state.attempts.get(f"docs:{site.base_url}{path}")
                coding, cut = faults.coding[path], faults.cut[path]
                assert faults.sent[path] == cut
                if cut == 0:  # no stream at all: an empty body, refused as such
                    assert "empty body" in attempt["last_error"], attempt
                    continue
                assert attempt["state"] == "retrying", (coding, cut, attempt)
                assert (
                    f"the {coding} stream stops before its end ({cut} bytes came"
                    in (attempt["last_error"])
                )
        assert drawn == 48 and set(faults.coding.values()) == set(CODERS)

        fresh = syncer_for(tmp_path, site, embedder, name="fresh")
        fresh.run()
        assert points(fresh) == {}
        assert not [d for d in fresh.state.documents.list() if d["status"] == "active"]
        fresh.close()
        syncer.close()
    finally:
        site.stop()
