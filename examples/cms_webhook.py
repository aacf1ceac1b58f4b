"""How a CMS tells `ragsync serve` that pages changed: a signed Standard Webhooks delivery.

    python examples/cms_webhook.py http://127.0.0.1:8787/hooks/docs "$DOCS_HOOK_SECRET" \\
        https://docs.example.org/a https://docs.example.org/b

The secret is the source's `webhook_secret` (a Standard Webhooks secret: "whsec_" + base64).
ragsync answers 202 {"queued": n} once the work is durably queued; a retry with the same
webhook-id is recognised and ignored.
"""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, datetime

import httpx
from standardwebhooks.webhooks import Webhook


def send(
    hook_url: str,
    secret: str,
    urls: list[str],
    client: httpx.Client | None = None,
    msg_id: str | None = None,
) -> httpx.Response:
    """POST ``{"urls": urls}`` to ``hook_url``, signed with ``secret``."""
    body = json.dumps({"urls": urls})
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"  # keep it when retrying the same delivery
    now = datetime.now(UTC)
    headers = {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, now, body),
    }
    owned = client is None
    client = client or httpx.Client(timeout=10)
    try:
        return client.post(hook_url, content=body, headers=headers)
    finally:
        if owned:
            client.close()


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    response = send(sys.argv[1], sys.argv[2], sys.argv[3:])
    print(response.status_code, response.text)
    sys.exit(0 if response.status_code in (200, 202) else 1)
