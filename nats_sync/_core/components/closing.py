"""Drain and close: the waits of a drain, and the stops and joins of a close.

How it works: :meth:`Closer.drain` has the session UNSUB every subscription, waits for
a PONG (the server has the UNSUBs), ends the subscriptions, lets their callbacks finish
what is queued, stops taking publishes, flushes them and closes, all within one
timeout; :meth:`Closer.drain_subscription` does the same for one subscription.
:meth:`Closer.close_now` marks the session closed, stops the reconnector, lets the
writer send what is queued, cuts the socket, fails whatever waits (flushes, requests,
subscriptions), stops the timer and the callback thread and joins every thread of the
client but the calling one. What it needs of the handler goes through
:class:`CloseHost`.

Threads and state: none of its own but the process id it was made in. It runs on the
thread that drains or closes (a user's, or the one ``run_to_completion`` starts; the
reader, writer, timer or reconnect thread when the link closes the client). It calls
into the session and reads the link's fields under the lock it is given, the
handler's; it waits (flush, joins) without holding it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Protocol

from nats_sync import _defaults as d
from nats_sync._core.components.dispatch import Dispatcher
from nats_sync._core.components.link import Link
from nats_sync._core.components.publishing import Publisher
from nats_sync._core.components.subscription import Deliveries, Subscription
from nats_sync._core.session import Session
from nats_sync._core.threads.callbacks import CallbackRunner, StatusListeners
from nats_sync._core.threads.lifecycle import ClientThreads, join_threads
from nats_sync._core.threads.outbox import Outbox
from nats_sync._core.threads.timer import Timer
from nats_sync._core.transport.options import Options
from nats_sync._core.validate import check_timeout
from nats_sync.errors import ConnectionClosedError, DrainTimeoutError, FlushTimeoutError

log = logging.getLogger("nats_sync")


class CloseHost(Protocol):
    """What the closer needs of the handler that composes it."""

    #: The callback thread, once started (it runs user code: joined with a grace only).
    callback_thread: threading.Thread | None

    def check_process(self) -> None:
        """Raises if the client is used from a process other than the one that made it."""

    def check_can_start(self) -> None:
        """Raises unless a subscription may start or end (closed, draining, forked)."""

    def flush(self, timeout: float) -> None:
        """PING, then waits for its PONG."""

    def close(self) -> None:
        """Closes the client (run to completion)."""


class Closer:
    """Drains and closes one client; see the module docstring.

    Args:
        options: the client's options (``drain_timeout``, ``closed_cb``).
        lock: the handler's lock, which guards the session and the link's fields.
        session: the protocol state (drain's phases, the close).
        outbox: where the UNSUBs go; its writer is stopped.
        publisher: stops taking publishes.
        link: the live connection, its reconnector and its pings.
        dispatcher: holds the request inbox, whose requests a close fails.
        deliveries: the delivery threads of callback subscriptions.
        timer: stopped by a close.
        callbacks: runs ``closed_cb``; stopped by a close.
        status_listeners: told "closed".
        threads: every thread the client started.
        host: the handler.
    """

    def __init__(
        self,
        options: Options,
        lock: threading.Lock,
        session: Session[Subscription],
        outbox: Outbox,
        publisher: Publisher,
        link: Link,
        dispatcher: Dispatcher,
        deliveries: Deliveries,
        timer: Timer,
        callbacks: CallbackRunner,
        status_listeners: StatusListeners,
        threads: ClientThreads,
        host: CloseHost,
    ) -> None:
        self._options = options
        self._lock = lock
        self._session = session
        self._outbox = outbox
        self._publisher = publisher
        self._link = link
        self._dispatcher = dispatcher
        self._deliveries = deliveries
        self._timer = timer
        self._callbacks = callbacks
        self._status_listeners = status_listeners
        self._threads = threads
        self._host = host
        self._pid = os.getpid()

    def _send(self, frames: list[bytes]) -> None:
        """Under the lock: queues the session's UNSUB frames, in order."""
        for frame in frames:
            self._outbox.put_control(frame)

    # --- drain -------------------------------------------------------------------------

    def drain_subscription(self, sub: Subscription, timeout: float | None) -> None:
        """UNSUB, a PING/PONG to be sure the server has it, then end ``sub``.

        The subscription stays registered until the PONG: messages the server sent
        before it processed the UNSUB are still on the socket and must be delivered.

        Args:
            sub: the subscription.
            timeout: seconds in all; None for ``drain_timeout``.

        Raises:
            DrainTimeoutError: no PONG, or the callback did not finish, in time.
        """
        budget = self._options.drain_timeout if timeout is None else timeout
        check_timeout(budget)
        deadline = time.monotonic() + budget
        with self._lock:
            self._host.check_can_start()
            self._send(self._session.drain_subscription(sub))
        try:
            self._host.flush(budget)
        except FlushTimeoutError:
            raise DrainTimeoutError(
                f"the server did not confirm the UNSUB of {sub.subject!r} within {budget}s"
            ) from None
        finally:
            with self._lock:
                self._session.finished(sub)
            sub._end()
        self._join_delivery(sub, deadline)

    def _join_delivery(self, sub: Subscription, deadline: float) -> None:
        if not self._deliveries.join(sub, deadline):
            raise DrainTimeoutError(
                f"the callback of {sub.subject!r} did not finish its queued messages in time"
            )

    def drain(self, timeout: float | None) -> None:
        """Unsubscribe all, deliver what arrived, flush publishes, then close.

        Args:
            timeout: seconds in all; None for ``drain_timeout``.

        Raises:
            DrainTimeoutError: a phase did not finish in time (the client closes anyway).
        """
        budget = self._options.drain_timeout if timeout is None else timeout
        check_timeout(budget)
        deadline = time.monotonic() + budget
        with self._lock:
            self._host.check_process()
            subs, frames = self._session.begin_drain()
            self._send(frames)
        try:
            try:
                self._host.flush(budget)
            except FlushTimeoutError:
                raise DrainTimeoutError(
                    f"the server did not confirm the UNSUBs within {budget}s"
                ) from None
            with self._lock:
                self._session.subscriptions_drained(subs)
            for sub in subs:
                sub._end()
            for sub in subs:
                if sub.callback is not None:
                    self._join_delivery(sub, deadline)
            with self._lock:
                if self._session.begin_draining_publishes():
                    self._publisher.accepting = False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DrainTimeoutError(f"drain did not finish within {budget}s")
            try:
                self._host.flush(remaining)
            except FlushTimeoutError:
                raise DrainTimeoutError(
                    f"pending publishes were not flushed within {budget}s"
                ) from None
        finally:
            self._host.close()

    # --- close -------------------------------------------------------------------------

    def close_now(self) -> None:
        """Stops everything; joins every thread but the calling one. Idempotent."""
        if os.getpid() != self._pid:
            return  # a forked child must not touch the parent's socket or threads
        link = self._link
        with self._lock:
            first, subs = self._session.close()
            conn, conn_threads = link.take_for_close()
            subs += [sub for sub in self._deliveries.subscriptions() if sub not in subs]
        self._publisher.accepting = False
        link.reconnector.close()
        me = threading.current_thread()
        if first:
            log.info("nats_sync: closing connection to %s", link.current_server)
            self._outbox.stop_writer(discard=conn is None or conn.finished)
            join_threads(conn_threads[1:], me, d.CLOSE_FLUSH_TIMEOUT)
            if conn is not None:
                conn.shutdown()
            closed = ConnectionClosedError("the client is closed")
            link.pings.fail_waiters(closed)
            mux = self._dispatcher.inbox
            if mux is not None:
                mux.fail_all(closed)
            for sub in subs:
                sub._end(closed, stop_callbacks=True)
            self._timer.stop()
            self._callbacks.submit(self._options.closed_cb)
            self._status_listeners.tell("closed")
            self._callbacks.stop()
        with self._lock:
            threads = conn_threads + [
                t for t in (self._timer.thread, link.reconnector.thread) if t is not None
            ]
            # Threads that run user code: a callback that does not return is left to
            # finish on its own (daemon) thread; it is not called again, and what it
            # publishes raises ConnectionClosedError.
            user_threads = self._deliveries.threads()
            callback_thread = self._host.callback_thread
            if callback_thread is not None:
                user_threads.append(callback_thread)
        join_threads(threads, me, d.THREAD_JOIN_TIMEOUT)
        join_threads(user_threads, me, d.CLOSE_CALLBACK_GRACE, shared=True)
        # Started but never kept (their starter was interrupted): ending by now.
        left = [t for t in self._threads.alive() if t not in threads and t not in user_threads]
        join_threads(left, me, d.THREAD_JOIN_TIMEOUT, shared=True)
