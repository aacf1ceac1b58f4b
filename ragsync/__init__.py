"""ragsync keeps a RAG vector index exactly in sync with the web sources it was built from."""

__version__ = "0.1.0"
