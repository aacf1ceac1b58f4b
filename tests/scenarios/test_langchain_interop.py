"""An app built on LangChain reads the collection ragsync wrote, unchanged (README "Reading the
index from LangChain")."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings
from langchain_qdrant import QdrantVectorStore
from qdrant_client import QdrantClient


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
    expected = {q: [(h.url, h.text) for h in syncer.search(q, k=3)] for q in queries}

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
