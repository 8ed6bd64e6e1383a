"""Reading a range of a stream's sequences without a durable consumer (``get_msgs``,
``get_msg_columns``).

How it works, on the caller's thread: where the server has the batched direct get (API
level >= 1) and the stream allows direct gets, each round sends
``{"seq": S, "batch": N, "next_by_subj": F, "max_bytes": B}`` to
``DIRECT.GET.<stream>`` with an inbox of ours (one per read) as the reply subject; the
stored messages stream back (gaps skipped), each with its ``Nats-Sequence`` and
``Nats-Num-Pending``, and a ``204 EOB`` status closes the batch (``404`` when nothing is
at or after S). The next round starts after the last sequence seen. A server that
answers with one message and no ``Nats-Num-Pending`` has no batches: the reader falls
back. Otherwise (and always for ``get_msg_columns``) an ephemeral, unacknowledged pull
consumer starting at S is read with two ``no_wait`` pulls in flight
(``read_columns_by_consumer``) and deleted at the end. Nothing is kept between calls
but the context's cached API level.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from nats_sync import _defaults as d
from nats_sync import errors as core_errors
from nats_sync._core.validate import check_int
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._consumers.consumer import put_consumer
from nats_sync.jetstream._consumers.msg import ack_sequence_time_pending
from nats_sync.jetstream._consumers.pull_wire import classify, pull_body
from nats_sync.jetstream._streams.wire import header_int, header_value, parse_time, time_from_ns
from nats_sync.jetstream.api import StoredColumns, StoredMsg, StreamInfo
from nats_sync.jetstream.errors import JetStreamError, StatusError
from nats_sync.msg import Msg

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.context_protocol import JsContext
    from nats_sync.jetstream._streams.wire import CoreClient

#: Headers the server adds to a direct get reply; the stored message's own are the rest.
_DIRECT_HEADERS = frozenset(
    {
        "Nats-Stream",
        "Nats-Subject",
        "Nats-Sequence",
        "Nats-Time-Stamp",
        "Nats-Num-Pending",
        "Nats-Last-Sequence",
    }
)


class _NoBatchesError(Exception):
    """The server answered a batch request with a single message: no batched reads."""


class RangeSource(Protocol):
    """What a range read asks of its stream (``stream.Stream``, which calls this module:
    a protocol, so this one does not import it back)."""

    @property
    def name(self) -> str:
        """The stream's name."""
        ...

    @property
    def cached_info(self) -> StreamInfo:
        """The stream's info as of the last call that returned it (no request)."""
        ...


def read_range(
    js: JsContext,
    stream: RangeSource,
    start_seq: int,
    *,
    subject: str | None,
    end_seq: int | None,
    batch: int,
    max_bytes: int | None,
    timeout: float | None,
    direct: bool | None = None,
) -> Iterator[StoredMsg]:
    """See ``Stream.get_msgs``."""
    if not check_range(start_seq, end_seq, batch, max_bytes):
        return
    if direct is not False:
        usable = js.api_level(timeout) >= 1 and bool(stream.cached_info.config.allow_direct)
        if direct and not usable:
            raise InvalidArgumentError(
                f"stream {stream.name!r} cannot be read by direct get: it needs "
                "allow_direct and a server with the batched direct get (2.11 or later)"
            )
        direct = usable
    if direct:
        by_direct_get = _read_direct(
            js, stream.name, start_seq, subject, end_seq, batch, max_bytes, timeout
        )
        last = start_seq - 1
        try:
            for message in by_direct_get:
                last = message.seq
                yield message
            return
        except _NoBatchesError:
            start_seq = last + 1  # what was yielded stays yielded; the rest by consumer
    yield from _read_by_consumer(
        js, stream.name, start_seq, subject, end_seq, batch, max_bytes, timeout
    )


def check_range(start_seq: int, end_seq: int | None, batch: int, max_bytes: int | None) -> bool:
    """Checks the arguments of a range read; False when the range is empty
    (``end_seq`` below ``start_seq``).

    Raises:
        InvalidArgumentError: a number is not an int >= 1 (``end_seq`` and
            ``max_bytes`` may be None).
    """
    check_int(start_seq, "start_seq", 1)
    check_int(batch, "batch", 1)
    if max_bytes is not None:
        check_int(max_bytes, "max_bytes", 1)
    if end_seq is None:
        return True
    check_int(end_seq, "end_seq", 1)
    return end_seq >= start_seq


def _read_direct(
    js: JsContext,
    stream: str,
    start: int,
    subject: str | None,
    end_seq: int | None,
    batch: int,
    max_bytes: int | None,
    timeout: float | None,
) -> Iterator[StoredMsg]:
    wait = timeout or js.timeout
    call = js.api.subject(f"DIRECT.GET.{stream}")
    client = js.client
    inbox = client.new_inbox()
    # One inbox for every round: a round ends with its 204 (or 404) before the next is sent.
    sub = client.subscribe(inbox)
    try:
        while end_seq is None or start <= end_seq:
            size = batch if end_seq is None else min(batch, end_seq - start + 1)
            body: dict[str, Any] = {"seq": start, "batch": size}
            if subject:
                body["next_by_subj"] = subject
            if max_bytes:
                body["max_bytes"] = max_bytes
            client.publish(call, _json(body), reply=inbox)
            while True:
                try:
                    reply = sub.next_msg(wait)
                except core_errors.TimeoutError:
                    raise core_errors.TimeoutError(
                        f"no direct get reply from stream {stream!r} within {wait}s"
                    ) from None
                if reply.status == d.STATUS_END_OF_BATCH:
                    break
                if reply.status == d.STATUS_NOT_FOUND:
                    return
                if reply.status is not None:
                    raise StatusError(status=reply.status, description=reply.description)
                if header_int(reply.headers, "Nats-Num-Pending") is None:
                    raise _NoBatchesError
                message = stored_from_direct(stream, reply)
                if end_seq is not None and message.seq > end_seq:
                    return
                start = message.seq + 1
                yield message
            if not header_int(reply.headers, "Nats-Num-Pending"):
                return
    finally:
        sub.unsubscribe()


def read_columns_by_consumer(
    js: JsContext,
    stream: str,
    start: int,
    *,
    subject: str | None,
    end_seq: int | None,
    batch: int,
    max_bytes: int | None,
    timeout: float | None,
) -> Iterator[StoredColumns]:
    """Reads ``start..end_seq`` with an ephemeral, unacknowledged consumer and yields
    runs of about ``batch`` messages as columns. Two ``no_wait`` pulls of ``batch``
    messages (and at most ``max_bytes``, by default enough for a few of the largest
    messages the server takes) are kept in flight, so the server streams while the
    caller works on a run. The consumer is deleted at the end (or expires after
    ``d.JS_BULK_READER_INACTIVE`` if this process dies).

    Raises:
        JetStreamError: the consumer could not be made, a pull was refused, or the
            inbox dropped a message (it never should: its limits hold both pulls).
        TimeoutError: a pull got no answer within ``timeout`` (the context's default).
    """
    fields: dict[str, Any] = {
        "deliver_policy": "by_start_sequence",
        "opt_start_seq": start,
        "ack_policy": "none",
        "mem_storage": True,
        "num_replicas": 1,
        "inactive_threshold": d.JS_BULK_READER_INACTIVE,
    }
    if subject:
        fields["filter_subject"] = subject
    consumer = put_consumer(js, stream, None, fields, "create", timeout)
    wait = timeout or js.timeout
    client = js.client
    pull_bytes = max_bytes or max(d.JS_BULK_PULL_BYTES, 4 * client.max_payload)
    inbox = client.new_inbox()
    sub = client.subscribe(
        inbox, pending_msgs_limit=2 * batch + 64, pending_bytes_limit=3 * pull_bytes
    )
    pulls = _Pulls(
        client,
        js.api.subject(f"CONSUMER.MSG.NEXT.{stream}.{consumer.name}"),
        inbox,
        pull_body(batch, no_wait=True, max_bytes=pull_bytes),
        batch,
    )
    try:
        if consumer.cached_info.num_pending == 0:
            return
        pulls.send()
        pulls.send()
        columns = StoredColumns()
        finished = False
        while not finished:
            try:
                received = sub.next_msgs(batch, wait)
            except core_errors.TimeoutError:
                raise core_errors.TimeoutError(
                    f"no answer to a pull on stream {stream!r} within {wait}s"
                ) from None
            if sub.dropped:
                raise JetStreamError(
                    f"reading stream {stream!r}: the pull inbox dropped {sub.dropped} message(s)"
                )
            finished = _take(received, pulls, end_seq, columns)
            if not finished:
                pulls.send_refused()
            if columns.seqs and (finished or len(columns.seqs) >= batch):
                yield columns
                columns = StoredColumns()
    finally:
        sub.unsubscribe()
        try:
            js.delete_consumer(stream, consumer.name, timeout=timeout)
        except (JetStreamError, core_errors.Error):
            pass  # it expires by itself after the inactive threshold


class _Pulls:
    """The pulls of one bulk read, oldest first, with what each still owes."""

    def __init__(
        self, client: CoreClient, subject: str, inbox: str, body: bytes, batch: int
    ) -> None:
        self._client = client
        self._subject = subject
        self._inbox = inbox
        self._body = body
        self._batch = batch
        self._owed: deque[int] = deque()
        #: The consumer's pending count after the last message (None: none came yet).
        self.pending: int | None = None
        #: "No Messages" answers in a row.
        self.empty_answers = 0
        #: Pulls refused before the first message, to send again after a pause; and
        #: the pauses so far.
        self._refused = 0
        self._pauses = 0

    def send(self) -> None:
        self._client.publish(self._subject, self._body, reply=self._inbox)
        self._owed.append(self._batch)

    def delivered(self) -> None:
        """One message of the oldest pull came; a pull that is complete is replaced."""
        self._owed[0] -= 1
        if not self._owed[0]:
            self._owed.popleft()
            self.send()

    def refused_early(self) -> bool:
        """A pull answered "no responders" before any message came: the consumer just
        made is not ready yet on its server (seen on an R3 stream). True when it is
        to be asked again (a few times); False: a real error."""
        if self.pending is not None or self._pauses >= d.JS_BULK_NOT_READY_PAUSES:
            return False
        if self._owed:
            self._owed.popleft()
        self._refused += 1
        return True

    def send_refused(self) -> None:
        """Sends again, after a pause growing each time, what ``refused_early`` took."""
        if self._refused:
            self._pauses += 1
            time.sleep(d.JS_BULK_NOT_READY_PAUSE * self._pauses)
            for _ in range(self._refused):
                self.send()
            self._refused = 0

    def ended(self) -> None:
        """A status ended the oldest pull early (its byte limit, a timeout): replace it."""
        if self._owed:
            self._owed.popleft()
        self.send()


def _take(received: list[Msg], pulls: _Pulls, end_seq: int | None, columns: StoredColumns) -> bool:
    """Moves messages into ``columns``; True when the range is read."""
    for msg in received:
        if msg.status is not None:
            status = classify(msg)
            if status.kind == "heartbeat":
                continue
            if status.kind == "no_responders" and pulls.refused_early():
                continue
            if status.kind != "done":
                raise status.error or StatusError(status=msg.status, description=msg.description)
            if msg.status == d.STATUS_NOT_FOUND:
                # Nothing left for this consumer, unless its last message said more
                # were pending (then a pull overtook another: ask again, a few times).
                if pulls.pending == 0 or pulls.empty_answers >= d.JS_BULK_EMPTY_ANSWERS:
                    return True
                pulls.empty_answers += 1
                pulls.ended()
                continue
            if status.pending_msgs != 0:
                # A pull ended owing messages (its byte limit, a timeout). One that owes
                # none (409 Batch Completed) was replaced when its last message came.
                pulls.ended()
            continue
        seq, stamp, pending = ack_sequence_time_pending(msg.reply)
        if end_seq is not None and seq > end_seq:
            return True
        columns.seqs.append(seq)
        columns.subjects.append(msg.subject)
        columns.datas.append(msg.data)
        columns.headers.append(msg.headers)
        columns.times_ns.append(stamp)
        if pending == 0 or seq == end_seq:
            return True
        pulls.pending = pending
        pulls.empty_answers = 0
        pulls.delivered()
    return False


def _read_by_consumer(
    js: JsContext,
    stream: str,
    start: int,
    subject: str | None,
    end_seq: int | None,
    batch: int,
    max_bytes: int | None,
    timeout: float | None,
) -> Iterator[StoredMsg]:
    for columns in read_columns_by_consumer(
        js,
        stream,
        start,
        subject=subject,
        end_seq=end_seq,
        batch=batch,
        max_bytes=max_bytes,
        timeout=timeout,
    ):
        for seq, subj, data, headers, stamp in zip(
            columns.seqs,
            columns.subjects,
            columns.datas,
            columns.headers,
            columns.times_ns,
            strict=True,
        ):
            yield StoredMsg(
                stream=stream,
                subject=subj,
                seq=seq,
                data=data,
                headers=dict(headers) if headers else None,
                time=time_from_ns(stamp),
            )


def stored_from_direct(stream: str, reply: Msg) -> StoredMsg:
    """A ``StoredMsg`` from a direct get reply: the ``Nats-*`` headers the server added
    give its subject, sequence and time; the other headers are the message's own.

    Raises:
        JetStreamError: the reply has no ``Nats-Sequence``.
    """
    headers = reply.headers or {}
    seq = header_int(headers, "Nats-Sequence")
    if seq is None:
        raise JetStreamError(f"a direct get reply from {stream!r} has no Nats-Sequence")
    stamp = header_value(headers, "Nats-Time-Stamp")
    own = {name: value for name, value in headers.items() if name not in _DIRECT_HEADERS}
    return StoredMsg(
        stream=stream,
        subject=header_value(headers, "Nats-Subject") or "",
        seq=seq,
        data=reply.data,
        headers=own or None,
        time=parse_time(stamp) if stamp else None,
    )


def _json(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()
