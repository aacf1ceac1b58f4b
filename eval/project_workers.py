"""The on-paper projection of `eval/bench_workers.py --probe` figures to a larger state
(issue #20: 10M pages): bytes per document per table and index, statements and transactions
per page, and rows written per page per table, each measured, then multiplied out.

Usage: python eval/project_workers.py eval/results/workers-100k.json \\
           [--pure-304 eval/results/workers-304.json] [--docs 10000000] [--revisit-days 1]
       → Markdown on stdout (the arithmetic; the conclusions are written by hand beside it)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

VECTOR_TABLE = "bench"  # the pgvector collection of the bench (the vector store, not state)
GB = 1e9


def kind(sql: str) -> str:
    """Which part of a worker a state statement belongs to."""
    text = f" {sql.lower()} "
    if " host_slots " in text or " hosts " in text:
        return "host slots (politeness)"
    if " work " in text or '"work"' in text:
        return "work queue (claim, finish, queue)"
    if " leases " in text:
        return "leases"
    if " journal " in text or '"journal"' in text:
        return "journal"
    return "page (read, commit, cache)"


def per_kind(probe: dict[str, Any], pages: int) -> dict[str, float]:
    totals: dict[str, float] = {}
    for sql, entry in probe["statements"].items():
        key = kind(sql)
        totals[key] = totals.get(key, 0) + entry["calls"]
    return {key: value / pages for key, value in sorted(totals.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("result", type=Path)
    parser.add_argument("--pure-304", type=Path, help="a run with --edit-every 0")
    parser.add_argument("--docs", type=int, default=10_000_000)
    parser.add_argument("--revisit-days", type=float, default=1.0)
    options = parser.parse_args()
    data = json.loads(options.result.read_text())
    runs = data["runs"]
    pages = data["settings"]["pages"]
    target = options.docs
    scale = target / pages
    base = next(r for r in runs if "compacted" in r["passes"]["revalidate"])
    compacted = base["passes"]["revalidate"]["compacted"]["tables"]
    as_left = base["passes"]["revalidate"]["sizes"]["tables"]
    docs = as_left["documents"]["rows"]
    out = [
        f"### Bytes per document ({base['workers']} worker, {docs:,} documents after the cold "
        "and the revalidation pass), projected to "
        f"{target:,} documents",
        "",
        "Measured: live rows per document, and bytes per live row after `VACUUM FULL` (heap "
        "with TOAST; all indexes of the table). Projected: rows/doc × bytes/row × "
        f"{target:,}. 'As left' is the size the passes left (dead row versions and free space "
        "included) per document, × the same factor: an upper bound for a table under churn "
        "that autovacuum keeps up with.",
        "",
        "| table | rows / doc | heap B / row | index B / row | B / doc | projected GB | as left "
        "B / doc | as left GB | indexes (B / row) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    state_total = vector_total = left_total = 0.0
    ordered = sorted(compacted.items(), key=lambda kv: -kv[1]["total_bytes"])
    for name, table in ordered:
        rows = table["rows"]
        left = as_left.get(name, {}).get("total_bytes", 0)
        if rows / docs < 0.001 and left / docs < 50:
            continue  # per-source rows, leases: constant, not per document
        heap = table["table_bytes"] / rows if rows else 0
        index = sum(table["indexes"].values()) / rows if rows else 0
        per_doc = table["total_bytes"] / docs
        projected = per_doc * target / GB
        left_gb = left / docs * target / GB
        if name == VECTOR_TABLE:
            vector_total += projected
        else:
            state_total += projected
            left_total += left_gb
        indexes = (
            ", ".join(
                f"{index_name} {size / rows:,.0f}" for index_name, size in table["indexes"].items()
            )
            if rows
            else ""
        )
        label = f"{name} (vector store)" if name == VECTOR_TABLE else name
        out.append(
            f"| {label} | {rows / docs:.2f} | {heap:,.0f} | {index:,.0f} | {per_doc:,.0f} | "
            f"{projected:,.1f} | {left / docs:,.0f} | {left_gb:,.1f} | {indexes} |"
        )
    out += [
        "",
        f"State tables: {state_total:,.1f} GB compacted, {left_total:,.1f} GB as left, at "
        f"{target:,} documents; the vector store's table {vector_total:,.1f} GB.",
        "",
        "### Statements and transactions per page (counted in the workers)",
        "",
        "| run | pass | pages | statements / page | transactions / page | PostgreSQL commits "
        "/ page | by part: statements / page |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    sources = [(f"{pages:,}, {r['workers']} worker(s)", r, pages) for r in runs]
    if options.pure_304:
        extra = json.loads(options.pure_304.read_text())
        for r in extra["runs"]:
            sources.append(
                (f"{extra['settings']['pages']:,}, every answer 304", r, extra["settings"]["pages"])
            )
    for label, run, n in sources:
        for name in ("cold", "revalidate"):
            if "every answer 304" in label and name == "cold":
                continue
            summary = run[f"{name}_summary"]
            parts = per_kind(run["passes"][name]["probe"], n)
            out.append(
                f"| {label} | {name} | {n:,} | {summary['statements_per_page']} | "
                f"{summary['transactions_per_page']} | {summary['pg_commits_per_page']} | "
                + "; ".join(f"{k} {v:.2f}" for k, v in parts.items())
                + " |"
            )
    out += [
        "",
        f"### Rows written per page, per table (PostgreSQL's counters, {base['workers']} worker)",
        "",
        "| table | cold: ins / upd (HOT) / del per page | revalidation: ins / upd (HOT) / del "
        "per page |",
        "|---|---|---|",
    ]
    cold = base["passes"]["cold"]["pg"]["tables"]
    warm = base["passes"]["revalidate"]["pg"]["tables"]
    names = sorted(
        set(cold) | set(warm),
        key=lambda t: (
            -sum(
                (cold.get(t, {}).get(k, 0) + warm.get(t, {}).get(k, 0))
                for k in ("n_tup_ins", "n_tup_upd", "n_tup_del")
            )
        ),
    )

    def cell(stats: dict[str, int]) -> str:
        if not stats:
            return ""
        return (
            f"{stats['n_tup_ins'] / pages:.2f} / {stats['n_tup_upd'] / pages:.2f} "
            f"({stats['n_tup_hot_upd'] / pages:.2f}) / {stats['n_tup_del'] / pages:.2f}"
        )

    for name in names:
        if not any(
            (cold.get(name, {}).get(k, 0) + warm.get(name, {}).get(k, 0)) / pages >= 0.01
            for k in ("n_tup_ins", "n_tup_upd", "n_tup_del")
        ):
            continue
        out.append(f"| {name} | {cell(cold.get(name, {}))} | {cell(warm.get(name, {}))} |")
    rate = target / (options.revisit_days * 86400)
    out += [
        "",
        f"### Load at {target:,} pages revisited every {options.revisit_days:g} day(s)",
        "",
        f"{target:,} ÷ {options.revisit_days * 86400:,.0f} s = {rate:,.0f} page checks per "
        "second, each at the revalidation pass's measured statements and transactions per page:",
        "",
    ]
    for run in runs:
        s = run["revalidate_summary"]
        out.append(
            f"- measured with {run['workers']} worker(s): {s['statements_per_page']} statements "
            f"and {s['transactions_per_page']} transactions per page → "
            f"{rate * s['statements_per_page']:,.0f} statements/s, "
            f"{rate * s['transactions_per_page']:,.0f} transactions/s; PostgreSQL CPU "
            f"{s['cpu_ms_per_page']['postgres']} ms per page → "
            f"{rate * s['cpu_ms_per_page']['postgres'] / 1000:.2f} cores; workers "
            f"{s['cpu_ms_per_page']['workers']} ms per page → "
            f"{rate * s['cpu_ms_per_page']['workers'] / 1000:.2f} cores"
        )
    out.append(f"\n(scale factor {scale:,.0f} from the {pages:,}-page run)")
    print("\n".join(out))


if __name__ == "__main__":
    main()
