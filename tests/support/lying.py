"""A site whose validators lie: one ETag and one Last-Modified for every page, whatever it holds,
and 304 to every conditional request, while its sitemap's lastmod still moves with each edit."""

from __future__ import annotations

from typing import Any

from ragsync.testing import DevSite
from ragsync.testing.site import SitePage

ETAG = '"v1"'
LAST_MODIFIED = "Sun, 01 Nov 2026 00:00:00 GMT"


class LyingValidators:
    """Installed as ``site.fault``: the pages of ``site`` answer with :data:`ETAG` and
    :data:`LAST_MODIFIED`, 304 to any request that carries a validator and 200 with the page
    to any other; robots.txt and the sitemap are served as usual. With ``lying`` False the
    site answers as :class:`~ragsync.testing.DevSite` does (validators of its content)."""

    def __init__(self, site: DevSite):
        self.site = site
        self.lying = True
        site.fault = self.answer

    def answer(self, path: str, headers: Any) -> tuple[int, dict[str, str], bytes] | None:
        page = self.site.pages.get(path.split("?", 1)[0])
        if not self.lying or page is None or page.status != 200 or page.location:
            return None
        validators = {"ETag": ETAG, "Last-Modified": LAST_MODIFIED}
        if headers.get("If-None-Match") or headers.get("If-Modified-Since"):
            return 304, validators, b""
        html = self.site.render(page).encode("utf-8")
        return 200, {**validators, "Content-Type": "text/html; charset=utf-8"}, html


def edit_quietly(site: DevSite, path: str, title: str, body: str) -> None:
    """Change a page of ``site`` without moving its sitemap lastmod: nothing says it changed."""
    site.pages[path] = SitePage(title, body, site.pages[path].modified)
