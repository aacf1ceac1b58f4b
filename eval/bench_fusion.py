"""Hybrid fusion's rank offset and sparse weight, re-fused offline from the same two rankings.

For each question of both sets of eval/bench_retrieval.py (the evolving site's and the Cargo
Book's hand-written ones), ragsync's index at its defaults is asked once for its dense and once
for its sparse top :data:`~ragsync.retrieval.CANDIDATES` (``Syncer.search(k=50, mode=…)``, as
hybrid search asks them). Those two lists are then fused by :func:`ragsync.retrieval.fuse` for
every rank offset and weight of the grid, so every cell ranks the same candidates and differs
only in the fusion: hit@1, hit@5 and MRR@10 as eval/bench_peers.py's ``rank_scores`` scores
them. To see whether a choice holds beyond the questions it was chosen on, the book's rows are
also split by question kind (``term`` / ``plain``), and ``--splits`` random halves of the book
compare the default offset with 60. Then the page coverage hybrid search adds
(:func:`ragsync.retrieval.with_coverage`, with each page's chunk count from the state DB) is
swept over ``--page-weights`` at the default offset and weight, and the same halves compare
the default page weight with none.

Usage: python eval/bench_fusion.py [--pages 200] [--offsets 2,5,10,20,60]
[--weights 1,1.5,2,3] [--splits 5] [--page-weights 0,0.05,0.1,0.15,0.2,0.3] [--out DIR]
→ DIR/fusion.json and fusion.md (default eval/results).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from eval.bench_peers import rank_scores  # noqa: E402
from eval.bench_retrieval import (  # noqa: E402
    Plan,
    absolute,
    book_source,
    evolving_questions,
    ragsync_index,
)
from eval.evolving import EvolvingSite  # noqa: E402
from eval.questionsets import INSTALLED_CARGO_BOOK, Question, load  # noqa: E402
from ragsync.config import PAGE_WEIGHT  # noqa: E402
from ragsync.models import Hit  # noqa: E402
from ragsync.retrieval import CANDIDATES, RRF_K, fuse, with_coverage  # noqa: E402
from ragsync.testing.static import StaticSite  # noqa: E402

Lists = tuple[list[Hit], list[Hit]]  # one question's dense and sparse candidates


def rankings(
    config: Path, questions: Sequence[Question], embedder: Any
) -> tuple[list[Lists], dict[str, int]]:
    """Each question's dense and sparse top :data:`CANDIDATES` on the index of ``config``, and
    the chunk count of every page among them (for the page coverage)."""
    from ragsync.config import load_config
    from ragsync.sync import Syncer

    with Syncer(load_config(config), embedder=embedder) as syncer:
        lists = [
            (
                syncer.search(q.question, k=CANDIDATES, mode="dense"),
                syncer.search(q.question, k=CANDIDATES, mode="sparse"),
            )
            for q in questions
        ]
        keys = sorted({h.doc_key for d, s in lists for h in (*d, *s)})
        return lists, syncer.state.documents.chunk_counts(keys)


def scores(
    lists: Sequence[Lists],
    questions: Sequence[Question],
    offset: int,
    weight: float,
    page_weight: float = 0.0,
    counts: Mapping[str, int] | None = None,
):
    """Hit@1, hit@5 and MRR@10 of the lists fused with rank offset ``offset`` and sparse weight
    ``weight``, then (``page_weight``) re-ranked by page coverage as hybrid search does."""
    fused = []
    for d, s in lists:
        hits = fuse(d, s, len(d) + len(s), sparse_weight=weight, offset=offset)
        if page_weight:
            hits = with_coverage(hits, counts or {}, page_weight)
        fused.append(hits[:10])
    return rank_scores([[h.url for h in hits] for hits in fused], [q.pages for q in questions])


Found = tuple[list[Question], list[Lists], dict[str, int]]  # a set's questions, lists, counts


def sets(pages: int, work: Path) -> dict[str, Found]:
    """Both question sets, each with its questions' two candidate lists and page sizes."""
    from ragsync.config import load_config
    from ragsync.embed import embedder_from_config

    plan = Plan(peers=(), modes=("hybrid",), max_tokens=(128,))
    found: dict[str, Found] = {}
    evolving = EvolvingSite(pages)
    base = evolving.site.start()
    try:
        questions = evolving_questions(evolving, base)
        index = ragsync_index(work, "evolving", f"{base}/sitemap.xml", 128, plan, None)
        embedder = embedder_from_config(load_config(index.config).embedder)
        found["evolving"] = (questions, *rankings(index.config, questions, embedder))
    finally:
        evolving.site.stop()
    copy = work / "cargo-book-site"
    shutil.copytree(INSTALLED_CARGO_BOOK, copy)
    with StaticSite(copy) as site:
        index = ragsync_index(work, "cargo-book", "", 128, plan, book_source(site.base_url))
        questions = absolute(list(load()), site.base_url)
        found["cargo-book"] = (questions, *rankings(index.config, questions, embedder))
    return found


def cell(result: dict[str, Any]) -> str:
    return f"{result['hit@1']:.3f} / {result['hit@5']:.3f} / {result['mrr@10']:.3f}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=200, help="evolving site pages")
    parser.add_argument("--offsets", default="2,5,10,20,60")
    parser.add_argument("--weights", default="1,1.5,2,3")
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--page-weights", default="0,0.05,0.1,0.15,0.2,0.3")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args(argv)
    offsets = [int(n) for n in options.offsets.split(",")]
    weights = [float(w) for w in options.weights.split(",")]
    page_weights = [float(g) for g in options.page_weights.split(",")]
    work = Path(tempfile.mkdtemp(prefix="ragsync-fusion-"))
    try:
        found = sets(options.pages, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    grid: dict[str, dict[str, Any]] = {}
    coverage: dict[str, dict[str, Any]] = {}
    for name, (questions, lists, counts) in found.items():
        grid[name] = {
            f"{o}/{w:g}": scores(lists, questions, o, w) for o in offsets for w in weights
        }
        coverage[name] = {
            f"{g:g}": scores(lists, questions, RRF_K, 1.5, g, counts) for g in page_weights
        }
    questions, lists, counts = found["cargo-book"]
    kinds = {}
    for kind in ("term", "plain"):
        picked = [i for i, q in enumerate(questions) if q.kind == kind]
        sub_q, sub_l = [questions[i] for i in picked], [lists[i] for i in picked]
        kinds[kind] = {str(o): scores(sub_l, sub_q, o, 1.5) for o in sorted({RRF_K, 60})}
    rng = random.Random(1)
    halves, page_halves = [], []
    for _ in range(options.splits):
        order = list(range(len(questions)))
        rng.shuffle(order)
        for half in (order[: len(order) // 2], order[len(order) // 2 :]):
            sub_q, sub_l = [questions[i] for i in half], [lists[i] for i in half]
            halves.append({str(o): scores(sub_l, sub_q, o, 1.5) for o in sorted({RRF_K, 60})})
            page_halves.append(
                {f"{g:g}": scores(sub_l, sub_q, RRF_K, 1.5, g, counts) for g in (0, PAGE_WEIGHT)}
            )
    command = " ".join(["python eval/bench_fusion.py", *(argv or sys.argv[1:])])
    result = {"command": command, "default_offset": RRF_K, "grid": grid, "book_kinds": kinds}
    result["book_halves"] = halves
    result.update(page_weight=PAGE_WEIGHT, coverage=coverage, book_page_halves=page_halves)
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "fusion.json").write_text(json.dumps(result, indent=2) + "\n")
    (options.out / "fusion.md").write_text(markdown(result, offsets, weights))
    print(markdown(result, offsets, weights))


def markdown(result: dict[str, Any], offsets: Sequence[int], weights: Sequence[float]) -> str:
    lines = [
        f"`{result['command']}`",
        "",
        "The same dense and sparse top 50 per question, fused offline by `ragsync.retrieval.fuse`"
        f" (ragsync's default rank offset: {result['default_offset']}, weight 1.5), without the"
        " sparse gate that hybrid search has since applied (measured beside the retrieval table"
        " under *Hybrid retrieval*); hit@1 / hit@5 / MRR@10.",
        "",
    ]
    for name, cells in result["grid"].items():
        lines += [f"**{name}**", "", "| offset | " + " | ".join(f"weight {w:g}" for w in weights)]
        lines[-1] += " |"
        lines.append("|---:|" + "---|" * len(weights))
        for o in offsets:
            row = " | ".join(cell(cells[f"{o}/{w:g}"]) for w in weights)
            lines.append(f"| {o} | {row} |")
        lines.append("")
    lines += [
        "**cargo-book by kind** (weight 1.5)",
        "",
        "| kind | offset | result |",
        "|---|---:|---|",
    ]
    for kind, by_offset in result["book_kinds"].items():
        lines += [f"| {kind} | {o} | {cell(r)} |" for o, r in by_offset.items()]
    default, other = str(result["default_offset"]), "60"
    halves = result["book_halves"]
    if default != other and halves:
        better = {
            metric: sum(h[default][metric] > h[other][metric] for h in halves)
            for metric in ("hit@1", "hit@5", "mrr@10")
        }
        worse = {
            metric: sum(h[default][metric] < h[other][metric] for h in halves)
            for metric in ("hit@1", "hit@5", "mrr@10")
        }
        lines += [
            "",
            f"**cargo-book, {len(halves)} random halves** (weight 1.5): offset {default} against "
            f"60 is better / worse on hit@1 in {better['hit@1']} / {worse['hit@1']}, on hit@5 in "
            f"{better['hit@5']} / {worse['hit@5']}, on MRR@10 in {better['mrr@10']} / "
            f"{worse['mrr@10']} halves.",
        ]
    if result.get("coverage"):
        lines += page_coverage(result)
    return "\n".join(lines) + "\n"


def page_coverage(result: dict[str, Any]) -> list[str]:
    """The report's page-coverage part: each set per page weight, and the book's halves."""
    default = f"{result['page_weight']:g}"
    names = list(result["coverage"])
    lines = [
        "",
        f"**Page coverage** (offset {result['default_offset']}, weight 1.5; every fused "
        "candidate + page weight × (the page's other candidates / its chunks); ragsync's "
        f"default page weight: {default})",
        "",
        "| page weight | " + " | ".join(names) + " |",
        "|---:|" + "---|" * len(names),
    ]
    for g in result["coverage"][names[0]]:
        lines.append(f"| {g} | " + " | ".join(cell(result["coverage"][n][g]) for n in names) + " |")
    halves = result.get("book_page_halves") or []
    if halves and default != "0":
        counts = [
            f"{metric} {sum(h[default][metric] > h['0'][metric] for h in halves)} / "
            f"{sum(h[default][metric] < h['0'][metric] for h in halves)}"
            for metric in ("hit@1", "hit@5", "mrr@10")
        ]
        lines += [
            "",
            f"**cargo-book, {len(halves)} random halves**: page weight {default} against none "
            f"is better / worse on {', '.join(counts)} halves.",
        ]
    return lines


if __name__ == "__main__":
    main()
