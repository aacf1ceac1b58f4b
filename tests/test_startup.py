"""A `ragsync run` with nothing due imports none of the heavy libraries: the HTTP client, the
HTML parsers, the model, the vector store, numpy (README "Architecture": a run that embeds
nothing never imports torch, and one with nothing to write never opens the vector store)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ragsync.sync import Syncer

HEAVY = (
    "httpx",
    "httpcore",
    "h2",
    "numpy",
    "lxml",
    "trafilatura",
    "torch",
    "sentence_transformers",
    "qdrant_client",
    "tiktoken",
    "rich",
)

PROBE = """
import json, sys
from ragsync.cli import main
try:
    main(["run", "--json", "--config", sys.argv[1]])
    code = 0
except SystemExit as exc:
    code = exc.code
heavy = sorted(name for name in {heavy!r} if name in sys.modules)
with open(sys.argv[2], "w") as out:
    json.dump({{"code": code, "heavy": heavy}}, out)
"""


def test_a_run_with_nothing_due_imports_no_heavy_library(tmp_path: Path):
    (tmp_path / "urls.txt").write_text("")  # a complete listing of nothing
    config = tmp_path / "ragsync.toml"
    config.write_text(
        '[[sources]]\nid = "docs"\nkind = "urls"\nurls_file = "urls.txt"\nevery = "1d"\n'
    )
    with Syncer.from_config(config) as syncer:  # the first run lists the source
        assert syncer.run().ok
    found = tmp_path / "found.json"
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), str(config), str(found)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(found.read_text())
    report = json.loads(done.stdout)
    assert result["code"] == 0
    assert report["counters"]["requests_sent"] == 0
    assert report["counters"]["sources_not_due"] == 1
    assert result["heavy"] == []
