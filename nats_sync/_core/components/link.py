"""The link: the client's one live connection, and its swap when it is lost or replaced.

How it works: :class:`Link` holds the live ``Connection`` and its reader and writer threads
(``conn``, ``conn_threads``), the server it reaches (``current_server``) and the last
error that cost it (``last_error``); it owns the ``Reconnector`` (the server pool and
the reconnect thread) and the ``Pings`` (the keepalive that finds a stale link).
:meth:`Link.activate` makes a handshaken transport live: the session's replay (SUBs,
the request inbox) goes ahead of the publishes buffered meanwhile, then the reader and
writer start. :meth:`Link.lose` is told by the reader, the writer or the keepalive
that the connection failed; the session decides between reconnecting (the reconnect
thread starts; it calls back :meth:`Link.reconnected` or :meth:`Link.given_up`) and
closing (the handler's ``close()``). Everything else it needs of the handler goes
through :class:`LinkHost`.

Threads and state: the link's fields are guarded by the lock it is given, the handler's
lock, the same one that guards the session: a swap changes both at once. Nothing here
blocks on I/O or calls out (callbacks, listeners, ``close()``) while holding it; lock
order is that lock, then any component's own. ``activate`` runs on the connecting
thread (the user's) or the reconnect thread; ``lose`` on the reader, writer or timer
thread, or a user's thread (``force_reconnect``); ``reconnects`` is written by the
reconnect thread only. ``connection()`` is read without the lock (an attribute read).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

from nats_sync._core.components.dispatch import Dispatcher
from nats_sync._core.components.pings import Pings
from nats_sync._core.components.publishing import Publisher
from nats_sync._core.components.reconnect import Handshaken, Reconnector
from nats_sync._core.components.subscription import Subscription
from nats_sync._core.session import Session, announced_servers
from nats_sync._core.state import State
from nats_sync._core.threads.callbacks import CallbackRunner, StatusListeners
from nats_sync._core.threads.connection import Connection
from nats_sync._core.threads.lifecycle import StartThread, run_to_completion
from nats_sync._core.threads.outbox import Outbox
from nats_sync._core.threads.timer import Timer
from nats_sync._core.transport.options import Options
from nats_sync._core.transport.pool import ServerAddress
from nats_sync.errors import Error, NatsConnectionError
from nats_sync.msg import Msg

log = logging.getLogger("nats_sync")


class LinkHost(Protocol):
    """What the link needs of the handler that composes it."""

    #: Routes the ops each new connection reads.
    dispatcher: Dispatcher

    def report_error(self, error: BaseException) -> None:
        """Hands ``error`` to ``error_cb`` (and the error listeners)."""

    def close(self) -> None:
        """Closes the client (a lost link that may not reconnect, or a given-up one)."""


class Link:
    """The live connection slot of one client; see the module docstring.

    Args:
        options: the client's options.
        lock: the handler's lock, which guards the session and the link's fields.
        session: the protocol state, asked (under ``lock``) what a swap means.
        outbox: the frames for the writer, and the disconnect buffer.
        publisher: told the server's ``max_payload``; parsed messages respond through it.
        timer: runs the keepalive.
        start_thread: starts (and keeps track of) one of the client's threads.
        callbacks: runs the user's connection callbacks.
        status_listeners: told "disconnected" and "reconnected".
        host: the handler.
    """

    def __init__(
        self,
        options: Options,
        lock: threading.Lock,
        session: Session[Subscription],
        outbox: Outbox,
        publisher: Publisher,
        timer: Timer,
        start_thread: StartThread,
        callbacks: CallbackRunner,
        status_listeners: StatusListeners,
        host: LinkHost,
    ) -> None:
        self._options = options
        self._lock = lock
        self._session = session
        self._outbox = outbox
        self._publisher = publisher
        self._start_thread = start_thread
        self._callbacks = callbacks
        self._status_listeners = status_listeners
        self._host = host
        self.reconnector = Reconnector(
            options, start_thread, host.report_error, self.reconnected, self.given_up
        )
        self.pings = Pings(options, outbox, timer, self.live, self.lose, self.wake_reader)
        self.current_server: ServerAddress | None = None
        self.last_error: BaseException | None = None
        self.reconnects = 0
        self.conn: Connection | None = None
        self.conn_threads: list[threading.Thread] = []

    # --- making a connection live ------------------------------------------------------

    def retry_first_connect(self, error: BaseException | None) -> None:
        """No server answered ``connect()``: the reconnect thread keeps trying."""
        with self._lock:
            self.last_error = error
            self._session.retry_first_connect()
            self.reconnector.start(None, [])

    def activate(self, handshaken: Handshaken) -> bool:
        """Makes a handshaken transport the live connection and starts its threads.

        Subscriptions (and the request inbox) are re-sent first, then whatever the outbox
        buffered while disconnected.

        Args:
            handshaken: the server, its transport, the parser and the server's INFO.

        Returns:
            False when the client closed meanwhile (the transport is closed).
        """
        server, transport, parser, info = handshaken
        # Messages are built as Msg by the parser itself, carrying our publish for respond().
        parser.set_message_type(Msg, self._publisher.publish)
        dispatcher = self._host.dispatcher
        conn = Connection(
            transport, parser, self._outbox, dispatcher.on_ops, self.lose, dispatcher.may_park
        )
        with self._lock:
            replay = self._session.activate(info)
            if replay is None:
                transport.close()
                return False
            frames, finished = replay
            self.reconnector.record_success(server)
            self.current_server = server
            self._publisher.max_payload = self._session.max_payload
            self._outbox.put_control_first(frames)
            self.conn = conn
            self.pings.reset()
            self._outbox.set_connected(True)
            self.conn_threads = [
                self._start_thread(conn.run_reader, "reader"),
                self._start_thread(conn.run_writer, "writer"),
            ]
        for sub in finished:
            sub._end()
        self.learn_servers(announced_servers(info), announce=False)
        log.info("nats_sync: connected to %s (server %s)", server, info.get("version", "?"))
        return True

    def reconnected(self, handshaken: Handshaken) -> bool:
        """Reconnect thread: a server answered; make it the live connection.

        Returns:
            False when the client closed meanwhile.
        """
        # The old writer has put back what it could not send; control frames are
        # replayed from the session, and flushes still waiting get fresh PINGs.
        self._outbox.keep_messages_only()
        if not self.activate(handshaken):
            return False
        self.reconnects += 1
        self._callbacks.submit(self._options.reconnected_cb)
        self._status_listeners.tell("reconnected")
        return True

    def learn_servers(self, urls: list[Any], announce: bool) -> None:
        """Adds the servers an INFO announced to the pool.

        Args:
            urls: the INFO's ``connect_urls``.
            announce: whether ``discovered_server_cb`` hears of new ones.
        """
        via = self.current_server
        if not urls or via is None:
            return
        added = self.reconnector.add_discovered(urls, via)
        if added:
            log.info("nats_sync: discovered %s", ", ".join(map(str, added)))
            if announce:
                self._callbacks.submit(self._options.discovered_server_cb)

    # --- the live connection -----------------------------------------------------------

    def connection(self) -> Connection | None:
        """The live connection, or None while there is none."""
        return self.conn

    def live(self) -> tuple[Connection, ServerAddress | None] | None:
        """Timer thread (the keepalive): the live connection and its server, if connected."""
        with self._lock:
            return self.live_locked()

    def live_locked(self) -> tuple[Connection, ServerAddress | None] | None:
        """Under the lock: the live connection and its server, if connected."""
        conn = self.conn
        if self._session.state is not State.CONNECTED or conn is None:
            return None
        return conn, self.current_server

    def set_max_payload(self, max_payload: int) -> None:
        """Reader thread: an INFO changed ``max_payload``."""
        self._publisher.max_payload = max_payload
        conn = self.conn
        if conn is not None:
            conn.parser.set_max_payload(max_payload)

    def wake_reader(self) -> None:
        """Makes a reader that stepped aside for requesters read again."""
        conn = self.conn
        if conn is not None:
            conn.wake_reader()

    # --- losing it ---------------------------------------------------------------------

    def note_error(self, error: BaseException) -> None:
        """Under the lock: ``error`` (an ``-ERR``) is the last one."""
        self.last_error = error

    def lose(self, conn: Connection, error: Error) -> None:
        """Reader, writer or timer thread: the live connection failed (or was dropped).

        On the main thread (``force_reconnect``, a requester reading its own reply) it
        runs on a thread of its own: a Ctrl-C landing part-way would leave the session
        RECONNECTING with no reconnect thread.

        Args:
            conn: the connection that failed; a connection no longer live is ignored.
            error: why.
        """
        run_to_completion(lambda: self._lose_now(conn, error), "lose")

    def _lose_now(self, conn: Connection, error: Error) -> None:
        allowed = self._options.allow_reconnect and self._options.max_reconnect_attempts != 0
        with self._lock:
            loss = self._session.lose(error, allowed) if conn is self.conn else None
            if loss is None:
                return
            retry = loss.reconnect
            if retry:
                self.conn = None
                self._outbox.set_connected(False)
                self._outbox.stop_writer(discard=False)  # wakes the old writer so it ends
                old_threads = self.conn_threads
                self.conn_threads = []
            # Without its traceback: the reader's frame (and its 256 KiB buffer) would
            # otherwise stay alive as long as last_error does.
            self.last_error = loss.reason.with_traceback(None)
            lost = self.current_server
        try:
            log.info("nats_sync: connection to %s lost: %s", lost, error)
            if loss.report:
                self._host.report_error(error)
            self._callbacks.submit(self._options.disconnected_cb)
            self._status_listeners.tell("disconnected")
        finally:
            # Even when Ctrl-C lands in the telling (a requester reading its own reply
            # reports the loss on the main thread): the session is RECONNECTING by now,
            # and without the reconnect thread it would stay so.
            if not retry:
                self._host.close()
            else:
                with self._lock:
                    if self._session.state is State.RECONNECTING:
                        self.reconnector.start(lost, old_threads)

    def drop(self, conn: Connection, reason: str) -> None:
        """Shuts ``conn`` down and loses it, for ``reason`` (forced, lame duck)."""
        conn.shutdown()
        self.lose(conn, NatsConnectionError(reason))

    def leave_lame_duck_server(self) -> None:
        """Reader thread: the server is going away; move to another one if there is one."""
        conn = self.conn
        if conn is None or not self._options.allow_reconnect:
            return
        if not self.reconnector.has_alternatives():
            return
        self.drop(conn, f"{self.current_server} entered lame duck mode")

    def given_up(self, error: BaseException) -> None:
        """Reconnect thread: no server could be reached; the client closes."""
        with self._lock:
            self.last_error = error
        self._host.close()

    def take_for_close(self) -> tuple[Connection | None, list[threading.Thread]]:
        """Under the lock: the connection and its threads, for ``close()`` to stop."""
        return self.conn, self.conn_threads
