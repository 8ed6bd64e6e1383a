"""JetStream ``publish_async``: a window of acknowledgements in flight, settled where
they are parsed.

How it works:

- ``publish_async`` registers each message as a waiter in the client's request
  multiplexer (the shared inbox ``<inbox>.*`` that ``request`` uses, through the
  client port's ``inbox_route``) and publishes it with that waiter's reply subject
  (``<inbox>.<token>``), so its ack is decoded and its future settled on the thread
  that parses the ack, as a request's reply is: no queue, no thread hop, no lock per
  message. The future is an ``AckFuture`` (``ack_future``: a ``concurrent.futures.Future``
  that makes a condition only if someone waits on it). At most ``max_pending_acks``
  acks are awaited; a caller beyond that waits up to ``stall_wait`` for room, then gets
  ``TooManyStalledMsgsError``. A 503 is retried like ``publish`` (the ack timer
  publishes again after ``retry_wait``); a timeout is not. Closing the client fails
  what is still awaited with ``ConnectionClosedError``: call
  ``publish_async_completed()`` first.

Threads and what they touch (``_lock`` guards the counters, ``_retries`` and the
session; the deques of deadlines are appended by callers and popped only by the timer):

- callers of ``publish_async``: wait on ``_room`` while the window is full, count the
  message in flight, register its waiter in the mux, append ``(deadline, reply,
  waiter)`` to the deque of its ack timeout, publish. They open a session (the inbox
  route, a status listener, the timer thread) under ``_session_lock`` when there is
  none.
- the reader thread (or a requester reading its own reply): pops the waiter from the
  mux, decodes the ack, settles the future and frees its room (``_settled``). A 503
  with attempts left goes to ``_retries`` instead. Done-callbacks are handed to the
  client's callback thread: the reader never runs user code.
- the ack timer thread ``nats_sync-js-acks`` (one per live session): wakes at the
  earliest deadline or retry, and every ``JS_ACK_SWEEP_INTERVAL`` while acks are in flight;
  drops settled entries from the deques' heads (a deque per timeout, so deadlines in
  each only grow), fails expired ones with ``PublishAckTimeoutError`` (taking them
  from the mux first, so a late ack and the timeout settle each future once), publishes
  503'd messages again under a fresh reply, fails everything with
  ``ConnectionClosedError`` when the client closes, and retires the session after
  ``JS_ACK_TIMER_IDLE_EXIT`` seconds with nothing in flight.
- the client's status listener (any client thread): only marks the session closed and
  wakes the timer.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from nats_sync import _defaults as d
from nats_sync._core.components.port import port_of
from nats_sync._core.threads.lifecycle import run_to_completion
from nats_sync._core.threads.waiting import Sleepers, wait_until
from nats_sync._core.validate import check_int, check_timeout
from nats_sync._defaults import CLOSE_CALLBACK_GRACE
from nats_sync._defaults import DEFAULT_JS_PUBLISH_RETRY_ATTEMPTS as _DEFAULT_RETRY_ATTEMPTS
from nats_sync._defaults import DEFAULT_JS_PUBLISH_RETRY_WAIT as _DEFAULT_RETRY_WAIT
from nats_sync.errors import ConnectionClosedError, Error, TimeoutError
from nats_sync.jetstream._publishing.ack_future import (
    AckFuture,
    AckFutureBase,
    ack_timeout,
)
from nats_sync.jetstream._streams.wire import Headers, publish_headers
from nats_sync.jetstream.api import PubAck
from nats_sync.jetstream.errors import (
    PublishAckTimeoutError,
    TooManyStalledMsgsError,
)

if TYPE_CHECKING:
    from nats_sync._core.components.reply_mux import InboxRoute, RequestMux
    from nats_sync.jetstream._streams.context_protocol import JsContext

_NEVER = float("inf")
_RUNNING = float("-inf")  # ``_next_wake`` while the timer is awake: nobody wakes it


class _Session:
    """The inbox route, status listener and ack timer thread of a context's
    ``publish_async`` while it is in use."""

    def __init__(self, route: InboxRoute) -> None:
        self.route = route
        self.closed = False  # the client closed: fail everything (under the lock)
        self.remove_listener: Callable[[], None] | None = None
        self.timer: threading.Thread | None = None


class AsyncPublisher:
    """The ``publish_async`` window of one context: see the module docstring.

    Args:
        js: the context (``js.client``, ``js.timeout``).
        max_pending_acks: ``publish_async`` acks awaited at most.
        stall_wait: seconds ``publish_async`` waits for room before it raises.
    """

    def __init__(self, js: JsContext, max_pending_acks: int, stall_wait: float) -> None:
        check_int(max_pending_acks, "max_pending_acks", 1)
        check_timeout(stall_wait, "stall_wait", zero_ok=True)
        self._js = js
        self._client = js.client
        self._port = port = port_of(js.client)
        #: The client's instrumentation (its ack and failure counts), or None.
        self._tracing = port.instrumentation
        self._max_pending_acks = max_pending_acks
        self._stall_wait = float(stall_wait)
        self._lock = threading.Lock()
        # Callers' threads sleep on these (see ``nats_sync._core.threads.waiting``);
        # the timer thread, which nothing interrupts, on the condition.
        self._room_sleepers = Sleepers()
        self._done_sleepers = Sleepers()
        self._wake = threading.Condition(self._lock)
        self._session_lock = threading.Lock()  # one session opened at a time
        self._session: _Session | None = None
        #: The waiters registered and not yet settled (a 503 waiting to be sent again
        #: included): a set, whose add, discard and len need no lock, so the caller and
        #: the reader thread never contend for one per message.
        self._in_flight: set[AckFutureBase] = set()
        #: Per ack timeout: ``(deadline, reply, waiter)`` in publish order, so each
        #: deque's deadlines only grow and the timer reads only its head.
        self._deadlines: dict[float, deque[tuple[float, str, AckFutureBase]]] = {}
        #: ``(when, waiter)`` answered 503, to be published again by the timer.
        self._retries: list[tuple[float, AckFutureBase]] = []
        self._next_wake = _NEVER
        self._idle_since = time.monotonic()
        #: Waiters seen unsettled with their reply out of the mux, and that reply.
        self._suspects: dict[AckFutureBase, str] = {}
        self._next_orphan_scan = 0.0

    # --- publish_async ---------------------------------------------------------------

    def publish_async(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: Headers = None,
        timeout: float | None = None,
        msg_id: str | None = None,
        expected_stream: str | None = None,
        expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None,
        retry_attempts: int = _DEFAULT_RETRY_ATTEMPTS,
        retry_wait: float = _DEFAULT_RETRY_WAIT,
        ttl: float | str | None = None,
        expected_last_subject_seq_subject: str | None = None,
    ) -> Future[PubAck]:
        """See ``JetStream.publish_async`` (the context binds this method in its place:
        same signature, held to it by ``tests/unit/test_publish_options.py``)."""
        # The plain call (no keyword given) skips the checks: this runs per message.
        timeout = self._js.timeout if timeout is None else self._timeout(timeout)
        if retry_attempts != _DEFAULT_RETRY_ATTEMPTS or retry_wait != _DEFAULT_RETRY_WAIT:
            check_retries(retry_attempts, retry_wait)
        merged: Headers | bytes
        if (
            msg_id is None
            and expected_stream is None
            and expected_last_seq is None
            and expected_last_subject_seq is None
            and expected_last_msg_id is None
            and ttl is None
            and expected_last_subject_seq_subject is None
        ):
            merged = headers  # publish_headers' first case, without its call
        else:
            merged = publish_headers(
                headers,
                msg_id,
                expected_stream,
                expected_last_seq,
                expected_last_subject_seq,
                expected_last_msg_id,
                ttl,
                expected_last_subject_seq_subject,
            )
        session = self._session or self._open_session()
        route = session.route
        waiter = AckFuture(
            self, subject, payload, merged, timeout, retry_attempts, retry_wait, route.run_callback
        )
        if len(self._in_flight) >= self._max_pending_acks or session.closed:
            self._wait_for_room(session)
            if session.closed:
                raise ConnectionClosedError("the client closed")
        try:
            # In the try: Ctrl-C right after the add must not leave in the set a waiter
            # that nothing settles (publish_async_completed would wait for it for ever).
            self._in_flight.add(waiter)
            self._send(waiter, route, time.monotonic() + timeout)
        except BaseException:
            # Taken back unless the reader settled it already: not registered yet (no
            # reply), or still in the mux.
            if not waiter._reply or route.mux.cancel(waiter._reply) is waiter:
                self._settled(waiter)  # taken back: it takes no room
            raise
        return waiter

    def _send(self, waiter: AckFutureBase, route: InboxRoute, deadline: float) -> None:
        """Registers ``waiter`` under a fresh reply subject and publishes its message
        (a publish that raises leaves the waiter registered: the caller takes it back)."""
        # The subject first, then the registration: the caller can always cancel it.
        reply = waiter._reply = route.mux.new_reply()
        route.mux.add(reply, waiter)
        queue = self._deadlines.get(waiter._timeout)
        if queue is None:
            queue = self._deadlines.setdefault(waiter._timeout, deque())
        queue.append((deadline, reply, waiter))
        if deadline < self._next_wake:  # only an earlier deadline than planned wakes it
            with self._lock:
                self._wake.notify_all()
        self._port.publish_inbox(waiter.subject, waiter._payload, reply.encode(), waiter._headers)

    def pending(self) -> int:
        """See ``JetStream.publish_async_pending``."""
        return len(self._in_flight)

    def completed(self, timeout: float | None) -> None:
        """See ``JetStream.publish_async_completed``."""
        if timeout is not None:
            check_timeout(timeout, zero_ok=True)
        deadline = None if timeout is None else time.monotonic() + timeout
        if wait_until(self._lock, self._done_sleepers, self._none_in_flight, deadline) is None:
            raise TimeoutError(
                f"{len(self._in_flight)} publish acks still awaited after {timeout}s"
            )

    def _none_in_flight(self) -> bool | None:
        return None if self._in_flight else True

    def _wait_for_room(self, session: _Session) -> None:
        """Without the lock: waits until fewer than the maximum are in flight."""
        deadline = time.monotonic() + self._stall_wait

        def room() -> bool | None:
            if len(self._in_flight) < self._max_pending_acks or session.closed:
                return True
            return None

        # Enlisted before its look at the set (wait_until): a settler that frees room
        # afterwards sees the sleeper and wakes it (see _settled).
        if wait_until(self._lock, self._room_sleepers, room, deadline) is None:
            raise TooManyStalledMsgsError(
                f"max_pending_acks ({self._max_pending_acks}) publish acks were "
                f"awaited for longer than stall_wait ({self._stall_wait}s)"
            )

    # --- where acks are settled: the reader thread, the timer, a closing thread ----------

    def _settled(self, waiter: AckFutureBase | None = None) -> None:
        """``waiter``'s future has its outcome (None: it left ``_in_flight`` already):
        frees its room.

        The sleepers are looked at without the lock: a waiter enlists (under the lock)
        before its look at the set, and a settler discards before it looks at the
        sleepers, so either the waiter sees the room or the settler sees the sleeper.
        """
        in_flight = self._in_flight
        if waiter is not None:
            in_flight.discard(waiter)
        if self._room_sleepers:
            with self._lock:
                self._room_sleepers.wake_all()
        if not in_flight:
            self._idle_since = time.monotonic()
            if self._done_sleepers:
                with self._lock:
                    self._done_sleepers.wake_all()

    def _retry_later(self, waiter: AckFutureBase) -> None:
        """Reader thread: a 503 came and an attempt is left; the timer publishes it
        again after ``retry_wait`` (still in flight meanwhile)."""
        waiter._retries_left -= 1
        when = time.monotonic() + waiter._retry_wait
        with self._lock:
            self._retries.append((when, waiter))
            if when < self._next_wake:
                self._wake.notify_all()

    # --- sessions and the ack timer thread ----------------------------------------------

    def _open_session(self) -> _Session:
        """Caller: the live session, made (route, listener, timer) if none.

        Made to its end even if Ctrl-C interrupts the caller: a session published
        without its timer thread would leave every ack of it awaited for ever.
        """
        return run_to_completion(self._open_session_now, "js-acks-open")

    def _open_session_now(self) -> _Session:
        with self._session_lock:
            session = self._session
            if session is not None:
                return session
            session = _Session(self._port.inbox_route())
            session.remove_listener = self._port.add_status_listener(
                lambda event: self._on_status(event, session)
            )
            with self._lock:
                self._session = session
                # Idle counts from now: the timer must not retire it before its first use.
                self._idle_since = time.monotonic()
                if self._client.is_closed:  # closed before the listener was there
                    session.closed = True
            session.timer = threading.Thread(
                target=self._run_timer, args=(session,), name="nats_sync-js-acks", daemon=True
            )
            session.timer.start()
            return session

    def _on_status(self, event: str, session: _Session) -> None:
        """A client thread: note a close and wake the timer.

        On "closed" (run by ``close()`` itself) it also waits a moment for the timer
        thread to fail what is pending and end, so that ``close()`` leaves it behind no
        more than the client's own threads.
        """
        if event == "closed":
            with self._lock:
                session.closed = True
                self._wake.notify_all()
                self._room_sleepers.wake_all()
            timer = session.timer
            if timer is not None and timer is not threading.current_thread():
                timer.join(CLOSE_CALLBACK_GRACE)

    def _run_timer(self, session: _Session) -> None:
        """The ack timer thread of ``session``: see the module docstring."""
        try:
            self._timer_loop(session)
        finally:
            if session.remove_listener is not None:
                session.remove_listener()

    def _timer_loop(self, session: _Session) -> None:
        mux = session.route.mux
        while True:
            with self._lock:
                closed = session.closed
                if closed:
                    self._session = None
                else:
                    self._next_wake = _RUNNING
                    now = time.monotonic()
                    due = [waiter for when, waiter in self._retries if when <= now]
                    if due:
                        self._retries = [item for item in self._retries if item[0] > now]
                    scan = now >= self._next_orphan_scan and bool(self._in_flight)
                    if scan:
                        self._next_orphan_scan = now + d.JS_ACK_ORPHAN_SCAN
                        retrying = {waiter for _, waiter in self._retries} | set(due)
            if closed:
                self._fail_all(mux)
                return
            # Without the lock: these complete waiters and publish.
            next_wake = self._expire(mux, now)
            for waiter in due:
                self._resend(waiter, session.route, now)
            if scan:
                self._reap_orphans(mux, retrying)
            with self._lock:
                for when, _ in self._retries:
                    next_wake = min(next_wake, when)
                if not self._in_flight:
                    if now - self._idle_since >= d.JS_ACK_TIMER_IDLE_EXIT:
                        self._session = None  # callers open a new one from now on
                        return
                    # Not past the next look for orphans either: one added to the
                    # window without a deadline (Ctrl-C) must not wait for the idle exit.
                    next_wake = min(
                        next_wake,
                        self._idle_since + d.JS_ACK_TIMER_IDLE_EXIT,
                        now + d.JS_ACK_ORPHAN_SCAN,
                    )
                else:
                    # Settled entries leave the deques only here: sweep them at least
                    # this often, so that a long ack timeout does not keep them all.
                    next_wake = min(next_wake, now + d.JS_ACK_SWEEP_INTERVAL)
                self._next_wake = next_wake
                self._wake.wait(max(next_wake - time.monotonic(), 0.0))

    def _expire(self, mux: RequestMux, now: float) -> float:
        """Timer: drops settled entries from the deques' heads, fails those past their
        deadline with ``PublishAckTimeoutError``; returns the next deadline."""
        next_wake = _NEVER
        for queue in list(self._deadlines.values()):
            while queue:
                deadline, reply, waiter = queue[0]
                if reply not in mux:  # settled, or waiting to be sent again
                    queue.popleft()
                    continue
                if deadline > now:
                    next_wake = min(next_wake, deadline)
                    break
                queue.popleft()
                if mux.cancel(reply) is waiter:
                    waiter.fail(ack_timeout(waiter.subject, waiter._timeout))
        return next_wake

    def _reap_orphans(self, mux: RequestMux, retrying: set[AckFutureBase]) -> None:
        """Timer: fails the waiters that nothing will ever settle.

        A Ctrl-C in ``publish_async`` between putting its waiter in the window and
        taking it back can leave it there, in the mux or not, with or without a
        deadline. Every ``JS_ACK_ORPHAN_SCAN`` seconds the window is looked over: a waiter
        neither settled, nor in the mux, nor waiting to be sent again, is a suspect;
        one still so with the same reply at the next look (a second later: a reader
        settling it takes microseconds) is failed. One in the mux is the deadlines'.
        """
        suspects: dict[AckFutureBase, str] = {}
        for waiter in list(self._in_flight):  # list() of a set: one step under the GIL
            if waiter.done() or waiter in retrying:
                continue
            reply = waiter._reply
            if reply and reply in mux:
                continue
            if self._suspects.get(waiter) == reply:
                if not waiter.done():
                    waiter.fail(
                        PublishAckTimeoutError(
                            f"the publish_async call for {waiter.subject!r} was interrupted "
                            "before its ack could be awaited"
                        )
                    )
            else:
                suspects[waiter] = reply
        self._suspects = suspects

    def _resend(self, waiter: AckFutureBase, route: InboxRoute, now: float) -> None:
        """Timer: publishes a message answered 503 again under a fresh reply."""
        try:
            self._send(waiter, route, now + waiter._timeout)
        except Error as err:
            if route.mux.cancel(waiter._reply) is waiter:
                waiter.fail(err)

    def _fail_all(self, mux: RequestMux) -> None:
        """Timer, the client closed: fails every future still awaited."""
        with self._lock:
            retries, self._retries = self._retries, []
        for queue in list(self._deadlines.values()):
            while queue:
                _, reply, waiter = queue.popleft()
                if mux.cancel(reply) is waiter:
                    waiter.fail(
                        ConnectionClosedError(
                            f"the client closed before the ack for {waiter.subject!r}"
                        )
                    )
        for _, waiter in retries:
            waiter.fail(
                ConnectionClosedError(f"the client closed before the ack for {waiter.subject!r}")
            )

    # --- helpers -----------------------------------------------------------------------

    def _timeout(self, timeout: float | None) -> float:
        if timeout is None:
            return self._js.timeout
        check_timeout(timeout)
        return float(timeout)


def check_retries(retry_attempts: int, retry_wait: float) -> None:
    check_int(retry_attempts, "retry_attempts", 0)
    check_timeout(retry_wait, "retry_wait", zero_ok=True)
