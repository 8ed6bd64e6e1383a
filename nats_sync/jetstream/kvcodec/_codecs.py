"""The codecs: what a key or value codec is (``KeyCodec``, ``FilterableKeyCodec``,
``ValueCodec``) and the built-in ones, stored byte for byte as orbit.go's ``kvcodec``
and natsio-kvcodec store them.

- ``Base64Codec``: keys token by token (split on ``.``, each token's UTF-8 bytes in
  URL-safe base64 without ``=`` padding, joined with ``.``), so a key keeps its tokens
  and a filter keeps its ``*`` and ``>`` tokens; values whole, in the same alphabet.
  Decoding takes only that alphabet (no ``+``, ``/`` or ``=``), as Go's
  ``base64.RawURLEncoding`` does.
- ``PathCodec`` (keys): ``/`` between segments is ``.``, a leading ``/`` is a first token
  ``_root_`` (``/`` alone is ``_root_``), a trailing ``/`` is dropped. A ``.`` in a path,
  or a first segment ``_root_``, would read back as something else, so both are refused.
- ``ZlibCodec`` (values): zlib (RFC 1950) streams, as Python's ``zlib`` writes them.
- ``NoOpCodec``: both, unchanged.
- ``KeyChainCodec``/``ValueChainCodec``: encode through each codec first to last, decode
  last to first.

A codec's methods raise :class:`~nats_sync.jetstream.kvcodec.CodecError` subclasses on
bad input; a chain says which of its codecs failed.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from typing import Protocol, runtime_checkable

from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream.kvcodec.errors import (
    CodecError,
    KeyDecodeError,
    KeyEncodeError,
    ValueDecodeError,
    ValueEncodeError,
    WildcardNotSupportedError,
)

__all__ = [
    "Base64Codec",
    "FilterableKeyCodec",
    "KeyChainCodec",
    "KeyCodec",
    "NoOpCodec",
    "PathCodec",
    "ValueChainCodec",
    "ValueCodec",
    "ZlibCodec",
]

_WILDCARDS = ("*", ">")
_RAW_URL_BASE64 = re.compile(r"[A-Za-z0-9_-]*\Z")
#: The first token of a path key that started with ``/`` (orbit.go's choice).
ROOT_TOKEN = "_root_"


@runtime_checkable
class KeyCodec(Protocol):
    """Turns the keys a program uses into the keys stored, and back.

    ``decode_key(encode_key(key)) == key`` for every key the codec takes; an encoded key
    must be a valid key (letters, digits, ``- / _ = .``, no empty token).
    """

    def encode_key(self, key: str) -> str:
        """The stored form of ``key``."""
        ...

    def decode_key(self, key: str) -> str:
        """The key a stored key stands for."""
        ...


@runtime_checkable
class FilterableKeyCodec(Protocol):
    """A key codec (``KeyCodec``) that can also encode a key filter, keeping its ``*``
    and ``>`` tokens, so watches and key listings may use wildcards through it."""

    def encode_key(self, key: str) -> str:
        """The stored form of ``key``."""
        ...

    def decode_key(self, key: str) -> str:
        """The key a stored key stands for."""
        ...

    def encode_filter(self, key_filter: str) -> str:
        """The stored form of ``key_filter``, its wildcard tokens kept."""
        ...


@runtime_checkable
class ValueCodec(Protocol):
    """Turns the values a program uses into the bytes stored, and back."""

    def encode_value(self, value: bytes) -> bytes:
        """The stored form of ``value``."""
        ...

    def decode_value(self, value: bytes) -> bytes:
        """The value stored bytes stand for."""
        ...


class NoOpCodec:
    """Keys and values unchanged (orbit.go's ``NoOpCodec``): a key, filter and value
    codec, for one side of a bucket whose other side has a codec."""

    def __repr__(self) -> str:
        return "NoOpCodec()"

    def encode_key(self, key: str) -> str:
        """``key`` itself."""
        return key

    def decode_key(self, key: str) -> str:
        """``key`` itself."""
        return key

    def encode_filter(self, key_filter: str) -> str:
        """``key_filter`` itself."""
        return key_filter

    def encode_value(self, value: bytes) -> bytes:
        """``value`` itself."""
        return value

    def decode_value(self, value: bytes) -> bytes:
        """``value`` itself."""
        return value


def _b64_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64_decode(text: str) -> bytes:
    """Raw URL-safe base64, strictly (ValueError on anything else)."""
    if not _RAW_URL_BASE64.match(text) or len(text) % 4 == 1:
        raise ValueError("not URL-safe base64 without padding")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _utf8(key: str, what: str) -> bytes:
    if not isinstance(key, str):
        raise KeyEncodeError(f"a {what} must be a str, got {type(key).__name__}")
    try:
        return key.encode("utf-8")
    except UnicodeEncodeError:
        raise KeyEncodeError(f"{what} {key!r} is not valid Unicode (a lone surrogate)") from None


class Base64Codec:
    """URL-safe base64 without padding (orbit.go's ``Base64Codec``): a key, filter and
    value codec.

    Keys are encoded token by token, so ``"Acme Inc.contact"`` is stored as
    ``"QWNtZSBJbmM.Y29udGFjdA"``: its two tokens stay two, and a token may hold any
    character (spaces, ``*``, ``>``, any Unicode). In a filter a whole ``*`` or ``>``
    token stays a wildcard. Values are encoded whole.
    """

    def __repr__(self) -> str:
        return "Base64Codec()"

    def encode_key(self, key: str) -> str:
        """Each ``.``-separated token of ``key`` in base64."""
        _utf8(key, "key")
        return ".".join(_b64_encode(token.encode("utf-8")) for token in key.split("."))

    def decode_key(self, key: str) -> str:
        """Each token of ``key`` from base64.

        Raises:
            KeyDecodeError: a token is not URL-safe base64 of UTF-8 text.
        """
        decoded = []
        for token in key.split("."):
            try:
                decoded.append(_b64_decode(token).decode("utf-8"))
            except (ValueError, binascii.Error) as err:
                raise KeyDecodeError(
                    f"key {key!r}: token {token!r} is not base64 of UTF-8 text ({err})"
                ) from None
        return ".".join(decoded)

    def encode_filter(self, key_filter: str) -> str:
        """Each token of ``key_filter`` in base64, but whole ``*`` and ``>`` tokens."""
        _utf8(key_filter, "key filter")
        return ".".join(
            token if token in _WILDCARDS else _b64_encode(token.encode("utf-8"))
            for token in key_filter.split(".")
        )

    def encode_value(self, value: bytes) -> bytes:
        """``value`` in base64."""
        return _b64_encode(value).encode("ascii")

    def decode_value(self, value: bytes) -> bytes:
        """``value`` from base64.

        Raises:
            ValueDecodeError: it is not URL-safe base64 without padding.
        """
        try:
            return _b64_decode(value.decode("ascii"))
        except (ValueError, binascii.Error) as err:
            raise ValueDecodeError(f"a value of {len(value)} bytes is not base64 ({err})") from None


class PathCodec:
    """Paths as keys (orbit.go's ``PathCodec``): ``"/config/app/db"`` is stored as
    ``"_root_.config.app.db"``, ``"config/app"`` as ``"config.app"``; a key and filter
    codec (``"/config/*"`` watches ``_root_.config.*``).

    A trailing ``/`` is dropped (``"a/b/"`` is ``"a/b"``). A ``.`` in a path, or a first
    segment ``_root_``, would read back as another key, so they are refused; chain
    ``PathCodec()`` then ``Base64Codec()`` for paths with any character in a segment.
    """

    def __repr__(self) -> str:
        return "PathCodec()"

    def encode_key(self, key: str) -> str:
        """``key`` with ``/`` as ``.``, a leading ``/`` as ``_root_``.

        Raises:
            KeyEncodeError: it holds a ``.`` or starts with the segment ``_root_``.
        """
        _utf8(key, "key")
        if "." in key:
            raise KeyEncodeError(
                f"path {key!r} holds '.', which would read back as '/' "
                "(paths separate segments with '/')"
            )
        if key.split("/", 1)[0] == ROOT_TOKEN:
            raise KeyEncodeError(
                f"path {key!r} starts with the segment {ROOT_TOKEN!r}, "
                "which stands for a leading '/'"
            )
        if key.startswith("/"):
            if key == "/":
                return ROOT_TOKEN
            key = f"{ROOT_TOKEN}.{key[1:]}"
        return key.removesuffix("/").replace("/", ".")

    def decode_key(self, key: str) -> str:
        """``key`` with ``.`` as ``/``, a first token ``_root_`` as a leading ``/``."""
        if key == ROOT_TOKEN:
            return "/"
        if key.startswith(ROOT_TOKEN + "."):
            return "/" + key[len(ROOT_TOKEN) + 1 :].replace(".", "/")
        return key.replace(".", "/")

    def encode_filter(self, key_filter: str) -> str:
        """As ``encode_key``: ``*`` and ``>`` segments stay tokens of their own."""
        return self.encode_key(key_filter)


class ZlibCodec:
    """Values compressed with zlib (natsio-kvcodec's ``ZlibValueCodec``; orbit.go has
    none): a value codec.

    Small or random values grow (a zlib stream has 6 bytes of frame); the server's own
    ``compression=True`` (S2 on disk) needs no codec when the wire size does not matter.

    Args:
        level: zlib's compression level, 0 (none) to 9 (most), or -1 for its default.
    """

    def __init__(self, level: int = -1) -> None:
        if isinstance(level, bool) or not isinstance(level, int) or not -1 <= level <= 9:
            raise InvalidArgumentError(f"level must be an int from -1 to 9, got {level!r}")
        self._level = level

    def __repr__(self) -> str:
        return f"ZlibCodec(level={self._level})"

    @property
    def level(self) -> int:
        """The compression level."""
        return self._level

    def encode_value(self, value: bytes) -> bytes:
        """``value`` compressed."""
        return zlib.compress(value, self._level)

    def decode_value(self, value: bytes) -> bytes:
        """``value`` decompressed.

        Raises:
            ValueDecodeError: it is not a whole zlib stream.
        """
        try:
            return zlib.decompress(value)
        except zlib.error as err:
            raise ValueDecodeError(
                f"a value of {len(value)} bytes is not zlib data ({err})"
            ) from None


def _failed(error: type[CodecError], index: int, codec: object, err: Exception) -> CodecError:
    detail = err.detail if isinstance(err, CodecError) else f"{type(err).__name__}: {err}"
    return error(f"codec {index} of the chain ({type(codec).__name__}): {detail}")


def _check_members(codecs: tuple[object, ...], methods: tuple[str, str], kind: str) -> None:
    if not codecs:
        raise InvalidArgumentError(f"a {kind} chain needs at least one codec")
    for index, codec in enumerate(codecs):
        if isinstance(codec, type) or not all(callable(getattr(codec, m, None)) for m in methods):
            raise InvalidArgumentError(
                f"codec {index} of the chain, {codec!r}, is not a {kind} codec "
                f"(an instance with {methods[0]} and {methods[1]})"
            )


class KeyChainCodec:
    """Key codecs one after the other (orbit.go's ``NewKeyChainCodec``): keys encoded
    through each first to last, decoded last to first.

    ``KeyChainCodec(PathCodec(), Base64Codec())`` stores ``"/my docs/a b"`` as
    ``"X3Jvb3Rf.bXkgZG9jcw.YSBi"``. Filters go through when every codec of the chain
    has ``encode_filter``.

    Args:
        *codecs: the key codecs, at least one.

    Raises:
        InvalidArgumentError: no codec, or one that is not a key codec.
    """

    def __init__(self, *codecs: KeyCodec) -> None:
        _check_members(codecs, ("encode_key", "decode_key"), "key")
        self._codecs = codecs

    def __repr__(self) -> str:
        return f"KeyChainCodec({', '.join(map(repr, self._codecs))})"

    @property
    def codecs(self) -> tuple[KeyCodec, ...]:
        """The chain's codecs, in encoding order."""
        return self._codecs

    def encode_key(self, key: str) -> str:
        """``key`` through each codec, first to last."""
        for index, codec in enumerate(self._codecs):
            try:
                key = codec.encode_key(key)
            except Exception as err:  # a codec of the user's may raise anything
                raise _failed(KeyEncodeError, index, codec, err) from err
        return key

    def decode_key(self, key: str) -> str:
        """``key`` through each codec, last to first."""
        for index in reversed(range(len(self._codecs))):
            codec = self._codecs[index]
            try:
                key = codec.decode_key(key)
            except Exception as err:
                raise _failed(KeyDecodeError, index, codec, err) from err
        return key

    def encode_filter(self, key_filter: str) -> str:
        """``key_filter`` through each codec's ``encode_filter``, first to last.

        Raises:
            WildcardNotSupportedError: a codec of the chain has no ``encode_filter``.
        """
        for index, codec in enumerate(self._codecs):
            if not isinstance(codec, FilterableKeyCodec):
                raise WildcardNotSupportedError(
                    f"codec {index} of the chain ({type(codec).__name__}) has no "
                    f"encode_filter, so the filter {key_filter!r} cannot keep its wildcards"
                )
        for index, codec in enumerate(self._codecs):
            try:
                key_filter = codec.encode_filter(key_filter)  # type: ignore[attr-defined]
            except Exception as err:
                raise _failed(KeyEncodeError, index, codec, err) from err
        return key_filter


class ValueChainCodec:
    """Value codecs one after the other (orbit.go's ``NewValueChainCodec``): values
    encoded through each first to last, decoded last to first.

    ``ValueChainCodec(ZlibCodec(), Base64Codec())`` compresses, then writes the result
    in base64.

    Args:
        *codecs: the value codecs, at least one.

    Raises:
        InvalidArgumentError: no codec, or one that is not a value codec.
    """

    def __init__(self, *codecs: ValueCodec) -> None:
        _check_members(codecs, ("encode_value", "decode_value"), "value")
        self._codecs = codecs

    def __repr__(self) -> str:
        return f"ValueChainCodec({', '.join(map(repr, self._codecs))})"

    @property
    def codecs(self) -> tuple[ValueCodec, ...]:
        """The chain's codecs, in encoding order."""
        return self._codecs

    def encode_value(self, value: bytes) -> bytes:
        """``value`` through each codec, first to last."""
        for index, codec in enumerate(self._codecs):
            try:
                value = codec.encode_value(value)
            except Exception as err:
                raise _failed(ValueEncodeError, index, codec, err) from err
        return value

    def decode_value(self, value: bytes) -> bytes:
        """``value`` through each codec, last to first."""
        for index in reversed(range(len(self._codecs))):
            codec = self._codecs[index]
            try:
                value = codec.decode_value(value)
            except Exception as err:
                raise _failed(ValueDecodeError, index, codec, err) from err
        return value
