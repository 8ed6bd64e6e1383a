"""Reading a push consumer: :class:`PushMessageStream`, under ``messages()`` and
``consume()`` of a push consumer.

How it works: the server sends a push consumer's messages, unasked, to its
``deliver_subject``; a stream is one core subscription on it (a queue subscription in
the consumer's ``deliver_group``, so that the group's members share the messages), with
the core subscription's bounded queue (``pending_msgs_limit``, ``pending_bytes_limit``)
between the client's reader thread and the thread that reads. What the reader cannot
queue is dropped and counted by the subscription (``dropped``, and the client's
``error_cb`` gets a ``SlowConsumerError``); the stream reports each new count of drops
once more, to its reader (``SlowConsumerError``), so none is lost silently: the server
delivers a dropped message again after ``ack_wait`` when it waits for acks.

On the same subject come the status messages (notes §2.4), handled in ``next()`` as
it takes them, in order behind the messages that arrived before them:

======  =====================================  =====================================
status  description                            here
======  =====================================  =====================================
100     FlowControl Request                    answered (an empty message to its
                                               reply): the server sends more only once
                                               the reader has taken what came before
100     Idle Heartbeat                         the consumer is alive; with a
                                               ``Nats-Consumer-Stalled`` header (the
                                               server waits for a flow-control answer
                                               that was lost or dropped), answered there
409     Consumer Deleted                       the end: ``ConsumerDeletedError``
other   (409 Leadership Change...)             a warning: ``StatusError``
======  =====================================  =====================================

Idle heartbeats are watched when the consumer has ``idle_heartbeat``: every two
intervals the stream looks at the subscription's count of what arrived (``received``,
drops included, so a reader that is slow to take is not taken for a silent server);
when nothing arrived while connected, it warns with ``MissedHeartbeatError`` and then
asks ``CONSUMER.INFO`` once whether the consumer still exists (not: the end, with
``ConsumerDeletedError``). Disconnected, the watch pauses; after a reconnect the client
has subscribed again and the watch starts afresh.

Warnings (missed heartbeats, drops, unexpected statuses) are raised from ``next()``,
once each, the stream going on (``messages()``), or handed to ``error_cb`` (or the
``nats_sync`` log) on the reading thread (``consume()``).

Threads and state: a stream starts no thread. ``next()`` runs on the thread that reads
(a user's thread, or the thread of a ``consume``); the client's status listener (told on
the client's reader, writer or reconnect thread) sets the connected flag and restarts
the watch. The warnings, the connected flag, the watch's deadline and counts are
guarded by the stream's ``_lock``, held for bookkeeping only, never while publishing or
waiting. The state and the terminal error, the status listener and the release of the
core subscription are the stream's ``reader_end.ReaderEnd``'s (own lock, never taken
with ``_lock`` held). ``stop()``, ``drain()`` and the client's close end the core
subscription, which wakes a waiting reader.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

from nats_sync import _defaults as d
from nats_sync._core.validate import check_int, check_timeout
from nats_sync.errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    Error,
    ErrorCallback,
    SlowConsumerError,
    TimeoutError,
)
from nats_sync.jetstream._consumers.msg import JsMsg
from nats_sync.jetstream._consumers.pull import report
from nats_sync.jetstream._consumers.reader_end import (
    ACTIVE,
    CLOSED,
    ENDED,
    FAILED,
    STOPPED,
    ReaderEnd,
)
from nats_sync.jetstream._streams.wire import header_value
from nats_sync.jetstream.errors import (
    ConsumerDeletedError,
    MissedHeartbeatError,
    NotPushConsumerError,
    StatusError,
)

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.wire import CoreClient
    from nats_sync.jetstream.api import ConsumerInfo
    from nats_sync.msg import Msg

log = logging.getLogger("nats_sync")

#: The heartbeat header naming the flow-control reply the server still waits for.
STALLED_HEADER = "Nats-Consumer-Stalled"


def check_pending_limits(pending_msgs_limit: int, pending_bytes_limit: int) -> None:
    """Checks the limits of a push read's queue (as ``Client.subscribe`` takes them).

    Raises:
        InvalidArgumentError: a limit is not an int >= 1.
    """
    check_int(pending_msgs_limit, "pending_msgs_limit", 1)
    check_int(pending_bytes_limit, "pending_bytes_limit", 1)


class PushMessageStream:
    """The messages a push consumer delivers; made by ``PushConsumer.messages()``.

    ``for msg in stream`` yields until :meth:`stop`, :meth:`drain` (after what was
    received) or the client's close. ``next()`` raises ``MissedHeartbeatError`` after
    two idle-heartbeat intervals of silence and ``SlowConsumerError`` after messages
    were dropped (the queue was full): each once, the stream going on, so the caller
    may call ``next()`` again (a ``for`` loop ends with the exception; iterate again to
    go on). It ends with ``ConsumerDeletedError`` when the consumer is deleted. A
    context manager that stops.

    Args:
        client: the connection.
        info: the consumer's info (its ``deliver_subject``, ``deliver_group`` and
            ``idle_heartbeat`` are used).
        label: how errors name the consumer.
        ack_timeout: the default ``double_ack`` timeout of the messages.
        exists: ``exists(timeout)``: False when the consumer is certainly gone;
            raises when it cannot tell.
        pending_msgs_limit: messages queued at most before new ones are dropped.
        pending_bytes_limit: payload bytes queued at most.
        error_cb: where warnings go instead of being raised (``consume``); None with
            ``raise_warnings`` False: the ``nats_sync`` log.
        raise_warnings: raise warnings from ``next()`` (``messages()``).
    """

    def __init__(
        self,
        client: CoreClient,
        info: ConsumerInfo,
        label: str,
        *,
        ack_timeout: float,
        exists: Callable[[float], bool],
        pending_msgs_limit: int = d.DEFAULT_SUB_PENDING_MSGS_LIMIT,
        pending_bytes_limit: int = d.DEFAULT_SUB_PENDING_BYTES_LIMIT,
        error_cb: ErrorCallback | None = None,
        raise_warnings: bool = False,
    ) -> None:
        config = info.config
        subject = config.deliver_subject
        if not subject:
            raise NotPushConsumerError(f"{label} has no deliver_subject: not a push consumer")
        self._client = client
        self._label = label
        self._ack_timeout = ack_timeout
        self._exists = exists
        self._error_cb = error_cb
        self._raise_warnings = raise_warnings
        self._heartbeat = config.idle_heartbeat or 0.0
        self._lock = threading.Lock()
        # Guarded by _lock (see the module docstring).
        self._connected = True
        self._warnings: list[BaseException] = []
        self._check_due = False
        self._sub = client.subscribe(
            subject,
            queue=config.deliver_group or "",
            pending_msgs_limit=pending_msgs_limit,
            pending_bytes_limit=pending_bytes_limit,
        )
        self._seen_received = 0
        self._seen_dropped = 0
        self._watch_due = self._next_watch(time.monotonic())
        self._ending = ReaderEnd(self, client, self._sub, label, PushMessageStream._on_client_event)

    # --- reading ------------------------------------------------------------------------

    def next(self, timeout: float | None = None) -> JsMsg:
        """The next message.

        Args:
            timeout: seconds to wait; None waits until a message comes or the stream
                ends.

        Raises:
            TimeoutError: nothing came in time (the stream goes on).
            MissedHeartbeatError: the consumer was silent for two heartbeat intervals
                (with ``messages()``; the stream goes on).
            SlowConsumerError: messages were dropped, the queue being full (with
                ``messages()``; the stream goes on).
            ConsumerDeletedError: the consumer was deleted (also every later call).
            BadSubscriptionError: the stream was stopped, or drained and read out.
            ConnectionClosedError: the client closed.
        """
        if timeout is not None:
            check_timeout(timeout, zero_ok=True)
        deadline = None if timeout is None else time.monotonic() + timeout
        sub = self._sub
        while True:
            wait = self._prepare(deadline)
            try:
                msg = sub.next_msg(wait)
            except TimeoutError:
                self._watch(time.monotonic())
                if deadline is not None and time.monotonic() >= deadline:
                    raise TimeoutError(f"no message from {self._label} within {timeout}s") from None
                continue
            except ConnectionClosedError:
                self._ending.end(CLOSED, None)
                raise
            except BadSubscriptionError:
                self._ending.end(ENDED, None)  # drained, stopped, or the client drained
                continue
            if msg.status is None:
                if self._ending.state == STOPPED:
                    continue  # taken as stop() ran: dropped, as stop() says
                return JsMsg(msg, self._client, self._ack_timeout)
            self._on_status(msg)

    def __iter__(self) -> PushMessageStream:
        return self

    def __next__(self) -> JsMsg:
        try:
            return self.next()
        except (BadSubscriptionError, ConnectionClosedError):
            raise StopIteration from None

    @property
    def error(self) -> BaseException | None:
        """The terminal error that ended the stream, or None."""
        return self._ending.error

    @property
    def is_closed(self) -> bool:
        """Whether the stream has ended or is stopped (a draining stream is not yet)."""
        return self._ending.is_closed

    @property
    def dropped(self) -> int:
        """Messages dropped so far because the queue was full (slow consumer)."""
        return self._sub.dropped

    @property
    def pending(self) -> int:
        """Messages (and statuses) received and not yet taken."""
        return self._sub.pending_msgs

    # --- ending ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stops at once: messages received but not yet read are dropped (the server
        redelivers them after ``ack_wait``); waiting readers wake up."""
        self._ending.stop()

    def drain(self, timeout: float | None = None) -> None:
        """Unsubscribes; what the server sent until it saw that is still read, then
        the iteration ends.

        Args:
            timeout: seconds to wait for the server to confirm (None: the client's
                ``drain_timeout``).

        Raises:
            DrainTimeoutError: the server did not confirm in time (the stream ends
                anyway).
        """
        self._ending.drain(timeout)

    def __enter__(self) -> PushMessageStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- the machinery (the reading thread) ------------------------------------------------

    def _prepare(self, deadline: float | None) -> float | None:
        """Before a wait: raises if the stream ended, hands over the warnings, checks
        the consumer when due; returns how long to wait (None: no limit)."""
        state = self._ending.check()
        dropped = self._sub.dropped
        with self._lock:
            if dropped != self._seen_dropped:
                self._warnings.append(
                    SlowConsumerError(
                        f"{dropped - self._seen_dropped} message(s) of {self._label} "
                        f"dropped ({dropped} in all): the queue was full; the server "
                        "delivers unacknowledged ones again after ack_wait",
                        subject=self._sub.subject,
                        sid=self._sub.sid,
                    )
                )
                self._seen_dropped = dropped
            warnings, self._warnings = self._warnings, []
            # A raised warning goes out first; the check waits for the next call.
            check = self._check_due and not (warnings and self._raise_warnings)
            if check:
                self._check_due = False
            due = math.inf if deadline is None else deadline
            if state == ACTIVE and self._connected:
                due = min(due, self._watch_due)
        if warnings:
            self._hand_over(warnings)
        if check:
            self._check_consumer(deadline)
            return 0.0
        return None if due == math.inf else max(due - time.monotonic(), 0.0)

    def _hand_over(self, warnings: list[BaseException]) -> None:
        """Raises the first warning (``messages()``; the others are raised by the next
        calls), or reports them all."""
        if self._raise_warnings:
            if len(warnings) > 1:
                with self._lock:
                    self._warnings[:0] = warnings[1:]
            raise warnings[0]
        for warning in warnings:
            report(warning, self._error_cb, f"{self._label}: {warning}")

    def _on_status(self, msg: Msg) -> None:
        """A status message, taken in order behind the messages before it."""
        status = msg.status
        description = msg.description
        lowered = description.lower()
        if status == d.STATUS_CONTROL:
            if lowered.startswith("flow"):
                if msg.reply:
                    self._answer(msg.reply)
                return
            stalled = header_value(msg.headers, STALLED_HEADER)
            if stalled:
                self._answer(stalled)
            return
        if status == 409 and "consumer deleted" in lowered:
            self._ending.end(
                FAILED,
                ConsumerDeletedError(f"{self._label} was deleted ({status} {description})"),
            )
            return
        with self._lock:
            self._warnings.append(
                StatusError(
                    f"{self._label}: status {status} {description}".rstrip(),
                    status=status or 0,
                    description=description,
                )
            )

    def _answer(self, reply: str) -> None:
        """Answers a flow-control request: the server may send more."""
        try:
            self._client.publish(reply, b"")
        except ConnectionClosedError:
            pass  # the next wait raises it
        except Error as err:  # e.g. the reconnect buffer is full: the next stall says again
            with self._lock:
                self._warnings.append(err)

    def _next_watch(self, now: float) -> float:
        return now + 2 * self._heartbeat if self._heartbeat else math.inf

    def _watch(self, now: float) -> None:
        """A wait ended with nothing taken: at the watch's deadline, a silence of two
        intervals (nothing received, while connected) is a missed heartbeat."""
        received = self._sub.received
        with self._lock:
            if self._ending.state != ACTIVE or not self._connected or now < self._watch_due:
                return
            self._watch_due = self._next_watch(now)
            if received != self._seen_received:
                self._seen_received = received
                return
            self._warnings.append(
                MissedHeartbeatError(
                    f"no message or heartbeat from {self._label} for {2 * self._heartbeat}s "
                    "(server, route or consumer gone?)"
                )
            )
            self._check_due = True

    def _check_consumer(self, deadline: float | None) -> None:
        """After a missed heartbeat: ends the stream if the consumer is gone."""
        wait = self._ack_timeout
        if deadline is not None:
            wait = min(wait, max(deadline - time.monotonic(), d.JS_PUSH_MIN_CHECK))
        try:
            exists = self._exists(wait)
        except Error:
            return  # cannot tell (a timeout, a server away): the watch goes on
        if not exists:
            self._ending.end(FAILED, ConsumerDeletedError(f"{self._label} no longer exists"))

    # --- the client's threads -----------------------------------------------------------------

    def _on_client_event(self, event: str) -> None:
        """Status listener: pause the watch while disconnected; restart it after."""
        with self._lock:
            if event == "disconnected":
                self._connected = False
            elif event == "reconnected":
                self._connected = True
                self._watch_due = self._next_watch(time.monotonic())
                self._seen_received = self._sub.received

    def __repr__(self) -> str:
        state = self._ending.state_name
        return f"<nats_sync.jetstream.PushMessageStream {self._label} {state}>"
