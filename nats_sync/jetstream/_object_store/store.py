"""The object store: named objects of any size in a stream, in chunks, with a digest.

How it works (ADR-20; the layout nats.go and nats-py use, so objects move between
them): a bucket ``b`` is the stream ``OBJ_b`` on ``$O.b.C.>`` (chunks) and ``$O.b.M.>``
(object infos), with rollups, direct gets and ``discard: new``. An object is

- its chunks, published on ``$O.b.C.<nuid>`` (a fresh random id per put), and
- its info (JSON: name, size, chunks, ``SHA-256=<base64url>`` digest, ...) on
  ``$O.b.M.<base64url(name)>`` with ``Nats-Rollup: sub``, so only the latest stays.

``put`` reads the data a chunk at a time, hashing as it goes, and publishes the chunks
with ``publish_async``; at most ``OBJ_WINDOW_BYTES`` (``_defaults``) of them are unacknowledged,
so a file of any size passes through a bounded amount of memory. Only once every chunk
is acknowledged is the info published (a reader never sees an info whose chunks are not
all stored); then the chunks of the object it replaces are purged. When anything fails
(a publish refused, the file's ``read`` raising, an interrupt), the put waits for what
is still in flight and purges its own chunk subject, so no partial chunks stay.
Where the bucket's stream allows fast-ingest batches (``allow_batched``, looked up once
when the store is bound), a put is one batch with gap ``fail`` instead: the chunks,
then the info as the commit, which the stream stores only if every chunk before it
was, in order; the batch's count must be the chunks plus the info. A failure ends the
batch (waiting for the server's final ack) before the purge.
``get``/``get_into`` read the info with ``STREAM.MSG.GET`` (from the leader, so a put
just acknowledged is seen), then the chunks with ``Stream.get_msgs`` on the chunk
subject (batched direct gets; a temporary consumer when the stream has no direct gets),
hashing as they go, and check size, chunk count and digest at the end.
A link (ADR-20, as nats.go writes it) is an info with no chunks whose
``options.link`` names a bucket and, for a link to one object, the object's name:
``add_link``/``add_bucket_link`` publish one (replacing only a link or a deleted
object), ``get``/``get_into`` follow a link to an object, binding the other bucket
when it names one, and refuse a link to a whole bucket.

Threads: every call runs on the caller's thread and keeps nothing between calls but the
bound stream (``_stream``, replaced by ``status``/``seal`` under no lock: a reference
swap), so any thread may use one store at once. ``publish_async``'s acks are settled on
the context's ack threads (see ``publish``); a put only waits on their futures. A
watcher (``_object_store.watch``) reads through an ordered consumer on the thread that calls it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import secrets
import string
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from nats_sync import _defaults as d
from nats_sync import errors as core_errors
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._object_store.config import (
    ObjectInfo,
    ObjectResult,
    ObjectStoreConfig,
    ObjectStoreStatus,
    check_object_name,
    digest_text,
    encode_name,
    link_of,
    store_status,
)
from nats_sync.jetstream._object_store.watch import ObjectWatcher
from nats_sync.jetstream._publishing.fast import FastPublisher
from nats_sync.jetstream._streams.stream import Stream, bind_stream, put_stream
from nats_sync.jetstream._streams.wire import check_bucket_name
from nats_sync.jetstream.api import PubAck, StoredMsg, StreamInfo
from nats_sync.jetstream.errors import (
    BadObjectMetaError,
    BatchClosedError,
    BatchMessageError,
    BucketNotFoundError,
    DigestMismatchError,
    JetStreamError,
    MessageNotFoundError,
    ObjectDeletedError,
    ObjectNotFoundError,
    ObjectStoreError,
    StreamNotFoundError,
)

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.context_protocol import JsContext

_ROLLUP = {"Nats-Rollup": "sub"}
_NUID_ALPHABET = string.ascii_letters + string.digits


def _new_nuid() -> str:
    return "".join(secrets.choice(_NUID_ALPHABET) for _ in range(22))


# --- the store ---------------------------------------------------------------------------


class ObjectStore:
    """One bucket of objects; made by ``js.create_object_store`` or ``js.object_store``.

    Every method blocks and is safe from any thread.
    """

    def __init__(self, js: JsContext, bucket: str, stream: Stream) -> None:
        self._js = js
        self._bucket = bucket
        self._stream = stream
        #: Puts are fast-ingest batches (the stream's config, read once, when bound).
        self._fast_ingest = bool(stream.cached_info.config.allow_batched)

    def __repr__(self) -> str:
        return f"<nats_sync.jetstream.ObjectStore {self._bucket!r}>"

    @property
    def bucket(self) -> str:
        """The bucket's name."""
        return self._bucket

    @property
    def stream_name(self) -> str:
        """The name of the bucket's stream (``OBJ_<bucket>``)."""
        return self._stream.name

    def _meta_subject(self, name: str) -> str:
        return f"$O.{self._bucket}.M.{encode_name(name)}"

    def _chunk_subject(self, nuid: str) -> str:
        return f"$O.{self._bucket}.C.{nuid}"

    # --- put -------------------------------------------------------------------------

    def put(
        self,
        name: str,
        data: bytes | bytearray | memoryview | IO[bytes] | BinaryIO,
        *,
        description: str | None = None,
        headers: Mapping[str, str | Sequence[str]] | None = None,
        metadata: Mapping[str, str] | None = None,
        chunk_size: int = d.OBJ_CHUNK_SIZE,
    ) -> ObjectInfo:
        """Stores an object (replacing one of that name), a chunk at a time.

        Args:
            name: the object's name (any non-empty str).
            data: the bytes, or a binary file object read to its end (never held whole
                in memory).
            description: free text kept in the info.
            headers: name -> value or values, kept in the info.
            metadata: str -> str, kept in the info.
            chunk_size: bytes per chunk (default 128 KiB).

        Returns:
            The stored object's info.

        Raises:
            InvalidObjectNameError: the name is empty.
            InvalidArgumentError: data is neither bytes nor a readable binary file.
            APIError: the stream refused a chunk or the info (a full bucket, a sealed
                one); nothing of this put is left stored.
        """
        name = check_object_name(name)
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise InvalidArgumentError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
        reader = _reader(data)
        meta = ObjectInfo(
            name=name,
            description=description,
            headers=_headers(headers),
            metadata=_metadata(metadata),
            bucket=self._bucket,
            nuid=_new_nuid(),
            options={"max_chunk_size": chunk_size},
        )
        try:
            previous: ObjectInfo | None = self.get_info(name, show_deleted=True)
        except ObjectNotFoundError:
            previous = None
        chunk_subject = self._chunk_subject(meta.nuid)
        try:
            if self._fast_ingest:
                self._put_batch(chunk_subject, reader, chunk_size, meta)
            else:
                hasher = self._put_chunks(chunk_subject, reader, chunk_size, meta)
                meta.digest = digest_text(hasher)
                self._js.publish(self._meta_subject(name), _json(meta.to_api()), headers=_ROLLUP)
        except BaseException:
            self._purge_quietly(chunk_subject)
            raise
        meta.mtime = datetime.now(timezone.utc)
        if previous is not None and previous.nuid and previous.nuid != meta.nuid:
            self._stream.purge(subject=self._chunk_subject(previous.nuid))
        return meta

    def _put_chunks(
        self, subject: str, reader: IO[bytes], chunk_size: int, meta: ObjectInfo
    ) -> Any:
        hasher = hashlib.sha256()
        window = max(2, d.OBJ_WINDOW_BYTES // chunk_size)
        in_flight: deque[Future[PubAck]] = deque()
        try:
            while True:
                chunk = _read_chunk(reader, chunk_size)
                if not chunk:
                    break
                hasher.update(chunk)
                meta.size += len(chunk)
                meta.chunks += 1
                in_flight.append(self._js.publish_async(subject, chunk))
                while len(in_flight) >= window:
                    in_flight.popleft().result()
            while in_flight:
                in_flight.popleft().result()
        finally:
            # A failure must not leave a chunk landing after the cleanup's purge.
            for future in in_flight:
                try:
                    future.result()
                except Exception:
                    pass  # the first failure is the one being raised
        return hasher

    def _put_batch(
        self, subject: str, reader: IO[bytes], chunk_size: int, meta: ObjectInfo
    ) -> None:
        """The chunks and the info as one fast-ingest batch (gap ``fail``).

        Raises:
            APIError: the stream refused a chunk or the info (the batch stored less than
                all of them).
            ObjectStoreError: the batch ended short for another reason (a lost chunk).
        """
        window = max(2, d.OBJ_WINDOW_BYTES // chunk_size)
        refused: list[JetStreamError] = []
        batch = FastPublisher(
            self._js, flow=max(1, window // 2), max_outstanding_acks=2, error_cb=refused.append
        )
        hasher = hashlib.sha256()
        try:
            while chunk := _read_chunk(reader, chunk_size):
                hasher.update(chunk)
                meta.size += len(chunk)
                meta.chunks += 1
                batch.add(subject, chunk)
            meta.digest = digest_text(hasher)
            final = batch.commit(
                self._meta_subject(meta.name), _json(meta.to_api()), headers=_ROLLUP
            )
        except BaseException as failure:
            # Ended (the server's final ack awaited) before the purge, so that no chunk
            # of it is stored after it.
            try:
                batch.close()
            except (JetStreamError, core_errors.Error):
                pass  # what is being raised says more
            if isinstance(failure, BatchClosedError):  # the server ended it
                raise _batch_failure(refused, failure) from failure
            raise
        if final.count != meta.chunks + 1:
            raise _batch_failure(refused, None)

    def _purge_quietly(self, subject: str) -> None:
        try:
            self._stream.purge(subject=subject)
        except (JetStreamError, core_errors.Error):
            pass  # the put's own error says more; the chunks are unreferenced anyway

    # --- get -------------------------------------------------------------------------

    def get_info(self, name: str, *, show_deleted: bool = False) -> ObjectInfo:
        """An object's info (``mtime`` included).

        Raises:
            ObjectNotFoundError: no such object (or a deleted one, unless
                ``show_deleted``).
        """
        name = check_object_name(name)
        try:
            stored = self._stream.get_last_msg(self._meta_subject(name))
        except MessageNotFoundError:
            raise ObjectNotFoundError(f"no object {name!r} in bucket {self._bucket!r}") from None
        info = self._decode(stored)
        if info.deleted and not show_deleted:
            raise ObjectNotFoundError(f"object {name!r} in bucket {self._bucket!r} was deleted")
        return info

    def _decode(self, stored: StoredMsg) -> ObjectInfo:
        try:
            raw = json.loads(stored.data)
            if not isinstance(raw, dict):
                raise TypeError("not an object")
            # Some writers store a local mtime in a format of their own; the stored
            # message's time is the one ADR-20 means.
            raw.pop("mtime", None)
            info = ObjectInfo.from_api(raw)
        except (ValueError, TypeError) as error:
            raise BadObjectMetaError(
                f"the info on {stored.subject!r} cannot be read: {error}"
            ) from None
        info.mtime = stored.time
        return info

    def get(self, name: str) -> ObjectResult:
        """An object's info and bytes (the whole object in memory; see ``get_into``).

        ``name`` may be a link to an object, in this bucket or another: the result is
        then the linked object's (its info, its bytes).

        Raises:
            ObjectNotFoundError: no such object, or it was deleted (or the one a link
                names is gone).
            ObjectStoreError: ``name`` is a link to a whole bucket, not to an object.
            DigestMismatchError: the chunks read do not match the info's size, chunk
                count or SHA-256 digest.
        """
        buffer = io.BytesIO()
        info = self.get_into(name, buffer)
        return ObjectResult(info=info, data=buffer.getvalue())

    def get_into(self, name: str, fileobj: IO[bytes] | BinaryIO) -> ObjectInfo:
        """Writes an object's bytes into ``fileobj`` a chunk at a time.

        The digest can only be checked at the end: on ``DigestMismatchError`` the file
        already holds what was read. A link to an object is followed as with ``get``;
        the info returned is then the linked object's.

        Raises:
            ObjectNotFoundError: no such object, or it was deleted.
            ObjectStoreError: ``name`` is a link to a whole bucket.
            DigestMismatchError: what was read does not match the info.
        """
        write = getattr(fileobj, "write", None)
        if not callable(write):
            raise InvalidArgumentError(
                f"fileobj must be a binary file open for writing, got {type(fileobj).__name__}"
            )
        store, info = self._follow(self.get_info(name))
        hasher = hashlib.sha256()
        size = chunks = 0
        if info.chunks > 0:
            for stored in store._chunks(info):
                hasher.update(stored.data)
                size += len(stored.data)
                chunks += 1
                write(stored.data)
        digest = digest_text(hasher)
        if size != info.size or chunks != info.chunks:
            raise DigestMismatchError(
                f"object {name!r}: read {size} bytes in {chunks} chunks, its info says "
                f"{info.size} bytes in {info.chunks} chunks"
            )
        if not _same_digest(info.digest, digest):
            raise DigestMismatchError(
                f"object {name!r}: the bytes read have digest {digest}, its info says {info.digest}"
            )
        return info

    def _follow(self, info: ObjectInfo) -> tuple[ObjectStore, ObjectInfo]:
        """The store and info of the object ``info`` links to (``info`` itself when it
        is no link), as nats.go's ``Get``; a chain of links made by hand is followed
        too, a loop is refused."""
        store = self
        seen = {(self._bucket, info.name)}
        while (link := link_of(info)) is not None:
            bucket, target = link.get("bucket"), link.get("name")
            if not target:
                raise ObjectStoreError(
                    f"object {info.name!r} in bucket {store.bucket!r} is a link to the "
                    f"bucket {bucket!r}, not to an object: bind that bucket to read it"
                )
            if bucket != store.bucket:
                store = bind_object_store(self._js, str(bucket))
            if (store.bucket, target) in seen:
                raise ObjectStoreError(
                    f"the link {info.name!r} in bucket {self._bucket!r} leads back to "
                    f"{target!r} in bucket {store.bucket!r}: a loop of links"
                )
            seen.add((store.bucket, target))
            info = store.get_info(target)
        return store, info

    def _chunks(self, info: ObjectInfo) -> Iterator[StoredMsg]:
        chunk_size = int((info.options or {}).get("max_chunk_size") or d.OBJ_CHUNK_SIZE)
        batch = max(1, d.OBJ_WINDOW_BYTES // max(chunk_size, 1))
        yield from self._stream.get_msgs(
            subject=self._chunk_subject(info.nuid), batch=batch, max_bytes=d.OBJ_WINDOW_BYTES
        )

    # --- change ----------------------------------------------------------------------

    def update_meta(
        self,
        current: str,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectInfo:
        """Changes an object's name, description or metadata (None keeps each); the
        chunks stay where they are.

        Raises:
            ObjectNotFoundError: no object ``current``.
            ObjectDeletedError: it was deleted.
            ObjectStoreError: renaming onto an object that exists.
        """
        info = self.get_info(current, show_deleted=True)
        if info.deleted:
            raise ObjectDeletedError(f"object {current!r} was deleted; it cannot be updated")
        new_name = current if name is None else check_object_name(name)
        if new_name != current:
            try:
                self.get_info(new_name)
            except ObjectNotFoundError:
                pass
            else:
                raise ObjectStoreError(
                    f"cannot rename {current!r} to {new_name!r}: an object of that name exists"
                )
        info = info.replace(
            name=new_name,
            description=info.description if description is None else description,
            metadata=info.metadata if metadata is None else _metadata(metadata),
            mtime=None,
        )
        self._js.publish(self._meta_subject(new_name), _json(info.to_api()), headers=_ROLLUP)
        if new_name != current:
            self._stream.purge(subject=self._meta_subject(current))
        info.mtime = datetime.now(timezone.utc)
        return info

    def delete(self, name: str) -> ObjectInfo:
        """Deletes an object: its info is marked deleted and its chunks purged.

        Returns:
            The info as now stored (``deleted`` true, size 0).

        Raises:
            ObjectNotFoundError: no such object, or it was deleted already.
        """
        info = self.get_info(name)
        gone = info.replace(deleted=True, size=0, chunks=0, digest=None, mtime=None)
        self._js.publish(self._meta_subject(info.name), _json(gone.to_api()), headers=_ROLLUP)
        self._stream.purge(subject=self._chunk_subject(info.nuid))
        gone.mtime = datetime.now(timezone.utc)
        return gone

    # --- links -----------------------------------------------------------------------

    def add_link(self, name: str, target: ObjectInfo) -> ObjectInfo:
        """Stores ``name`` as a link to the object ``target`` (ADR-20): ``get(name)``
        then reads that object, in this bucket or the one ``target`` is in.

        ``target`` is taken as given (as nats.go does): an info read before the object
        was deleted still makes a link, which ``get`` then finds broken.

        Args:
            name: the link's name; it may replace a link or a deleted object, not an
                object.
            target: the info of the object to link to (``get_info``, ``put``, ``list``).

        Returns:
            The link's info (``options["link"]`` is ``{"bucket", "name"}``).

        Raises:
            InvalidObjectNameError: ``name`` is empty.
            InvalidArgumentError: ``target`` is not an ``ObjectInfo`` naming an object
                and its bucket.
            ObjectStoreError: ``target`` is deleted or is itself a link, or an object
                named ``name`` exists.
        """
        name = check_object_name(name)
        if not isinstance(target, ObjectInfo) or not target.name or not target.bucket:
            raise InvalidArgumentError(
                f"target must be the ObjectInfo of an object (with its name and bucket), "
                f"got {target!r}"
            )
        if target.deleted:
            raise ObjectStoreError(
                f"cannot link {name!r} to {target.name!r} in bucket {target.bucket!r}: "
                "it is deleted"
            )
        if link_of(target) is not None:
            raise ObjectStoreError(
                f"cannot link {name!r} to {target.name!r} in bucket {target.bucket!r}: "
                "it is a link itself (a link names an object)"
            )
        return self._put_link(name, {"bucket": target.bucket, "name": target.name})

    def add_bucket_link(self, name: str, bucket: ObjectStore) -> ObjectInfo:
        """Stores ``name`` as a link to the whole bucket ``bucket``, like a directory
        (ADR-20). ``get(name)`` refuses it: bind the bucket its
        ``options["link"]["bucket"]`` names to read it.

        Returns:
            The link's info (``options["link"]`` is ``{"bucket"}``).

        Raises:
            InvalidObjectNameError: ``name`` is empty.
            InvalidArgumentError: ``bucket`` is not an ``ObjectStore``.
            ObjectStoreError: an object named ``name`` exists.
        """
        name = check_object_name(name)
        if not isinstance(bucket, ObjectStore):
            raise InvalidArgumentError(
                f"bucket must be an ObjectStore (js.object_store(...)), got {bucket!r}"
            )
        return self._put_link(name, {"bucket": bucket.bucket})

    def _put_link(self, name: str, link: dict[str, str]) -> ObjectInfo:
        """Publishes the link's info, as nats.go's ``AddLink`` lays it out (ADR-20's
        rules: it replaces nothing but a link or a deleted object)."""
        try:
            existing: ObjectInfo | None = self.get_info(name, show_deleted=True)
        except ObjectNotFoundError:
            existing = None
        if existing is not None and not existing.deleted and link_of(existing) is None:
            raise ObjectStoreError(
                f"cannot store the link {name!r} in bucket {self._bucket!r}: an object of "
                "that name exists (a link replaces only a link or a deleted object)"
            )
        info = ObjectInfo(name=name, bucket=self._bucket, nuid=_new_nuid(), options={"link": link})
        self._js.publish(self._meta_subject(name), _json(info.to_api()), headers=_ROLLUP)
        info.mtime = datetime.now(timezone.utc)
        return info

    # --- bucket ----------------------------------------------------------------------

    def list(self, *, show_deleted: bool = False) -> list[ObjectInfo]:
        """The infos of the objects in the bucket (deleted ones only with
        ``show_deleted``), in the order they were last written."""
        latest: dict[str, ObjectInfo] = {}
        for stored in self._stream.get_msgs(subject=f"$O.{self._bucket}.M.>", batch=256):
            latest.pop(stored.subject, None)  # rollups keep one, but be sure: the newest
            latest[stored.subject] = self._decode(stored)
        return [info for info in latest.values() if show_deleted or not info.deleted]

    def watch(
        self,
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        updates_only: bool = False,
    ) -> ObjectWatcher:
        """Watches the bucket's infos: the current ones, then every change.

        ``updates(timeout)`` returns the next info, or None once after the current ones
        (never with ``updates_only``); iteration yields infos only.
        """
        return ObjectWatcher(
            self._js,
            self._stream,
            f"$O.{self._bucket}.M.>",
            decode=self._decode,
            include_history=include_history,
            ignore_deletes=ignore_deletes,
            updates_only=updates_only,
        )

    def seal(self) -> ObjectStoreStatus:
        """Makes the bucket read-only for good."""
        config = self._stream.info().config.replace(sealed=True)
        self._stream = put_stream(self._js, "UPDATE", config, None)
        return self._status(self._stream.cached_info)

    def status(self) -> ObjectStoreStatus:
        """The bucket's settings and size."""
        return self._status(self._stream.info())

    def _status(self, info: StreamInfo) -> ObjectStoreStatus:
        return store_status(self._bucket, info)


# --- the context's bucket calls ----------------------------------------------------------


def put_object_store(
    js: JsContext, bucket: str, fields: dict[str, Any], action: str
) -> ObjectStore:
    """Creates (``action`` "CREATE"), updates ("UPDATE") or either ("") a bucket's
    stream, with the stream config ``create_object_store`` makes (nats.go's
    ``prepareObjectStoreConfig`` for all three): an update gives it these settings whole.

    Raises:
        InvalidArgumentError: a field that ``ObjectStoreConfig`` does not have.
        BucketNotFoundError: an update of a bucket that does not exist.
    """
    try:
        config = ObjectStoreConfig(bucket=bucket, **fields)
    except TypeError as error:
        what = "create_object_store" if action == "CREATE" else "update_object_store"
        raise InvalidArgumentError(f"{what}: {error}") from None
    stream_config = config.stream_config()
    if action == "CREATE":
        stream = put_stream(js, "CREATE", stream_config, None)
    else:
        try:
            stream = put_stream(js, "UPDATE", stream_config, None)
        except StreamNotFoundError:
            if action == "UPDATE":
                raise BucketNotFoundError(f"no object store bucket {bucket!r}") from None
            stream = put_stream(js, "CREATE", stream_config, None)
    return ObjectStore(js, config.bucket, stream)


def store_names(js: JsContext, timeout: float | None) -> Iterator[str]:
    """The names of the object store buckets (streams ``OBJ_*`` storing ``$O.*.C.>``)."""
    for name in js.stream_names("$O.*.C.>", timeout):
        if isinstance(name, str) and name.startswith("OBJ_"):
            yield name[4:]


def store_statuses(js: JsContext, timeout: float | None) -> Iterator[ObjectStoreStatus]:
    """The status of every object store bucket (nats.go's ``ObjectStores``)."""
    for info in js.list_streams("$O.*.C.>", timeout):
        name = info.config.name or ""
        if name.startswith("OBJ_"):
            yield store_status(name[4:], info)


def bind_object_store(js: JsContext, bucket: str) -> ObjectStore:
    """See ``JetStream.object_store``."""
    bucket = check_bucket_name(bucket)
    try:
        stream = bind_stream(js, f"OBJ_{bucket}", None)
    except StreamNotFoundError:
        raise BucketNotFoundError(f"no object store bucket {bucket!r}") from None
    return ObjectStore(js, bucket, stream)


def delete_object_store(js: JsContext, bucket: str) -> None:
    """See ``JetStream.delete_object_store``."""
    bucket = check_bucket_name(bucket)
    try:
        js.delete_stream(f"OBJ_{bucket}")
    except StreamNotFoundError:
        raise BucketNotFoundError(f"no object store bucket {bucket!r}") from None


# --- helpers -----------------------------------------------------------------------------


def _batch_failure(
    refused: list[JetStreamError], closed: BatchClosedError | None
) -> JetStreamError:
    """Why a put's batch stored less than all of it: the stream's refusal, if it gave
    one, else the gap (or the batch's end)."""
    for error in refused:
        if isinstance(error, BatchMessageError) and error.error is not None:
            return error.error
    cause = refused[0] if refused else closed
    return ObjectStoreError(f"the object's batch ended short: {cause}")


def _reader(data: object) -> IO[bytes]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return io.BytesIO(data)
    if callable(getattr(data, "read", None)):
        return data  # type: ignore[return-value]
    raise InvalidArgumentError(
        f"data must be bytes or a binary file object, got {type(data).__name__}"
    )


def _read_chunk(reader: IO[bytes], size: int) -> bytes:
    # A raw file or a pipe may return less than asked: fill the chunk, so chunks are
    # equal whatever the source.
    chunk = reader.read(size)
    if not isinstance(chunk, (bytes, bytearray)):
        raise InvalidArgumentError(
            f"the file's read() returned {type(chunk).__name__}, not bytes: open it in 'rb'"
        )
    if not chunk or len(chunk) == size:
        return bytes(chunk)
    parts = [bytes(chunk)]
    have = len(chunk)
    while have < size:
        more = reader.read(size - have)
        if not more:
            break
        parts.append(bytes(more))
        have += len(more)
    return b"".join(parts)


def _headers(headers: Mapping[str, str | Sequence[str]] | None) -> dict[str, list[str]] | None:
    if headers is None:
        return None
    out: dict[str, list[str]] = {}
    for key, value in headers.items():
        if not isinstance(key, str) or not key:
            raise InvalidArgumentError(f"header names must be non-empty strs, got {key!r}")
        values = [value] if isinstance(value, str) else list(value)
        if not all(isinstance(item, str) for item in values):
            raise InvalidArgumentError(f"header {key!r} must be str values, got {value!r}")
        out[key] = values
    return out or None


def _metadata(metadata: Mapping[str, str] | None) -> dict[str, str] | None:
    if metadata is None:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise InvalidArgumentError(f"metadata must map str to str, got {metadata!r}")
    return dict(metadata)


def _same_digest(stored: str | None, computed: str) -> bool:
    # Compare the hash bytes: some writers leave out the base64 padding.
    if not stored or not stored.upper().startswith("SHA-256="):
        return False
    want = stored.split("=", 1)[1]
    try:
        decoded = base64.urlsafe_b64decode(want + "=" * (-len(want) % 4))
    except (ValueError, binascii.Error):
        return False
    return decoded == base64.urlsafe_b64decode(computed.split("=", 1)[1])


def _json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()
