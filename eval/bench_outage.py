"""How often ragsync's not-the-page rules fire on real documentation, and on pages that are not.

Three measurements, on files installed on the machine (nobody here wrote them):

1. **Markers on real pages** (``ragsync.outage.not_the_page``): every HTML page of the doc
   folders below is read; a page with a marker is extracted as a sync would, and counted as
   held when it has at most ``NOT_PAGE_WORDS`` words. The target is 0 held.
2. **Shrinks between two real versions** (``ragsync.outage.shrinks``): the Rust books of the
   stable and the nightly toolchain are two releases of the same docs; each page present in
   both is extracted in both, and a change that keeps less than ``hold_shrink`` of the page's
   words counts as held (until confirmed) — a delay, never a loss. Reported per threshold.
3. **Outage pages** (``tests/fixtures/outage``): every sample is recognised.

Usage::

    python eval/bench_outage.py [--limit N] [--json eval/results/outage.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ragsync.errors import ExtractError  # noqa: E402
from ragsync.extract import extract_response  # noqa: E402
from ragsync.outage import NOT_PAGE_WORDS, marker, not_the_page, shrinks, words  # noqa: E402

RUSTUP = Path("/root/.rustup/toolchains")
FOLDERS = {
    "rust (stable)": RUSTUP / "stable-x86_64-unknown-linux-gnu/share/doc/rust/html",
    "node.js api": Path("/usr/share/doc/nodejs/api"),
    "npm": Path("/usr/lib/node_modules/npm/docs/output"),
    "valgrind": Path("/usr/share/doc/valgrind/html"),
    "libxslt": Path("/usr/share/doc/libxslt1-dev"),
    "libffi": Path("/usr/share/doc/libffi8/html"),
    "python": Path("/usr/share/doc/python3/html"),
}
BOOKS = ("book", "cargo", "reference", "edition-guide", "nomicon", "rustc", "embedded-book")
SAMPLES = ROOT / "tests" / "fixtures" / "outage"


def text_of(path: Path) -> tuple[str, str]:
    """``(title, markdown)`` of an HTML file, extracted as a sync would."""
    body = path.read_bytes()
    extracted = extract_response(body, "text/html", path.as_uri())
    return extracted.title, extracted.markdown


def markers_on_real_pages(limit: int, rng: random.Random) -> dict[str, dict[str, object]]:
    results: dict[str, dict[str, object]] = {}
    for name, folder in FOLDERS.items():
        files = sorted(folder.rglob("*.html")) if folder.is_dir() else []
        if len(files) > limit:
            files = sorted(rng.sample(files, limit))
        marked: list[str] = []
        held: list[str] = []
        for path in files:
            body = path.read_bytes()
            if marker(body) is None:
                continue
            marked.append(str(path.relative_to(folder)))
            try:
                _, markdown = text_of(path)
            except Exception:  # not a page a sync would index either
                continue
            if not_the_page(body, markdown):
                held.append(f"{path.relative_to(folder)} ({words(markdown)} words)")
        results[name] = {"pages": len(files), "marked": len(marked), "held": held}
    return results


def shrinks_between_versions(limit: int, rng: random.Random) -> dict[str, object]:
    stable = RUSTUP / "stable-x86_64-unknown-linux-gnu/share/doc/rust/html"
    nightly = RUSTUP / "nightly-x86_64-unknown-linux-gnu/share/doc/rust/html"
    pairs = [
        (path, nightly / path.relative_to(stable))
        for book in BOOKS
        for path in sorted((stable / book).rglob("*.html"))
        if (nightly / path.relative_to(stable)).is_file()
    ]
    if len(pairs) > limit:
        pairs = sorted(rng.sample(pairs, limit))
    changed = 0
    counts: list[tuple[int, int, str]] = []  # (old words, new words, page)
    for old, new in pairs:
        try:
            (_, before), (_, after) = text_of(old), text_of(new)
        except Exception:
            continue
        if before != after:
            changed += 1
            counts.append((words(before), words(after), str(old.relative_to(stable))))
    by_share = {
        str(share): [
            f"{page} ({a}→{b} words)" for a, b, page in counts if shrinks(a, b, share=share)
        ]
        for share in (0.05, 0.1, 0.2, 0.3)
    }
    smallest = sorted(counts, key=lambda item: item[1] / max(item[0], 1))[:5]
    return {
        "pages_in_both": len(pairs),
        "changed": changed,
        "held_by_share": by_share,
        "smallest_ratios": [
            f"{b / max(a, 1):.2f} {page} ({a}→{b} words)" for a, b, page in smallest
        ],
    }


def outage_samples() -> dict[str, object]:
    found: dict[str, str | None] = {}
    for path in sorted(SAMPLES.glob("*.html")):
        try:
            _, markdown = text_of(path)
        except ExtractError:  # no text and no title: a parse failure, the old content kept
            found[path.name] = "parse failure"
            continue
        found[path.name] = not_the_page(path.read_bytes(), markdown)
    return {
        "samples": len(found),
        "recognised": sum(v is not None for v in found.values()),
        **found,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=3000, help="pages per folder at most")
    parser.add_argument("--json", type=Path, default=ROOT / "eval/results/outage.json")
    args = parser.parse_args()
    rng = random.Random(7)
    started = time.monotonic()
    report = {
        "not_page_words": NOT_PAGE_WORDS,
        "markers_on_real_pages": markers_on_real_pages(args.limit, rng),
        "shrinks_between_versions": shrinks_between_versions(args.limit, rng),
        "outage_samples": outage_samples(),
        "seconds": round(time.monotonic() - started, 1),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
