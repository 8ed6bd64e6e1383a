"""Fast-ingest batch publishing (ADR-50, nats-server 2.14+): ``js.fast_publisher()``.

How it works:

- A batch is a run of core publishes whose reply subjects carry its state,
  ``<inbox>.<flow>.<gap>.<seq>.<op>.$FI``: ``<inbox>`` is an old-style inbox made for
  this batch (``_INBOX.<nuid>``, its last token is the batch id), ``<flow>`` the ack
  frequency asked for, ``<gap>`` ``fail`` or ``ok``, ``<seq>`` the batch sequence and
  ``<op>`` 0 (start), 1 (append), 2 (commit with this message), 3 (end of batch,
  nothing stored) or 4 (ping). Everything up to ``<seq>`` is built once per batch.
- The server answers on ``<inbox>.>`` only now and then: a flow ack
  ``{"type":"ack","seq":N,"msgs":F}`` every ``F`` persisted messages (``F`` is the
  server's choice, at most ours), ``{"type":"gap",...}`` and ``{"type":"err",...}``
  when a message was lost or refused, and one final PubAck (with ``"batch"`` and
  ``"count"``, or an ``"error"``) that ends the batch. The first ``add`` waits for the
  first answer: it tells whether the stream takes fast batches and the flow to start at.
- ``add`` publishes, then blocks only when ``max_outstanding_acks * flow`` messages are
  unacknowledged (an ack for N covers every message up to N). Answers already queued
  are taken first without waiting (one look at the inbox's queue per ``add``),
  so an ``add`` after the server's end of the batch arrived raises at once: a batch
  ended by the server acknowledges nothing more, and the window alone would let
  ``max_outstanding_acks * flow`` more adds return as if their messages were stored.
  While it waits with no ack coming it pings (op 4, the highest sequence sent), which
  makes the server repeat its last flow ack, so lost acks cost a ping interval, not
  the batch; ``ack_timeout`` without the acknowledged sequence moving ends the batch
  with ``PublishAckTimeoutError`` (a ``nats_sync.TimeoutError``).
- The subscription is unsubscribed as soon as the batch ends, so the server stops
  answering a batch nobody listens to (why the ADR wants an inbox per batch).
- Kept alive: the server drops a batch that sent nothing for 10 s (its
  ``max_batch_timeout``; the next message is then refused as an unknown batch). Once
  the batch started, a `_KeepAlive` on the client's timer thread looks at it every
  ``JS_FAST_KEEPALIVE_INTERVAL``; a batch that sent nothing (no message, no ping) since the
  previous look gets a ping, which restarts the server's idle timer: an idle batch
  costs one ping and one flow ack per interval, and the server sees it at least every
  two intervals. ``add`` does nothing for it (the look compares counters it keeps
  anyway). The keep-alive holds the publisher by a weak reference: a publisher
  dropped without ``close`` is collected, and its next look unsubscribes the inbox
  and stops (the server then drops the batch after its idle timeout).

Threads and what they touch:

- the caller's thread (one at a time: a publisher is not for several threads at once)
  owns every field: it publishes, takes the answers out of the inbox subscription,
  runs ``error_cb`` and decides when to wait. The publisher starts no thread.
- the client's reader thread only queues the server's answers into the inbox
  subscription (``Subscription``'s own queue and lock); it never sees this object.
- the client's timer thread (the keep-alive) only reads ``_seq``, ``_pings``,
  ``_closed`` and ``_sub`` and publishes a ping; a sequence it reads was published
  already (``add`` sets it after the publish), so a ping never names a message the
  server has not been sent. It counts its pings in ``_keepalive_pings``, its own.
"""

from __future__ import annotations

import json
import logging
import re
import time
import weakref
from collections.abc import Callable, Sized
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from nats_sync import _defaults as d
from nats_sync._core.components.port import port_of
from nats_sync._core.components.subscription import (
    Subscription,
    queued_view,
    unsubscribe_quietly,
)
from nats_sync._core.validate import check_int, check_timeout, int_or_zero
from nats_sync._defaults import DEFAULT_SUB_PENDING_MSGS_LIMIT
from nats_sync.errors import Error, InvalidArgumentError, TimeoutError
from nats_sync.jetstream._publishing.batch_replies import (
    status_error,
    subscribe_replies,
)
from nats_sync.jetstream._streams.wire import Headers, publish_headers
from nats_sync.jetstream.api import BatchAck, FastPubAck
from nats_sync.jetstream.errors import (
    APIError,
    BatchClosedError,
    BatchGapError,
    BatchMessageError,
    FastBatchUnknownError,
    JetStreamError,
    PublishAckTimeoutError,
    api_error,
)
from nats_sync.msg import Msg

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.context_protocol import JsContext

log = logging.getLogger("nats_sync")

BatchErrorCallback = Callable[[JetStreamError], None]

#: The ADR's advice: 1 or 2 outstanding acks suit nearly every use, 3 a long round trip;
#: each one is ``flow`` messages in flight, so the client keeps it within reason.
MAX_OUTSTANDING_ACKS: Final = 10
#: The server keeps the flow in a uint16.
MAX_FLOW: Final = 65_535
#: The inbox subscription's pending message limit (a module attribute, so a test can
#: make it tiny to have acks dropped on purpose).
_INBOX_PENDING_MSGS = DEFAULT_SUB_PENDING_MSGS_LIMIT
#: ``{"type":"ack","seq":N,"msgs":F}`` exactly, as nats-server writes a flow ack.
_FLOW_ACK = re.compile(rb'\{"type":"ack","seq":(\d+),"msgs":(\d+)\}\Z')


#: ``FastPubAck(a, b)`` without the named tuple's own ``__new__``: half the cost, per add.
_new_tuple = tuple.__new__
_OP_START = 0
_OP_APPEND = 1
_OP_COMMIT = 2
_OP_END_OF_BATCH = 3
_OP_PING = 4


class FastPublisher:
    """One fast-ingest batch; made by :meth:`JetStream.fast_publisher`.

    Add messages with :meth:`add`, end with :meth:`commit` (stores a last message) or
    :meth:`close` (stores nothing more); as a context manager, leaving the block
    closes it. With gap ``fail`` (``continue_on_gap=False``) the stream holds the
    batch's messages in order without a hole, up to the count the final
    :class:`BatchAck` reports; with gap ``ok`` lost or refused messages are reported to
    ``error_cb`` and the batch goes on.

    Not for several threads at once (one publisher per thread); many publishers may
    share a connection.

    Args:
        js: the JetStream context (its client, and its timeout for ``ack_timeout``).
        flow: the most messages per ack the server may choose (1..65535).
        max_outstanding_acks: acks awaited at most before ``add`` waits (1..10).
        continue_on_gap: gap ``ok`` (True) or gap ``fail`` (False).
        ack_timeout: seconds ``add`` and ``commit`` wait with no progress (None: the
            context's timeout).
        error_cb: gets each :class:`BatchGapError` and :class:`BatchMessageError`, on
            the caller's thread, in either gap mode (without it they are logged as
            warnings); an exception it raises is logged.
    """

    def __init__(
        self,
        js: JsContext,
        *,
        flow: int = 100,
        max_outstanding_acks: int = 2,
        continue_on_gap: bool = False,
        ack_timeout: float | None = None,
        error_cb: BatchErrorCallback | None = None,
    ) -> None:
        check_int(flow, "flow", 1)
        if flow > MAX_FLOW:
            raise InvalidArgumentError(f"flow must be at most {MAX_FLOW}, got {flow!r}")
        check_int(max_outstanding_acks, "max_outstanding_acks", 1)
        if max_outstanding_acks > MAX_OUTSTANDING_ACKS:
            raise InvalidArgumentError(
                f"max_outstanding_acks must be at most "
                f"{MAX_OUTSTANDING_ACKS}, got {max_outstanding_acks!r}"
            )
        if not isinstance(continue_on_gap, bool):
            raise InvalidArgumentError(f"continue_on_gap must be a bool, got {continue_on_gap!r}")
        if ack_timeout is None:
            ack_timeout = js.timeout
        else:
            check_timeout(ack_timeout, "ack_timeout")
        if error_cb is not None and not callable(error_cb):
            raise InvalidArgumentError(f"error_cb must be callable, got {error_cb!r}")
        self._client = js.client
        self._client_port = port = port_of(js.client)
        # A reply under our own inbox needs no check per message (see ClientPort).
        self._publish = port.publish_inbox
        self._ack_timeout = float(ack_timeout)
        self._ping_every = min(d.JS_FAST_PING_INTERVAL, self._ack_timeout / 4)
        self._gap_ok = continue_on_gap
        self._error_cb = error_cb
        self._max_outstanding = max_outstanding_acks
        self._inbox = js.client.new_inbox()
        self._batch_id = self._inbox.rpartition(".")[2]
        self._reply_prefix = f"{self._inbox}.{flow}.{'ok' if continue_on_gap else 'fail'}.".encode()
        self._sub: Subscription | None = None
        #: The inbox subscription's queue itself (its deque, filled by the reader
        #: thread): ``add`` looks at it on every message, and a deque's truth is the
        #: cheapest look there is (``pending_msgs`` is two Python calls).
        self._answers: Sized = ()
        self._subject = ""  # the first message's: pings and the end of batch go there
        self._seq = 0
        self._ack_seq = 0
        self._flow = flow
        #: ``add`` waits once the batch sequence reaches this.
        self._stall_at = flow * max_outstanding_acks
        self._started = False  # the server answered the first message
        self._closed = False  # no more messages: committed, closed, failed, timed out
        self._ended = False  # the server's final answer came (or never will)
        self._final: BatchAck | None = None
        self._final_error: JetStreamError | None = None
        self._cause: BaseException | None = None  # why the batch ended early
        self._pings = 0  # the caller's thread's (while waiting for acks)
        self._keepalive_pings = 0  # the timer thread's

    # --- public ------------------------------------------------------------------------

    @property
    def batch_id(self) -> str:
        """The batch's id (the inbox's last token)."""
        return self._batch_id

    @property
    def batch_sequence(self) -> int:
        """How many messages were added (the last one's batch sequence)."""
        return self._seq

    @property
    def ack_sequence(self) -> int:
        """The highest batch sequence the server acknowledged (with gap ``fail`` every
        message up to it is stored)."""
        return self._ack_seq

    @property
    def flow(self) -> int:
        """Messages per ack, as the server set it last."""
        return self._flow

    @property
    def is_closed(self) -> bool:
        """Whether the batch takes no more messages (ended by a call, the server, or a
        timeout)."""
        return self._closed

    def add(
        self,
        subject: str,
        data: bytes = b"",
        *,
        headers: Headers = None,
        msg_id: str | None = None,
        ttl: float | str | None = None,
        expected_last_subject_seq: int | None = None,
    ) -> FastPubAck:
        """Publishes one message of the batch.

        Returns at once unless ``max_outstanding_acks * flow`` messages are
        unacknowledged; then it waits for an ack (pinging the server when one is late).
        The first call waits for the server's first answer.

        Args:
            subject: a subject of the stream.
            data: the payload.
            headers: name -> value (or list of values).
            msg_id: ``Nats-Msg-Id``, for the stream's duplicate window.
            ttl: seconds (>= 1) or "never": ``Nats-TTL`` (the stream needs
                ``allow_msg_ttl``).
            expected_last_subject_seq: the check the server makes against the last
                sequence stored on ``subject`` (a failed one ends a gap ``fail`` batch).

        Returns:
            This message's batch sequence and the highest one acknowledged so far.

        Raises:
            BatchClosedError: the batch ended before this message, or while this one
                waited for room (then it may not be stored; ``__cause__``: why).
            FastBatchNotEnabledError: the first message, to a stream without
                ``allow_batched`` (any other refusal of the first message raises its
                own :class:`APIError` subclass).
            NoStreamResponseError: the first message, to a subject no stream stores.
            PublishAckTimeoutError: no ack within ``ack_timeout``; the batch is closed.
            InvalidArgumentError: a keyword has a value it cannot take.
        """
        if self._closed:
            raise self._closed_error()
        seq = self._seq + 1
        if msg_id is None and ttl is None and expected_last_subject_seq is None:
            merged: Headers | bytes = headers  # publish_headers' first case, without its call
        else:
            merged = publish_headers(
                headers, msg_id, ttl=ttl, expected_last_subject_seq=expected_last_subject_seq
            )
        if seq == 1:
            return self._start(subject, data, merged)
        if self._answers:  # answers queued meanwhile, taken without waiting
            self._take_ready()
            if self._closed:  # the server ended the batch meanwhile
                raise self._closed_error()
        self._publish(subject, data, b"%b%d.1.$FI" % (self._reply_prefix, seq), merged)
        self._seq = seq
        if seq >= self._stall_at:
            self._wait(self._has_room)
            if self.is_closed and self._ack_seq < seq:
                # The batch ended while this message waited for room: it may not be
                # stored, so this add fails rather than the next one.
                raise self._closed_error()
        return _new_tuple(FastPubAck, (seq, self._ack_seq))

    def commit(
        self,
        subject: str,
        data: bytes = b"",
        *,
        headers: Headers = None,
        msg_id: str | None = None,
        ttl: float | str | None = None,
        expected_last_subject_seq: int | None = None,
    ) -> BatchAck:
        """Publishes the batch's last message and waits for the server's final ack.

        Keywords as :meth:`add`. On a batch the server already ended (gap ``fail``
        after a gap or a failed check) nothing is sent: the final ack it gave is
        returned, its ``count`` what was stored.

        Returns:
            The stream, the sequence of the last stored message, and ``count``.

        Raises:
            BatchClosedError: the batch was committed or closed already and the
                server's count is not known (``__cause__``: why).
            APIError: the server refused the commit (its subclass by ``err_code``,
                e.g. ``FastBatchUnknownError`` for a batch it abandoned).
            PublishAckTimeoutError: no final ack within ``ack_timeout``.
        """
        if self._closed:
            return self._closed_final()
        merged = publish_headers(
            headers, msg_id, ttl=ttl, expected_last_subject_seq=expected_last_subject_seq
        )
        seq = self._seq + 1
        if seq == 1:
            self._subscribe()
            self._subject = subject
        else:
            self._take_ready()
            if self.is_closed:  # the server ended the batch meanwhile
                return self._closed_final()
        self._publish(subject, data, self._reply(seq, _OP_COMMIT), merged)
        self._seq = seq
        self._closed = True
        return self._await_final()

    def close(self) -> BatchAck:
        """Ends the batch without storing anything more (the end-of-batch commit) and
        waits for the server's final ack; on an ended batch it returns that ack again.

        A batch with no message ends without asking the server: count 0, no stream.

        Returns:
            The stream, the sequence of the last stored message, and ``count``.

        Raises:
            BatchClosedError: the batch ended without a count the server gave
                (``__cause__``: why, e.g. a timeout).
            APIError: the server refused the end of batch (e.g.
                ``FastBatchUnknownError`` for a batch it abandoned after 10 s idle).
            PublishAckTimeoutError: no final ack within ``ack_timeout``.
        """
        if self._closed:
            return self._closed_final()
        self._closed = True
        if self._seq == 0:
            self._final = BatchAck(stream="", seq=0, batch_id=self._batch_id, count=0)
            self._ended = True
            return self._final
        self._take_ready()
        if self._ended:
            return self._closed_final()
        self._send_end_of_batch()
        return self._await_final()

    def __enter__(self) -> FastPublisher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        was_closed = self._closed
        try:
            self.close()
        except Error:
            # Raised already by the call that closed it, or hidden behind the error
            # leaving the block: raising it here would only mask that one.
            if exc_type is None and not was_closed:
                raise

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"<nats_sync.jetstream.FastPublisher {self._batch_id} {state} "
            f"seq={self._seq} acked={self._ack_seq}>"
        )

    # --- sending -----------------------------------------------------------------------

    def _subscribe(self) -> None:
        if self._sub is None:  # a first message whose publish raised may be sent again
            self._sub = subscribe_replies(self._client, f"{self._inbox}.>", _INBOX_PENDING_MSGS)
            self._answers = queued_view(self._sub)

    def _start(self, subject: str, data: bytes, headers: Headers | bytes) -> FastPubAck:
        """The first message: subscribes, publishes and waits for the first answer."""
        self._subscribe()
        self._subject = subject
        try:
            self._publish(subject, data, self._reply(1, _OP_START), headers)
        except BaseException:
            self._closed = True
            self._unsubscribe()
            raise
        self._seq = 1
        self._wait(self._answered)
        if not self._started:  # refused outright: the batch never began
            error = self._final_error or JetStreamError("the batch ended at its start")
            raise error
        if self._sub is not None:
            _KeepAlive(self, self._sub).schedule()
        if self._seq >= self._stall_at:
            self._wait(self._has_room)
        return FastPubAck(1, self._ack_seq)

    def _ping(self) -> None:
        """Asks the server to repeat its last flow ack (and report a gap, if any)."""
        self._pings += 1
        self._publish(self._subject, b"", self._reply(self._seq, _OP_PING))

    def _reply(self, seq: int, operation: int) -> bytes:
        """``<inbox>.<flow>.<gap>.<seq>.<operation>.$FI`` (``add`` inlines the append's)."""
        return b"%b%d.%d.$FI" % (self._reply_prefix, seq, operation)

    def _send_end_of_batch(self) -> None:
        # The end of batch takes the sequence after the last message; the server does
        # not count it.
        self._publish(self._subject, b"", self._reply(self._seq + 1, _OP_END_OF_BATCH))

    # --- waiting -----------------------------------------------------------------------

    def _has_room(self) -> bool:
        return self._seq < self._stall_at or self._closed

    def _answered(self) -> bool:
        return self._started or self._ended

    def _has_ended(self) -> bool:
        return self._ended

    def _wait(self, done: Callable[[], bool]) -> None:
        """Takes answers until ``done()``; pings when none moves the acknowledged
        sequence for a ping interval, gives up after ``ack_timeout`` without progress.

        Raises:
            PublishAckTimeoutError: no progress within ``ack_timeout`` (batch closed).
            Error: the inbox subscription ended (the client closed): batch closed.
        """
        sub = self._sub
        if sub is None:
            return
        now = time.monotonic()
        deadline = now + self._ack_timeout
        ping_at = now + self._ping_every
        progress = self._ack_seq
        while not done():
            now = time.monotonic()
            if self._ack_seq != progress:
                progress = self._ack_seq
                deadline = now + self._ack_timeout
                ping_at = now + self._ping_every
            if now >= deadline:
                raise self._timed_out()
            if now >= ping_at:
                self._ping()
                ping_at = now + self._ping_every
            try:
                msgs = sub.next_msgs(d.JS_FAST_REPLIES_PER_TAKE, min(deadline, ping_at) - now)
            except TimeoutError:
                continue
            except Error as err:
                self._lose(err)
                raise
            self._take(msgs)

    def _await_final(self) -> BatchAck:
        """After the commit or end of batch was sent: the final ack, or its error."""
        self._wait(self._has_ended)
        if self._final is not None:
            return self._final
        raise self._final_error or self._closed_error()

    def _closed_final(self) -> BatchAck:
        """``commit``/``close`` on a closed batch: the server's final ack, learnt now
        (an end of batch is sent when the server may still hold the batch open)."""
        if not self._ended and self._sub is not None:
            self._take_ready()
            if not self._ended:
                # After a refusal the server may hold the batch open (or end it on its
                # own: then it drops this one or answers "unknown" after its count).
                self._send_end_of_batch()
                self._wait(self._has_ended)
        if self._final is not None:
            return self._final
        raise self._closed_error()

    def _timed_out(self) -> PublishAckTimeoutError:
        """Closes the batch after ``ack_timeout``: the server is told the batch ended
        (when it comes back) and nothing more is listened to."""
        error = PublishAckTimeoutError(
            f"no ack for fast batch {self._batch_id} within {self._ack_timeout}s "
            f"(sent {self._seq}, acknowledged {self._ack_seq})"
        )
        self._lose(error)
        try:
            self._send_end_of_batch()
        except Error:
            pass  # the client closed: the server abandons the batch after 10 s idle
        return error

    def _lose(self, error: BaseException) -> None:
        """The batch's outcome will never be known: closes it with ``error``."""
        self._closed = True
        if self._cause is None:
            self._cause = error
        self._unsubscribe()

    def _closed_error(self) -> BatchClosedError:
        cause = self._cause or self._final_error
        if cause is None:
            error = BatchClosedError(f"fast batch {self._batch_id} is closed")
        else:
            error = BatchClosedError(f"fast batch {self._batch_id} ended: {cause}")
        error.__cause__ = cause
        return error

    def _unsubscribe(self) -> None:
        sub, self._sub = self._sub, None
        self._answers = ()
        unsubscribe_quietly(sub)

    # --- the server's answers ----------------------------------------------------------

    def _take_ready(self) -> None:
        sub = self._sub
        if sub is not None and sub.pending_msgs:
            self._take(sub.next_msgs(d.JS_FAST_REPLIES_PER_TAKE))

    def _take(self, msgs: list[Msg]) -> None:
        for msg in msgs:
            if self._ended:
                return  # answers to messages sent after the end: nobody asked
            ack = _FLOW_ACK.match(msg.data)
            if ack is not None:
                self._on_flow_ack(int(ack[1]), int(ack[2]))
            else:
                self._on_answer(msg)

    def _on_flow_ack(self, seq: int, flow: int) -> None:
        self._started = True
        self._ack_seq = max(self._ack_seq, seq)
        if flow >= 1:
            self._flow = flow
        self._stall_at = self._ack_seq + self._flow * self._max_outstanding

    def _on_answer(self, msg: Msg) -> None:
        if msg.status is not None:
            self._end_with_error(
                status_error(msg, self._subject, f"fast batch {self._batch_id}", "no responders")
            )
            return
        try:
            reply = json.loads(msg.data)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            log.warning(
                "nats_sync: fast batch %s: not an answer the client knows: %r",
                self._batch_id,
                msg.data[:80],
            )
            return
        kind = reply.get("type")
        if kind == "ack":
            self._on_flow_ack(int_or_zero(reply.get("seq")), int_or_zero(reply.get("msgs")))
        elif kind == "gap":
            self._on_trouble(
                BatchGapError(
                    expected_seq=int_or_zero(reply.get("last_seq")),
                    seq=int_or_zero(reply.get("seq")),
                )
            )
        elif kind == "err":
            self._on_trouble(
                BatchMessageError(
                    seq=int_or_zero(reply.get("seq")), error=api_error(reply.get("error"))
                )
            )
        elif "error" in reply:
            self._on_refusal(api_error(reply["error"]), reply, msg.subject)
        else:
            self._final = BatchAck.from_api(reply, self._batch_id)
            self._end()

    def _on_trouble(self, error: BatchGapError | BatchMessageError) -> None:
        """A gap or a refused message: with gap ``fail`` the batch is over (its final
        ack follows); either way ``error_cb`` hears of it."""
        if not self._gap_ok:
            if self._cause is None:
                self._closed = True
                self._cause = error
        elif isinstance(error, BatchMessageError):
            # No ack will ever cover a refused message (acks count what was stored):
            # were the window's last messages all refused, add would wait for nothing.
            # The server answered for it, so it stops counting against the window.
            self._stall_at = max(self._stall_at, error.seq + self._flow * self._max_outstanding)
        self._report(error)

    def _on_refusal(self, error: APIError, reply: dict[str, Any], subject: str) -> None:
        """An error PubAck: the server refused a message outright (not a per-message
        check reported as ``err``)."""
        if not self._started:
            self._end_with_error(error)  # the first message: the batch never began
            return
        seq = _reply_seq(subject)
        if isinstance(error, FastBatchUnknownError):
            self._end_with_error(error)  # abandoned (10 s idle, new leader): it is gone
            return
        refused = BatchMessageError(seq=seq, error=error)
        if seq == 1 and not self._gap_ok:
            # The first message failed its check: the server ended the batch at once,
            # having stored nothing (it answers so instead of with a count).
            self._on_trouble(refused)
            self._final = BatchAck(
                stream=str(reply.get("stream", "")), seq=0, batch_id=self._batch_id, count=0
            )
            self._end()
            return
        self._on_trouble(refused)

    def _report(self, error: JetStreamError) -> None:
        if self._error_cb is None:
            log.warning("nats_sync: fast batch %s: %s", self._batch_id, error)
            return
        try:
            self._error_cb(error)
        except Exception:
            log.exception("nats_sync: error_cb raised while handling %r", error)

    def _end_with_error(self, error: JetStreamError) -> None:
        if self._final_error is None:
            self._final_error = error
        if self._cause is None and self._started:
            self._cause = error
        self._end()

    def _end(self) -> None:
        self._ended = True
        self._closed = True
        self._unsubscribe()

    # --- the keep-alive's (timer thread) ------------------------------------------------

    def _sent_so_far(self) -> tuple[int, int]:
        """What the batch has sent: its sequence and its pings."""
        return self._seq, self._pings

    def _ping_if_idle(self, seen: tuple[int, int]) -> tuple[int, int]:
        """Pings the batch if it sent nothing since ``seen`` (the keep-alive's last
        look); returns what it has sent now, for the next look."""
        now = self._sent_so_far()
        if now == seen and not self._closed and self._client.is_connected:
            try:
                self._publish(self._subject, b"", self._reply(now[0], _OP_PING))
            except Error as error:  # e.g. the client closing: its next look stops
                log.debug(
                    "nats_sync: fast batch %s: keep-alive ping failed: %s", self._batch_id, error
                )
            else:
                self._keepalive_pings += 1
        return now


class _KeepAlive:
    """The timer call that keeps one batch alive while it is idle (see the module
    docstring); it schedules itself again every ``JS_FAST_KEEPALIVE_INTERVAL`` until the batch
    ended, or the publisher was collected (then it unsubscribes the inbox).

    It holds the publisher only by a weak reference, and the inbox subscription (the
    client's, which never refers to the publisher): nothing here keeps a dropped
    publisher alive.
    """

    __slots__ = ("_publisher", "_schedule", "_seen", "_sub")

    def __init__(self, publisher: FastPublisher, sub: Subscription) -> None:
        self._publisher = weakref.ref(publisher)
        self._sub = sub
        self._schedule = publisher._client_port.schedule
        self._seen = publisher._sent_so_far()

    def schedule(self) -> None:
        """Runs the next look one interval from now."""
        self._schedule(time.monotonic() + d.JS_FAST_KEEPALIVE_INTERVAL, self)

    def __call__(self) -> None:
        """Timer thread: pings the batch if it sent nothing since the last look."""
        publisher = self._publisher()
        if publisher is None:
            unsubscribe_quietly(self._sub)  # it may have ended already (the batch ended)
            return
        if publisher._sub is None:
            return  # the batch ended: the publisher unsubscribed
        self._seen = publisher._ping_if_idle(self._seen)
        self.schedule()


def _reply_seq(subject: str) -> int:
    """The batch sequence in a reply subject ``...<seq>.<op>.$FI`` (0 if none)."""
    tokens = subject.rsplit(".", 3)
    return int(tokens[1]) if len(tokens) == 4 and tokens[1].isdigit() else 0
