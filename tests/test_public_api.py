"""The public API (``ragsync/__init__.py``): the names it exports, and async twins that keep
the event loop running."""

from __future__ import annotations

import asyncio

import ragsync


def test_public_api_is_frozen():
    assert sorted(ragsync.__all__) == [
        "Change",
        "Config",
        "ConfigError",
        "Counters",
        "ExtractError",
        "FetchError",
        "Hit",
        "RagsyncError",
        "StateError",
        "StoreError",
        "SyncResult",
        "Syncer",
        "__version__",
        "load_config",
    ]
    for name in ragsync.__all__:
        assert getattr(ragsync, name) is not None


def test_async_twins_do_not_block_the_event_loop(site, make_syncer):
    syncer = make_syncer(site)

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        result = await syncer.arun()
        hits = await syncer.asearch("throttling", k=2)
        task.cancel()
        return result, hits, ticks

    result, hits, ticks = asyncio.run(main())
    assert result.ok and len(hits) == 2
    assert ticks > 10  # the loop kept running while the sync worked
