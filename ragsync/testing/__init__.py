"""Test doubles shipped for users' own tests: a loopback site and a deterministic embedder.

:class:`DevSite` serves pages with a sitemap, robots.txt and validators on 127.0.0.1;
:class:`StaticSite` serves a folder (a real site saved as files) as a static server would;
:class:`EmbeddingServer` is an OpenAI-compatible embedding service on 127.0.0.1 and
:class:`HashEmbedder` model-free deterministic vectors, :class:`FastEmbedder` a whole model-free
embedder built on them. Nothing in the engine
imports this package.
"""

from ragsync.testing.embed import EmbeddingServer, FastEmbedder, HashEmbedder
from ragsync.testing.site import DevSite, Hit, serve_loopback, stop_server
from ragsync.testing.static import StaticSite

__all__ = [
    "DevSite",
    "EmbeddingServer",
    "FastEmbedder",
    "HashEmbedder",
    "Hit",
    "StaticSite",
    "serve_loopback",
    "stop_server",
]
