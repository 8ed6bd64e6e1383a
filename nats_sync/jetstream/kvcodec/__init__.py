"""Key and value codecs for key-value buckets (ADR-54), as orbit.go's ``kvcodec`` and
interoperable with it and with natsio-kvcodec.

A codec changes what is stored without changing what a program sees: ``wrap(kv,
key_codec=..., value_codec=...)`` gives a bucket with the methods of ``KeyValue`` whose
keys, key filters and values are encoded on the way in and decoded on the way out
(entries from ``get``, ``history`` and watchers, and the keys from ``keys``). With
``Base64Codec`` as key codec a key may hold any character, spaces, ``*``, ``>`` and any
Unicode included; with ``PathCodec`` keys are paths (``/config/app/db``); with
``ZlibCodec`` as value codec values are compressed. ``KeyChainCodec`` and
``ValueChainCodec`` run codecs one after the other.

How it works: the wrapper is a thin layer on the public ``KeyValue`` (in
``_bucket``); the codecs (in ``_codecs``) are plain objects with ``encode_key`` and
``decode_key`` (and ``encode_filter``, to let filters keep their ``*`` and ``>``), or
``encode_value`` and ``decode_value``, so a class of the program's own is a codec
too. The stored forms are orbit.go's, byte for byte, so Go, natsio and this library
read each other's keys and values in one bucket.

Example:
    ```python
    from nats_sync.jetstream import kvcodec

    kv = kvcodec.wrap(js.create_key_value(bucket="contacts"),
                      key_codec=kvcodec.Base64Codec(), value_codec=kvcodec.ZlibCodec())
    kv.put("Acme Inc.contact", b"info@acme.com")  # stored as QWNtZSBJbmM.Y29udGFjdA
    print(kv.get("Acme Inc.contact").value)       # b'info@acme.com'
    ```
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nats_sync.jetstream.kvcodec._bucket import CodecKeyValue, CodecKeyWatcher
from nats_sync.jetstream.kvcodec._codecs import (
    Base64Codec,
    FilterableKeyCodec,
    KeyChainCodec,
    KeyCodec,
    NoOpCodec,
    PathCodec,
    ValueChainCodec,
    ValueCodec,
    ZlibCodec,
)
from nats_sync.jetstream.kvcodec.errors import (
    CodecError,
    KeyDecodeError,
    KeyEncodeError,
    ValueDecodeError,
    ValueEncodeError,
    WildcardNotSupportedError,
)

if TYPE_CHECKING:
    from nats_sync.jetstream._kv.bucket import KeyValue

__all__ = [
    "Base64Codec",
    "CodecError",
    "CodecKeyValue",
    "CodecKeyWatcher",
    "FilterableKeyCodec",
    "KeyChainCodec",
    "KeyCodec",
    "KeyDecodeError",
    "KeyEncodeError",
    "NoOpCodec",
    "PathCodec",
    "ValueChainCodec",
    "ValueCodec",
    "ValueDecodeError",
    "ValueEncodeError",
    "WildcardNotSupportedError",
    "ZlibCodec",
    "wrap",
]


def wrap(
    kv: KeyValue, key_codec: KeyCodec | None = None, value_codec: ValueCodec | None = None
) -> CodecKeyValue:
    """The bucket ``kv`` seen through codecs (orbit.go's ``kvcodec.New``; leave one out
    for its ``NewForKey`` or ``NewForValue``).

    Example:
        ```python
        paths = kvcodec.wrap(kv, key_codec=kvcodec.PathCodec())
        paths.put("/config/app/db", b"postgres://localhost")   # key _root_.config.app.db
        with paths.watch("/config/>") as watcher:              # filter _root_.config.>
            print(watcher.updates().key)                       # /config/app/db
        ```

    Args:
        kv: the bucket.
        key_codec: encodes and decodes keys (and filters); unchanged when None.
        value_codec: encodes and decodes values; unchanged when None.

    Returns:
        A ``CodecKeyValue``: the methods of ``KeyValue``, through the codecs.

    Raises:
        InvalidArgumentError: a codec is not one of its kind (a class instead of an
            instance, a key codec given as value codec, ...).
    """
    return CodecKeyValue(kv, key_codec, value_codec)
