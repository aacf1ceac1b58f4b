"""An app built on LangChain reads the collection ragsync wrote, unchanged (README "Reading the
index from LangChain")."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings
from langchain_qdrant import QdrantVectorStore, RetrievalMode, SparseEmbeddings, SparseVector
from qdrant_client import QdrantClient

from ragsync.retriever import RagsyncRetriever
from ragsync.sparse import SPARSE_NAME, encode, encode_query
from ragsync.sync import Syncer
from tests.support import make_config, sitemap_source


class RagsyncSparse(SparseEmbeddings):
    """ragsync's sparse encoder behind langchain_qdrant's SparseEmbeddings (the README's)."""

    def embed_documents(self, texts):
        return [
            SparseVector(indices=list(v.indices), values=list(v.values)) for v in map(encode, texts)
        ]

    def embed_query(self, text):
        vector = encode_query(text)
        return SparseVector(indices=list(vector.indices), values=list(vector.values))


class MiniLM(Embeddings):
    """The same model ragsync embeds with, behind LangChain's Embeddings interface."""

    def __init__(self, embedder):
        self.embedder = embedder

    def embed_documents(self, texts):
        return self.embedder.embed(texts)

    def embed_query(self, text):
        return self.embedder.embed([text])[0]


def test_langchain_qdrant_gets_the_same_top_hits_as_ragsync_search(
    tmp_path, site, make_syncer, real_embedder
):
    syncer = make_syncer(site)
    syncer.run()
    queries = ["how does throttling behave under load?", "encryption limits", "guide 2"]
    expected = {q: [(h.url, h.text) for h in syncer.search(q, k=3, mode="dense")] for q in queries}

    client = QdrantClient(path=str(tmp_path / "qdrant"))
    try:
        store = QdrantVectorStore(
            client=client, collection_name="test", embedding=MiniLM(real_embedder)
        )
        for query in queries:
            docs = store.similarity_search(query, k=3)
            assert [(d.metadata["url"], d.page_content) for d in docs] == expected[query]
            assert {"headings", "title", "doc_key", "chunk_hash", "model"} <= set(docs[0].metadata)
    finally:
        client.close()


def test_langchain_qdrant_in_hybrid_mode_reads_the_sparse_vectors(
    tmp_path, site, make_syncer, real_embedder
):
    syncer = make_syncer(site)
    syncer.run()
    queries = ["throttling", "encryption limits", "operators audit trail"]
    sparse = {q: [(h.url, h.text) for h in syncer.search(q, k=3, mode="sparse")] for q in queries}
    syncer.engine.release_store()

    client = QdrantClient(path=str(tmp_path / "qdrant"))
    try:

        def store(mode):
            return QdrantVectorStore(
                client=client,
                collection_name="test",
                embedding=MiniLM(real_embedder),
                sparse_embedding=RagsyncSparse(),
                sparse_vector_name=SPARSE_NAME,
                retrieval_mode=mode,
            )

        lexical, hybrid = store(RetrievalMode.SPARSE), store(RetrievalMode.HYBRID)
        for query in queries:
            docs = lexical.similarity_search(query, k=3)
            assert [(d.metadata["url"], d.page_content) for d in docs] == sparse[query]
            assert len(hybrid.similarity_search(query, k=3)) == 3
    finally:
        client.close()


def test_ragsync_retriever_gives_a_chain_what_langchain_qdrant_gives_it_on_any_store(
    tmp_path, site, make_syncer, embedder, real_embedder
):
    syncer = make_syncer(site)  # Qdrant local mode: langchain_qdrant can open it
    syncer.run()
    syncer.engine.release_store()
    queries = ["how does throttling behave under load?", "encryption limits", "guide 2"]
    client = QdrantClient(path=str(tmp_path / "qdrant"))
    try:
        store = QdrantVectorStore(
            client=client, collection_name="test", embedding=MiniLM(real_embedder)
        )
        expected = {
            q: [(d.metadata["url"], d.page_content) for d in store.similarity_search(q, k=3)]
            for q in queries
        }
    finally:
        client.close()

    # The same site in Qdrant Edge, the embedded default, which qdrant-client cannot open.
    config = make_config(
        tmp_path / "edge",
        [sitemap_source(site)],
        store={"kind": "qdrant_edge", "path": str(tmp_path / "edge" / "shards")},
    )
    with Syncer(config, embedder=embedder) as edge:
        assert edge.run().ok
        retriever = RagsyncRetriever(syncer=edge, k=3, mode="dense")
        for query in queries:
            docs = retriever.invoke(query)
            assert [(d.metadata["url"], d.page_content) for d in docs] == expected[query]
            assert {"title", "headings", "source", "doc_key", "score"} <= set(docs[0].metadata)
        hybrid = RagsyncRetriever(syncer=edge, k=2, source="docs").invoke("encryption limits")
        assert len(hybrid) == 2 and hybrid[0].metadata["sparse_score"] is not None
