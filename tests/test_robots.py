"""robots.txt matching (RFC 9309), checked against Google's robotstxt test suite.

The cases below are ported as data from google/robotstxt ``robots_test.cc`` (the test names
are theirs): each is (robots.txt, product token, URL, allowed?). ``GOOGLE_DIFFERENCES`` are the
cases where ragsync answers otherwise, on purpose, with the reason.
"""

from __future__ import annotations

import pytest

from ragsync.errors import FetchError
from ragsync.robots import RobotsPolicy, decode_robots, parse_robots, robots_target
from ragsync.urls import canonical_url


def allowed(robotstxt: str, agent: str, url: str) -> bool:
    return RobotsPolicy(lambda _: robotstxt, agent).allowed(url)


GROUPS = (
    "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\n"
    "disallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\n"
    "allow: /z/\ndisallow: /\n"
)
UPPER = "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n"
CAMEL = "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n"
UA_UPPER = "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n"
UA_LOWER = "User-Agent: foo bar\nAllow: /x/\nDisallow: /\n"
UA_CAMEL = "User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n"
GLOBAL = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n"
SPECIFIC = (
    "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\n"
    "user-agent: BazBot\ndisallow: /\n"
)
FISH = "user-agent: FooBot\ndisallow: /\nallow: /fish\n"
FISH_STAR = "user-agent: FooBot\ndisallow: /\nallow: /fish*\n"
FISH_SLASH = "user-agent: FooBot\ndisallow: /\nallow: /fish/\n"
PHP = "user-agent: FooBot\ndisallow: /\nallow: /*.php\n"
PHP_END = "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n"
FISH_PHP = "user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n"
LINE_MAX = 2083 * 8


def long_disallow() -> tuple[str, str]:
    longline = "/x/" + "a" * (LINE_MAX - 3 - len("disallow: ") + 1 - 3)
    return f"user-agent: FooBot\ndisallow: {longline}/qux\n", longline


def long_allows() -> tuple[str, str, str]:
    size = LINE_MAX - 3 - len("allow: ") + 1
    a, b = "/x/" + "a" * (size - 3), "/x/" + "b" * (size - 3)
    return f"user-agent: FooBot\ndisallow: /\nallow: {a}/qux\nallow: {b}/qux\n", a, b


LONG_D, LONG_D_LINE = long_disallow()
LONG_A, LONG_A_A, LONG_A_B = long_allows()

GOOGLE_CASES = [
    # GoogleOnly_SystemTest (the cases with a URL and a product token)
    ("SystemTest", "", "FooBot", "http://foo.bar/x", True),
    # ID_LineSyntax_Line
    ("LineSyntax_Line", "user-agent: FooBot\ndisallow: /\n", "FooBot", "http://foo.bar/x/y", False),
    ("LineSyntax_Line", "foo: FooBot\nbar: /\n", "FooBot", "http://foo.bar/x/y", True),
    ("LineSyntax_Line", "user-agent FooBot\ndisallow /\n", "FooBot", "http://foo.bar/x/y", False),
    # ID_LineSyntax_Groups
    ("LineSyntax_Groups", GROUPS, "FooBot", "http://foo.bar/x/b", True),
    ("LineSyntax_Groups", GROUPS, "FooBot", "http://foo.bar/z/d", True),
    ("LineSyntax_Groups", GROUPS, "FooBot", "http://foo.bar/y/c", False),
    ("LineSyntax_Groups", GROUPS, "BarBot", "http://foo.bar/y/c", True),
    ("LineSyntax_Groups", GROUPS, "BarBot", "http://foo.bar/w/a", True),
    ("LineSyntax_Groups", GROUPS, "BarBot", "http://foo.bar/z/d", False),
    ("LineSyntax_Groups", GROUPS, "BazBot", "http://foo.bar/z/d", True),
    ("LineSyntax_Groups", GROUPS, "FooBot", "http://foo.bar/foo/bar/", False),
    ("LineSyntax_Groups", GROUPS, "BarBot", "http://foo.bar/foo/bar/", False),
    ("LineSyntax_Groups", GROUPS, "BazBot", "http://foo.bar/foo/bar/", False),
    # ID_LineSyntax_Groups_OtherRules
    (
        "Groups_OtherRules",
        "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n",
        "FooBot",
        "http://foo.bar/",
        False,
    ),
    (
        "Groups_OtherRules",
        "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n",
        "BarBot",
        "http://foo.bar/",
        False,
    ),
    (
        "Groups_OtherRules",
        "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n",
        "FooBot",
        "http://foo.bar/",
        False,
    ),
    (
        "Groups_OtherRules",
        "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n",
        "BarBot",
        "http://foo.bar/",
        False,
    ),
    # ID_REPLineNamesCaseInsensitive
    ("LineNamesCaseInsensitive", UPPER, "FooBot", "http://foo.bar/x/y", True),
    ("LineNamesCaseInsensitive", CAMEL, "FooBot", "http://foo.bar/x/y", True),
    ("LineNamesCaseInsensitive", UPPER, "FooBot", "http://foo.bar/a/b", False),
    ("LineNamesCaseInsensitive", CAMEL, "FooBot", "http://foo.bar/a/b", False),
    # ID_UserAgentValueCaseInsensitive (multi-word values: the first word is the token)
    ("UserAgentValueCaseInsensitive", UA_UPPER, "Foo", "http://foo.bar/x/y", True),
    ("UserAgentValueCaseInsensitive", UA_LOWER, "Foo", "http://foo.bar/x/y", True),
    ("UserAgentValueCaseInsensitive", UA_CAMEL, "Foo", "http://foo.bar/x/y", True),
    ("UserAgentValueCaseInsensitive", UA_UPPER, "Foo", "http://foo.bar/a/b", False),
    ("UserAgentValueCaseInsensitive", UA_LOWER, "Foo", "http://foo.bar/a/b", False),
    ("UserAgentValueCaseInsensitive", UA_CAMEL, "Foo", "http://foo.bar/a/b", False),
    ("UserAgentValueCaseInsensitive", UA_UPPER, "foo", "http://foo.bar/x/y", True),
    ("UserAgentValueCaseInsensitive", UA_LOWER, "foo", "http://foo.bar/x/y", True),
    ("UserAgentValueCaseInsensitive", UA_CAMEL, "foo", "http://foo.bar/x/y", True),
    ("UserAgentValueCaseInsensitive", UA_UPPER, "foo", "http://foo.bar/a/b", False),
    ("UserAgentValueCaseInsensitive", UA_LOWER, "foo", "http://foo.bar/a/b", False),
    ("UserAgentValueCaseInsensitive", UA_CAMEL, "foo", "http://foo.bar/a/b", False),
    # GoogleOnly_AcceptUserAgentUpToFirstSpace
    (
        "AcceptUserAgentUpToFirstSpace",
        "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n",
        "Foo",
        "http://foo.bar/x/y",
        True,
    ),
    # ID_GlobalGroups_Secondary
    ("GlobalGroups_Secondary", "", "FooBot", "http://foo.bar/x/y", True),
    ("GlobalGroups_Secondary", GLOBAL, "FooBot", "http://foo.bar/x/y", False),
    ("GlobalGroups_Secondary", GLOBAL, "BarBot", "http://foo.bar/x/y", True),
    ("GlobalGroups_Secondary", SPECIFIC, "QuxBot", "http://foo.bar/x/y", True),
    # ID_AllowDisallow_Value_CaseSensitive
    (
        "Value_CaseSensitive",
        "user-agent: FooBot\ndisallow: /x/\n",
        "FooBot",
        "http://foo.bar/x/y",
        False,
    ),
    (
        "Value_CaseSensitive",
        "user-agent: FooBot\ndisallow: /X/\n",
        "FooBot",
        "http://foo.bar/x/y",
        True,
    ),
    # ID_LongestMatch
    (
        "LongestMatch",
        "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n",
        "FooBot",
        "http://foo.bar/x/page.html",
        False,
    ),
    (
        "LongestMatch",
        "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
        "FooBot",
        "http://foo.bar/x/page.html",
        True,
    ),
    (
        "LongestMatch",
        "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
        "FooBot",
        "http://foo.bar/x/",
        False,
    ),
    (
        "LongestMatch",
        "user-agent: FooBot\ndisallow: \nallow: \n",
        "FooBot",
        "http://foo.bar/x/page.html",
        True,
    ),
    (
        "LongestMatch",
        "user-agent: FooBot\ndisallow: /\nallow: /\n",
        "FooBot",
        "http://foo.bar/x/page.html",
        True,
    ),
    (
        "LongestMatch",
        "user-agent: FooBot\ndisallow: /x\nallow: /x/\n",
        "FooBot",
        "http://foo.bar/x",
        False,
    ),
    (
        "LongestMatch",
        "user-agent: FooBot\ndisallow: /x\nallow: /x/\n",
        "FooBot",
        "http://foo.bar/x/",
        True,
    ),
    (
        "LongestMatch",
        "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n",
        "FooBot",
        "http://foo.bar/x/page.html",
        True,
    ),
    (
        "LongestMatch",
        "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
        "FooBot",
        "http://foo.bar/page.html",
        False,
    ),
    (
        "LongestMatch",
        "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
        "FooBot",
        "http://foo.bar/page",
        True,
    ),
    (
        "LongestMatch",
        "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
        "FooBot",
        "http://foo.bar/x/page.html",
        True,
    ),
    (
        "LongestMatch",
        "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
        "FooBot",
        "http://foo.bar/x/y.html",
        False,
    ),
    (
        "LongestMatch",
        "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
        "FooBot",
        "http://foo.bar/x/page",
        True,
    ),
    (
        "LongestMatch",
        "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
        "FooBot",
        "http://foo.bar/y/page",
        False,
    ),
    # ID_Encoding (the cases where Google and ragsync agree)
    (
        "Encoding",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
        "FooBot",
        "http://foo.bar/foo/bar?qux=taz&baz=http://foo.bar?tar&par",
        True,
    ),
    (
        "Encoding",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n",
        "FooBot",
        "http://foo.bar/foo/bar/%E3%83%84",
        True,
    ),
    (
        "Encoding",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
        "FooBot",
        "http://foo.bar/foo/bar/%E3%83%84",
        True,
    ),
    (
        "Encoding",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
        "FooBot",
        "http://foo.bar/foo/bar/%62%61%7A",
        True,
    ),
    # ID_SpecialCharacters
    *[
        (
            "SpecialCharacters",
            "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n",
            "FooBot",
            url,
            ok,
        )
        for url, ok in [
            ("http://foo.bar/foo/bar/quz", False),
            ("http://foo.bar/foo/quz", True),
            ("http://foo.bar/foo//quz", True),
            ("http://foo.bar/foo/bax/quz", True),
        ]
    ],
    *[
        (
            "SpecialCharacters",
            "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n",
            "FooBot",
            url,
            ok,
        )
        for url, ok in [
            ("http://foo.bar/foo/bar", False),
            ("http://foo.bar/foo/bar/qux", True),
            ("http://foo.bar/foo/bar/", True),
            ("http://foo.bar/foo/bar/baz", True),
        ]
    ],
    *[
        (
            "SpecialCharacters",
            "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
            "FooBot",
            url,
            ok,
        )
        for url, ok in [("http://foo.bar/foo/bar", True), ("http://foo.bar/foo/quz", False)]
    ],
    # GoogleOnly_IndexHTMLisDirectory
    *[
        (
            "IndexHTMLisDirectory",
            "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
            "foobot",
            url,
            ok,
        )
        for url, ok in [
            ("http://foo.com/allowed-slash/", True),
            ("http://foo.com/allowed-slash/index.htm", False),
            ("http://foo.com/allowed-slash/index.html", True),
            ("http://foo.com/anyother-url", False),
        ]
    ],
    # GoogleOnly_LineTooLong
    ("LineTooLong", LONG_D, "FooBot", "http://foo.bar/fux", True),
    ("LineTooLong", LONG_D, "FooBot", f"http://foo.bar{LONG_D_LINE}/fux", False),
    ("LineTooLong", LONG_A, "FooBot", "http://foo.bar/", False),
    ("LineTooLong", LONG_A, "FooBot", f"http://foo.bar{LONG_A_A}/qux", True),
    ("LineTooLong", LONG_A, "FooBot", f"http://foo.bar{LONG_A_B}/fux", True),
    # GoogleOnly_DocumentationChecks
    *[
        ("DocumentationChecks /fish", FISH, "FooBot", f"http://foo.bar{path}", ok)
        for path, ok in [
            ("/bar", False),
            ("/fish", True),
            ("/fish.html", True),
            ("/fish/salmon.html", True),
            ("/fishheads", True),
            ("/fishheads/yummy.html", True),
            ("/fish.html?id=anything", True),
            ("/Fish.asp", False),
            ("/catfish", False),
            ("/?id=fish", False),
        ]
    ],
    *[
        ("DocumentationChecks /fish*", FISH_STAR, "FooBot", f"http://foo.bar{path}", ok)
        for path, ok in [
            ("/bar", False),
            ("/fish", True),
            ("/fish.html", True),
            ("/fish/salmon.html", True),
            ("/fishheads", True),
            ("/fishheads/yummy.html", True),
            ("/fish.html?id=anything", True),
            ("/Fish.bar", False),
            ("/catfish", False),
            ("/?id=fish", False),
        ]
    ],
    *[
        ("DocumentationChecks /fish/", FISH_SLASH, "FooBot", f"http://foo.bar{path}", ok)
        for path, ok in [
            ("/bar", False),
            ("/fish/", True),
            ("/fish/salmon", True),
            ("/fish/?salmon", True),
            ("/fish/salmon.html", True),
            ("/fish/?id=anything", True),
            ("/fish", False),
            ("/fish.html", False),
            ("/Fish/Salmon.html", False),
        ]
    ],
    *[
        ("DocumentationChecks /*.php", PHP, "FooBot", f"http://foo.bar{path}", ok)
        for path, ok in [
            ("/bar", False),
            ("/filename.php", True),
            ("/folder/filename.php", True),
            ("/folder/filename.php?parameters", True),
            ("//folder/any.php.file.html", True),
            ("/filename.php/", True),
            ("/index?f=filename.php/", True),
            ("/php/", False),
            ("/index?php", False),
            ("/windows.PHP", False),
        ]
    ],
    *[
        ("DocumentationChecks /*.php$", PHP_END, "FooBot", f"http://foo.bar{path}", ok)
        for path, ok in [
            ("/bar", False),
            ("/filename.php", True),
            ("/folder/filename.php", True),
            ("/filename.php?parameters", False),
            ("/filename.php/", False),
            ("/filename.php5", False),
            ("/php/", False),
            ("/filename?php", False),
            ("/aaaphpaaa", False),
            ("//windows.PHP", False),
        ]
    ],
    *[
        ("DocumentationChecks /fish*.php", FISH_PHP, "FooBot", f"http://foo.bar{path}", ok)
        for path, ok in [
            ("/bar", False),
            ("/fish.php", True),
            ("/fishheads/catfish.php?parameters", True),
            ("/Fish.PHP", False),
        ]
    ],
    (
        "DocumentationChecks order",
        "user-agent: FooBot\nallow: /p\ndisallow: /\n",
        "FooBot",
        "http://example.com/page",
        True,
    ),
    (
        "DocumentationChecks order",
        "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n",
        "FooBot",
        "http://example.com/folder/page",
        True,
    ),
    (
        "DocumentationChecks order",
        "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n",
        "FooBot",
        "http://example.com/page.htm",
        False,
    ),
    (
        "DocumentationChecks order",
        "user-agent: FooBot\nallow: /$\ndisallow: /\n",
        "FooBot",
        "http://example.com/",
        True,
    ),
    (
        "DocumentationChecks order",
        "user-agent: FooBot\nallow: /$\ndisallow: /\n",
        "FooBot",
        "http://example.com/page.html",
        False,
    ),
    # ID_LinesNumbersAreCountedCorrectly, as matching: every line ending splits lines
    *[
        ("LineEndings", text, agent, "http://foo.bar/other", ok)
        for text in [
            "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /\n",
            "User-Agent: foo\r\nAllow: /some/path\r\nUser-Agent: bar\r\n\r\n\r\nDisallow: /\r\n",
            "User-Agent: foo\rAllow: /some/path\rUser-Agent: bar\r\r\rDisallow: /\r",
            "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /",
            "User-Agent: foo\nAllow: /some/path\r\nUser-Agent: bar\n\r\n\nDisallow: /",
        ]
        for agent, ok in [("foo", True), ("bar", False), ("baz", True)]
    ],
]

# Where ragsync answers otherwise than Google's matcher, on purpose.
GOOGLE_DIFFERENCES = [
    # ID_Encoding: Google leaves percent-encoding the URL to its caller and compares bytes.
    # ragsync matches the URL as published, which may be unencoded, and the request goes out
    # encoded: both sides are encoded before comparison, as RFC 9309 §2.2.2 says.
    (
        "Encoding",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n",
        "FooBot",
        "http://foo.bar/foo/bar/ツ",
        True,
    ),
    (
        "Encoding",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
        "FooBot",
        "http://foo.bar/foo/bar/ツ",
        True,
    ),
    # ID_Encoding: "%62%61%7A" is "baz" (unreserved characters are decoded before comparison,
    # RFC 9309 §2.2.2); Google's test calls relying on it "illegal" and answers no.
    (
        "Encoding",
        "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
        "FooBot",
        "http://foo.bar/foo/bar/baz",
        True,
    ),
    # GoogleOnly_AcceptUserAgentUpToFirstSpace asks for the agent "Foo Bar": ragsync's agent
    # is always one product token (RobotsPolicy keeps the first word), so it is "Foo".
    (
        "AcceptUserAgentUpToFirstSpace",
        "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n",
        "Foo Bar",
        "http://foo.bar/x/y",
        True,
    ),
]


@pytest.mark.parametrize(("name", "robotstxt", "agent", "url", "expected"), GOOGLE_CASES)
def test_google_robotstxt_suite(name, robotstxt, agent, url, expected):
    assert allowed(robotstxt, agent, url) is expected


@pytest.mark.parametrize(("name", "robotstxt", "agent", "url", "expected"), GOOGLE_DIFFERENCES)
def test_where_ragsync_differs_from_google_on_purpose(name, robotstxt, agent, url, expected):
    assert allowed(robotstxt, agent, url) is expected


@pytest.mark.parametrize(
    "body",
    [
        b"\xef\xbb\xbfUser-Agent: foo\nDisallow: /\n",
        b"\xef\xbbUser-Agent: foo\nDisallow: /\n",  # truncated byte-order marks, as Google
        b"\xefUser-Agent: foo\nDisallow: /\n",
    ],
)
def test_a_byte_order_mark_is_stripped(body):  # ID_UTF8ByteOrderMarkIsSkipped
    assert not allowed(decode_robots(body), "foo", "http://foo.bar/a")
    assert not allowed("\ufeff" + decode_robots(body), "foo", "http://foo.bar/a")  # left in text


def test_a_byte_order_mark_elsewhere_is_a_broken_line():
    text = decode_robots(b"User-Agent: foo\n\xef\xbb\xbfDisallow: /\n")
    assert allowed(text, "foo", "http://foo.bar/a")


# --- the URL as published (#17) -------------------------------------------------------------
PUBLISHED = (
    "User-agent: *\nDisallow: /\nAllow: /search?q=rag&page=2\nAllow: /a%7e/\n"
    "Allow: /track?utm_source=feed\n"
)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.org/search?q=rag&page=2",  # canonical form sorts the query
        "https://example.org/track?utm_source=feed",  # canonical form drops the parameter
        "https://example.org/a%7e/b",
    ],
)
def test_rules_match_the_url_as_published(url):
    assert allowed(PUBLISHED, "ragsync", url)
    if canonical_url(url) != url:  # and would not match its canonical form
        assert robots_target(canonical_url(url)) != robots_target(url)


def test_the_canonical_form_of_an_allowed_url_may_not_be_allowed():
    assert not allowed(
        PUBLISHED, "ragsync", canonical_url("https://example.org/search?q=rag&page=2")
    )


def test_robots_target():
    assert robots_target("https://example.org") == "/"
    assert robots_target("https://example.org/a/b?c=http://d.e/") == "/a/b?c=http://d.e/"
    assert robots_target("https://example.org/a/b?c=d&e=f#fragment") == "/a/b?c=d&e=f"
    assert robots_target("https://example.org?a") == "/?a"
    assert robots_target("https://example.org/a;b#c") == "/a;b"
    assert robots_target("https://example.org/a?") == "/a?"
    assert robots_target(" https://example.org\\a\\b?x=\\y ") == "/a/b?x=\\y"


def test_one_robots_txt_per_host_whatever_the_spelling():
    fetched = []
    policy = RobotsPolicy(
        lambda url: fetched.append(url) or "User-agent: *\nDisallow: /x\n", "ragsync/1.0"
    )
    assert policy.allowed("HTTPS://Example.ORG:443/a")
    assert not policy.allowed("https://example.org/x?b=1")
    assert policy.knows("https://EXAMPLE.org/")
    assert fetched == ["https://example.org/robots.txt"]


def test_an_unparsable_url_is_not_allowed():
    policy = RobotsPolicy(lambda url: "", "ragsync")
    assert not policy.allowed("https://user:pw@example.org/")
    assert not policy.allowed("ftp://example.org/")
    assert policy.requests == 0


def test_group_tokens_match_exactly():
    # protego alone would bind "User-agent: rag" to ragsync (a substring) …
    assert allowed("User-agent: rag\nDisallow: /\n", "ragsync", "https://x.org/a")
    # … and read "ragsync/2.0" or "RagSync crawler" as no name of ragsync's.
    assert not allowed("User-agent: ragsync/2.0\nDisallow: /\n", "ragsync", "https://x.org/a")
    assert not allowed("User-agent: RagSync crawler\nDisallow: /\n", "ragsync", "https://x.org/a")
    assert not allowed("User-agent: *\nDisallow: /\n", "ragsync", "https://x.org/a")
    assert not allowed("User-agent: * # all\nDisallow: /\n", "ragsync", "https://x.org/a")


def test_crawl_delay_survives_the_rewrite():
    policy = RobotsPolicy(
        lambda url: "User-agent: RagSync bot\nX-Note: hi\nCrawl-delay: 3\n", "ragsync"
    )
    assert policy.allowed("https://x.org/a")
    assert policy.crawl_delay("https://x.org/a") == 3.0


def test_unreachable_and_missing_robots():
    def gone(url):
        raise FetchError(url, "gone", status=404, transient=False)

    def down(url):
        raise FetchError(url, "down", status=503, transient=True)

    assert RobotsPolicy(gone, "ragsync").allowed("https://x.org/a")
    policy = RobotsPolicy(down, "ragsync")
    assert not policy.allowed("https://x.org/a")
    assert policy.unreachable("https://X.org/b") == "robots.txt unreachable: down"


def test_parse_robots_keeps_sitemaps():
    rules = parse_robots("Sitemap: https://x.org/s.xml\nUser-agent: *\nDisallow:\n", "ragsync")
    assert list(rules.sitemaps) == ["https://x.org/s.xml"]
