"""Hostile configuration (issue #17, "Configuration that refuses nonsense"): every nonsense value
stops ragsync at load with exit code 2 and one line naming the file and the key, never a
traceback, and a password or secret is never printed."""

from __future__ import annotations

import base64

import pytest

from ragsync.config import EventConfig, load_config, resolve_env_url
from ragsync.errors import ConfigError, ResourceError
from ragsync.events import signer
from ragsync.state import StateDB
from ragsync.state.postgres import redact, server_name
from tests.support import ragsync_cli

# A closed port on loopback: if an old build ran the sync, it would fail fast, not hang.
SOURCE = '[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "http://127.0.0.1:9/sitemap.xml"\n'
PASSWORD = "p@ss:w/rd?#x"
FRAGMENTS = ("p@ss", "ss:w", "w/rd", "rd?#x")
SECRET = "whsec_" + base64.b64encode(b"an events secret of 32 bytes ok!").decode()


def secret_of(size):
    return "whsec_" + base64.b64encode(b"k" * size).decode()


def source_with(line):
    return SOURCE + line + "\n"


# (id, TOML, key the message names, fragment of the reason)
CASES = [
    # The issue's list
    ("fetch.concurrency=0", "[fetch]\nconcurrency = 0", "fetch.concurrency", "at least 1"),
    ("fetch.timeout=-5", "[fetch]\ntimeout = -5", "fetch.timeout", "0 or more"),
    ("chunker.max_tokens=0", "[chunker]\nmax_tokens = 0", "chunker.max_tokens", "at least 16"),
    ("embedder.batch_size=0", "[embedder]\nbatch_size = 0", "embedder.batch_size", "at least 1"),
    ("store.kind=mongo", '[store]\nkind = "mongo"', "store.kind", "unknown store kind 'mongo'"),
    ("listen=nonsense", '[server]\nlisten = "nonsense"', "server.listen", "HOST:PORT"),
    ("listen port 99999", '[server]\nlisten = "127.0.0.1:99999"', "server.listen", "1-65535"),
    ("store.path=/dev/null", '[store]\npath = "/dev/null"', "store.path", "not a folder"),
    ("state.path=/dev/null", '[state]\npath = "/dev/null"', "state.path", "not a regular file"),
    ("state.path under a file", '[state]\npath = "a-file/state.db"', "state.path", "not a folder"),
    ("store.path under a file", '[store]\npath = "a-file/q"', "store.path", "not a folder"),
    (
        "missing_confirmations=-3",
        source_with("missing_confirmations = -3"),
        "sources[0].missing_confirmations",
        "at least 1",
    ),
    ("max_redirects=-1", "[fetch]\nmax_redirects = -1", "fetch.max_redirects", "at least 0"),
    ("events url ftp", '[[events]]\nurl = "ftp://x"', "events[0].url", "http:// or https://"),
    (
        "events secret empty",
        '[[events]]\nurl = "https://hooks.example/in"\nsecret = ""',
        "events[0].secret",
        "must not be empty",
    ),
    (
        "events secret no prefix",
        '[[events]]\nurl = "https://hooks.example/in"\nsecret = "hunter2"',
        "events[0].secret",
        "expected 'whsec_'",
    ),
    (
        "events secret not base64",
        '[[events]]\nurl = "https://hooks.example/in"\nsecret = "whsec_not*base64!"',
        "events[0].secret",
        "not base64",
    ),
    (
        "events secret too short",
        f'[[events]]\nurl = "https://hooks.example/in"\nsecret = "{secret_of(8)}"',
        "events[0].secret",
        "24-64 bytes",
    ),
    # Every other field
    ("state.url scheme", '[state]\nurl = "mysql://db/x"', "state.url", "postgresql://"),
    (
        "state.url raw @ in password",
        '[state]\nurl = "postgresql://rs:p@ss@db/rs"',
        "state.url",
        "percent-encode",
    ),
    (
        "state.url raw / in password",
        '[state]\nurl = "postgresql://rs:p/ss@db/rs"',
        "state.url",
        "percent-encode",
    ),
    ("state.pool_size=0", "[state]\npool_size = 0", "state.pool_size", "at least 1"),
    (
        "raw_body_retention<0",
        "[state]\nraw_body_retention = -1",
        "state.raw_body_retention",
        "0 or more",
    ),
    ("store.url scheme", '[store]\nurl = "ftp://q:6333"', "store.url", "http://"),
    ("store.batch_size=0", "[store]\nbatch_size = 0", "store.batch_size", "at least 1"),
    ("store.timeout=0", '[store]\ntimeout = "0s"', "store.timeout", "more than 0"),
    ("store.retry_attempts=0", "[store]\nretry_attempts = 0", "store.retry_attempts", "at least 1"),
    ("store.shard_number=0", "[store]\nshard_number = 0", "store.shard_number", "at least 1"),
    (
        "write_consistency>replication",
        "[store]\nreplication_factor = 2\nwrite_consistency_factor = 3",
        "store.write_consistency_factor",
        "replication_factor",
    ),
    ("store.collection empty", '[store]\ncollection = ""', "store.collection", "not be empty"),
    ("embedder.kind", '[embedder]\nkind = "onnx"', "embedder.kind", "must be one of"),
    ("embedder.model empty", '[embedder]\nmodel = " "', "embedder.model", "not be empty"),
    ("embedder.threads=0", "[embedder]\nthreads = 0", "embedder.threads", "at least 1"),
    ("embedder http no url", '[embedder]\nkind = "http"', "embedder.url", "needs the service URL"),
    ("embedder.url scheme", '[embedder]\nurl = "file:///x"', "embedder.url", "http://"),
    ("embedder.dimension=0", "[embedder]\ndimension = 0", "embedder.dimension", "at least 1"),
    (
        "embedder.max_input_tokens=0",
        "[embedder]\nmax_input_tokens = 0",
        "embedder.max_input_tokens",
        "at least 1",
    ),
    (
        "embedder.tokenizer missing",
        '[embedder]\ntokenizer = "nope.json"',
        "embedder.tokenizer",
        "no file",
    ),
    ("embedder.concurrency=0", "[embedder]\nconcurrency = 0", "embedder.concurrency", "at least 1"),
    ("embedder.timeout=0", "[embedder]\ntimeout = 0", "embedder.timeout", "more than 0"),
    (
        "embedder.retry_attempts=0",
        "[embedder]\nretry_attempts = 0",
        "embedder.retry_attempts",
        "at least 1",
    ),
    ("extract.workers=0", "[extract]\nworkers = 0", "extract.workers", "at least 1"),
    ("extract.cpu_budget=0", "[extract]\ncpu_budget = 0", "extract.cpu_budget", "more than 0"),
    ("fetch.timeout=nan", "[fetch]\ntimeout = nan", "fetch.timeout", "0 or more"),
    ("fetch.timeout=inf", "[fetch]\ntimeout = inf", "fetch.timeout", "0 or more"),
    ("fetch.timeout=0", "[fetch]\ntimeout = 0", "fetch.timeout", "more than 0"),
    (
        "fetch.user_agent CRLF",
        '[fetch]\nuser_agent = "x\\r\\nX-Evil: 1"',
        "fetch.user_agent",
        "control",
    ),
    ("fetch.user_agent empty", '[fetch]\nuser_agent = ""', "fetch.user_agent", "not be empty"),
    (
        "per_host_concurrency=0",
        "[fetch]\nper_host_concurrency = 0",
        "fetch.per_host_concurrency",
        "at least 1",
    ),
    ("per_host_delay<0", "[fetch]\nper_host_delay = -1", "fetch.per_host_delay", "0 or more"),
    ("max_body_bytes=0", "[fetch]\nmax_body_bytes = 0", "fetch.max_body_bytes", "at least 1"),
    ("fetch.retry_attempts=0", "[fetch]\nretry_attempts = 0", "fetch.retry_attempts", "at least 1"),
    (
        "fetch.retry_cap<base",
        '[fetch]\nretry_base = "1m"\nretry_cap = "5s"',
        "fetch.retry_cap",
        "at least retry_base",
    ),
    ("max_pause_wait<0", "[fetch]\nmax_pause_wait = -1", "fetch.max_pause_wait", "0 or more"),
    ("duration 1e300", "[fetch]\nmax_pause_wait = 1e300", "fetch.max_pause_wait", "100 years"),
    ("listen bad host", '[server]\nlisten = "my host:8787"', "server.listen", "not a host name"),
    ("listen bad ipv4", '[server]\nlisten = "300.1.1.1:80"', "server.listen", "IPv4"),
    ("listen bare ipv6", '[server]\nlisten = "::1:8787"', "server.listen", "brackets"),
    ("listen port 0", '[server]\nlisten = "127.0.0.1:0"', "server.listen", "1-65535"),
    ("every<0", source_with("every = -60"), "sources[0].every", "0 or more"),
    ("cron empty", source_with('cron = ""'), "sources[0].cron", "not be empty"),
    (
        "min_interval>max_interval",
        source_with('min_interval = "2d"\nmax_interval = "1d"'),
        "sources[0].min_interval",
        "max_interval",
    ),
    ("missing_grace<0", source_with("missing_grace = -1"), "sources[0].missing_grace", "0 or more"),
    ("max_urls=0", source_with("max_urls = 0"), "sources[0].max_urls", "at least 1"),
    ("include empty", source_with('include = [""]'), "sources[0].include[0]", "not be empty"),
    (
        "webhook_secret empty",
        source_with('webhook_secret = ""'),
        "sources[0].webhook_secret",
        "not be empty",
    ),
    (
        "webhook_secret bad whsec",
        source_with('webhook_secret = "whsec_%%%"'),
        "sources[0].webhook_secret",
        "not base64",
    ),
    (
        "webhook_secret unclosed ${",
        source_with('webhook_secret = "${HOOK_SECRET"'),
        "sources[0].webhook_secret",
        "malformed ${VAR}",
    ),
    (
        "allowed_hosts URL",
        source_with('allowed_hosts = ["https://docs.example.org/"]'),
        "sources[0].allowed_hosts[0]",
        "host glob",
    ),
    (
        "allowed_hosts with a port",
        source_with('allowed_hosts = ["localhost:8901"]'),
        "sources[0].allowed_hosts[0]",
        "without its port",
    ),
    (
        "events types",
        '[[events]]\nurl = "https://h.example/in"\ntypes = ["deleted"]',
        "events[0].types[0]",
        "must be one of",
    ),
    (
        "events unknown source",
        '[[events]]\nurl = "https://h.example/in"\nsources = ["doc"]',
        "events[0].sources[0]",
        "did you mean 'docs'",
    ),
    (
        "events min_magnitude>1",
        '[[events]]\nurl = "https://h.example/in"\nmin_magnitude = 2',
        "events[0].min_magnitude",
        "at most 1",
    ),
    (
        "events max_attempts=0",
        '[[events]]\nurl = "https://h.example/in"\nmax_attempts = 0',
        "events[0].max_attempts",
        "at least 1",
    ),
    (
        "events timeout=0",
        '[[events]]\nurl = "https://h.example/in"\ntimeout = 0',
        "events[0].timeout",
        "more than 0",
    ),
    (
        "events duplicate url",
        '[[events]]\nurl = "https://h.example/in"\n[[events]]\nurl = "https://h.example/in"',
        "events[1].url",
        "duplicate",
    ),
    (
        "events url no host",
        '[[events]]\nurl = "https:///in"',
        "events[0].url",
        "has no host",
    ),
]
# The issue's list, also run through the CLI as a user would.
ISSUE = [case[0] for case in CASES[:18]]


def write_config(tmp_path, text):
    (tmp_path / "a-file").write_text("not a folder")
    path = tmp_path / "ragsync.toml"
    body = text if text.startswith("[[sources]]") else SOURCE + text
    path.write_text(body + "\n")
    return path


@pytest.mark.parametrize(
    ("text", "key", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_nonsense_is_a_config_error_naming_file_and_key(tmp_path, text, key, fragment):
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {key}: "), message
    assert fragment in message and "\n" not in message
    assert not any(piece in message for piece in ("p@ss", "hunter2", "p/ss")), message


@pytest.mark.parametrize("name", ISSUE)
def test_cli_exits_2_with_one_line(tmp_path, name):
    text, key, fragment = next(c[1:] for c in CASES if c[0] == name)
    path = write_config(tmp_path, text)
    proc = ragsync_cli("run", config=path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{path}: {key}: " in lines[0] and fragment in lines[0], lines
    assert not (tmp_path / ".ragsync").exists()  # nothing was created


def test_serve_listen_flag_exits_2(tmp_path):
    path = write_config(tmp_path, "")
    proc = ragsync_cli("serve", "--listen", "127.0.0.1:99999", config=path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "ragsync: configuration error: --listen: port must be within 1-65535, got 99999"
    ]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (None, "EVENTS_SECRET is not set"),
        ("", "${EVENTS_SECRET}: is empty"),
        ("hunter2", "${EVENTS_SECRET}: not a Standard Webhooks secret"),
        ("whsec_***", "${EVENTS_SECRET}: not a Standard Webhooks secret"),
        (secret_of(100), "${EVENTS_SECRET}: a Standard Webhooks secret holds 24-64 bytes"),
    ],
    ids=["unset", "empty", "no prefix", "not base64", "too long"],
)
def test_event_secret_variable_is_checked_where_it_is_resolved(monkeypatch, value, fragment):
    monkeypatch.delenv("EVENTS_SECRET", raising=False)
    if value is not None:
        monkeypatch.setenv("EVENTS_SECRET", value)
    endpoint = EventConfig(url="https://h.example/in", secret="${EVENTS_SECRET}")
    with pytest.raises(ConfigError) as info:
        signer(endpoint, 0)
    message = str(info.value)
    assert message.startswith("events[0].secret: ") and fragment in message, message
    assert not value or value not in message


def test_event_secret_variable_holding_a_good_secret_signs(monkeypatch):
    monkeypatch.setenv("EVENTS_SECRET", SECRET)
    assert signer(EventConfig(url="https://h.example/in", secret="${EVENTS_SECRET}"), 0)
    assert signer(EventConfig(url="https://h.example/in", secret=SECRET), 0)


def test_database_password_with_reserved_characters_is_encoded(monkeypatch):
    from psycopg.conninfo import conninfo_to_dict

    monkeypatch.setenv("PGPW", PASSWORD)
    url = resolve_env_url("postgresql://ragsync:${PGPW}@db.internal:5432/ragsync", key="state.url")
    assert conninfo_to_dict(url) == {
        "user": "ragsync",
        "password": PASSWORD,
        "host": "db.internal",
        "port": "5432",
        "dbname": "ragsync",
    }
    # A variable outside the user part is left as it is (a whole URL, a host).
    monkeypatch.setenv("PGURL", "postgresql://a:b@h/d")
    assert resolve_env_url("${PGURL}", key="state.url") == "postgresql://a:b@h/d"


def test_database_password_is_never_printed(monkeypatch):
    monkeypatch.setenv("PGPW", PASSWORD)
    url = resolve_env_url("postgresql://ragsync:${PGPW}@127.0.0.1:9/ragsync", key="state.url")
    with pytest.raises(ResourceError) as info:  # nothing listens there: refused
        StateDB(url, connect_timeout=1)
    message = str(info.value)
    assert "PostgreSQL 127.0.0.1:9/ragsync (the state DB)" in message, message
    assert not any(piece in message for piece in FRAGMENTS), message
    raw = f"postgresql://ragsync:{PASSWORD}@127.0.0.1:9/ragsync"
    assert redact(raw) == "postgresql://ragsync:***@127.0.0.1:9/ragsync"
    assert server_name(raw) == "PostgreSQL 127.0.0.1:9/ragsync"


def test_sound_values_still_load(tmp_path, monkeypatch):
    text = (
        source_with('webhook_secret = "github secret"\nallowed_hosts = ["*.example.org"]')
        + '[server]\nlisten = "[::1]:8787"\n[fetch]\ntimeout = "45s"\nmax_redirects = 0\n'
        + '[state]\nurl = "postgresql://ragsync:${PGPW}@db:5432/ragsync"\n'
        + f'[[events]]\nurl = "https://h.example/in"\nsecret = "{SECRET}"\nsources = ["docs"]\n'
        + '[[events]]\nurl = "https://h.example/other"\nsecret = "${EVENTS_SECRET}"\n'
    )
    config = load_config(write_config(tmp_path, text))
    assert config.fetch.timeout == 45 and config.fetch.max_redirects == 0
    assert config.events[0].sources == ("docs",)


@pytest.mark.parametrize(
    "text",
    [
        '[server]\nlisten = ":8787"',
        '[server]\nlisten = "ragsync_serve:8787"',
        '[state]\nurl = "postgresql://rs:${PGPW}@db1:5432,db2:5432/rs"',
        '[store]\nurl = "${QDRANT_URL}"',
    ],
    ids=["listen without host", "underscore host", "libpq failover hosts", "store url variable"],
)
def test_configurations_users_have_load(tmp_path, text):
    load_config(write_config(tmp_path, source_with("") + text + "\n"))


def test_a_source_url_scheme_is_case_insensitive(tmp_path):
    text = (
        '[[sources]]\nid = "docs"\nkind = "sitemap"\nurl = "HTTPS://docs.example.org/sitemap.xml"\n'
    )
    assert load_config(write_config(tmp_path, text)).sources[0].id == "docs"
