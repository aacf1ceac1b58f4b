"""The character encoding of a fetched document, and its text, found the way browsers find it
(README "Extraction", "Discovery"). Every caller that turns a body into text goes through here:
extraction, a crawl's link reading, ``<head>`` declarations, sitemaps and feeds.

Where the encoding comes from, first found first:

- an HTML page (the HTML Standard, "Determining the character encoding"): a byte-order mark;
  the ``Content-Type`` charset; the prescan of the first 1,024 bytes (``<meta charset>``,
  ``<meta http-equiv="Content-Type" content="…charset=…">``, an XML declaration); then the
  fallback;
- an XML document, a sitemap or a feed (RFC 7303 §3, XML 1.0 Appendix F): a byte-order mark;
  the ``Content-Type`` charset; the XML declaration's ``encoding``; UTF-8; windows-1252, the
  last resort of feed readers. A text sitemap has no declaration and is read the same way;
- plain text and Markdown: a byte-order mark; the ``Content-Type`` charset; the fallback.

The fallback is UTF-8 when the body is UTF-8; else the encoding charset_normalizer detects, when
the text it reads is in a script other than Latin (Cyrillic, Greek, Hebrew, Arabic, Thai, CJK,
Hangul, …): the HTML Standard lets a browser detect before its default, and the detector tells
scripts apart but confuses the Latin code pages (it reads French windows-1252 as cp1250 or
cp775); else windows-1252, the Standard's default for most locales.

A label is read as the Encoding Standard reads it (:func:`lookup`): ``iso-8859-1``, ``latin1``
and ``us-ascii`` are windows-1252, ``gb2312`` is GBK (decoded as gb18030), ``sjis`` and
``windows-31j`` are Shift_JIS, a ``<meta>`` that says UTF-16 means UTF-8, and an unknown label
is no declaration at all. Each encoding decodes as the Encoding Standard's decoder does
(:func:`decode`).

A byte-order mark is never second-guessed. A declaration that does not decode the body is
kept when it decodes more characters beyond ASCII than it cannot decode (a UTF-8 page with a
stray byte: the stray byte becomes U+FFFD, as a browser shows it); otherwise it lies (a
windows-1252 page served as UTF-8) and the next one is tried, then the fallback. A UTF-16 label
on a body with no NUL byte in its first 1,024 bytes lies too: the markup of such a body is
ASCII, never UTF-16. What casts doubt on a text is named (:attr:`Decoded.doubt`): bytes read as
U+FFFD, a declaration passed over, an XML declaration naming no known encoding. A sitemap read
with a doubt is listed but incomplete, since a URL in it may be misread.

Example::

    >>> page = "\\ufeff<p>Zürich</p>".encode("utf-8")
    >>> found = decode_html(page, "text/html; charset=iso-8859-1")
    >>> found.text, found.encoding, found.source
    ('<p>Zürich</p>', 'UTF-8', 'bom')
"""

from __future__ import annotations

from ragsync.encoding.decoders import decode, lookup
from ragsync.encoding.prescan import meta_prescan, xml_declared_encoding
from ragsync.encoding.sniff import (
    Decoded,
    bom_encoding,
    content_type_charset,
    decode_html,
    decode_text,
    decode_xml,
    utf8_xml,
)

__all__ = [
    "Decoded",
    "bom_encoding",
    "content_type_charset",
    "decode",
    "decode_html",
    "decode_text",
    "decode_xml",
    "lookup",
    "meta_prescan",
    "utf8_xml",
    "xml_declared_encoding",
]
