"""Key and value codecs (``nats_sync.jetstream.kvcodec``) on buckets of a real nats-server:
round trips through each codec and chains, keys subjects cannot carry, the stored forms
seen through the bare bucket, watch/keys/history decoded, wildcard filters through the
path and base64 codecs, and bad input."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import (
    InvalidKeyError,
    JetStream,
    KeyDeletedError,
    KeyNotFoundError,
    KeyValue,
    KeyWrongLastSequenceError,
    NoKeysError,
)
from nats_sync.jetstream import kvcodec as kc
from nats_sync.testing import NatsServer

pytestmark = pytest.mark.timeout(60)

ClientFactory = Callable[..., nats_sync.Client]
#: Keys NATS subjects cannot carry, and plain ones.
ODD_KEYS = [
    "Acme Inc.contact",
    "with space",
    "star*inside",
    "a.*.b",
    "gt.>",
    "*",
    ">",
    "ünïcødé.日本.🙂",
    "tab\tand\nnewline",
    "plain-key_1=/",
]


@pytest.fixture
def js(jetstream_server: NatsServer, connect: ClientFactory) -> JetStream:
    return connect(servers=jetstream_server.url).jetstream()


def bucket(js: JetStream, name: str, **kwargs: object) -> KeyValue:
    return js.create_key_value(bucket=name, history=10, **kwargs)  # type: ignore[arg-type]


def test_base64_keys_subjects_cannot_carry_are_stored_and_read_back(js: JetStream) -> None:
    raw = bucket(js, "b64")
    kv = kc.wrap(raw, key_codec=kc.Base64Codec(), value_codec=kc.Base64Codec())
    for index, key in enumerate(ODD_KEYS):
        kv.put(key, f"value {index}".encode())
    for index, key in enumerate(ODD_KEYS):
        entry = kv.get(key)
        assert (entry.key, entry.value) == (key, f"value {index}".encode())
    assert sorted(kv.keys()) == sorted(ODD_KEYS)
    # A '*' or '>' inside a token is a character; whole '*' and '>' tokens are wildcards.
    assert kv.keys(["star*inside"]) == ["star*inside"]
    assert sorted(kv.keys(["a.*.*"])) == ["a.*.b"]
    assert sorted(kv.keys(["gt.*", "*"])) == sorted(
        ["gt.>", "*", ">", "with space", "star*inside", "plain-key_1=/", "tab\tand\nnewline"]
    )
    # Stored as orbit.go stores it: token by token, values whole.
    stored = raw.get("QWNtZSBJbmM.Y29udGFjdA")
    assert stored.value == b"dmFsdWUgMA"
    assert kv.get_many(["Acme Inc.contact", "*", "nothing here"]) == {
        "Acme Inc.contact": b"value 0",
        "*": b"value 5",
    }


def test_path_keys_and_zlib_values(js: JetStream) -> None:
    raw = bucket(js, "paths")
    kv = kc.wrap(raw, key_codec=kc.PathCodec(), value_codec=kc.ZlibCodec())
    big = b'{"url": "postgres://localhost"}' * 50
    kv.put("/config/app/db", big)
    kv.put("config/relative", b"r")
    kv.put("/", b"root")
    assert kv.get("/config/app/db").value == big
    assert len(raw.get("_root_.config.app.db").value) < len(big) // 5
    assert raw.get("config.relative").value == __import__("zlib").compress(b"r")
    assert sorted(kv.keys()) == ["/", "/config/app/db", "config/relative"]
    assert kv.get("/").value == b"root"
    assert kv.status().values == 3


def test_chained_codecs_round_trip(js: JetStream) -> None:
    raw = bucket(js, "chained")
    kv = kc.wrap(
        raw,
        key_codec=kc.KeyChainCodec(kc.PathCodec(), kc.Base64Codec()),
        value_codec=kc.ValueChainCodec(kc.ZlibCodec(), kc.Base64Codec()),
    )
    kv.put("/my docs/read me", b"hello " * 20)
    kv.put("/my docs/other", b"x")
    assert kv.get("/my docs/read me").value == b"hello " * 20
    stored = raw.get(kc.Base64Codec().encode_key("_root_.my docs.read me"))
    assert stored.key == "X3Jvb3Rf.bXkgZG9jcw.cmVhZCBtZQ" and stored.value.isascii()
    assert sorted(kv.keys(["/my docs/*"])) == ["/my docs/other", "/my docs/read me"]
    with pytest.raises(kc.KeyEncodeError, match=r"codec 0 of the chain \(PathCodec\).*'\.'"):
        kv.put("/my docs/read me.txt", b"a '.' would read back as a '/'")


def test_create_update_delete_purge_and_history_are_decoded(js: JetStream) -> None:
    raw = bucket(js, "ops")
    kv = kc.wrap(raw, key_codec=kc.Base64Codec(), value_codec=kc.ZlibCodec())
    first = kv.create("user 1", b"v1")
    with pytest.raises(KeyWrongLastSequenceError):
        kv.create("user 1", b"again")
    second = kv.update("user 1", b"v2", first)
    with pytest.raises(KeyWrongLastSequenceError):
        kv.update("user 1", b"v3", first)
    assert kv.get("user 1", first).value == b"v1"
    kv.delete("user 1", last=second)
    with pytest.raises(KeyDeletedError, match="'user 1'"):
        kv.get("user 1")
    kv.create("user 1", b"back")  # a create after a delete
    history = kv.history("user 1")
    assert [(e.key, e.value, e.operation) for e in history] == [
        ("user 1", b"v1", "PUT"),
        ("user 1", b"v2", "PUT"),
        ("user 1", b"", "DEL"),
        ("user 1", b"back", "PUT"),
    ]
    kv.purge("user 1")
    assert [(e.key, e.operation) for e in kv.history("user 1")] == [("user 1", "PURGE")]
    with pytest.raises(NoKeysError):
        kv.keys()
    kv.purge_deletes(older_than=0)
    with pytest.raises(KeyNotFoundError, match="'user 1'"):
        kv.history("user 1")


def test_watch_gives_decoded_entries_and_wildcards_go_through_filterable_codecs(
    js: JetStream,
) -> None:
    raw = bucket(js, "watched")
    kv = kc.wrap(raw, key_codec=kc.Base64Codec(), value_codec=kc.ZlibCodec())
    kv.put("orders.1 a", b"first")
    kv.put("users.x", b"not an order")
    with kv.watch("orders.>") as watcher:
        entry = watcher.updates(timeout=5)
        assert entry is not None and (entry.key, entry.value) == ("orders.1 a", b"first")
        assert watcher.updates(timeout=5) is None and watcher.init_done
        kv.put("orders.2 b", b"second")
        kv.delete("orders.1 a")
        kv.put("users.y", b"not seen")
        changes = [watcher.updates(timeout=5) for _ in range(2)]
        assert [(e.key, e.value, e.operation) for e in changes if e] == [
            ("orders.2 b", b"second", "PUT"),
            ("orders.1 a", b"", "DEL"),
        ]
    with kv.watch(["*.x", "orders.2 b"], meta_only=True) as watcher:
        seen = {e.key: e.value for e in [watcher.updates(timeout=5) for _ in range(2)] if e}
        assert seen == {"users.x": b"", "orders.2 b": b""}  # meta_only: nothing to decode
    with kv.watch_all(include_history=True, ignore_deletes=True) as watcher:
        got = []
        for entry in watcher:
            got.append(entry.key)
            if len(got) == 4:
                break
    assert sorted(got) == ["orders.1 a", "orders.2 b", "users.x", "users.y"]
    assert sorted(kv.keys(["orders.*"])) == ["orders.2 b"]


def test_path_wildcard_filters(js: JetStream) -> None:
    kv = kc.wrap(bucket(js, "pathwatch"), key_codec=kc.PathCodec())
    for path in ["/app/a/config", "/app/b/config", "/app/b/other", "rel/app"]:
        kv.put(path, path.encode())
    assert sorted(kv.keys(["/app/*/config"])) == ["/app/a/config", "/app/b/config"]
    assert sorted(kv.keys(["/app/>"])) == ["/app/a/config", "/app/b/config", "/app/b/other"]
    assert kv.keys(["rel/*"]) == ["rel/app"]
    with kv.watch("/app/b/>") as watcher:
        got = {e.key for e in [watcher.updates(timeout=5) for _ in range(2)] if e}
    assert got == {"/app/b/config", "/app/b/other"}


class Prefixed:
    """A key codec of a program's own, with no encode_filter."""

    def encode_key(self, key: str) -> str:
        return f"p_{key}"

    def decode_key(self, key: str) -> str:
        return key.removeprefix("p_")


def test_a_codec_without_encode_filter_takes_keys_but_no_wildcards(js: JetStream) -> None:
    kv = kc.wrap(bucket(js, "custom"), key_codec=Prefixed())
    kv.put("a.b", b"1")
    assert kv.keys(["a.b"]) == ["a.b"]
    assert kv.get("a.b").value == b"1"
    for pattern in ["a.*", "*", "a.>"]:
        with pytest.raises(kc.WildcardNotSupportedError, match="no encode_filter"):
            kv.watch(pattern)
    with pytest.raises(kc.WildcardNotSupportedError):
        kv.keys(["a.>"])
    with kv.watch() as watcher:  # ">" alone is the whole bucket, whatever the codec
        entry = watcher.updates(timeout=5)
        assert entry is not None and entry.key == "a.b"
    with kv.watch([]) as watcher:  # no filter: the whole bucket, as KeyValue.watch says
        entry = watcher.updates(timeout=5)
        assert entry is not None and entry.key == "a.b"
    assert kv.keys() == ["a.b"] and kv.kv.keys() == ["p_a.b"]


def test_foreign_data_raises_rather_than_passing_through(js: JetStream) -> None:
    raw = bucket(js, "foreign")
    raw.put("YQ", b"not zlib")
    raw.put("a/b", b"x")  # "/" is no URL-safe base64
    kv = kc.wrap(raw, key_codec=kc.Base64Codec(), value_codec=kc.ZlibCodec())
    with pytest.raises(kc.ValueDecodeError, match=r"key 'a' at revision 1.*not zlib"):
        kv.get("a")
    with pytest.raises(kc.KeyDecodeError, match="'a/b'"):
        kv.keys()
    with kv.watch("a") as watcher, pytest.raises(kc.ValueDecodeError):
        watcher.updates(timeout=5)


def test_bad_input_gets_clear_errors(js: JetStream) -> None:
    raw = bucket(js, "bad")
    b64 = kc.wrap(raw, key_codec=kc.Base64Codec())
    paths = kc.wrap(raw, key_codec=kc.PathCodec())
    with pytest.raises(InvalidKeyError, match="non-empty str"):
        b64.put("", b"x")
    with pytest.raises(kc.KeyEncodeError, match=r"'a\.\.b' encodes to 'YQ\.\.Yg'"):
        b64.put("a..b", b"x")
    with pytest.raises(kc.KeyEncodeError, match=r"holds '\.'"):
        paths.put("/etc/app.conf", b"x")
    with pytest.raises(kc.KeyEncodeError, match=r"'/a//b' encodes to '_root_\.a\.\.b'"):
        paths.put("/a//b", b"x")
    with pytest.raises(kc.KeyEncodeError, match=r"'/a/\*' encodes to"):
        paths.put("/a/*", b"x")  # a wildcard is no key
    with pytest.raises(InvalidArgumentError, match="must be bytes"):
        b64.put("k", "text")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="single str"):
        b64.get_many("k")
    with pytest.raises(InvalidArgumentError, match="not a value codec"):
        kc.wrap(raw, value_codec=kc.PathCodec())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="not a key codec"):
        kc.wrap(raw, key_codec=kc.ZlibCodec())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="not a key codec"):
        kc.wrap(raw, key_codec=kc.Base64Codec)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="must be a KeyValue"):
        kc.wrap(js, key_codec=kc.Base64Codec())  # type: ignore[arg-type]
    with pytest.raises(KeyNotFoundError, match=r"key 'never set' \(stored as 'bmV2ZXIgc2V0'\)"):
        b64.get("never set")
    assert "Base64Codec()" in repr(b64) and b64.bucket == "bad" and b64.kv is raw
