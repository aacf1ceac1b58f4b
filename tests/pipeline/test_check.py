"""Checking a page: a failure is the page's outcome, recorded with what answered."""

from __future__ import annotations

from ragsync.chunk import Chunker
from ragsync.testing import DevSite
from tests.support import example_pages, sentences


def test_an_internal_error_after_the_response_keeps_its_status(site, make_syncer, monkeypatch):
    def broken(self, markdown):
        raise RuntimeError("chunker bug")

    monkeypatch.setattr(Chunker, "chunk", broken)
    syncer = make_syncer(site)
    result = syncer.run()
    attempts = syncer.state.attempts.list()
    # Four guide pages answer 200 (robots.txt keeps ragsync out of /private/).
    assert not result.ok and len(attempts) == 4
    for attempt in attempts:
        assert attempt["last_error"] == "internal error: RuntimeError: chunker bug"
        assert attempt["last_status"] == 200  # the page answered; the engine failed after
    assert result.counters.responses_200_changed == 0


def test_new_text_loads_the_model_ahead_and_304s_or_noisy_bytes_do_not(make_syncer, embedder):
    site = DevSite(example_pages(), validators=False)  # no ETag: every page answers 200
    site.start()
    try:
        first = make_syncer(site)
        assert first.run().counters.chunks_embedded > 0
        first.close()  # waits for the load it started
        assert embedder.warmed == 1  # once per engine, however many pages held new text
        again = make_syncer(site)  # the same state: bytes differ (noise), the text does not
        result = again.run()
        again.close()
        assert result.counters.responses_200_unchanged > 0
        assert result.counters.chunks_embedded == 0
        assert embedder.warmed == 1  # nothing new to embed: nothing loaded
        edit = f"<h1>Edited</h1><p>{sentences('editing', 4)}</p><p>{sentences('rollout', 4)}</p>"
        site.set_page("/guide/page-1", "Edited", edit)
        edited = make_syncer(site)
        assert edited.run().counters.chunks_embedded > 0
        edited.close()
        assert embedder.warmed == 2
    finally:
        site.stop()


def test_a_run_of_304s_loads_nothing_ahead(site, make_syncer, embedder):
    first = make_syncer(site)
    first.run()
    first.close()
    again = make_syncer(site)
    result = again.run()
    again.close()
    assert result.counters.responses_304 > 0 and result.counters.chunks_embedded == 0
    assert embedder.warmed == 1
