"""The HTML Standard's prescan of a page's first bytes for the encoding it declares, and its
reading of an XML declaration ("Determining the character encoding", "prescan a byte stream to
determine its encoding", "get an XML encoding"), step for step."""

from __future__ import annotations

import re

from ragsync.encoding.decoders import lookup

PRESCAN_BYTES = 1024  # the HTML Standard's advice for the prescan
UTF16 = ("UTF-16BE", "UTF-16LE")
_SPACE = b"\t\n\x0c\r "


def meta_prescan(body: bytes) -> str | None:
    """The encoding the first 1,024 bytes of an HTML page declare, as the HTML Standard's
    "prescan a byte stream to determine its encoding" finds it: a UTF-16 XML declaration,
    then the first ``<meta charset>`` or ``<meta http-equiv="Content-Type"
    content="…charset=…">`` outside comments, then an XML declaration's ``encoding``; None
    when there is none. A ``<meta>`` naming UTF-16 means UTF-8, x-user-defined windows-1252.

    >>> meta_prescan(b'<!-- <meta charset=koi8-r> --><meta charset="Shift_JIS">')
    'Shift_JIS'
    >>> meta_prescan(b'<meta content="text/html; charset=gb2312" http-equiv=Content-Type>')
    'GBK'
    >>> meta_prescan(b'<meta content="text/html; charset=gb2312">') is None
    True
    """
    data = body[:PRESCAN_BYTES]
    return utf16_xml_declaration(data) or _Prescan(data).run() or xml_declared_encoding(data)


def utf16_xml_declaration(body: bytes) -> str | None:
    """UTF-16LE or UTF-16BE for a body without a byte-order mark that starts with ``<?x`` in
    that encoding (the prescan's first step; XML 1.0 Appendix F), else None.

    >>> utf16_xml_declaration("<?xml version='1.0'?>".encode("utf-16-be"))
    'UTF-16BE'
    """
    if body.startswith(b"<\0?\0x\0"):
        return "UTF-16LE"
    return "UTF-16BE" if body.startswith(b"\0<\0?\0x") else None


class _Prescan:
    """The prescan's steps over ``data``, position by position (HTML Standard §13.2.3.2)."""

    def __init__(self, data: bytes):
        self.data = data
        self.at = 0

    def run(self) -> str | None:
        data = self.data
        while self.at < len(data):
            rest = data[self.at : self.at + 6]
            if rest.startswith(b"<!--"):
                end = data.find(b"-->", self.at + 2)
                if end < 0:
                    return None
                self.at = end + 2
            elif rest[:5].lower() == b"<meta" and rest[5:6] and rest[5:6] in _SPACE + b"/":
                self.at += 6
                found = self.meta()
                if found:
                    return found
            elif rest[:1] == b"<" and (
                rest[1:2].isalpha() or (rest[1:2] == b"/" and rest[2:3].isalpha())
            ):
                while self.at < len(data) and data[self.at] not in _SPACE + b">":
                    self.at += 1
                while self.attribute() is not None:
                    pass
            elif rest[:2] in (b"<!", b"</", b"<?"):
                end = data.find(b">", self.at + 1)
                if end < 0:
                    return None
                self.at = end
            self.at += 1
        return None

    def meta(self) -> str | None:
        """The encoding one ``<meta>`` declares (the prescan's attributes and processing
        steps), or None: it declares none, or an ``http-equiv`` content without the
        ``Content-Type`` pragma."""
        seen: set[str] = set()
        got_pragma = False
        need_pragma: bool | None = None
        charset: str | None = None
        while (attribute := self.attribute()) is not None:
            name, value = attribute
            if name in seen:
                continue
            seen.add(name)
            if name == "http-equiv":
                got_pragma = value == "content-type"
            elif name == "content" and need_pragma is None:
                found = lookup(_charset_in_content(value) or "")
                if found is not None:
                    charset, need_pragma = found, True
            elif name == "charset":
                charset, need_pragma = lookup(value), False
        if need_pragma is None or (need_pragma and not got_pragma) or charset is None:
            return None
        if charset in UTF16:
            return "UTF-8"
        return "windows-1252" if charset == "x-user-defined" else charset

    def attribute(self) -> tuple[str, str] | None:
        """The prescan's "get an attribute": ``(name, value)`` lowercased, or None at ``>``
        or the end of the bytes."""
        data, end = self.data, len(self.data)
        while self.at < end and data[self.at] in _SPACE + b"/":
            self.at += 1
        if self.at >= end or data[self.at] == 0x3E:  # >
            return None
        name = bytearray()
        while True:
            byte = data[self.at]
            if byte == 0x3D and name:  # =
                self.at += 1
                break
            if byte in _SPACE:
                while self.at < end and data[self.at] in _SPACE:
                    self.at += 1
                if self.at >= end:
                    return None
                if data[self.at] != 0x3D:
                    return _lower(name), ""
                self.at += 1
                break
            if byte in b"/>":
                return _lower(name), ""
            name.append(byte)
            self.at += 1
            if self.at >= end:
                return None
        while self.at < end and data[self.at] in _SPACE:
            self.at += 1
        if self.at >= end:
            return None
        quote = data[self.at]
        if quote in b"\"'":
            close = data.find(bytes([quote]), self.at + 1)
            if close < 0:
                return None
            value = data[self.at + 1 : close]
            self.at = close + 1
            return _lower(name), _lower(value)
        if quote == 0x3E:
            return _lower(name), ""
        start = self.at
        while self.at < end and data[self.at] not in _SPACE + b">":
            self.at += 1
        if self.at >= end:
            return None
        return _lower(name), _lower(data[start : self.at])


def _lower(raw: bytes | bytearray) -> str:
    """Bytes as the prescan reads them: each byte the code point of its value, A–Z lowered."""
    return bytes(raw).decode("latin-1").translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _charset_in_content(value: str) -> str | None:
    """The HTML Standard's "extracting a character encoding from a meta element": the label
    after ``charset=`` in a ``content`` value (quoted, or up to whitespace or ``;``)."""
    at = 0
    while True:
        at = value.find("charset", at)
        if at < 0:
            return None
        at += len("charset")
        while at < len(value) and value[at] in "\t\n\f\r ":
            at += 1
        if value[at : at + 1] == "=":
            break
    rest = value[at + 1 :].lstrip("\t\n\f\r ")
    if rest[:1] in ('"', "'"):
        close = rest.find(rest[0], 1)
        return rest[1:close] if close > 0 else None
    return re.split(r"[\t\n\f\r ;]", rest, maxsplit=1)[0] or None


def xml_declared_encoding(body: bytes) -> str | None:
    """The encoding an XML declaration at the very start of ``body`` names (the HTML
    Standard's "get an XML encoding", which reads it as XML 1.0 §4.3.3 writes it), or None.
    One that names UTF-16 means UTF-8: its bytes were read as ASCII.

    >>> xml_declared_encoding(b'<?xml version="1.0" encoding="Shift_JIS"?><urlset/>')
    'Shift_JIS'
    """
    found = lookup(xml_declared_label(body) or "")
    return "UTF-8" if found in UTF16 else found


def xml_declared_label(body: bytes) -> str | None:
    """The label in the ``encoding`` of an XML declaration at the very start of ``body``,
    known or not, or None (:func:`xml_declared_encoding` reads it)."""
    if not body.startswith(b"<?xml"):
        return None
    declaration = body[: body.find(b">")] if b">" in body else b""
    at = declaration.find(b"encoding")
    if at < 0:
        return None
    match = re.match(rb"[\x00-\x20]*=[\x00-\x20]*([\"'])([^\"']*)\1", declaration[at + 8 :])
    if match is None or re.search(rb"[\x00-\x20]", match.group(2)):
        return None
    return match.group(2).decode("latin-1")
