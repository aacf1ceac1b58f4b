"""Core benchmark, measured side by side in one run on one generated site (127.0.0.1 only).

Steps and what each compares:
1. cold sync: `ragsync run` on an empty state vs the bare model embedding the same texts in one
   loop (both as fresh processes: imports + model load + work) → pipeline overhead ratio. On
   ONNX the bare loop runs ragsync's call plan (``--runners``), and a plain loop of 64 texts
   per call is shown beside it.
2. no-change re-sync: `ragsync run` again vs the naive approach (re-crawl and re-embed
   everything) → wall-time and bytes-downloaded ratios.
3. small edit (one paragraph on 5% of pages): `ragsync run` vs the naive approach.

Usage: python eval/bench_core.py [--pages 120] [--backend onnx-int8|onnx|torch]
→ writes eval/results/core.json and core.md for ragsync's default backend (onnx-int8: a new
index's; README "Embedding backends"), core-torch.json, … for another. ragsync runs with
``[embedder] backend`` set and the bare loop runs the same backend; an ONNX export is made (or
found in the cache) before the timed runs, once per machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from eval.corpus import edit_paragraph, make_site_pages  # noqa: E402
from ragsync.state import StateDB  # noqa: E402
from ragsync.testing import DevSite  # noqa: E402


def run_json(
    args: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[float, float, dict]:
    """Run a Python process: its wall and CPU seconds (children included), and its JSON."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=False, env=env, cwd=cwd
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, cpu, json.loads(proc.stdout)


def site_traffic(site: DevSite, since: int) -> tuple[int, int]:
    hits = site.hits[since:]
    return len(hits), sum(hit.bytes for hit in hits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=120)
    parser.add_argument("--backend", choices=("onnx-int8", "onnx", "torch"), default="onnx-int8")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()
    bare_args = [str(HERE / "bare_embed.py"), "texts.json"]
    embedder_table = f'\n[embedder]\nbackend = "{options.backend}"\n'
    if options.backend != "torch":
        from ragsync.onnxembed import OnnxEmbedder

        export = OnnxEmbedder(quantize=options.backend == "onnx-int8").ensure_export()
        bare_args += ["--onnx", str(export)]

    work = Path(tempfile.mkdtemp(prefix="ragsync-bench-"))
    site = DevSite(make_site_pages(options.pages))
    base = site.start()
    config = work / "ragsync.toml"
    # every = "0s": each run revalidates every page (what this comparison measures)
    config.write_text(
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nevery = "0s"\nurl = "{base}/sitemap.xml"\n'
        + embedder_table
    )
    ragsync = ["-m", "ragsync", "run", "--json", "--config", str(config)]
    naive = [str(HERE / "naive.py"), f"{base}/sitemap.xml", str(work / "naive-qdrant")]
    rows: list[dict] = []

    def measure(step: str, system: str, args: list[str]) -> dict:
        mark = len(site.hits)
        wall, cpu, report = run_json(args)
        requests, downloaded = site_traffic(site, mark)
        counters = report.get("counters", report)
        row = {
            "step": step,
            "system": system,
            "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2),
            "requests": requests,
            "bytes_downloaded": downloaded,
            "texts_embedded": counters.get("chunks_embedded", counters.get("texts_embedded")),
            "points_written": counters.get("points_upserted", counters.get("points_written")),
            "points_deleted": counters.get("points_deleted", 0),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
        return row

    try:
        cold = measure("cold sync", "ragsync", ragsync)
        state = StateDB(work / ".ragsync" / "state.db")
        texts = [chunk.text for _, chunk in state.index.list_chunks()]
        state.close()
        (work / "texts.json").write_text(json.dumps(texts))
        bare_args[1] = str(work / "texts.json")

        def bare_loop(label: str, args: list[str]) -> tuple[float, float, dict]:
            wall, cpu, report = run_json(args)
            row = {"step": "cold sync", "system": label, "wall_s": round(wall, 2)}
            row |= {"cpu_s": round(cpu, 2), "requests": 0, "bytes_downloaded": 0}
            row |= {"texts_embedded": len(texts), "points_written": 0, "points_deleted": 0}
            rows.append(row)
            print(json.dumps(row), flush=True)
            return wall, cpu, report

        if options.backend == "torch":
            bare_wall, bare_cpu, bare = bare_loop("bare model loop (torch)", bare_args)
        else:
            # The floor: the same texts on ragsync's call plan (calls of CALL_TOKENS padded
            # tokens, 2 single-threaded runners); and the plain loop of 64 texts per call on
            # one 2-thread session, ragsync's earlier plan (README "Embedding backends").
            bare_wall, bare_cpu, bare = bare_loop(
                f"bare model loop ({options.backend}, ragsync's call plan, 2 runners)",
                [*bare_args, "--runners"],
            )
            plain_wall, plain_cpu, _ = bare_loop(
                f"bare model loop ({options.backend}, 64 texts per call)", bare_args
            )
        noop = measure("no change", "ragsync", ragsync)
        naive_noop = measure("no change", "naive re-crawl + re-embed", naive)
        rng = random.Random(11)
        edited = rng.sample(sorted(site.pages), max(1, options.pages // 20))
        for path in edited:
            title, body = site.pages[path].title, site.pages[path].body
            site.set_page(path, title, edit_paragraph(body, rng))
        edit = measure("edit 5% of pages", "ragsync", ragsync)
        naive_edit = measure("edit 5% of pages", "naive re-crawl + re-embed", naive)
    finally:
        site.stop()
        shutil.rmtree(work, ignore_errors=True)  # the runs' states and stores: in the results now

    ratios = {
        "cold_sync_overhead_vs_bare_model": round(cold["wall_s"] / bare_wall, 2),
        # The least wall any overlap of the stages could reach: ragsync's CPU spread over every
        # core, against the bare loop's wall (how far the target is from what 2 cores allow)
        "cold_sync_cpu_floor_vs_bare_model": round(
            cold["cpu_s"] / (os.cpu_count() or 1) / bare_wall, 2
        ),
        "cold_sync_cpu_vs_bare_model": round(cold["cpu_s"] / bare_cpu, 2),
        "bare_model_import_load_s": round(bare["import_load_s"], 2),
        **(
            {
                "cold_sync_overhead_vs_bare_64_per_call": round(cold["wall_s"] / plain_wall, 2),
                "bare_runners_vs_64_per_call_wall": round(bare_wall / plain_wall, 2),
                "bare_runners_vs_64_per_call_cpu": round(bare_cpu / plain_cpu, 2),
            }
            if options.backend != "torch"
            else {}
        ),
        "bare_model_encode_s": round(bare["encode_s"], 2),
        "no_change_wall_speedup_vs_naive": round(naive_noop["wall_s"] / noop["wall_s"], 1),
        # Body bytes: every 304 (pages, sitemap, robots.txt) has none.
        "no_change_bytes_ratio_vs_naive": (
            round(naive_noop["bytes_downloaded"] / noop["bytes_downloaded"], 1)
            if noop["bytes_downloaded"]
            else f"{naive_noop['bytes_downloaded']:,} bytes vs 0"
        ),
        "edit_wall_speedup_vs_naive": round(naive_edit["wall_s"] / edit["wall_s"], 1),
        "edit_texts_embedded": edit["texts_embedded"],
        "edit_texts_embedded_naive": naive_edit["texts_embedded"],
    }
    options.out.mkdir(parents=True, exist_ok=True)
    result = {
        "pages": options.pages,
        "backend": options.backend,
        "chunks": len(texts),
        "rows": rows,
        "ratios": ratios,
    }
    name = "core" if options.backend == "onnx-int8" else f"core-{options.backend}"
    (options.out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    table = [
        f"Site: {options.pages} pages, {len(texts)} chunks, served on 127.0.0.1; 2 CPU cores; "
        f"embedder backend {options.backend}.",
        "",
        "| step | system | wall s | CPU s | requests | bytes downloaded | texts embedded "
        "| points written |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        table.append(
            f"| {row['step']} | {row['system']} | {row['wall_s']} | {row['cpu_s']} | "
            f"{row['requests']} | "
            f"{row['bytes_downloaded']:,} | {row['texts_embedded']} | {row['points_written']} |"
        )
    table += ["", "| ratio | value |", "|---|---:|"]
    table += [f"| {name} | {value} |" for name, value in ratios.items()]
    (options.out / f"{name}.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))


if __name__ == "__main__":
    main()
