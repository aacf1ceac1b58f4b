"""Fault replay: ragsync beside LangChain's indexing API and LlamaIndex's IngestionPipeline
while the site misbehaves.

The evolving site (eval/evolving.py) goes through its steps; before each fault window one step
changes it, then the window's fault (eval/faults.py) holds for one or more runs, then one clean
run follows. Every system syncs the same site state and meets the same faults (seeded). ragsync
runs with its default deletion rule (``missing_confirmations = 2`` over ``missing_grace = 1h``)
and an injected clock that advances ``--minutes-per-run`` (30) per run, so the grace passes
inside a window of three runs or more; the peers have no clock and run the same sequence. All
systems run in this process (the model loads once); CPU time is not measured here.

After every run each index is read back and judged against the ground truth (faults aside):

- pages wrongly deleted: live pages the index held a point for before and holds none now;
- missing / stale / duplicate (``check_index``; the maintenance page's sentences count as
  stale text wherever they appear);
- texts embedded, against the minimum: the distinct texts of the points that were right when
  they were in the index (what a perfect incremental system with the same chunking embeds).

Usage: python eval/bench_faults.py [--pages 100] [--windows sitemap_503,...] [--systems ...]
→ eval/results/faults.json and faults.md.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from eval import peers  # noqa: E402
from eval.bench_peers import SYSTEMS, System  # noqa: E402
from eval.evolving import EvolvingSite, check_index  # noqa: E402
from eval.faults import (  # noqa: E402
    FAULTS,
    MAINTENANCE_SENTENCES,
    FaultInjector,
    StepClock,
    true_point,
    wrongly_deleted,
)
from eval.peers import ListingError  # noqa: E402
from eval.report import faults_markdown  # noqa: E402

STEPS: dict[str, Callable[[EvolvingSite], str]] = {
    "edit paragraphs": lambda site: site.edit_paragraphs(0.10),
    "insert/delete sections": lambda site: site.insert_and_delete_sections(0.05),
    "add pages": lambda site: site.add_pages(0.05),
    "rename pages": lambda site: site.rename_pages(0.03),
    "remove pages": lambda site: site.remove_pages(0.04),
}


@dataclass(frozen=True)
class Window:
    """A fault held for ``runs`` runs, after the evolving step ``step``."""

    fault: str
    runs: int
    step: str


# The maintenance window comes last: a system that follows the redirect may not come back from
# it, and the windows before it should each be judged on a whole index.
WINDOWS = (
    Window("sitemap_503", 4, "edit paragraphs"),
    Window("sitemap_truncated", 3, "insert/delete sections"),
    Window("child_500", 3, "add pages"),
    Window("transient_404", 1, "remove pages"),
    Window("rate_429", 3, "rename pages"),
    Window("server_5xx", 3, "edit paragraphs"),
    Window("maintenance_302", 3, "insert/delete sections"),
)


@dataclass(frozen=True)
class Run:
    """One run of every system: its label, the step applied before it, the fault it meets."""

    label: str
    window: str  # the fault window it belongs to (its clean run after included), or "clean"
    step: str | None = None
    fault: str | None = None
    run_in_window: int = 0


def schedule(windows: tuple[Window, ...]) -> list[Run]:
    """Cold sync, a clean run, each window then one clean run, and a final clean run."""
    runs = [Run("cold sync", "clean"), Run("no change", "clean")]
    for window in windows:
        for i in range(window.runs):
            step = window.step if i == 0 else None
            label = f"{window.fault} {i + 1}/{window.runs}"
            runs.append(Run(label, window.fault, step, window.fault, i))
        runs.append(Run(f"after {window.fault}", window.fault))
    runs.append(Run("final", "clean"))
    return runs


class Replayed(System):
    """One system run in this process; reads its index back as :class:`System` does."""

    def __init__(self, name: str, work: Path, sitemap: str, clock: StepClock, embedder: Any):
        # Not System.__init__: that one prepares a subprocess command line.
        self.name, self.sitemap, self.clock, self.embedder = name, sitemap, clock, embedder
        self.work = work / name
        self.work.mkdir(parents=True)
        if name == "ragsync":
            from ragsync.config import config_from_mapping

            # every = "0s": each run reads the listing and revalidates every page, as the peers
            # re-read every page. The deletion rule is left at its defaults.
            source = {"id": "docs", "kind": "sitemap", "url": sitemap, "every": "0s"}
            self.config = config_from_mapping({"sources": [source]}, base_dir=self.work)
            self.store, self.collection = self.work / ".ragsync" / "qdrant", "ragsync"
        else:
            self.store, self.collection = self.work / "qdrant", "peer"

    def run(self) -> dict[str, Any]:  # type: ignore[override]
        """One sync: ``{"ok", "error", "texts_embedded"}``."""
        if self.name == "ragsync":
            from ragsync.sync import Syncer

            with Syncer(self.config, embedder=self.embedder, clock=self.clock) as syncer:
                result = syncer.run()
            errors = [e for o in result.sources.values() for e in o.errors]
            return {
                "ok": result.ok,
                "error": str(errors[0]) if errors else "",
                "texts_embedded": result.counters.chunks_embedded,
            }
        before = peers.EMBEDDED["texts"]
        ok, error = True, ""
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the peers print their counters
                if self.name == "llamaindex":
                    peers.run_llamaindex(self.work, self.sitemap)
                else:
                    peers.run_langchain(self.work, self.sitemap, self.name.split("-", 1)[1])
        except ListingError as exc:  # the run fails before it touches the index
            ok, error = False, str(exc)
        return {"ok": ok, "error": error, "texts_embedded": peers.EMBEDDED["texts"] - before}


class Judge:
    """What one system's index looked like after each run, against the ground truth."""

    def __init__(self) -> None:
        self.ever_indexed: set[str] = set()
        self.last: set[str] = set()  # the URLs with a point after the latest run
        self.minimum: set[str] = set()  # embedded texts of points that were right
        self.deleted: set[str] = set()
        self.worst = (0, "")  # the most pages wrongly deleted at one moment, and when
        self.windows: dict[str, dict[str, Any]] = {}
        self.window: dict[str, Any] | None = None

    def open_window(self, fault: str, live: set[str]) -> None:
        """From now on, also count which of the ``live`` pages held now lose their point."""
        held = self.last & live
        self.window = {"held": held, "live": len(live), "lost": set(), "worst": 0, "needed": 0}
        self.windows[fault] = self.window

    def close_window(self) -> None:
        self.window = None

    def judge(
        self,
        label: str,
        points: list[dict[str, Any]],
        truth: dict[str, set[str]],
        known: set[str],
    ) -> dict[str, Any]:
        """The counts for one run's index (``label`` names the run)."""
        urls = {point["url"] for point in points}
        gone = wrongly_deleted(urls, truth, self.ever_indexed)
        self.ever_indexed |= urls
        self.last = urls
        self.deleted |= gone
        if len(gone) > self.worst[0]:
            self.worst = (len(gone), label)
        if self.window is not None:
            lost = gone & self.window["held"]
            self.window["lost"] |= lost
            self.window["worst"] = max(self.window["worst"], len(lost))
        right = {p["embedded"] for p in points if true_point(p["url"], p["text"], truth, known)}
        if self.window is not None:
            self.window["needed"] += len(right - self.minimum)
        self.minimum |= right
        check = check_index([(p["url"], p["text"]) for p in points], truth, known)
        return {"wrongly_deleted": len(gone), **check}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--minutes-per-run", type=float, default=30.0)
    parser.add_argument("--windows", default=",".join(w.fault for w in WINDOWS))
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()
    chosen = options.windows.split(",")
    unknown = set(chosen) - set(FAULTS)
    if unknown:
        parser.error(f"unknown windows {sorted(unknown)} (known: {', '.join(FAULTS)})")
    windows = tuple(w for w in WINDOWS if w.fault in chosen)
    systems = options.systems.split(",")
    result = replay(options.pages, options.seed, options.minutes_per_run, windows, systems)
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "faults.json").write_text(json.dumps(result, indent=2) + "\n")
    (options.out / "faults.md").write_text(faults_markdown(result))
    print(faults_markdown(result))


def replay(
    pages: int, seed: int, minutes: float, windows: tuple[Window, ...], names: list[str]
) -> dict[str, Any]:
    """Run the schedule on every system; the rows, per-window and whole-replay summaries."""
    from ragsync.embed import SentenceTransformerEmbedder

    logging.basicConfig(level=logging.ERROR)  # ragsync warns on every fault it meets
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="ragsync-faults-"))
    evolving = EvolvingSite(pages, seed=seed)
    base = evolving.site.start()
    injector = FaultInjector(evolving.site, seed)
    evolving.site.fault = injector
    clock = StepClock(datetime.now(UTC), timedelta(minutes=minutes))
    embedder = SentenceTransformerEmbedder()
    systems = [Replayed(n, work, f"{base}/sitemap.xml", clock, embedder) for n in names]
    judges = {name: Judge() for name in names}
    plan = schedule(windows)
    rows: list[dict[str, Any]] = []
    injected: dict[str, dict[str, int]] = {}
    truth: dict[str, set[str]] = {}
    try:
        for index, run in enumerate(plan):
            change = STEPS[run.step](evolving) if run.step else ""
            before, truth = truth, evolving.truth(base)
            known = evolving.gen.sentences | set(MAINTENANCE_SENTENCES)
            injector.arm(run.fault, run.run_in_window)
            injector.injected = {}
            clock.at_run(index)
            for judge in judges.values():
                if run.fault and run.run_in_window == 0:
                    # pages live before and after the step: a whole index holds them all
                    judge.open_window(run.fault, set(before) & set(truth))
                elif run.window == "clean":
                    judge.close_window()
            for system in systems:
                injector.new_system_run()
                began = time.perf_counter()
                outcome = system.run()
                wall = time.perf_counter() - began
                judged = judges[system.name].judge(run.label, system.points(), truth, known)
                row = {
                    "run": index,
                    "label": run.label,
                    "window": run.window,
                    "fault": run.fault,
                    "change": change,
                    "system": system.name,
                    "wall_s": round(wall, 2),
                    **outcome,
                    **judged,
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
            if run.fault:
                window = injected.setdefault(run.fault, {})
                for key, count in injector.injected.items():
                    window[key] = window.get(key, 0) + count
    finally:
        injector.disarm()
        evolving.site.stop()
        shutil.rmtree(work, ignore_errors=True)
    return {
        "pages": pages,
        "seed": seed,
        "minutes_per_run": minutes,
        "runs": len(plan),
        "wall_s": round(time.perf_counter() - started, 1),
        "windows": [
            {"fault": w.fault, "runs": w.runs, "step": w.step, "injected": injected.get(w.fault)}
            for w in windows
        ],
        "summary": summarize(rows, judges),
        "by_window": by_window(rows, windows, judges),
        "rows": rows,
    }


def summarize(rows: list[dict[str, Any]], judges: dict[str, Judge]) -> dict[str, Any]:
    """Per system: wrongly deleted (distinct, worst moment), the final check, embeddings."""
    out = {}
    for name, judge in judges.items():
        own = [r for r in rows if r["system"] == name]
        last = own[-1]
        embedded = sum(r["texts_embedded"] for r in own)
        out[name] = {
            "wrongly_deleted_distinct": len(judge.deleted),
            "wrongly_deleted_worst": judge.worst[0],
            "wrongly_deleted_worst_at": judge.worst[1],
            "missing_at_end": last["missing_pages"],
            "stale_at_end": last["stale_pages"],
            "duplicates_at_end": last["duplicate_chunks"],
            "texts_embedded": embedded,
            "texts_minimum": len(judge.minimum),
            "texts_unnecessary": embedded - len(judge.minimum),
            "runs_failed": sum(1 for r in own if not r["ok"]),
            "wall_s": round(sum(r["wall_s"] for r in own), 1),
        }
    return out


def by_window(
    rows: list[dict[str, Any]], windows: tuple[Window, ...], judges: dict[str, Judge]
) -> dict[str, Any]:
    """Per window and system: of the live pages the index held when the window opened, how
    many lost their point during the window or the clean run after it (distinct, and the
    worst moment); texts embedded then, and the minimum (right texts new to the index then)."""
    out: dict[str, Any] = {}
    for window in windows:
        out[window.fault] = {}
        for name, judge in judges.items():
            seen = judge.windows[window.fault]
            own = [r for r in rows if r["window"] == window.fault and r["system"] == name]
            out[window.fault][name] = {
                "live_at_start": seen["live"],
                "held_at_start": len(seen["held"]),
                "wrongly_deleted_distinct": len(seen["lost"]),
                "wrongly_deleted_worst": seen["worst"],
                "texts_embedded": sum(r["texts_embedded"] for r in own),
                "texts_minimum": seen["needed"],
            }
    return out


if __name__ == "__main__":
    main()
