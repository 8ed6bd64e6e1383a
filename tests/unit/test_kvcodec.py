"""Key and value codecs without a server: the stored forms orbit.go's kvcodec tests fix,
round trips, chains (encode first to last, decode last to first) and bad input."""

from __future__ import annotations

import zlib

import pytest

from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream import InvalidKeyError, KeyValueError
from nats_sync.jetstream import kvcodec as kc

# The stored forms orbit.go's kvcodec tests expect (codec_test.go).
BASE64_KEYS = [
    ("test.key.with.special.chars!@#$%^&*()", "dGVzdA.a2V5.d2l0aA.c3BlY2lhbA.Y2hhcnMhQCMkJV4mKigp"),
    ("Acme Inc.contact", "QWNtZSBJbmM.Y29udGFjdA"),
    ("user.123", "dXNlcg.MTIz"),
]
BASE64_FILTERS = [
    ("user.*", "dXNlcg.*"),
    ("user.>", "dXNlcg.>"),
    ("app.*.config.>", "YXBw.*.Y29uZmln.>"),
    (">", ">"),
]
PATHS = [
    ("/foo/bar", "_root_.foo.bar", "/foo/bar"),
    ("foo/bar", "foo.bar", "foo/bar"),
    ("/foo/bar/baz/qux", "_root_.foo.bar.baz.qux", "/foo/bar/baz/qux"),
    ("/foo", "_root_.foo", "/foo"),
    ("foo/bar/", "foo.bar", "foo/bar"),
    ("/", "_root_", "/"),
    ("/foo/bar/", "_root_.foo.bar", "/foo/bar"),
]
PATH_FILTERS = [
    ("/user/*", "_root_.user.*"),
    ("/user/>", "_root_.user.>"),
    ("/app/*/config/>", "_root_.app.*.config.>"),
    ("user/*", "user.*"),
]


@pytest.mark.parametrize(("key", "stored"), BASE64_KEYS)
def test_base64_keys_are_stored_token_by_token_as_orbit(key: str, stored: str) -> None:
    codec = kc.Base64Codec()
    assert codec.encode_key(key) == stored
    assert codec.decode_key(stored) == key


@pytest.mark.parametrize(("key_filter", "stored"), BASE64_FILTERS)
def test_base64_filters_keep_their_wildcard_tokens(key_filter: str, stored: str) -> None:
    assert kc.Base64Codec().encode_filter(key_filter) == stored


def test_base64_keys_take_any_character_and_only_url_safe_unpadded_base64_back() -> None:
    codec = kc.Base64Codec()
    for key in ["a b", "*", ">", "x*y.>z", "ünï.cødé", "日本.🙂", "tab\there"]:
        stored = codec.encode_key(key)
        assert set(stored) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
        )
        assert codec.decode_key(stored) == key
    # Go's RawURLEncoding takes neither padding nor the standard alphabet's + and /.
    for stored in ["YQ==", "a+b", "a/b", "Y", "YQ.!!", "_w"]:
        with pytest.raises(kc.KeyDecodeError, match="not base64"):
            codec.decode_key(stored)
    with pytest.raises(kc.KeyEncodeError, match="surrogate"):
        codec.encode_key("bad\udc80")


def test_base64_values_round_trip_and_refuse_what_is_not_base64() -> None:
    codec = kc.Base64Codec()
    for value in [b"", b"a", b"info@acme.com", bytes(range(256))]:
        stored = codec.encode_value(value)
        assert b"=" not in stored
        assert codec.decode_value(stored) == value
    assert codec.encode_value(bytes(range(10))) == b"AAECAwQFBgcICQ"
    for stored in [b"YQ==", b"\xff\xfe", b"a+/b"]:
        with pytest.raises(kc.ValueDecodeError, match="not base64"):
            codec.decode_value(stored)


@pytest.mark.parametrize(("path", "stored", "back"), PATHS)
def test_paths_are_stored_as_orbit_stores_them(path: str, stored: str, back: str) -> None:
    codec = kc.PathCodec()
    assert codec.encode_key(path) == stored
    assert codec.decode_key(stored) == back


@pytest.mark.parametrize(("path_filter", "stored"), PATH_FILTERS)
def test_path_filters_keep_their_wildcards(path_filter: str, stored: str) -> None:
    assert kc.PathCodec().encode_filter(path_filter) == stored


def test_paths_that_would_read_back_as_another_key_are_refused() -> None:
    codec = kc.PathCodec()
    with pytest.raises(kc.KeyEncodeError, match=r"holds '\.'"):
        codec.encode_key("/etc/app.conf")
    for path in ["_root_", "_root_/x"]:
        with pytest.raises(kc.KeyEncodeError, match="_root_"):
            codec.encode_key(path)
    assert codec.encode_key("x/_root_") == "x._root_"  # only a first segment is special


def test_zlib_values_round_trip_and_refuse_what_is_not_zlib() -> None:
    codec = kc.ZlibCodec(level=9)
    value = b'{"plan": "pro"}' * 100
    stored = codec.encode_value(value)
    assert len(stored) < len(value) // 10 and zlib.decompress(stored) == value
    assert codec.decode_value(codec.encode_value(b"")) == b""
    for bad in [b"", b"plain text", stored[:-3]]:
        with pytest.raises(kc.ValueDecodeError, match="not zlib"):
            codec.decode_value(bad)
    for level in [10, -2, True, 1.5, "9"]:
        with pytest.raises(InvalidArgumentError, match="level"):
            kc.ZlibCodec(level=level)  # type: ignore[arg-type]


def test_noop_changes_nothing() -> None:
    codec = kc.NoOpCodec()
    assert codec.encode_key("a.b") == codec.decode_key("a.b") == "a.b"
    assert codec.encode_filter("a.*") == "a.*"
    assert codec.encode_value(b"x") == codec.decode_value(b"x") == b"x"


class Tagged:
    """A key and value codec of a program's own, with no encode_filter."""

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def encode_key(self, key: str) -> str:
        return f"{self.tag}-{key}"

    def decode_key(self, key: str) -> str:
        if not key.startswith(f"{self.tag}-"):
            raise ValueError(f"no {self.tag}- prefix")
        return key[len(self.tag) + 1 :]

    def encode_value(self, value: bytes) -> bytes:
        return self.tag.encode() + value

    def decode_value(self, value: bytes) -> bytes:
        if not value.startswith(self.tag.encode()):
            raise ValueError(f"no {self.tag} prefix")
        return value[len(self.tag) :]


def test_chains_encode_first_to_last_and_decode_last_to_first() -> None:
    keys = kc.KeyChainCodec(Tagged("A"), Tagged("B"))
    assert keys.encode_key("test") == "B-A-test"
    assert keys.decode_key("B-A-test") == "test"
    values = kc.ValueChainCodec(Tagged("A"), Tagged("B"))
    assert values.encode_value(b"v") == b"BAv"
    assert values.decode_value(b"BAv") == b"v"
    paths = kc.KeyChainCodec(kc.PathCodec(), kc.Base64Codec())
    assert paths.encode_key("/my docs/a b") == "X3Jvb3Rf.bXkgZG9jcw.YSBi"
    assert paths.decode_key("X3Jvb3Rf.bXkgZG9jcw.YSBi") == "/my docs/a b"
    assert paths.encode_filter("/my docs/*") == "X3Jvb3Rf.bXkgZG9jcw.*"
    packed = kc.ValueChainCodec(kc.ZlibCodec(), kc.Base64Codec())
    stored = packed.encode_value(b"x" * 1000)
    assert stored.isascii() and packed.decode_value(stored) == b"x" * 1000


def test_chain_errors_name_the_codec_that_failed() -> None:
    keys = kc.KeyChainCodec(Tagged("A"), kc.Base64Codec())
    with pytest.raises(kc.KeyDecodeError, match=r"codec 1 of the chain \(Base64Codec\)"):
        keys.decode_key("not!base64")
    with pytest.raises(kc.KeyDecodeError, match=r"codec 0 of the chain \(Tagged\).*no A-"):
        keys.decode_key(kc.Base64Codec().encode_key("B-x"))
    with pytest.raises(kc.WildcardNotSupportedError, match=r"codec 0 of the chain \(Tagged\)"):
        keys.encode_filter("a.*")
    values = kc.ValueChainCodec(kc.ZlibCodec(), kc.Base64Codec())
    with pytest.raises(kc.ValueDecodeError, match=r"codec 0 of the chain \(ZlibCodec\)"):
        values.decode_value(kc.Base64Codec().encode_value(b"not zlib"))


def test_chains_refuse_what_is_not_a_codec_of_their_kind() -> None:
    with pytest.raises(InvalidArgumentError, match="at least one"):
        kc.KeyChainCodec()
    with pytest.raises(InvalidArgumentError, match="at least one"):
        kc.ValueChainCodec()
    with pytest.raises(InvalidArgumentError, match=r"codec 1 of the chain.*not a key codec"):
        kc.KeyChainCodec(kc.PathCodec(), kc.ZlibCodec())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="not a value codec"):
        kc.ValueChainCodec(kc.PathCodec())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="not a key codec"):
        kc.KeyChainCodec(kc.Base64Codec)  # type: ignore[arg-type]  # the class


def test_errors_are_of_the_one_hierarchy() -> None:
    assert issubclass(kc.CodecError, KeyValueError)
    assert issubclass(kc.KeyEncodeError, InvalidKeyError)
    assert issubclass(kc.WildcardNotSupportedError, InvalidKeyError)
    assert issubclass(kc.ValueEncodeError, ValueError)
    assert str(kc.KeyDecodeError("x")) == "nats: cannot decode key: x"
    assert isinstance(kc.Base64Codec(), kc.FilterableKeyCodec)
    assert isinstance(kc.PathCodec(), kc.KeyCodec)
    assert not isinstance(kc.ZlibCodec(), kc.KeyCodec)
    assert isinstance(kc.ZlibCodec(), kc.ValueCodec)
    assert not isinstance(Tagged("A"), kc.FilterableKeyCodec)
