"""A generated documentation site for benchmarks: realistic multi-section pages, seeded."""

from __future__ import annotations

import random

WORDS = (
    "cluster node replica shard index query latency throughput cache token secret key rotate "
    "backup restore snapshot audit log retention policy quota limit request response header "
    "client server agent deploy release version upgrade rollback config setting default "
    "value timeout retry backoff error warning metric dashboard alert threshold storage "
    "volume disk memory thread process worker queue schedule job batch stream event webhook "
    "signature tenant user role permission access grant revoke session certificate encryption "
    "network"
).split()
VERBS = "controls sets limits records stores returns rotates checks sends keeps drops".split()


def paragraph(rng: random.Random, sentences: int) -> str:
    out = []
    for _ in range(sentences):
        words = [rng.choice(WORDS) for _ in range(rng.randint(8, 16))]
        words.insert(2, rng.choice(VERBS))
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


def make_page(rng: random.Random, number: int) -> tuple[str, str]:
    title = f"{rng.choice(WORDS).title()} {rng.choice(WORDS)} guide {number}"
    html = [f"<h1>{title}</h1>", f"<p>{paragraph(rng, 3)}</p>"]
    for s in range(rng.randint(3, 6)):
        html.append(f"<h2>{rng.choice(WORDS).title()} {rng.choice(WORDS)} {s}</h2>")
        for _ in range(rng.randint(1, 3)):
            html.append(f"<p>{paragraph(rng, rng.randint(2, 5))}</p>")
        if rng.random() < 0.3:
            html.append(
                "<ul>" + "".join(f"<li>{paragraph(rng, 1)}</li>" for _ in range(3)) + "</ul>"
            )
        if rng.random() < 0.2:
            html.append(
                f"<pre><code>ragsync {rng.choice(WORDS)} --{rng.choice(WORDS)} "
                f"{rng.randint(1, 99)}</code></pre>"
            )
    return title, "\n".join(html)


def make_site_pages(count: int, seed: int = 7) -> dict[str, tuple[str, str]]:
    rng = random.Random(seed)
    return {f"/docs/page-{i:04d}": make_page(rng, i) for i in range(count)}


def edit_paragraph(body: str, rng: random.Random) -> str:
    """Replace one paragraph (not the intro) of a page body with new text."""
    parts = body.split("\n")
    candidates = [i for i, line in enumerate(parts) if line.startswith("<p>") and i > 1]
    i = rng.choice(candidates)
    parts[i] = f"<p>{paragraph(rng, 3)}</p>"
    return "\n".join(parts)
