"""ragsync beside LangChain's index(), LlamaIndex's IngestionPipeline and CocoIndex, in one run.

One evolving site (eval/evolving.py) on 127.0.0.1 goes through a sequence of steps; after each
step every system syncs it as a fresh process (a scheduled job), then its index is read back and
checked against the ground truth. Per step and system: wall time, CPU seconds of the process
(user + system, its children included), requests and body bytes the site served, texts and
model tokens embedded beside the minimum (texts absent from every earlier state of that
system's index), points written and deleted, and missing / stale / duplicate counts. A
"changes" total sums every step after the cold sync. At the end every index answers the site's
questions (one per fact, each with its answer page): hit@1, hit@5 and MRR@10 on the same model.

Model tokens are what MiniLM reads: each text's token count with the model's own tokenizer
(special tokens included), capped at its max_seq_length (256), counted here, outside the timed
process. A peer reports the texts it gave the model; for ragsync, which does not list them, they
are its new texts (its minimum), shown only when their number equals the texts it embedded.

A system named ``ragsync:BACKEND[:MAX_TOKENS]`` (``ragsync:onnx-int8``,
``ragsync:onnx-int8:128``) is ragsync with ``[embedder] backend`` (and ``[chunker] max_tokens``)
set; its questions are embedded with the same backend, so its index is read as it was written.

Usage: python eval/bench_peers.py [--pages 200] [--steps 8] [--systems ragsync,cocoindex,...]
→ eval/results/peers.json, peers.md and peers.png.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from eval.evolving import EvolvingSite, check_index  # noqa: E402
from ragsync.embed import DEFAULT_BACKEND  # noqa: E402

SYSTEMS = ("ragsync", "ragsync:torch", "langchain-incremental", "langchain-full", "llamaindex")
SYSTEMS += ("cocoindex",)
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
        kind, _, variant = name.partition(":")
        backend, _, max_tokens = variant.partition(":")
        # ragsync without a backend named runs its default (auto: a new index's backend)
        self.backend = backend or (DEFAULT_BACKEND if kind == "ragsync" else "torch")
        if kind == "ragsync":
            config = self.work / "ragsync.toml"
            # every = "0s": each run revalidates every page, like the peers re-read every page.
            # One 404/410 deletes a page, as the peers do (ragsync's default asks for two
            # observations an hour apart). The store is the default one (Qdrant Edge), read
            # back through ragsync's own connector.
            config.write_text(
                (f'[embedder]\nbackend = "{backend}"\n' if backend else "")
                + (f"[chunker]\nmax_tokens = {max_tokens}\n" if max_tokens else "")
                + f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{sitemap}"\n'
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
            self.config = config  # its store is read through ragsync's own connector
        else:
            self.command = [sys.executable, str(HERE / "peers.py"), name, str(self.work), sitemap]
            self.store, self.collection = self.work / "qdrant", "peer"

    def run(self) -> tuple[float, float, dict[str, Any], list[str] | None]:
        """Run one sync: wall seconds, CPU seconds, counters, and the texts the model was
        given (None when the system does not list them)."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run(self.command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{self.name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        # ragsync prints one JSON document; a peer prints one JSON line after any chatter:
        # the report starts at the last line that opens an object
        out = proc.stdout
        start = 0 if out.startswith("{") else out.rfind("\n{") + 1
        if not out[start:].startswith("{"):
            raise SystemExit(f"{self.name} printed no report:\n{proc.stderr[-3000:]}")
        report = json.loads(out[start:])
        counters = report.get("counters", report)
        return (
            wall,
            cpu,
            {
                "texts_embedded": counters.get(
                    "chunks_embedded", counters.get("texts_embedded", 0)
                ),
                "points_written": counters.get(
                    "points_upserted", counters.get("points_written", 0)
                ),
                "points_deleted": counters.get("points_deleted", 0),
            },
            report.get("embedded"),
        )

    def ragsync_store(self) -> Any:
        """ragsync's store, opened as ragsync opens it (None for a peer)."""
        if not self.name.startswith("ragsync"):
            return None
        from ragsync.config import load_config
        from ragsync.registry import open_store

        return open_store(load_config(self.config).store)

    def points(self) -> list[dict[str, Any]]:
        """Every point: ``url``, ``text`` (the chunk) and ``embedded`` (what the model saw)."""
        from qdrant_client import QdrantClient

        own = self.ragsync_store()
        if own is not None:
            try:
                return [self._point(payload) for _, payload, _ in own.points()]
            finally:
                own.close()

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
        if self.name == "cocoindex":
            return {"url": payload["url"], "text": payload["text"], "embedded": payload["text"]}
        meta = payload["metadata"]
        text = payload["page_content"]
        return {"url": meta.get("url", meta.get("source")), "text": text, "embedded": text}

    def search(self, vectors: list[list[float]], limit: int = 10) -> list[list[str]]:
        """The URLs of the top ``limit`` points for each query vector."""
        from qdrant_client import QdrantClient

        own = self.ragsync_store()
        if own is not None:
            try:
                return [[hit.url for hit in own.search(v, limit)] for v in vectors]
            finally:
                own.close()

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


class TokenCounter:
    """Model tokens of texts: MiniLM's tokenizer, special tokens included, capped at the
    model's max_seq_length (what the model reads; longer texts are truncated)."""

    def __init__(self) -> None:
        from tokenizers import Tokenizer

        from eval.peers import Model

        path = Path(Model.path())
        self.limit = json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"]
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()

    def __call__(self, texts: list[str]) -> int:
        encodings = self.tokenizer.encode_batch(texts) if texts else []
        return sum(min(len(encoding.ids), self.limit) for encoding in encodings)


def first_right(urls: Sequence[str], right: Collection[str]) -> tuple[int, int] | None:
    """Where the first right page is in a ranking of chunk URLs (best first).

    Returns:
        ``(chunk position, page rank)``, both from 1: the position of the first chunk whose URL
        is in ``right``, and that URL's rank among the distinct URLs ranked by first occurrence
        (a page's second chunk does not push the pages after it down). None when no chunk's URL
        is right.
    """
    pages: set[str] = set()
    for position, url in enumerate(urls, start=1):
        pages.add(url)
        if url in right:
            return position, len(pages)
    return None


def rank_scores(
    ranked: Sequence[Sequence[str]], answers: Sequence[Collection[str]]
) -> dict[str, Any]:
    """hit@1, hit@5 and MRR@10 of rankings of chunk URLs against each question's right pages.

    hit@k: a right page is among the top k chunks' pages; MRR@10: the mean of 1 / the first
    right page's rank among the pages of the top 10 chunks (ranked by first occurrence), 0 when
    none is right. Every system and benchmark scores through this one function.
    """
    found = [first_right(urls[:10], right) for urls, right in zip(ranked, answers, strict=True)]
    count = len(found)
    return {
        "questions": count,
        "hit@1": round(sum(1 for f in found if f and f[0] <= 1) / count, 3),
        "hit@5": round(sum(1 for f in found if f and f[0] <= 5) / count, 3),
        "mrr@10": round(sum(1 / f[1] for f in found if f) / count, 3),
    }


def retrieval_quality(systems: list[System], questions: list[tuple[str, str]]) -> dict[str, dict]:
    """hit@1, hit@5 and MRR@10 of each index over the site's questions (same model)."""
    from eval.peers import Model

    texts = [question for question, _ in questions]
    by_backend = {"torch": Model.encode(texts) if systems else []}
    answers = [(answer,) for _, answer in questions]
    quality = {}
    for system in systems:
        if system.backend not in by_backend:
            from ragsync.onnxembed import OnnxEmbedder

            embedder = OnnxEmbedder(quantize=system.backend == "onnx-int8")
            by_backend[system.backend] = embedder.embed(texts)
        vectors = by_backend[system.backend]
        quality[system.name] = rank_scores(system.search(vectors), answers)
        print(json.dumps({"system": system.name, **quality[system.name]}), flush=True)
    return quality


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument(
        "--steps", type=int, default=len(STEPS), help="run only the first N steps (quick checks)"
    )
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ragsync-peers-"))
    evolving = EvolvingSite(options.pages)
    base = evolving.site.start()
    systems = [System(name, work, f"{base}/sitemap.xml") for name in options.systems.split(",")]
    for backend in {system.backend for system in systems} - {"torch"}:
        from ragsync.onnxembed import OnnxEmbedder

        # made (or found in the cache) once per machine, before any timed run
        OnnxEmbedder(quantize=backend == "onnx-int8").ensure_export()
    seen: dict[str, set[str]] = {system.name: set() for system in systems}
    rows: list[dict[str, Any]] = []
    tokens = TokenCounter()
    try:
        for step, mutate in STEPS[: options.steps]:
            change = mutate(evolving)
            truth = evolving.truth(base)
            for system in systems:
                mark = len(evolving.site.hits)
                wall, cpu, counters, given = system.run()
                hits = evolving.site.hits[mark:]
                points = system.points()
                embedded = {point["embedded"] for point in points}
                new = sorted(embedded - seen[system.name])
                minimum = len(new)
                seen[system.name] |= embedded
                if given is None and counters["texts_embedded"] == minimum:
                    given = new  # ragsync: exactly its new texts (efficiency 1.0)
                check = check_index(
                    [(p["url"], p["text"]) for p in points], truth, evolving.gen.sentences
                )
                row = {
                    "step": step,
                    "change": change,
                    "system": system.name,
                    "wall_s": round(wall, 2),
                    "cpu_s": round(cpu, 2),
                    "requests": len(hits),
                    "bytes_downloaded": sum(hit.bytes for hit in hits),
                    **counters,
                    "tokens_embedded": None if given is None else tokens(given),
                    "texts_minimum": minimum,
                    "tokens_minimum": tokens(new),
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
        "totals": totals(rows),
        "quality": quality,
        "ratios": ratios(rows),
    }
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "peers.json").write_text(json.dumps(result, indent=2) + "\n")
    (options.out / "peers.md").write_text(markdown(result))
    chart(rows, options.out / "peers.png")
    print(markdown(result))


TOTALLED = ("wall_s", "cpu_s", "requests", "bytes_downloaded", "texts_embedded")
TOTALLED += ("tokens_embedded", "texts_minimum", "tokens_minimum")


def totals(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per system: the cold sync, the "changes" (every step after it) and all steps, each
    summing :data:`TOTALLED` (a sum holding an unknown part is None)."""

    def add(own: list[dict[str, Any]]) -> dict[str, Any]:
        sums: dict[str, Any] = {}
        for key in TOTALLED:
            values = [r[key] for r in own]
            total = None if None in values else round(sum(values), 2)
            sums[key] = total
        sums["steps"] = len(own)
        return sums

    out = {}
    for system in dict.fromkeys(r["system"] for r in rows):
        own = [r for r in rows if r["system"] == system]
        out[system] = {"cold": add(own[:1]), "changes": add(own[1:]), "all": add(own)}
    return out


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
        "| step | system | wall s | CPU s | requests | bytes | embedded | tokens | minimum "
        "| min. tokens | efficiency | written | deleted | missing | stale | dup |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['step']} | {r['system']} | {r['wall_s']} | {r['cpu_s']} | {r['requests']} | "
            f"{r['bytes_downloaded']:,} | {r['texts_embedded']} | {_count(r['tokens_embedded'])} "
            f"| {r['texts_minimum']} | {r['tokens_minimum']:,} | {r['embedding_efficiency']} | "
            f"{r['points_written']} | {r['points_deleted']} | "
            f"{r['missing_pages']} | {r['stale_pages']} | {r['duplicate_chunks']} |"
        )
    lines += [
        "",
        "| totals | cold sync CPU s (texts, tokens) | changes: steps after it, CPU s (texts, "
        "tokens) | changes wall s | all steps CPU s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, t in result["totals"].items():
        cold, changes = t["cold"], t["changes"]
        lines.append(
            f"| {name} | {cold['cpu_s']} ({cold['texts_embedded']:,}, "
            f"{_count(cold['tokens_embedded'])}) | {changes['cpu_s']} "
            f"({changes['texts_embedded']:,}, {_count(changes['tokens_embedded'])}) | "
            f"{changes['wall_s']} | {t['all']['cpu_s']} |"
        )
    lines += ["", "| retrieval (final index) | questions | hit@1 | hit@5 | MRR@10 |"]
    lines.append("|---|---:|---:|---:|---:|")
    for name, q in result["quality"].items():
        lines.append(f"| {name} | {q['questions']} | {q['hit@1']} | {q['hit@5']} | {q['mrr@10']} |")
    lines += ["", "| ratio | value |", "|---|---:|"]
    lines += [f"| {name} | {value} |" for name, value in result["ratios"].items()]
    return "\n".join(lines) + "\n"


def _count(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


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
    axes[0].set_title("Work per step: ragsync beside LangChain index(), LlamaIndex, CocoIndex")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
