"""The :class:`Subscription`: a bounded queue of messages, pulled or pushed to a callback.

How it works: the reader thread is the only producer. It calls :meth:`Subscription._deliver`,
which appends to a bounded queue of its own (messages and bytes); a full queue drops
the message and counts it. User
threads pull with :meth:`Subscription.next_msg` or iteration. A callback subscription has
one delivery thread of its own (started by the handler) that takes messages in order
and runs the callback; user code never runs on the reader thread.

The end of a subscription (unsubscribe, drain, max_msgs, close, permission error) is a
marker appended behind the messages already queued, so what arrived stays readable and
every waiting reader wakes up.

A callback subscription also has a hand-out limit, ``_handout_limit``: the delivery
thread compares it with the number of messages it handed to the callback before each
call (per message, not per batch). ``unsubscribe()`` and ``close()`` set it to 0 and
discard what is queued (counted in ``discarded``); ``max_msgs`` and
``unsubscribe(limit=n)`` set it to ``n``; ``drain()`` leaves it, so queued messages
still reach the callback. Only the delivery thread writes ``_handed``; any thread may
lower ``_handout_limit`` (a plain store).
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sized
from typing import TYPE_CHECKING, Protocol

from nats_sync import _defaults as d
from nats_sync._core.threads.lifecycle import StartThread
from nats_sync._core.threads.waiting import Sleepers, wait_until
from nats_sync._core.validate import check_int
from nats_sync._defaults import DEFAULT_NEXT_MSG_TIMEOUT
from nats_sync.errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    Error,
    InvalidArgumentError,
    SlowConsumerError,
    TimeoutError,
)
from nats_sync.msg import Msg

if TYPE_CHECKING:
    from nats_sync._core.components.instrumentation import Instrumentation

log = logging.getLogger("nats_sync")

MessageCallback = Callable[[Msg], None]


class _End:
    """The marker queued behind the last message of a subscription."""

    __slots__ = ()


_END = _End()
#: The hand-out limit of a callback subscription that has none.
_NO_LIMIT = sys.maxsize


class _MessageQueue:
    """The bounded message queue of one subscription: one producer, any consumers.

    The producer (the reader thread, in ``Subscription._deliver``, which holds the
    producer side to save a call per message) appends to a deque without the lock, and
    takes it only to wake consumers that are actually waiting; consumers take the lock.
    ``_bytes_in`` is written by the producer only and ``_bytes_out`` under the lock
    only, so the byte count needs no lock on the hot path. A consumer enlists in
    ``_sleepers`` before its last look at the deque, so a message appended meanwhile
    is either seen by that look or followed by a wake-up.
    """

    __slots__ = (
        "_bytes_in",
        "_bytes_out",
        "_items",
        "_lock",
        "_sleepers",
        "max_bytes",
        "max_msgs",
    )

    def __init__(self, max_msgs: int, max_bytes: int) -> None:
        self._items: deque[Msg | _End] = deque()
        self._lock = threading.Lock()
        #: Consumers asleep until something is queued (not a threading.Condition: its
        #: wait is not safe to interrupt, see ``_core.threads.waiting``).
        self._sleepers = Sleepers()
        self._bytes_in = 0
        self._bytes_out = 0
        #: 0 = no limit on the number of messages.
        self.max_msgs = max_msgs
        self.max_bytes = max_bytes

    @property
    def bytes(self) -> int:
        """Payload bytes held."""
        return self._bytes_in - self._bytes_out

    def __len__(self) -> int:
        # Under the lock: a consumer popping the last item between the length and the
        # look at the tail would make ``[-1]`` raise IndexError (the producer only
        # appends messages, so with consumers held off the tail is there).
        with self._lock:
            count = len(self._items)
            if count and self._items[-1] is _END:
                count -= 1
            return count

    def get(self, timeout: float | None) -> Msg | _End:
        """The next item; the end marker stays queued for every later caller.

        Raises:
            queue.Empty: nothing arrived within ``timeout`` seconds.
        """
        with self._lock:
            item = self._take()
        if item is not None:
            return item
        deadline = None if timeout is None else time.monotonic() + timeout
        item = wait_until(self._lock, self._sleepers, self._take, deadline)
        if item is None:
            raise queue.Empty
        return item

    def take_batch(self, limit: int) -> list[Msg | _End]:
        """Delivery thread: waits for at least one item and takes up to ``limit``.

        The end marker ends a batch and stays queued; it is returned alone.
        """
        items = self._items
        if not items:
            wait_until(self._lock, self._sleepers, self._any_item, None)
        with self._lock:
            batch: list[Msg | _End] = []
            taken_bytes = 0
            while items and len(batch) < limit:
                item = items[0]
                if type(item) is _End:
                    if not batch:
                        batch.append(item)
                    break
                items.popleft()
                batch.append(item)
                taken_bytes += len(item.data)  # type: ignore[union-attr]  # not _End
            self._bytes_out += taken_bytes
            return batch

    def _any_item(self) -> bool | None:
        """Under the lock: True when something is queued (None: keep waiting)."""
        return True if self._items else None

    def take_ready(self, limit: int) -> list[Msg]:
        """Up to ``limit`` messages already queued, without waiting (the end marker
        stays queued)."""
        with self._lock:
            items = self._items
            taken: list[Msg] = []
            taken_bytes = 0
            while items and len(taken) < limit:
                item = items[0]
                if type(item) is _End:
                    break
                items.popleft()
                taken.append(item)  # type: ignore[arg-type]  # not _End: checked
                taken_bytes += len(item.data)  # type: ignore[union-attr]  # not _End
            self._bytes_out += taken_bytes
            return taken

    def _take(self) -> Msg | _End | None:
        """Under the lock: pops the next item, or None when there is none."""
        items = self._items
        if not items:
            return None
        item = items[0]
        if type(item) is _End:
            return item  # left queued: not popped and put back, which Ctrl-C could split
        items.popleft()
        self._bytes_out += len(item.data)  # type: ignore[union-attr]  # not _End: checked
        return item

    def append_end(self) -> None:
        """Queues the end marker behind the messages and wakes every consumer."""
        with self._lock:
            if not self._items or self._items[-1] is not _END:
                self._items.append(_END)
            self._sleepers.wake_all()

    def discard(self) -> int:
        """Drops every queued message (the end marker stays); returns how many."""
        # Popped one by one, not iterated then cleared: the reader appends without the
        # lock, so an iteration could meet "deque mutated during iteration" and a clear()
        # could drop a message appended meanwhile without counting it.
        with self._lock:
            items = self._items
            count = 0
            size = 0
            ended = False
            while items:
                item = items.popleft()
                if type(item) is _End:
                    ended = True
                else:
                    count += 1
                    size += len(item.data)  # type: ignore[union-attr]  # not _End
            self._bytes_out += size
            if ended:
                items.append(_END)
            return count


def queued_view(sub: Subscription) -> Sized:
    """A live, read-only view of what ``sub`` holds (messages, and the end marker once it
    ended), for an "is anything there?" look without a lock or a call: JetStream fast
    ingest's per-message check for answers. Its truth value may be stale by the time it
    is acted on; take messages with ``next_msg``/``next_msgs`` as usual."""
    return sub._messages._items


def unsubscribe_quietly(sub: Subscription | None, *also: Callable[[], None]) -> None:
    """Ends ``sub`` (if any) whether or not it ended already or its client closed, after
    calling each of ``also`` (e.g. removing a status listener): what every JetStream
    reader and batch publisher does when it ends, on any thread; idempotent."""
    for call in also:
        call()
    if sub is not None:
        try:
            sub.unsubscribe()
        except Error:
            pass  # already ended, or the client closed: nothing left to end


class SubscriptionOwner(Protocol):
    """What a subscription needs from the client that made it (the handler)."""

    def report_error(self, error: BaseException) -> None:
        """Hands ``error`` to ``error_cb`` (or the log)."""

    def check_process(self) -> None:
        """Raises if used after a fork, in another process."""

    def unsubscribe(self, sub: Subscription, limit: int = 0) -> None:
        """Sends UNSUB now, or after ``limit`` messages in total."""

    def drain_subscription(self, sub: Subscription, timeout: float | None) -> None:
        """UNSUB, wait until the server confirmed it, then end ``sub``."""


class Subscription:
    """Interest in a subject; made by :meth:`nats_sync.Client.subscribe`.

    Messages are read with :meth:`next_msg` or ``for msg in sub:``, unless a callback
    was given, in which case they are handed to it on this subscription's own thread.
    """

    # The reader thread touches these for every message.
    __slots__ = (
        "__weakref__",
        "_cb",
        "_discarded",
        "_dropped",
        "_end_error",
        "_ended",
        "_handed",
        "_handout_limit",
        "_messages",
        "_otel",
        "_owner",
        "_queue_group",
        "_received",
        "_sid",
        "_slow",
        "_subject",
        "max_msgs",
    )

    def __init__(
        self,
        owner: SubscriptionOwner,
        sid: int,
        subject: str,
        queue: str,
        cb: MessageCallback | None,
        max_msgs: int,
        pending_msgs_limit: int,
        pending_bytes_limit: int,
    ) -> None:
        self._owner = owner
        self._sid = sid
        self._subject = subject
        self._queue_group = queue
        self._cb = cb
        #: 0 = no limit; else the subscription ends after this many received messages.
        self.max_msgs = max_msgs
        self._messages = _MessageQueue(
            pending_msgs_limit if pending_msgs_limit > 0 else 0, pending_bytes_limit
        )
        self._received = 0
        self._dropped = 0
        self._slow = False
        self._end_error: Error | None = None
        self._ended = False
        # Callback subscriptions only (see the module docstring): messages the delivery
        # thread handed to the callback, the most it may hand, and those it discarded.
        self._handed = 0
        self._handout_limit = max_msgs if max_msgs > 0 else _NO_LIMIT
        self._discarded = 0
        #: The client's instrumentation (``instrumentation.Instrumentation``), told of
        #: each message ``next_msg`` returns; None (the default) when tracing is off.
        self._otel: Instrumentation | None = None

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
        return len(self._messages)

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
        return self._received - self._dropped

    @property
    def dropped(self) -> int:
        """Messages dropped because the pending limits were reached (slow consumer)."""
        return self._dropped

    @property
    def discarded(self) -> int:
        """Messages received but never handed to the callback, because the subscription
        was unsubscribed or the client closed first (``drain()`` hands them over)."""
        return self._discarded

    @property
    def is_closed(self) -> bool:
        """Whether the subscription has ended (no more messages will arrive)."""
        return self._ended

    # --- reader thread -------------------------------------------------------------

    def _deliver(self, msg: Msg) -> bool:
        """Reader thread: queues ``msg``; returns False when this was the last one."""
        self._received += 1
        # The queue's producer side, here to save a call per message: append without
        # the lock (deque.append is atomic), wake a consumer only if one waits.
        messages = self._messages
        items = messages._items
        size = len(msg.data)
        if messages.max_msgs and len(items) >= messages.max_msgs:
            self._drop(msg, "messages")
        elif messages._bytes_in - messages._bytes_out + size > messages.max_bytes:
            self._drop(msg, "bytes")
        else:
            messages._bytes_in += size
            items.append(msg)
            if messages._sleepers:
                with messages._lock:
                    messages._sleepers.wake_all()
            if self._slow:
                self._slow = False
        return not (self.max_msgs and self._received >= self.max_msgs)

    def _drop(self, msg: Msg, limit: str) -> None:
        self._dropped += 1
        if not self._slow:
            self._slow = True
            self._owner.report_error(
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
            stop_callbacks: the callback is not called again (``unsubscribe()``,
                ``close()``); what is still queued for it is discarded and counted.
        """
        if error is not None and self._end_error is None:
            self._end_error = error
        self._ended = True
        if stop_callbacks and self._cb is not None:
            self._handout_limit = 0
            self._count_discarded(self._messages.discard())
        self._messages.append_end()

    def _limit_handout(self, limit: int) -> None:
        """Any thread: the callback gets at most ``limit`` messages in all."""
        if self._cb is not None:
            self._handout_limit = min(self._handout_limit, limit)

    @property
    def _handed_all(self) -> bool:
        """Whether the callback got every message it may get (``unsubscribe(limit)``)."""
        return self._handed >= self._handout_limit

    def _count_discarded(self, count: int) -> None:
        if count:
            with self._messages._lock:  # the delivery thread and _end may both count
                self._discarded += count

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
            InvalidArgumentError: the subscription has a callback, which takes every
                message.
        """
        if self._cb is not None:
            raise InvalidArgumentError(
                f"subscription {self._sid} on {self._subject!r} has a callback; "
                "next_msg works only without one"
            )
        self._owner.check_process()
        messages = self._messages
        msg: Msg | None = None
        with messages._lock:  # the common case, a message waiting, without more calls
            items = messages._items
            if items and type(items[0]) is not _End:
                msg = items.popleft()  # type: ignore[assignment]  # not _End: checked
                messages._bytes_out += len(msg.data)  # type: ignore[union-attr]
        if msg is not None:  # told outside the lock
            if self._otel is not None:
                self._otel.received(self, msg)
            return msg
        try:
            item = messages.get(timeout)
        except queue.Empty:
            raise TimeoutError(f"no message on {self._subject!r} within {timeout}s") from None
        if item is _END:
            self._messages.append_end()
            raise self._ended_error()
        if self._otel is not None:
            self._otel.received(self, item)  # type: ignore[arg-type]  # not _END
        return item  # type: ignore[return-value]

    def next_msgs(
        self, max_msgs: int, timeout: float | None = DEFAULT_NEXT_MSG_TIMEOUT
    ) -> list[Msg]:
        """Returns up to ``max_msgs`` messages at once, in order: waits like `next_msg`
        for the first, then takes those already queued behind it without waiting.

        For readers of many messages (JetStream bulk reads, key-value lookups): one lock
        round per call instead of one per message.

        Raises:
            InvalidArgumentError: ``max_msgs`` is not an int >= 1, or the subscription
                has a callback.
            TimeoutError: as `next_msg`, when no message is there.
            ConnectionClosedError: as `next_msg`, when no message is there.
            BadSubscriptionError: as `next_msg`, when no message is there.
            PermissionsViolationError: as `next_msg`, when no message is there.
        """
        check_int(max_msgs, "max_msgs", 1)
        first = self.next_msg(timeout)
        if max_msgs == 1:
            return [first]
        rest = self._messages.take_ready(max_msgs - 1)
        if self._otel is not None:
            for msg in rest:
                self._otel.received(self, msg)
        return [first, *rest]

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

        Once it returns, a callback is not called again (a call already running
        finishes) and messages still queued for it are discarded and counted in
        ``discarded``; use :meth:`drain` to have them handed over. A pull
        subscription keeps what it queued readable.

        Args:
            limit: with ``limit > 0``, the server stops after that many messages
                (counting those already received), and so does this subscription; a
                callback gets exactly ``limit`` messages, even when more were queued.
        """
        self._owner.unsubscribe(self, limit)

    def drain(self, timeout: float | None = None) -> None:
        """Unsubscribes, waits until the server confirmed it, then ends the subscription.

        Messages already received stay readable; a callback subscription runs its
        callback for them before this returns.

        Args:
            timeout: seconds; None uses the client's ``drain_timeout``.

        Raises:
            DrainTimeoutError: the server did not confirm in time.
        """
        self._owner.drain_subscription(self, timeout)

    # --- callback thread -------------------------------------------------------------

    def _run_callbacks(self) -> None:
        """Delivery thread of a callback subscription: runs ``cb`` for each message."""
        cb = self._cb
        assert cb is not None
        take_batch = self._messages.take_batch
        while True:
            # Many at a time: one lock round per batch instead of per message; the
            # limit is still looked at before every call, as unsubscribe() may lower it.
            batch = take_batch(d.CALLBACK_BATCH)
            handed_before = self._handed
            for item in batch:
                if item is _END:
                    return
                if self._handed >= self._handout_limit:
                    unhanded = len(batch) - (self._handed - handed_before)
                    self._count_discarded(unhanded + self._messages.discard())
                    return
                self._handed += 1
                try:
                    cb(item)  # type: ignore[arg-type]
                except Exception as err:
                    log.exception(
                        "nats_sync: callback of subscription %d on %r raised",
                        self._sid,
                        self._subject,
                    )
                    self._owner.report_error(err)

    def __repr__(self) -> str:
        state = "closed" if self._ended else "active"
        group = f" queue={self._queue_group!r}" if self._queue_group else ""
        return f"<Subscription sid={self._sid} subject={self._subject!r}{group} {state}>"


class Deliveries:
    """The delivery threads of one client's callback subscriptions.

    A thread is remembered from its start until it ends, which may be after its
    subscription ended (a drain hands over what is queued; a stuck callback outlives
    close()), so that close() can stop every callback still running. State: ``_running``
    under ``_lock``.
    """

    def __init__(self, start_thread: StartThread) -> None:
        self._start_thread = start_thread
        self._lock = threading.Lock()
        self._running: dict[int, tuple[Subscription, threading.Thread]] = {}

    def start(self, sub: Subscription) -> None:
        """Starts ``sub``'s delivery thread."""
        with self._lock:
            thread = self._start_thread(lambda: self._run(sub), f"sub-{sub.sid}")
            self._running[sub.sid] = (sub, thread)

    def _run(self, sub: Subscription) -> None:
        """Delivery thread: runs the callbacks; forgets itself when it ends."""
        try:
            sub._run_callbacks()
        finally:
            with self._lock:
                self._running.pop(sub.sid, None)

    def join(self, sub: Subscription, deadline: float) -> bool:
        """Waits until ``deadline`` for ``sub``'s thread; False if it still runs.

        Called from the delivery thread itself (a callback draining), it returns True.
        """
        with self._lock:
            entry = self._running.get(sub.sid)
        if entry is None or entry[1] is threading.current_thread():
            return True
        entry[1].join(max(deadline - time.monotonic(), 0.0))
        return not entry[1].is_alive()

    def subscriptions(self) -> list[Subscription]:
        """The subscriptions whose thread still runs."""
        with self._lock:
            return [sub for sub, _ in self._running.values()]

    def threads(self) -> list[threading.Thread]:
        """The threads still running."""
        with self._lock:
            return [thread for _, thread in self._running.values()]
