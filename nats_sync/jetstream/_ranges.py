"""Reading a range of a stream's sequences without a durable consumer (``get_msgs``).

How it works, on the caller's thread: where the server has the batched direct get (API
level >= 1) and the stream allows direct gets, each round sends
``{"seq": S, "batch": N, "next_by_subj": F, "max_bytes": B}`` to
``DIRECT.GET.<stream>`` with a fresh inbox of ours as the reply subject; the stored
messages stream back (gaps skipped), each with its ``Nats-Sequence`` and
``Nats-Num-Pending``, and a ``204 EOB`` status closes the batch (``404`` when nothing is
at or after S). The next round starts after the last sequence seen. A server that
answers with one message and no ``Nats-Num-Pending`` has no batches: the reader falls
back. Otherwise an ephemeral, unacknowledged pull consumer starting at S is read with
``fetch`` and deleted at the end. Nothing is kept between calls but the context's
cached API level.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from nats_sync import errors as core_errors
from nats_sync.errors import InvalidArgumentError
from nats_sync.jetstream._api import header_int, header_value, parse_time
from nats_sync.jetstream.api import StoredMsg
from nats_sync.jetstream.errors import JetStreamError, StatusError
from nats_sync.msg import Msg

if TYPE_CHECKING:
    from nats_sync.jetstream.context import JetStream
    from nats_sync.jetstream.stream import Stream

#: Headers the server adds to a direct get reply; the stored message's own are the rest.
_DIRECT_HEADERS = frozenset({
    "Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending",
    "Nats-Last-Sequence",
})
_END_OF_BATCH = 204
_NOT_FOUND = 404
#: Seconds an ephemeral reading consumer outlives a reader that vanished (a crash).
_READER_INACTIVE_THRESHOLD = 30.0


class _NoBatchesError(Exception):
    """The server answered a batch request with a single message: no batched reads."""


def read_range(js: JetStream, stream: Stream, start_seq: int, *, subject: str | None,
               end_seq: int | None, batch: int, max_bytes: int | None,
               timeout: float | None) -> Iterator[StoredMsg]:
    """See ``Stream.get_msgs``."""
    for value, what, minimum in ((start_seq, "start_seq", 1), (batch, "batch", 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise InvalidArgumentError(f"{what} must be an int >= {minimum}, got {value!r}")
    for optional, what in ((end_seq, "end_seq"), (max_bytes, "max_bytes")):
        if optional is not None and (isinstance(optional, bool)
                                     or not isinstance(optional, int) or optional < 1):
            raise InvalidArgumentError(f"{what} must be an int >= 1 or None, got {optional!r}")
    if end_seq is not None and end_seq < start_seq:
        return
    if js.api_level(timeout) >= 1 and stream.cached_info.config.allow_direct:
        direct = _read_direct(js, stream.name, start_seq, subject, end_seq, batch,
                              max_bytes, timeout)
        last = start_seq - 1
        try:
            for message in direct:
                last = message.seq
                yield message
            return
        except _NoBatchesError:
            start_seq = last + 1  # what was yielded stays yielded; the rest by consumer
    yield from _read_by_consumer(js, stream.name, start_seq, subject, end_seq, batch,
                                 max_bytes, timeout)


def _read_direct(js: JetStream, stream: str, start: int, subject: str | None,
                 end_seq: int | None, batch: int, max_bytes: int | None,
                 timeout: float | None) -> Iterator[StoredMsg]:
    wait = timeout or js.timeout
    call = js.api.subject(f"DIRECT.GET.{stream}")
    while end_seq is None or start <= end_seq:
        size = batch if end_seq is None else min(batch, end_seq - start + 1)
        body: dict[str, Any] = {"seq": start, "batch": size}
        if subject:
            body["next_by_subj"] = subject
        if max_bytes:
            body["max_bytes"] = max_bytes
        inbox = js.client.new_inbox()
        sub = js.client.subscribe(inbox)
        try:
            js.client.publish(call, _json(body), reply=inbox)
            pending = None
            while True:
                try:
                    reply = sub.next_msg(wait)
                except core_errors.TimeoutError:
                    raise core_errors.TimeoutError(
                        f"no direct get reply from stream {stream!r} within {wait}s"
                    ) from None
                if reply.status == _END_OF_BATCH:
                    pending = header_int(reply.headers, "Nats-Num-Pending")
                    break
                if reply.status == _NOT_FOUND:
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
        finally:
            sub.unsubscribe()
        if not pending:
            return


def _read_by_consumer(js: JetStream, stream: str, start: int, subject: str | None,
                      end_seq: int | None, batch: int, max_bytes: int | None,
                      timeout: float | None) -> Iterator[StoredMsg]:
    fields: dict[str, Any] = {
        "deliver_policy": "by_start_sequence", "opt_start_seq": start, "ack_policy": "none",
        "mem_storage": True, "num_replicas": 1,
        "inactive_threshold": _READER_INACTIVE_THRESHOLD,
    }
    if subject:
        fields["filter_subject"] = subject
    consumer = js.create_consumer(stream, timeout=timeout, **fields)
    wait = timeout or js.timeout
    try:
        if consumer.cached_info.num_pending == 0:
            return
        while True:
            fetched = (consumer.fetch(batch, max_wait=wait) if max_bytes is None
                       else consumer.fetch_bytes(max_bytes, max_wait=wait))
            got = 0
            for msg in fetched:
                got += 1
                meta = msg.metadata
                if end_seq is not None and meta.sequence.stream > end_seq:
                    return
                yield StoredMsg(stream=stream, subject=msg.subject,
                                seq=meta.sequence.stream, data=msg.data,
                                headers=msg.headers or None, time=meta.timestamp)
                if meta.num_pending == 0:
                    return
            if fetched.error is not None:
                raise fetched.error
            if got == 0:
                return  # nothing more within the wait: the range is read
    finally:
        try:
            js.delete_consumer(stream, consumer.name, timeout=timeout)
        except (JetStreamError, core_errors.Error):
            pass  # it expires by itself after the inactive threshold


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
