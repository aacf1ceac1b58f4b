"""Chunking: sections by heading, token budgets, and never past the model's window."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragsync.chunk import Chunker, count_tiktoken, sections, split_blocks
from ragsync.embed import LocalModel
from ragsync.extract import extract_response

DOC = """# Title

Intro paragraph.

## Install

Step one.

- item a
- item b
  continued

```
code line 1

code line 3
```

| a | b |
|---|---|
| 1 | 2 |

### Debian

Use apt.

## Rotate

Rotate keys.
"""


@pytest.fixture(scope="module")
def chunker(real_embedder):
    return Chunker(160, real_embedder.count_tokens, real_embedder.max_input_tokens)


def test_blocks_keep_lists_code_and_tables_whole():
    blocks = [text for level, text in split_blocks(DOC) if level == 0]
    assert "- item a\n- item b\n  continued" in blocks
    assert "```\ncode line 1\n\ncode line 3\n```" in blocks
    assert "| a | b |\n|---|---|\n| 1 | 2 |" in blocks


def test_sections_carry_heading_paths():
    found = [(s.headings, s.blocks[0]) for s in sections(DOC)]
    assert found == [
        (("Title",), "Intro paragraph."),
        (("Title", "Install"), "Step one."),
        (("Title", "Install", "Debian"), "Use apt."),
        (("Title", "Rotate"), "Rotate keys."),
    ]


def test_chunk_text_is_heading_path_from_the_title_then_markdown(chunker):
    chunks = chunker.chunk(DOC)
    assert [c.headings for c in chunks] == [
        ("Title",),
        ("Title", "Install"),
        ("Title", "Install", "Debian"),
        ("Title", "Rotate"),
    ]
    assert chunks[0].text == "Title\n\nIntro paragraph."
    assert chunks[2].text == "Title > Install > Debian\n\nUse apt."
    assert chunks[1].text.startswith("Title > Install\n\nStep one.\n\n- item a")
    assert [c.index for c in chunks] == [0, 1, 2, 3]


def test_an_edit_in_one_section_cannot_move_boundaries_in_another(chunker):
    long_section = "\n\n".join(f"Paragraph {i} " + "word " * 60 for i in range(8))
    doc = f"# T\n\n## A\n\n{long_section}\n\n## B\n\n{long_section}\n"
    edited = doc.replace("Paragraph 0 ", "Paragraph zero, edited at length, ", 1)
    before, after = chunker.chunk(doc), chunker.chunk(edited)
    b_before = [c.text for c in before if c.headings[-1] == "B"]
    b_after = [c.text for c in after if c.headings[-1] == "B"]
    assert b_before == b_after and len(b_before) > 1


def test_budget_holds_for_every_chunk(chunker):
    paragraphs = "\n\n".join(f"Sentence number {i} is here. " * 12 for i in range(20))
    for chunk in chunker.chunk(f"# T\n\n## S\n\n{paragraphs}\n"):
        assert count_tiktoken(chunk.text) <= 160
        assert chunk.tokens == count_tiktoken(chunk.text)


@pytest.mark.parametrize(
    "body",
    [
        # Word-piece heavy text: few tiktoken tokens, many model tokens.
        " ".join(["Pneumonoultramicroscopicsilicovolcanoconiosis-ähnlich"] * 60),
        "x" * 5000,  # one enormous "word"
        "```\n" + "\n".join(f"value_{i} = compute({i}) # ünïcödé" for i in range(300)) + "\n```",
        "| " + " | ".join(f"col{i}" for i in range(200)) + " |",
        "数据同步" * 400,
    ],
)
def test_no_chunk_exceeds_the_model_window(chunker, real_embedder, body):
    chunks = chunker.chunk(f"# T\n\n## A very long heading {'h' * 50}\n\n{body}\n")
    assert chunks
    for chunk in chunks:
        assert real_embedder.count_tokens(chunk.text) <= real_embedder.max_input_tokens
        assert count_tiktoken(chunk.text) <= 160


def test_identical_input_gives_identical_chunks(chunker):
    assert chunker.chunk(DOC) == chunker.chunk(DOC)


TRICKY = [
    "日本語のテキスト。" * 40,
    "한국어 텍스트 " * 60,
    "Ünïcödé àccents İstanbul ß " * 30,
    ("x" * 150 + " ") * 4,  # words over WordPiece's 100 characters: one [UNK] each
    "emoji 😀🎉 and\tcontrol\x00chars\u200b " * 20,
    '```rust\nfn main() { println!("{}", a.b::<C>()); }\n```',
    "| a | b |\n|---|---|\n| `--locked` | CARGO_HOME |",
]


def test_the_models_counts_of_blocks_add_up(real_embedder):
    assert real_embedder.tokens_add_up  # MiniLM's WordPiece: the chunker counts each block once
    count, special = real_embedder.count_tokens, real_embedder.count_tokens("")
    for a in TRICKY:
        for b in TRICKY:
            assert count(f"{a}\n\n{b}") == count(a) + count(b) - special, (a[:20], b[:20])


def test_counting_each_block_once_finds_the_same_chunks(real_embedder):
    # A real site (the rustdoc book, as its generator served it) and the tricky texts.
    pages = sorted((Path(__file__).parent / "fixtures" / "rustdoc-book").glob("*.html"))
    assert pages
    documents = [extract_response(p.read_bytes(), "text/html", p.as_uri()).markdown for p in pages]
    documents.append("# Tricky\n\n" + "\n\n".join(TRICKY * 3))
    # Model windows under the tiktoken budget make the model's count the one that decides.
    for budget, window in ((48, 256), (128, 60), (128, 100)):
        args = (budget, real_embedder.count_tokens, window)
        each, summed = Chunker(*args), Chunker(*args, tokens_add_up=True)
        for markdown in documents:
            assert summed.chunk(markdown) == each.chunk(markdown)


def test_a_tokenizer_that_merges_across_whitespace_is_counted_whole():
    from tokenizers import Tokenizer, models, pre_tokenizers

    model = LocalModel()
    model._tokenizer = Tokenizer(models.BPE())  # e.g. SentencePiece / byte-level BPE
    model._tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    assert not model.tokens_add_up


def test_headings_carry_the_text_the_page_shows_and_the_text_keeps_its_markdown(chunker):
    r"""A heading ``XML\_ParserCreate`` (Markdown escapes its underscore) was in every hit's
    and payload's heading path with the backslash (a new-user trial on Expat's reference)."""
    markdown = "# Expat\n\n## XML\\_ParserCreate\n\nConstruct a new parser with `XML_Char *`.\n"
    [chunk] = chunker.chunk(markdown)
    assert chunk.headings == ("Expat", "XML_ParserCreate")
    assert chunk.text.startswith("Expat > XML\\_ParserCreate\n\n")  # embedded as before
