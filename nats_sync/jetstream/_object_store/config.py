"""An object store's names, settings and records: what the bucket's operations
(``_object_store.store``) and its watcher (``_object_store.watch``) both use, as
``_kv.config`` is for key-value buckets.

How it works: the checks of bucket and object names, an object name's subject token,
the digest's text form, and the dataclasses of an object's info (the JSON on its meta
subject, ADR-20), a read object, a bucket's settings (with the stream config they make)
and its status. Nothing here runs on a thread of its own or keeps state between calls.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._streams.wire import check_bucket_name
from nats_sync.jetstream.api import ApiObject, StreamConfig, StreamInfo
from nats_sync.jetstream.errors import InvalidObjectNameError


def check_object_name(name: object) -> str:
    """Returns ``name`` if it is a valid object name (any non-empty str).

    Raises:
        InvalidObjectNameError: empty or not a str.
    """
    if not isinstance(name, str) or not name:
        raise InvalidObjectNameError(f"object name must be a non-empty str, got {name!r}")
    return name


def encode_name(name: str) -> str:
    """The subject token of an object name: base64url with padding (as nats.go)."""
    return base64.urlsafe_b64encode(name.encode()).decode()


def link_of(info: ObjectInfo) -> dict[str, Any] | None:
    """The ``options.link`` of a link's info (``bucket``, and ``name`` unless it links
    a whole bucket); None for an object (nats.go's ``isLink``)."""
    link = (info.options or {}).get("link")
    return link if isinstance(link, dict) else None


def digest_text(hasher: Any) -> str:
    """A finished SHA-256 as the info's ``digest`` field: ``SHA-256=<base64url>``."""
    return "SHA-256=" + base64.urlsafe_b64encode(hasher.digest()).decode()


# --- records --------------------------------------------------------------------------------


@dataclass
class ObjectInfo(ApiObject):
    """An object's info, as stored on its meta subject (object stores, ADR-20; nats.go's names).

    ``mtime`` is not stored: it is the time the info was published. ``headers`` map a
    name to its values. ``options`` holds ``link`` and ``max_chunk_size`` when set: a
    link's info has ``options["link"]`` (``{"bucket": ..., "name": ...}``, no ``name``
    for a link to a whole bucket), a new ``nuid``, no chunks and no digest.
    """

    name: str = ""
    description: str | None = None
    headers: dict[str, list[str]] | None = None
    metadata: dict[str, str] | None = None
    options: dict[str, Any] | None = None
    bucket: str = ""
    nuid: str = ""
    size: int = 0
    chunks: int = 0
    digest: str | None = None
    deleted: bool = False
    mtime: datetime | None = field(default=None, metadata={"wire": "time"})

    def to_api(self) -> dict[str, Any]:
        """The JSON stored on the meta subject (without ``mtime``, and ``deleted`` only
        when true, as nats.go writes it)."""
        out = super().to_api()
        out.pop("mtime", None)
        if not self.deleted:
            out.pop("deleted", None)
        return out


@dataclass
class ObjectResult:
    """What ``get`` returns: the object's info and its bytes (digest checked)."""

    info: ObjectInfo
    data: bytes


@dataclass
class ObjectStoreConfig:
    """A bucket's settings (``js.create_object_store(bucket, **fields)``).

    Attributes:
        bucket: the name (letters, digits, ``-``, ``_``).
        description: free text.
        ttl: seconds an object lives (None: for ever).
        max_bytes: the bucket's size limit (None: none); a put beyond it fails.
        storage: ``"file"`` or ``"memory"``.
        replicas: copies in a cluster.
        compression: store chunks compressed (s2).
        metadata: the stream's metadata.
        placement: the stream's placement (``{"cluster": ..., "tags": [...]}``).
        allow_batched: let the bucket's stream take fast-ingest batches (nats-server
            2.14+), which puts then use: chunks stored in order, no gap, an ack every
            ``flow`` chunks instead of every chunk. None: the server's default (off).
    """

    bucket: str
    description: str | None = None
    ttl: float | None = None
    max_bytes: int | None = None
    storage: str = "file"
    replicas: int = 1
    compression: bool = False
    metadata: dict[str, str] | None = None
    placement: dict[str, Any] | None = None
    allow_batched: bool | None = None

    def stream_config(self) -> StreamConfig:
        """The config of the bucket's stream."""
        bucket = check_bucket_name(self.bucket)
        if self.storage not in ("file", "memory"):
            raise InvalidArgumentError(f"storage must be 'file' or 'memory', got {self.storage!r}")
        return StreamConfig(
            name=f"OBJ_{bucket}",
            subjects=[f"$O.{bucket}.C.>", f"$O.{bucket}.M.>"],
            description=self.description,
            max_age=self.ttl,
            max_bytes=self.max_bytes,
            storage=self.storage,
            num_replicas=self.replicas,
            discard="new",
            allow_rollup_hdrs=True,
            allow_direct=True,
            compression="s2" if self.compression else None,
            metadata=self.metadata,
            placement=self.placement,
            allow_batched=self.allow_batched,
        )


@dataclass
class ObjectStoreStatus:
    """A bucket's settings and size (``obs.status()``); ``info`` is its stream's info."""

    bucket: str
    description: str | None
    ttl: float | None
    storage: str | None
    replicas: int | None
    sealed: bool
    size: int
    metadata: dict[str, str] | None
    compressed: bool
    info: StreamInfo


def store_status(bucket: str, info: StreamInfo) -> ObjectStoreStatus:
    """The status of ``bucket`` read from its stream's ``info``."""
    config = info.config
    return ObjectStoreStatus(
        bucket=bucket,
        description=config.description,
        ttl=config.max_age or None,
        storage=config.storage,
        replicas=config.num_replicas,
        sealed=bool(config.sealed),
        size=info.state.bytes,
        metadata=config.metadata,
        compressed=config.compression == "s2",
        info=info,
    )
