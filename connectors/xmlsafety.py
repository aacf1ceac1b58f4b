"""Refusal of hostile XML, shared by the XML-reading connectors."""

from __future__ import annotations


def refuse_entities(document: bytes) -> None:
    """Refuse XML that declares entities: the stuff of entity-expansion bombs and external
    entity reads (XXE). No sitemap or feed needs them.

    Raises:
        ValueError: the document declares an entity.
    """
    if b"<!ENTITY" in document[:65536].upper():
        raise ValueError("hostile XML refused: the document declares entities (<!ENTITY>)")
