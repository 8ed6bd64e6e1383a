"""The handler: drives the client's session with threads, locks and sockets.

How it works: the protocol state is ``Session`` (``session``, sans-IO): the life-cycle
state, the sid registry, the replay after a reconnect, the ``-ERR`` verdicts and drain's
phases. The handler calls it under its lock, sends the frames it returns and does what
it says (end a subscription, fail requests, reconnect or close). Around it ``Handler``
composes narrow objects, each owning its state and lock:

- ``Outbox`` (``threads.outbox``): frames for the writer, and the disconnect buffer, into
  which ``Publisher`` (``components.publishing``) encodes messages (the hot path).
- ``Requester`` (``components.requester``): request-reply over one inbox subscription,
  which the handler subscribes and routes for it (``open_request_inbox``).
- ``Link`` (``components.link``): the live connection and its reader and writer threads,
  the server it reaches and the swap when it is lost or replaced; it owns the
  ``Reconnector`` (``components.reconnect``: the server pool and the reconnect thread)
  and the ``Pings`` (``components.pings``: keepalive, stale detection, flush).
- ``Timer`` (``threads.timer``) and ``CallbackRunner`` (``threads.callbacks``: the
  callback thread).
- ``Dispatcher`` (``components.dispatch``) routes and counts the ops the ``Connection``
  (``threads.connection``) reads; it calls back ``_on_info``, ``_on_server_error`` and
  ``_finish_subscription``.

- ``Closer`` (``components.closing``): drain's waits, and close's stops and joins.

(Modules relative to ``nats_sync._core``.) The handler itself does what an INFO or an
``-ERR`` changes, registers subscriptions and listeners, and checks the process;
``Deliveries`` (``components.subscription``) runs one delivery thread per callback
subscription; ``threads.lifecycle`` starts and joins the threads and closes the clients
a forked child inherits.

Threads and the state they touch here:

- ``_lock`` guards every call into ``_session``, ``dispatcher.inbox`` and the link's
  fields (the link is given this lock). Nothing blocks on I/O while holding it; lock
  order is handler lock, then any component's own lock.
- The reader thread reads the session's ``subscriptions.by_sid`` and ``dispatcher.inbox``
  without the lock (a dict lookup and an attribute read are atomic).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from nats_sync import _defaults as d
from nats_sync._core.components.closing import Closer
from nats_sync._core.components.dispatch import Dispatcher
from nats_sync._core.components.link import Link
from nats_sync._core.components.publishing import Publisher
from nats_sync._core.components.reply_mux import RequestMux
from nats_sync._core.components.requester import Requester
from nats_sync._core.components.subscription import Deliveries, Subscription
from nats_sync._core.session import Session
from nats_sync._core.state import State
from nats_sync._core.threads.callbacks import CallbackRunner, Listeners, StatusListeners
from nats_sync._core.threads.connection import Connection
from nats_sync._core.threads.lifecycle import (
    ClientThreads,
    check_same_process,
    current_pid,
    run_to_completion,
    watch_fork,
)
from nats_sync._core.threads.outbox import Outbox
from nats_sync._core.threads.timer import Timer
from nats_sync._core.transport.options import Options
from nats_sync._core.transport.pool import ServerAddress
from nats_sync._core.validate import check_int, check_timeout
from nats_sync.errors import (
    Error,
    InvalidArgumentError,
    NoServersError,
    PermissionsViolationError,
)

log = logging.getLogger("nats_sync")


class Handler:
    """One client's connection handler: it connects, acts on what the server's INFO and
    ``-ERR`` change and registers subscriptions, asking its ``Session`` under its one
    lock what each event means; its ``Link`` swaps connections (lose, reconnect) and its
    ``Closer`` drains and closes, under the same lock. The client's public methods call
    into it; the components it composes (outbox, publisher, requester, dispatcher,
    deliveries, link with its reconnector and pings, closer) each own their own state.
    See the module docstring for the threads."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self._lock = threading.Lock()
        self._session: Session[Subscription] = Session(not options.skip_subject_validation)
        self._pid = os.getpid()
        self.outbox = Outbox(options.pending_size, options.full_wait)
        self.publisher = Publisher(self.outbox, self, not options.skip_subject_validation)
        self._callbacks = CallbackRunner()
        #: The callback thread, once started.
        self.callback_thread: threading.Thread | None = None
        self._threads = ClientThreads()
        self.timer = Timer()
        self.requester = Requester(
            self, self.publisher, self.timer, self._callbacks.submit, options.inbox_prefix
        )
        #: Internal listeners (JetStream readers) told "disconnected", "reconnected" and
        #: "closed"; the list is replaced whole under the lock, read without it.
        self._status_listeners = StatusListeners()
        self._error_listeners: Listeners[BaseException] = Listeners()
        self.link = Link(
            options,
            self._lock,
            self._session,
            self.outbox,
            self.publisher,
            self.timer,
            self._threads.start,
            self._callbacks,
            self._status_listeners,
            self,
        )
        self.reconnector = self.link.reconnector
        self._pings = self.link.pings
        self.dispatcher = Dispatcher(
            self._session.subscriptions,
            self.outbox,
            self._pings.on_pong,
            self._on_info,
            self._on_server_error,
            self._finish_subscription,
        )
        self._deliveries = Deliveries(self._threads.start)
        self.closer = Closer(
            options,
            self._lock,
            self._session,
            self.outbox,
            self.publisher,
            self.link,
            self.dispatcher,
            self._deliveries,
            self.timer,
            self._callbacks,
            self._status_listeners,
            self._threads,
            self,
        )
        watch_fork(self)

    @property
    def state(self) -> State:
        """The life-cycle state (the session's)."""
        return self._session.state

    @property
    def server_info(self) -> dict[str, Any]:
        """The server's INFO (the session's)."""
        return self._session.server_info

    @property
    def current_server(self) -> ServerAddress | None:
        """The server of the live connection, or of the last one (the link's)."""
        return self.link.current_server

    @property
    def last_error(self) -> BaseException | None:
        """The last error that cost the connection, or an ``-ERR`` (the link's)."""
        return self.link.last_error

    @property
    def reconnects(self) -> int:
        """How many times the client reconnected (the link's)."""
        return self.link.reconnects

    def forked(self) -> None:
        """In a forked child, which has none of our threads: closed, without I/O."""
        self._session.forked()
        self.publisher.accepting = False

    # --- connecting ----------------------------------------------------------------

    def connect(self) -> None:
        """Makes one pass over the server pool and starts the threads.

        With ``retry_on_failed_connect``, a failed pass does not raise: the client starts
        in the reconnecting state and keeps trying in the background.

        Raises:
            NoServersError: no server could be reached (the last error as ``__cause__``).
            AuthorizationError: the server refused the credentials.
        """
        try:
            handshaken = self.reconnector.first_pass()
        except Error as err:
            if not self.options.retry_on_failed_connect:
                raise
            last = err.__cause__ if isinstance(err, NoServersError) else err
            log.info("nats_sync: no server answered (%s); retrying in the background", last)
            self._start_background_threads()
            self.link.retry_first_connect(last)
            return
        self._start_background_threads()
        self.link.activate(handshaken)

    def _start_background_threads(self) -> None:
        self.callback_thread = self._threads.start(self._callbacks.run, "callbacks")
        self.timer.start(self._threads.start)
        self._pings.start()

    def _send(self, frames: list[bytes]) -> None:
        """Under the lock: queues the session's SUB/UNSUB frames, in order."""
        for frame in frames:
            self.outbox.put_control(frame)

    # --- hooks of the publisher, the requester and the pings ----------------------------

    def connection(self) -> Connection | None:
        """The live connection, or None while there is none."""
        return self.link.connection()

    def open_request_inbox(self, mux: RequestMux) -> RequestMux:
        """Subscribes ``mux``'s wildcard inbox once; returns the mux in use."""
        with self._lock:
            self.check_can_start()
            if self.dispatcher.inbox is None:
                self._send(self._session.open_inbox(mux.subject))
                self.dispatcher.inbox = mux
            return self.dispatcher.inbox

    def read_own_reply(self, is_done: Callable[[], bool], deadline: float) -> None:
        """A requester's thread reads its reply itself if the reader stepped aside."""
        conn = self.link.connection()
        if conn is not None and conn.can_lead:
            conn.lead(is_done, deadline)

    def wake_reader(self) -> None:
        """Makes a reader that stepped aside for requesters read again."""
        self.link.wake_reader()

    # --- the reader's dispatch calls these ----------------------------------------------

    def _on_info(self, info: dict[str, Any]) -> None:
        """Reader thread: an INFO on the live connection."""
        with self._lock:
            change = self._session.on_info(info)
        if change.max_payload is not None:
            self.link.set_max_payload(change.max_payload)
        self.link.learn_servers(change.connect_urls, announce=True)
        if change.lame_duck:
            self._callbacks.submit(self.options.lame_duck_mode_cb)
            self.link.leave_lame_duck_server()

    def _on_server_error(self, text: str) -> None:
        """Reader thread: an ``-ERR``; it is reported, and may end a subscription or
        fail requests."""
        log.warning("nats_sync: server error: %s", text)
        with self._lock:
            outcome = self._session.on_server_error(text)
            error = outcome.verdict.error
            self.link.note_error(error)
        if outcome.denied is not None:
            outcome.denied._end(error)
        mux = self.dispatcher.inbox
        if outcome.verdict.denied_publish and mux is not None:
            assert isinstance(error, PermissionsViolationError)
            mux.fail_subject(error.subject, error)
        self.report_error(error)

    def _finish_subscription(self, sub: Subscription) -> None:
        """Reader thread: ``sub`` received its last message (max_msgs)."""
        with self._lock:
            self._session.finished(sub)
        sub._end()

    # --- listeners ---------------------------------------------------------------------

    def add_status_listener(self, listener: Callable[[str], None]) -> Callable[[], None]:
        """Registers an internal listener; returns the call that removes it.

        ``listener(event)`` runs on the thread that saw the change (reader, writer,
        timer, reconnect thread or the closing one), outside the handler's lock: it must
        only note the event and return (set a flag, wake a thread). On ``"closed"``,
        told by ``close()`` after every subscription ended, it may also wait up to
        ``CLOSE_CALLBACK_GRACE`` for a thread of its own to end, so that ``close()``
        leaves no JetStream thread behind.
        """
        return self._status_listeners.add(listener)

    def add_error_listener(self, listener: Callable[[BaseException], None]) -> Callable[[], None]:
        """Registers an internal listener of the errors ``error_cb`` gets (a slow
        consumer, a permissions violation, ...); returns the call that removes it.
        ``listener(error)`` runs on the thread that saw the error and must return at once."""
        return self._error_listeners.add(listener)

    def force_reconnect(self) -> None:
        """Drops the live connection and runs the reconnect process."""
        if not self.options.allow_reconnect or self.options.max_reconnect_attempts == 0:
            raise InvalidArgumentError(
                "force_reconnect() needs reconnecting to be allowed "
                "(allow_reconnect=True and max_reconnect_attempts != 0)"
            )
        with self._lock:
            self.check_can_start()
            live = self.link.live_locked()
        if live is None:
            return  # already reconnecting
        self.link.drop(live[0], "reconnect forced by the user")

    # --- errors and callbacks --------------------------------------------------------

    def report_error(self, error: BaseException) -> None:
        """Hands ``error`` to ``error_cb`` on the callback thread (or logs it), and tells
        the error listeners."""
        self._error_listeners.tell(error)
        if self.options.error_cb is not None:
            self._callbacks.submit(self.options.error_cb, error)
        else:
            log.error("nats_sync: %s", error)

    def check_process(self) -> None:
        """Raises if the client is used from a process other than the one that made it."""
        check_same_process(self._pid)

    def _check_open(self) -> None:
        """Raises unless the client is open, in the process that made it."""
        self.check_process()
        self._session.check_open()

    def check_can_start(self) -> None:
        """Raises unless a subscription may start or end, or a request start (closed,
        draining, forked)."""
        if self._session.state is State.CONNECTED and current_pid[0] == self._pid:
            return
        self.check_process()
        self._session.check_can_start()

    def check_can_publish(self) -> None:
        """Raises the reason publishing is refused (closed, draining, forked)."""
        self.check_process()
        self._session.check_can_publish()

    # --- subscriptions ---------------------------------------------------------------

    def next_sid(self) -> int:
        """A new subscription id."""
        return self._session.subscriptions.next_sid()

    def add_subscription(self, sub: Subscription) -> None:
        """Registers ``sub`` and sends its SUB (and UNSUB max when max_msgs is set)."""
        with self._lock:
            self.check_process()
            self._send(self._session.subscribe(sub))
            self.wake_reader()
            if sub.callback is not None:
                self._deliveries.start(sub)

    def unsubscribe(self, sub: Subscription, limit: int = 0) -> None:
        """Sends UNSUB now, or after ``limit`` messages in total."""
        check_int(limit, "limit", 0)
        with self._lock:
            self.check_can_start()
            unsubscribed = self._session.unsubscribe(sub, limit)
            self._send(unsubscribed.frames)
            if not unsubscribed.ended:
                sub._limit_handout(limit)
                return
        if limit:
            # More than ``limit`` arrived already: the callback still gets up to ``limit``.
            sub._limit_handout(limit)
            sub._end(stop_callbacks=sub._handed_all)
        else:
            sub._end(stop_callbacks=True)

    def drain_subscription(self, sub: Subscription, timeout: float | None) -> None:
        """UNSUB, a PING/PONG to be sure the server has it, then end ``sub`` (the
        closer's)."""
        self.closer.drain_subscription(sub, timeout)

    # --- flush -----------------------------------------------------------------------

    def flush(self, timeout: float = d.DEFAULT_FLUSH_TIMEOUT) -> None:
        """PING, then wait for its PONG (everything queued before went out first)."""
        check_timeout(timeout)
        self._check_open()
        self._pings.flush(timeout)

    # --- drain and close -------------------------------------------------------------

    def drain(self, timeout: float | None) -> None:
        """Unsubscribe all, deliver what arrived, flush publishes, then close (the
        closer's)."""
        self.closer.drain(timeout)

    def close(self) -> None:
        """Stops everything; joins every thread but the calling one. Idempotent.

        A Ctrl-C on the main thread ends only the wait: the close goes on to its end.
        """
        run_to_completion(self.closer.close_now, "close")

    def debug_snapshot(self) -> dict[str, Any]:
        """What the client holds right now, for tests and debugging (not an API)."""
        with self._lock:
            mux = self.dispatcher.inbox
            return {
                "state": self.state,
                "subscriptions": len(self._session.subscriptions),
                "requests_in_flight": len(mux) if mux is not None else 0,
                "late_replies": mux.late_replies if mux is not None else 0,
                "request_inbox": mux.subject if mux is not None else None,
                "timer_entries": len(self.timer),
                "delivery_threads": self._deliveries.threads(),
                "connection_threads": list(self.link.conn_threads),
                "connection": self.link.conn,
            }
