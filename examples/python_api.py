"""Use ragsync from Python: sync, inspect what changed, query — the calls an LLM app makes.

python examples/python_api.py [path/to/ragsync.toml] ["a question"]
"""

from __future__ import annotations

import sys

import ragsync


def main(config_path: str = "examples/ragsync.toml", question: str = "rotate a key") -> None:
    with ragsync.Syncer.from_config(config_path) as syncer:
        result = syncer.run()
        counters = result.counters
        print(
            f"sync ok={result.ok}: {counters.responses_200_changed} changed, "
            f"{counters.responses_304} unchanged (304), {counters.chunks_embedded} embedded"
        )
        for change in syncer.changes(since="1h"):
            print(f"change: {change.change_type} {change.url} ({change.magnitude:.0%})")
        for hit in syncer.search(question, k=3):
            print(f"hit: {hit.score:.3f} {hit.url} | {' > '.join(hit.headings)}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
