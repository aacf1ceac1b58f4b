"""Content codings (RFC 9110 §8.4): a coded body is decoded whole, or not at all.

A response's ``Content-Encoding`` lists the codings applied to its body, in order; they are
undone in reverse. ragsync decodes

- ``gzip`` and ``x-gzip`` (§8.4.1.3; RFC 1952): every member of a multi-member body; bytes
  after the last member that do not start another are ignored, as gzip(1) ignores them;
- ``deflate`` (§8.4.1.2): the zlib format (RFC 1950), and the raw RFC 1951 stream that some
  servers send under that name (told apart by the zlib header); bytes after the stream's end
  are ignored, as zlib leaves them;
- ``br`` (RFC 7932), when the ``brotli`` binding (1.2 or later: it bounds each step's output)
  is installed, and ``zstd`` (RFC 8878), when ``zstandard`` is: the ``compression`` extra.
  A br stream must be the whole body; a zstd body is one or more frames and nothing else, each
  frame's window at most 8 MiB (RFC 9659 §3: decoders MUST limit it so).

:func:`accept_encoding` offers exactly these. The decoders check what httpx's do not (httpx
0.28 flushes a gzip or deflate stream without asking whether it ended, reads one gzip member,
and passes a coding it does not know through as if it were none):

- a stream that stops before its end raises :class:`IncompleteBody`, whatever the framing
  said: a proxy that cut a gzip body and framed the cut as whole (a matching
  ``Content-Length``) sends a valid prefix, which is not the page;
- bytes that are not a valid stream raise :class:`CorruptBody`;
- a coding ragsync cannot decode (``compress``, an unknown name, ``br`` or ``zstd`` without
  their binding, more than :data:`MAX_CODINGS`) raises :class:`UnsupportedCoding` at the
  body's first byte: its coded bytes are never taken for the body.

An empty body is empty whatever its coding (no stream was sent; as for a 204 or a 304).

Output comes in pieces of at most ``step`` bytes (zstd: at most :data:`ZSTD_SLICE` input bytes
per step, a bounded output), so the caller's byte limit stops a decompression bomb after one
piece.

Example::

    >>> import gzip
    >>> b"".join(decode([gzip.compress(b"<p>a</p>")], "gzip"))
    b'<p>a</p>'
    >>> b"".join(decode([gzip.compress(b"<p>a</p>")[:-4]], "gzip"))
    Traceback (most recent call last):
    ...
    ragsync.contentcoding.IncompleteBody: the gzip stream stops before its end
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from types import ModuleType
from typing import ClassVar, Protocol

STEP = 64 * 1024  # the most output one decoding step yields
MAX_CODINGS = 3  # codings applied one over another: "gzip, gzip" occurs, more does not
# zstd input per step: a zstd block is at most 128 KiB of output from at least 4 input bytes,
# so one step yields at most about 2 MiB.
ZSTD_SLICE = 64
ZSTD_MAX_WINDOW = 8 * 1024 * 1024  # RFC 9659 §3
_GZIP_MAGIC = b"\x1f\x8b"


class CodingError(ValueError):
    """The body cannot be decoded as its ``Content-Encoding`` says; ``coding`` names the
    coding at fault, ``transient`` whether asking again may bring a whole body."""

    transient: ClassVar[bool] = False

    def __init__(self, coding: str, detail: str):
        self.coding = coding
        self.detail = detail
        super().__init__(detail)


class UnsupportedCoding(CodingError):
    """A content coding ragsync does not decode (the message says which it does)."""


class CorruptBody(CodingError):
    """The bytes are not a valid stream of the coding."""


class IncompleteBody(CodingError):
    """The stream stops before its end: the body was cut (on the way, most likely)."""

    transient = True


@cache
def _brotli() -> ModuleType | None:
    """The ``brotli`` binding, if one that bounds each step's output is installed."""
    try:
        import brotli
    except ImportError:
        return None
    return brotli if hasattr(brotli.Decompressor, "can_accept_more_data") else None


@cache
def _zstandard() -> ModuleType | None:
    """``zstandard``, if one whose decompressor reports the end of a frame is installed."""
    try:
        import zstandard
    except ImportError:
        return None
    return zstandard if hasattr(zstandard.ZstdDecompressor().decompressobj(), "eof") else None


@cache
def supported() -> tuple[str, ...]:
    """The content codings this installation decodes, in the order they are offered."""
    optional = (("br", _brotli), ("zstd", _zstandard))
    return ("gzip", "deflate", *(name for name, binding in optional if binding() is not None))


def accept_encoding() -> str:
    """The ``Accept-Encoding`` request field (RFC 9110 §12.5.3): every coding
    :func:`supported` (``identity`` is acceptable unless excluded, so it is not named).

    Example::

        >>> accept_encoding().startswith("gzip, deflate")
        True
    """
    return ", ".join(supported())


def codings(content_encoding: str | None) -> tuple[str, ...]:
    """The codings a ``Content-Encoding`` value lists, in the order they were applied:
    lower case, ``x-gzip`` read as ``gzip`` (§8.4.1.3), ``identity`` and empty elements
    (§5.6.1) left out.

    Example::

        >>> codings("x-gzip, , Identity,GZIP")
        ('gzip', 'gzip')
    """
    names = (name.strip(" \t").lower() for name in (content_encoding or "").split(","))
    return tuple(
        "gzip" if name == "x-gzip" else name for name in names if name not in ("", "identity")
    )


def decode(
    raw: Iterable[bytes], content_encoding: str | None, *, step: int = STEP
) -> Iterator[bytes]:
    """The decoded body, piece by piece, from its raw (coded) pieces.

    Args:
        raw: the body as it came (``httpx.Response.iter_raw()``).
        content_encoding: the response's ``Content-Encoding`` (None: none).
        step: the most output one decoding step yields.

    Returns:
        The decoded pieces. The iterator raises a :class:`CodingError` when the body turns
        out not to be whole streams of its codings (at its end, or at the first invalid
        byte), so the caller must not use what it yielded before; an unsupported coding
        (:class:`UnsupportedCoding`) is refused at the body's first byte, so a body-less
        response (a 304 or a 204 that repeats its representation's Content-Encoding) is
        never refused for it.
    """
    names = codings(content_encoding)
    return _decoded(raw, names, step) if names else iter(raw)


def _decoded(raw: Iterable[bytes], names: tuple[str, ...], step: int) -> Iterator[bytes]:
    pieces = iter(raw)
    first = next((piece for piece in pieces if piece), None)
    if first is None:
        return  # no stream at all
    if len(names) > MAX_CODINGS:
        listed = ", ".join(names)
        raise UnsupportedCoding(
            listed, f"{len(names)} content codings ({listed}): at most {MAX_CODINGS}"
        )
    layers = [_layer(name) for name in names]
    stream: Iterable[bytes] = itertools.chain([first], pieces)
    for layer in reversed(layers):
        stream = layer(stream, step)
    yield from stream


_Layer = Callable[[Iterable[bytes], int], Iterator[bytes]]


def _layer(name: str) -> _Layer:
    """The decoder of one coding."""
    if name == "gzip":
        return _gunzip
    if name == "deflate":
        return _inflate
    brotli = _brotli() if name == "br" else None
    if brotli is not None:
        return lambda pieces, step: _unbrotli(pieces, step, brotli)
    zstandard = _zstandard() if name == "zstd" else None
    if zstandard is not None:
        return lambda pieces, step: _unzstd(pieces, step, zstandard)
    offered = ", ".join(supported())
    if name in ("br", "zstd"):
        binding = "brotli>=1.2" if name == "br" else "zstandard"
        detail = (
            f"Content-Encoding {name!r} needs {binding}: pip install 'ragsync[compression]' "
            f"(this installation decodes {offered})"
        )
    else:
        detail = f"unsupported Content-Encoding {name!r} (ragsync decodes {offered})"
    raise UnsupportedCoding(name, detail)


class _Inflater(Protocol):
    """What :func:`zlib.decompressobj` returns."""

    @property
    def eof(self) -> bool: ...
    @property
    def unconsumed_tail(self) -> bytes: ...
    @property
    def unused_data(self) -> bytes: ...
    def decompress(self, data: bytes, /, max_length: int = 0) -> bytes: ...


def _drain(inflater: _Inflater, data: bytes, step: int, coding: str) -> Iterator[bytes]:
    """Everything ``inflater`` makes of ``data``, at most ``step`` bytes at a time (a full
    step may leave output inside zlib with no input left: it is asked again)."""
    while True:
        try:
            out = inflater.decompress(data, step)
        except zlib.error as exc:
            raise CorruptBody(coding, f"the {coding} stream is invalid ({exc})") from exc
        if out:
            yield out
        data = inflater.unconsumed_tail
        if inflater.eof or (not data and len(out) < step):
            return


def _gunzip(pieces: Iterable[bytes], step: int) -> Iterator[bytes]:
    """gzip members, one after another, each read to its end."""
    inflater: _Inflater | None = None
    pending = b""  # bytes not yet given to a member's inflater
    members = 0
    trailing = False  # past the last member: the rest is ignored
    for piece in pieces:
        if trailing:
            continue  # read on: the framing still decides whether the body came whole
        data = pending + piece
        pending = b""
        while data:
            if inflater is None:
                if members and not data.startswith(_GZIP_MAGIC):
                    if _GZIP_MAGIC.startswith(data):  # a member's first byte? the next says
                        pending = data
                    else:
                        trailing = True
                    break
                inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            yield from _drain(inflater, data, step, "gzip")
            if not inflater.eof:
                break
            data, inflater = inflater.unused_data, None
            members += 1
    if inflater is not None or pending:
        raise IncompleteBody("gzip", "the gzip stream stops before its end")


def _zlib_header(head: bytes) -> bool:
    """Whether a deflate body starts with a zlib header (RFC 1950 §2.2: CM 8, CINFO ≤ 7, no
    preset dictionary, FCHECK): else it is a raw deflate stream."""
    cmf, flg = head[0], head[1]
    return cmf & 0x0F == 8 and cmf >> 4 <= 7 and not flg & 0x20 and (cmf << 8 | flg) % 31 == 0


def _inflate(pieces: Iterable[bytes], step: int) -> Iterator[bytes]:
    """One deflate stream, zlib-wrapped or raw, read to its end."""
    inflater: _Inflater | None = None
    head = b""  # the first bytes, until two tell the format
    for piece in pieces:
        if inflater is None:
            head += piece
            if len(head) < 2:
                continue
            inflater = zlib.decompressobj(zlib.MAX_WBITS if _zlib_header(head) else -zlib.MAX_WBITS)
            piece, head = head, b""
        if not inflater.eof:  # after it, the rest is ignored (read on, as for gzip)
            yield from _drain(inflater, piece, step, "deflate")
    if head or (inflater is not None and not inflater.eof):
        raise IncompleteBody("deflate", "the deflate stream stops before its end")


def _unbrotli(pieces: Iterable[bytes], step: int, brotli: ModuleType) -> Iterator[bytes]:
    """One Brotli stream, which must end with the body."""
    decompressor = None
    for piece in pieces:
        if not piece:
            continue
        if decompressor is None:
            decompressor = brotli.Decompressor()
        if decompressor.is_finished():
            raise CorruptBody("br", "bytes after the end of the br stream")
        try:
            out = decompressor.process(piece, output_buffer_limit=step)
            # Output the limit held back comes from calls with no input (can_accept_more_data
            # is no sign of it: brotli 1.2 answers True with output still held).
            while out:
                yield out
                if decompressor.is_finished():
                    break
                out = decompressor.process(b"", output_buffer_limit=step)
        except brotli.error as exc:
            raise CorruptBody("br", f"the br stream is invalid ({exc})") from exc
    if decompressor is not None and not decompressor.is_finished():
        raise IncompleteBody("br", "the br stream stops before its end")


def _unzstd(pieces: Iterable[bytes], step: int, zstandard: ModuleType) -> Iterator[bytes]:
    """zstd frames, one after another, each read to its end."""
    context = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
    frame = None
    held = bytearray()  # the small outputs of small inputs, given out a step at a time
    for piece in pieces:
        view = memoryview(piece)
        for start in range(0, len(view), ZSTD_SLICE):
            data: bytes | memoryview = view[start : start + ZSTD_SLICE]
            while data:
                if frame is None:
                    frame = context.decompressobj(write_size=step)
                try:
                    held += frame.decompress(data)
                except zstandard.ZstdError as exc:
                    raise CorruptBody("zstd", f"the zstd stream is invalid ({exc})") from exc
                data, frame = (frame.unused_data, None) if frame.eof else (b"", frame)
            while len(held) >= step:
                yield bytes(held[:step])
                del held[:step]
    if held:
        yield bytes(held)
    if frame is not None:
        raise IncompleteBody("zstd", "the zstd stream stops before its end")
