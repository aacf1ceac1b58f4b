"""Gather the benchmark results into eval/results/README.md and the README's benchmark tables.

Reads eval/results/{peers,core,core-torch,noop,stores,stores-1m,stores-1m-engines,
workers-100k-all,workers,docsites,retrieval,fusion,search,backends,revalidate,startup}.md,
faults.json and webhooks.json (whichever exist) and rewrites the text between
``<!-- bench:begin -->`` and ``<!-- bench:end -->`` in the top-level README, so the published
figures are always the last measured ones.

Usage: python eval/report.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
README = HERE.parent / "README.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def tables() -> str:
    parts = []
    for name, heading in (
        ("peers", "Side by side with LangChain, LlamaIndex and CocoIndex (`eval/bench_peers.py`)"),
        ("core", "Against the bare model and a naive re-crawl (`eval/bench_core.py`)"),
        ("core-torch", "The same on the torch backend (`eval/bench_core.py --backend torch`)"),
        ("noop", "A no-op run on a large state (`eval/bench_noop.py`)"),
        ("stores", "Embedded vector engines (`eval/bench_stores.py`)"),
        ("stores-1m", "The embedded default at 1,000,000 points (`eval/bench_stores.py`)"),
        ("stores-1m-engines", "Every embedded engine at 1,000,000 points (`make bench-1m`)"),
        (
            "workers-100k-all",
            "Workers at 100,000 pages: statements, claims, PostgreSQL's CPU "
            "(`eval/bench_workers.py --pages 100000 --probe`, two runs merged with `--merge`)",
        ),
        ("workers", "Workers sharing one PostgreSQL (`eval/bench_workers.py`)"),
        (
            "docsites",
            "Documentation sites: titles and headings vs peers (`eval/bench_docsites.py`)",
        ),
        (
            "retrieval",
            "Retrieval quality: dense, sparse and hybrid vs peers (`eval/bench_retrieval.py`)",
        ),
        ("fusion", "Hybrid fusion: rank offset and weight (`eval/bench_fusion.py`)"),
        ("search", "Warm search latency (`eval/bench_search.py`)"),
        ("backends", "Embedding backends: torch and ONNX (`eval/bench_backends.py`)"),
        ("revalidate", "Revalidation throughput (`eval/bench_revalidate.py`)"),
        ("startup", "Startup: a run with nothing due (`eval/bench_startup.py`)"),
    ):
        path = RESULTS / f"{name}.md"
        if path.exists():
            parts.append(f"#### {heading}\n\n{path.read_text().strip()}\n")
        if name == "peers" and (RESULTS / "peers.png").exists():
            parts.append("![Work per step and system](eval/results/peers.png)\n")
    replay = RESULTS / "faults.json"
    if replay.exists():
        parts.append(
            "#### A fault replay (`eval/bench_faults.py`)\n\n"
            + faults_markdown(json.loads(replay.read_text()))
        )
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


FAULT_NAMES = {
    "sitemap_503": "sitemap answers 503",
    "sitemap_truncated": "sitemap cut mid-document (200)",
    "child_500": "one of two child sitemaps answers 500",
    "maintenance_302": "every page 302 → /maintenance",
    "transient_404": "~10% of pages answer 404",
    "rate_429": "5% of requests 429, Retry-After: 1",
    "server_5xx": "15% of requests 5xx",
}


def faults_markdown(result: dict[str, Any]) -> str:
    """The fault replay's tables (eval/bench_faults.py): the whole replay per system, then the
    pages wrongly deleted per fault window."""
    summary = result["summary"]
    systems = list(summary)
    lines = [
        f"Evolving site: {result['pages']} pages at the start, served on 127.0.0.1; "
        f"{result['runs']} runs of every system (seed {result['seed']}); ragsync's clock "
        f"advances {result['minutes_per_run']:g} min per run, default deletion rule (2 "
        "observations over 1 h). Pages wrongly deleted: live pages (faults aside) the index "
        "held before and holds no point for after a run. At the end: after the faults, two "
        "clean runs. Minimum: distinct texts of the points that were right when indexed. "
        "The peers share one loader (robots.txt, the sitemap or its index, trafilatura) that "
        "fails the run when it cannot read the sitemap and leaves out pages that do not answer "
        "200. Runs failed: ragsync runs with ok = false (any page or listing error), peer runs "
        "the loader aborted.",
        "",
        "| system | wrongly deleted (distinct pages) | worst moment | missing at end "
        "| stale at end | duplicates at end | texts embedded | minimum | unnecessary "
        "| runs failed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in systems:
        s = summary[name]
        at = f" ({s['wrongly_deleted_worst_at']})" if s["wrongly_deleted_worst_at"] else ""
        lines.append(
            f"| {name} | {s['wrongly_deleted_distinct']} | {s['wrongly_deleted_worst']}{at} | "
            f"{s['missing_at_end']} | {s['stale_at_end']} | {s['duplicates_at_end']} | "
            f"{s['texts_embedded']:,} | {s['texts_minimum']:,} | {s['texts_unnecessary']:,} | "
            f"{s['runs_failed']} |"
        )
    lines += [
        "",
        "Of the live pages an index held when a fault window opened, those that lost their "
        "point during the window or the clean run after it (distinct / worst moment):",
        "",
        "| fault window | runs | step before it | " + " | ".join(systems) + " |",
        "|---|---:|---|" + "---:|" * len(systems),
    ]
    for window in result["windows"]:
        fault = window["fault"]
        cells = [
            f"{c['wrongly_deleted_distinct']} / {c['wrongly_deleted_worst']}"
            for c in (result["by_window"][fault][name] for name in systems)
        ]
        lines.append(
            f"| {FAULT_NAMES.get(fault, fault)} | {window['runs']} | {window['step']} | "
            + " | ".join(cells)
            + " |"
        )
    lines += [
        "",
        "Texts embedded during each fault window and the clean run after it (minimum: right "
        "texts new to the index then):",
        "",
        "| fault window | " + " | ".join(systems) + " |",
        "|---|" + "---:|" * len(systems),
    ]
    for window in result["windows"]:
        fault = window["fault"]
        cells = [
            f"{c['texts_embedded']:,} ({c['texts_minimum']:,})"
            for c in (result["by_window"][fault][name] for name in systems)
        ]
        lines.append(f"| {FAULT_NAMES.get(fault, fault)} | " + " | ".join(cells) + " |")
    short = [
        f"{name} held {c['held_at_start']} of {c['live_at_start']} live pages when "
        f"“{FAULT_NAMES.get(fault, fault)}” began"
        for fault, cells in result["by_window"].items()
        for name, c in cells.items()
        if c["held_at_start"] < c["live_at_start"]
    ]
    if short:
        lines += ["", "Not whole at a window's start: " + "; ".join(short) + "."]
    return "\n".join(lines) + "\n"


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
