"""Checking a page: a failure is the page's outcome, recorded with what answered."""

from __future__ import annotations

from ragsync.chunk import Chunker


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


def test_new_pages_load_the_model_ahead_and_a_run_of_304s_does_not(site, make_syncer, embedder):
    first = make_syncer(site)
    assert first.run().counters.chunks_embedded > 0
    first.close()  # waits for the load it started
    assert embedder.warmed == 1  # once per engine, however many windows held new pages
    again = make_syncer(site)
    result = again.run()
    again.close()
    assert result.counters.chunks_embedded == 0 and result.counters.responses_304 > 0
    assert embedder.warmed == 1  # every page known: nothing to embed, nothing loaded
