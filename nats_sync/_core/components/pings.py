"""PING and PONG: the keepalive, stale detection and flush.

How it works: every ``ping_interval`` the timer thread runs :meth:`Pings._keepalive`,
which PINGs the server while a connection is live and counts the PINGs still
unanswered; past ``max_outstanding_pings`` the connection is stale: it is shut down
and handed to ``on_lost`` (the link's ``lose``, which reconnects or closes).
:meth:`Pings.flush` PINGs with a waiter and waits for its PONG: everything queued
before it went out first. The server answers PINGs in order, so each PONG the reader
gets (:meth:`Pings.on_pong`) clears the count and settles the oldest waiter. The
waiters live in the ``Outbox`` (``pong_waiters``), queued with their PING under its
lock, so they line up in the order the PINGs go out; a reconnect re-sends a PING for
each (``Outbox.keep_messages_only``) and ``close()`` fails them (:meth:`fail_waiters`).

Threads and state: ``_unanswered`` is guarded by ``_lock``, which is held for the count
only (never around I/O or a call out) and taken after the handler's lock: the keepalive
asks ``live`` (which takes the handler's lock) before it takes ``_lock``. The timer
thread (the keepalive) adds to it; the reader thread (a PONG) and the thread that makes
a connection live (:meth:`reset`, under the handler's lock) clear it. Flushing threads
touch only the outbox and an Event of their own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from nats_sync._core.threads.connection import Connection
from nats_sync._core.threads.outbox import Outbox
from nats_sync._core.threads.timer import Timer
from nats_sync._core.threads.waiting import Signal
from nats_sync._core.transport.options import Options
from nats_sync._core.transport.pool import ServerAddress
from nats_sync.errors import Error, FlushTimeoutError, StaleConnectionError

#: The live connection and its server, or None while not connected.
LiveConnection = Callable[[], tuple[Connection, ServerAddress | None] | None]


class Pings:
    """The keepalive PINGs of one client, and flush.

    Args:
        options: the client's options (``ping_interval``, ``max_outstanding_pings``).
        outbox: where PINGs and their waiters are queued.
        timer: runs the keepalive.
        live: the live connection and its server, or None while there is none.
        on_lost: timer thread: a stale connection, already shut down, and the error.
        wake_reader: makes a reader that stepped aside for requesters read again.
    """

    def __init__(
        self,
        options: Options,
        outbox: Outbox,
        timer: Timer,
        live: LiveConnection,
        on_lost: Callable[[Connection, Error], None],
        wake_reader: Callable[[], None],
    ) -> None:
        self._interval = options.ping_interval
        self._max_unanswered = options.max_outstanding_pings
        self._outbox = outbox
        self._timer = timer
        self._live = live
        self._on_lost = on_lost
        self._wake_reader = wake_reader
        self._lock = threading.Lock()
        self._unanswered = 0

    def start(self) -> None:
        """Schedules the first keepalive on the timer."""
        self._timer.schedule(time.monotonic() + self._interval, self._keepalive)

    def reset(self) -> None:
        """A connection became live: no PING of it is unanswered yet."""
        with self._lock:
            self._unanswered = 0

    def on_pong(self) -> None:
        """Reader thread: a PONG answers the oldest PING."""
        with self._lock:
            self._unanswered = 0
        waiter = self._outbox.pop_pong_waiter()
        if waiter is not None:
            waiter(None)

    def flush(self, timeout: float) -> None:
        """PING, then wait for its PONG.

        Raises:
            FlushTimeoutError: no PONG within ``timeout`` seconds.
            ConnectionClosedError: the client closed first.
        """
        done = Signal()  # not threading.Event: its wait is not safe to interrupt
        outcome: list[BaseException | None] = []

        def on_pong(error: BaseException | None) -> None:
            outcome.append(error)
            done.set()

        self._outbox.put_ping(on_pong)
        self._wake_reader()
        if not done.wait(timeout):
            raise FlushTimeoutError(f"no PONG from the server within {timeout}s")
        if outcome[0] is not None:
            raise outcome[0]

    def fail_waiters(self, error: BaseException) -> None:
        """The client closed: every flush still waiting gets ``error``."""
        for waiter in self._outbox.take_pong_waiters():
            if waiter is not None:
                waiter(error)

    def _keepalive(self) -> None:
        """Timer thread: a PING every ``ping_interval``; too many unanswered: stale."""
        self._timer.schedule(time.monotonic() + self._interval, self._keepalive)
        live = self._live()
        if live is None:
            return
        conn, server = live
        with self._lock:
            self._unanswered += 1
            unanswered = self._unanswered - 1
            stale = self._unanswered > self._max_unanswered
        if stale:
            conn.shutdown()
            self._on_lost(
                conn, StaleConnectionError(f"{unanswered} PINGs to {server} went unanswered")
            )
            return
        self._outbox.put_ping(None)
