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
