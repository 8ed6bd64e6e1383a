"""Buckets shared through codecs with natsio-kvcodec (an asyncio Python port of orbit.go's
kvcodec): keys and values written through ``nats_sync.jetstream.kvcodec`` are read by
natsio in a child process of pyenv's Python 3.13 (natsio needs 3.13+), and the other way
round, for base64 keys subjects cannot carry, path keys, zlib and chained codecs, and
wildcard filters.

Skipped, with the reason, where that Python or natsio-kvcodec in it is missing
(``make test`` installs it where a Python 3.13 is found: tests/integration/natsio_peer.py)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from natsio_peer import natsio_python, why_not

import nats_sync
from nats_sync.jetstream import JetStream
from nats_sync.jetstream import kvcodec as kc
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(120)

ClientFactory = Callable[..., nats_sync.Client]
NATSIO_PYTHON = natsio_python()
CHILD = Path(__file__).with_name("kv_codec_natsio_child.py")
KEY_CODECS: dict[str, Callable[[], Any]] = {
    "base64": kc.Base64Codec,
    "path": kc.PathCodec,
    "path+base64": lambda: kc.KeyChainCodec(kc.PathCodec(), kc.Base64Codec()),
}
VALUE_CODECS: dict[str, Callable[[], Any]] = {
    "base64": kc.Base64Codec,
    "zlib": kc.ZlibCodec,
    "zlib+base64": lambda: kc.ValueChainCodec(kc.ZlibCodec(), kc.Base64Codec()),
}


@pytest.fixture(scope="module")
def natsio_ready() -> None:
    reason = why_not("natsio.kvcodec", "natsio-kvcodec")
    if reason:
        pytest.skip(reason)


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    return connect(servers=jetstream_server.url).jetstream()


def natsio(url: str, **request: Any) -> dict[str, Any]:
    """What natsio-kvcodec answers to ``request`` (see kv_codec_natsio_child.py)."""
    done = subprocess.run(
        [str(NATSIO_PYTHON), str(CHILD), url, json.dumps(request)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


CASES = [  # key codec, value codec, {key: value}, a watch filter and the keys it matches
    (
        "base64",
        "base64",
        {
            "Acme Inc.contact": b"info@acme.com",
            "a b.*.c": b"\x00\xff",
            "ünï.cødé": b"",
            "x.>y": b"gt",
        },
        "Acme Inc.*",
        ["Acme Inc.contact"],
    ),
    (
        "path",
        "zlib",
        {"/config/app/db": b"postgres://localhost" * 10, "rel/x": b"r", "/": b"root"},
        "/config/>",
        ["/config/app/db"],
    ),
    (
        "path+base64",
        "zlib+base64",
        {"/my docs/read me": b"hello", "/my docs/other": b"o", "/elsewhere": b"e"},
        "/my docs/*",
        ["/my docs/other", "/my docs/read me"],
    ),
]


@pytest.mark.parametrize(
    ("key_codec", "value_codec", "values", "pattern", "matching"),
    CASES,
    ids=[case[0] for case in CASES],
)
def test_natsio_reads_what_we_write(
    natsio_ready: None,
    js: JetStream,
    jetstream_server: NatsServer,
    key_codec: str,
    value_codec: str,
    values: dict[str, bytes],
    pattern: str,
    matching: list[str],
) -> None:
    bucket = f"ours-{key_codec.replace('+', '-')}"
    kv = kc.wrap(
        js.create_key_value(bucket=bucket),
        key_codec=KEY_CODECS[key_codec](),
        value_codec=VALUE_CODECS[value_codec](),
    )
    for key, value in values.items():
        kv.put(key, value)
    # natsio-kvcodec 0.1.1 looks for wildcards in '.'-separated tokens only, so it takes a
    # path filter through a chain ("/my docs/*") for a key; orbit.go (and we) look for a
    # '*' or '>' anywhere. Its own watch is left out there.
    natsio_watches = key_codec != "path+base64"
    answer = natsio(
        jetstream_server.url,
        bucket=bucket,
        key_codec=key_codec,
        value_codec=value_codec,
        get=list(values),
        keys=True,
        watch=pattern if natsio_watches else "",
    )
    assert {key: bytes.fromhex(value) for key, value in answer["got"].items()} == values
    assert answer["keys"] == sorted(values)
    assert answer["watched"] == (matching if natsio_watches else None)


@pytest.mark.parametrize(
    ("key_codec", "value_codec", "values", "pattern", "matching"),
    CASES,
    ids=[case[0] for case in CASES],
)
def test_we_read_what_natsio_writes(
    natsio_ready: None,
    js: JetStream,
    jetstream_server: NatsServer,
    key_codec: str,
    value_codec: str,
    values: dict[str, bytes],
    pattern: str,
    matching: list[str],
) -> None:
    bucket = f"theirs-{key_codec.replace('+', '-')}"
    raw = js.create_key_value(bucket=bucket)
    natsio(
        jetstream_server.url,
        bucket=bucket,
        key_codec=key_codec,
        value_codec=value_codec,
        put={key: value.hex() for key, value in values.items()},
    )
    kv = kc.wrap(raw, key_codec=KEY_CODECS[key_codec](), value_codec=VALUE_CODECS[value_codec]())
    assert {key: kv.get(key).value for key in values} == values
    assert sorted(kv.keys()) == sorted(values)
    assert sorted(kv.keys([pattern])) == matching
    with kv.watch(pattern) as watcher:
        watched = []
        while (entry := watcher.updates(timeout=5)) is not None:
            watched.append(entry.key)
    assert sorted(watched) == matching
