"""The JetStream context's key-value and object store calls, as the base class
:class:`BucketCalls` that :class:`~nats_sync.jetstream.JetStream` inherits: create,
update, bind, list and delete buckets of either kind.

How it works: each method is one call of the key-value or object store modules on the
context (typed as the :class:`~nats_sync.jetstream._streams.context_protocol.JsContext`
protocol, so this module does not import ``context``), on the caller's thread. The
bucket calls are a concept of their own, apart from streams, consumers and publishing,
as the nats-py names are (``context_compat``). No thread, no state: the class has no
attributes of its own and reads none of the context's private ones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from nats_sync.jetstream._kv.bucket import (
    KeyValue,
    KeyValueConfig,
    KeyValueStatus,
    bind_bucket,
    bucket_names,
    bucket_statuses,
    delete_bucket,
    put_bucket,
)
from nats_sync.jetstream._object_store.config import ObjectStoreStatus
from nats_sync.jetstream._object_store.store import (
    ObjectStore,
    bind_object_store,
    delete_object_store,
    put_object_store,
    store_names,
    store_statuses,
)

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.context_protocol import JsContext

__all__ = ["BucketCalls"]


class BucketCalls:
    """Key-value buckets and object stores: the context's calls that make, change, bind,
    list and delete them."""

    # --- object store -----------------------------------------------------------------

    def create_object_store(self: JsContext, bucket: str, **fields: Any) -> ObjectStore:
        """Creates an object store bucket (the same settings again is fine).

        Args:
            bucket: the name (letters, digits, ``-``, ``_``).
            **fields: ``ObjectStoreConfig``'s: description, ttl (seconds), max_bytes,
                storage ("file" | "memory"), replicas, compression, metadata, placement.

        Raises:
            InvalidBucketNameError: a bad name.
            StreamNameAlreadyInUseError: the bucket exists with other settings.
        """
        return put_object_store(self, bucket, fields, "CREATE")

    def update_object_store(self: JsContext, bucket: str, **fields: Any) -> ObjectStore:
        """Changes an object store bucket's settings, keeping its objects (nats.go's
        ``UpdateObjectStore``).

        The bucket takes the settings given whole, as ``create_object_store`` makes
        them: a field not given goes back to its default.

        Raises:
            BucketNotFoundError: there is no such bucket.
            JetStreamError: a change the server refuses (the storage type, ...).
        """
        return put_object_store(self, bucket, fields, "UPDATE")

    def create_or_update_object_store(self: JsContext, bucket: str, **fields: Any) -> ObjectStore:
        """Updates an object store bucket's settings, or creates it when it does not exist."""
        return put_object_store(self, bucket, fields, "")

    def object_stores(self: JsContext, timeout: float | None = None) -> Iterator[ObjectStoreStatus]:
        """The status of every object store bucket, page by page."""
        return store_statuses(self, timeout)

    def object_store_names(self: JsContext, timeout: float | None = None) -> Iterator[str]:
        """The names of the object store buckets, page by page."""
        return store_names(self, timeout)

    def object_store(self: JsContext, bucket: str) -> ObjectStore:
        """Binds to an existing object store bucket.

        Raises:
            BucketNotFoundError: there is no such bucket.
        """
        return bind_object_store(self, bucket)

    def delete_object_store(self: JsContext, bucket: str) -> None:
        """Deletes an object store bucket and every object in it.

        Raises:
            BucketNotFoundError: there is no such bucket.
        """
        delete_object_store(self, bucket)

    # --- key-value --------------------------------------------------------------------

    def create_key_value(
        self: JsContext,
        config: KeyValueConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> KeyValue:
        """Creates a key-value bucket (the same config again is fine) and binds to it.

        Takes a :class:`KeyValueConfig` or its fields (``bucket``, ``history=1``,
        ``ttl``, ``max_value_size``, ``max_bytes``, ``storage``, ``replicas``,
        ``compression``, ``description``, ``limit_marker_ttl``, ...).

        Raises:
            InvalidBucketNameError: the bucket name is not valid.
            KeyHistoryTooLargeError: history above 64.
            StreamNameAlreadyInUseError: the bucket exists with another config.
        """
        return put_bucket(self, KeyValueConfig.build(config, fields), "CREATE", timeout)

    def update_key_value(
        self: JsContext,
        config: KeyValueConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> KeyValue:
        """Changes a key-value bucket's config, keeping its values (nats.go's
        ``UpdateKeyValue``); takes what ``create_key_value`` takes.

        The bucket takes the config whole: a field not given goes back to its default.
        To change one field only, start from the bucket's own config:
        ``js.update_key_value(kv.status().config, ttl=3600)``.

        Raises:
            BucketNotFoundError: there is no such bucket.
            KeyHistoryTooLargeError: history above 64.
            JetStreamError: a change the server refuses (the storage type, ...).
        """
        return put_bucket(self, KeyValueConfig.build(config, fields), "UPDATE", timeout)

    def create_or_update_key_value(
        self: JsContext,
        config: KeyValueConfig | None = None,
        *,
        timeout: float | None = None,
        **fields: Any,
    ) -> KeyValue:
        """Updates a key-value bucket's config, or creates the bucket when it does not exist."""
        return put_bucket(self, KeyValueConfig.build(config, fields), "", timeout)

    def key_value(self: JsContext, bucket: str, timeout: float | None = None) -> KeyValue:
        """Binds to an existing key-value bucket.

        Raises:
            BucketNotFoundError: there is no such bucket.
        """
        return bind_bucket(self, bucket, timeout)

    def delete_key_value(self: JsContext, bucket: str, timeout: float | None = None) -> None:
        """Deletes a key-value bucket and every value in it.

        Raises:
            BucketNotFoundError: there is no such bucket.
        """
        delete_bucket(self, bucket, timeout)

    def key_value_bucket_names(self: JsContext, timeout: float | None = None) -> Iterator[str]:
        """The names of the key-value buckets, page by page."""
        return bucket_names(self, timeout)

    def key_value_stores(self: JsContext, timeout: float | None = None) -> Iterator[KeyValueStatus]:
        """The status of every key-value bucket, page by page."""
        return bucket_statuses(self, timeout)
