"""ragsync's chunker alone over the evolving site's steps: how many chunk texts each step makes
new, and how well the final chunks answer the site's questions (real MiniLM).

No HTTP and no index: each step's live pages (eval/evolving.py, the steps of
eval/bench_peers.py) are rendered as the dev site serves them, extracted and chunked in this
process. Per step and variant: live chunk texts, texts new against every earlier step (what the
embedding cache lacks, so what a sync embeds) and their share, and the new texts' tokens. At the
end the final chunks are embedded with ragsync's own embedder and each question ranks them by
cosine (as Qdrant does): hit@1, hit@5 and MRR@10 of the answer page, counted as
eval/bench_peers.py counts them.

Then, not a step of eval/bench_peers.py, 5% of the pages get a new title: the new texts that
makes (counted after the questions, which name the old titles).

Variants: where the page title goes in the embedded text (``Chunker(title=...)``): ``every``
chunk, the first chunk of each ``section``, the first chunk of the ``page``.

Usage: python eval/bench_chunking.py [--pages 200] [--variants every,section,page]
→ eval/results/chunking.json and chunking.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from eval.bench_peers import STEPS  # noqa: E402
from eval.evolving import EvolvingSite  # noqa: E402
from ragsync.chunk import Chunker, count_tiktoken  # noqa: E402
from ragsync.extract import extract  # noqa: E402

BASE = "http://docs.example"


def make_chunker(variant: str, embedder: Any) -> Chunker:
    args = (160, embedder.count_tokens, embedder.max_input_tokens)
    if variant == "every":  # also what a chunker without the option does (an older checkout)
        return Chunker(*args)
    return Chunker(*args, title=variant)  # type: ignore[call-arg]


def step_points(site: EvolvingSite, chunkers: dict[str, Chunker]) -> dict[str, list[tuple]]:
    """``{variant: [(url, text), ...]}`` for every live page of the site as it is now."""
    points: dict[str, list[tuple]] = {name: [] for name in chunkers}
    for path in sorted(site.live):
        url = BASE + path
        markdown = extract(site.site.render(site.site.pages[path]), url).markdown
        for name, chunker in chunkers.items():
            points[name] += [(url, chunk.text) for chunk in chunker.chunk(markdown)]
    return points


def fact_last() -> None:
    """Make the generator write each section's fact paragraph last, after its other
    paragraphs: where a title kept only in a section's first chunk would be missing."""
    from eval.evolving import Generator

    section = Generator.section

    def reordered(self: Generator, name: str, topic: str) -> Any:
        made = section(self, name, topic)
        made.paragraphs = [*made.paragraphs[1:], made.paragraphs[0]]
        return made

    Generator.section = reordered  # type: ignore[method-assign]


def retitle(site: EvolvingSite, share: float) -> str:
    """Give a share of the live pages a new title (their level-1 heading)."""
    paths = site.rng.sample(sorted(site.live), max(1, round(len(site.live) * share)))
    for path in paths:
        page = site.live[path]
        page.name += " service"
        site.site.set_page(path, page.title, page.html())
    return f"retitle {len(paths)} pages"


def retrieval(embedder: Any, points: list[tuple], questions: list[tuple[str, str]]) -> dict:
    """hit@1, hit@5 and MRR@10 of the answer page over the top 10 chunks per question."""
    import numpy as np

    texts = sorted({text for _, text in points})
    vectors = dict(zip(texts, embedder.embed(texts), strict=True))
    matrix = np.array([vectors[text] for _, text in points], dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    asked = np.array(embedder.embed([q for q, _ in questions]), dtype=np.float32)
    asked /= np.linalg.norm(asked, axis=1, keepdims=True)
    ranks = []
    for scores, (_, answer) in zip(asked @ matrix.T, questions, strict=True):
        urls = [points[i][0] for i in np.argsort(-scores, kind="stable")[:10]]
        ranks.append(urls.index(answer) + 1 if answer in urls else None)
    return {
        "questions": len(questions),
        "hit@1": round(sum(1 for r in ranks if r == 1) / len(ranks), 3),
        "hit@5": round(sum(1 for r in ranks if r and r <= 5) / len(ranks), 3),
        "mrr@10": round(sum(1 / r for r in ranks if r) / len(ranks), 3),
    }


def block_edits(chunker: Chunker, folder: Path, per_page: int = 30) -> dict[str, Any]:
    """Random single-block changes to real documentation pages (``folder``'s HTML, extracted):
    a block deleted, a block of the page inserted again elsewhere in it, or a clause
    added to a block; per change, the chunk texts (and tokens) that are new."""
    import random

    from ragsync.chunk import split_blocks

    rng = random.Random(21)
    counts, tokens, pages, chunks = [], [], 0, 0
    for path in sorted(folder.rglob("*.html")):
        parts = list(split_blocks(extract(path.read_text(errors="replace"), "http://x/").markdown))
        content = [i for i, (level, _) in enumerate(parts) if not level]
        if len(content) < 4:
            continue
        pages += 1
        original = chunker.chunk(render(parts))
        chunks += len(original)
        before = {c.text for c in original}
        for _ in range(per_page):
            changed = list(parts)
            at = rng.choice(content)
            operation = rng.choice(("delete", "insert", "edit"))
            if operation == "delete":
                del changed[at]
            elif operation == "insert":
                changed.insert(at, (0, parts[rng.choice(content)][1]))
            else:
                changed[at] = (0, changed[at][1] + " Also see the notes below for details.")
            new = {c.text for c in chunker.chunk(render(changed))} - before
            counts.append(len(new))
            tokens.append(sum(count_tiktoken(text) for text in new))
    return {
        "pages": pages,
        "changes": len(counts),
        "chunks": chunks,
        "new_texts_per_change": round(sum(counts) / len(counts), 2),
        "new_tokens_per_change": round(sum(tokens) / len(tokens), 1),
        "changes_over_2_texts": round(sum(1 for n in counts if n > 2) / len(counts), 3),
    }


def render(parts: list[tuple[int, str]]) -> str:
    """Markdown from :func:`ragsync.chunk.split_blocks` output."""
    return "\n\n".join(f"{'#' * level} {text}" if level else text for level, text in parts) + "\n"


def main() -> None:
    from ragsync.embed import SentenceTransformerEmbedder

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--variants", default="every,section,page")
    parser.add_argument("--label", default="", help="a prefix for the variant names")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument(
        "--fact-last",
        action="store_true",
        help="put each section's fact in its last paragraph (the site puts it in the first); "
        "the cold sync only",
    )
    parser.add_argument(
        "--real",
        type=Path,
        help="only random block changes to the real pages under this folder "
        "(e.g. tests/fixtures/docsites)",
    )
    options = parser.parse_args()
    if options.real:
        from ragsync.embed import SentenceTransformerEmbedder as Model

        model = Model()
        for name in options.variants.split(","):
            found = block_edits(make_chunker(name, model), options.real)
            print(json.dumps({"variant": options.label + name, **found}), flush=True)
        return

    embedder = SentenceTransformerEmbedder()
    names = options.variants.split(",")
    chunkers = {name: make_chunker(name, embedder) for name in names}
    if options.fact_last:
        fact_last()
    site = EvolvingSite(options.pages)
    seen: dict[str, set[str]] = {name: set() for name in names}
    rows: list[dict[str, Any]] = []
    points: dict[str, list[tuple]] = {}
    # The steps edit a section's last paragraph, which with --fact-last holds the fact.
    for step, mutate in STEPS[:1] if options.fact_last else STEPS:
        change = mutate(site)
        points = step_points(site, chunkers)
        for name in names:
            live = {text for _, text in points[name]}
            new = live - seen[name]
            seen[name] |= live
            row = {
                "step": step,
                "change": change,
                "variant": options.label + name,
                "chunks": len(points[name]),
                "texts": len(live),
                "tokens": sum(count_tiktoken(text) for text in live),
                "new_texts": len(new),
                "new_share": round(len(new) / len(live), 3) if live else 0.0,
                "new_tokens": sum(count_tiktoken(text) for text in new),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    questions = site.questions(BASE)
    quality = {}
    for name in names:
        quality[options.label + name] = retrieval(embedder, points[name], questions)
        print(json.dumps({"variant": options.label + name, **quality[options.label + name]}))
    # Not a step of eval/bench_peers.py: retitle pages (what the title's place decides),
    # measured after the questions were asked, since they name the old titles.
    change = retitle(site, 0.05)
    retitled = step_points(site, chunkers)
    for name in names:
        live = {text for _, text in retitled[name]}
        new = live - seen[name]
        row = {
            "step": "retitle pages",
            "change": change,
            "variant": options.label + name,
            "chunks": len(retitled[name]),
            "texts": len(live),
            "new_texts": len(new),
            "new_share": round(len(new) / len(live), 3) if live else 0.0,
            "new_tokens": sum(count_tiktoken(text) for text in new),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {"pages": options.pages, "rows": rows, "quality": quality}
    options.out.mkdir(parents=True, exist_ok=True)
    stem = f"chunking{'-' + options.label.rstrip('-') if options.label else ''}"
    (options.out / f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    (options.out / f"{stem}.md").write_text(markdown(result))
    print(markdown(result))


def markdown(result: dict[str, Any]) -> str:
    """The per-variant table: texts new over the changing steps, and retrieval."""
    lines = [
        f"Evolving site, {result['pages']} pages; texts new against every earlier step.",
        "",
        "| variant | cold texts (tokens) | new texts, later steps | new tokens, later steps "
        "| new share per changing step | hit@1 | hit@5 | MRR@10 | retitle 5%: new texts |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, q in result["quality"].items():
        rows = [r for r in result["rows"] if r["variant"] == name]
        later = [r for r in rows[1:] if r["step"] != "retitle pages"]
        retitled = next((r for r in rows if r["step"] == "retitle pages"), None)
        shares = " / ".join(f"{r['new_share']:.3f}" for r in later if r["new_texts"])
        lines.append(
            f"| {name} | {rows[0]['texts']} ({rows[0]['tokens']}) "
            f"| {sum(r['new_texts'] for r in later)} "
            f"| {sum(r['new_tokens'] for r in later)} | {shares} "
            f"| {q['hit@1']} | {q['hit@5']} | {q['mrr@10']} "
            f"| {retitled['new_texts'] if retitled else '–'} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
