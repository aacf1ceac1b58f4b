"""The ``http_api`` source: a paginated JSON API of records that change.

Each poll asks for the records updated since the watermark minus an overlap window (a safety
margin against clock skew and late writes; re-read records cost nothing when their content hash
is unchanged), then follows the continuation — a ``Link: rel="next"`` header or a cursor / next
URL at a dotted path in the body. The continuation is a checkpoint: the engine persists it only
after the records of that page are committed, so a poll killed mid-pagination resumes from the
last committed page and loses no record. Every poll's requested window and outcome goes into the
poll log; ``ragsync status`` reports windows never covered (gaps). A page as full as
``page_size`` is a truncation warning: pagination continues. Records flagged by
``deleted_field`` are tombstoned at once (an authoritative signal). Records are indexed either
by fetching ``url_field`` or from their own ``content_fields``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from ragsync.config import duration
from ragsync.errors import ConfigError, FetchError, ResourceError
from ragsync.models import Candidate, Checkpoint
from ragsync.protocols import DiscoveryContext
from ragsync.urls import require_http_url

log = logging.getLogger("ragsync")
EPOCH = "1970-01-01T00:00:00Z"


@dataclass(frozen=True)
class HttpApiOptions:
    url: str
    items: str = "items"  # dotted path to the record list in each page
    id_field: str = "id"  # the provider's stable id: the record key
    url_field: str | None = None  # fetch and index this URL per record …
    content_fields: tuple[str, ...] = ()  # … or index these fields of the record itself
    title_field: str | None = None
    updated_field: str | None = None
    deleted_field: str | None = None  # true = authoritative deletion: tombstone at once
    next: str = "link"  # "link" = Link rel="next"; or a dotted path to a cursor / next URL
    cursor_param: str = "cursor"  # query parameter that carries a cursor value
    since_param: str | None = None  # query parameter that carries the window start
    overlap: float = duration("2m")  # watermark safety margin
    page_size: int | None = None  # a page this full warns of truncation
    max_pages: int = 10_000  # per poll, against a continuation that never ends


def dotted(data: Any, path: str) -> Any:
    """``data["a"]["b"]`` for ``"a.b"``; None when any step is missing."""
    for part in path.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


def link_next(header: str) -> str | None:
    """The ``rel="next"`` target of a ``Link`` header (RFC 8288)."""
    for part in header.split(","):
        if ";" not in part:
            continue
        target, *params = part.split(";")
        if any(p.strip().lower() in ('rel="next"', "rel=next") for p in params):
            return target.strip().strip("<>")
    return None


def with_params(url: str, params: dict[str, str]) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.update(params)
    return urlunsplit(parts._replace(query=urlencode(query)))


def record_markdown(record: dict, options: HttpApiOptions) -> str:
    """The record's own fields as Markdown: the title as a heading, each field a section."""
    lines = []
    title = dotted(record, options.title_field) if options.title_field else None
    if title:
        lines += [f"# {title}", ""]
    for name in options.content_fields:
        value = dotted(record, name)
        if value in (None, "", [], {}):
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines += [f"## {name}", "", text, ""]
    return "\n".join(lines)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _minus(timestamp: str, seconds: float) -> str:
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return _iso(moment - timedelta(seconds=seconds))


class HttpApiSource:
    """Records of a paginated JSON change API (see the module docstring)."""

    Options = HttpApiOptions
    listing = "changes"

    @classmethod
    def validate(cls, options: HttpApiOptions) -> None:
        require_http_url(options.url, "url")
        if not options.url_field and not options.content_fields:
            raise ConfigError(
                "give `url_field` (fetch each record's page) or `content_fields` (index the "
                "record's own fields)",
                key="url_field",
            )

    def __init__(self, options: HttpApiOptions):
        self.options = options

    def discover(self, ctx: DiscoveryContext) -> Iterator[Candidate | Checkpoint]:
        options = self.options
        state = ctx.checkpoint() or {}
        watermark = state.get("watermark")
        if state.get("next"):  # a poll was interrupted: resume from its last committed page
            url, window = state["next"], tuple(state["window"])
            max_seen, poll_id = state.get("max_seen"), state.get("poll_id")
            pages = state.get("pages", 0)
            log.info("%s: resuming pagination at %s", ctx.source_id, url)
        else:
            try:
                start = _minus(watermark, options.overlap) if watermark else EPOCH
            except ValueError:  # the API's updated_field is not ISO 8601: nothing to go by
                ctx.warn(
                    f"api {options.url}: watermark {watermark!r} is not an ISO 8601 time;"
                    " polling from the start"
                )
                start = EPOCH
            window = (start, ctx.now())
            url = options.url
            if options.since_param and watermark:
                url = with_params(url, {options.since_param: start})
            max_seen, poll_id, pages = watermark, None, 0
        if poll_id is None:
            poll_id = ctx.poll_started(*window)
        records = truncated = 0

        def failed(reason: str, where: str) -> None:
            ctx.incomplete(f"api {where}: {reason}")
            ctx.poll_finished(
                poll_id,
                outcome="failed",
                pages=pages,
                records=records,
                truncated=truncated,
                error=reason,
            )

        while url:
            if pages >= options.max_pages:
                failed(f"stopped after max_pages={options.max_pages}", options.url)
                return
            try:
                response = ctx.get(url)
                if response.status != 200:
                    raise FetchError.for_status(url, response.status)
                data = json.loads(response.body)
            except FetchError as exc:
                failed(exc.reason, url)
                return
            except ResourceError:  # no page's failure: the run stops (README "Resource limits")
                raise
            except Exception as exc:  # ValueError, RecursionError on absurd nesting, …
                failed(f"invalid JSON: {type(exc).__name__}: {exc}", url)
                return
            items = dotted(data, options.items) if isinstance(data, dict) else data
            if not isinstance(items, list):
                failed(f"no list at {options.items!r}", url)
                return
            try:  # the whole page is read before any of it is listed
                found = [c for c in (self._candidate(r, url) for r in items) if c is not None]
                next_url = self._next_url(url, response.headers, data)
            except Exception as exc:  # odd records (a link urljoin refuses…): this page failed
                failed(f"unreadable page: {type(exc).__name__}: {exc}", url)
                return
            pages += 1
            records += len(items)
            if options.page_size and len(items) >= options.page_size:
                truncated += 1
                log.warning(
                    "%s: a full page (%d records) at %s: results may be truncated; paginating on",
                    ctx.source_id,
                    len(items),
                    url,
                )
            for candidate in found:
                if candidate.lastmod and (max_seen is None or candidate.lastmod > max_seen):
                    max_seen = candidate.lastmod
                yield candidate
            url = next_url
            yield Checkpoint(
                {
                    "next": url,
                    "window": list(window),
                    "watermark": watermark,
                    "max_seen": max_seen,
                    "poll_id": poll_id,
                    "pages": pages,
                }
            )
        # Complete: the watermark moves; the next poll re-reads `overlap` before it.
        yield Checkpoint({"next": None, "watermark": max_seen or watermark})
        ctx.poll_finished(poll_id, outcome="ok", pages=pages, records=records, truncated=truncated)

    def _candidate(self, record: Any, page_url: str) -> Candidate | None:
        options = self.options
        if not isinstance(record, dict) or dotted(record, options.id_field) is None:
            return None
        record_id = str(dotted(record, options.id_field))
        link = dotted(record, options.url_field) if options.url_field else None
        url = urljoin(page_url, str(link)) if link else f"{options.url}#{record_id}"
        updated = dotted(record, options.updated_field) if options.updated_field else None
        deleted = bool(dotted(record, options.deleted_field)) if options.deleted_field else False
        title = dotted(record, options.title_field) if options.title_field else None
        content = record_markdown(record, options) if options.content_fields else None
        return Candidate(
            url=url,
            lastmod=str(updated) if updated else None,
            record_id=record_id,
            content=content,
            title=str(title) if title else None,
            deleted=deleted,
        )

    def _next_url(self, url: str, headers: dict[str, str], data: Any) -> str | None:
        options = self.options
        if options.next == "link":
            target = link_next(headers.get("link", ""))
            return urljoin(url, target) if target else None
        value = dotted(data, options.next) if isinstance(data, dict) else None
        if not value:
            return None
        value = str(value)
        if value.startswith(("http://", "https://", "/", "?")):
            return urljoin(url, value)
        return with_params(url, {options.cursor_param: value})
