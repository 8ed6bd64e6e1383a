"""The :class:`Subscription`: a bounded queue of messages, pulled or pushed to a callback.

How it works: the reader thread is the only producer. It calls :meth:`Subscription._deliver`,
which ``put_nowait``s into a bounded ``queue.Queue`` (messages) that also counts the
bytes it holds under its own mutex; a full queue drops the message and counts it. User
threads pull with :meth:`Subscription.next_msg` or iteration. A callback subscription has
one delivery thread of its own (started by the handler) that takes messages in order
and runs the callback; user code never runs on the reader thread.

The end of a subscription (unsubscribe, drain, max_msgs, close, permission error) is a
marker appended behind the messages already queued, so what arrived stays readable and
every waiting reader wakes up.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from nats_sync._defaults import DEFAULT_NEXT_MSG_TIMEOUT
from nats_sync.errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    Error,
    SlowConsumerError,
    TimeoutError,
)
from nats_sync.msg import Msg

if TYPE_CHECKING:
    from nats_sync._handler import Handler

log = logging.getLogger("nats_sync")

MessageCallback = Callable[[Msg], None]


class _End:
    """The marker queued behind the last message of a subscription."""

    __slots__ = ()


_END = _End()


class _MessageQueue(queue.Queue[Msg | _End]):
    """A ``queue.Queue`` that also counts payload bytes, under the queue's own mutex."""

    def _init(self, maxsize: int) -> None:
        super()._init(maxsize)
        self.bytes = 0

    def _put(self, item: Msg | _End) -> None:
        self.queue.append(item)
        if isinstance(item, Msg):
            self.bytes += len(item.data)

    def _get(self) -> Msg | _End:
        item: Msg | _End = self.queue.popleft()
        if isinstance(item, Msg):
            self.bytes -= len(item.data)
        return item

    def append_end(self) -> None:
        """Queues the end marker past ``maxsize`` and wakes every reader."""
        with self.mutex:
            if not self.queue or self.queue[-1] is not _END:
                self.queue.append(_END)
            self.not_empty.notify_all()


class Subscription:
    """Interest in a subject; made by :meth:`nats_sync.Client.subscribe`.

    Messages are read with :meth:`next_msg` or ``for msg in sub:``, unless a callback
    was given, in which case they are handed to it on this subscription's own thread.
    """

    def __init__(
        self,
        handler: Handler,
        sid: int,
        subject: str,
        queue: str,
        cb: MessageCallback | None,
        max_msgs: int,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
    ) -> None:
        self._handler = handler
        self._sid = sid
        self._subject = subject
        self._queue_group = queue
        self._cb = cb
        #: 0 = no limit; else the subscription ends after this many received messages.
        self.max_msgs = max_msgs
        self._messages = _MessageQueue(pending_msgs_limit if pending_msgs_limit > 0 else 0)
        self._bytes_limit = pending_bytes_limit
        self._received = 0
        self._delivered = 0
        self._dropped = 0
        self._slow = False
        self._end_error: Error | None = None
        self._ended = False
        self._stop_callbacks = False

    # --- properties --------------------------------------------------------------

    @property
    def subject(self) -> str:
        """The subject subscribed to (may hold wildcards)."""
        return self._subject

    @property
    def queue(self) -> str:
        """The queue group, or ""."""
        return self._queue_group

    @property
    def sid(self) -> int:
        """The subscription id on the wire."""
        return self._sid

    @property
    def callback(self) -> MessageCallback | None:
        """The callback messages are handed to, or None for a pull subscription."""
        return self._cb

    @property
    def pending_msgs(self) -> int:
        """Messages received and not yet taken by the user."""
        with self._messages.mutex:
            count = len(self._messages.queue)
            if count and self._messages.queue[-1] is _END:
                count -= 1
            return count

    @property
    def pending_bytes(self) -> int:
        """Payload bytes received and not yet taken by the user."""
        return self._messages.bytes

    @property
    def received(self) -> int:
        """Messages the server sent to this subscription, dropped ones included."""
        return self._received

    @property
    def delivered(self) -> int:
        """Messages queued for the user (received minus dropped)."""
        return self._delivered

    @property
    def dropped(self) -> int:
        """Messages dropped because the pending limits were reached (slow consumer)."""
        return self._dropped

    @property
    def is_closed(self) -> bool:
        """Whether the subscription has ended (no more messages will arrive)."""
        return self._ended

    # --- reader thread -------------------------------------------------------------

    def _deliver(self, msg: Msg) -> bool:
        """Reader thread: queues ``msg``; returns False when this was the last one."""
        self._received += 1
        messages = self._messages
        if messages.bytes + len(msg.data) > self._bytes_limit:
            self._drop(msg, "bytes")
        else:
            try:
                messages.put_nowait(msg)
            except queue.Full:
                self._drop(msg, "messages")
            else:
                self._delivered += 1
                self._slow = False
        return not (self.max_msgs and self._received >= self.max_msgs)

    def _drop(self, msg: Msg, limit: str) -> None:
        self._dropped += 1
        if not self._slow:
            self._slow = True
            self._handler.report_error(
                SlowConsumerError(
                    f"subscription {self._sid} on {self._subject!r} dropped a message on "
                    f"{msg.subject!r}: pending {limit} limit reached",
                    subject=self._subject,
                    sid=self._sid,
                )
            )

    def _end(self, error: Error | None = None, *, stop_callbacks: bool = False) -> None:
        """Ends the subscription (any thread): no more messages will be queued.

        Args:
            error: what ``next_msg`` raises once the queue is empty (None: the
                subscription simply ended).
            stop_callbacks: make the callback thread stop without running the
                callback for what is still queued (``close()``).
        """
        if error is not None and self._end_error is None:
            self._end_error = error
        self._ended = True
        if stop_callbacks:
            self._stop_callbacks = True
        self._messages.append_end()

    # --- user calls ------------------------------------------------------------------

    def next_msg(self, timeout: float | None = DEFAULT_NEXT_MSG_TIMEOUT) -> Msg:
        """Returns the next message.

        Args:
            timeout: seconds to wait; None waits until a message arrives or the
                subscription ends.

        Raises:
            TimeoutError: no message arrived in time.
            ConnectionClosedError: the client closed and no message is left.
            BadSubscriptionError: the subscription ended (unsubscribed, drained,
                reached max_msgs) and no message is left.
            PermissionsViolationError: the server refused this subscription.
        """
        if self._cb is not None:
            raise Error(
                f"subscription {self._sid} on {self._subject!r} has a callback; "
                "next_msg works only without one"
            )
        self._handler.check_process()
        try:
            item = self._messages.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(
                f"no message on {self._subject!r} within {timeout}s"
            ) from None
        if item is _END:
            self._messages.append_end()
            raise self._ended_error()
        return item  # type: ignore[return-value]

    def _ended_error(self) -> Error:
        if self._end_error is not None:
            return self._end_error
        return BadSubscriptionError(f"subscription {self._sid} on {self._subject!r} has ended")

    def __iter__(self) -> Iterator[Msg]:
        """Yields messages until the subscription ends; then the loop ends normally.

        Raises:
            PermissionsViolationError: the server refused this subscription.
        """
        while True:
            try:
                yield self.next_msg(timeout=None)
            except (BadSubscriptionError, ConnectionClosedError):
                return

    def unsubscribe(self, limit: int = 0) -> None:
        """Stops the subscription, at once or after ``limit`` messages in total.

        Args:
            limit: with ``limit > 0``, the server stops after that many messages
                (counting those already received), and so does this subscription.
        """
        self._handler.unsubscribe(self, limit)

    def drain(self, timeout: float | None = None) -> None:
        """Unsubscribes, waits until the server confirmed it, then ends the subscription.

        Messages already received stay readable; a callback subscription runs its
        callback for them before this returns.

        Args:
            timeout: seconds; None uses the client's ``drain_timeout``.

        Raises:
            DrainTimeoutError: the server did not confirm in time.
        """
        self._handler.drain_subscription(self, timeout)

    # --- callback thread -------------------------------------------------------------

    def _run_callbacks(self) -> None:
        """Delivery thread of a callback subscription: runs ``cb`` for each message."""
        cb = self._cb
        assert cb is not None
        get = self._messages.get
        while True:
            item = get()
            if item is _END or self._stop_callbacks:
                return
            try:
                cb(item)  # type: ignore[arg-type]
            except Exception as err:
                log.exception("nats_sync: callback of subscription %d on %r raised",
                              self._sid, self._subject)
                self._handler.report_error(err)

    def __repr__(self) -> str:
        state = "closed" if self._ended else "active"
        group = f" queue={self._queue_group!r}" if self._queue_group else ""
        return f"<Subscription sid={self._sid} subject={self._subject!r}{group} {state}>"

