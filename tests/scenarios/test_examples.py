"""Every example in examples/ is exercised."""

from __future__ import annotations

import importlib
import re
import shlex
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def write_config(tmp_path, site):
    config = tmp_path / "ragsync.toml"
    config.write_text(
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{site.base_url}/sitemap.xml"\n'
    )
    return config


def test_quickstart_config_loads():
    from ragsync.config import load_config

    config = load_config(EXAMPLES / "ragsync.toml")
    assert config.sources[0].options.url == "http://127.0.0.1:8765/sitemap.xml"


def test_python_api_example(tmp_path, site):
    config = write_config(tmp_path, site)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "python_api.py"), str(config), "throttling limits"],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    assert "sync ok=True: 4 changed" in proc.stdout
    assert proc.stdout.count("change: created") == 4
    assert proc.stdout.count("hit: ") == 3


def test_fastapi_app_answers_and_refreshes(tmp_path, site, monkeypatch):
    from fastapi.testclient import TestClient

    monkeypatch.setenv("RAGSYNC_CONFIG", str(write_config(tmp_path, site)))
    monkeypatch.syspath_prepend(str(EXAMPLES))
    module = importlib.import_module("fastapi_app")
    try:
        with TestClient(module.app) as client:
            refreshed = client.post("/refresh").json()
            assert refreshed["ok"] and refreshed["counters"]["documents_created"] == 4
            answer = client.get("/ask", params={"q": "encryption limits", "k": 2}).json()
            assert len(answer["sources"]) == 2 and answer["context"]
            assert answer["sources"][0]["url"].startswith(site.base_url)
    finally:
        module.syncer.close()
        sys.modules.pop("fastapi_app", None)


def test_cron_line_and_systemd_units_run_a_real_sync(tmp_path, site):
    cron = next(
        line
        for line in (EXAMPLES / "deploy" / "ragsync.cron").read_text().splitlines()
        if line and not line.startswith("#")
    )
    fields = cron.split(None, 5)
    assert all(re.fullmatch(r"[\d*/,-]+", f) for f in fields[:5]), fields
    service = (EXAMPLES / "deploy" / "ragsync.service").read_text()
    exec_start = re.search(r"^ExecStart=(.+)$", service, re.M).group(1)
    timer = (EXAMPLES / "deploy" / "ragsync.timer").read_text()
    assert "OnUnitActiveSec=15min" in timer and "Persistent=true" in timer
    config = write_config(tmp_path, site)
    for command in (fields[5].split("&&", 1)[1], exec_start):
        argv = shlex.split(command)
        assert Path(argv[0]).name == "ragsync" and argv[1:4] == ["-q", "run", "--config"]
        proc = subprocess.run(
            [sys.executable, "-m", "ragsync", *argv[1:4], str(config)],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr  # -q: quiet on success


def test_cms_webhook_example_is_accepted_once(tmp_path, site, monkeypatch):
    import base64

    from starlette.testclient import TestClient

    from ragsync.config import load_config
    from ragsync.server import ServeLoop, create_app

    secret = "whsec_" + base64.b64encode(b"cms example secret, 32 bytes ok!").decode()
    monkeypatch.setenv("DOCS_HOOK_SECRET", secret)
    config_path = tmp_path / "ragsync.toml"
    config_path.write_text(
        f'[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "{site.base_url}/sitemap.xml"\n'
        'webhook_secret = "${DOCS_HOOK_SECRET}"\n'
    )
    config = load_config(config_path)
    worker = ServeLoop(config)
    worker.stop.set()  # the receiver alone
    monkeypatch.syspath_prepend(str(EXAMPLES))
    cms = importlib.import_module("cms_webhook")
    with TestClient(create_app(config, worker)) as client:
        first = cms.send(
            "/hooks/docs", secret, [site.base_url + "/guide/page-1"], client=client, msg_id="msg_1"
        )
        again = cms.send(
            "/hooks/docs", secret, [site.base_url + "/guide/page-1"], client=client, msg_id="msg_1"
        )
    assert (first.status_code, first.json()) == (202, {"queued": 1})
    assert again.status_code == 200 and again.json()["duplicate"] is True
