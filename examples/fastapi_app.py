"""A small FastAPI app that answers questions from the index and can refresh it.

    pip install fastapi uvicorn
    RAGSYNC_CONFIG=examples/ragsync.toml uvicorn examples.fastapi_app:app

GET  /ask?q=...   → the best passages (what you would put in an LLM prompt), with sources
POST /refresh     → one sync pass (in a worker thread: the event loop never blocks)
"""

from __future__ import annotations

import asyncio
import os

from fastapi import FastAPI

import ragsync

app = FastAPI(title="ask the docs")
syncer = ragsync.Syncer.from_config(os.environ.get("RAGSYNC_CONFIG", "ragsync.toml"))
lock = asyncio.Lock()  # one sync or search at a time: Qdrant local mode is single-process


@app.get("/ask")
async def ask(q: str, k: int = 3) -> dict:
    async with lock:
        hits = await syncer.asearch(q, k=k)
    return {
        "question": q,
        "context": "\n\n".join(hit.text for hit in hits),
        "sources": [{"url": h.url, "title": h.title, "score": round(h.score, 4)} for h in hits],
    }


@app.post("/refresh")
async def refresh() -> dict:
    async with lock:
        result = await syncer.arun()
    return {"ok": result.ok, "counters": result.counters.as_dict()}
