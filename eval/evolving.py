"""An evolving documentation site for side-by-side benchmarks, with a ground truth per step.

Every page documents one component ("Falcon gateway"): an intro and 3–6 sections, each holding a
fact ("The gateway waits 45 seconds for an upstream response before it gives up.") among filler
sentences. Half the facts name only the component's kind, so the page title carries the rest of
the meaning — as in real documentation. Each fact yields a question whose answer page is known.

:class:`EvolvingSite` serves the pages through :class:`ragsync.testing.DevSite` (sitemap,
robots.txt, ETag/Last-Modified with 304, per-request HTML noise, request and byte counts) and
applies the benchmark's steps: edit paragraphs, insert and delete sections, add, rename (301) and
remove (404/410) pages. :meth:`EvolvingSite.truth` is what an index must hold after a step:
``{url: sentences of the live page}``; :func:`check_index` compares an index with it.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field

from eval.corpus import WORDS

ANIMALS = (
    "falcon otter heron badger lynx marten osprey puffin raven stoat tapir vole walrus yak "
    "zebra bison cobra dingo egret ferret gecko hyena ibis jackal koala lemur macaw newt ocelot "
    "panda quail robin salmon toucan urchin viper wombat alpaca beaver condor dolphin eagle "
    "finch gibbon hornet iguana jaguar kestrel llama moose narwhal"
).split()
KINDS = (
    "gateway scheduler indexer exporter broker proxy collector replicator compactor "
    "resolver balancer notifier"
).split()

# topic → (section heading, [(fact template, question template)]); {kind} facts leave the
# component's name to the page title.
TOPICS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "timeouts": (
        "Timeouts",
        [
            (
                "The {subject} waits {n} seconds for an upstream response before it gives up.",
                "How long does the {name} wait for an upstream response?",
            ),
            (
                "Idle connections to the {subject} are closed after {n} minutes.",
                "When does the {name} close idle connections?",
            ),
        ],
    ),
    "retries": (
        "Retries and backoff",
        [
            (
                "A failed delivery from the {subject} is retried up to {n} times "
                "with exponential backoff.",
                "How many times does the {name} retry a failed delivery?",
            ),
        ],
    ),
    "auth": (
        "Authentication",
        [
            (
                "Clients authenticate to the {subject} with a signed token that expires "
                "after {n} hours.",
                "How long is a token for the {name} valid?",
            ),
        ],
    ),
    "storage": (
        "Storage",
        [
            (
                "The {subject} keeps its data in a write-ahead log segmented every {n} megabytes.",
                "How large are the log segments of the {name}?",
            ),
        ],
    ),
    "retention": (
        "Retention",
        [
            (
                "Records older than {n} days are purged by the {subject} every night.",
                "After how many days does the {name} purge old records?",
            ),
        ],
    ),
    "limits": (
        "Limits and quotas",
        [
            (
                "Each tenant may send at most {n} requests per second to the {subject}.",
                "What is the per-tenant request rate limit of the {name}?",
            ),
        ],
    ),
    "metrics": (
        "Metrics",
        [
            (
                "The {subject} exports its metrics on port {port} for Prometheus to scrape.",
                "Which port does the {name} export metrics on?",
            ),
        ],
    ),
    "upgrades": (
        "Upgrades",
        [
            (
                "Rolling upgrades of the {subject} replace at most {n} replicas at a time.",
                "How many replicas does a rolling upgrade of the {name} replace at once?",
            ),
        ],
    ),
    "logging": (
        "Logging",
        [
            (
                "The {subject} rotates its log file once it reaches {n} megabytes.",
                "At what size does the {name} rotate its log file?",
            ),
        ],
    ),
    "backup": (
        "Backup and restore",
        [
            (
                "A snapshot of the {subject} is taken every {n} hours and kept for a week.",
                "How often is a snapshot of the {name} taken?",
            ),
        ],
    ),
}


def _filler(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 15))]
    return " ".join(words).capitalize() + "."


@dataclass
class Fact:
    sentence: str
    question: str


@dataclass
class Section:
    topic: str
    heading: str
    paragraphs: list[list[str]]  # sentences per paragraph; the first paragraph holds the fact
    fact: Fact
    items: list[str] = field(default_factory=list)  # a bullet list after the paragraphs


@dataclass
class Page:
    name: str
    intro: list[str]
    sections: list[Section]

    @property
    def title(self) -> str:
        return self.name[0].upper() + self.name[1:]

    def html(self) -> str:
        out = [f"<h1>{self.title}</h1>", f"<p>{' '.join(self.intro)}</p>"]
        for section in self.sections:
            out.append(f"<h2>{section.heading}</h2>")
            out += [f"<p>{' '.join(p)}</p>" for p in section.paragraphs]
            if section.items:
                out.append("<ul>" + "".join(f"<li>{i}</li>" for i in section.items) + "</ul>")
        return "\n".join(out)

    def sentences(self) -> set[str]:
        found = set(self.intro)
        for section in self.sections:
            found.update(s for p in section.paragraphs for s in p)
            found.update(section.items)
        return found


class Generator:
    """Seeded source of components, sections and paragraphs (never the same sentence twice)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.names = [f"{a} {k}" for a in ANIMALS for k in KINDS]
        self.rng.shuffle(self.names)
        self.sentences: set[str] = set()  # every sentence ever generated

    def sentence(self) -> str:
        while True:
            text = _filler(self.rng)
            if text not in self.sentences:
                self.sentences.add(text)
                return text

    def paragraph(self, low: int = 2, high: int = 4) -> list[str]:
        return [self.sentence() for _ in range(self.rng.randint(low, high))]

    def section(self, name: str, topic: str) -> Section:
        rng = self.rng
        heading, facts = TOPICS[topic]
        template, question = rng.choice(facts)
        kind = name.split()[-1]
        subject = name if rng.random() < 0.5 else kind
        values = {"n": rng.randint(2, 90), "port": rng.randint(9000, 9999)}
        sentence = template.format(subject=subject, **values)
        self.sentences.add(sentence)
        paragraphs = [[*self.paragraph(1, 2), sentence, *self.paragraph(0, 2)]]
        paragraphs += [self.paragraph() for _ in range(rng.randint(0, 2))]
        items = [self.sentence() for _ in range(3)] if rng.random() < 0.3 else []
        return Section(
            topic, heading, paragraphs, Fact(sentence, question.format(name=name)), items
        )

    def page(self) -> Page:
        name = self.names.pop()
        intro = [f"The {name} is one of the core components of the platform.", *self.paragraph()]
        self.sentences.update(intro)
        topics = self.rng.sample(sorted(TOPICS), self.rng.randint(3, 6))
        return Page(name, intro, [self.section(name, t) for t in topics])


def slug(name: str) -> str:
    return "/docs/" + name.replace(" ", "-")


class EvolvingSite:
    """The site and its history: ``steps()`` mutates it one benchmark step at a time."""

    def __init__(self, pages: int, seed: int = 5):
        from ragsync.testing import DevSite

        self.gen = Generator(seed)
        self.rng = random.Random(seed + 1)
        self.live: dict[str, Page] = {}  # path → page, served with 200
        self.site = DevSite()
        for _ in range(pages):
            self._add()

    def _add(self) -> None:
        page = self.gen.page()
        self._publish(slug(page.name), page)

    def _publish(self, path: str, page: Page) -> None:
        self.live[path] = page
        self.site.set_page(path, page.title, page.html())

    def _pick(self, share: float) -> list[str]:
        count = max(1, round(len(self.live) * share))
        return self.rng.sample(sorted(self.live), count)

    # -- steps ---------------------------------------------------------------------------

    def edit_paragraphs(self, share: float) -> str:
        for path in self._pick(share):
            page = self.live[path]
            section = self.rng.choice(page.sections)
            if len(section.paragraphs) > 1:
                section.paragraphs[-1] = self.gen.paragraph()
            else:  # keep the fact, change the text around it
                section.paragraphs[0] = [self.gen.sentence(), section.fact.sentence]
            self._publish(path, page)
        return f"edit a paragraph on {share:.0%} of pages"

    def insert_and_delete_sections(self, share: float) -> str:
        paths = self._pick(2 * share)
        for i, path in enumerate(paths):
            page = self.live[path]
            if i % 2 == 0 or len(page.sections) < 2:
                unused = sorted(set(TOPICS) - {s.topic for s in page.sections})
                if unused:
                    where = self.rng.randint(0, len(page.sections))
                    section = self.gen.section(page.name, self.rng.choice(unused))
                    page.sections.insert(where, section)
            else:
                del page.sections[self.rng.randrange(len(page.sections))]
            self._publish(path, page)
        return f"insert or delete a section on {2 * share:.0%} of pages"

    def add_pages(self, share: float) -> str:
        count = max(1, round(len(self.live) * share))
        for _ in range(count):
            self._add()
        return f"add {count} pages"

    def rename_pages(self, share: float) -> str:
        paths = self._pick(share)
        for path in paths:
            page = self.live.pop(path)
            new = path + "-guide"
            self.site.redirect(path, new, 301)
            self._publish(new, page)
        return f"rename {len(paths)} pages (301)"

    def remove_pages(self, share: float) -> str:
        paths = self._pick(share)
        for i, path in enumerate(paths):
            del self.live[path]
            self.site.remove_page(path, 410 if i % 2 else 404)
        return f"remove {len(paths)} pages (404/410)"

    def truth(self, base: str) -> dict[str, set[str]]:
        """What the index must hold now: ``{url: sentences}`` of every live page."""
        return {base + path: page.sentences() for path, page in self.live.items()}

    def questions(self, base: str) -> list[tuple[str, str]]:
        """``(question, answer url)`` for every fact on a live page."""
        return [
            (section.fact.question, base + path)
            for path, page in sorted(self.live.items())
            for section in page.sections
        ]


_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)]|#+)\s+")
_SENTENCE_END = re.compile(r"(?<=\.)\s+")


def sentences_in(text: str) -> list[str]:
    """The sentences of an indexed text: per line, list and heading marks dropped."""
    found = []
    for line in text.splitlines():
        line = _LIST_MARK.sub("", line).strip()
        found += [s for s in _SENTENCE_END.split(line) if s]
    return found


def check_index(
    points: list[tuple[str, str]], truth: dict[str, set[str]], known: set[str]
) -> dict[str, int]:
    """Compare an index's ``(url, text)`` points with the ground truth.

    - ``missing_pages``: live pages with a sentence no point of that URL holds;
    - ``stale_pages``: pages with a point for a URL that is not live, or holding a sentence
      (one the generator wrote, from ``known``) that the live page no longer has;
    - ``duplicate_chunks``: points beyond the first with the same URL and text.
    """
    covered: dict[str, set[str]] = {url: set() for url in truth}
    stale: set[str] = set()
    for url, text in points:
        if url not in truth:
            stale.add(url)
            continue
        for sentence in sentences_in(text):
            if sentence in truth[url]:
                covered[url].add(sentence)
            elif sentence in known:
                stale.add(url)
    counts = Counter(points)
    return {
        "missing_pages": sum(1 for url, need in truth.items() if not need <= covered[url]),
        "stale_pages": len(stale),
        "duplicate_chunks": sum(n - 1 for n in counts.values()),
        "points": len(points),
    }
