"""Gather the benchmark results into eval/results/README.md and the README's benchmark tables.

Reads eval/results/{peers,core,noop,stores,workers}.md and webhooks.json (whichever exist) and
rewrites the text between ``<!-- bench:begin -->`` and ``<!-- bench:end -->`` in the top-level
README, so the published figures are always the last measured ones.

Usage: python eval/report.py
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
README = HERE.parent / "README.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def tables() -> str:
    parts = []
    for name, heading in (
        ("peers", "Side by side with LangChain and LlamaIndex (`eval/bench_peers.py`)"),
        ("core", "Against the bare model and a naive re-crawl (`eval/bench_core.py`)"),
        ("noop", "A no-op run on a large state (`eval/bench_noop.py`)"),
        ("stores", "Embedded vector engines (`eval/bench_stores.py`)"),
        ("workers", "Workers sharing one PostgreSQL (`eval/bench_workers.py`)"),
    ):
        path = RESULTS / f"{name}.md"
        if path.exists():
            parts.append(f"#### {heading}\n\n{path.read_text().strip()}\n")
        if name == "peers" and (RESULTS / "peers.png").exists():
            parts.append("![Work per step and system](eval/results/peers.png)\n")
    hooks = RESULTS / "webhooks.json"
    if hooks.exists():
        w = json.loads(hooks.read_text())
        parts.append(
            "#### Webhook intake (`eval/bench_webhooks.py`)\n\n"
            "| hooks | clients | hooks/s | p50 ms | p99 ms | max ms |\n"
            "|---:|---:|---:|---:|---:|---:|\n"
            f"| {w['hooks']:,} | {w['clients']} | {w['throughput_per_s']} | "
            f"{w['latency_ms']['p50']} | {w['latency_ms']['p99']} | {w['latency_ms']['max']} |\n"
        )
    return "\n".join(parts)


def main() -> None:
    body = tables()
    (RESULTS / "README.md").write_text(
        "# Benchmark results\n\n" + body.replace("eval/results/", "")
    )
    text = README.read_text()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        README.write_text(f"{head}{BEGIN}\n{body}{END}{tail}")
        print(f"updated {README.name} and {RESULTS / 'README.md'}")
    else:
        print(f"{README.name} has no {BEGIN} … {END} markers; wrote {RESULTS / 'README.md'}")


if __name__ == "__main__":
    main()
