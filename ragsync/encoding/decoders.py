"""The Encoding Standard's encodings: the labels that name each (:func:`lookup`), and their
decoders (:func:`decode`), Python's codecs patched where they differ from the Standard.

The labels are the Standard's, all 228 of its ``encodings.json``. Each encoding is decoded by
the Python codec closest to the Standard's decoder, as measured on every sequence the
Standard's indexes define (``python eval/bench_encoding.py --indexes <whatwg/encoding
checkout>``, the counts of sequences on which a decoder and the Standard disagree):

- Shift_JIS: cp932 (4 of 11,476: 0xA0 and 0xFD–0xFF alone, which cp932 reads as private-use
  characters), not shift_jis (2,732: ①, the NEC and IBM rows, ～ ∥ － ￠ ￡ ￢);
- GBK and gb18030: gb18030 (22 of 1,132,741: 0x80 alone, which is €, and 21 sequences that
  GB18030-2022 maps otherwise), not gbk (2,150 of the 23,941 of GBK);
- EUC-KR: cp949 (0 of 23,940), not euc_kr (8,823); Big5: big5hkscs (203 of 19,778);
  EUC-JP: euc_jp (463 of 8,836 two-byte sequences: the NEC and IBM rows);
- the single-byte encodings: their Python codecs (0 of 256 each), but the windows code pages'
  unassigned bytes 0x80–0x9F (the Standard's C1 controls), windows-1255's 0xCA and KOI8-U's
  0xAE and 0xBE (the Standard's KOI8-U is KOI8-RU).

:func:`decode` patches Shift_JIS, gb18030 and the single-byte differences: 0 of those
sequences differ from the Standard there.
"""

from __future__ import annotations

import codecs
import re
from functools import cache

_LABELS = {
    "UTF-8": "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8",
    "IBM866": "866 cp866 csibm866 ibm866",
    "ISO-8859-2": (
        "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2 latin2"
    ),
    "ISO-8859-3": (
        "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3 latin3"
    ),
    "ISO-8859-4": (
        "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4 latin4"
    ),
    "ISO-8859-5": (
        "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5 "
        "iso_8859-5:1988"
    ),
    "ISO-8859-6": (
        "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 "
        "iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 "
        "iso_8859-6:1987"
    ),
    "ISO-8859-7": (
        "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7 "
        "iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek"
    ),
    "ISO-8859-8": (
        "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8 "
        "iso88598 iso_8859-8 iso_8859-8:1988 visual"
    ),
    "ISO-8859-8-I": "csiso88598i iso-8859-8-i logical",
    "ISO-8859-10": "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6",
    "ISO-8859-13": "iso-8859-13 iso8859-13 iso885913",
    "ISO-8859-14": "iso-8859-14 iso8859-14 iso885914",
    "ISO-8859-15": "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9",
    "ISO-8859-16": "iso-8859-16",
    "KOI8-R": "cskoi8r koi koi8 koi8-r koi8_r",
    "KOI8-U": "koi8-ru koi8-u",
    "macintosh": "csmacintosh mac macintosh x-mac-roman",
    "windows-874": "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874",
    "windows-1250": "cp1250 windows-1250 x-cp1250",
    "windows-1251": "cp1251 windows-1251 x-cp1251",
    "windows-1252": (
        "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 "
        "iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 "
        "x-cp1252"
    ),
    "windows-1253": "cp1253 windows-1253 x-cp1253",
    "windows-1254": (
        "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 "
        "iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254"
    ),
    "windows-1255": "cp1255 windows-1255 x-cp1255",
    "windows-1256": "cp1256 windows-1256 x-cp1256",
    "windows-1257": "cp1257 windows-1257 x-cp1257",
    "windows-1258": "cp1258 windows-1258 x-cp1258",
    "x-mac-cyrillic": "x-mac-cyrillic x-mac-ukrainian",
    "GBK": "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk",
    "gb18030": "gb18030",
    "Big5": "big5 big5-hkscs cn-big5 csbig5 x-x-big5",
    "EUC-JP": "cseucpkdfmtjapanese euc-jp x-euc-jp",
    "ISO-2022-JP": "csiso2022jp iso-2022-jp",
    "Shift_JIS": "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis",
    "EUC-KR": (
        "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 "
        "ksc5601 ksc_5601 windows-949"
    ),
    "replacement": "csiso2022kr hz-gb-2312 iso-2022-cn iso-2022-cn-ext iso-2022-kr replacement",
    "UTF-16BE": "unicodefffe utf-16be",
    "UTF-16LE": "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
    "x-user-defined": "x-user-defined",
}
LABELS = {label: name for name, labels in _LABELS.items() for label in labels.split()}

SINGLE_BYTE = frozenset(
    name
    for name in _LABELS
    if name.startswith(("IBM", "ISO-8859-", "KOI8-", "windows-"))
    or name in ("macintosh", "x-mac-cyrillic", "x-user-defined")
)

PYTHON_CODECS: dict[str, str] = {
    **{name: f"iso8859_{name.split('-')[2]}" for name in _LABELS if name.startswith("ISO-8859-")},
    **{name: f"cp{name.split('-')[1]}" for name in _LABELS if name.startswith("windows-")},
    "UTF-8": "utf-8",
    "IBM866": "cp866",
    "KOI8-R": "koi8_r",
    "KOI8-U": "koi8_u",
    "macintosh": "mac_roman",
    "x-mac-cyrillic": "mac_cyrillic",
    "GBK": "gb18030",
    "gb18030": "gb18030",
    "Big5": "big5hkscs",
    "EUC-JP": "euc_jp",
    "ISO-2022-JP": "iso2022_jp_ext",
    "Shift_JIS": "cp932",
    "EUC-KR": "cp949",
    "UTF-16BE": "utf-16-be",
    "UTF-16LE": "utf-16-le",
}

# Where a single-byte Python codec and the Standard's index differ, besides the windows code
# pages' unassigned bytes: byte → the Standard's character.
SINGLE_BYTE_PATCHES: dict[str, dict[int, str]] = {
    "windows-1255": {0xCA: "\u05ba"},
    "KOI8-U": {0xAE: "\u045e", 0xBE: "\u040e"},
}

# Python's gb18030 reading → the Standard's (GB18030-2022), for the 21 sequences that
# differ: 0xA3A0, 0xA6D9–0xA6DF, 0xA6EC, 0xA6ED, 0xA6F3, 0xA8BC, eight of 0xFE59–0xFEA0, and
# 0x8135F437, whose character and 0xA8BC's trade places. Each Python reading comes from one
# sequence only, so the table is exact.
GB18030_2022 = str.maketrans(
    {
        0xE5E5: 0x3000,
        **{0xE78D + i: cp for i, cp in enumerate([0xFE10, 0xFE12, 0xFE11, 0xFE13, 0xFE14])},
        **{0xE792 + i: cp for i, cp in enumerate([0xFE15, 0xFE16, 0xFE17, 0xFE18, 0xFE19])},
        0xE7C7: 0x1E3F,
        0x1E3F: 0xE7C7,
        0xE81E: 0x9FB4,
        0xE826: 0x9FB5,
        0xE82B: 0x9FB6,
        0xE82C: 0x9FB7,
        0xE832: 0x9FB8,
        0xE843: 0x9FB9,
        0xE854: 0x9FBA,
        0xE864: 0x9FBB,
    }
)

# A detector's Python codec name (as codecs.lookup spells it) → the Standard's encoding.
BY_PYTHON_CODEC: dict[str, str] = {
    **{codecs.lookup(codec).name: name for name, codec in PYTHON_CODECS.items()},
    "gb18030": "gb18030",
    "gbk": "GBK",
    "gb2312": "GBK",
    "shift_jis": "Shift_JIS",
    "big5": "Big5",
    "cp950": "Big5",
    "euc_kr": "EUC-KR",
    "iso2022_jp": "ISO-2022-JP",
}

_GB18030_STRICT = "ragsync.gb18030-strict"
_GB18030_REPLACE = "ragsync.gb18030-replace"


def lookup(label: str) -> str | None:
    """The Encoding Standard's "get an encoding": the name of the encoding ``label`` names
    (ASCII whitespace around it dropped, ASCII case ignored), or None for an unknown label.

    >>> lookup(" Latin1 "), lookup("GB2312"), lookup("x-sjis"), lookup("utf-7")
    ('windows-1252', 'GBK', 'Shift_JIS', None)
    """
    if not label.isascii():
        return None
    return LABELS.get(label.strip("\t\n\f\r ").lower())


def decode(data: bytes, encoding: str, *, strict: bool = False, final: bool = True) -> str:
    """``data`` decoded as the Encoding Standard's decoder for ``encoding`` (a name
    :func:`lookup` returns) decodes it, each undecodable sequence U+FFFD.

    The module's docstring says which Python codec stands in for which decoder, and how
    closely.

    Args:
        data: the bytes.
        encoding: the encoding's name.
        strict: raise instead of replacing.
        final: ``data`` is the whole document; False for its start, whose last sequence
            may be cut (it is then left out, not replaced).

    Raises:
        UnicodeDecodeError: ``strict`` and a sequence that ``encoding`` cannot decode.

    >>> decode(b"caf\\xe9 \\x80 \\x81", "windows-1252")
    'café € \\x81'
    >>> decode("①東京".encode("cp932"), "Shift_JIS"), decode(b"\\x80", "gb18030")
    ('①東京', '€')
    """
    errors = "strict" if strict else "replace"
    if encoding == "replacement":  # the Standard's answer to ISO-2022-KR, HZ and the like
        if data and strict:
            raise UnicodeDecodeError(encoding, data, 0, len(data), "never decoded")
        return "\ufffd" if data else ""
    if encoding in SINGLE_BYTE:
        return codecs.charmap_decode(data, errors, _single_byte_table(encoding))[0]
    if encoding in ("GBK", "gb18030"):
        errors = _GB18030_STRICT if strict else _GB18030_REPLACE
    codec = PYTHON_CODECS[encoding]
    text: str = codecs.getincrementaldecoder(codec)(errors).decode(data, final)
    if encoding in ("GBK", "gb18030"):
        return text.translate(GB18030_2022)
    if encoding == "Shift_JIS" and _CP932_ONLY.search(text):
        if strict:
            raise UnicodeDecodeError(encoding, data, 0, len(data), "0xA0 or 0xFD-0xFF")
        return _CP932_ONLY.sub("\ufffd", text)
    return text


_CP932_ONLY = re.compile("[\uf8f0-\uf8f3]")  # cp932's reading of 0xA0, 0xFD, 0xFE, 0xFF alone


@cache
def _single_byte_table(encoding: str) -> str:
    """The 256 characters of a single-byte encoding (U+FFFE: a byte it does not decode)."""
    if encoding == "x-user-defined":
        return "".join(map(chr, range(128))) + "".join(chr(0xF780 + i) for i in range(128))
    codec = PYTHON_CODECS[encoding]
    chars = []
    for byte in range(256):
        try:
            chars.append(bytes([byte]).decode(codec))
        except UnicodeDecodeError:  # the windows code pages' unassigned 0x80-0x9F: C1 controls
            c1 = encoding.startswith("windows-") and byte < 0xA0
            chars.append(chr(byte) if c1 else "\ufffe")
    for byte, char in SINGLE_BYTE_PATCHES.get(encoding, {}).items():
        chars[byte] = char
    return "".join(chars)


def _gb18030_error(exc: UnicodeError, *, strict: bool) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    if exc.object[exc.start] == 0x80:  # the Standard's gb18030 decoder: 0x80 alone is €
        return "€", exc.start + 1
    if strict:
        raise exc
    return "\ufffd", exc.end


codecs.register_error(_GB18030_STRICT, lambda exc: _gb18030_error(exc, strict=True))
codecs.register_error(_GB18030_REPLACE, lambda exc: _gb18030_error(exc, strict=False))
