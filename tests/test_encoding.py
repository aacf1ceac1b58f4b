"""Encoding the way browsers find it (``ragsync.encoding``; README "Extraction", "Discovery"):
the byte-order mark first, then the ``Content-Type`` charset, then the document's own
declaration, then the fallback; labels and decoders as the Encoding Standard has them; and real
encoded bytes (windows-1252, Shift_JIS, GBK and GB18030, UTF-16 with a byte-order mark) on
pages, sitemaps and feeds."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ragsync.connectors.feed import parse_feed
from ragsync.connectors.sitemap import parse_sitemap
from ragsync.encoding import (
    content_type_charset,
    decode,
    decode_html,
    decode_text,
    decode_xml,
    lookup,
    meta_prescan,
    xml_declared_encoding,
)
from ragsync.errors import ExtractError
from ragsync.extract import canonical_link, decode_body, extract_response, meta_refresh
from ragsync.links import page_links

# -- labels, marks, declarations ------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("utf-8", "UTF-8"),
        ("UTF8", "UTF-8"),
        ("iso-8859-1", "windows-1252"),
        ("Latin1", "windows-1252"),
        ("us-ascii", "windows-1252"),
        ("ascii", "windows-1252"),
        ("gb2312", "GBK"),
        ("GBK", "GBK"),
        ("x-gbk", "GBK"),
        ("gb18030", "gb18030"),
        ("shift_jis", "Shift_JIS"),
        ("SJIS", "Shift_JIS"),
        ("windows-31j", "Shift_JIS"),
        ("ms932", "Shift_JIS"),
        ("utf-16", "UTF-16LE"),
        ("unicodefffe", "UTF-16BE"),
        ("iso-2022-kr", "replacement"),
        ("ks_c_5601-1987", "EUC-KR"),
        (" \tkoi8-r\n", "KOI8-R"),
        ("latin-1", None),  # Python's name, not a label
        ("utf-7", None),
        ("utf-32", None),
        ("cp932", None),
        ("\u212aoi8-r", None),  # KELVIN SIGN lowercases to k outside ASCII
        ("", None),
    ],
)
def test_labels_are_the_encoding_standards(label, name):
    assert lookup(label) == name


@pytest.mark.parametrize(
    ("content_type", "name"),
    [
        ("text/html; charset=utf-8", "UTF-8"),
        ('text/html; charset="Shift_JIS"', "Shift_JIS"),
        ("text/html ; CHARSET = gb2312 ", "GBK"),
        ("text/html; charset=utf-8; charset=latin1", "UTF-8"),  # the first parameter counts
        ("text/html; charset=bogus-xyz", None),
        ("text/html; charset=", None),
        ("text/html", None),
        ("", None),
    ],
)
def test_the_content_type_charset(content_type, name):
    assert content_type_charset(content_type) == name


@pytest.mark.parametrize(
    ("head", "name"),
    [
        (b'<meta charset="windows-1252">', "windows-1252"),
        (b"<META CHARSET=SJIS>", "Shift_JIS"),
        (b"<meta/charset=big5>", "Big5"),
        (b'<meta http-equiv="Content-Type" content="text/html; charset=gb2312">', "GBK"),
        (b"<meta content='text/html;charset = \"koi8-r\"' http-equiv=content-type>", "KOI8-R"),
        (b'<meta content="text/html; charset=gb2312">', None),  # no pragma: a description
        (b'<meta name="description" content="charset=koi8-r">', None),
        (b'<meta charset="utf-16">', "UTF-8"),  # a page that can say so is not UTF-16
        (b'<meta charset="x-user-defined">', "windows-1252"),
        (b'<meta charset="bogus"><meta charset="euc-kr">', "EUC-KR"),  # unknown: no declaration
        (b"<!-- <meta charset=koi8-r> --><meta charset=iso-8859-2>", "ISO-8859-2"),
        (b"<!--> <meta charset=koi8-r>", "KOI8-R"),  # "<!-->" is a whole comment
        (b"<title x='>'><meta charset=euc-kr>", "EUC-KR"),
        (b'<a title="<meta charset=koi8-r>">x</a>', None),  # inside another tag's attribute
        (b'<?xml version="1.0" encoding="windows-1251"?><html>', "windows-1251"),
        ("<?xml version='1.0'?><html>".encode("utf-16-le"), "UTF-16LE"),
        (b" " * 1024 + b'<meta charset="koi8-r">', None),  # past the prescan's 1,024 bytes
        (b"<html><head><title>nothing declared</title>", None),
    ],
)
def test_the_prescan_reads_what_browsers_read(head, name):
    assert meta_prescan(head) == name


@pytest.mark.parametrize(
    ("document", "name"),
    [
        (b'<?xml version="1.0" encoding="Shift_JIS"?><a/>', "Shift_JIS"),
        (b"<?xml version='1.0' encoding = 'latin1' ?><a/>", "windows-1252"),
        (b'<?xml version="1.0" encoding="UTF-16"?><a/>', "UTF-8"),
        (b'<?xml version="1.0"?><a encoding="koi8-r"/>', None),  # after the declaration
        (b' <?xml version="1.0" encoding="koi8-r"?><a/>', None),  # not at the very start
        (b'<?xml version="1.0" encoding="bogus"?><a/>', None),
    ],
)
def test_the_xml_declaration(document, name):
    assert xml_declared_encoding(document) == name


# -- the order ------------------------------------------------------------------------------


ZURICH = "<p>Zürich</p>"


@pytest.mark.parametrize(
    ("body", "content_type", "encoding", "source"),
    [
        # The trial: a UTF-8 page with a byte-order mark served as ISO-8859-1.
        (b"\xef\xbb\xbf" + ZURICH.encode(), "text/html; charset=iso-8859-1", "UTF-8", "bom"),
        (b"\xff\xfe" + ZURICH.encode("utf-16-le"), "text/html; charset=utf-8", "UTF-16LE", "bom"),
        (b"\xfe\xff" + ZURICH.encode("utf-16-be"), "text/html", "UTF-16BE", "bom"),
        # The header over the page's own declaration, the declaration over the fallback.
        (
            b"<meta charset=koi8-r><p>Z\xfcrich</p>",
            "text/html; charset=latin1",
            "windows-1252",
            "http",
        ),
        (b"<meta charset=latin1><p>Z\xfcrich</p>", "text/html", "windows-1252", "meta"),
        (ZURICH.encode(), "text/html", "UTF-8", "default"),
        (b"<p>Z\xfcrich</p>", "text/html", "windows-1252", "default"),
    ],
)
def test_a_byte_order_mark_then_the_header_then_the_page(body, content_type, encoding, source):
    found = decode_html(body, content_type)
    assert found.text.endswith(ZURICH) and (found.encoding, found.source) == (encoding, source)


def test_plain_text_has_no_meta_and_xml_has_its_declaration():
    text = '<meta charset="koi8-r"> Zürich'.encode()
    assert decode_text(text, "text/markdown").encoding == "UTF-8"
    xml = '<?xml version="1.0" encoding="windows-1251"?><a>Москва</a>'.encode("cp1251")
    assert decode_xml(xml).text.endswith("<a>Москва</a>")
    assert decode_xml(xml, "application/xml; charset=koi8-r").encoding == "KOI8-R"  # RFC 7303
    assert decode_xml(b"\xef\xbb\xbf" + xml, "text/xml; charset=koi8-r").encoding == "UTF-8"


@pytest.mark.parametrize(
    ("body", "content_type", "doubt"),
    [
        ('<?xml version="1.0"?><a>Zürich</a>'.encode(), "", None),
        (b"\xff\xfe" + "<a>Zürich</a>".encode("utf-16-le"), "text/xml; charset=bogus", None),
        ("<a>東京</a>".encode("cp932"), "application/xml; charset=sjis", None),
        (
            "<a>Zürich, Genève</a>".encode() + b"\xff",
            "",
            "1 byte sequence is not UTF-8 (read as U+FFFD)",
        ),
        (b"<a>caf\xe9</a>", "", "its bytes are not UTF-8 (read as windows-1252)"),
        (
            b'<?xml version="1.0" encoding="utf-8"?><a>caf\xe9</a>',
            "",
            "its bytes are not UTF-8, as its XML declaration says (read as windows-1252)",
        ),
        (
            b"<a>caf\xe9</a>",
            "application/xml; charset=utf-8",
            "its bytes are not UTF-8, as its Content-Type charset says (read as windows-1252)",
        ),
        (
            b'<?xml version="1.0" encoding="ebcdic-cp-us"?><a/>',
            "",
            "its XML declaration names an encoding no browser knows: 'ebcdic-cp-us'",
        ),
        (
            b"<a/>",
            "application/xml; charset=utf-32",
            "its Content-Type charset names an encoding no browser knows: 'utf-32'",
        ),
    ],
)
def test_what_casts_doubt_on_an_xml_text_is_named(body, content_type, doubt):
    assert decode_xml(body, content_type).doubt == doubt


# -- declarations that lie ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "content_type", "text", "encoding"),
    [
        # Every é and è undecodable as UTF-8: the header lies; windows-1252 reads the page.
        (
            "<p>Crème brûlée</p>".encode("cp1252"),
            "text/html; charset=utf-8",
            "<p>Crème brûlée</p>",
            "windows-1252",
        ),
        # A UTF-8 page with one stray byte: UTF-8 holds, the byte is U+FFFD (as browsers show).
        (
            "<p>Zürich, Genève</p>".encode() + b"\xff",
            "text/html; charset=utf-8",
            "<p>Zürich, Genève</p>\ufffd",
            "UTF-8",
        ),
        # A server's default charset over a legacy page that says what it is.
        (
            '<meta charset="shift_jis"><p>東京①</p>'.encode("cp932"),
            "text/html; charset=UTF-8",
            '<meta charset="shift_jis"><p>東京①</p>',
            "Shift_JIS",
        ),
        # UTF-16 named on ASCII markup: no NUL byte, so no UTF-16.
        (ZURICH.encode(), "text/html; charset=UTF-16", ZURICH, "UTF-8"),
    ],
)
def test_a_declaration_that_lies_is_passed_over(body, content_type, text, encoding):
    found = decode_html(body, content_type)
    assert (found.text, found.encoding) == (text, encoding)


def test_a_byte_order_mark_is_never_second_guessed():
    found = decode_html(b"\xef\xbb\xbf<p>caf\xe9</p>", "text/html; charset=windows-1252")
    assert (found.text, found.encoding, found.replaced) == ("<p>caf\ufffd</p>", "UTF-8", 1)


PAGE = (
    "<!doctype html><html><head><title>{0}</title></head>"
    "<body><main><p>{1}</p></main></body></html>"
)


@pytest.mark.parametrize(
    ("text", "codec", "encoding"),
    [
        ("東京の天気は晴れです。今日は、新しい駅が開業しました。", "cp932", "Shift_JIS"),
        (
            "北京今天天气晴朗。我们正在测试中文文本的编码检测，以便能够正确地搜索。",
            "gb18030",
            "gb18030",
        ),
        ("Москва — столица России. Погода сегодня хорошая.", "cp1251", "windows-1251"),
        # charset_normalizer reads this as cp775 (Baltic): Latin letters, so windows-1252.
        (
            "Le café de la gare sert une crème brûlée très appréciée; à côté, l'hôtel reçoit "
            "les invités étrangers. Où est la forêt? Noël approche, et l'été est loin. " * 8,
            "cp1252",
            "windows-1252",
        ),
    ],
)
def test_an_undeclared_page_is_detected_unless_its_script_is_latin(text, codec, encoding):
    html = PAGE.format("T", text)
    found = decode_html(html.encode(codec), "text/html")
    assert (found.text, found.encoding) == (html, encoding)


# -- the Encoding Standard's decoders -------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "encoding", "text"),
    [
        (b"\x80\x81\x93\x94", "windows-1252", "€\x81“”"),  # 0x81: a C1 control, not an error
        (b"caf\xe9 \x80", "windows-1252", "café €"),  # iso-8859-1's label, windows-1252's €
        ("①～∥".encode("cp932"), "Shift_JIS", "①～∥"),  # Python's shift_jis fails on ①
        (b"\xa0", "Shift_JIS", "\ufffd"),  # cp932 alone reads it as U+F8F0
        (b"\x80", "GBK", "€"),
        (b"\xa3\xa0\xa6\xd9", "gb18030", "\u3000\ufe10"),  # GB18030-2022
        ("镕𠀀".encode("gb18030"), "gb18030", "镕𠀀"),
        ("\U0001f600".encode("utf-16-le"), "UTF-16LE", "\U0001f600"),
        (b"\x00\xd8", "UTF-16LE", "\ufffd"),  # a lone surrogate
        (b"\xfe", "x-user-defined", "\uf7fe"),
        (b"anything", "replacement", "\ufffd"),
    ],
)
def test_decoders_decode_as_the_standard_does(data, encoding, text):
    assert decode(data, encoding) == text


def test_a_body_in_the_replacement_encoding_or_with_nul_bytes_is_not_text():
    with pytest.raises(ExtractError, match="not text.*replacement"):
        decode_body(b"<p>\x1b$)C</p>", "text/html; charset=iso-2022-kr", "http://x/kr")
    with pytest.raises(ExtractError, match="not text"):
        decode_body(b"<p>\x00\x01\x02</p>", "text/html; charset=utf-8", "http://x/bin")
    # UTF-16's NUL bytes are text.
    assert decode_body(b"\xff\xfe" + ZURICH.encode("utf-16-le"), "text/html", "u") == ZURICH


# -- real encodings on pages, sitemaps and feeds --------------------------------------------


@dataclass(frozen=True)
class Sample:
    """Text in one encoding: the Python codec that makes its bytes (the Standard's decoder
    reads them back), the labels to declare it by, the byte-order mark it needs."""

    name: str
    codec: str
    labels: tuple[str, ...]
    text: str
    segment: str  # a path segment in the script, for URLs
    bom: bytes = b""

    def encode(self, text: str) -> bytes:
        # Windows' GBK (cp936) writes € as 0x80, which Python's gbk has no byte for.
        parts = text.split("€") if self.codec == "gbk" else [text]
        return self.bom + b"\x80".join(part.encode(self.codec) for part in parts)


SAMPLES = [
    Sample(
        "windows-1252",
        "cp1252",
        ("windows-1252", "iso-8859-1"),
        "Crème brûlée au café, “déjà vu” — 5 €",
        "café",
    ),
    Sample("Shift_JIS", "cp932", ("Shift_JIS", "sjis"), "東京の天気は晴れ。①番線、～まで", "東京"),
    Sample("GBK", "gbk", ("gb2312", "GBK"), "北京的天气很好，镕，价格 5 €", "北京"),
    Sample("gb18030", "gb18030", ("GB18030",), "北京的天气很好，𠀀，镕", "北京"),
    Sample("UTF-16LE", "utf-16-le", (), "Zürich, 東京, 北京", "zürich", b"\xff\xfe"),
    Sample("UTF-16BE", "utf-16-be", (), "Zürich, 東京, 北京", "zürich", b"\xfe\xff"),
]
BASE = "http://docs.test/guide/page.html"


def declared_ways(sample: Sample) -> list[tuple[str, str, str]]:
    """``(how, content_type, head)``: each way the sample's encoding can be declared on a
    page. A byte-order mark needs none, and overrides a header that says otherwise."""
    if sample.bom:
        return [("bom", "text/html; charset=iso-8859-1", "")]
    ways = []
    for label in sample.labels:
        ways.append(("http", f"text/html; charset={label}", ""))
        ways.append(("meta", "text/html", f'<meta charset="{label}">'))
        equiv = f'<meta http-equiv="Content-Type" content="text/html; charset={label}">'
        ways.append(("http-equiv", "text/html", equiv))
    return ways


PAGE_CASES = [
    pytest.param(sample, content_type, head, id=f"{sample.name}-{how}-{content_type}-{head[:16]}")
    for sample in SAMPLES
    for how, content_type, head in declared_ways(sample)
]


@pytest.mark.parametrize(("sample", "content_type", "head"), PAGE_CASES)
def test_pages_in_real_encodings(sample, content_type, head):
    html = (
        f"<!doctype html><html><head>{head}<title>{sample.segment}</title>"
        f'<link rel="canonical" href="/{sample.segment}/canonical.html">'
        '<meta http-equiv="refresh" content="0; url=/' + sample.segment + '/moved.html">'
        f"</head><body><main><h1>{sample.segment}</h1><p>{sample.text}</p>"
        f'<p><a href="/{sample.segment}/next.html">next</a></p></main></body></html>'
    )
    body = sample.encode(html)
    page = extract_response(body, content_type, BASE)
    assert sample.text in page.markdown and page.title == sample.segment
    assert page_links(body, content_type, BASE).links == (
        f"http://docs.test/{sample.segment}/next.html",
    )
    headers = {"content-type": content_type}
    assert (
        canonical_link(body, headers, BASE) == f"http://docs.test/{sample.segment}/canonical.html"
    )
    moved = meta_refresh(body, BASE, content_type=content_type)
    assert moved == f"http://docs.test/{sample.segment}/moved.html"


def xml_ways(sample: Sample) -> list[tuple[str, str, str]]:
    """``(how, content_type, declaration)`` for an XML document in the sample's encoding."""
    if sample.bom:
        return [
            ("bom", "application/xml", ""),
            ("bom over a header", "application/xml; charset=iso-8859-1", ""),
            ("bom and declaration", "text/xml", '<?xml version="1.0" encoding="UTF-16"?>'),
        ]
    ways = []
    for label in sample.labels:
        ways.append(("http", f"application/xml; charset={label}", ""))
        ways.append(("declaration", "application/xml", f'<?xml version="1.0" encoding="{label}"?>'))
        # RFC 7303 §3: the charset parameter over the declaration.
        utf8 = '<?xml version="1.0" encoding="UTF-8"?>'
        ways.append(("http over declaration", f"text/xml; charset={label}", utf8))
    return ways


XML_CASES = [
    pytest.param(sample, content_type, declaration, id=f"{sample.name}-{how}-{content_type}")
    for sample in SAMPLES
    for how, content_type, declaration in xml_ways(sample)
]
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


@pytest.mark.parametrize(("sample", "content_type", "declaration"), XML_CASES)
def test_sitemaps_in_real_encodings(sample, content_type, declaration):
    xml = (
        f"{declaration}<urlset {NS}><!-- {sample.text} -->"
        f"<url><loc>https://docs.test/{sample.segment}/a.html</loc>"
        "<lastmod>2026-03-01T10:00:00+00:00</lastmod></url>"
        f"<url><loc>https://docs.test/{sample.segment}/b.html</loc></url></urlset>"
    )
    document = parse_sitemap(sample.encode(xml), content_type)
    assert document.pages == (
        (f"https://docs.test/{sample.segment}/a.html", "2026-03-01T10:00:00+00:00"),
        (f"https://docs.test/{sample.segment}/b.html", None),
    )
    assert document.partial is None


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.name for s in SAMPLES])
def test_text_sitemaps_in_real_encodings(sample):
    content_type = f"text/plain; charset={sample.labels[0]}" if sample.labels else "text/plain"
    body = sample.encode(f"https://docs.test/{sample.segment}/a.html\n")
    pages = parse_sitemap(body, content_type).pages
    assert pages == ((f"https://docs.test/{sample.segment}/a.html", None),)


@pytest.mark.parametrize(("sample", "content_type", "declaration"), XML_CASES)
def test_feeds_in_real_encodings(sample, content_type, declaration):
    rss = (
        f'{declaration}<rss version="2.0"><channel><title>{sample.text}</title>'
        f'<item><title>{sample.text}</title><guid isPermaLink="false">{sample.segment}-1</guid>'
        f"<link>https://docs.test/{sample.segment}/post.html</link>"
        "<pubDate>Sun, 01 Mar 2026 10:00:00 GMT</pubDate></item></channel></rss>"
    )
    atom = (
        f'{declaration}<feed xmlns="http://www.w3.org/2005/Atom"><title>{sample.text}</title>'
        f"<entry><title>{sample.text}</title><id>urn:{sample.segment}:1</id>"
        f'<link href="https://docs.test/{sample.segment}/entry.html"/>'
        "<updated>2026-03-01T10:00:00Z</updated></entry></feed>"
    )
    for document, entry_id, link in (
        (rss, f"{sample.segment}-1", "post.html"),
        (atom, f"urn:{sample.segment}:1", "entry.html"),
    ):
        feed = parse_feed(sample.encode(document), url=BASE, content_type=content_type)
        assert feed["entries"] == [
            {
                "id": entry_id,
                "link": f"https://docs.test/{sample.segment}/{link}",
                "updated": "2026-03-01T10:00:00Z",
            }
        ]


def test_a_hostile_feed_or_sitemap_in_utf16_is_refused():
    """Entity declarations are looked for in the decoded text: UTF-16 hides them from a look
    at the bytes."""
    bomb = '<!DOCTYPE r [<!ENTITY a "aaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;">]>'
    feed = f'{bomb}<rss version="2.0"><channel><item><title>&b;</title></item></channel></rss>'
    sitemap = f"{bomb}<urlset {NS}><url><loc>https://x.org/&b;</loc></url></urlset>"
    with pytest.raises(ValueError, match="hostile XML refused"):
        parse_feed(b"\xff\xfe" + feed.encode("utf-16-le"))
    with pytest.raises(ValueError, match="hostile XML refused"):
        parse_sitemap(b"\xfe\xff" + sitemap.encode("utf-16-be"))
