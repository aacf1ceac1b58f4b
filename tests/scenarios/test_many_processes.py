"""One store, many processes (README "Vector stores": *One store, many processes*): while a
cold `ragsync run` writes the store, searches in other processes (the CLI, `Syncer.search` and
the LangChain retriever in an app, `serve`'s `/search`) all answer, and the run ends unharmed
with the index a sync done alone makes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from ragsync.testing import DevSite
from tests.support import example_pages, postgres_url, ragsync_cli, store_texts, write_cli_config

QUERY = "how is replication tuned?"
# A Python app's searches, one Syncer kept for all of them, every other one through the
# LangChain retriever; each answer a JSON line.
APP = """
import json, sys, time
from ragsync import Syncer
from ragsync.config import load_config
from ragsync.retriever import RagsyncRetriever
with Syncer(load_config(sys.argv[1])) as syncer:
    retriever = RagsyncRetriever(syncer=syncer, k=3)
    for i in range(int(sys.argv[2])):
        try:
            if i % 2:
                hits = retriever.invoke(sys.argv[3])
            else:
                hits = syncer.search(sys.argv[3], 3)
            print(json.dumps({"at": time.time(), "hits": len(hits)}), flush=True)
        except Exception as exc:
            print(json.dumps({"at": time.time(), "error": repr(exc)}), flush=True)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(folder: Path, base: str, store: str, *, port: int) -> Path:
    """A config of the shared state and store whose serve listens on ``port``; the source is
    due hourly, so that a serve started beside the cold run never syncs itself."""
    return write_cli_config(
        folder,
        base,
        state=f'path = "{folder / "state.db"}"',
        store=store,
        extra=f'[fetch]\nconcurrency = 2\n\n[server]\nlisten = "127.0.0.1:{port}"',
        every="1h",
        name=f"ragsync-{port}",
    )


def searches_beside_a_run(
    tmp_path: Path, store: str, *, pages: int, cli_searches: int, app_searches: int, serve: bool
) -> None:
    site = DevSite(example_pages(pages), latency=0.05)
    base = site.start()
    try:
        folder = tmp_path / "shared"
        config = write_config(folder, base, store, port=free_port())  # no serve listens there
        serve_port = free_port()
        serve_config = write_config(folder, base, store, port=serve_port)
        run = subprocess.Popen(
            [sys.executable, "-m", "ragsync", "run", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert run.stderr is not None
        run_log: list[str] = []
        started = threading.Event()
        run_ended: list[float] = []

        def read_run_log() -> None:
            assert run.stderr is not None
            for line in run.stderr:
                run_log.append(line)
                if "pages checked" in line:
                    started.set()  # the run holds the state and has written the store
            run_ended.append(time.time())  # its stderr closes as it exits

        reader = threading.Thread(target=read_run_log)
        reader.start()
        assert started.wait(180), "".join(run_log)

        cli_answers: list[tuple[float, subprocess.CompletedProcess[str]]] = []

        def cli_loop() -> None:
            for _ in range(cli_searches):
                done = ragsync_cli("search", QUERY, "-k", "3", "--json", config=config)
                cli_answers.append((time.time(), done))

        app = subprocess.Popen(
            [sys.executable, "-c", APP, str(config), str(app_searches), QUERY],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        served: list[tuple[float, int, str]] = []
        serve_proc = None
        if serve:
            serve_proc = subprocess.Popen(
                [sys.executable, "-m", "ragsync", "serve", "--config", str(serve_config)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )

        def serve_loop() -> None:
            url = f"http://127.0.0.1:{serve_port}/search"
            deadline = time.monotonic() + 120
            while len(served) < 20 and time.monotonic() < deadline:
                try:
                    answer = httpx.get(url, params={"q": QUERY, "k": 3}, timeout=60)
                except httpx.ConnectError:
                    time.sleep(0.2)  # serve is still starting
                    continue
                served.append((time.time(), answer.status_code, answer.text))

        threads = [threading.Thread(target=cli_loop)]
        if serve:
            threads.append(threading.Thread(target=serve_loop))
        for thread in threads:
            thread.start()
        app_out, app_err = app.communicate(timeout=600)
        for thread in threads:
            thread.join(timeout=600)
        assert run.wait(timeout=600) == 0, "".join(run_log)
        reader.join()
        ended = run_ended[0]
        if serve_proc is not None:
            serve_proc.terminate()
            serve_proc.wait(timeout=60)

        run_text = "".join(run_log)
        assert "Traceback" not in run_text, run_text
        # every search answered with hits, whoever held the store meanwhile
        assert len(cli_answers) == cli_searches
        for _, done in cli_answers:
            assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
            assert json.loads(done.stdout), done.stdout
        app_lines = [json.loads(line) for line in app_out.splitlines()]
        assert len(app_lines) == app_searches, app_err
        assert all(line.get("hits") for line in app_lines), app_lines
        if serve:
            assert len(served) == 20
            for _, status, text in served:
                assert status == 200 and json.loads(text)["hits"], text
        # ... and they ran while the run wrote
        assert min(at for at, _ in cli_answers) < ended, (cli_answers, ended)
        assert min(line["at"] for line in app_lines) < ended, (app_lines, ended)
        if serve:
            assert min(at for at, _, _ in served) < ended, (served, ended)

        verified = ragsync_cli("verify", "--json", config=config)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        shared_index = store_texts(config)

        alone = write_config(tmp_path / "alone", base, store.replace("shared", "alone"), port=1)
        assert ragsync_cli("run", config=alone).returncode == 0
        assert shared_index == store_texts(alone) and len(shared_index) >= 3 * pages
    finally:
        site.stop()


@pytest.mark.parametrize(
    ("kind", "pages"),
    [("qdrant_edge", 200), ("qdrant", 200)],
    ids=["qdrant_edge", "local_mode"],
)
def test_searches_in_other_processes_answer_while_a_run_writes_an_embedded_store(
    tmp_path, kind, pages
):
    store = f'kind = "{kind}"\npath = "{tmp_path / "shared" / "store"}"\ncollection = "docs"'
    searches_beside_a_run(
        tmp_path, store, pages=pages, cli_searches=10, app_searches=10, serve=kind == "qdrant_edge"
    )


def test_a_server_store_is_shared_by_its_server(tmp_path):
    """pgvector (the PostgreSQL server the tests start): readers and the writer are clients."""
    table = f"many_{abs(hash(str(tmp_path))) % 10**8}"
    store = f'kind = "pgvector"\nurl = "{postgres_url()}"\ncollection = "shared_{table}"'
    searches_beside_a_run(tmp_path, store, pages=200, cli_searches=3, app_searches=5, serve=False)
