"""The handler: the client's connection state, its subscriptions, drain and close.

How it works: ``Handler`` composes narrow objects, each owning its state and lock:

- ``Outbox`` (``threads.outbox``): frames for the writer, and the disconnect buffer, into
  which ``Publisher`` (``components.publishing``) encodes messages (the hot path).
- ``Requester`` (``components.requester``): request-reply over one inbox subscription,
  which the handler subscribes and routes for it (``open_request_inbox``).
- ``Reconnector`` (``components.reconnect``): the server pool, the first connection and the
  reconnect thread; it calls back ``_on_reconnected`` or ``_on_given_up``.
- ``Timer`` (``threads.timer``), ``Pings`` (``components.pings``: keepalive, stale
  detection, flush), ``CallbackRunner`` (``threads.callbacks``: the callback thread).
- ``Connection`` (``threads.connection``): the reader and writer threads of one transport.

(Modules relative to ``nats_sync._core``.) The handler itself keeps the life-cycle state,
the subscriptions, the connection swap (``_activate`` and ``_on_lost``), the reader's
dispatch, drain and close; ``Deliveries`` (``components.subscription``) runs one delivery
thread per callback subscription; ``threads.lifecycle`` starts and joins the threads and
closes the clients a forked child inherits.

Threads and the state they touch here:

- ``_lock`` guards ``state``, changes to ``subs``, ``_inbox``, ``_conn``,
  ``_conn_threads``, ``current_server``, ``last_error`` and
  ``_fatal_server_error``. Nothing blocks on I/O while holding it; lock order is
  handler lock, then any component's own lock.
- The reader thread reads ``subs`` and ``_inbox`` without the lock (a dict lookup and
  an attribute read are atomic) and alone writes ``in_msgs``, ``in_bytes``,
  ``errors_received`` and ``server_info`` once connected.
- While ``state`` is RECONNECTING no SUB/UNSUB frame is queued: subscriptions are
  replayed from ``subs`` when the next connection is activated, ahead of the buffered
  publishes.
- ``reconnects`` is written by the reconnect thread only.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from nats_sync import _defaults as d
from nats_sync._core import proto
from nats_sync._core.components.pings import Pings
from nats_sync._core.components.publishing import Publisher
from nats_sync._core.components.reconnect import Handshaken, Reconnector
from nats_sync._core.components.reply_mux import RequestMux
from nats_sync._core.components.requester import Requester
from nats_sync._core.components.subscription import Deliveries, Subscription
from nats_sync._core.state import DRAINING, State
from nats_sync._core.threads.callbacks import CallbackRunner, Listeners, StatusListeners
from nats_sync._core.threads.connection import Connection
from nats_sync._core.threads.lifecycle import (
    ClientThreads,
    check_same_process,
    current_pid,
    join_threads,
    run_to_completion,
    watch_fork,
)
from nats_sync._core.threads.outbox import Outbox
from nats_sync._core.threads.timer import Timer
from nats_sync._core.transport.options import Options
from nats_sync._core.transport.pool import ServerAddress
from nats_sync._core.validate import check_int, check_timeout
from nats_sync.errors import (
    BadSubscriptionError,
    ConnectionClosedError,
    ConnectionDrainingError,
    ConnectionReconnectingError,
    DrainTimeoutError,
    Error,
    FlushTimeoutError,
    InvalidArgumentError,
    NatsConnectionError,
    NoServersError,
    PermissionsViolationError,
    StaleConnectionError,
    server_error_from_description,
)
from nats_sync.msg import Msg

log = logging.getLogger("nats_sync")


class Handler:
    """One client's connection handler: it handles the connection's life (connect,
    lose, reconnect, drain, close), the server's ops as the reader thread parses them
    (dispatched to the components: subscriptions, replies, pings), and the state both
    change, under its one lock. The client's public methods call into it; the
    components it composes (outbox, publisher, requester, deliveries, reconnector,
    pinger) each own their own state. See the module docstring for the threads."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self._lock = threading.Lock()
        self.state = State.CONNECTING
        self._pid = os.getpid()
        self.outbox = Outbox(options.pending_size, options.full_wait)
        self.publisher = Publisher(self.outbox, self, not options.skip_subject_validation)
        self._callbacks = CallbackRunner()
        self._callback_thread: threading.Thread | None = None
        self._threads = ClientThreads()
        self.timer = Timer()
        self.requester = Requester(
            self, self.publisher, self.timer, self._callbacks.submit, options.inbox_prefix
        )
        self.reconnector = Reconnector(
            options,
            self._threads.start,
            self.report_error,
            self._on_reconnected,
            self._on_given_up,
        )
        self.subs: dict[int, Subscription] = {}
        self._sids = itertools.count(1)
        #: The request multiplexer whose inbox subscription (``_inbox_sid``) we route.
        self._inbox: RequestMux | None = None
        self._inbox_sid = -1
        self.current_server: ServerAddress | None = None
        self.server_info: dict[str, Any] = {}
        self.last_error: BaseException | None = None
        #: A -ERR after which the server closes the connection: the reason for the loss.
        self._fatal_server_error: Error | None = None
        self._conn: Connection | None = None
        self._conn_threads: list[threading.Thread] = []
        self._pings = Pings(
            options, self.outbox, self.timer, self._live, self._on_lost, self.wake_reader
        )
        self.in_msgs = 0
        self.in_bytes = 0
        self.reconnects = 0
        self.errors_received = 0
        self._deliveries = Deliveries(self._threads.start)
        #: Internal listeners (JetStream readers) told "disconnected", "reconnected" and
        #: "closed"; the list is replaced whole under the lock, read without it.
        self._status_listeners = StatusListeners()
        self._error_listeners: Listeners[BaseException] = Listeners()
        watch_fork(self)

    def forked(self) -> None:
        """In a forked child, which has none of our threads: closed, without I/O."""
        self.state = State.CLOSED
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
            with self._lock:
                self.last_error = last
                self.state = State.RECONNECTING
                self.reconnector.start(None, [])
            return
        self._start_background_threads()
        self._activate(handshaken)

    def _start_background_threads(self) -> None:
        self._callback_thread = self._threads.start(self._callbacks.run, "callbacks")
        self.timer.start(self._threads.start)
        self._pings.start()

    def _activate(self, handshaken: Handshaken) -> bool:
        """Makes a handshaken transport the live connection and starts its threads.

        Subscriptions (and the request inbox) are re-sent first, then whatever the outbox
        buffered while disconnected. Returns False when the client closed meanwhile.
        """
        server, transport, parser, info = handshaken
        # Messages are built as Msg by the parser itself, carrying our publish for respond().
        parser.set_message_type(Msg, self.publisher.publish)
        conn = Connection(
            transport, parser, self.outbox, self._on_ops, self._on_lost, self._reader_may_park
        )
        with self._lock:
            if self.state is State.CLOSED:
                transport.close()
                return False
            self.reconnector.record_success(server)
            self.current_server = server
            self.server_info = info
            self.publisher.max_payload = int(info.get("max_payload", d.DEFAULT_MAX_PAYLOAD))
            frames, finished = self._subscription_replay()
            self.outbox.put_control_first(frames)
            self._conn = conn
            self.state = State.CONNECTED
            self._pings.reset()
            self._fatal_server_error = None
            self.outbox.set_connected(True)
            self._conn_threads = [
                self._threads.start(conn.run_reader, "reader"),
                self._threads.start(conn.run_writer, "writer"),
            ]
        for sub in finished:
            sub._end()
        self._learn_servers(info, announce=False)
        log.info("nats_sync: connected to %s (server %s)", server, info.get("version", "?"))
        return True

    def _subscription_replay(self) -> tuple[list[bytes], list[Subscription]]:
        """Under the lock: SUB (and UNSUB max) frames for every live subscription.

        Returns the frames and the auto-unsubscribing subscriptions that are complete.
        """
        frames: list[bytes] = []
        finished: list[Subscription] = []
        for sub in list(self.subs.values()):
            remaining = sub.max_msgs - sub.received if sub.max_msgs else 0
            if sub.max_msgs and remaining <= 0:
                del self.subs[sub.sid]
                finished.append(sub)
                continue
            frames.append(
                proto.encode_sub(sub.subject, sub.sid, sub.queue, self.publisher.strict_subjects)
            )
            if remaining:
                frames.append(proto.encode_unsub(sub.sid, remaining))
        if self._inbox is not None:
            frames.append(proto.encode_sub(self._inbox.subject, self._inbox_sid))
        return frames, finished

    def _learn_servers(self, info: dict[str, Any], announce: bool) -> None:
        urls = info.get("connect_urls")
        via = self.current_server
        if not urls or not isinstance(urls, list) or via is None:
            return
        added = self.reconnector.add_discovered(urls, via)
        if added:
            log.info("nats_sync: discovered %s", ", ".join(map(str, added)))
            if announce:
                self._callbacks.submit(self.options.discovered_server_cb)

    def _put_control(self, frame: bytes) -> None:
        """Under the lock: queues SUB/UNSUB, unless they will be replayed on reconnect."""
        if self.state is not State.RECONNECTING:
            self.outbox.put_control(frame)

    # --- hooks of the publisher, the requester and the pings ----------------------------

    def connection(self) -> Connection | None:
        """The live connection, or None while there is none."""
        return self._conn

    def _live(self) -> tuple[Connection, ServerAddress | None] | None:
        """Timer thread (the keepalive): the live connection and its server, if connected."""
        with self._lock:
            conn = self._conn
            if self.state is not State.CONNECTED or conn is None:
                return None
            return conn, self.current_server

    def open_request_inbox(self, mux: RequestMux) -> RequestMux:
        """Subscribes ``mux``'s wildcard inbox once; returns the mux in use."""
        with self._lock:
            self.check_can_start()
            if self._inbox is None:
                sid = self.next_sid()
                self._put_control(proto.encode_sub(mux.subject, sid))
                self._inbox_sid = sid
                self._inbox = mux
            return self._inbox

    def read_own_reply(self, is_done: Callable[[], bool], deadline: float) -> None:
        """A requester's thread reads its reply itself if the reader stepped aside."""
        conn = self._conn
        if conn is not None and conn.can_lead:
            conn.lead(is_done, deadline)

    def wake_reader(self) -> None:
        """Makes a reader that stepped aside for requesters read again."""
        conn = self._conn
        if conn is not None:
            conn.wake_reader()

    # --- reader thread ---------------------------------------------------------------

    def _reader_may_park(self) -> bool:
        """Reader thread: whether requesters may read their own replies for a while.

        Only while requests are being made and nothing else needs the reader: no
        subscription, no request or flush waiting (their replies come unasked).
        """
        mux = self._inbox
        return (
            mux is not None
            and not mux
            and not self.subs
            and not self.outbox.pong_waiters
            and time.monotonic() - mux.last_request < d.READER_LEAD_IDLE
        )

    def _on_ops(self, ops: list[Any]) -> None:  # ServerOps, with messages as Msg
        """Reader thread: acts on the ops of one read, in order. Never runs user code.

        Messages (already ``Msg``) are routed here; the rest goes to ``_on_op``. The
        request inbox is read once per batch: replies in it were asked for before the
        read, so an inbox made meanwhile cannot have any.
        """
        subs = self.subs
        mux = self._inbox
        mux_sid = self._inbox_sid if mux is not None else -1
        received = 0
        received_bytes = 0
        try:
            for op in ops:
                if type(op) is Msg:
                    received += 1
                    received_bytes += len(op.data)
                    sid = op.sid
                    if sid == mux_sid:
                        mux.resolve(op)  # type: ignore[union-attr]  # set: see mux_sid
                        continue
                    sub = subs.get(sid)
                    if sub is not None and not sub._deliver(op):
                        self._finish_subscription(sub)
                else:
                    self._on_op(op)
        finally:
            self.in_msgs += received
            self.in_bytes += received_bytes

    def _on_op(self, op: proto.ServerOp) -> None:
        """Reader thread: acts on one server op other than a message."""
        if op is proto.PING_OP:
            self.outbox.put_control(proto.PONG)
        elif op is proto.PONG_OP:
            self._pings.on_pong()
        elif type(op) is proto.InfoOp:
            self._on_info(op.info)
        elif type(op) is proto.ErrOp:
            self._on_server_error(op.message)

    def _on_info(self, info: dict[str, Any]) -> None:
        self.server_info = {**self.server_info, **info}
        if "max_payload" in info:
            self.publisher.max_payload = int(info["max_payload"])
            conn = self._conn
            if conn is not None:
                conn.parser.set_max_payload(self.publisher.max_payload)
        self._learn_servers(info, announce=True)
        if info.get("ldm"):
            self._callbacks.submit(self.options.lame_duck_mode_cb)
            self._leave_lame_duck_server()

    def _on_server_error(self, text: str) -> None:
        self.errors_received += 1
        error = server_error_from_description(text)
        log.warning("nats_sync: server error: %s", text)
        if isinstance(error, PermissionsViolationError) and error.operation == "subscription":
            for sub in list(self.subs.values()):
                if sub.subject == error.subject and (not error.queue or sub.queue == error.queue):
                    self._remove_subscription(sub)
                    sub._end(error)
                    break
        elif isinstance(error, PermissionsViolationError) and error.operation == "publish":
            mux = self._inbox
            if mux is not None and error.subject:
                mux.fail_subject(error.subject, error)
        elif not isinstance(error, PermissionsViolationError) and (
            "maximum subscriptions" not in text.lower()
        ):
            with self._lock:
                self._fatal_server_error = error
        with self._lock:
            self.last_error = error
        self.report_error(error)

    def _finish_subscription(self, sub: Subscription) -> None:
        """Reader thread: ``sub`` received its last message (max_msgs)."""
        self._remove_subscription(sub)
        sub._end()

    def _remove_subscription(self, sub: Subscription) -> None:
        with self._lock:
            self.subs.pop(sub.sid, None)

    # --- losing the connection ----------------------------------------------------------

    def _on_lost(self, conn: Connection, error: Error) -> None:
        """Reader, writer or timer thread: the live connection failed (or was dropped)."""
        with self._lock:
            if conn is not self._conn or self.state is State.CLOSED:
                return
            retry = (
                self.state is State.CONNECTED
                and self.options.allow_reconnect
                and self.options.max_reconnect_attempts != 0
            )
            if retry:
                self.state = State.RECONNECTING
                self._conn = None
                self.outbox.set_connected(False)
                self.outbox.stop_writer(discard=False)  # wakes the old writer so it ends
                old_threads = self._conn_threads
                self._conn_threads = []
            # Without its traceback: the reader's frame (and its 256 KiB buffer) would
            # otherwise stay alive as long as last_error does.
            self.last_error = (self._fatal_server_error or error).with_traceback(None)
            self._fatal_server_error = None
            lost = self.current_server
        log.info("nats_sync: connection to %s lost: %s", lost, error)
        if not isinstance(error, NatsConnectionError) or isinstance(error, StaleConnectionError):
            self.report_error(error)
        self._callbacks.submit(self.options.disconnected_cb)
        self._status_listeners.tell("disconnected")
        if not retry:
            self.close()
            return
        with self._lock:
            if self.state is State.RECONNECTING:
                self.reconnector.start(lost, old_threads)

    def _on_reconnected(self, handshaken: Handshaken) -> bool:
        """Reconnect thread: a server answered; make it the live connection."""
        # The old writer has put back what it could not send; control frames are
        # replayed from state, and flushes still waiting get fresh PINGs.
        self.outbox.keep_messages_only()
        if not self._activate(handshaken):
            return False
        self.reconnects += 1
        self._callbacks.submit(self.options.reconnected_cb)
        self._status_listeners.tell("reconnected")
        return True

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

    def _on_given_up(self, error: BaseException) -> None:
        """Reconnect thread: no server could be reached; the client closes."""
        with self._lock:
            self.last_error = error
        self.close()

    def force_reconnect(self) -> None:
        """Drops the live connection and runs the reconnect process."""
        if not self.options.allow_reconnect or self.options.max_reconnect_attempts == 0:
            raise InvalidArgumentError(
                "force_reconnect() needs reconnecting to be allowed "
                "(allow_reconnect=True and max_reconnect_attempts != 0)"
            )
        with self._lock:
            self.check_can_start()
            conn = self._conn
            if self.state is not State.CONNECTED or conn is None:
                return  # already reconnecting
        conn.shutdown()
        self._on_lost(conn, NatsConnectionError("reconnect forced by the user"))

    def _leave_lame_duck_server(self) -> None:
        """Reader thread: the server is going away; move to another one if there is one."""
        conn = self._conn
        if conn is None or not self.options.allow_reconnect:
            return
        if not self.reconnector.has_alternatives():
            return
        conn.shutdown()
        self._on_lost(conn, NatsConnectionError(f"{self.current_server} entered lame duck mode"))

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
        if self.state is State.CLOSED:
            raise ConnectionClosedError("the client is closed")

    def check_can_start(self) -> None:
        """Raises unless a subscription may start or end, or a request start (closed,
        draining, forked)."""
        if self.state is State.CONNECTED and current_pid[0] == self._pid:
            return
        self._check_open()
        if self.state in DRAINING:
            raise ConnectionDrainingError("the client is draining")

    def check_can_publish(self) -> None:
        """Raises the reason publishing is refused (closed, draining, forked)."""
        self._check_open()
        if self.state is State.DRAINING_PUBS:
            raise ConnectionDrainingError("the client is draining; publishing has ended")

    # --- subscriptions ---------------------------------------------------------------

    def next_sid(self) -> int:
        """A new subscription id."""
        return next(self._sids)

    def add_subscription(self, sub: Subscription) -> None:
        """Registers ``sub`` and sends its SUB (and UNSUB max when max_msgs is set)."""
        frame = proto.encode_sub(sub.subject, sub.sid, sub.queue, self.publisher.strict_subjects)
        with self._lock:
            self.check_can_start()
            self.subs[sub.sid] = sub
            self.wake_reader()
            self._put_control(frame)
            if sub.max_msgs > 0:
                self._put_control(proto.encode_unsub(sub.sid, sub.max_msgs))
            if sub.callback is not None:
                self._deliveries.start(sub)

    def unsubscribe(self, sub: Subscription, limit: int = 0) -> None:
        """Sends UNSUB now, or after ``limit`` messages in total."""
        check_int(limit, "limit", 0)
        with self._lock:
            self.check_can_start()
            if sub.is_closed or self.subs.get(sub.sid) is not sub:
                raise BadSubscriptionError(f"subscription {sub.sid} on {sub.subject!r} has ended")
            if limit and limit > sub.received:
                sub.max_msgs = limit
                sub._limit_handout(limit)
                self._put_control(proto.encode_unsub(sub.sid, limit))
                return
            del self.subs[sub.sid]
            self._put_control(proto.encode_unsub(sub.sid))
        if limit:
            # More than ``limit`` arrived already: the callback still gets up to ``limit``.
            sub._limit_handout(limit)
            sub._end(stop_callbacks=sub._handed_all)
        else:
            sub._end(stop_callbacks=True)

    def drain_subscription(self, sub: Subscription, timeout: float | None) -> None:
        """UNSUB, a PING/PONG to be sure the server has it, then end ``sub``.

        The subscription stays registered until the PONG: messages the server sent
        before it processed the UNSUB are still on the socket and must be delivered.
        """
        budget = self.options.drain_timeout if timeout is None else timeout
        check_timeout(budget)
        deadline = time.monotonic() + budget
        with self._lock:
            self.check_can_start()
            if sub.is_closed or self.subs.get(sub.sid) is not sub:
                raise BadSubscriptionError(f"subscription {sub.sid} on {sub.subject!r} has ended")
            self._put_control(proto.encode_unsub(sub.sid))
        try:
            self.flush(budget)
        except FlushTimeoutError:
            raise DrainTimeoutError(
                f"the server did not confirm the UNSUB of {sub.subject!r} within {budget}s"
            ) from None
        finally:
            with self._lock:
                if self.subs.get(sub.sid) is sub:
                    del self.subs[sub.sid]
            sub._end()
        self._join_delivery(sub, deadline)

    def _join_delivery(self, sub: Subscription, deadline: float) -> None:
        if not self._deliveries.join(sub, deadline):
            raise DrainTimeoutError(
                f"the callback of {sub.subject!r} did not finish its queued messages in time"
            )

    # --- flush -----------------------------------------------------------------------

    def flush(self, timeout: float = d.DEFAULT_FLUSH_TIMEOUT) -> None:
        """PING, then wait for its PONG (everything queued before went out first)."""
        check_timeout(timeout)
        self._check_open()
        self._pings.flush(timeout)

    # --- drain and close -------------------------------------------------------------

    def drain(self, timeout: float | None) -> None:
        """Unsubscribe all, deliver what arrived, flush publishes, then close."""
        budget = self.options.drain_timeout if timeout is None else timeout
        check_timeout(budget)
        deadline = time.monotonic() + budget
        with self._lock:
            self._check_open()
            if self.state in DRAINING:
                raise ConnectionDrainingError("the client is already draining")
            if self.state is State.RECONNECTING:
                # Draining needs the server's answers (UNSUB confirmed, publishes
                # flushed); as nats.go and nats-py, refuse rather than race the reconnect.
                raise ConnectionReconnectingError(
                    "the client is reconnecting; drain once it is connected again"
                )
            self.state = State.DRAINING_SUBS
            subs = list(self.subs.values())
            for sub in subs:
                self._put_control(proto.encode_unsub(sub.sid))
        try:
            try:
                self.flush(budget)
            except FlushTimeoutError:
                raise DrainTimeoutError(
                    f"the server did not confirm the UNSUBs within {budget}s"
                ) from None
            with self._lock:
                for sub in subs:
                    self.subs.pop(sub.sid, None)
            for sub in subs:
                sub._end()
            for sub in subs:
                if sub.callback is not None:
                    self._join_delivery(sub, deadline)
            with self._lock:
                if self.state is State.DRAINING_SUBS:
                    self.state = State.DRAINING_PUBS
                    self.publisher.accepting = False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DrainTimeoutError(f"drain did not finish within {budget}s")
            try:
                self.flush(remaining)
            except FlushTimeoutError:
                raise DrainTimeoutError(
                    f"pending publishes were not flushed within {budget}s"
                ) from None
        finally:
            self.close()

    def close(self) -> None:
        """Stops everything; joins every thread but the calling one. Idempotent.

        A Ctrl-C on the main thread ends only the wait: the close goes on to its end.
        """
        run_to_completion(self._close_now, "close")

    def _close_now(self) -> None:
        if os.getpid() != self._pid:
            return  # a forked child must not touch the parent's socket or threads
        with self._lock:
            first = self.state is not State.CLOSED
            self.state = State.CLOSED
            conn = self._conn
            conn_threads = self._conn_threads
            subs = list(self.subs.values())
            subs += [sub for sub in self._deliveries.subscriptions() if sub not in subs]
            self.subs.clear()
        self.publisher.accepting = False
        self.reconnector.close()
        me = threading.current_thread()
        if first:
            log.info("nats_sync: closing connection to %s", self.current_server)
            self.outbox.stop_writer(discard=conn is None or conn.finished)
            join_threads(conn_threads[1:], me, d.CLOSE_FLUSH_TIMEOUT)
            if conn is not None:
                conn.shutdown()
            closed = ConnectionClosedError("the client is closed")
            self._pings.fail_waiters(closed)
            if self._inbox is not None:
                self._inbox.fail_all(closed)
            for sub in subs:
                sub._end(closed, stop_callbacks=True)
            self.timer.stop()
            self._callbacks.submit(self.options.closed_cb)
            self._status_listeners.tell("closed")
            self._callbacks.stop()
        with self._lock:
            threads = conn_threads + [
                t for t in (self.timer.thread, self.reconnector.thread) if t is not None
            ]
            # Threads that run user code: a callback that does not return is left to
            # finish on its own (daemon) thread; it is not called again, and what it
            # publishes raises ConnectionClosedError.
            user_threads = self._deliveries.threads()
            if self._callback_thread is not None:
                user_threads.append(self._callback_thread)
        join_threads(threads, me, d.THREAD_JOIN_TIMEOUT)
        join_threads(user_threads, me, d.CLOSE_CALLBACK_GRACE, shared=True)
        # Started but never kept (their starter was interrupted): ending by now.
        left = [t for t in self._threads.alive() if t not in threads and t not in user_threads]
        join_threads(left, me, d.THREAD_JOIN_TIMEOUT, shared=True)

    def debug_snapshot(self) -> dict[str, Any]:
        """What the client holds right now, for tests and debugging (not an API)."""
        with self._lock:
            mux = self._inbox
            return {
                "state": self.state,
                "subscriptions": len(self.subs),
                "requests_in_flight": len(mux) if mux is not None else 0,
                "late_replies": mux.late_replies if mux is not None else 0,
                "request_inbox": mux.subject if mux is not None else None,
                "timer_entries": len(self.timer),
                "delivery_threads": self._deliveries.threads(),
                "connection_threads": list(self._conn_threads),
                "connection": self._conn,
            }
