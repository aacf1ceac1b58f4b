"""A body is whole or it is a failure: content codings decoded to their end, and every framing
of a cut body refused (real sockets on 127.0.0.1 where framing matters)."""

from __future__ import annotations

import gzip
import random
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import brotli
import httpx
import pytest
import zstandard

from ragsync.config import FetchConfig
from ragsync.contentcoding import (
    STEP,
    CorruptBody,
    IncompleteBody,
    UnsupportedCoding,
    accept_encoding,
    decode,
)
from ragsync.errors import FetchError
from ragsync.fetch import Fetcher
from tests.support.rawserver import RawServer, read_request

ROOT = Path(__file__).resolve().parent.parent


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


def halves(encode: Callable[[bytes], bytes]) -> Callable[[bytes], tuple[bytes, set[int]]]:
    """Two streams one after the other (gzip members, zstd frames): a cut exactly between them
    leaves a whole first stream, which no decoder can tell from a body of one."""

    def encode_halves(data: bytes) -> tuple[bytes, set[int]]:
        first = encode(data[: len(data) // 2])
        return first + encode(data[len(data) // 2 :]), {len(first)}

    return encode_halves


def single(encode: Callable[[bytes], bytes]) -> Callable[[bytes], tuple[bytes, set[int]]]:
    return lambda data: (encode(data), set())


# (Content-Encoding, encoder → (coded bytes, offsets where a cut leaves whole streams))
ENCODERS: dict[str, tuple[str, Callable[[bytes], tuple[bytes, set[int]]]]] = {
    "gzip": ("gzip", single(lambda d: gzip.compress(d, mtime=0))),
    "gzip, two members": ("gzip", halves(lambda d: gzip.compress(d, mtime=0))),
    "gzip twice": ("gzip, gzip", single(lambda d: gzip.compress(gzip.compress(d), mtime=0))),
    "x-gzip": ("x-gzip", single(lambda d: gzip.compress(d, mtime=0))),
    "deflate (zlib)": ("deflate", single(zlib.compress)),
    "deflate (raw)": ("deflate", single(raw_deflate)),
    "br": ("br", single(lambda d: brotli.compress(d, quality=5))),
    "zstd": ("zstd", single(zstd)),
    "zstd, two frames": ("zstd", halves(zstd)),
}


def text(rng: random.Random, size: int) -> bytes:
    """Compressible words, or incompressible bytes."""
    if rng.random() < 0.3:
        return rng.randbytes(size)
    words = [
        rng.choice(["alpha", "beta", "gamma", "<p>", "</p>", "\n", "delta"]) for _ in range(size)
    ]
    return " ".join(words).encode()[:size]


def pieces(rng: random.Random, data: bytes) -> Iterator[bytes]:
    """``data`` in pieces of random sizes, as a socket may deliver it."""
    at = 0
    while at < len(data):
        size = rng.choice([1, 2, 3, 64, 1000, 16_384, 65_536])
        yield data[at : at + size]
        at += size


def decoded(rng: random.Random, coded: bytes, coding: str, step: int) -> bytes:
    return b"".join(decode(pieces(rng, coded), coding, step=step))


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_whole_bodies_decode_to_what_was_coded(name):
    coding, encode = ENCODERS[name]
    rng = random.Random(name)
    for size in (1, 40, 3000, 150_000):
        data = text(rng, size)
        coded, _ = encode(data)
        for step in (7, 4096, STEP):
            assert decoded(rng, coded, coding, step) == data, (size, step)


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_a_body_cut_at_any_offset_is_refused_as_cut(name):
    """The property the fetch relies on: a coded body cut anywhere (but between two whole
    streams) raises IncompleteBody — never a prefix taken for the page."""
    coding, encode = ENCODERS[name]
    rng = random.Random(f"cut {name}")
    checked = 0
    for size in (1, 60, 2000, 150_000):
        data = text(rng, size)
        coded, whole_at = encode(data)
        inner = range(1, len(coded))
        offsets = inner if len(coded) <= 400 else [1, 2, len(coded) - 1, *rng.sample(inner, 40)]
        for cut in offsets:
            step = rng.choice([7, 4096, STEP])
            if cut in whole_at:
                assert decoded(rng, coded[:cut], coding, step) == data[: len(data) // 2]
                continue
            with pytest.raises(IncompleteBody) as info:
                decoded(rng, coded[:cut], coding, step)
            assert info.value.transient and info.value.coding == coding.split(",")[0].removeprefix(
                "x-"
            )
            checked += 1
    assert checked > 100  # the loop ran


@pytest.mark.parametrize(
    ("coding", "body", "kind"),
    [
        ("gzip", b"<p>plain, not gzip</p>", CorruptBody),
        ("deflate", b"<p>plain, not deflate</p>", CorruptBody),
        ("br", b"<p>plain, not br</p>", CorruptBody),
        ("zstd", b"<p>plain, not zstd</p>", CorruptBody),
        ("br", brotli.compress(b"<p>a</p>") + b"junk", CorruptBody),
        ("zstd", zstd(b"<p>a</p>") + b"junk", CorruptBody),
        ("compress", b"\x1f\x9d...", UnsupportedCoding),
        ("x-unknown", b"<p>a</p>", UnsupportedCoding),
        ("gzip;q=1", gzip.compress(b"<p>a</p>"), UnsupportedCoding),
        ("chunked", b"<p>a</p>", UnsupportedCoding),
    ],
)
def test_what_is_not_a_stream_of_its_coding_is_refused(coding, body, kind):
    with pytest.raises(kind) as info:
        b"".join(decode([body], coding))
    assert not info.value.transient and info.value.coding == coding
    if kind is UnsupportedCoding:
        assert f"Content-Encoding {coding!r} (ragsync decodes gzip, deflate" in str(info.value)


def test_more_than_three_codings_are_refused():
    with pytest.raises(UnsupportedCoding, match=r"4 content codings \(gzip, gzip, gzip, br\)"):
        b"".join(decode([b"x"], "gzip, gzip, gzip, br"))


@pytest.mark.parametrize(
    ("coding", "body", "expected"),
    [
        ("gzip", gzip.compress(b"<p>a</p>") + b"trailing junk", b"<p>a</p>"),  # as gzip(1)
        ("gzip", gzip.compress(b"<p>a</p>") + b"\0" * 9, b"<p>a</p>"),  # zero padding
        ("deflate", zlib.compress(b"<p>a</p>") + b"junk", b"<p>a</p>"),
        ("gzip", b"", b""),  # no stream at all: an empty body, whatever its coding
        ("br", b"", b""),
        ("GZip, identity, ", gzip.compress(b"<p>a</p>"), b"<p>a</p>"),
        ("deflate, gzip", gzip.compress(zlib.compress(b"<p>a</p>")), b"<p>a</p>"),
    ],
)
def test_what_follows_a_whole_stream_and_empty_bodies(coding, body, expected):
    assert b"".join(decode([body], coding)) == expected


def test_a_lone_first_byte_of_another_gzip_member_is_a_cut():
    body = gzip.compress(b"<p>a</p>") + b"\x1f"
    with pytest.raises(IncompleteBody):
        b"".join(decode([body], "gzip"))
    assert b"".join(decode([body + b"x"], "gzip")) == b"<p>a</p>"  # trailing bytes, ignored


def test_a_zstd_window_over_8_mib_is_refused():
    """RFC 9659 §3: a zstd content coding's window is at most 8 MiB (decoders MUST limit it)."""
    for window_log, refused in ((23, False), (24, True)):
        params = zstandard.ZstdCompressionParameters(window_log=window_log)
        streaming = zstandard.ZstdCompressor(compression_params=params).compressobj()
        coded = streaming.compress(b"<p>a</p>" * 100) + streaming.flush()
        if refused:
            with pytest.raises(CorruptBody, match="too much memory"):
                b"".join(decode([coded], "zstd"))
        else:
            assert b"".join(decode([coded], "zstd")) == b"<p>a</p>" * 100


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd"])
def test_bombs_come_out_in_bounded_pieces(coding):
    """40 MiB of zeros: every piece is at most a step (zstd: a bounded input slice), so the
    fetch's byte limit stops it after one piece."""
    zeros = b"\0" * (40 << 20)
    coded = {
        "gzip": lambda: gzip.compress(zeros),
        "deflate": lambda: zlib.compress(zeros, 9),
        "br": lambda: brotli.compress(zeros, quality=1),
        "zstd": lambda: zstandard.ZstdCompressor(level=1).compress(zeros),
    }[coding]()
    total = biggest = 0
    for piece in decode([coded[i : i + 65_536] for i in range(0, len(coded), 65_536)], coding):
        total += len(piece)
        biggest = max(biggest, len(piece))
        if total > 20 << 20:
            break
    assert total > 20 << 20 and biggest <= 2 * STEP


def test_accept_encoding_offers_what_is_decoded():
    assert accept_encoding() == "gzip, deflate, br, zstd"  # both bindings are dev dependencies
    seen = {}

    def handler(request):
        seen["accept-encoding"] = request.headers["accept-encoding"]
        return httpx.Response(200, text="<p>x</p>")

    Fetcher(FetchConfig(), transport=httpx.MockTransport(handler)).get("https://x.org/a")
    assert seen["accept-encoding"] == "gzip, deflate, br, zstd"


def test_without_the_bindings_br_and_zstd_are_neither_offered_nor_decoded():
    probe = (
        "import sys\n"
        "sys.modules['brotli'] = sys.modules['zstandard'] = None  # not installed\n"
        "from ragsync.contentcoding import UnsupportedCoding, accept_encoding, decode\n"
        "print(accept_encoding())\n"
        "for coding in ('br', 'zstd'):\n"
        "    try:\n"
        "        b''.join(decode([b'x'], coding))\n"
        "    except UnsupportedCoding as exc:\n"
        "        print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    offered, br, zstd_refused = done.stdout.splitlines()
    assert offered == "gzip, deflate"
    assert "'br' needs brotli>=1.2" in br and "ragsync[compression]" in br
    assert "'zstd' needs zstandard" in zstd_refused and "decodes gzip, deflate)" in zstd_refused


class CountedStream(httpx.SyncByteStream):
    def __init__(self) -> None:
        self.pulled = 0

    def __iter__(self) -> Iterator[bytes]:
        for _ in range(1000):
            self.pulled += 1
            yield b"\x1f\x9d\x90" * 1000


def fetch_with(headers: dict[str, str], status: int = 200, stream=None):
    def handler(request):
        return httpx.Response(status, headers=headers, stream=stream or httpx.ByteStream(b""))

    return Fetcher(FetchConfig(), transport=httpx.MockTransport(handler)).get("https://x.org/old")


def test_an_unsupported_coding_is_a_terminal_failure_at_its_first_byte():
    stream = CountedStream()
    with pytest.raises(FetchError) as info:
        fetch_with({"Content-Encoding": "compress"}, stream=stream)
    assert not info.value.transient and info.value.status == 200
    assert str(info.value).startswith("https://x.org/old: unsupported Content-Encoding 'compress'")
    assert "(ragsync decodes gzip, deflate" in info.value.reason
    assert info.value.reason.endswith("the body is not used (3000 bytes read)")
    assert stream.pulled == 1


@pytest.mark.parametrize("status", [304, 204, 200])
def test_a_response_without_a_body_is_never_refused_for_its_coding(status):
    """A 304 may repeat its representation's Content-Encoding (RFC 9110 §15.4.5); no body,
    no stream to decode — nor to refuse."""
    response = fetch_with({"Content-Encoding": "compress", "ETag": '"v"'}, status)
    assert (response.status, response.body, response.etag) == (status, b"", '"v"')


# -- framings, on real sockets -----------------------------------------------------------------

PAGE = (
    b"<html><body>"
    + b"".join(b"<h2>Part %d</h2><p>text of part %d</p>" % (i, i) for i in range(300))
    + b"</body></html>"
)
CODED = {
    "gzip": gzip.compress(PAGE, mtime=0),
    "deflate": zlib.compress(PAGE),
    "br": brotli.compress(PAGE),
    "zstd": zstd(PAGE),
}


def framed(framing: str, headers: bytes, body: bytes, *, whole: bool) -> bytes:
    """A 200 response carrying ``body`` framed as ``framing``; not ``whole``: the framing
    itself is cut (the connection closes before the body it announced)."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n" + headers
    if framing == "content-length":
        length = len(body) if whole else len(body) + 100
        return head + b"Content-Length: %d\r\n\r\n" % length + body
    if framing == "chunked":
        half = len(body) // 2
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (body[:half], body[half:]) if c)
        return (
            head + b"Transfer-Encoding: chunked\r\n\r\n" + chunks + (b"0\r\n\r\n" if whole else b"")
        )
    if framing == "chunked, cut inside a chunk":
        return head + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % (len(body) + 50) + body
    assert framing == "close"  # no length: the body ends when the connection closes
    return head + b"Connection: close\r\n\r\n" + body


def fetch_raw(response: bytes, **config) -> bytes:
    """GET from a server that sends ``response`` and closes; the body, or FetchError."""

    def origin(conn):
        if read_request(conn):
            conn.sendall(response)

    server = RawServer(origin)
    fetcher = Fetcher(FetchConfig(timeout=10, **config))
    try:
        return fetcher.get(server.url + "/page").body
    finally:
        fetcher.close()
        server.stop()


FRAMINGS = ["content-length", "chunked", "close"]


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("coding", sorted(CODED))
def test_a_cut_coded_body_is_a_transient_failure_in_every_framing(coding, framing):
    """The framing says whole (a proxy cut the stream and framed what it had); the stream's
    own end says cut."""
    coded = CODED[coding]
    cut = random.Random(f"{coding} {framing}").randrange(1, len(coded))
    response = framed(
        framing, b"Content-Encoding: %s\r\n" % coding.encode(), coded[:cut], whole=True
    )
    with pytest.raises(FetchError) as info:
        fetch_raw(response)
    message = str(info.value)
    assert info.value.transient and info.value.status == 200
    assert message.startswith("http://127.0.0.1:") and "/page: body cut short" in message
    assert f"the {coding} stream stops before its end ({cut} bytes came," in message
    whole = framed(framing, b"Content-Encoding: %s\r\n" % coding.encode(), coded, whole=True)
    assert fetch_raw(whole) == PAGE


@pytest.mark.parametrize("framing", ["content-length", "chunked", "chunked, cut inside a chunk"])
@pytest.mark.parametrize("coding", ["identity", "gzip"])
def test_a_body_its_framing_says_is_cut_is_a_transient_failure(coding, framing):
    """Shorter than its Content-Length, or chunked without its last chunk (RFC 9112 §6.3,
    §7.1): h11 refuses it, whatever the coding; the reason says how many bytes came."""
    body = PAGE if coding == "identity" else CODED[coding]
    headers = b"" if coding == "identity" else b"Content-Encoding: gzip\r\n"
    with pytest.raises(FetchError) as info:
        fetch_raw(framed(framing, headers, body, whole=False))
    assert info.value.transient
    assert f"network error after {len(body)} body bytes: peer closed connection" in str(info.value)


def test_only_a_plain_body_ended_by_the_close_cannot_be_told_cut():
    """No length and not chunked: the close is the end (RFC 9112 §6.3 rule 8), so a cut plain
    body is whole to any client; the same body coded is refused (the case above)."""
    assert fetch_raw(framed("close", b"", PAGE[:500], whole=True)) == PAGE[:500]


@pytest.mark.parametrize("coding", sorted(CODED))
def test_a_coded_body_over_max_body_bytes_is_refused_decoded_or_as_it_came(coding):
    limit = len(PAGE) - 1
    response = framed(
        "content-length", b"Content-Encoding: %s\r\n" % coding.encode(), CODED[coding], whole=True
    )
    with pytest.raises(FetchError, match=f"body larger than max_body_bytes={limit}$") as info:
        fetch_raw(response, max_body_bytes=limit)
    assert not info.value.transient


def test_bytes_the_decoder_ignores_count_against_max_body_bytes():
    padded = gzip.compress(b"<p>a</p>") + b"\0" * 5000  # after the stream's end: still read
    response = framed("content-length", b"Content-Encoding: gzip\r\n", padded, whole=True)
    assert fetch_raw(response, max_body_bytes=6000) == b"<p>a</p>"
    with pytest.raises(FetchError, match="max_body_bytes=4000 as it came") as info:
        fetch_raw(response, max_body_bytes=4000)
    assert not info.value.transient
