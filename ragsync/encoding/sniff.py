"""The order in which a document's encoding is looked for, and the fallback when nothing
names it or what names it lies (see ``ragsync.encoding``)."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Literal

from ragsync.encoding.decoders import BY_PYTHON_CODEC, decode, lookup
from ragsync.encoding.prescan import (
    PRESCAN_BYTES,
    UTF16,
    meta_prescan,
    utf16_xml_declaration,
    xml_declared_encoding,
    xml_declared_label,
)

Source = Literal["bom", "http", "meta", "xml", "default", "detected"]
_BOMS = ((b"\xef\xbb\xbf", "UTF-8"), (b"\xfe\xff", "UTF-16BE"), (b"\xff\xfe", "UTF-16LE"))
# Letters of scripts other than Latin; windows-1252 never decodes to one.
_OTHER_SCRIPT = re.compile(
    "[\u0370-\u1cff\u2e80-\ua6ff\ua800-\uab2f\uab70-\ud7ff\uf900-\ufaff\uff00-\uffef]"
)
_XML_ENCODING = re.compile(r"""(\A<\?xml[^>]*?\sencoding\s*=\s*["'])[^"']*(["'])""")


@dataclass(frozen=True)
class Decoded:
    """A document's text and where its encoding came from.

    Attributes:
        text: the text, byte-order mark dropped, each undecodable byte sequence U+FFFD.
        encoding: the Encoding Standard's name of the encoding (``"UTF-8"``,
            ``"windows-1252"``, ``"Shift_JIS"``, ``"gb18030"``, ``"UTF-16LE"``…).
        source: what named it: ``"bom"``; ``"http"`` (the ``Content-Type`` charset);
            ``"meta"`` (the HTML prescan); ``"xml"`` (an XML declaration); ``"default"``
            (UTF-8 or windows-1252); ``"detected"`` (charset_normalizer).
        replaced: how many U+FFFD of ``text`` stand for bytes ``encoding`` could not decode.
        doubt: why ``text`` may not be what the document's author wrote, None when nothing
            casts doubt on it: bytes replaced, a declaration passed over because it lies,
            an XML declaration (or a charset) naming an encoding no browser knows. A sitemap
            read with a doubt is incomplete (README "Deletion safety").
    """

    text: str
    encoding: str
    source: Source
    replaced: int = 0
    doubt: str | None = None


_NAMED_BY = {
    "bom": "byte-order mark",
    "http": "Content-Type charset",
    "meta": "<meta> declaration",
    "xml": "XML declaration",
    "default": "default",
    "detected": "detected encoding",
}


def bom_encoding(body: bytes) -> str | None:
    """The encoding a byte-order mark at the start of ``body`` names (the Encoding
    Standard's BOM sniff: UTF-8, UTF-16BE, UTF-16LE), or None.

    >>> bom_encoding(b"\\xff\\xfe<\\x00"), bom_encoding(b"<html>")
    ('UTF-16LE', None)
    """
    return next((encoding for mark, encoding in _BOMS if body.startswith(mark)), None)


def content_type_charset(content_type: str) -> str | None:
    """The encoding the ``charset`` parameter of a ``Content-Type`` value names (its first
    one, quotes dropped), or None when it has none or names none.

    >>> content_type_charset('text/html; charset="Shift_JIS"; charset=utf-8')
    'Shift_JIS'
    >>> content_type_charset("text/html; charset=bogus") is None
    True
    """
    return lookup(_charset_label(content_type) or "")


def _charset_label(content_type: str) -> str | None:
    for part in content_type.split(";")[1:]:
        name, _, value = part.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


def decode_html(body: bytes, content_type: str = "", *, partial: bool = False) -> Decoded:
    """The text of an HTML page: byte-order mark, ``Content-Type`` charset, prescan, fallback
    (see the package's docstring).

    Args:
        body: the page's bytes.
        content_type: its ``Content-Type`` value.
        partial: ``body`` is the start of the page (a sequence cut at its end is dropped).

    >>> decode_html("<meta charset=sjis><p>東京".encode("cp932")).text[-2:]
    '東京'
    """
    declared: list[tuple[str | None, Source]] = [
        (content_type_charset(content_type), "http"),
        (meta_prescan(body), "meta"),
    ]
    return _decode(body, declared, detect=True, final=not partial)


def decode_text(body: bytes, content_type: str = "") -> Decoded:
    """The text of a plain-text or Markdown body: byte-order mark, ``Content-Type`` charset,
    fallback (a ``<meta>`` in a text file declares nothing)."""
    return _decode(body, [(content_type_charset(content_type), "http")], detect=True)


def decode_xml(body: bytes, content_type: str = "") -> Decoded:
    """The text of an XML document, a sitemap or a feed: byte-order mark, ``Content-Type``
    charset (RFC 7303 §3), the XML declaration's ``encoding`` (a BOM-less UTF-16 document is
    known by its first ``<?x``, XML 1.0 Appendix F), UTF-8, windows-1252.

    >>> decode_xml('<?xml version="1.0" encoding="GB18030"?><a>中文</a>'.encode("gb18030")).text
    '<?xml version="1.0" encoding="GB18030"?><a>中文</a>'
    >>> decode_xml(b'<?xml version="1.0" encoding="bogus"?><a/>').doubt
    "its XML declaration names an encoding no browser knows: 'bogus'"
    """
    labels = [(_charset_label(content_type), "http"), (xml_declared_label(body), "xml")]
    label, source = next(((lb, src) for lb, src in labels if lb is not None), (None, "xml"))
    found = _decode(
        body,
        [
            (content_type_charset(content_type), "http"),
            (utf16_xml_declaration(body) or xml_declared_encoding(body), "xml"),
        ],
    )
    if found.doubt or found.source == "bom" or label is None or lookup(label) is not None:
        return found
    doubt = f"its {_NAMED_BY[source]} names an encoding no browser knows: {label!r}"
    return Decoded(found.text, found.encoding, found.source, found.replaced, doubt)


def utf8_xml(text: str) -> bytes:
    """The text of an XML document (:func:`decode_xml`) as UTF-8 for a parser that reads
    bytes (lxml, feedparser), the ``encoding`` of its XML declaration made UTF-8. From the
    document's own bytes, libxml2 would ignore the ``Content-Type``, read ``iso-8859-1`` as
    Latin-1 rather than windows-1252, and refuse Shift_JIS and GBK characters its tables
    lack (①, €).

    >>> utf8_xml(decode_xml(b'<?xml version="1.0" encoding="latin1"?><a>caf\\xe9</a>').text)
    b'<?xml version="1.0" encoding="UTF-8"?><a>caf\\xc3\\xa9</a>'
    """
    return _XML_ENCODING.sub(r"\g<1>UTF-8\g<2>", text, count=1).encode()


def _decode(
    body: bytes,
    declared: list[tuple[str | None, Source]],
    *,
    detect: bool = False,
    final: bool = True,
) -> Decoded:
    """The first of ``declared`` (encoding, source) that does not lie, else the fallback."""
    bom = bom_encoding(body)
    if bom is not None:
        return _read(body[2 if bom in UTF16 else 3 :], bom, "bom", final)
    doubt = None
    tried = set()
    for encoding, source in [*declared, ("UTF-8", "default")]:
        if encoding is None or encoding in tried:
            continue
        tried.add(encoding)
        if encoding == "replacement":  # a label browsers refuse to decode: nothing is read
            return Decoded(decode(body, encoding), encoding, source, 1 if body else 0, doubt)
        if encoding in UTF16 and b"\0" not in body[:PRESCAN_BYTES]:
            found = None
        else:
            found = _read(body, encoding, source, final)
        if found is not None and (not found.replaced or _mostly_decoded(found)):
            return Decoded(found.text, encoding, source, found.replaced, doubt or found.doubt)
        named = "" if source == "default" else f", as its {_NAMED_BY[source]} says"
        doubt = doubt or f"its bytes are not {encoding}{named}"
    detected = _detected(body, final) if detect else None
    if detected is not None:
        return Decoded(detected.text, detected.encoding, "detected", 0, doubt)
    text = decode(body, "windows-1252", final=final)
    return Decoded(text, "windows-1252", "default", 0, f"{doubt} (read as windows-1252)")


def _read(body: bytes, encoding: str, source: Source, final: bool) -> Decoded:
    """``body`` in ``encoding``; a doubt names the sequences it could not decode."""
    try:
        return Decoded(decode(body, encoding, strict=True, final=final), encoding, source)
    except UnicodeDecodeError:
        text = decode(body, encoding, final=final)
    replaced = text.count("\ufffd")
    are = "sequence is" if replaced == 1 else "sequences are"
    doubt = f"{replaced} byte {are} not {encoding} (read as U+FFFD)"
    return Decoded(text, encoding, source, replaced, doubt)


def _mostly_decoded(found: Decoded) -> bool:
    """Whether ``found`` decodes more of the characters beyond ASCII than it replaces: the
    declaration holds, a few stray bytes aside."""
    text = found.text
    beyond_ascii = len(text) - len(text.encode("ascii", "ignore")) - found.replaced
    return beyond_ascii > found.replaced


def _detected(body: bytes, final: bool) -> Decoded | None:
    """charset_normalizer's encoding for ``body`` when it is one of the Encoding Standard's,
    decodes the body and reads it as text in a script other than Latin."""
    from charset_normalizer import from_bytes

    best = from_bytes(body).best()
    if best is None:
        return None
    encoding = BY_PYTHON_CODEC.get(codecs.lookup(best.encoding).name)
    if encoding is None or encoding in UTF16:
        return None
    found = _read(body, encoding, "detected", final)
    return found if not found.replaced and _OTHER_SCRIPT.search(found.text) else None
