"""The ``urls`` source: an explicit URL inventory, inline or in a file (one URL per line).

A ``urls_file`` that cannot be read makes the listing incomplete (its pages are then not "no
longer listed"); a line that is not an http(s) URL is only a warning: it never named a page.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ragsync.errors import ConfigError
from ragsync.models import Candidate
from ragsync.protocols import DiscoveryContext
from ragsync.urls import require_http_url, url_lines


@dataclass(frozen=True)
class UrlListOptions:
    urls: tuple[str, ...] = ()
    urls_file: str | None = None  # relative to the config file; '#' starts a comment


class UrlListSource:
    """Candidates from ``urls = [...]`` and/or ``urls_file = "urls.txt"``."""

    Options = UrlListOptions

    @classmethod
    def validate(cls, options: UrlListOptions) -> None:
        if not options.urls and not options.urls_file:
            raise ConfigError('give `urls = [...]` or `urls_file = "..."`', key="urls")
        for i, url in enumerate(options.urls):
            require_http_url(url, f"urls[{i}]")

    def __init__(self, options: UrlListOptions):
        self.options = options

    def discover(self, ctx: DiscoveryContext) -> Iterator[Candidate]:
        for url in self.options.urls:
            yield Candidate(url=url)
        if self.options.urls_file:
            path = ctx.base_dir / self.options.urls_file
            try:
                text = path.read_text(encoding="utf-8-sig")  # a BOM is no URL
            except OSError as exc:
                ctx.incomplete(f"urls_file {path}: {exc.strerror or exc}")
                return
            except UnicodeDecodeError as exc:
                ctx.incomplete(f"urls_file {path}: not UTF-8 text ({exc})")
                return
            for number, url in url_lines(text):
                if not url.startswith(("http://", "https://")):
                    ctx.warn(f"{path}:{number}: not an http(s) URL: {url!r}")
                    continue
                yield Candidate(url=url)
