"""The pull readers shared by fetch, messages() and consume(): one pull, and pulling ahead.

How it works: a pull is a core publish of a pull request (``pull_wire.pull_body``) to
``<prefix>.CONSUMER.MSG.NEXT.<stream>.<consumer>`` with an inbox of ours as the reply
subject. The server sends the messages there (each keeping its stored subject, the ack
subject as its reply) and, on the same inbox, the status messages
``pull_wire.classify`` sorts out; its module has the table of what each means here
(``heartbeat``, ``done``, ``reset``, ``warning``, ``no_responders``, ``terminal``).

Every reader has a FRESH inbox subscription, never shared with another reader or
reused: a late status of an old request (a 408 of a fetch that already ended) must not
end the next one.

:class:`MessageBatch` (one pull: ``fetch``, ``fetch_bytes``, ``fetch_nowait``) reads
lazily on the thread that iterates it: it ends on the count, the bytes, a ``done``
status, a missed heartbeat or its deadline (``expires`` + 1 s, as nats.go), and then
unsubscribes. Only ``terminal``, ``warning`` and ``no_responders`` set ``.error``.
A ``pin_lost`` (423: a priority group's pin moved to another reader, ``_consumers.priority``)
drops the pin id and pulls again without it, on the same inbox (the server removed the
refused request, so no late status of it can come), for what is still wanted within
the time left; with too little time left the batch ends with what it has.

:class:`MessageStream` (``messages()``, under ``consume()``) keeps pulling ahead: it
counts what it asked for and was not yet handed out (``pending``), asks again for the
difference once half the buffer is handed out, subtracts ``Nats-Pending-*`` when a
request ends, and re-pulls after a ``reset``, a missed heartbeat (two intervals without
a message or status while a request is open: a warning, not an end) or a reconnect.
After a ``pin_lost`` it drops the pin id and pulls again at once, without it (never an
end, never a warning). After a ``no_responders`` it asks ``CONSUMER.INFO`` whether the
consumer still exists: if not, it ends with ``ConsumerDeletedError``; if it cannot tell
(a server restarting), it retries with a backoff (0.25 s, doubling, at most 5 s).
A ``next()`` cut by Ctrl-C may have taken a message it never counted (which would stop
the pulls until a missed heartbeat): the count is then redone from zero, quietly, once
nothing comes for a second (at worst asking beyond ``max_messages`` for a while).

Threads and state: a ``MessageStream`` starts no thread. Its reading runs on whatever
thread calls ``next()`` (a user thread, or the thread of a ``consume``); the client's
status listener (``disconnected``/``reconnected``, told on the client's reader,
writer, timer or reconnect thread) pauses it and, after a reconnect, sends the new pull
itself, so a reader blocked in ``next()`` is woken by what the server sends. Everything
the two share (the pending counts, the connected flag, the deadlines, the queued
warnings) is guarded by the stream's ``_lock``, which is held for bookkeeping only,
never while publishing or waiting. The stream's state and terminal error, its status
listener and the release of its subscription are its ``reader_end.ReaderEnd``'s (own
lock, never taken with ``_lock`` held). A priority group's pin lives in the
consumer's ``priority.PinTracker`` (its own lock, never taken with ``_lock`` held).
Warnings are handed to ``error_cb`` (or the ``nats_sync`` log) on the reading thread,
never on the client's threads. ``stop()`` and the client's close end the core
subscription, which wakes every waiting reader.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING

from nats_sync import _defaults as d
from nats_sync._core.components.subscription import unsubscribe_quietly
from nats_sync._core.validate import check_timeout
from nats_sync.errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    Error,
    ErrorCallback,
    TimeoutError,
)
from nats_sync.jetstream._consumers.msg import JsMsg
from nats_sync.jetstream._consumers.priority import PullGroup
from nats_sync.jetstream._consumers.pull_wire import classify, message_size, pull_body
from nats_sync.jetstream._consumers.reader_end import (
    ACTIVE,
    CLOSED,
    ENDED,
    FAILED,
    ReaderEnd,
)
from nats_sync.jetstream.errors import ConsumerDeletedError, NoHeartbeatError

if TYPE_CHECKING:
    from nats_sync.jetstream._streams.wire import CoreClient
    from nats_sync.msg import Msg

log = logging.getLogger("nats_sync")

#: ``again(messages, bytes, seconds)``: the body of a fetch's pull for what it still
#: wants (bytes 0: no byte limit) within the seconds left, or None not to pull again.
PullAgain = Callable[[int, int, float], "bytes | None"]


# --- one pull: fetch -------------------------------------------------------------------


class MessageBatch:
    """The messages of one pull request, yielded as they arrive.

    Iterating blocks until the next message or the end of the batch: the requested
    count or bytes arrived, the server ended the request (nothing more now, a timeout
    at ``max_wait``), the heartbeats stopped, or the deadline passed. An empty batch is
    normal and raises nothing; a terminal error (the consumer was deleted, does not
    exist, ...) is in :attr:`error` once the batch ends. The messages are kept: a second
    iteration yields them again. ``len()`` waits for the end. The inbox subscription
    is removed when the batch ends, is closed, or is garbage collected. Use from one
    thread at a time (other threads wait on a lock).
    """

    def __init__(
        self,
        client: CoreClient,
        subject: str,
        body: bytes,
        *,
        batch: int,
        max_bytes: int | None,
        wait: float,
        heartbeat: float | None,
        ack_timeout: float,
        group: PullGroup | None = None,
        again: PullAgain | None = None,
    ) -> None:
        self._client = client
        self._subject = subject
        self._group = group
        self._again = again
        self._limit = batch
        self._max_bytes = max_bytes or 0
        self._heartbeat = heartbeat or 0.0
        self._ack_timeout = ack_timeout
        self._msgs: list[JsMsg] = []
        self._bytes = 0
        self._error: BaseException | None = None
        self._done = False
        self._lock = threading.Lock()
        self._inbox = inbox = client.new_inbox()
        self._sub = client.subscribe(
            inbox,
            pending_msgs_limit=max(d.DEFAULT_SUB_PENDING_MSGS_LIMIT, batch + 16),
            pending_bytes_limit=max(d.DEFAULT_SUB_PENDING_BYTES_LIMIT, 2 * self._max_bytes),
        )
        self._release = weakref.finalize(self, unsubscribe_quietly, self._sub)
        self._release.atexit = False  # the client's close ends it at exit anyway
        try:
            client.publish(subject, body, reply=inbox)
        except BaseException:
            self._release()
            raise
        now = time.monotonic()
        self._deadline = now + wait
        self._heartbeat_due = now + 2 * self._heartbeat if heartbeat else math.inf

    @property
    def done(self) -> bool:
        """Whether the batch has ended (no more messages will be added)."""
        return self._done

    @property
    def error(self) -> BaseException | None:
        """The error that ended the batch, or None (an empty batch is not an error)."""
        return self._error

    def __iter__(self) -> Iterator[JsMsg]:
        index = 0
        msgs = self._msgs
        while True:
            if index < len(msgs):
                yield msgs[index]
                index += 1
                continue
            with self._lock:
                if index >= len(msgs) and not self._pump() and index >= len(msgs):
                    return

    def __len__(self) -> int:
        """The number of messages, once the batch has ended (waits for the end)."""
        with self._lock:
            while self._pump():
                pass
        return len(self._msgs)

    def close(self) -> None:
        """Ends the batch now; messages not yet received are left to the server (they
        are redelivered after the consumer's ``ack_wait``)."""
        self._done = True
        self._release()

    stop = close

    def __enter__(self) -> MessageBatch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _pump(self) -> bool:
        """Under ``_lock``: reads until one more message is kept (True) or the batch
        ends (False)."""
        sub = self._sub
        while not self._done:
            now = time.monotonic()
            wait = min(self._deadline, self._heartbeat_due) - now
            if wait <= 0:
                if now >= self._deadline:
                    self._finish(None)
                else:
                    self._finish(
                        NoHeartbeatError(
                            f"no message or heartbeat for {2 * self._heartbeat}s: the pull "
                            "request is lost (server gone or restarted?)"
                        )
                    )
                return False
            try:
                msg = sub.next_msg(wait)
            except TimeoutError:
                continue
            except ConnectionClosedError as err:
                self._finish(err)
                return False
            except BadSubscriptionError:
                self._finish(None)  # close() from another thread
                return False
            if self._heartbeat:
                self._heartbeat_due = time.monotonic() + 2 * self._heartbeat
            if msg.status is None:
                if self._group is not None:
                    self._group.seen(msg)
                self._msgs.append(JsMsg(msg, self._client, self._ack_timeout))
                if self._max_bytes:
                    self._bytes += message_size(msg)
                if len(self._msgs) >= self._limit or (
                    self._max_bytes and self._bytes >= self._max_bytes
                ):
                    self._finish(None)
                return True
            status = classify(msg)
            if status.kind == "heartbeat" or (status.kind == "pin_lost" and self._pull_again()):
                continue
            # done and reset end a fetch quietly (the request is over, try again), and
            # so does a lost pin with no time left; a refusal, a missing or deleted
            # consumer and the rest are its error.
            self._finish(None if status.kind == "pin_lost" else status.error)
            return False
        return False

    def _pull_again(self) -> bool:
        """Under ``_lock``, after a 423: drops the pin and pulls again without it for
        what is still wanted; False (the batch ends) with too little time left."""
        if self._group is not None:
            self._group.lost()
        left = self._deadline - time.monotonic()
        body = (
            None
            if self._again is None
            else self._again(
                self._limit - len(self._msgs), max(self._max_bytes - self._bytes, 0), left
            )
        )
        if body is None:
            return False
        try:
            self._client.publish(self._subject, body, reply=self._inbox)
        except Error:
            return False  # closed or not sendable now: end with what came
        return True

    def _finish(self, error: BaseException | None) -> None:
        self._error = error
        self._done = True
        self._release()

    def __repr__(self) -> str:
        state = "done" if self._done else "open"
        return f"<nats_sync.jetstream.MessageBatch {len(self._msgs)} messages, {state}>"


# --- continuous pulls: messages() ---------------------------------------------------------


class MessageStream:
    """Messages of a consumer, pulled ahead continuously; made by ``messages()``.

    ``for msg in stream`` yields until :meth:`stop`, :meth:`drain` (after what was
    received), or the client's close; it raises a terminal error such as
    ``ConsumerDeletedError``. Reconnects, server restarts and missed heartbeats are
    survived (the latter two are reported as warnings). A context manager that stops.

    Args:
        client: the connection.
        subject: the consumer's ``CONSUMER.MSG.NEXT`` subject.
        label: how errors name the consumer.
        max_messages: messages asked for ahead at most (buffered or in flight).
        max_bytes: bytes asked for ahead at most (None: no byte limit).
        max_wait: each pull request's ``expires``, seconds.
        heartbeat: the idle heartbeat asked for, seconds.
        ack_timeout: the default ``double_ack`` timeout of the messages.
        exists: ``exists(timeout)``: False when the consumer is certainly gone;
            raises when it cannot tell.
        error_cb: gets the warnings (else the ``nats_sync`` log).
        group: the priority group the pulls name, with its criteria and pin.
        threshold_messages: pull again once this many messages or fewer are buffered
            or in flight (None: half of ``max_messages``).
        threshold_bytes: the same for bytes, with ``max_bytes`` (None: half of it).
        stop_after: end once this many messages were handed out (None: never); the
            pulls never ask for more than that.
        raise_missed_heartbeat: a missed heartbeat is raised from ``next()`` as
            ``NoHeartbeatError`` (once; the stream goes on) instead of reported.
    """

    def __init__(
        self,
        client: CoreClient,
        subject: str,
        label: str,
        *,
        max_messages: int,
        max_bytes: int | None,
        max_wait: float,
        heartbeat: float,
        ack_timeout: float,
        exists: Callable[[float], bool],
        error_cb: ErrorCallback | None = None,
        group: PullGroup | None = None,
        threshold_messages: int | None = None,
        threshold_bytes: int | None = None,
        stop_after: int | None = None,
        raise_missed_heartbeat: bool = False,
    ) -> None:
        self._client = client
        self._group = group
        self._subject = subject
        self._label = label
        self._max_msgs = max_messages
        self._max_bytes = max_bytes or 0
        self._threshold_msgs = (
            max_messages // 2 if threshold_messages is None else threshold_messages
        )
        self._threshold_bytes = self._max_bytes // 2 if threshold_bytes is None else threshold_bytes
        #: Messages still to hand out before the stream ends (None: no end).
        self._left = stop_after
        self._raise_missed_heartbeat = raise_missed_heartbeat
        self._expires = max_wait
        self._heartbeat = heartbeat
        self._ack_timeout = ack_timeout
        self._exists = exists
        self._error_cb = error_cb
        self._lock = threading.Lock()
        # Guarded by _lock (see the module docstring).
        self._connected = True
        self._pending_msgs = 0
        self._pending_bytes = 0
        #: A pull counted as pending and not yet published (batch, bytes): what an
        #: interrupted ``next()`` (Ctrl-C between the two) takes back.
        self._unsent: tuple[int, int] | None = None
        self._heartbeat_due = math.inf
        self._retry_at = 0.0
        self._backoff = 0.0
        self._check_due = False
        self._warnings: list[BaseException] = []
        #: True while a next() takes and counts a message (so still True after a cut).
        self._taking = False
        self._recount = False  # the count is in doubt: redo it when idle
        self._inbox = client.new_inbox()
        self._sub = client.subscribe(
            self._inbox,
            pending_msgs_limit=max(d.DEFAULT_SUB_PENDING_MSGS_LIMIT, 2 * max_messages + 16),
            pending_bytes_limit=max(d.DEFAULT_SUB_PENDING_BYTES_LIMIT, 2 * self._max_bytes),
        )
        self._ending = ReaderEnd(self, client, self._sub, label, MessageStream._on_client_event)
        with self._lock:
            first = self._take_pull(time.monotonic())
        if first is not None:
            self._send_pull(*first)

    # --- reading ------------------------------------------------------------------------

    def next(self, timeout: float | None = None) -> JsMsg:
        """The next message.

        Args:
            timeout: seconds to wait; None waits until a message comes or the stream
                ends.

        Raises:
            TimeoutError: nothing came in time (the stream goes on).
            ConsumerDeletedError: the consumer was deleted (also every later call).
            StatusError: the server answered the pulls with an unexpected status.
            BadSubscriptionError: the stream was stopped, or drained and read out.
            ConnectionClosedError: the client closed.
        """
        if timeout is not None:
            check_timeout(timeout, zero_ok=True)
        deadline = None if timeout is None else time.monotonic() + timeout
        sub = self._sub
        if self._taking:
            self._doubt_count()
        self._taking = True
        try:
            while True:
                try:
                    wait = self._prepare(deadline)
                except BaseException:
                    self._forget_unsent()
                    raise
                try:
                    msg = sub.next_msg(wait)
                except TimeoutError:
                    self._on_idle()
                    if deadline is not None and time.monotonic() >= deadline:
                        raise TimeoutError(
                            f"no message from {self._label} within {timeout}s"
                        ) from None
                    continue
                except ConnectionClosedError:
                    self._ending.end(CLOSED, None)
                    raise
                except BadSubscriptionError:
                    self._ending.end(ENDED, None)  # drained, stopped, or the client drained
                    continue
                if msg.status is None:
                    if self._group is not None:
                        self._group.seen(msg)
                    now = time.monotonic()
                    with self._lock:
                        if self._pending_msgs > 0:
                            self._pending_msgs -= 1
                        if self._max_bytes:
                            self._pending_bytes = max(0, self._pending_bytes - message_size(msg))
                        self._heartbeat_due = self._idle_due(now)
                        self._backoff = 0.0
                        if self._left is not None:
                            self._left -= 1
                    self._taking = False
                    if self._left == 0:  # stop_after reached: this one is the last
                        self._ending.end(ENDED, None)
                    return JsMsg(msg, self._client, self._ack_timeout)
                self._on_status(msg)
        except Exception:
            self._taking = False  # an error, not a cut: what was taken is counted
            raise

    def __iter__(self) -> MessageStream:
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

    # --- ending ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stops at once: no more pulls, messages received but not yet read are dropped
        (the server redelivers them after ``ack_wait``); waiting readers wake up."""
        self._ending.stop()

    def drain(self, timeout: float | None = None) -> None:
        """Stops pulling; what the server sent until it saw the unsubscribe is still
        read, then the iteration ends.

        Args:
            timeout: seconds to wait for the server to confirm (None: the client's
                ``drain_timeout``).

        Raises:
            DrainTimeoutError: the server did not confirm in time (the stream ends
                anyway).
        """
        self._ending.drain(timeout)

    def __enter__(self) -> MessageStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- the machinery (reading threads) ---------------------------------------------------

    def _prepare(self, deadline: float | None) -> float | None:
        """Before a wait: raises if the stream ended, reports warnings, checks the
        consumer or pulls when due; returns how long to wait (None: no limit)."""
        if self._warnings:
            self._report_warnings()
        state = self._ending.check()
        now = time.monotonic()
        check = False
        request = None
        with self._lock:
            if state == ACTIVE and self._connected and now >= self._retry_at:
                if self._check_due:
                    self._check_due = False
                    check = True
                else:
                    request = self._take_pull(now)
            # How long to wait, with the pull just taken counted as pending.
            due = math.inf if deadline is None else deadline
            if state == ACTIVE:
                if not self._connected or self._pending_msgs == 0:
                    due = min(due, now + d.JS_PULL_POLL)
                elif self._awaiting():
                    due = min(due, self._heartbeat_due)
                if self._retry_at > now:
                    due = min(due, self._retry_at)
        if check:
            self._check_consumer(deadline)
            return 0.0
        if request is not None and not self._send_pull(*request):
            return 0.0  # not sent: the next call waits as the failure left things
        return None if due == math.inf else max(due - time.monotonic(), 0.0)

    def _forget_unsent(self) -> None:
        """Uncounts a pull taken and never published (``next()`` interrupted between
        the two), so the stream asks again instead of waiting for what it never asked."""
        unsent = self._unsent
        if unsent is not None:
            self._unsent = None
            with self._lock:
                self._pending_msgs = max(0, self._pending_msgs - unsent[0])
                self._pending_bytes = max(0, self._pending_bytes - unsent[1])

    def _take_pull(self, now: float) -> tuple[int, int] | None:
        """Under ``_lock``: the pull to send now, if the buffer is half empty; counts it
        as pending."""
        if self._max_bytes:
            if (
                self._pending_msgs > self._threshold_msgs
                and self._pending_bytes > self._threshold_bytes
            ):
                return None
            batch = self._max_msgs - self._pending_msgs
            size = self._max_bytes - self._pending_bytes
            if batch < 1 or size < 1:
                return None
        else:
            if self._pending_msgs > self._threshold_msgs:
                return None
            batch, size = self._max_msgs - self._pending_msgs, 0
        if self._left is not None:  # stop_after: never ask for more than is left
            batch = min(batch, self._left - self._pending_msgs)
            if batch < 1:
                return None
        self._pending_msgs += batch
        self._pending_bytes += size
        self._unsent = (batch, size)
        self._heartbeat_due = self._idle_due(now)
        return batch, size

    def _send_pull(self, batch: int, size: int) -> bool:
        """Publishes a pull ``_take_pull`` counted; False (and it is uncounted) when
        it could not be sent."""
        group = self._group
        body = pull_body(
            batch,
            expires=self._expires,
            max_bytes=size or None,
            heartbeat=self._heartbeat,
            group=None if group is None else group.fields(),
        )
        try:
            self._client.publish(self._subject, body, reply=self._inbox)
            self._unsent = None
        except ConnectionClosedError:
            self._ending.end(CLOSED, None)
            return False
        except Error as err:  # e.g. the reconnect buffer is full: try again soon
            self._unsent = None
            with self._lock:
                self._pending_msgs = max(0, self._pending_msgs - batch)
                self._pending_bytes = max(0, self._pending_bytes - size)
                self._retry_at = time.monotonic() + d.JS_PULL_POLL
                self._warnings.append(err)
            return False
        return True

    def _on_status(self, msg: Msg) -> None:
        status = classify(msg)
        kind = status.kind
        now = time.monotonic()
        if kind == "pin_lost" and self._group is not None:
            self._group.lost()  # the next pull goes without the id: a standby
        with self._lock:
            self._heartbeat_due = self._idle_due(now)
            if kind == "heartbeat":
                return
            if kind in ("done", "pin_lost") and status.pending_msgs is not None:
                self._pending_msgs = max(0, self._pending_msgs - status.pending_msgs)
                self._pending_bytes = max(0, self._pending_bytes - (status.pending_bytes or 0))
            elif kind != "terminal":
                # The request (a 404), every request (409 Leadership Change) or this one
                # (refused) is gone without saying what it owed: ask afresh.
                self._pending_msgs = self._pending_bytes = 0
                self._recount = False  # counted afresh from here
            if kind == "warning":
                assert status.error is not None
                self._warnings.append(status.error)
                self._retry_at = now + self._heartbeat
            elif kind == "pin_lost":
                self._retry_at = 0.0
            elif kind == "no_responders":
                self._check_due = True
                self._retry_at = now + self._backoff
                self._backoff = min(
                    max(self._backoff * 2, d.JS_PULL_RETRY_FIRST), d.JS_PULL_RETRY_MAX
                )
        if kind == "terminal":
            self._ending.end(FAILED, status.error)

    def _check_consumer(self, deadline: float | None) -> None:
        """After a 503: ends the stream if the consumer is gone; else pulls again."""
        wait = self._ack_timeout
        if deadline is not None:
            wait = min(wait, max(deadline - time.monotonic(), 0.5))
        try:
            exists = self._exists(wait)
        except Error as err:  # a timeout, JetStream not ready: ask again at the next 503
            with self._lock:
                self._warnings.append(err)
            return
        if not exists:
            self._ending.end(FAILED, ConsumerDeletedError(f"{self._label} no longer exists"))

    def _awaiting(self) -> bool:
        """Under ``_lock``: whether a request should still be open on the server (so
        heartbeats are due): messages asked for and not come, and bytes too when
        limited (a request whose bytes ran out exactly ends without a status)."""
        return self._pending_msgs > 0 and (not self._max_bytes or self._pending_bytes > 0)

    def _on_idle(self) -> None:
        """A wait timed out: a missed heartbeat is a warning, and every request is
        taken as lost (they are asked for again)."""
        now = time.monotonic()
        with self._lock:
            if (
                self._ending.state != ACTIVE
                or not self._connected
                or not self._awaiting()
                or now < self._heartbeat_due
            ):
                return
            self._pending_msgs = self._pending_bytes = 0
            if self._recount:
                self._recount = False  # asked afresh on purpose: no heartbeat was missed
            else:
                self._warnings.append(
                    NoHeartbeatError(
                        f"no message or heartbeat from {self._label} for "
                        f"{2 * self._heartbeat}s; pulling again"
                    )
                )
            self._heartbeat_due = self._idle_due(now)

    def _doubt_count(self) -> None:
        """The last ``next()`` was cut short: recount once idle (``JS_PULL_RECOUNT_AFTER``)."""
        with self._lock:
            self._taking = False
            self._recount = True
            self._heartbeat_due = min(
                self._heartbeat_due, time.monotonic() + d.JS_PULL_RECOUNT_AFTER
            )

    def _idle_due(self, now: float) -> float:
        """Under ``_lock``: when an open request still silent is taken as lost."""
        return now + (d.JS_PULL_RECOUNT_AFTER if self._recount else 2 * self._heartbeat)

    def _report_warnings(self) -> None:
        with self._lock:
            warnings, self._warnings = self._warnings, []
        missed = None
        for warning in warnings:
            if self._raise_missed_heartbeat and isinstance(warning, NoHeartbeatError):
                missed = missed or warning
                continue
            report(warning, self._error_cb, f"{self._label}: {warning}")
        if missed is not None:
            raise missed

    # --- the client's threads -----------------------------------------------------------------

    def _on_client_event(self, event: str) -> None:
        """Status listener: note the change; after a reconnect, pull again at once."""
        request = None
        with self._lock:
            if event == "disconnected":
                self._connected = False
            elif event == "reconnected":
                self._connected = True
                if self._ending.state == ACTIVE:
                    # What was asked of the old connection may be lost: ask afresh.
                    self._pending_msgs = self._pending_bytes = 0
                    self._recount = False  # counted afresh from here
                    self._retry_at = 0.0
                    request = self._take_pull(time.monotonic())
        if request is not None:
            self._send_pull(*request)  # only queues; a failure is retried by a reader

    def __repr__(self) -> str:
        state = self._ending.state_name
        return f"<nats_sync.jetstream.MessageStream {self._label} {state}>"


def report(error: BaseException, error_cb: ErrorCallback | None, text: str) -> None:
    """Hands ``error`` to ``error_cb``, or logs ``text`` as a warning; an ``error_cb``
    that raises is logged, never propagated."""
    if error_cb is None:
        log.warning("nats_sync: %s", text)
        return
    try:
        error_cb(error)
    except Exception:
        log.exception("nats_sync: error_cb raised while handling %r", error)
