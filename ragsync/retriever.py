"""A LangChain retriever over ragsync's own search, whatever the store (README "Reading the
index from LangChain").

``langchain_qdrant`` reads a collection through qdrant-client, which can open a Qdrant server
or a local-mode folder but not a Qdrant Edge shard, the embedded default. This retriever asks
:meth:`ragsync.sync.Syncer.search` instead, so an app's chain reads any store ragsync writes,
ranked by any search mode, with the metadata ``langchain_qdrant`` would give its documents.

Example::

    from ragsync import Syncer
    from ragsync.retriever import RagsyncRetriever

    retriever = RagsyncRetriever(syncer=Syncer.from_config("ragsync.toml"), k=4)
    for doc in retriever.invoke("how do I rotate keys?"):
        print(doc.metadata["url"], doc.metadata["headings"], doc.page_content[:80])

Needs ``langchain-core`` (installed with any LangChain package).
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from ragsync.models import Hit


def document(hit: Hit) -> Document:
    """A hit as LangChain's document: the chunk text, and its place and scores as metadata."""
    return Document(
        page_content=hit.text,
        metadata={
            "url": hit.url,
            "title": hit.title,
            "headings": list(hit.headings),
            "source": hit.source,
            "doc_key": hit.doc_key,
            "point_id": hit.point_id,
            "score": hit.score,
            "dense_score": hit.dense_score,
            "sparse_score": hit.sparse_score,
            "also": list(hit.also),
        },
    )


class RagsyncRetriever(BaseRetriever):
    """The ``k`` chunks :meth:`Syncer.search` ranks first for a query, as LangChain documents.

    Attributes:
        syncer: an open :class:`ragsync.sync.Syncer` (it keeps the model loaded between
            queries; close it when the app stops).
        k: how many documents.
        mode: ``"dense"``, ``"sparse"`` or ``"hybrid"`` (None: the config's ``[search] mode``).
        source: only this source's chunks (None: every source).
    """

    syncer: Any
    k: int = 4
    mode: str | None = None
    source: str | None = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        hits = self.syncer.search(query, self.k, source=self.source, mode=self.mode)
        return [document(hit) for hit in hits]
