"""Conditional HTTP fetching with httpx (RFC 9110 §13.1: If-None-Match, If-Modified-Since).

The fetcher returns a :class:`~ragsync.models.Response` for every HTTP status (deciding what a
status means is the sync policy's job) and raises :class:`~ragsync.errors.FetchError` only when
no usable response came back: network errors and timeouts (transient), redirect loops,
over-long redirect chains and bodies over ``max_body_bytes`` (terminal).
"""

from __future__ import annotations

import httpx

from ragsync.config import FetchConfig
from ragsync.errors import FetchError
from ragsync.models import Response


class Fetcher:
    """An httpx client with ragsync's limits and User-Agent.

    Args:
        config: the ``[fetch]`` table.
        transport: an httpx transport (tests pass ``httpx.MockTransport``).
    """

    def __init__(self, config: FetchConfig, transport: httpx.BaseTransport | None = None):
        self.config = config
        self.client = httpx.Client(
            headers={"User-Agent": config.user_agent},
            timeout=config.timeout,
            follow_redirects=True,
            max_redirects=config.max_redirects,
            transport=transport,
            limits=httpx.Limits(max_connections=config.concurrency),
        )

    def close(self) -> None:
        self.client.close()

    def get(
        self, url: str, *, etag: str | None = None, last_modified: str | None = None
    ) -> Response:
        """GET ``url``, conditionally when validators are given.

        Raises:
            FetchError: no usable response (see the module docstring).
        """
        headers = {}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        limit = self.config.max_body_bytes
        try:
            with self.client.stream("GET", url, headers=headers) as response:
                body = bytearray()
                # iter_bytes() decodes gzip/deflate: counting decoded bytes also stops bombs.
                for piece in response.iter_bytes():
                    body += piece
                    if len(body) > limit:
                        raise FetchError(
                            url, f"body larger than max_body_bytes={limit}", transient=False
                        )
                return Response(
                    url=str(response.url),
                    status=response.status_code,
                    headers={k.lower(): v for k, v in response.headers.items()},
                    body=bytes(body),
                    requested_url=url,
                )
        except httpx.TooManyRedirects as exc:
            raise FetchError(
                url, f"redirect loop or chain over {self.config.max_redirects}", transient=False
            ) from exc
        except httpx.TimeoutException as exc:
            raise FetchError(url, f"timeout ({type(exc).__name__})", transient=True) from exc
        except httpx.DecodingError as exc:
            raise FetchError(url, f"undecodable body: {exc}", transient=False) from exc
        except httpx.TransportError as exc:
            raise FetchError(url, f"network error: {exc}", transient=True) from exc
        except httpx.InvalidURL as exc:
            raise FetchError(url, f"invalid URL: {exc}", transient=False) from exc
