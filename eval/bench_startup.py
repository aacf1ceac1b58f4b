"""Startup cost: a `ragsync run` with nothing due on a small state, and what its imports cost.

A small site (20 pages of ``eval/evolving.py``) is synced for real once; then `ragsync run
--json` is timed as a fresh process while nothing is due (the source's listing and every page's
revisit lie a day ahead), best of ``--runs``. ``python -X importtime`` of the same run gives the
import time per top-level package (each module's own time, summed). With ``--baseline DIR``, the
ragsync of another checkout is timed alternately on the same state.

Usage: python eval/bench_startup.py [--runs 7] [--baseline DIR] → eval/results/startup.json
and startup.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from eval.evolving import EvolvingSite  # noqa: E402

SEED_PAGES = 20


def build_state(work: Path) -> Path:
    evolving = EvolvingSite(SEED_PAGES)
    base = evolving.site.start()
    config = work / "ragsync.toml"
    config.write_text(
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{base}/sitemap.xml"\nevery = "1d"\n'
    )
    try:
        command = [sys.executable, "-m", "ragsync", "run", "--json", "--config", str(config)]
        subprocess.run(command, check=True, capture_output=True, cwd=HERE.parent)
    finally:
        evolving.site.stop()
    return config


def noop(config: Path, root: Path, *flags: str) -> tuple[float, str, dict]:
    """One no-op `ragsync run` process of the checkout ``root``: wall s, stderr, report."""
    command = [sys.executable, *flags, "-m", "ragsync", "run", "--json", "--config", str(config)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=root)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"ragsync run failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, done.stderr, json.loads(done.stdout)


def import_costs(stderr: str) -> tuple[float, list[tuple[str, float]]]:
    """Total import ms and ``[(top-level package, ms)]`` from ``-X importtime`` output."""
    per_package: collections.Counter[str] = collections.Counter()
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        per_package[name.strip().split(".")[0]] += int(own)
    total = sum(per_package.values()) / 1000
    return total, [(name, round(us / 1000, 1)) for name, us in per_package.most_common(12)]


def python_alone(runs: int) -> float:
    """Wall s of `python -c pass` (the interpreter's own start, site included), best of runs."""
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline", type=Path, help="another checkout, timed alternately")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ragsync-startup-"))
    config = build_state(work)
    systems = [("this", HERE.parent)]
    if options.baseline:
        systems.append(("baseline", options.baseline.resolve()))
    walls: dict[str, list[float]] = {name: [] for name, _ in systems}
    for _ in range(options.runs):
        for name, root in systems:
            wall, _, report = noop(config, root)
            assert report["counters"]["requests_sent"] == 0, report["counters"]
            walls[name].append(wall)
    rows = []
    for name, root in systems:
        _, stderr, _ = noop(config, root, "-X", "importtime")
        total, top = import_costs(stderr)
        rows.append(
            {
                "ragsync": name,
                "wall_s": round(min(walls[name]), 3),
                "wall_s_runs": [round(w, 3) for w in walls[name]],
                "import_ms": round(total),
                "top_imports_ms": top,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    result = {
        "documents": SEED_PAGES,
        "python_alone_s": round(python_alone(options.runs), 3),
        "runs": rows,
        "baseline": str(options.baseline) if options.baseline else None,
        "cores": os.cpu_count(),
    }
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "startup.json").write_text(json.dumps(result, indent=2) + "\n")
    (options.out / "startup.md").write_text(markdown(result))
    print(markdown(result))


def markdown(result: dict) -> str:
    lines = [
        f"`ragsync run` with nothing due on a state of {result['documents']} documents, a fresh "
        f"process each time; `python -c pass` alone: {result['python_alone_s']} s; "
        f"{result['cores']} CPU cores.",
        "",
        "| ragsync | wall s (best of runs) | imports ms (`-X importtime`) | largest imports (ms, "
        "own time per top-level package) |",
        "|---|---:|---:|---|",
    ]
    for row in result["runs"]:
        top = ", ".join(f"{name} {ms}" for name, ms in row["top_imports_ms"][:8])
        lines.append(f"| {row['ragsync']} | {row['wall_s']} | {row['import_ms']} | {top} |")
    if result.get("baseline"):
        lines += ["", f"baseline: the ragsync of `{result['baseline']}`, run alternately."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
