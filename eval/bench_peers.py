"""ragsync beside LangChain's indexing API and LlamaIndex's IngestionPipeline, in one run.

One evolving site (eval/evolving.py) on 127.0.0.1 goes through a sequence of steps; after each
step every system syncs it as a fresh process (a scheduled job), then its index is read back and
checked against the ground truth. Per step and system: wall time, requests and body bytes the
site served, texts embedded beside the minimum (texts absent from every earlier state of that
system's index), points written and deleted, and missing / stale / duplicate counts. At the end
every index answers the site's questions (one per fact, each with its answer page): hit@1,
hit@5 and MRR@10 on the same model.

Usage: python eval/bench_peers.py [--pages 200] [--systems ragsync,llamaindex,...]
→ eval/results/peers.json, peers.md and peers.png.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from eval.evolving import EvolvingSite, check_index  # noqa: E402

SYSTEMS = ("ragsync", "langchain-incremental", "langchain-full", "llamaindex")
STEPS: list[tuple[str, Callable[[EvolvingSite], str]]] = [
    ("cold sync", lambda site: f"{len(site.live)} pages"),
    ("no change", lambda site: "nothing changed"),
    ("edit paragraphs", lambda site: site.edit_paragraphs(0.10)),
    ("insert/delete sections", lambda site: site.insert_and_delete_sections(0.05)),
    ("add pages", lambda site: site.add_pages(0.05)),
    ("rename pages", lambda site: site.rename_pages(0.03)),
    ("remove pages", lambda site: site.remove_pages(0.04)),
    ("no change again", lambda site: "nothing changed"),
]


class System:
    """How to run one system as a process, and how to read its index back."""

    def __init__(self, name: str, work: Path, sitemap: str):
        self.name = name
        self.work = work / name
        self.work.mkdir(parents=True)
        if name == "ragsync":
            config = self.work / "ragsync.toml"
            # every = "0s": each run revalidates every page, like the peers re-read every page.
            # One 404/410 deletes a page, as the peers do (ragsync's default asks for two
            # observations an hour apart).
            config.write_text(
                f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{sitemap}"\n'
                'every = "0s"\nmissing_confirmations = 1\nmissing_grace = "0s"\n'
            )
            self.command = [
                sys.executable,
                "-m",
                "ragsync",
                "run",
                "--json",
                "--config",
                str(config),
            ]
            self.store, self.collection = self.work / ".ragsync" / "qdrant", "ragsync"
        else:
            self.command = [sys.executable, str(HERE / "peers.py"), name, str(self.work), sitemap]
            self.store, self.collection = self.work / "qdrant", "peer"

    def run(self) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        proc = subprocess.run(self.command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{self.name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        # ragsync prints one JSON document; a peer prints one JSON line after any chatter
        start = proc.stdout.find("{")
        if start < 0:
            raise SystemExit(f"{self.name} printed no report:\n{proc.stderr[-3000:]}")
        report = json.loads(proc.stdout[start:])
        counters = report.get("counters", report)
        return wall, {
            "texts_embedded": counters.get("chunks_embedded", counters.get("texts_embedded", 0)),
            "points_written": counters.get("points_upserted", counters.get("points_written", 0)),
            "points_deleted": counters.get("points_deleted", 0),
        }

    def points(self) -> list[dict[str, Any]]:
        """Every point: ``url``, ``text`` (the chunk) and ``embedded`` (what the model saw)."""
        from qdrant_client import QdrantClient

        client = QdrantClient(path=str(self.store))
        try:
            records, offset = [], None
            while True:
                batch, offset = client.scroll(
                    self.collection, limit=512, offset=offset, with_payload=True
                )
                records += batch
                if offset is None:
                    break
        finally:
            client.close()
        return [self._point(record.payload or {}) for record in records]

    def _point(self, payload: dict[str, Any]) -> dict[str, Any]:
        if self.name == "llamaindex":
            from llama_index.core.schema import MetadataMode
            from llama_index.core.vector_stores.utils import metadata_dict_to_node

            node = metadata_dict_to_node(payload)
            return {
                "url": payload["url"],
                "text": node.get_content(MetadataMode.NONE),
                "embedded": node.get_content(MetadataMode.EMBED),
            }
        meta = payload["metadata"]
        text = payload["page_content"]
        return {"url": meta.get("url", meta.get("source")), "text": text, "embedded": text}

    def search(self, vectors: list[list[float]], limit: int = 10) -> list[list[str]]:
        """The URLs of the top ``limit`` points for each query vector."""
        from qdrant_client import QdrantClient

        client = QdrantClient(path=str(self.store))
        try:
            ranked = []
            for vector in vectors:
                hits = client.query_points(
                    self.collection, query=vector, limit=limit, with_payload=True
                ).points
                ranked.append([self._point(hit.payload or {})["url"] for hit in hits])
            return ranked
        finally:
            client.close()


def retrieval_quality(systems: list[System], questions: list[tuple[str, str]]) -> dict[str, dict]:
    """hit@1, hit@5 and MRR@10 of each index over the site's questions (same model)."""
    from eval.peers import Model

    vectors = Model.encode([question for question, _ in questions])
    quality = {}
    for system in systems:
        ranks = []
        for urls, (_, answer) in zip(system.search(vectors), questions, strict=True):
            ranks.append(urls.index(answer) + 1 if answer in urls else None)
        quality[system.name] = {
            "questions": len(questions),
            "hit@1": round(sum(1 for r in ranks if r == 1) / len(ranks), 3),
            "hit@5": round(sum(1 for r in ranks if r and r <= 5) / len(ranks), 3),
            "mrr@10": round(sum(1 / r for r in ranks if r) / len(ranks), 3),
        }
        print(json.dumps({"system": system.name, **quality[system.name]}), flush=True)
    return quality


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ragsync-peers-"))
    evolving = EvolvingSite(options.pages)
    base = evolving.site.start()
    systems = [System(name, work, f"{base}/sitemap.xml") for name in options.systems.split(",")]
    seen: dict[str, set[str]] = {system.name: set() for system in systems}
    rows: list[dict[str, Any]] = []
    try:
        for step, mutate in STEPS:
            change = mutate(evolving)
            truth = evolving.truth(base)
            for system in systems:
                mark = len(evolving.site.hits)
                wall, counters = system.run()
                hits = evolving.site.hits[mark:]
                points = system.points()
                embedded = {point["embedded"] for point in points}
                minimum = len(embedded - seen[system.name])
                seen[system.name] |= embedded
                check = check_index(
                    [(p["url"], p["text"]) for p in points], truth, evolving.gen.sentences
                )
                row = {
                    "step": step,
                    "change": change,
                    "system": system.name,
                    "wall_s": round(wall, 2),
                    "requests": len(hits),
                    "bytes_downloaded": sum(hit.bytes for hit in hits),
                    **counters,
                    "texts_minimum": minimum,
                    "embedding_efficiency": (
                        round(minimum / counters["texts_embedded"], 3)
                        if counters["texts_embedded"]
                        else 1.0
                    ),
                    **check,
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
        quality = retrieval_quality(systems, evolving.questions(base))
    finally:
        evolving.site.stop()
    result = {
        "pages": options.pages,
        "rows": rows,
        "quality": quality,
        "ratios": ratios(rows),
    }
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "peers.json").write_text(json.dumps(result, indent=2) + "\n")
    (options.out / "peers.md").write_text(markdown(result))
    chart(rows, options.out / "peers.png")
    print(markdown(result))


def ratios(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The targets: no-change wall and bytes against each peer, worst efficiency, exactness."""

    def row(step: str, system: str) -> dict[str, Any] | None:
        return next((r for r in rows if r["step"] == step and r["system"] == system), None)

    out: dict[str, Any] = {}
    mine = row("no change", "ragsync")
    for system in sorted({r["system"] for r in rows} - {"ragsync"}):
        theirs = row("no change", system)
        if mine and theirs:
            out[f"no_change_wall_{system}_over_ragsync"] = round(
                theirs["wall_s"] / mine["wall_s"], 1
            )
            out[f"no_change_bytes_{system}_over_ragsync"] = (
                round(theirs["bytes_downloaded"] / mine["bytes_downloaded"], 1)
                if mine["bytes_downloaded"]
                else f"{theirs['bytes_downloaded']:,} vs 0"
            )
    for system in sorted({r["system"] for r in rows}):
        own = [r for r in rows if r["system"] == system]
        out[f"min_embedding_efficiency_{system}"] = min(r["embedding_efficiency"] for r in own)
        exact = [r for r in own if not (r["missing_pages"] or r["stale_pages"])]
        exact = [r for r in exact if not r["duplicate_chunks"]]
        out[f"steps_exact_{system}"] = f"{len(exact)}/{len(own)}"
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Evolving site: {result['pages']} pages at the start, served on 127.0.0.1; each system "
        "runs as a fresh process per step; 2 CPU cores.",
        "",
        "| step | system | wall s | requests | bytes | embedded | minimum | efficiency "
        "| written | deleted | missing | stale | dup |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['step']} | {r['system']} | {r['wall_s']} | {r['requests']} | "
            f"{r['bytes_downloaded']:,} | {r['texts_embedded']} | {r['texts_minimum']} | "
            f"{r['embedding_efficiency']} | {r['points_written']} | {r['points_deleted']} | "
            f"{r['missing_pages']} | {r['stale_pages']} | {r['duplicate_chunks']} |"
        )
    lines += ["", "| retrieval (final index) | questions | hit@1 | hit@5 | MRR@10 |"]
    lines.append("|---|---:|---:|---:|---:|")
    for name, q in result["quality"].items():
        lines.append(f"| {name} | {q['questions']} | {q['hit@1']} | {q['hit@5']} | {q['mrr@10']} |")
    lines += ["", "| ratio | value |", "|---|---:|"]
    lines += [f"| {name} | {value} |" for name, value in result["ratios"].items()]
    return "\n".join(lines) + "\n"


def chart(rows: list[dict[str, Any]], path: Path) -> None:
    """Texts embedded and wall time per step, one bar per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = list(dict.fromkeys(r["step"] for r in rows))
    systems = list(dict.fromkeys(r["system"] for r in rows))
    figure, axes = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    width = 0.8 / len(systems)
    for i, system in enumerate(systems):
        own = {r["step"]: r for r in rows if r["system"] == system}
        xs = [s + (i - (len(systems) - 1) / 2) * width for s in range(len(steps))]
        axes[0].bar(xs, [own[s]["texts_embedded"] for s in steps], width, label=system)
        axes[1].bar(xs, [own[s]["wall_s"] for s in steps], width, label=system)
    axes[0].set_yscale("symlog")
    axes[0].set_ylabel("texts embedded")
    axes[1].set_ylabel("wall time (s)")
    axes[1].set_xticks(range(len(steps)), steps, rotation=20, ha="right")
    axes[0].legend()
    axes[0].set_title("Work per step: ragsync beside LangChain index() and LlamaIndex")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
