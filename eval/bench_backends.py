"""ragsync's index of the evolving site, once per embedding backend (torch, onnx, onnx-int8).

Per backend, on the same site (eval/evolving.py, 127.0.0.1): a cold `ragsync run` as a fresh
process with ``[embedder] backend`` set (wall and CPU seconds), the bare model loop of that
backend on the same chunk texts (eval/bare_embed.py: ragsync's call plan on ONNX, its 16 texts
per call through sentence-transformers on torch; best of ``--bare-runs``: chunks per second of
wall time and per CPU second; CPU seconds are the figure a loaded machine disturbs least), and
the site's questions asked of that index through the same backend: hit@1, hit@5 and MRR@10,
scored by eval/bench_peers.py's ``rank_scores``. ONNX exports are made (or found in the cache)
before any timed run: export is once per machine.

Usage: python eval/bench_backends.py [--pages 200] [--backends torch,onnx,onnx-int8]
→ eval/results/backends.json and backends.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from eval.bench_core import run_json  # noqa: E402
from eval.bench_peers import System, rank_scores  # noqa: E402
from eval.evolving import EvolvingSite  # noqa: E402

BACKENDS = ("torch", "onnx", "onnx-int8")


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(backend: str, work: Path, sitemap: str, questions, bare_runs: int) -> dict[str, Any]:
    from ragsync.config import load_config
    from ragsync.embed import embedder_from_config
    from ragsync.state import StateDB

    bare_args = [str(HERE / "bare_embed.py"), str(work / f"texts-{backend}.json")]
    if backend != "torch":
        from ragsync.onnxembed import OnnxEmbedder

        export = OnnxEmbedder(quantize=backend == "onnx-int8").ensure_export()
        bare_args += ["--onnx", str(export), "--runners"]  # the model calls ragsync makes
    system = System("ragsync", work / backend, sitemap)
    config = system.work / "ragsync.toml"
    config.write_text(config.read_text() + f'\n[embedder]\nbackend = "{backend}"\n')
    cpu = children_cpu()
    wall, _, counters, _ = system.run()
    cpu = children_cpu() - cpu
    state = StateDB(system.work / ".ragsync" / "state.db")
    texts = [chunk.text for _, chunk in state.index.list_chunks()]
    state.close()
    Path(bare_args[1]).write_text(json.dumps(texts))
    bare = min((run_json(bare_args)[2] for _ in range(bare_runs)), key=lambda b: b["encode_s"])
    embedder = embedder_from_config(load_config(config).embedder)
    vectors = embedder.embed([question for question, _ in questions])
    row = {
        "backend": backend,
        "model_id": embedder.model_id,
        "cold_wall_s": round(wall, 2),
        "cold_cpu_s": round(cpu, 2),
        "texts_embedded": counters["texts_embedded"],
        "bare_import_load_s": round(bare["import_load_s"], 2),
        "bare_encode_s": round(bare["encode_s"], 2),
        "bare_encode_cpu_s": round(bare["encode_cpu_s"], 2),
        "bare_total_cpu_s": round(bare["total_cpu_s"], 2),
        "bare_chunks_per_s": round(len(texts) / bare["encode_s"], 1),
        "bare_chunks_per_cpu_s": round(len(texts) / bare["encode_cpu_s"], 1),
        "cold_wall_over_bare": round(wall / bare["total_s"], 2),
        "cold_cpu_over_bare": round(cpu / bare["total_cpu_s"], 2),
        **rank_scores(system.search(vectors), [(answer,) for _, answer in questions]),
    }
    print(json.dumps(row), flush=True)
    return row


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Evolving site: {result['pages']} pages, cold sync per backend as a fresh process "
        "(bare loop: ragsync's call plan on ONNX, its 16 texts per call through "
        "sentence-transformers on torch, so the cold ÷ bare ratios compare within a row); "
        f"{result['chunks']} chunk texts; 2 CPU cores.",
        "",
        "| backend | bare chunks/s | bare chunks/CPU s | cold wall s | cold CPU s "
        "| cold ÷ bare, wall | cold ÷ bare, CPU | hit@1 | hit@5 | MRR@10 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['backend']} | {r['bare_chunks_per_s']} | {r['bare_chunks_per_cpu_s']} | "
            f"{r['cold_wall_s']} | {r['cold_cpu_s']} | {r['cold_wall_over_bare']} | "
            f"{r['cold_cpu_over_bare']} | "
            f"{r['hit@1']} | {r['hit@5']} | {r['mrr@10']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--bare-runs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ragsync-backends-"))
    evolving = EvolvingSite(options.pages)
    base = evolving.site.start()
    questions = evolving.questions(base)
    try:
        rows = [
            measure(backend, work, f"{base}/sitemap.xml", questions, options.bare_runs)
            for backend in options.backends.split(",")
        ]
    finally:
        evolving.site.stop()
    result = {"pages": options.pages, "chunks": rows[0]["texts_embedded"], "rows": rows}
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "backends.json").write_text(json.dumps(result, indent=2) + "\n")
    (options.out / "backends.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
