"""Seeded mutators of real inputs (``tests/fixtures/fuzz/``), one small class per input class.

A mutator's ``case(rng, where)`` builds one fuzz case, drawing only from ``rng``: the same
seed gives the same bytes on every machine, so a case id (``<mutator>-<batch>-<index>``)
reproduces it. A case is what the origin serves (``answers``, by path) plus a ``detail`` saying
which mutations were applied, printed when a check fails.

Byte-level strategies (truncation, byte flips, insertions) are shared; each mutator adds the
hostile shapes of its own input class. Sizes are bounded (a few hundred KB at most) so a batch
of a hundred cases stays a few seconds.
"""

from __future__ import annotations

import gzip
import random
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from itertools import count
from typing import Any, ClassVar

from tests.support.fuzzing import Answer, fixture, short, text_page

Strategy = Callable[[random.Random, bytes], tuple[bytes, str]]

# Real prose to give header-only cases a body worth indexing (from simply-jekyll-atom.xml).
PROSE = (
    "Simply Jekyll is a highly functional jekyll-based theme that combines the best of "
    "different worlds. It is a minimal and distraction free theme that strives to provide "
    "maximum value all without holding back on any essential features that a user would "
    "benefit from or would desire for."
)
_REAL_HOSTS = re.compile(
    rb"https?://(?:doris\.apache\.org|mangeshbide\.tech|doc\.rust-lang\.org|www\.codyze\.io"
    rb"|localhost:4000)"
)


def rehost(document: bytes, base: str, *, keep_every: int = 0) -> bytes:
    """``document`` with its real hosts replaced by ``base``; with ``keep_every`` = n, every
    n-th URL (the first included) also goes under ``/keep`` (what discovery batches allow in
    their robots.txt, so a few listed pages are fetched and the rest only counted)."""
    seen = count()

    def swap(_: re.Match[bytes]) -> bytes:
        n = next(seen)
        return base.encode() + (b"/keep" if keep_every and n % keep_every == 0 else b"")

    return _REAL_HOSTS.sub(swap, document)


@dataclass(frozen=True)
class Where:
    """Where a case lives: its port index, its path prefix and that port's base URL."""

    port: int
    prefix: str
    base: str


@dataclass
class Case:
    """One fuzz case: ``path`` (on port ``port``) is what a listing points at; ``answers`` is
    everything the origin serves for it, by path on that port."""

    case_id: str
    mutator: str
    path: str
    port: int
    answers: dict[str, Answer]
    detail: str
    facts: dict[str, Any] = field(default_factory=dict)  # for the mutator's own checks


# -- byte-level strategies ------------------------------------------------------------------


def truncate(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    cut = rng.randrange(len(data) + 1)
    return data[:cut], f"truncate@{cut}"


def flip(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    if not data:
        return data, "flip×0"
    out = bytearray(data)
    n = rng.choice([1, 1, 2, 3, 8, 30])
    for _ in range(n):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out), f"flip×{n}"


def insert(rng: random.Random, data: bytes, piece: bytes, label: str) -> tuple[bytes, str]:
    at = rng.randrange(len(data) + 1)
    return data[:at] + piece + data[at:], f"{label}@{at}"


def invalid_utf8(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    piece = rng.choice(
        [b"\xff", b"\xfe\xff", b"\xc3\x28", b"\x80\x80", b"\xed\xa0\x80", b"\xf4\x90"]
    )
    return insert(rng, data, piece * rng.choice([1, 3, 50]), "invalid-utf8")


def nul_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    return insert(rng, data, b"\x00" * rng.choice([1, 2, 100]), "nul")


def controls(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    piece = bytes(rng.choice([1, 8, 11, 12, 27, 127]) for _ in range(rng.choice([1, 5, 40])))
    return insert(rng, data, piece, "controls")


def duplicate_span(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    if not data:
        return data, "dup×0"
    start = rng.randrange(len(data))
    span = data[start : start + rng.randrange(1, 2000)]
    times = rng.choice([2, 10, 50])
    return data[:start] + span * times + data[start:], f"dup{len(span)}×{times}@{start}"


def bom(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    marks = [b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf\xef\xbb\xbf"]
    mark = rng.choice(marks)
    return mark + data, f"bom {mark!r}"


def utf16(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    codec = rng.choice(["utf-16", "utf-16-le", "utf-32"])
    return data.decode("utf-8", "replace").encode(codec), f"encoded {codec}"


def line_ends(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    end = rng.choice([b"\r\n", b"\r", b"\n\n\n", b"\x85", b"\xe2\x80\xa8"])
    return data.replace(b"\n", end), f"line ends {end!r}"


BYTE_STRATEGIES: list[Strategy] = [
    truncate,
    flip,
    invalid_utf8,
    nul_bytes,
    controls,
    duplicate_span,
]


def apply(
    rng: random.Random, data: bytes, strategies: list[Strategy], most: int = 3
) -> tuple[bytes, str]:
    """One to ``most`` strategies in a row; the labels joined with ``+``."""
    labels = []
    for _ in range(rng.randint(1, most)):
        data, label = rng.choice(strategies)(rng, data)
        labels.append(label)
    return data, "+".join(labels)


class Mutator:
    """One input class. Subclasses say what they exercise in their docstring."""

    name: ClassVar[str]

    def case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        raise NotImplementedError


# -- pages ----------------------------------------------------------------------------------

HTML_FIXTURES = [
    "rust-book-loops.html",
    "rust-edition-guide-rust-2021-index.html",
    "rust-error_codes-E0001.html",
    "rust-nomicon-races.html",
    "rust-std_detect-macro.is_x86_feature_detected.html",
]
HTML = (b"Content-Type", b"text/html; charset=utf-8")
HTML_NO_CHARSET = (b"Content-Type", b"text/html")


def _inside(data: bytes, tag: bytes, rng: random.Random) -> int:
    """The offset just inside the first ``tag`` element (a random one without it)."""
    end = data.find(b">", data.find(tag)) if tag in data else -1
    return end + 1 if end >= 0 else rng.randrange(len(data) + 1)


class HtmlBody(Mutator):
    """Real rustdoc and mdBook pages, broken: truncated, bytes flipped, nested thousands of
    levels deep, huge attributes, NUL bytes, invalid UTF-8, a wrong ``<meta charset>``, byte
    order marks (and whole UTF-16 bodies), comment and CDATA bombs, unterminated raw-text
    elements, entity spam, a 20,000-character word. Exercises decoding, extraction and
    chunking of what a page's body can be."""

    name = "html"

    def case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        source = rng.choice(HTML_FIXTURES)
        body = fixture(source)
        content_type = HTML
        strategies: list[Strategy] = [
            *BYTE_STRATEGIES,
            self.deep_nesting,
            self.huge_attribute,
            self.meta_charset,
            bom,
            utf16,
            self.comment_bomb,
            self.cdata_bomb,
            self.raw_text,
            self.entities,
            self.long_word,
            self.emptied,
        ]
        body, label = apply(rng, body, strategies, most=2)
        if "meta-charset" in label or "bom" in label or "encoded" in label or rng.random() < 0.2:
            content_type = HTML_NO_CHARSET  # so that the page's own declaration is read
        path = f"{where.prefix}/page"
        return Case(
            case_id,
            self.name,
            path,
            where.port,
            {path: Answer(200, (content_type,), body)},
            f"{source}: {label}",
        )

    @staticmethod
    def deep_nesting(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        depth = rng.choice([300, 1000, 2000])
        tag = rng.choice([b"div", b"span", b"ul><li", b"table><tr><td", b"b"])
        close = rng.random() < 0.5
        closing = b"</" + tag.split(b">")[0] + b">"
        piece = (b"<" + tag + b">") * depth + b"deep text" + (closing * depth if close else b"")
        at = _inside(data, b"<body", rng)
        return data[:at] + piece + data[at:], f"nest {tag!r}×{depth}{'' if close else ' unclosed'}"

    @staticmethod
    def huge_attribute(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        size = rng.choice([10_000, 50_000, 150_000])
        quote = rng.choice([b'"', b"'", b""])
        value = rng.choice([b"x", b"\xc3\xa9", b"a b ", b"&amp;"]) * (size // 4)
        piece = b"<a title=" + quote + value + quote + b">link</a>"
        return insert(rng, data, piece, f"attr{len(value)}")

    @staticmethod
    def meta_charset(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        charset = rng.choice(
            [
                b"utf-16",
                b"utf-32",
                b"shift_jis",
                b"iso-2022-jp",
                b"x-user-defined",
                b"utf-7",
                b"",
                b"bogus",
                b'utf-8"',
                b"cp1252",
                b"latin1",
                b"ebcdic-cp-us",
                b"\xe9",
            ]
        )
        found = re.search(rb"<meta charset=\"?[^\">]*\"?", data, re.I)
        piece = b'<meta charset="' + charset + b'"'
        if found:
            return data[: found.start()] + piece + data[found.end() :], f"meta-charset {charset!r}"
        return insert(rng, data, piece + b">", f"meta-charset {charset!r}")

    @staticmethod
    def comment_bomb(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        piece = rng.choice([b"<!--", b"<!-- x -->", b"<!--<!--", b"-->", b"<!---->"])
        # Bounded so that the batches stay quick: a flood big enough to take trafilatura's
        # quadratic metadata pass past the CPU budget is test_fuzz.py's
        # test_defect_extraction_without_time_budget.
        times = rng.choice([1, 1000, 5_000])
        return insert(rng, data, piece * times, f"comment {piece!r}×{times}")

    @staticmethod
    def cdata_bomb(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        piece = rng.choice([b"<![CDATA[", b"<![CDATA[x]]>", b"]]>", b"<?xml ?>", b"<!DOCTYPE x>"])
        times = rng.choice([1, 1000, 5_000])
        return insert(rng, data, piece * times, f"cdata {piece!r}×{times}")

    @staticmethod
    def raw_text(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        tag = rng.choice(
            [
                b"<script>",
                b"<style>",
                b"<title>",
                b"<textarea>",
                b"<plaintext>",
                b"<xmp>",
                b"<noscript>",
            ]
        )
        return insert(rng, data, tag, f"unterminated {tag!r}")

    @staticmethod
    def entities(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        piece = rng.choice(
            [b"&amp;", b"&#0;", b"&#xD800;", b"&#99999999;", b"&unknown;", b"&#x110000;", b"&"]
        )
        times = rng.choice([1, 100, 3_000])
        return insert(rng, data, piece * times, f"entity {piece!r}×{times}")

    @staticmethod
    def long_word(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        size = rng.choice([5_000, 20_000])
        at = _inside(data, b"<main", rng)
        return data[:at] + b"<p>" + b"w" * size + b"</p>" + data[at:], f"word×{size}"

    @staticmethod
    def emptied(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        shape = rng.choice(
            [b"", b" \n\t ", b"<html></html>", b"<title>only a title</title>", b"\x00"]
        )
        return shape, f"emptied to {shape!r}"


def _etag_garbage(rng: random.Random) -> bytes:
    """CR/LF-free bytes: visible ASCII, obs-text (0x80-0xFF), a space or a tab inside."""
    alphabet = [*range(0x21, 0x7F), *range(0x80, 0x100), 0x20, 0x09]
    inner = bytes(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 5, 40, 300])))
    return rng.choice([b'"%s"', b'W/"%s"', b"%s"]) % inner


ETAGS = [
    b'"\xe9t\xe9"',  # the ETag: obs-text, latin-1 "été"
    b'"\xc3\xa9t\xc3\xa9"',  # the same word in UTF-8 bytes
    b'W/"weak"',
    b'""',
    b'W/""',
    b"unquoted",
    b'"a,b"',
    b'"a", "b"',
    b'"with space"',
    b'"\x01\x7f"',
    b'  "padded"  ',
    b'"tab\there"',
    b'"' + b"x" * 8000 + b'"',
    b"*",
    b'"\\"',
    b'"\x80"',
    b'"\xff\xfe"',
    b"\x00",
    b'"\x0b"',
]
LAST_MODIFIED = [
    b"Mon, 01 Jan 0001 00:00:00 GMT",
    b"Fri, 31 Dec 9999 23:59:59 GMT",
    b"Sunday, 06-Nov-94 08:49:37 GMT",
    b"Sun Nov  6 08:49:37 1994",
    b"Thu, 01 Jan 1970 00:00:00 GMT",
    b"Thu, \xc2\xb2\xc2\xb3 Jan 2026 00:00:00 GMT",
    b"Thu, 01 Jan 2026 00:00:00 \xff",
    b"yesterday",
    b"-1",
    b"0",
    b"1700000000",
    b"Fri, 32 Dec 2026 25:61:61 GMT",
    b"Tue, 29 Feb 2100 00:00:00 GMT",
    b"Fri, 31 Dec 99999 23:59:59 GMT",
    b"",
]


def _echoed(values: list[bytes]) -> frozenset[bytes]:
    """What a client sends back for these header values: each one stripped, and the
    non-empty ones joined with ", " (repeated fields, RFC 9110 §5.3; an empty field adds no
    element, §5.6.1)."""
    stripped = [v.strip(b" \t") for v in values]
    return frozenset([*stripped, b", ".join(v for v in stripped if v)])


class Validators(Mutator):
    """``ETag`` and ``Last-Modified`` as servers get them wrong: obs-text bytes (the issue's
    ``"\\xe9t\\xe9"``), weak, empty, unquoted, padded, 8 KB long, repeated, with control
    bytes (and CR/LF-free garbage drawn byte by byte); dates in year 1, 9999 and 99999,
    obsolete formats, non-ASCII digits. The origin answers 304 only to the exact bytes a
    client should send back, so the second run proves validators are echoed byte for byte."""

    name = "validators"

    def case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        headers: list[tuple[bytes, bytes]] = []
        etags: list[bytes] = []
        dates: list[bytes] = []
        for _ in range(rng.choice([1, 1, 1, 2])):
            etags.append(rng.choice(ETAGS) if rng.random() < 0.6 else _etag_garbage(rng))
        if rng.random() < 0.5:
            dates.append(
                rng.choice(LAST_MODIFIED)
                if rng.random() < 0.7
                else formatdate(rng.randrange(0, 2**33), usegmt=True).encode()
            )
        if rng.random() < 0.15:
            etags = []
        headers += [(b"ETag", e) for e in etags] + [(b"Last-Modified", d) for d in dates]
        if rng.random() < 0.1:  # the name's case should not matter either
            headers = [(name.upper(), value) for name, value in headers]
        path = f"{where.prefix}/page"
        matches = (_echoed(etags) if etags else frozenset()) | (
            _echoed(dates) if dates else frozenset()
        )
        answer = text_page(f"{case_id}\n\n{PROSE}", *headers)
        answer = Answer(answer.status, answer.headers, answer.body, matches)
        return Case(case_id, self.name, path, where.port, {path: answer}, short(headers, 200))


RETRY_AFTER = [
    b"\xb2",  # the "²": one obs-text byte, latin-1 text "²", which str.isdigit() takes
    b"\xc2\xb2",  # "²" in UTF-8 bytes (latin-1 text "Â²")
    "١٢".encode(),
    b"9" * 40,
    b"-1",
    b"1.5",
    b"1e3",
    b"0",
    b"+5",
    b"0x10",
    b"1, 2",
    b"inf",
    b"nan",
    b"",
    b"   ",
    b"Fri, 31 Dec 9999 23:59:59 GMT",
    b"Mon, 01 Jan 0001 00:00:00 GMT",
    b"Sunday, 06-Nov-94 08:49:37 GMT",
    b"Sun Nov  6 08:49:37 1994",
    b"Thu, 01 Jan 1970 00:00:00 +0000",
    b"Thu, 01 Jan 2126 00:00:00 -2359",
    b"Fri, 32 Dec 2026 25:61:61 GMT",
    b"Fri, 31 Dec 99999 23:59:59 GMT",
    b"Tue, 29 Feb 2100 00:00:00 GMT",
    b"\x01",
    b"1\x80",
    b"\xff\xfe",
    b"1" * 5000,
]


class RetryAfter(Mutator):
    """``Retry-After`` on 429 and 503 (each case on a host of its own, since a pause stops a
    whole host): non-ASCII digits (the issue's ``²``), 40-digit numbers, negatives, floats,
    HTTP-dates in year 1 and 9999, obsolete date formats, impossible dates, obs-text,
    garbage; sometimes with an exhausted ``X-RateLimit`` budget whose reset is as odd. A
    second page on the same host shows what the pause did to the rest of the host's work."""

    name = "retry-after"

    def case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        status = rng.choice([429, 503])
        value = rng.choice(RETRY_AFTER) if rng.random() < 0.7 else self.drawn(rng)
        headers = [(b"Content-Type", b"text/plain"), (b"Retry-After", value)]
        if rng.random() < 0.3:
            reset = rng.choice(RETRY_AFTER + [b"30", b"1e308", b"-1e308", b"1" * 400])
            headers += [
                (b"X-RateLimit-Remaining", rng.choice([b"0", b" 0 ", b"-0", b"\xb2"])),
                (b"X-RateLimit-Reset", reset),
            ]
        limited, after = f"{where.prefix}/limited", f"{where.prefix}/after"
        answers = {
            limited: Answer(status, tuple(headers), b"slow down"),
            after: text_page(f"{case_id}\n\n{PROSE}"),
        }
        return Case(
            case_id,
            self.name,
            limited,
            where.port,
            answers,
            f"{status} {short(headers, 200)}",
            {"also": after},
        )

    @staticmethod
    def drawn(rng: random.Random) -> bytes:
        kind = rng.random()
        if kind < 0.4:
            return str(rng.choice([0, 1, 2, 59, 3600, 86_400, 10**9, 10**20])).encode()
        if kind < 0.7:
            return formatdate(rng.randrange(0, 2**35), usegmt=True).encode()  # to year 3058
        return bytes(
            rng.choice([*range(0x20, 0x7F), *range(0x80, 0x100)])
            for _ in range(rng.randrange(1, 30))
        )


CONTENT_TYPES = [
    b"text/html",
    b"TEXT/HTML",
    b"application/xhtml+xml",
    b"text/plain",
    b"text/markdown",
    b"text/x-markdown",
    b"text/xml",
    b"application/xml",
    b"application/json",
    b"image/png",
    b"application/octet-stream",
    b"application/pdf",
    b"video/mp4",
    b"*/*",
    b"",
    b"text",
    b"html",
    b"text/html\x7f",
    b"text/\xffhtml",
    b"text/html\x01",
    b"multipart/mixed",
]
CONTENT_PARAMETERS = [
    b"",
    b"; charset=utf-8",
    b"; charset=UTF-16",
    b'; charset="utf-8"',
    b"; charset=",
    b"; charset=bogus-xyz",
    b"; charset=utf-8; charset=latin1",
    b";;;",
    b"; charset=x-user-defined",
    b"; charset=utf-7",
    b"; charset=\xe9",
    b"; boundary=---",
    b" ; charset = utf-8 ",
    b"; charset=iso-2022-jp",
    b"; charset=utf-32",
    b"; charset=" + b"a" * 500,
    b"; charset='",
]


class ContentType(Mutator):
    """``Content-Type`` lies and oddities on a real page: binary types on HTML, HTML types on
    binary bytes, unknown, empty, absent or repeated headers, charsets that do not exist,
    that contradict the body (UTF-16 declared on UTF-8 bytes and the reverse), that are
    quoted, repeated, 500 characters long or not ASCII."""

    name = "content-type"

    def case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        value = rng.choice(CONTENT_TYPES) + rng.choice(CONTENT_PARAMETERS)
        body = fixture(rng.choice(HTML_FIXTURES[:3]))
        shape = rng.random()
        if shape < 0.15:
            body, what = (
                body.decode("utf-8").encode(rng.choice(["utf-16", "utf-32"])),
                "utf-16/32 body",
            )
        elif shape < 0.25:
            body, what = bytes(rng.randrange(256) for _ in range(2000)), "random bytes"
        else:
            what = "utf-8 page"
        headers: list[tuple[bytes, bytes]] = []
        layout = rng.random()
        if layout < 0.1:
            pass  # no Content-Type at all
        elif layout < 0.2:
            headers = [(b"Content-Type", value), (b"Content-Type", rng.choice(CONTENT_TYPES))]
        else:
            headers = [(b"Content-Type", value)]
        path = f"{where.prefix}/page"
        return Case(
            case_id,
            self.name,
            path,
            where.port,
            {path: Answer(200, tuple(headers), body)},
            f"{what}, {short(headers)}",
        )


def _raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-15)
    return compressor.compress(data) + compressor.flush()


class ContentEncoding(Mutator):
    """``Content-Encoding`` truths and lies: gzip, deflate (zlib and raw) and double gzip
    as declared; the same names on plain bytes; br, zstd, compress, unknown and malformed
    names; truncated, bit-flipped and over-long gzip streams; a gzip bomb past
    ``max_body_bytes``."""

    name = "content-encoding"

    def case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        plain = f"{case_id}\n\n{PROSE}\n".encode()
        gzipped = gzip.compress(plain, mtime=0)
        shapes: list[tuple[bytes, bytes, str]] = [
            (b"gzip", plain, "lie"),
            (b"gzip", gzipped, "truth"),
            (b"GZIP", gzipped, "truth, upper case"),
            (b"x-gzip", gzipped, "truth, x-gzip"),
            (b"deflate", plain, "lie"),
            (b"deflate", zlib.compress(plain), "truth (zlib)"),
            (b"deflate", _raw_deflate(plain), "truth (raw deflate)"),
            (b"br", plain, "lie (or unsupported)"),
            (b"zstd", plain, "lie (or unsupported)"),
            (b"compress", plain, "unsupported"),
            (b"x-unknown", plain, "unknown"),
            (b"identity", plain, "identity"),
            (b"gzip, gzip", gzip.compress(gzipped, mtime=0), "truth, twice"),
            (b"gzip, gzip", gzipped, "lie: once"),
            (b"gzip", gzipped[: rng.randrange(1, len(gzipped))], "truncated"),
            (b"gzip", gzipped + b"garbage" * rng.choice([1, 100]), "trailing garbage"),
            (b"gzip", flip(rng, gzipped)[0], "flipped"),
            (b"gzip", b"", "empty body"),
            (b"gzip", gzip.compress(b" " * 3_000_000, mtime=0), "bomb: 3 MB of spaces"),
            (b",", plain, "malformed"),
            (b"gzip;q=1", gzipped, "with a parameter"),
            (b"\xff", plain, "obs-text"),
            (b"chunked", plain, "a transfer coding"),
        ]
        encoding, body, what = rng.choice(shapes)
        headers = ((b"Content-Type", b"text/plain; charset=utf-8"), (b"Content-Encoding", encoding))
        path = f"{where.prefix}/page"
        return Case(
            case_id,
            self.name,
            path,
            where.port,
            {path: Answer(200, headers, body)},
            f"Content-Encoding {encoding!r}: {what} ({len(body)} bytes)",
        )


class Location(Mutator):
    """``Location`` on 301/308 (followed) and 302/303/307 (not followed for pages): relative,
    dot segments, protocol-relative, other loopback names, non-HTTP schemes, spaces, tabs and
    control bytes, raw UTF-8 and latin-1 bytes, backslashes, bad ports, IPv6 literals, user
    info, 70,000 characters, loops, self-loops and chains past ``max_redirects``. The origin
    serves the intended target, so a usable Location moves the page and the rest end it with
    a reason."""

    name = "location"

    def case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        path = where.prefix
        target = f"{where.prefix}/target"
        host = where.base.split("//", 1)[1]
        port = host.rsplit(":", 1)[1]
        answers: dict[str, Answer] = {target: text_page(f"{case_id} target\n\n{PROSE}")}
        forms = [
            target,
            f"{where.base}{target}",
            f"//{host}{target}",
            f"//localhost:{port}{target}",
            f"http://localhost:{port}{target}",
            f"HTTP://{host}{target}",
            f"http:{target}",
            f"http:/{target}",
            "target",
            "./target",
            f"{where.prefix}/../{where.prefix.strip('/')}/target",
            "",
            ".",
            "..",
            "#frag",
            "?q=1",
            f"{target}#frag",
            f"{target}?a=1&a=2",
            "ftp://127.0.0.1/x",
            "javascript:alert(1)",
            "mailto:a@example.invalid",
            "file:///etc/passwd",
            "data:text/html,hi",
            f"ws://{host}{target}",
            f"gopher://{host}/",
            f"https://{host}{target}",
            "http://127.0.0.1:0/x",
            "http://127.0.0.1:99999/x",
            f"http://[::1]:{port}{target}",
            "http://[::1/x",
            f"http://user:pw@{host}{target}",
            f"http://0x7f.0.0.1:{port}{target}",
            "http://",
            "http:///x",
            f"\\\\{host}\\x",
            f"/\\{host}{target}",
            f" {target} ",
            f"\t{target}",
            f"{target}\x01",
            f"{target} x",
            f"{where.base}{target}?" + "a" * rng.choice([2_000, 70_000]),
        ]
        value = rng.choice(forms).encode("utf-8")
        shape = rng.random()
        if shape < 0.1:  # a loop: A -> B -> A
            other = f"{where.prefix}/b"
            value = other.encode()
            answers[other] = Answer(301, ((b"Location", path.encode()),))
            what = "loop"
        elif shape < 0.15:
            value, what = path.encode(), "self-loop"
        elif shape < 0.22:  # a chain longer than max_redirects
            value, what = f"{where.prefix}/hop/1".encode(), "chain of 12"
            for hop in range(1, 12):
                answers[f"{where.prefix}/hop/{hop}"] = Answer(
                    301, ((b"Location", f"{where.prefix}/hop/{hop + 1}".encode()),)
                )
            answers[f"{where.prefix}/hop/12"] = answers[target]
        elif shape < 0.35:
            value, what = (
                rng.choice(
                    [
                        b"/\xc3\xbcn\xc3\xafcode",
                        b"/\xfcn\xefcode",
                        b"/%00",
                        b"/%zz",
                        b"/%2e%2e/%2e%2e/x",
                        b"/\xff\xfe",
                    ]
                ),
                "raw bytes",
            )
        elif shape < 0.5:
            value, label = apply(rng, value, [flip, controls, self.spaces, self.case_flip], most=2)
            what = f"mutated ({label})"
        else:
            what = "form"
        status = rng.choice([301, 301, 308, 308, 302, 303, 307])
        answers[path] = Answer(
            status, ((b"Location", value), (b"Content-Type", b"text/plain")), b"moved"
        )
        return Case(
            case_id, self.name, path, where.port, answers, f"{status} {what}: {short(value)}"
        )

    @staticmethod
    def spaces(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        return insert(rng, data, rng.choice([b" ", b"\t", b"%20", b"  "]), "space")

    @staticmethod
    def case_flip(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        return data.swapcase(), "swapcase"


# -- discovery documents --------------------------------------------------------------------

XML = (b"Content-Type", b"application/xml")


def served(body: bytes, *headers: tuple[bytes, bytes], status: int = 200) -> Answer:
    """A discovery document with a strong ETag (so a second run can revalidate it)."""
    etag = b'"%08x"' % (zlib.crc32(body) & 0xFFFFFFFF)
    return Answer(status, (*headers, (b"ETag", etag)), body, frozenset({etag}))


class XmlShapes:
    """Hostile shapes of an XML discovery document (sitemaps and feeds share them)."""

    @staticmethod
    def entity_bomb(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        doctype = rng.choice(
            [
                b'<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>',
                b'<!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>',
                b'<!DOCTYPE x SYSTEM "http://127.0.0.1:9/x.dtd">',
                b"<!doctype x [<!entity a 'b'>]>",
            ]
        )
        end = data.find(b"?>")
        at = end + 2 if end >= 0 else 0
        return data[:at] + doctype + data[at:], f"doctype {short(doctype, 40)}"

    @staticmethod
    def stray(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        return insert(
            rng, data, rng.choice([b"&", b"<", b"]]>", b"&#0;", b"&bogus;", b"</x>"]), "stray"
        )

    @staticmethod
    def namespace(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        new = rng.choice(
            [
                b"",
                b'xmlns="http://www.sitemaps.org/schemas/sitemap/0.8"',
                b'xmlns="urn:x"',
                b'xmlns:s="http://www.sitemaps.org/schemas/sitemap/0.9"',
            ]
        )
        return re.sub(rb'xmlns="[^"]*"', new, data, count=1), f"namespace {new!r}"

    @staticmethod
    def root(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        old = re.search(rb"<(urlset|sitemapindex|rss|feed|rdf:RDF)\b", data)
        if not old:
            return data, "root unchanged"
        new = rng.choice([b"html", b"urlsetx", b"sitemapindex", b"urlset", b"rss", b"feed"])
        name = old.group(1)
        return data.replace(b"<" + name, b"<" + new, 1).replace(
            b"</" + name + b">", b"</" + new + b">"
        ), f"root <{new.decode()}>"

    @staticmethod
    def declaration(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        new = rng.choice(
            [
                b'<?xml version="1.0" encoding="UTF-16"?>',
                b'<?xml version="1.0" encoding="bogus"?>',
                b'<?xml version="2.0"?>',
                b"",
                b'<?xml version="1.0" encoding="ISO-8859-1"?>',
                b"  \n<?xml version='1.0'?>",
            ]
        )
        return re.sub(
            rb"<\?xml[^>]*\?>", new, data, count=1
        ) if b"<?xml" in data else new + data, f"declaration {new!r}"

    @staticmethod
    def nesting(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        depth = rng.choice([300, 3000])
        return insert(rng, data, b"<x>" * depth + b"</x>" * depth, f"nest×{depth}")

    @staticmethod
    def comments(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        piece = rng.choice([b"<!-- c -->", b"<?pi x?>", b"<![CDATA[x]]>", b"<!--"])
        times = rng.choice([1, 10_000])
        return insert(rng, data, piece * times, f"{piece!r}×{times}")

    @staticmethod
    def emptied(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        shape = rng.choice(
            [
                b"",
                b"  \n",
                b"<?xml version='1.0'?>",
                b"<html><body>Not found</body></html>",
                b'{"urls": []}',
                b"\x00" * 10,
            ]
        )
        return shape, f"emptied to {shape!r}"


def _loc_values(rng: random.Random, data: bytes, tag: bytes) -> tuple[bytes, str]:
    """Replace one ``<tag>`` value (loc, link, lastmod…) with something hostile."""
    found = list(re.finditer(rb"<" + tag + rb"[^>]*>([^<]*)</" + tag + rb">", data))
    if not found:
        return data, f"no <{tag.decode()}>"
    match = rng.choice(found)
    value = match.group(1)
    new = rng.choice(
        [
            b"",
            b"   ",
            value + b"\n\t",
            b"\n" + value + b"\n",
            b"<![CDATA[" + value + b"]]>",
            b"/relative/path",
            b"javascript:alert(1)",
            b"ftp://127.0.0.1/x",
            value.replace(b"http", b"HTTP", 1),
            value + b"\xff\xfe",
            value + b"#frag",
            value + b"?utm_source=x&b=2&a=1",
            value * 50,
            b"x" * 100_000,
            b"http://[::1",
            b"http://127.0.0.1:99999/x",
            b"\xc2\xb2\xc2\xb3",
            b"9" * 30,
            b"99999-12-31T23:59:59Z",
            b"2026-13-45",
            b"-0001-01-01",
            b"\xe9",
        ]
    )
    start, end = match.span(1)
    return data[:start] + new + data[end:], f"<{tag.decode()}> {short(new, 60)}"


class SitemapXml(Mutator):
    """Real ``<urlset>`` sitemaps (Docusaurus, Astro), broken: truncated mid-element, bytes
    flipped, stray ``&``, entity declarations (refused), wrong or missing namespaces, another
    root element, a lying XML declaration, byte order marks, UTF-16, nesting past lxml's
    limit, comment floods, ``<loc>`` values that are empty, relative, not HTTP, 100,000
    characters, invalid UTF-8, ``<lastmod>`` in year 99999. The listing must keep what it can
    read and say why it is incomplete."""

    name = "sitemap"
    SOURCES = ["doris-sitemap.xml", "astro-sitemap-0.xml"]

    def document(self, rng: random.Random, where: Where) -> tuple[bytes, str]:
        source = rng.choice(self.SOURCES)
        data = rehost(fixture(source), where.base, keep_every=8)
        shapes = XmlShapes
        strategies: list[Strategy] = [
            truncate,
            flip,
            invalid_utf8,
            nul_bytes,
            duplicate_span,
            bom,
            utf16,
            line_ends,
            shapes.entity_bomb,
            shapes.stray,
            shapes.namespace,
            shapes.root,
            shapes.declaration,
            shapes.nesting,
            shapes.comments,
            shapes.emptied,
            lambda r, d: _loc_values(r, d, b"loc"),
            lambda r, d: _loc_values(r, d, b"lastmod"),
        ]
        data, label = apply(rng, data, strategies, most=2)
        return data, f"{source}: {label}"

    def case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        data, detail = self.document(rng, where)
        path = f"{where.prefix}/sitemap.xml"
        return Case(case_id, self.name, path, where.port, {path: served(data, XML)}, detail)


class GzipSitemap(Mutator):
    """``.xml.gz`` sitemaps: gzip of a real (sometimes already broken) sitemap, then broken
    as gzip: flipped compressed bytes, truncated streams, trailing garbage, several members,
    a wrong magic number, an empty member, a bomb past the 50 MB limit, plain XML under a
    ``.gz`` name, and gzip declared again as ``Content-Encoding``."""

    name = "gzip-sitemap"

    def case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        if rng.random() < 0.5:
            xml, detail = SitemapXml().document(rng, where)
        else:
            source = rng.choice(SitemapXml.SOURCES)
            xml, detail = rehost(fixture(source), where.base, keep_every=8), source
        packed = gzip.compress(xml, mtime=0)
        headers: list[tuple[bytes, bytes]] = [
            (
                b"Content-Type",
                rng.choice(
                    [b"application/gzip", b"application/x-gzip", b"application/octet-stream"]
                ),
            )
        ]
        shape = rng.choice(
            [
                "whole",
                "flip",
                "truncate",
                "garbage",
                "members",
                "magic",
                "empty member",
                "plain",
                "content-encoding",
                "content-encoding lie",
                "bomb",
            ]
        )
        if shape == "flip":
            packed, label = flip(rng, packed)
            shape = label
        elif shape == "truncate":
            packed = packed[: rng.randrange(len(packed))]
        elif shape == "garbage":
            packed += rng.choice([b"\x00" * 10, b"garbage", b"\x1f\x8b"])
        elif shape == "members":
            packed += gzip.compress(
                rehost(fixture("astro-sitemap-0.xml"), where.base, keep_every=8), mtime=0
            )
        elif shape == "magic":
            packed = b"\x1f\x8c" + packed[2:]
        elif shape == "empty member":
            packed = gzip.compress(b"", mtime=0) + packed
        elif shape == "plain":
            packed = xml
        elif shape == "content-encoding":
            headers.append((b"Content-Encoding", b"gzip"))
            packed = gzip.compress(packed, mtime=0)
        elif shape == "content-encoding lie":
            headers.append((b"Content-Encoding", b"gzip"))
        elif shape == "bomb":
            packed = _gzip_bomb()
        path = f"{where.prefix}/sitemap.xml.gz"
        return Case(
            case_id,
            self.name,
            path,
            where.port,
            {path: served(packed, *headers)},
            f"{detail}; gzip {shape}",
        )


_BOMB: list[bytes] = []


def _gzip_bomb() -> bytes:
    """60 MB of zeros gzipped (about 60 KB): past the 50 MB a sitemap may decompress to."""
    if not _BOMB:
        compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
        chunk = b"\x00" * 1_000_000
        _BOMB.append(b"".join(compressor.compress(chunk) for _ in range(60)) + compressor.flush())
    return _BOMB[0]


class TextSitemap(Mutator):
    """The Rust documentation's text sitemap: CRLF, CR and Unicode line ends, a byte order
    mark, NUL bytes, invalid UTF-8, very long lines, lines that are not URLs or are relative,
    HTTPS to a plain-HTTP port, a leading ``<`` (then it is read as XML), thousands of
    duplicate lines."""

    name = "text-sitemap"

    def case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        data = rehost(fixture("rust-sitemap.txt"), where.base, keep_every=2)
        extra: list[Strategy] = [
            bom,
            line_ends,
            self.lines,
            self.leading,
            truncate,
            flip,
            invalid_utf8,
            nul_bytes,
        ]
        data, label = apply(rng, data, extra, most=3)
        path = f"{where.prefix}/sitemap.txt"
        return Case(
            case_id,
            self.name,
            path,
            where.port,
            {path: served(data, (b"Content-Type", b"text/plain"))},
            f"rust-sitemap.txt: {label}",
        )

    @staticmethod
    def lines(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        line = rng.choice(
            [
                b"not a url",
                b"/relative/path",
                b"https://127.0.0.1:9/x",
                b"HTTP://127.0.0.1:9/y",
                b"http://" + b"a" * 5000,
                b"\thttp://127.0.0.1:9/tab",
                b"#comment",
                b"http://[::1",
                data.split(b"\n")[0] * 1 + b"?dup",
            ]
        )
        times = rng.choice([1, 10, 3000])
        return data + (line + b"\n") * times, f"{times}× {short(line, 50)}"

    @staticmethod
    def leading(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        lead = rng.choice([b"<", b" <", b"\xef\xbb\xbf<"])
        return lead + data, f"leading {lead!r}"


class SitemapIndex(Mutator):
    """A real Astro ``<sitemapindex>`` and its real child, broken: the index listing itself
    under dozens of query-string variants (the issue's self-listing index), a ``.xml.gz``
    child that is not gzip, children answering 404 or 500, redirecting, nested past the depth
    limit, cycling, a hundred children (past ``max_sitemaps``), duplicates, relative and
    non-HTTP child URLs, children on a closed port; and the index bytes themselves
    truncated or flipped."""

    name = "sitemap-index"

    def case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        index_path = f"{where.prefix}/sitemap-index.xml"
        child = rehost(fixture("astro-sitemap-0.xml"), where.base, keep_every=6)
        answers: dict[str, Answer] = {f"{where.prefix}/sitemap-0.xml": served(child, XML)}
        index = rehost(fixture("astro-sitemap-index.xml"), where.base + where.prefix)
        me = f"{where.base}{index_path}"

        def children(urls: list[str]) -> bytes:
            entries = "".join(f"<sitemap><loc>{u}</loc></sitemap>" for u in urls)
            return index.replace(b"</sitemapindex>", entries.encode() + b"</sitemapindex>")

        shape = rng.choice(
            [
                "self",
                "not gzip",
                "not gzip, garbage",
                "404",
                "500",
                "redirect",
                "deep",
                "cycle",
                "many",
                "duplicates",
                "relative",
                "schemes",
                "closed port",
                "truncate",
                "flip",
                "urlset root",
            ]
        )
        if shape == "self":
            variants = rng.choice([5, 50, 200])
            index = children([f"{me}?v={i}" for i in range(variants)])
            shape = f"self-listing under {variants} query strings"
        elif shape.startswith("not gzip"):
            gz = f"{where.prefix}/sitemap-1.xml.gz"
            answers[gz] = served(
                child if shape == "not gzip" else b"<html>oops</html>",
                (b"Content-Type", b"application/gzip"),
            )
            index = children([where.base + gz])
        elif shape in ("404", "500"):
            index = children([f"{where.base}{where.prefix}/missing.xml"])
            answers[f"{where.prefix}/missing.xml"] = Answer(
                int(shape), ((b"Content-Type", b"text/plain"),), b"no"
            )
        elif shape == "redirect":
            answers[f"{where.prefix}/moved.xml"] = Answer(
                rng.choice([301, 302, 307, 308]),
                ((b"Location", f"{where.prefix}/sitemap-0.xml".encode()),),
            )
            index = children([f"{where.base}{where.prefix}/moved.xml"])
        elif shape in ("deep", "cycle"):
            levels = 6 if shape == "deep" else 2
            for level in range(levels):
                nxt = (level + 1) % levels if shape == "cycle" else level + 1
                answers[f"{where.prefix}/level-{level}.xml"] = served(
                    children([f"{where.base}{where.prefix}/level-{nxt}.xml"]), XML
                )
            index = children([f"{where.base}{where.prefix}/level-0.xml"])
        elif shape == "many":
            index = children(
                [f"{where.base}{where.prefix}/sitemap-0.xml?page={i}" for i in range(100)]
            )
        elif shape == "duplicates":
            index = children([f"{where.base}{where.prefix}/sitemap-0.xml"] * 50)
        elif shape == "relative":
            index = children(
                ["sitemap-0.xml", f"{where.prefix}/sitemap-0.xml", "//127.0.0.1:9/x.xml"]
            )
        elif shape == "schemes":
            index = children(
                [
                    "javascript:alert(1)",
                    "file:///etc/passwd",
                    "ftp://127.0.0.1/x.xml",
                    "",
                    "http://[::1",
                ]
            )
        elif shape == "closed port":
            index = children(["http://127.0.0.1:9/sitemap.xml", "http://127.0.0.1:1/s.xml"])
        elif shape == "truncate":
            index, shape = truncate(rng, index)
        elif shape == "flip":
            index, shape = flip(rng, index)
        elif shape == "urlset root":
            index = index.replace(b"sitemapindex", b"urlset")
        answers[index_path] = served(index, XML)
        return Case(
            case_id, self.name, index_path, where.port, answers, f"astro-sitemap-index.xml: {shape}"
        )


class Feed(Mutator):
    """Real feeds (Hugo RSS 2.0, jekyll-feed Atom), broken: truncated, bytes flipped, entity
    declarations, a lying encoding, CDATA floods, entries without links or with relative,
    ``javascript:`` or 100,000-character links, 500 duplicate entries, dates in year 99999
    or written in non-ASCII digits, NUL bytes, HTML or JSON instead of a feed."""

    name = "feed"
    SOURCES = ["codyze-rss.xml", "simply-jekyll-atom.xml"]

    def case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        source = rng.choice(self.SOURCES)
        data = rehost(fixture(source), where.base, keep_every=2)
        shapes = XmlShapes
        strategies: list[Strategy] = [
            truncate,
            flip,
            invalid_utf8,
            nul_bytes,
            bom,
            utf16,
            line_ends,
            shapes.entity_bomb,
            shapes.stray,
            shapes.root,
            shapes.declaration,
            shapes.nesting,
            shapes.comments,
            shapes.emptied,
            self.entries,
            lambda r, d: _loc_values(r, d, b"link"),
            lambda r, d: _loc_values(r, d, b"pubDate"),
            lambda r, d: _loc_values(r, d, b"updated"),
            lambda r, d: _loc_values(r, d, b"guid"),
            self.href,
        ]
        data, label = apply(rng, data, strategies, most=2)
        content_type = rng.choice(
            [b"application/rss+xml", b"application/atom+xml", b"text/xml", b"text/html"]
        )
        path = f"{where.prefix}/feed.xml"
        return Case(
            case_id,
            self.name,
            path,
            where.port,
            {path: served(data, (b"Content-Type", content_type))},
            f"{source}: {label}",
        )

    @staticmethod
    def entries(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        found = re.search(rb"<(item|entry)>.*?</\1>", data, re.S)
        if not found:
            return data, "no entry"
        times = rng.choice([50, 500])
        return data[: found.start()] + found.group(0) * times + data[
            found.start() :
        ], f"entry×{times}"

    @staticmethod
    def href(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        new = rng.choice(
            [b"", b"/relative", b"javascript:x()", b"x" * 100_000, b"http://[::1", b"\xff"]
        )
        return re.sub(
            rb'(<link href=")[^"]*', lambda m: m.group(1) + new, data, count=2
        ), f"href {short(new, 40)}"


# Page paths the Rust robots.txt rules decide on (Disallow: /1., /0., /book/first-edition/, …).
ROBOTS_PAGES = [
    "/1.0/std/",
    "/0.12.0/book/",
    "/book/first-edition/README.html",
    "/stable/book/second-edition/ch01.html",
    "/nightly/book/second-edition/x",
    "/book/ch01-00.html",
    "/stable/std/index.html",
    "/2.0/std/",
    "/private/x",
    "/keep/y",
]


class Robots(Mutator):
    """The Rust documentation's robots.txt (each case on a host of its own): a UTF-8 byte
    order mark (the issue's), CRLF and CR line ends, upper-case directives, a group for
    ragsync's own product token, tabs and leading spaces, invalid UTF-8, NUL bytes, 100 KB
    lines, truncation, flipped bytes, wildcard and ``$`` rules, percent-encoding, HTML
    instead of rules; and answers that are not 200: 4xx (no restriction), 5xx and 204
    (unreachable: nothing may be fetched), a redirect, gzip as declared and as a lie."""

    name = "robots"

    def case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        for _ in range(20):  # a hostile Crawl-delay is a case of its own (test_fuzz.py)
            case = self._case(rng, where, case_id)
            if case.facts["crawl_delay"] <= 0.2:
                return case
        raise AssertionError(f"{case_id}: no robots.txt without a long Crawl-delay in 20 draws")

    def _case(self, rng: random.Random, where: Where, case_id: str) -> Case:
        from protego import Protego

        from ragsync.robots import decode_robots

        data = rehost(fixture("rust-robots.txt"), where.base)
        strategies: list[Strategy] = [
            bom,
            line_ends,
            self.upper,
            self.own_group,
            self.indent,
            invalid_utf8,
            nul_bytes,
            self.long_line,
            truncate,
            flip,
            self.wildcards,
            self.html,
            duplicate_span,
        ]
        data, label = apply(rng, data, strategies, most=3)
        if rng.random() < 0.1:  # the robots.txt: a BOM, then the real file
            data, label = b"\xef\xbb\xbf" + fixture("rust-robots.txt"), "BOM + rust-robots.txt"
        headers: list[tuple[bytes, bytes]] = [
            (
                b"Content-Type",
                rng.choice([b"text/plain", b"text/html", b"application/octet-stream"]),
            )
        ]
        status = rng.choice([200] * 12 + [404, 410, 401, 403, 429, 500, 503, 204, 301])
        answers: dict[str, Answer] = {}
        readable = data
        if status == 301:
            headers.append((b"Location", b"/robots-moved.txt"))
            answers["/robots-moved.txt"] = served(data, (b"Content-Type", b"text/plain"))
        elif status == 200 and rng.random() < 0.1:
            if rng.random() < 0.5:
                headers.append((b"Content-Encoding", b"gzip"))
                data, label = gzip.compress(data, mtime=0), label + ", gzip"
            else:
                headers.append((b"Content-Encoding", b"gzip"))
                label, status = label + ", gzip lie", -200  # a body that cannot be decoded
        answers["/robots.txt"] = served(data, *headers, status=abs(status))
        rules = Protego.parse(decode_robots(readable).removeprefix("\ufeff"))
        return Case(
            case_id,
            self.name,
            "/robots.txt",
            where.port,
            answers,
            f"{abs(status)}{' (undecodable)' if status < 0 else ''}: {label}",
            {"status": status, "rules": rules, "crawl_delay": rules.crawl_delay("ragsync") or 0.0},
        )

    @staticmethod
    def upper(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        return rng.choice([data.upper(), data.lower(), data.swapcase()]), "case"

    @staticmethod
    def own_group(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        rule = rng.choice(
            [b"Disallow: /", b"Allow: /", b"Disallow: /stable/", b"Disallow:", b"Allow: /1."]
        )
        # Groups named after other words of ragsync's User-Agent string ("pypi", "https")
        # are not ragsync's (test_fuzz.py::test_defect_robots_group_by_substring).
        agent = rng.choice(
            [b"ragsync", b"RAGSYNC", b"Ragsync-bot", b"googlebot", b"*", b"pypi", b"https"]
        )
        group = b"User-agent: " + agent + b"\n" + rule + b"\n\n"
        return (
            group + data if rng.random() < 0.5 else data + b"\n" + group
        ), f"group {agent!r}: {rule!r}"

    @staticmethod
    def indent(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        lead = rng.choice([b" ", b"\t", b"  \t"])
        return b"\n".join(lead + line for line in data.split(b"\n")), f"indent {lead!r}"

    @staticmethod
    def long_line(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        line = b"Disallow: /" + b"a" * rng.choice([1000, 100_000]) + b"\n"
        return insert(rng, data, line, f"line {len(line)}")

    @staticmethod
    def wildcards(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        rule = rng.choice(
            [
                b"Disallow: /*",
                b"Disallow: /*.html$",
                b"Allow: /book/$",
                b"Disallow: /%62ook/",
                b"Disallow: /stable/*/index",
                b"Disallow: *",
                b"Allow: /*?",
                b"Disallow: /$",
            ]
        )
        return data.replace(
            b"User-agent: *\n", b"User-agent: *\n" + rule + b"\n", 1
        ), f"rule {rule!r}"

    @staticmethod
    def html(rng: random.Random, data: bytes) -> tuple[bytes, str]:
        return b"<html><body><h1>Welcome</h1><p>Disallow: /</p></body></html>", "html instead"
