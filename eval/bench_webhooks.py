"""Webhook intake of `ragsync serve`: throughput and latency on loopback, signatures checked.

Starts `ragsync serve` as a real subprocess (its sync worker running), then posts N signed
Standard Webhooks deliveries (each a new delivery id, one in-scope URL) from C concurrent
clients and measures how fast the receiver verifies, checks scope and durably queues them.

Usage: python eval/bench_webhooks.py [--hooks 2000] [--clients 8] → eval/results/webhooks.json
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx
from standardwebhooks.webhooks import Webhook

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ragsync.testing import DevSite  # noqa: E402

SECRET = "whsec_" + base64.b64encode(b"benchmark secret, 32 bytes long!").decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--hooks", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    options = parser.parse_args()

    site = DevSite({"/a": ("A", "<h1>A</h1><p>Benchmark page.</p>")})
    site.start()
    work = Path(tempfile.mkdtemp(prefix="ragsync-hooks-"))
    port = free_port()
    config = work / "ragsync.toml"
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:{port}"\n[[sources]]\nid = "docs"\nkind = "urls"\n'
        f'urls = ["{site.base_url}/a"]\nwebhook_secret = "${{HOOK_SECRET}}"\n'
    )
    env = {**os.environ, "HOOK_SECRET": SECRET}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragsync", "serve", "-c", str(config)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(work / "serve.log").open("w"),
    )
    base = f"http://127.0.0.1:{port}"
    webhook = Webhook(SECRET)
    body = json.dumps({"urls": [f"{site.base_url}/a"]})
    try:
        for _ in range(600):
            try:
                if httpx.get(base + "/healthz").json()["runs"] >= 1:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)

        def post(client: httpx.Client) -> float:
            msg_id = f"msg_{uuid.uuid4().hex}"
            now = datetime.now(UTC)
            headers = {
                "webhook-id": msg_id,
                "webhook-timestamp": str(int(now.timestamp())),
                "webhook-signature": webhook.sign(msg_id, now, body),
                "content-type": "application/json",
            }
            started = time.perf_counter()
            response = client.post(base + "/hooks/docs", content=body, headers=headers)
            elapsed = time.perf_counter() - started
            assert response.status_code == 202, response.text
            return elapsed

        clients = [httpx.Client() for _ in range(options.clients)]
        started = time.perf_counter()
        with ThreadPoolExecutor(options.clients) as pool:
            latencies = list(
                pool.map(lambda i: post(clients[i % options.clients]), range(options.hooks))
            )
        wall = time.perf_counter() - started
        for client in clients:
            client.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        site.stop()
    latencies.sort()
    result = {
        "hooks": options.hooks,
        "clients": options.clients,
        "wall_s": round(wall, 2),
        "throughput_per_s": round(options.hooks / wall, 1),
        "latency_ms": {
            "p50": round(statistics.median(latencies) * 1000, 2),
            "p99": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 2),
            "max": round(latencies[-1] * 1000, 2),
        },
    }
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "webhooks.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
