"""A cold `ragsync run` of two (or more) code trees side by side, alternating, on one site.

Each round runs every tree once, in turn, as a fresh process on an empty state (wall time and
CPU seconds of the process and its children), so that both see the same machine; the medians
over the rounds are printed. A tree is a folder holding the ``ragsync`` package (a git worktree
of another commit, say), put first on ``PYTHONPATH`` (``connectors`` comes from the installed
tree for all of them).

With ``--edit N``, every tree first syncs the site once into a state of its own; then each
round edits one paragraph on N pages and runs every tree on its state (the order alternating
from round to round): the cost of a sync of a few changed pages.

Usage: python eval/ab_cold.py ROUNDS NAME=TREE [NAME=TREE ...] [--pages 120] [--edit N]
  e.g. git worktree add /tmp/base eaae88f && python eval/ab_cold.py 4 base=/tmp/base new=.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from eval import as_installed  # noqa: E402
from eval.bench_core import run_json  # noqa: E402
from eval.corpus import edit_paragraph, make_site_pages  # noqa: E402
from ragsync.testing import DevSite  # noqa: E402


def cold_run(tree: str, sitemap: str, work: Path | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of one `ragsync run` of ``tree``: cold, or on the state in
    ``work`` (a folder of its own by default)."""
    if work is None:
        work = Path(tempfile.mkdtemp(prefix="ragsync-ab-"))
        try:
            return cold_run(tree, sitemap, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    config = work / "ragsync.toml"
    config.write_text(
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nevery = "0s"\nurl = "{sitemap}"\n'
    )
    env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()))
    args = ["-m", "ragsync", "run", "--json", "--config", str(config)]
    wall, cpu, report = run_json(args, env=env, cwd=work)
    if not report.get("ok"):
        raise SystemExit(f"{tree}: the cold run reported errors: {report.get('errors')}")
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("rounds", type=int)
    parser.add_argument("trees", nargs="+", help="NAME=TREE")
    parser.add_argument("--pages", type=int, default=120)
    parser.add_argument("--edit", type=int, default=0, help="pages edited per round")
    options = parser.parse_args()
    trees = dict(tree.split("=", 1) for tree in options.trees)
    for tree in trees.values():
        as_installed(Path(tree).resolve())
    site = DevSite(make_site_pages(options.pages))
    sitemap = f"{site.start()}/sitemap.xml"
    measured: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    states = {name: Path(tempfile.mkdtemp(prefix="ragsync-ab-")) for name in trees}
    rng = random.Random(5)
    try:
        for name, tree in trees.items() if options.edit else ():
            cold_run(tree, sitemap, states[name])
        for round_ in range(options.rounds):
            for path in rng.sample(sorted(site.pages), min(options.edit, len(site.pages))):
                page = site.pages[path]
                site.set_page(path, page.title, edit_paragraph(page.body, rng))
            order = list(trees.items())
            for name, tree in order if round_ % 2 == 0 else reversed(order):
                wall, cpu = cold_run(tree, sitemap, states[name] if options.edit else None)
                measured[name].append((wall, cpu))
                print(f"round {round_ + 1}: {name} {wall:.2f} s, {cpu:.2f} CPU s", flush=True)
    finally:
        site.stop()
        for folder in states.values():
            shutil.rmtree(folder, ignore_errors=True)
    for name, runs in measured.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"{name}: median {wall:.2f} s, {cpu:.2f} CPU s over {len(runs)} runs")


if __name__ == "__main__":
    main()
