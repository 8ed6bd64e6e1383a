"""Key-value buckets on JetStream: bucket management and ``KeyValue`` (ADR-8). The
name checks, ``KeyValueConfig`` and ``KeyValueStatus`` are in ``_kv.config`` (imported
here, so this module still has them).

How it works: a bucket ``b`` is the stream ``KV_b`` storing ``$KV.b.>``; a key is the
subject ``$KV.b.<key>`` and a revision is the stream sequence of its message. ``put``
is a JetStream publish; ``create`` and ``update`` add
``Nats-Expected-Last-Subject-Sequence`` (0 for create), so the stream itself decides a
compare-and-swap. ``delete`` and ``purge`` store markers (``KV-Operation: DEL``, or
``PURGE`` with ``Nats-Rollup: sub``, which drops the key's older values). A bucket made
with ``limit_marker_ttl`` (ADR-48) is a stream with ``allow_msg_ttl`` and
``subject_delete_marker_ttl``: ``create`` and ``purge`` may then carry a ``Nats-TTL``,
and the server leaves a marker (``Nats-Marker-Reason``) when age removes a key's last
value, which ``get`` and watchers read as a purge (``operation_of``). ``get`` asks
``DIRECT.GET`` (any replica answers) when the bucket allows direct gets, else the
stream leader through ``STREAM.MSG.GET`` (buckets made by nats-py's legacy
``create_key_value`` have no ``allow_direct``). ``get_many`` reads many keys with
pipelined batched direct gets (``_kv.many``), or ``get`` by ``get`` where there are
none. ``history`` reads the key's messages
with ``Stream.get_msgs``; ``keys``/``list_keys``/``purge_deletes`` run a
``KeyWatcher`` (``_kv.watch``) filtered on the server, headers only.

Threads: everything runs on the caller's thread; nothing here starts one (a watcher
reads on its caller's thread too). A ``KeyValue`` keeps its names and the stream info
it was bound with, never written after ``__init__``, and one flag, ``_batched``, which
``get_many`` turns off (a plain store, never back on) when the server or bucket turns
out to have no batched direct gets; so any thread may use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nats_sync import _defaults as d
from nats_sync import errors as core_errors
from nats_sync._core.validate import check_timeout
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._kv.config import (
    MAX_HISTORY,  # noqa: F401 (kv.MAX_HISTORY, as before the move)
    KeyValueConfig,
    KeyValueStatus,
    bad_int,
    bucket_status,
    check_filter,
    check_key,
    origin_of,
    stream_name,
)
from nats_sync.jetstream._kv.many import NoBatchedGetsError, latest_values
from nats_sync.jetstream._kv.watch import Entry, KeyWatcher, operation_of
from nats_sync.jetstream._streams.ranges import stored_from_direct
from nats_sync.jetstream._streams.stream import Stream, put_stream, stored_msg_from_api
from nats_sync.jetstream._streams.wire import check_bucket_name
from nats_sync.jetstream.api import StoredMsg, StreamInfo
from nats_sync.jetstream.errors import (
    BadBucketError,
    BucketNotFoundError,
    KeyDeletedError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    LimitMarkersNotSupportedError,
    MessageNotFoundError,
    NoKeysError,
    StatusError,
    StreamNotFoundError,
    WrongLastSequenceError,
)

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.context_protocol import JsContext

__all__ = ["Entry", "KeyValue", "KeyValueConfig", "KeyValueStatus", "KeyWatcher"]

_OPERATION = "KV-Operation"


# --- bucket management (the context's methods call these) -------------------------------


def put_bucket(
    js: JsContext, config: KeyValueConfig, action: str, timeout: float | None
) -> KeyValue:
    """Creates (``action`` "CREATE"), updates ("UPDATE") or either ("") the bucket's
    stream, with the stream config ``create`` makes (nats.go's ``prepareKeyValueConfig``
    for all three): an update gives the bucket this config whole.

    Raises:
        BucketNotFoundError: an update of a bucket that does not exist.
        LimitMarkersNotSupportedError: ``limit_marker_ttl`` on a server below API level 1.
        JetStreamError: what the server refused (a change it does not allow, such as
            the storage type).
    """
    stream_config = config.to_stream_config()
    if stream_config.subject_delete_marker_ttl and js.api_level(timeout) < 1:
        raise LimitMarkersNotSupportedError(
            "limit_marker_ttl needs nats-server 2.11+ (JetStream API level 1)"
        )
    if action == "CREATE":
        stream = put_stream(js, "CREATE", stream_config, timeout)
    else:
        try:
            stream = put_stream(js, "UPDATE", stream_config, timeout)
        except StreamNotFoundError:
            if action == "UPDATE":
                raise BucketNotFoundError(f"no key-value bucket {config.bucket!r}") from None
            stream = put_stream(js, "CREATE", stream_config, timeout)
    return KeyValue(js, config.bucket, stream.cached_info)


def bind_bucket(js: JsContext, bucket: str, timeout: float | None) -> KeyValue:
    """Binds to an existing bucket.

    Raises:
        BucketNotFoundError: there is no such bucket.
        BadBucketError: the stream is not a key-value bucket.
    """
    bucket = check_bucket_name(bucket)
    try:
        info = js.stream_info(stream_name(bucket), timeout=timeout)
    except StreamNotFoundError:
        raise BucketNotFoundError(f"no key-value bucket {bucket!r}") from None
    if (info.config.max_msgs_per_subject or 0) < 1:
        raise BadBucketError(f"stream {stream_name(bucket)!r} is not a key-value bucket")
    return KeyValue(js, bucket, info)


def delete_bucket(js: JsContext, bucket: str, timeout: float | None) -> None:
    """Deletes a bucket and every value in it.

    Raises:
        BucketNotFoundError: there is no such bucket.
    """
    try:
        js.delete_stream(stream_name(check_bucket_name(bucket)), timeout=timeout)
    except StreamNotFoundError:
        raise BucketNotFoundError(f"no key-value bucket {bucket!r}") from None


def bucket_names(js: JsContext, timeout: float | None) -> Iterator[str]:
    """The names of the key-value buckets (streams ``KV_*`` storing ``$KV.*.>``)."""
    for name in js.stream_names("$KV.*.>", timeout):
        if isinstance(name, str) and name.startswith("KV_"):
            yield name[3:]


def bucket_statuses(js: JsContext, timeout: float | None) -> Iterator[KeyValueStatus]:
    """The status of every key-value bucket (nats.go's ``KeyValueStores``), page by page."""
    for info in js.list_streams("$KV.*.>", timeout):
        name = info.config.name or ""
        if name.startswith("KV_"):
            yield bucket_status(name[3:], info)


def _key_prefixes(js: JsContext, bucket: str, info: StreamInfo) -> tuple[str, str]:
    """The subject prefixes of a bucket's keys: as stored (read), and as put (ADR-8).

    A mirror stores the keys of the bucket it mirrors and takes no puts: they go to
    that bucket, through the API prefix of its domain where it names one. A context on
    another domain or API prefix puts through it (``$JS.<domain>.API.$KV.<bucket>.``,
    which the server maps to the domain's ``$KV.<bucket>.``).
    """
    origin = origin_of(info)
    read = f"$KV.{origin[0] if origin else bucket}."
    if origin is not None and origin[1]:
        return read, f"{origin[1]}.{read}"
    if js.api.prefix != d.DEFAULT_JS_API_PREFIX:
        return read, f"{js.api.prefix}.{read}"
    return read, read


# --- a bucket ------------------------------------------------------------------------------


class KeyValue:
    """A key-value bucket; made by ``js.create_key_value`` and ``js.key_value``.

    Every method blocks and is safe from any thread. Values are bytes.
    """

    def __init__(self, js: JsContext, bucket: str, info: StreamInfo) -> None:
        self._js = js
        self._bucket = bucket
        self._stream = Stream(js, info)
        self._prefix, self._put_prefix = _key_prefixes(js, bucket, info)
        self._direct = bool(info.config.allow_direct)
        self._batched = self._direct  # until the server says otherwise (get_many)

    def __repr__(self) -> str:
        return f"<nats_sync.jetstream.KeyValue {self._bucket!r}>"

    @property
    def bucket(self) -> str:
        """The bucket's name."""
        return self._bucket

    @property
    def stream_name(self) -> str:
        """The bucket's stream."""
        return self._stream.name

    # --- reading --------------------------------------------------------------------------

    def get(self, key: str, revision: int | None = None, *, timeout: float | None = None) -> Entry:
        """The key's current value, or the one stored at ``revision``.

        Raises:
            KeyNotFoundError: the key has no value (never set, or deleted or purged:
                then a ``KeyDeletedError``), or ``revision`` is not one of this key.
        """
        entry = self._get_entry(key, revision, timeout)
        if entry.operation != "PUT":
            raise KeyDeletedError(
                f"key {key!r} in bucket {self._bucket!r} was deleted "
                f"(revision {entry.revision}, {entry.operation})"
            )
        return entry

    def _get_entry(self, key: str, revision: int | None, timeout: float | None) -> Entry:
        """The key's latest entry (markers included), or the one at ``revision``."""
        subject = self._prefix + check_key(key)
        if revision is not None and bad_int(revision, 1):
            raise InvalidArgumentError(f"revision must be an int >= 1, got {revision!r}")
        stored: StoredMsg | None = None
        if self._direct:
            stored = self._direct_get(subject, revision, timeout)
        if stored is None:
            stored = self._leader_get(subject, revision, timeout)
        if stored.subject != subject:
            raise KeyNotFoundError(
                f"revision {revision} of bucket {self._bucket!r} is not of key {key!r}"
            )
        return Entry(
            bucket=self._bucket,
            key=key,
            value=stored.data,
            revision=stored.seq,
            delta=0,
            created=stored.time,
            operation=operation_of(stored.headers),
        )

    def _direct_get(
        self, subject: str, revision: int | None, timeout: float | None
    ) -> StoredMsg | None:
        """The message by direct get; None when nobody answers direct gets."""
        api = self._js.api
        if revision is None:
            call, payload = api.subject(f"DIRECT.GET.{self._stream.name}.{subject}"), b""
        else:
            call = api.subject(f"DIRECT.GET.{self._stream.name}")
            payload = b'{"seq":%d}' % revision
        try:
            reply = self._js.client.request(call, payload, timeout=timeout or self._js.timeout)
        except core_errors.NoRespondersError:
            return None  # direct gets were turned off since the bind
        if reply.status == d.STATUS_NOT_FOUND:
            raise KeyNotFoundError(self._not_found(subject, revision))
        if reply.status is not None:
            raise StatusError(status=reply.status, description=reply.description)
        return stored_from_direct(self._stream.name, reply)

    def _leader_get(self, subject: str, revision: int | None, timeout: float | None) -> StoredMsg:
        body: dict[str, Any] = {"last_by_subj": subject} if revision is None else {"seq": revision}
        try:
            reply = self._js.api.request(f"STREAM.MSG.GET.{self._stream.name}", body, timeout)
        except MessageNotFoundError:
            raise KeyNotFoundError(self._not_found(subject, revision)) from None
        return stored_msg_from_api(self._stream.name, reply.get("message") or {})

    def _not_found(self, subject: str, revision: int | None) -> str:
        key = subject[len(self._prefix) :]
        at = "" if revision is None else f" at revision {revision}"
        return f"key {key!r} not found in bucket {self._bucket!r}{at}"

    def get_many(self, keys: Iterable[str], *, timeout: float | None = None) -> dict[str, bytes]:
        """The current value of each of ``keys`` that has one, in few round trips.

        Keys never set, deleted or purged are left out of the result; a key given more
        than once is looked up once. Where the server has batched direct gets (API level
        1, nats-server 2.11+) and the bucket allows direct gets, the keys go 1,024 to a
        request, four requests in flight, each answered from one snapshot of the stream;
        otherwise they are read with one ``get`` each.

        Example:
            ```python
            prices = kv.get_many(["sku-1", "sku-2", "sku-3"])
            price = prices.get("sku-2")  # None: no value
            ```

        Args:
            keys: the keys to look up (an iterable of str, not a single str).
            timeout: seconds to wait for each answer (the context's timeout when None).

        Returns:
            A dict from each key that has a value to that value.

        Raises:
            InvalidKeyError: a key is not valid (the message names it); nothing is
                looked up then.
            InvalidArgumentError: ``keys`` is a single str or bytes, or ``timeout`` is
                not a positive number.
            TimeoutError: the server did not answer within ``timeout``.
        """
        if isinstance(keys, (str, bytes)):
            raise InvalidArgumentError(
                f"keys must be an iterable of keys, not a single {type(keys).__name__}"
            )
        if timeout is not None:
            check_timeout(timeout)
        wanted = list(dict.fromkeys(check_key(key) for key in keys))
        wait = float(timeout or self._js.timeout)
        if wanted and self._batched and self._js.api_level(wait) >= 1:
            try:
                return latest_values(
                    self._js, self._bucket, self._prefix, self._stream.name, wanted, wait
                )
            except NoBatchedGetsError:
                self._batched = False
        values: dict[str, bytes] = {}
        for key in wanted:
            try:
                values[key] = self.get(key, timeout=wait).value
            except KeyNotFoundError:  # never set, deleted or purged
                continue
        return values

    def history(self, key: str, *, timeout: float | None = None) -> list[Entry]:
        """Every entry the bucket keeps for ``key``, oldest first (markers included).

        Raises:
            KeyNotFoundError: the bucket keeps nothing for it.
        """
        subject = self._prefix + check_key(key)
        stored = list(self._stream.get_msgs(1, subject=subject, timeout=timeout))
        if not stored:
            raise KeyNotFoundError(self._not_found(subject, None))
        last = len(stored) - 1
        return [
            Entry(
                bucket=self._bucket,
                key=key,
                value=msg.data,
                revision=msg.seq,
                delta=last - index,
                created=msg.time,
                operation=operation_of(msg.headers),
            )
            for index, msg in enumerate(stored)
        ]

    def keys(
        self, filters: Sequence[str] | None = None, *, timeout: float | None = None
    ) -> list[str]:
        """The keys that have a value (matching one of ``filters`` when given).

        Raises:
            NoKeysError: there are none (as nats-py and nats.go).
        """
        found = list(self.list_keys(filters, timeout=timeout))
        if not found:
            raise NoKeysError(
                f"no keys in bucket {self._bucket!r}"
                + (f" matching {list(filters)}" if filters else "")
            )
        return found

    def list_keys(
        self, filters: Sequence[str] | None = None, *, timeout: float | None = None
    ) -> Iterator[str]:
        """The keys that have a value (matching one of ``filters``), as they are read.

        The server filters: only the last entry of each matching key is sent, headers
        only. Nothing when there are none.
        """
        patterns = self._filters(filters)
        seen: set[str] = set()
        for entry in self._scan(patterns, ignore_deletes=True, timeout=timeout):
            if entry.key not in seen:
                seen.add(entry.key)
                yield entry.key

    def _filters(self, filters: Sequence[str] | str | None) -> list[str]:
        if filters is None:
            return [">"]
        if isinstance(filters, str):
            filters = [filters]
        patterns = [check_filter(pattern) for pattern in filters]
        return patterns or [">"]

    def _scan(
        self, patterns: list[str], *, ignore_deletes: bool, timeout: float | None
    ) -> Iterator[Entry]:
        """The last entry of every key matching ``patterns``, headers only."""
        watcher = self.watch(patterns, ignore_deletes=ignore_deletes, meta_only=True)
        wait = timeout or self._js.timeout
        with watcher:
            while True:
                entry = watcher.updates(timeout=wait)
                if entry is None:
                    return
                yield entry

    def status(self, *, timeout: float | None = None) -> KeyValueStatus:
        """The bucket's state and settings now."""
        return bucket_status(self._bucket, self._stream.info(timeout=timeout))

    def watch(
        self,
        keys: str | Sequence[str] = ">",
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: int | None = None,
    ) -> KeyWatcher:
        """Watches the keys matching ``keys`` (one filter or several).

        The watcher first gives the current entry of each matching key (every kept
        entry with ``include_history``), then ``None`` once from ``updates()`` (not
        with ``updates_only``), then every change as it is stored. It survives
        reconnects and server restarts, resuming after the last revision it gave.

        With ``resume_from_revision=n`` it starts at revision ``n`` instead: every
        entry of a matching key stored at ``n`` or later that the bucket still keeps,
        oldest first, then ``None`` once when it has caught up (as nats.go's
        ``ResumeFromRevision``: a consumer by start sequence ``n``). A watcher
        restarted with the last revision it handled plus one misses nothing and
        repeats nothing:

        ```python
        with kv.watch_all(resume_from_revision=last_seen + 1) as watcher:
            for entry in watcher:
                last_seen = entry.revision
        ```

        Args:
            keys: key filters (``*`` for a token, a final ``>`` for the rest).
            include_history: start with every kept entry, not just the latest.
            ignore_deletes: leave out delete and purge markers.
            meta_only: leave out the values (headers only).
            updates_only: only changes stored after the watch began (with
                ``resume_from_revision``: from that revision on, and no ``None``).
            resume_from_revision: the first revision to give (an int >= 1); it may
                be one not stored yet.

        Raises:
            InvalidArgumentError: ``include_history`` with ``updates_only``, or a
                ``resume_from_revision`` that is not an int >= 1.
            InvalidKeyError: a key filter is not valid.
        """
        if resume_from_revision is not None and bad_int(resume_from_revision, 1):
            raise InvalidArgumentError(
                f"resume_from_revision must be a revision (an int >= 1), "
                f"got {resume_from_revision!r}"
            )
        subjects = [self._prefix + pattern for pattern in self._filters(keys)]
        return KeyWatcher(
            self._js,
            self._bucket,
            self._prefix,
            self._stream.name,
            subjects,
            include_history=include_history,
            ignore_deletes=ignore_deletes,
            meta_only=meta_only,
            updates_only=updates_only,
            resume_from_revision=resume_from_revision,
        )

    def watch_all(
        self,
        *,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        updates_only: bool = False,
        resume_from_revision: int | None = None,
    ) -> KeyWatcher:
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
        """Stores ``value`` under ``key``; returns its revision."""
        subject = self._put_prefix + check_key(key, writing=True)
        return self._js.publish(subject, _value(value), timeout=timeout).seq

    def create(
        self,
        key: str,
        value: bytes,
        *,
        ttl: float | str | None = None,
        timeout: float | None = None,
    ) -> int:
        """Stores ``value`` only if ``key`` has none (never set, deleted or purged).

        Args:
            ttl: seconds (>= 1) the value lives, or ``"never"``; the bucket needs
                ``limit_marker_ttl`` (key TTLs, ADR-48). When it ends the key reads as purged.

        Raises:
            KeyWrongLastSequenceError: the key has a value.
            MsgTTLDisabledError: ``ttl`` on a bucket without limit markers.
        """
        subject = self._put_prefix + check_key(key, writing=True)
        data = _value(value)
        try:
            return self._js.publish(
                subject, data, timeout=timeout, expected_last_subject_seq=0, ttl=ttl
            ).seq
        except WrongLastSequenceError as err:
            try:
                latest = self._get_entry(key, None, timeout)
            except KeyNotFoundError:
                raise _cas_lost(err, key, self._bucket) from None  # purged meanwhile
            if latest.operation == "PUT":
                raise _cas_lost(err, key, self._bucket) from None
        # Deleted or purged: a create is an update on the marker's revision.
        return self._update(subject, key, data, latest.revision, timeout, ttl)

    def update(self, key: str, value: bytes, last: int, *, timeout: float | None = None) -> int:
        """Stores ``value`` only if the key's latest revision is ``last``
        (compare-and-swap); returns the new revision.

        Raises:
            KeyWrongLastSequenceError: the key's latest revision is another.
        """
        subject = self._put_prefix + check_key(key, writing=True)
        if bad_int(last, 0):
            raise InvalidArgumentError(f"last must be a revision (an int >= 0), got {last!r}")
        return self._update(subject, key, _value(value), last, timeout, None)

    def _update(
        self,
        subject: str,
        key: str,
        data: bytes,
        last: int,
        timeout: float | None,
        ttl: float | str | None,
    ) -> int:
        try:
            return self._js.publish(
                subject, data, timeout=timeout, expected_last_subject_seq=last, ttl=ttl
            ).seq
        except WrongLastSequenceError as err:
            raise _cas_lost(err, key, self._bucket) from None

    def delete(self, key: str, *, last: int | None = None, timeout: float | None = None) -> None:
        """Marks ``key`` deleted (its history stays); with ``last``, only if its latest
        revision is ``last``.

        Raises:
            KeyWrongLastSequenceError: ``last`` was given and is not the latest revision.
        """
        self._marker(key, "DEL", last, timeout)

    def purge(
        self, key: str, *, ttl: float | str | None = None, timeout: float | None = None
    ) -> None:
        """Marks ``key`` purged and drops every older entry it had.

        Args:
            ttl: seconds (>= 1) the purge marker itself lives, so the key leaves the
                bucket for good afterwards; the bucket needs ``limit_marker_ttl``.

        Raises:
            MsgTTLDisabledError: ``ttl`` on a bucket without limit markers.
        """
        self._marker(key, "PURGE", None, timeout, ttl)

    def _marker(
        self,
        key: str,
        operation: str,
        last: int | None,
        timeout: float | None,
        ttl: float | str | None = None,
    ) -> None:
        subject = self._put_prefix + check_key(key, writing=True)
        if last is not None and bad_int(last, 0):
            raise InvalidArgumentError(f"last must be a revision (an int >= 0), got {last!r}")
        headers = {_OPERATION: operation}
        if operation == "PURGE":
            headers["Nats-Rollup"] = "sub"
        try:
            self._js.publish(
                subject,
                b"",
                headers=headers,
                timeout=timeout,
                expected_last_subject_seq=last,
                ttl=ttl,
            )
        except WrongLastSequenceError as err:
            raise _cas_lost(err, key, self._bucket) from None

    def purge_deletes(self, *, older_than: float = 1800.0, timeout: float | None = None) -> None:
        """Removes the keys whose latest entry is a delete or purge marker: markers
        older than ``older_than`` seconds go too, newer ones stay (alone).

        ``older_than <= 0`` removes every marker.
        """
        if isinstance(older_than, bool) or not isinstance(older_than, (int, float)):
            raise InvalidArgumentError(f"older_than must be seconds, got {older_than!r}")
        markers = [
            entry
            for entry in self._scan([">"], ignore_deletes=False, timeout=timeout)
            if entry.operation != "PUT"
        ]
        now = datetime.now().astimezone()
        for entry in markers:
            keep = 0
            if (
                older_than > 0
                and entry.created is not None
                and (now - entry.created).total_seconds() < older_than
            ):
                keep = 1
            self._stream.purge(subject=self._prefix + entry.key, keep=keep, timeout=timeout)


def _value(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidArgumentError(
        f"a value must be bytes, got {type(value).__name__} (encode a str first)"
    )


def _cas_lost(err: WrongLastSequenceError, key: str, bucket: str) -> KeyWrongLastSequenceError:
    return KeyWrongLastSequenceError(
        f"key {key!r} in bucket {bucket!r}: {err.description}",
        code=err.code,
        err_code=err.err_code,
        description=err.description,
    )
