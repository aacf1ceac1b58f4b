"""The naive baseline ragsync replaces: re-crawl every page and re-embed every chunk on a timer.

Fetches every sitemap URL unconditionally, extracts and chunks like ragsync (same extractor,
same chunker, same model), embeds every chunk, and rewrites the whole collection.
Usage: python eval/naive.py SITEMAP_URL QDRANT_PATH  → prints a JSON line of counters.
"""

from __future__ import annotations

import json
import sys
import time
import uuid

import httpx

from ragsync.chunk import Chunker
from ragsync.connectors.sitemap import parse_sitemap
from ragsync.embed import SentenceTransformerEmbedder
from ragsync.extract import extract


def main(sitemap: str, qdrant_path: str) -> None:
    from qdrant_client import QdrantClient, models

    started = time.perf_counter()
    embedder = SentenceTransformerEmbedder()
    chunker = Chunker(160, embedder.count_tokens, embedder.max_input_tokens)
    texts, payloads = [], []
    with httpx.Client() as client:
        pages = parse_sitemap(client.get(sitemap).content).pages
        for url, _ in pages:
            response = client.get(url)
            if response.status_code != 200:
                continue
            for chunk in chunker.chunk(extract(response.text, url).markdown):
                texts.append(chunk.text)
                payloads.append({"page_content": chunk.text, "metadata": {"url": url}})
    vectors = embedder.embed(texts)
    client = QdrantClient(path=qdrant_path)
    if client.collection_exists("naive"):
        client.delete_collection("naive")
    client.create_collection(
        "naive",
        vectors_config=models.VectorParams(
            size=embedder.dimension, distance=models.Distance.COSINE
        ),
    )
    points = [
        models.PointStruct(id=str(uuid.uuid4()), vector=v, payload=p)
        for v, p in zip(vectors, payloads, strict=True)
    ]
    for start in range(0, len(points), 256):
        client.upsert("naive", points=points[start : start + 256])
    client.close()
    print(
        json.dumps(
            {
                "wall_s": time.perf_counter() - started,
                "texts_embedded": len(texts),
                "points_written": len(points),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
