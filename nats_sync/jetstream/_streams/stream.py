"""A bound stream: its info, purge, reading and deleting stored messages, its consumers.

How it works: :class:`Stream` keeps the stream's name and the info it was bound with
(``cached_info``); every method is an API request on the caller's thread through the
context, so any thread may use it. ``get_msgs`` reads a sequence range with the batched
direct get where the server (API level >= 1) and the stream (``allow_direct``) allow,
else through a temporary consumer (see ``_streams.ranges``); ``get_last_msgs_for`` reads many
subjects' last messages with ``multi_last`` direct gets (see ``_kv.many``).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from nats_sync._core import proto
from nats_sync._core.validate import check_int, check_text
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._consumers.consumer import PullConsumer, bind_consumer, put_consumer
from nats_sync.jetstream._consumers.ordered import OrderedConsumer
from nats_sync.jetstream._kv.many import NoBatchedGetsError, last_msgs_for
from nats_sync.jetstream._streams.ranges import (
    check_range,
    read_columns_by_consumer,
    read_range,
    stored_from_direct,
)
from nats_sync.jetstream._streams.wire import check_stream_name, parse_time
from nats_sync.jetstream.api import (
    ConsumerConfig,
    StoredColumns,
    StoredMsg,
    StreamConfig,
    StreamInfo,
)
from nats_sync.jetstream.errors import JetStreamError

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.context_protocol import JsContext


class Stream:
    """A stream bound by name; made by ``js.stream``, ``js.create_stream`` and friends."""

    def __init__(self, js: JsContext, info: StreamInfo) -> None:
        if not info.config.name:
            raise JetStreamError("the stream info names no stream")
        self._js = js
        self._name: str = info.config.name
        self._info = info

    def __repr__(self) -> str:
        return f"<nats_sync.jetstream.Stream {self._name!r}>"

    @property
    def name(self) -> str:
        """The stream's name."""
        return self._name

    @property
    def cached_info(self) -> StreamInfo:
        """The info as of the last call that returned it (no request)."""
        return self._info

    def info(
        self,
        subjects_filter: str | None = None,
        deleted_details: bool = False,
        *,
        timeout: float | None = None,
    ) -> StreamInfo:
        """The stream's config and state now.

        Args:
            subjects_filter: also count messages per subject matching this filter
                (``state.subjects``).
            deleted_details: also list the deleted sequences (``state.deleted``).
        """
        self._info = self._js.stream_info(
            self._name, subjects_filter, deleted_details, timeout=timeout
        )
        return self._info

    def purge(
        self,
        *,
        subject: str | None = None,
        keep: int | None = None,
        sequence: int | None = None,
        timeout: float | None = None,
    ) -> int:
        """Removes messages; returns how many.

        Args:
            subject: only messages on this subject (wildcards allowed).
            keep: keep this many of the newest.
            sequence: remove everything below this sequence.
        """
        if keep is not None and sequence is not None:
            raise InvalidArgumentError("purge takes keep or sequence, not both")
        body: dict[str, Any] = {}
        if subject is not None:
            body["filter"] = subject
        if keep is not None:
            check_int(keep, "keep", 0)
            body["keep"] = keep
        if sequence is not None:
            check_int(sequence, "sequence", 0)
            body["seq"] = sequence
        reply = self._js.api.request(f"STREAM.PURGE.{self._name}", body, timeout)
        return int(reply.get("purged", 0))

    def get_msg(self, seq: int, *, timeout: float | None = None) -> StoredMsg:
        """The message stored at ``seq`` (read from the stream's leader).

        Raises:
            MessageNotFoundError: nothing is stored there.
        """
        check_int(seq, "seq", 1)
        return self._get({"seq": seq}, timeout)

    def get_last_msg(self, subject: str, *, timeout: float | None = None) -> StoredMsg:
        """The last message stored on ``subject``.

        Raises:
            MessageNotFoundError: nothing is stored on it.
        """
        return self._get({"last_by_subj": check_text(subject, "subject")}, timeout)

    def _get(self, body: dict[str, Any], timeout: float | None) -> StoredMsg:
        reply = self._js.api.request(f"STREAM.MSG.GET.{self._name}", body, timeout)
        return stored_msg_from_api(self._name, reply.get("message") or {})

    def get_last_msgs_for(
        self,
        subjects: Iterable[str],
        *,
        up_to_seq: int | None = None,
        up_to_time: datetime | None = None,
        batch: int | None = None,
    ) -> Iterator[StoredMsg]:
        """The last message of every subject matching any of ``subjects`` (wildcards
        allowed), in stream order, read with batched direct gets (ADR-31 ``multi_last``;
        nats-server 2.11+ and a stream with ``allow_direct``).

        Any number of subjects: they are asked 1,024 to a request (the server's limit),
        and patterns matching more subjects than that are expanded from the stream info.
        All is read before the first message is yielded, from one snapshot of the stream.

        Args:
            subjects: subjects or patterns (not a single str).
            up_to_seq: as of this sequence (messages after it are not looked at).
            up_to_time: as of this moment (an aware datetime).
            batch: at most this many messages per request (the rest is asked again).

        Raises:
            InvalidArgumentError: a bad argument (named), or the stream takes no
                batched direct gets (``allow_direct`` off, or a server before 2.11).
            TimeoutError: the server did not answer in time.
        """
        patterns = _check_last_msgs_args(subjects, up_to_seq, up_to_time, batch)
        if not patterns:
            return
        try:
            found = last_msgs_for(
                self._js,
                self._name,
                patterns,
                float(self._js.timeout),
                up_to_seq=up_to_seq,
                up_to_time=up_to_time,
                batch=batch,
            )
        except NoBatchedGetsError:
            raise InvalidArgumentError(
                f"stream {self._name!r} cannot answer get_last_msgs_for: it needs "
                "allow_direct=True and a server with batched direct gets (2.11 or later)"
            ) from None
        for reply in found:
            yield stored_from_direct(self._name, reply)

    def delete_msg(self, seq: int, *, erase: bool = False, timeout: float | None = None) -> None:
        """Removes the message at ``seq`` (overwriting its bytes on disk with ``erase``).

        Raises:
            MessageNotFoundError: nothing is stored there.
        """
        check_int(seq, "seq", 1)
        body = {"seq": seq, "no_erase": not erase}
        self._js.api.request(f"STREAM.MSG.DELETE.{self._name}", body, timeout)

    def get_msgs(
        self,
        start_seq: int = 1,
        *,
        subject: str | None = None,
        end_seq: int | None = None,
        batch: int = 1000,
        max_bytes: int | None = None,
        timeout: float | None = None,
        direct: bool | None = None,
    ) -> Iterator[StoredMsg]:
        """Yields the stored messages from ``start_seq`` to ``end_seq`` (inclusive; the
        end of the stream when None), on ``subject`` when given, skipping gaps.

        Uses the batched direct get where the server and the stream allow it, else a
        temporary consumer. ``batch`` messages (and at most ``max_bytes``) are asked
        for at a time.

        Args:
            direct: None chooses as above; False always reads with a temporary consumer;
                True needs the direct get (`InvalidArgumentError` where it is off).
        """
        yield from read_range(
            self._js,
            self,
            start_seq,
            subject=subject,
            end_seq=end_seq,
            batch=batch,
            max_bytes=max_bytes,
            timeout=timeout,
            direct=direct,
        )

    def get_msg_columns(
        self,
        start_seq: int = 1,
        *,
        subject: str | None = None,
        end_seq: int | None = None,
        batch: int = 5000,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> Iterator[StoredColumns]:
        """Like `get_msgs`, for bulk reads: yields runs of up to ``batch`` messages as
        columns (`StoredColumns`), read with a temporary consumer.

        No object is made per message and the time stamps stay integers, which is
        what a columnar reader (Spark, Arrow, pandas) wants; the consumer is
        unacknowledged, in memory, and deleted at the end.
        """
        if not check_range(start_seq, end_seq, batch, max_bytes):
            return
        yield from read_columns_by_consumer(
            self._js,
            self._name,
            start_seq,
            subject=subject,
            end_seq=end_seq,
            batch=batch,
            max_bytes=max_bytes,
            timeout=timeout,
        )

    # --- consumers of this stream -------------------------------------------------------

    def create_consumer(self, config: ConsumerConfig | None = None, **fields: Any) -> PullConsumer:
        """``js.create_consumer`` on this stream."""
        return put_consumer(self._js, self._name, config, fields, "create", None)

    def update_consumer(self, config: ConsumerConfig | None = None, **fields: Any) -> PullConsumer:
        """``js.update_consumer`` on this stream."""
        return put_consumer(self._js, self._name, config, fields, "update", None)

    def create_or_update_consumer(
        self, config: ConsumerConfig | None = None, **fields: Any
    ) -> PullConsumer:
        """``js.create_or_update_consumer`` on this stream."""
        return put_consumer(self._js, self._name, config, fields, "", None)

    def consumer(self, name: str) -> PullConsumer:
        """``js.consumer`` on this stream."""
        return bind_consumer(self._js, self._name, name, None)

    def delete_consumer(self, name: str) -> None:
        """``js.delete_consumer`` on this stream."""
        self._js.delete_consumer(self._name, name)

    def consumer_names(self) -> Iterator[str]:
        """``js.consumer_names`` on this stream."""
        return self._js.consumer_names(self._name)

    def list_consumers(self) -> Iterator[Any]:
        """``js.list_consumers`` on this stream."""
        return self._js.list_consumers(self._name)

    def ordered_consumer(
        self,
        *,
        filter_subjects: Sequence[str] | None = None,
        deliver_policy: str = "all",
        opt_start_seq: int | None = None,
        opt_start_time: Any = None,
        headers_only: bool = False,
    ) -> OrderedConsumer:
        """``js.ordered_consumer`` on this stream."""
        return OrderedConsumer(
            self._js,
            self._name,
            filter_subjects=filter_subjects,
            deliver_policy=deliver_policy,
            opt_start_seq=opt_start_seq,
            opt_start_time=opt_start_time,
            headers_only=headers_only,
        )


def put_stream(js: JsContext, action: str, config: StreamConfig, timeout: float | None) -> Stream:
    """Creates (``action`` "CREATE") or updates ("UPDATE") a stream: what
    ``js.create_stream`` and ``js.update_stream`` send, here so that key-value and
    object store buckets make theirs without the context.

    Raises:
        InvalidArgumentError: a bad stream name.
        JetStreamError: what the server refused.
    """
    name = check_stream_name(config.name)
    reply = js.api.request(f"STREAM.{action}.{name}", config.to_api(), timeout)
    return Stream(js, StreamInfo.from_api(reply))


def bind_stream(js: JsContext, name: str, timeout: float | None) -> Stream:
    """An existing stream (``js.stream``).

    Raises:
        StreamNotFoundError: there is no such stream.
    """
    return Stream(js, js.stream_info(name, timeout=timeout))


def _check_last_msgs_args(
    subjects: Iterable[str], up_to_seq: int | None, up_to_time: datetime | None, batch: int | None
) -> list[str]:
    """``get_last_msgs_for``'s arguments checked; its distinct subjects, in order."""
    if isinstance(subjects, (str, bytes)):
        raise InvalidArgumentError(
            f"subjects must be an iterable of subjects, not a single {type(subjects).__name__}"
        )
    patterns = list(dict.fromkeys(check_text(s, "subject") for s in subjects))
    if up_to_seq is not None:
        check_int(up_to_seq, "up_to_seq", 1)
    if up_to_time is not None:
        if not isinstance(up_to_time, datetime):
            raise InvalidArgumentError(f"up_to_time must be a datetime, got {up_to_time!r}")
        if up_to_time.tzinfo is None or up_to_time.utcoffset() is None:
            raise InvalidArgumentError(
                "up_to_time must be an aware datetime (e.g. datetime.now(timezone.utc)), "
                f"got the naive {up_to_time!r}"
            )
        if up_to_seq is not None:
            raise InvalidArgumentError("give up_to_seq or up_to_time, not both")
    if batch is not None:
        check_int(batch, "batch", 1)
    return patterns


def stored_msg_from_api(stream: str, message: dict[str, Any]) -> StoredMsg:
    """A ``StoredMsg`` from ``STREAM.MSG.GET``'s ``message`` object (base64 fields)."""
    headers = None
    raw_headers = message.get("hdrs")
    if raw_headers:
        headers, _, _ = proto.decode_headers(base64.b64decode(raw_headers))
    raw_time = message.get("time")
    return StoredMsg(
        stream=stream,
        subject=str(message.get("subject", "")),
        seq=int(message.get("seq", 0)),
        data=base64.b64decode(message.get("data") or b""),
        headers=headers,
        time=parse_time(raw_time) if isinstance(raw_time, str) else None,
    )
