"""``CodecKeyValue``: a ``KeyValue`` seen through a key codec and a value codec, and
``CodecKeyWatcher``, its watcher.

Every call encodes its keys (``encode_key``), filters (``encode_filter`` when they hold
a ``*`` or ``>``, as orbit.go does, else ``encode_key``; ``">"`` alone is the whole bucket
under any codec) and values on the way in, checks that the
encoded keys and filters are valid ones (naming the key as given when not), and calls
the wrapped bucket's public methods; entries, keys and values coming back are decoded.
Values of delete and purge markers, and of ``meta_only`` watches, are empty and not
decoded. A stored key or value the codecs cannot decode raises (``KeyDecodeError``,
``ValueDecodeError``) rather than being skipped or handed over encoded.

Threads: none of its own; the wrapper keeps only what it was made with, so any thread
may use it, as the bucket it wraps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, overload

from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._kv.config import KeyValueStatus, check_filter, check_key
from nats_sync.jetstream.errors import InvalidKeyError, KeyNotFoundError, NoKeysError
from nats_sync.jetstream.kvcodec._codecs import (
    FilterableKeyCodec,
    KeyCodec,
    NoOpCodec,
    ValueCodec,
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
    from nats_sync.jetstream._kv.watch import Entry, KeyWatcher

__all__ = ["CodecKeyValue", "CodecKeyWatcher"]


def _is_codec(codec: object, methods: tuple[str, str]) -> bool:
    return not isinstance(codec, type) and all(
        callable(getattr(codec, method, None)) for method in methods
    )


def _value(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgumentError(
        f"a value must be bytes, got {type(value).__name__} (encode a str first)"
    )


def _detail(err: Exception) -> str:
    return err.detail if isinstance(err, CodecError) else f"{type(err).__name__}: {err}"


class _Codecs:
    """The two codecs, with the checks and error wording every call shares."""

    def __init__(self, key_codec: KeyCodec, value_codec: ValueCodec) -> None:
        self.key = key_codec
        self.value = value_codec

    def encode_key(self, key: str, *, writing: bool = False) -> str:
        if not isinstance(key, str) or not key:
            raise InvalidKeyError(f"key must be a non-empty str, got {key!r}")
        try:
            encoded = self.key.encode_key(key)
        except CodecError:
            raise
        except Exception as err:  # a codec of the user's may raise anything
            raise KeyEncodeError(f"key {key!r}: {type(err).__name__}: {err}") from err
        try:
            return check_key(encoded, writing=writing)
        except InvalidKeyError as err:
            raise KeyEncodeError(
                f"key {key!r} encodes to {encoded!r}, which is not a valid key: {err.detail}"
            ) from None

    def encode_filter(self, key_filter: str) -> str:
        if not isinstance(key_filter, str) or not key_filter:
            raise InvalidKeyError(f"a key filter must be a non-empty str, got {key_filter!r}")
        if key_filter == ">":
            return key_filter  # the whole bucket, whatever the codec
        if "*" not in key_filter and ">" not in key_filter:
            return self.encode_key(key_filter)  # a key: encode_filter would give the same
        if not isinstance(self.key, FilterableKeyCodec):
            raise WildcardNotSupportedError(
                f"key filter {key_filter!r}: the key codec ({type(self.key).__name__}) has "
                "no encode_filter; watch '>' and pick the keys after decoding"
            )
        try:
            encoded = self.key.encode_filter(key_filter)
        except CodecError:
            raise
        except Exception as err:
            raise KeyEncodeError(f"key filter {key_filter!r}: {type(err).__name__}: {err}") from err
        try:
            return check_filter(encoded)
        except InvalidKeyError as err:
            raise KeyEncodeError(
                f"key filter {key_filter!r} encodes to {encoded!r}, which "
                f"is not a valid key filter: {err.detail}"
            ) from None

    @overload
    def encode_filters(self, filters: str | Sequence[str]) -> list[str]: ...

    @overload
    def encode_filters(self, filters: None) -> None: ...

    def encode_filters(self, filters: str | Sequence[str] | None) -> list[str] | None:
        """Each filter encoded (``encode_filter``); None stays None. What none or no
        filter means (the whole bucket) is the wrapped bucket's to say."""
        if filters is None:
            return None
        if isinstance(filters, str):
            filters = [filters]
        return [self.encode_filter(pattern) for pattern in filters]

    def decode_key(self, key: str, revision: int | None = None) -> str:
        try:
            return self.key.decode_key(key)
        except Exception as err:
            at = "" if revision is None else f" (revision {revision})"
            raise KeyDecodeError(f"stored key {key!r}{at}: {_detail(err)}") from err

    def encode_value(self, value: object) -> bytes:
        data = _value(value)
        try:
            encoded = self.value.encode_value(data)
        except CodecError:
            raise
        except Exception as err:
            raise ValueEncodeError(f"{type(err).__name__}: {err}") from err
        if not isinstance(encoded, bytes):
            raise ValueEncodeError(
                f"the value codec ({type(self.value).__name__}) returned "
                f"{type(encoded).__name__}, not bytes"
            )
        return encoded

    def decode_value(self, value: bytes, key: str, revision: int | None = None) -> bytes:
        try:
            return self.value.decode_value(value)
        except Exception as err:
            at = "" if revision is None else f" at revision {revision}"
            raise ValueDecodeError(f"the value of key {key!r}{at}: {_detail(err)}") from err

    def decode_entry(self, entry: Entry, key: str | None = None, *, values: bool = True) -> Entry:
        """``entry`` with its key decoded (or ``key``) and, for a PUT, its value."""
        plain_key = key if key is not None else self.decode_key(entry.key, entry.revision)
        value = entry.value
        if values and entry.operation == "PUT":
            value = self.decode_value(value, plain_key, entry.revision)
        return dataclasses.replace(entry, key=plain_key, value=value)


class CodecKeyWatcher:
    """A ``KeyWatcher`` whose entries come decoded; made by ``CodecKeyValue.watch``.

    ``for entry in watcher`` yields entries until ``stop()`` or the client's close;
    ``updates()`` gives one at a time, with ``None`` once at the end of the initial
    values. A context manager (``stop()`` on exit).
    """

    def __init__(self, watcher: KeyWatcher, codecs: _Codecs, *, values: bool) -> None:
        self._watcher = watcher
        self._codecs = codecs
        self._values = values

    def __repr__(self) -> str:
        return f"<nats_sync.jetstream.kvcodec.CodecKeyWatcher of {self._watcher!r}>"

    def __enter__(self) -> CodecKeyWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __iter__(self) -> Iterator[Entry]:
        for entry in self._watcher:
            yield self._codecs.decode_entry(entry, values=self._values)

    @property
    def init_done(self) -> bool:
        """Whether the end of the initial values was handed over."""
        return self._watcher.init_done

    def updates(self, timeout: float | None = 5.0) -> Entry | None:
        """The next entry, decoded; ``None`` once, at the end of the initial values.

        Args:
            timeout: seconds to wait (None: until something comes or it stops).

        Raises:
            TimeoutError: nothing new within ``timeout``.
            ConnectionClosedError: the watcher was stopped or the client closed.
            KeyDecodeError: the entry's key is not in the key codec's encoding.
            ValueDecodeError: its value is not in the value codec's encoding.
        """
        entry = self._watcher.updates(timeout)
        return None if entry is None else self._codecs.decode_entry(entry, values=self._values)

    def stop(self) -> None:
        """Ends the watch at once and removes its server-side consumer."""
        self._watcher.stop()


class CodecKeyValue:
    """A key-value bucket seen through codecs: the methods of ``KeyValue``, with keys,
    filters and values encoded on the way in and decoded on the way out.

    Made by :func:`~nats_sync.jetstream.kvcodec.wrap`. Safe from any thread.

    Args:
        kv: the bucket (``js.key_value(...)`` or ``js.create_key_value(...)``).
        key_codec: the key codec (``NoOpCodec()`` when None).
        value_codec: the value codec (``NoOpCodec()`` when None).

    Raises:
        InvalidArgumentError: ``kv`` is not a bucket, or a codec is not a codec of its
            kind (a class rather than an instance, or missing a method).
    """

    def __init__(
        self, kv: KeyValue, key_codec: KeyCodec | None = None, value_codec: ValueCodec | None = None
    ) -> None:
        for method in ("put", "get", "watch", "history", "list_keys"):
            if not callable(getattr(kv, method, None)):
                raise InvalidArgumentError(f"kv must be a KeyValue bucket, got {kv!r}")
        key_codec = NoOpCodec() if key_codec is None else key_codec
        value_codec = NoOpCodec() if value_codec is None else value_codec
        if not _is_codec(key_codec, ("encode_key", "decode_key")):
            raise InvalidArgumentError(
                f"key_codec {key_codec!r} is not a key codec (an "
                "instance with encode_key and decode_key)"
            )
        if not _is_codec(value_codec, ("encode_value", "decode_value")):
            raise InvalidArgumentError(
                f"value_codec {value_codec!r} is not a value codec "
                "(an instance with encode_value and decode_value)"
            )
        self._kv = kv
        self._codecs = _Codecs(key_codec, value_codec)

    def __repr__(self) -> str:
        return (
            f"<nats_sync.jetstream.kvcodec.CodecKeyValue {self._kv.bucket!r} "
            f"keys={self._codecs.key!r} values={self._codecs.value!r}>"
        )

    @property
    def kv(self) -> KeyValue:
        """The bucket underneath, which stores and gives the encoded keys and values."""
        return self._kv

    @property
    def key_codec(self) -> KeyCodec:
        """The key codec."""
        return self._codecs.key

    @property
    def value_codec(self) -> ValueCodec:
        """The value codec."""
        return self._codecs.value

    @property
    def bucket(self) -> str:
        """The bucket's name."""
        return self._kv.bucket

    @property
    def stream_name(self) -> str:
        """The bucket's stream."""
        return self._kv.stream_name

    # --- reading --------------------------------------------------------------------------

    def get(self, key: str, revision: int | None = None, *, timeout: float | None = None) -> Entry:
        """The key's current value, or the one stored at ``revision``, decoded.

        Raises:
            KeyNotFoundError: the key has no value (``KeyDeletedError`` when deleted or
                purged), or ``revision`` is not one of this key.
            KeyEncodeError: the key cannot be encoded.
            ValueDecodeError: the stored value is not in the value codec's encoding.
        """
        encoded = self._codecs.encode_key(key)
        try:
            entry = self._kv.get(encoded, revision, timeout=timeout)
        except KeyNotFoundError as err:  # its words name the stored key: name the key too
            raise type(err)(f"key {key!r} (stored as {encoded!r}): {err.detail}") from None
        return self._codecs.decode_entry(entry, key)

    def get_many(self, keys: Iterable[str], *, timeout: float | None = None) -> dict[str, bytes]:
        """The current value of each of ``keys`` that has one, decoded (as
        ``KeyValue.get_many``: keys with no value are left out).

        Raises:
            KeyEncodeError: a key cannot be encoded; nothing is looked up then.
            ValueDecodeError: a stored value is not in the value codec's encoding.
        """
        if isinstance(keys, (str, bytes)):
            raise InvalidArgumentError(
                f"keys must be an iterable of keys, not a single {type(keys).__name__}"
            )
        encoded = {key: self._codecs.encode_key(key) for key in keys}
        found = self._kv.get_many(list(dict.fromkeys(encoded.values())), timeout=timeout)
        return {
            key: self._codecs.decode_value(found[stored], key)
            for key, stored in encoded.items()
            if stored in found
        }

    def history(self, key: str, *, timeout: float | None = None) -> list[Entry]:
        """Every entry the bucket keeps for ``key``, oldest first, decoded.

        Raises:
            KeyNotFoundError: the bucket keeps nothing for it.
        """
        encoded = self._codecs.encode_key(key)
        try:
            entries = self._kv.history(encoded, timeout=timeout)
        except KeyNotFoundError:
            raise KeyNotFoundError(
                f"key {key!r} (stored as {encoded!r}) not found in bucket {self.bucket!r}"
            ) from None
        return [self._codecs.decode_entry(entry, key) for entry in entries]

    def keys(
        self, filters: Sequence[str] | None = None, *, timeout: float | None = None
    ) -> list[str]:
        """The keys that have a value (matching one of ``filters``), decoded.

        Raises:
            NoKeysError: there are none.
            WildcardNotSupportedError: a filter has a wildcard and the key codec has no
                ``encode_filter``.
            KeyDecodeError: a stored key is not in the key codec's encoding.
        """
        found = list(self.list_keys(filters, timeout=timeout))
        if not found:
            raise NoKeysError(
                f"no keys in bucket {self.bucket!r}"
                + (f" matching {list(filters)}" if filters else "")
            )
        return found

    def list_keys(
        self, filters: Sequence[str] | None = None, *, timeout: float | None = None
    ) -> Iterator[str]:
        """The keys that have a value (matching one of ``filters``), decoded, as they
        are read."""
        patterns = self._codecs.encode_filters(filters)
        for key in self._kv.list_keys(patterns, timeout=timeout):
            yield self._codecs.decode_key(key)

    def status(self, *, timeout: float | None = None) -> KeyValueStatus:
        """The bucket's state and settings now (sizes are of the encoded values)."""
        return self._kv.status(timeout=timeout)

    def watch(
        self,
        keys: str | Sequence[str] = ">",
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: int | None = None,
    ) -> CodecKeyWatcher:
        """Watches the keys matching ``keys``, as ``KeyValue.watch``; entries come decoded.

        A filter holding a ``*`` or ``>`` goes through the key codec's ``encode_filter``
        (``Base64Codec`` keeps whole ``*`` and ``>`` tokens and encodes the others,
        ``PathCodec`` takes ``"/config/*"``); one without goes through ``encode_key``;
        ``">"`` alone watches the whole bucket under any codec.

        Raises:
            WildcardNotSupportedError: a filter has a wildcard and the key codec has no
                ``encode_filter``.
            KeyEncodeError: a filter cannot be encoded.
        """
        watcher = self._kv.watch(
            self._codecs.encode_filters(keys),
            include_history=include_history,
            ignore_deletes=ignore_deletes,
            meta_only=meta_only,
            updates_only=updates_only,
            resume_from_revision=resume_from_revision,
        )
        return CodecKeyWatcher(watcher, self._codecs, values=not meta_only)

    def watch_all(
        self,
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: int | None = None,
    ) -> CodecKeyWatcher:
        """Watches every key (``watch(">")``, with the same options)."""
        return self.watch(
            ">",
            include_history=include_history,
            ignore_deletes=ignore_deletes,
            meta_only=meta_only,
            updates_only=updates_only,
            resume_from_revision=resume_from_revision,
        )

    # --- writing --------------------------------------------------------------------------

    def put(self, key: str, value: bytes, *, timeout: float | None = None) -> int:
        """Stores ``value`` under ``key``, both encoded; returns its revision."""
        encoded = self._codecs.encode_key(key, writing=True)
        return self._kv.put(encoded, self._codecs.encode_value(value), timeout=timeout)

    def create(
        self,
        key: str,
        value: bytes,
        *,
        ttl: float | str | None = None,
        timeout: float | None = None,
    ) -> int:
        """Stores ``value`` only if ``key`` has none, as ``KeyValue.create``.

        Raises:
            KeyWrongLastSequenceError: the key has a value.
        """
        encoded = self._codecs.encode_key(key, writing=True)
        return self._kv.create(encoded, self._codecs.encode_value(value), ttl=ttl, timeout=timeout)

    def update(self, key: str, value: bytes, last: int, *, timeout: float | None = None) -> int:
        """Stores ``value`` only if the key's latest revision is ``last``.

        Raises:
            KeyWrongLastSequenceError: the key's latest revision is another.
        """
        encoded = self._codecs.encode_key(key, writing=True)
        return self._kv.update(encoded, self._codecs.encode_value(value), last, timeout=timeout)

    def delete(self, key: str, *, last: int | None = None, timeout: float | None = None) -> None:
        """Marks ``key`` deleted, as ``KeyValue.delete``."""
        self._kv.delete(self._codecs.encode_key(key, writing=True), last=last, timeout=timeout)

    def purge(
        self, key: str, *, ttl: float | str | None = None, timeout: float | None = None
    ) -> None:
        """Marks ``key`` purged and drops its older entries, as ``KeyValue.purge``."""
        self._kv.purge(self._codecs.encode_key(key, writing=True), ttl=ttl, timeout=timeout)

    def purge_deletes(self, *, older_than: float = 1800.0, timeout: float | None = None) -> None:
        """Removes the keys whose latest entry is a marker, as ``KeyValue.purge_deletes``
        (no key is decoded: every marker of the bucket counts)."""
        self._kv.purge_deletes(older_than=older_than, timeout=timeout)
