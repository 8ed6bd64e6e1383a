"""The handler: the client's protocol state behind one lock, and every thread it starts.

``Handler`` is split by concept over three modules: this one (connecting, the reader's
dispatch, publish, subscriptions, flush, the timer, drain and close), ``_requesting``
(request-reply) and ``_reconnect`` (connection loss and the reconnect thread).

Threads (all started and joined here):

- reader and writer of the live connection (bodies in ``_connection``);
- the reconnect thread, while a lost connection is being replaced (loop in ``_reconnect``);
- the timer thread: keepalive PINGs, stale detection, ``request_future`` deadlines;
- the callback thread: user callbacks in order (body in ``_callbacks``);
- one delivery thread per callback subscription (body in ``subscription``).

State and who may touch it:

- ``_lock`` guards ``state``, ``subs`` changes, the request multiplexer's creation, the
  server pool and the connection swap. Nothing blocks on I/O while holding it.
- While ``state`` is RECONNECTING no SUB/UNSUB frame is queued: subscriptions are
  replayed from ``subs`` when the next connection is activated, ahead of the buffered
  publishes.
- The reader thread reads ``subs`` and ``_mux`` without the lock (a dict lookup is atomic)
  and alone writes the ``in_*`` counters and ``server_info`` updates.
- The outbox has its own lock (``_outbox``); lock order is handler lock, then outbox lock.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from nats_sync import _defaults as d
from nats_sync import _proto as proto
from nats_sync._callbacks import CallbackRunner
from nats_sync._connection import Connection
from nats_sync._handshake import handshake
from nats_sync._nuid import Nuid
from nats_sync._options import Options
from nats_sync._outbox import Outbox
from nats_sync._pool import ServerAddress, ServerPool
from nats_sync._publishing import PublishMixin
from nats_sync._reconnect import ReconnectMixin
from nats_sync._requesting import RequestsMixin
from nats_sync._requests import RequestMux
from nats_sync._state import DRAINING, State
from nats_sync._transport import Transport
from nats_sync.errors import (
    AuthorizationError,
    BadCredentialsError,
    BadSubscriptionError,
    ConnectionClosedError,
    ConnectionDrainingError,
    ConnectionReconnectingError,
    DrainTimeoutError,
    Error,
    FlushTimeoutError,
    NoServersError,
    PermissionsViolationError,
    ProtocolError,
    StaleConnectionError,
    server_error_from_description,
)
from nats_sync.msg import Msg
from nats_sync.subscription import Subscription

log = logging.getLogger("nats_sync")
#: A module global is read faster than an enum member (publish's hot path).
_CONNECTED = State.CONNECTED



_live_handlers: weakref.WeakSet[Handler] = weakref.WeakSet()


#: This process's pid, refreshed in a forked child (os.getpid() is a system call, and
#: the check runs on hot paths).
_current_pid = [os.getpid()]


def _after_fork_in_child() -> None:
    """A forked child inherits clients whose threads did not survive: close them there."""
    _current_pid[0] = os.getpid()
    for handler in list(_live_handlers):
        handler.state = State.CLOSED


os.register_at_fork(after_in_child=_after_fork_in_child)


class Handler(PublishMixin, RequestsMixin, ReconnectMixin):
    """Protocol state and threads of one client. See the module docstring."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self._lock = threading.Lock()
        self.state = State.CONNECTING
        self._pid = os.getpid()
        self.outbox = Outbox(options.pending_size, options.full_wait)
        self.subs: dict[int, Subscription] = {}
        self._sids = itertools.count(1)
        self._rng = random.Random()
        self._pool = ServerPool(
            options.servers,
            randomize=not options.dont_randomize,
            rng=self._rng,
            ignore_discovered=options.ignore_discovered_servers,
        )
        self._reconnect_thread: threading.Thread | None = None
        # The transport the reconnect thread is handshaking, which close() shuts down.
        self._handshaking: Transport | None = None
        #: Set by close(): ends the reconnect thread's waits at once.
        self._closing = threading.Event()
        self.current_server: ServerAddress | None = None
        self.server_info: dict[str, Any] = {}
        self.max_payload = d.DEFAULT_MAX_PAYLOAD
        self.last_error: BaseException | None = None
        self._conn: Connection | None = None
        self._conn_threads: list[threading.Thread] = []
        self._callback_thread: threading.Thread | None = None
        self._timer_thread: threading.Thread | None = None
        self._callbacks = CallbackRunner()
        self._nuid = Nuid()
        self._mux: RequestMux | None = None
        self._mux_sid = -1
        self._pings_out = 0
        self._timer = threading.Condition(threading.Lock())
        self._deadlines: list[tuple[float, int, str]] = []
        self._deadline_seq = itertools.count()
        self._timer_stop = False
        self.in_msgs = 0
        self.in_bytes = 0
        self.reconnects = 0
        self.errors_received = 0
        #: Callback subscriptions whose delivery thread runs (it may outlive the
        #: subscription: close() must stop a callback still running after a drain).
        self._deliveries: dict[int, tuple[Subscription, threading.Thread]] = {}
        #: A -ERR after which the server closes the connection: the reason for the loss.
        self._fatal_server_error: Error | None = None
        self._publish_fn = self.publish
        # subject -> (b"PUB <subject> ", size, b"PUB <subject> <size>\r\n") for the last
        # size published there: replaced whole, so any thread reads a consistent entry.
        self._pub_lines: dict[str, tuple[bytes, int, bytes]] = {}
        _live_handlers.add(self)

    # --- threads -------------------------------------------------------------------

    def _start_thread(self, target: Callable[[], None], role: str) -> threading.Thread:
        thread = threading.Thread(target=target, name=f"nats_sync-{role}", daemon=True)
        thread.start()
        return thread

    # --- connecting ----------------------------------------------------------------

    def connect(self) -> None:
        """Makes one pass over the server pool and starts the threads.

        With ``retry_on_failed_connect``, a failed pass does not raise: the client starts
        in the reconnecting state and keeps trying in the background.

        Raises:
            NoServersError: no server could be reached (the last error as ``__cause__``).
            AuthorizationError: the server refused the credentials.
        """
        last: Error | None = None
        order = self._pool.attempt_order()
        for server in order:
            try:
                transport, parser, info = handshake(server, self.options)
            except Error as err:
                last = err
                self._pool.record_failure(server)
                # The server's refusal, a broken server, or our own credentials (a
                # failing user_jwt_cb): each says more than "no server answered".
                if isinstance(err, AuthorizationError | ProtocolError | BadCredentialsError) and (
                    server is order[-1] and not self.options.retry_on_failed_connect
                ):
                    raise
                continue
            self._start_background_threads()
            self._activate(server, transport, parser, info)
            return
        if not self.options.retry_on_failed_connect:
            raise NoServersError(f"could not connect to any server: {last}") from last
        log.info("nats_sync: no server answered (%s); retrying in the background", last)
        self.last_error = last
        self._start_background_threads()
        with self._lock:
            self.state = State.RECONNECTING
            self._reconnect_thread = self._start_thread(
                lambda: self._run_reconnect([]), "reconnect"
            )

    def _start_background_threads(self) -> None:
        self._callback_thread = self._start_thread(self._callbacks.run, "callbacks")
        self._timer_thread = self._start_thread(self._run_timer, "timer")

    def pool_servers(self) -> list[ServerAddress]:
        """Every server of the pool (given and discovered)."""
        with self._lock:
            return list(self._pool.servers)

    def _activate(
        self,
        server: ServerAddress,
        transport: Transport,
        parser: proto.Parser,
        info: dict[str, Any],
    ) -> bool:
        """Makes a handshaken transport the live connection and starts its threads.

        Subscriptions (and the request inbox) are re-sent first, then whatever the outbox
        buffered while disconnected. Returns False when the client closed meanwhile.
        """
        # Messages are built as Msg by the parser itself, carrying our publish for respond().
        parser.set_message_type(Msg, self._publish_fn)
        conn = Connection(transport, parser, self.outbox, self._on_ops, self._on_lost,
                          self._reader_may_park)
        with self._lock:
            if self.state is State.CLOSED:
                transport.close()
                return False
            self._handshaking = None
            self._pool.record_success(server)
            self.current_server = server
            self.server_info = info
            self.max_payload = int(info.get("max_payload", d.DEFAULT_MAX_PAYLOAD))
            frames, finished = self._subscription_replay()
            self.outbox.put_control_first(frames)
            self._conn = conn
            self.state = State.CONNECTED
            self._pings_out = 0
            self._fatal_server_error = None
            self.outbox.set_connected(True)
            self._conn_threads = [
                self._start_thread(conn.run_reader, "reader"),
                self._start_thread(conn.run_writer, "writer"),
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
            frames.append(proto.encode_sub(sub.subject, sub.sid, sub.queue))
            if remaining:
                frames.append(proto.encode_unsub(sub.sid, remaining))
        if self._mux is not None:
            frames.append(proto.encode_sub(self._mux.subject, self._mux_sid))
        return frames, finished

    def _learn_servers(self, info: dict[str, Any], announce: bool) -> None:
        urls = info.get("connect_urls")
        if not urls or not isinstance(urls, list) or self.current_server is None:
            return
        with self._lock:
            added = self._pool.add_discovered(urls, via=self.current_server)
        if added:
            log.info("nats_sync: discovered %s", ", ".join(map(str, added)))
            if announce:
                self._callbacks.submit(self.options.discovered_server_cb)

    def _put_control(self, frame: bytes) -> None:
        """Under the lock: queues SUB/UNSUB, unless they will be replayed on reconnect."""
        if self.state is not State.RECONNECTING:
            self.outbox.put_control(frame)

    # --- reader thread ---------------------------------------------------------------

    def _reader_may_park(self) -> bool:
        """Reader thread: whether requesters may read their own replies for a while.

        Only while requests are being made and nothing else needs the reader: no
        subscription, no request or flush waiting (their replies come unasked).
        """
        mux = self._mux
        return (
            mux is not None
            and not mux
            and not self.subs
            and not self.outbox.pong_waiters
            and time.monotonic() - mux.last_request < d.READER_LEAD_IDLE
        )

    def _wake_reader(self) -> None:
        conn = self._conn
        if conn is not None:
            conn.wake_reader()

    def _on_ops(self, ops: list[Any]) -> None:  # ServerOps, with messages as Msg
        """Reader thread: acts on the ops of one read, in order. Never runs user code.

        Messages (already ``Msg``) are routed here; the rest goes to ``_on_op``. The
        request inbox is read once per batch: replies in it were asked for before the
        read, so an inbox made meanwhile cannot have any.
        """
        subs = self.subs
        mux = self._mux
        mux_sid = self._mux_sid if mux is not None else -1
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
            self._pings_out = 0
            waiter = self.outbox.pop_pong_waiter()
            if waiter is not None:
                waiter(None)
        elif type(op) is proto.InfoOp:
            self._on_info(op.info)
        elif type(op) is proto.ErrOp:
            self._on_server_error(op.message)

    def _on_info(self, info: dict[str, Any]) -> None:
        self.server_info = {**self.server_info, **info}
        if "max_payload" in info:
            self.max_payload = int(info["max_payload"])
            if self._conn is not None:
                self._conn.parser.set_max_payload(self.max_payload)
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
            mux = self._mux
            if mux is not None and error.subject:
                mux.fail_subject(error.subject, error)
        elif not isinstance(error, PermissionsViolationError) and (
            "maximum subscriptions" not in text.lower()
        ):
            self._fatal_server_error = error
        self.last_error = error
        self.report_error(error)

    def _finish_subscription(self, sub: Subscription) -> None:
        """Reader thread: ``sub`` received its last message (max_msgs)."""
        self._remove_subscription(sub)
        sub._end()

    def _remove_subscription(self, sub: Subscription) -> None:
        with self._lock:
            self.subs.pop(sub.sid, None)

    # --- errors and callbacks --------------------------------------------------------

    def report_error(self, error: BaseException) -> None:
        """Hands ``error`` to ``error_cb`` on the callback thread (or logs it)."""
        if self.options.error_cb is not None:
            self._callbacks.submit(self.options.error_cb, error)
        else:
            log.error("nats_sync: %s", error)

    def run_callback(self, fn: Callable[..., Any], *args: Any) -> None:
        """Runs ``fn(*args)`` on the callback thread."""
        self._callbacks.submit(fn, *args)

    def check_process(self) -> None:
        """Raises if the client is used from a process other than the one that made it."""
        if _current_pid[0] != self._pid:
            raise ConnectionClosedError(
                f"this client was created in process {self._pid} and cannot be used in "
                f"process {os.getpid()} (after a fork); create the client after the fork"
            )

    def _check_open(self) -> None:
        """Raises unless the client is open, in the process that made it."""
        self.check_process()
        if self.state is State.CLOSED:
            raise ConnectionClosedError("the client is closed")

    def _check_can_start(self) -> None:
        """Raises unless a new subscription or request may start."""
        self._check_open()
        if self.state in DRAINING:
            raise ConnectionDrainingError("the client is draining")

    def _check_can_publish(self) -> None:
        self._check_open()
        if self.state is State.DRAINING_PUBS:
            raise ConnectionDrainingError("the client is draining; publishing has ended")

    # --- publish -------------------------------------------------------------------

    # --- subscriptions ---------------------------------------------------------------

    def next_sid(self) -> int:
        """A new subscription id."""
        return next(self._sids)

    def add_subscription(self, sub: Subscription) -> None:
        """Registers ``sub`` and sends its SUB (and UNSUB max when max_msgs is set)."""
        frame = proto.encode_sub(sub.subject, sub.sid, sub.queue)
        with self._lock:
            self._check_can_start()
            self.subs[sub.sid] = sub
            self._wake_reader()
            self._put_control(frame)
            if sub.max_msgs > 0:
                self._put_control(proto.encode_unsub(sub.sid, sub.max_msgs))
            if sub.callback is not None:
                thread = self._start_thread(lambda: self._run_delivery(sub), f"sub-{sub.sid}")
                self._deliveries[sub.sid] = (sub, thread)

    def _run_delivery(self, sub: Subscription) -> None:
        """Delivery thread of a callback subscription; forgets itself when it ends."""
        try:
            sub._run_callbacks()
        finally:
            with self._lock:
                self._deliveries.pop(sub.sid, None)

    def unsubscribe(self, sub: Subscription, limit: int = 0) -> None:
        """Sends UNSUB now, or after ``limit`` messages in total."""
        if not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit must be an int >= 0, got {limit!r}")
        with self._lock:
            self._check_open()
            if self.state in DRAINING:
                raise ConnectionDrainingError("the client is draining")
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
        deadline = time.monotonic() + budget
        with self._lock:
            self._check_open()
            if self.state in DRAINING:
                raise ConnectionDrainingError("the client is draining")
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
        entry = self._deliveries.get(sub.sid)
        if entry is None or entry[1] is threading.current_thread():
            return
        thread = entry[1]
        thread.join(max(deadline - time.monotonic(), 0.0))
        if thread.is_alive():
            raise DrainTimeoutError(
                f"the callback of {sub.subject!r} did not finish its queued messages in time"
            )

    def delivery_threads(self) -> list[threading.Thread]:
        """The delivery threads still running (for tests)."""
        with self._lock:
            return [thread for _, thread in self._deliveries.values()]

    # --- flush -----------------------------------------------------------------------

    def flush(self, timeout: float = d.DEFAULT_FLUSH_TIMEOUT) -> None:
        """PING, then wait for its PONG (everything queued before went out first)."""
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"timeout must be a number > 0, got {timeout!r}")
        self._check_open()
        done = threading.Event()
        outcome: list[BaseException | None] = []

        def on_pong(error: BaseException | None) -> None:
            outcome.append(error)
            done.set()

        self.outbox.put_ping(on_pong)
        self._wake_reader()
        if not done.wait(timeout):
            raise FlushTimeoutError(f"no PONG from the server within {timeout}s")
        if outcome[0] is not None:
            raise outcome[0]

    def rtt(self) -> float:
        """Seconds one PING/PONG round trip takes."""
        start = time.perf_counter()
        self.flush()
        return time.perf_counter() - start

    # --- timer thread ----------------------------------------------------------------

    def _run_timer(self) -> None:
        """Timer thread: keepalive PINGs, stale detection, request_future deadlines."""
        interval = self.options.ping_interval
        next_ping = time.monotonic() + interval
        with self._timer:
            while not self._timer_stop:
                now = time.monotonic()
                if now >= next_ping:
                    next_ping = now + interval
                    self._timer.release()
                    try:
                        self._keepalive()
                    finally:
                        self._timer.acquire()
                    continue
                expired: list[str] = []
                while self._deadlines and self._deadlines[0][0] <= now:
                    expired.append(heapq.heappop(self._deadlines)[2])
                if expired:
                    self._timer.release()
                    try:
                        self._expire(expired)
                    finally:
                        self._timer.acquire()
                    continue
                wake = next_ping
                if self._deadlines:
                    wake = min(wake, self._deadlines[0][0])
                self._timer.wait(wake - now)

    def _keepalive(self) -> None:
        if self.state is not State.CONNECTED:
            return
        self._pings_out += 1
        if self._pings_out > self.options.max_outstanding_pings:
            conn = self._conn
            if conn is not None:
                conn.shutdown()
                self._on_lost(conn, StaleConnectionError(
                    f"{self._pings_out - 1} PINGs to {self.current_server} went unanswered"
                ))
            return
        self.outbox.put_ping(None)

    # --- drain and close -------------------------------------------------------------

    def drain(self, timeout: float | None) -> None:
        """Unsubscribe all, deliver what arrived, flush publishes, then close."""
        budget = self.options.drain_timeout if timeout is None else timeout
        if not isinstance(budget, (int, float)) or budget <= 0:
            raise ValueError(f"timeout must be a number > 0, got {timeout!r}")
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
                raise DrainTimeoutError(f"the server did not confirm the UNSUBs within {budget}s"
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
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DrainTimeoutError(f"drain did not finish within {budget}s")
            try:
                self.flush(remaining)
            except FlushTimeoutError:
                raise DrainTimeoutError(f"pending publishes were not flushed within {budget}s"
                                        ) from None
        finally:
            self.close()

    def close(self) -> None:
        """Stops everything; joins every thread but the calling one. Idempotent."""
        if os.getpid() != self._pid:
            return  # a forked child must not touch the parent's socket or threads
        with self._lock:
            first = self.state is not State.CLOSED
            self.state = State.CLOSED
            conn = self._conn
            conn_threads = self._conn_threads
            subs = list(self.subs.values())
            subs += [sub for sub, _ in self._deliveries.values() if sub not in subs]
            self.subs.clear()
            handshaking, self._handshaking = self._handshaking, None
        self._closing.set()
        if handshaking is not None:
            handshaking.shutdown()  # wakes a reconnect thread waiting on a silent server
        me = threading.current_thread()
        if first:
            log.info("nats_sync: closing connection to %s", self.current_server)
            self.outbox.stop_writer(discard=conn is None or conn.finished)
            self._join(conn_threads[1:], me, d.CLOSE_FLUSH_TIMEOUT)
            if conn is not None:
                conn.shutdown()
            closed = ConnectionClosedError("the client is closed")
            for waiter in self.outbox.take_pong_waiters():
                if waiter is not None:
                    waiter(closed)
            if self._mux is not None:
                self._mux.fail_all(closed)
            for sub in subs:
                sub._end(closed, stop_callbacks=True)
            with self._timer:
                self._timer_stop = True
                self._timer.notify()
            self._callbacks.submit(self.options.closed_cb)
            self._callbacks.stop()
        with self._lock:
            threads = conn_threads + [
                t for t in (self._timer_thread, self._reconnect_thread) if t is not None
            ]
            # Threads that run user code: a callback that does not return is left to
            # finish on its own (daemon) thread; it is not called again, and what it
            # publishes raises ConnectionClosedError.
            user_threads = [t for _, t in self._deliveries.values()]
            if self._callback_thread is not None:
                user_threads.append(self._callback_thread)
        self._join(threads, me, d.THREAD_JOIN_TIMEOUT)
        self._join(user_threads, me, d.CLOSE_CALLBACK_GRACE, shared=True)

    @staticmethod
    def _join(
        threads: list[threading.Thread], me: threading.Thread, timeout: float,
        shared: bool = False,
    ) -> None:
        """Joins ``threads``, ``timeout`` each, or in all when ``shared``."""
        deadline = time.monotonic() + timeout
        for thread in threads:
            if thread is not me and thread.ident is not None:
                thread.join(max(deadline - time.monotonic(), 0.0) if shared else timeout)

    @property
    def pending_data_size(self) -> int:
        """Bytes queued in the outbox."""
        return self.outbox.size
