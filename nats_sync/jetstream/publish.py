"""JetStream publishing: ``publish`` (one acknowledged message), ``publish_async`` (a
window of acknowledgements in flight) and ``publish_batch`` (pipelined).

How it works:

- ``publish`` is a core ``request`` to the message's subject on the caller's thread; the
  stream answers with a PubAck (or an API error). No responders (503) means no stream
  stores the subject yet (or its leader is changing): it is retried ``retry_attempts``
  times, ``retry_wait`` apart. A publish whose ack did not come in time is NOT retried:
  the stream may have stored it, and without a ``msg_id`` a retry would store it twice
  (nats.go does the same).
- ``publish_batch`` is the client's ``request_batch`` (pipelined on the core) on the
  caller's thread, at most ``max_pending_acks`` unanswered at once; each item gets its
  ack or its error, and nothing is retried (a late retry would reorder the stream).
- ``publish_async`` shares one wildcard reply subscription ``<inbox>.*`` per context
  (a *session*) and gives each message a token of its own (``<inbox>.<token>``), as
  nats.go does: a publish costs a dict entry and a core publish, not a request future
  (measured with 50,000 messages of 128 bytes: about 29,000 acks/s, against 10,000 for a
  ``request_future`` per message and 24,000 for nats-py's ``publish_async``).
  At most ``max_pending_acks`` acks are awaited; a caller beyond that waits up to
  ``stall_wait`` for room, then gets ``TooManyStalledMsgsError``. A 503 is retried like
  ``publish`` (the ack timer publishes again after ``retry_wait``); a timeout is not.
  ``drain()`` unsubscribes the reply subscription, so acks still awaited then fail with
  ``ConnectionClosedError``: call ``publish_async_completed()`` first.

Threads and what they touch (everything below is guarded by ``_lock``; futures are
settled outside it, so user done-callbacks never run under it):

- callers of ``publish_async``: register an entry in ``_pending`` (waiting on ``_room``
  while the window is full), then publish outside the lock. They open a session
  (subscribe, listener, timer thread) under ``_session_lock`` when there is none.
- the reply subscription's delivery thread (the client's ``nats_sync-sub-<sid>``,
  never the reader): pops the entry of each ack, settles its future, then counts it
  done (``_in_flight``, waking ``_room`` and ``_done`` waiters). Done-callbacks of
  acknowledged futures run here.
- the ack timer thread ``nats_sync-js-acks`` (one per live session): sleeps on
  ``_wake`` until the earliest deadline or retry (a caller wakes it only for an earlier
  one, so while acks flow it scans ``_pending``, at most the window, about once per
  ack timeout); fails expired entries with
  ``PublishAckTimeoutError``, publishes 503'd entries again, fails everything with
  ``ConnectionClosedError`` when the client closes, and retires the session
  (unsubscribes, removes its listener, ends) after ``_IDLE_EXIT`` seconds with
  nothing in flight. Done-callbacks of timed-out and closed futures run here.
- the client's status listener (any client thread): only marks the session closed and
  wakes the timer.

A done-callback may call ``publish_async`` again: on the two threads above it never
waits for room (it would wait for itself), the window is exceeded instead.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

from nats_sync._defaults import CLOSE_CALLBACK_GRACE
from nats_sync._validate import check_int, check_text, check_timeout
from nats_sync.errors import (
    ConnectionClosedError,
    Error,
    InvalidArgumentError,
    NoRespondersError,
    TimeoutError,
)
from nats_sync.jetstream._api import Headers, check_stream_name, decode_reply
from nats_sync.jetstream.api import PubAck
from nats_sync.jetstream.errors import (
    JetStreamError,
    NoStreamResponseError,
    PublishAckTimeoutError,
    TooManyStalledMsgsError,
)
from nats_sync.msg import Msg
from nats_sync.subscription import Subscription

if TYPE_CHECKING:
    from nats_sync.jetstream.context import JetStream

#: Seconds a session lives on with nothing in flight before it unsubscribes and its
#: timer thread ends (a context made per call must not keep a thread forever).
_IDLE_EXIT = 10.0
_NEVER = float("inf")
_RUNNING = float("-inf")  # ``_next_wake`` while the timer is awake: nobody wakes it

_MSG_ID = "Nats-Msg-Id"
_EXPECTED_STREAM = "Nats-Expected-Stream"
_EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
_EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
_EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
#: ``{"stream":"<name>","seq":<n>}`` exactly, as nats-server writes a plain PubAck.
_PLAIN_ACK = re.compile(rb'\{"stream":"([^"\\]+)","seq":(\d+)\}\Z')
_ACK_KEYS = frozenset(("stream", "seq", "duplicate", "domain", "val"))


def js_headers(
    headers: Headers,
    msg_id: str | None = None,
    expected_stream: str | None = None,
    expected_last_seq: int | None = None,
    expected_last_subject_seq: int | None = None,
    expected_last_msg_id: str | None = None,
) -> Headers:
    """The user's headers with the JetStream ones the keywords ask for (those win).

    Raises:
        InvalidArgumentError: a keyword's value is not a non-empty str (ids) or an
            int >= 0 (sequences); ``InvalidStreamNameError`` for ``expected_stream``.
    """
    extra: dict[str, str] = {}
    if msg_id is not None:
        extra[_MSG_ID] = check_text(msg_id, "msg_id")
    if expected_stream is not None:
        extra[_EXPECTED_STREAM] = check_stream_name(expected_stream)
    if expected_last_seq is not None:
        check_int(expected_last_seq, "expected_last_seq", 0)
        extra[_EXPECTED_LAST_SEQ] = str(expected_last_seq)
    if expected_last_subject_seq is not None:
        check_int(expected_last_subject_seq, "expected_last_subject_seq", 0)
        extra[_EXPECTED_LAST_SUBJECT_SEQ] = str(expected_last_subject_seq)
    if expected_last_msg_id is not None:
        extra[_EXPECTED_LAST_MSG_ID] = check_text(expected_last_msg_id, "expected_last_msg_id")
    if not extra:
        return headers
    if headers is None:
        return extra
    if not isinstance(headers, Mapping):
        raise InvalidArgumentError(
            f"headers must be a mapping of name -> value, got {type(headers).__name__}"
        )
    return {**headers, **extra}


def decode_ack(msg: Msg, subject: str) -> PubAck:
    """The PubAck a publish reply carries.

    Raises:
        NoStreamResponseError: the reply is the 503 no-responders status.
        APIError: the stream refused the message (the subclass by ``err_code``).
        JetStreamError: the reply is not a publish acknowledgement.
    """
    if msg.status is not None:
        if msg.is_no_responders:
            raise _no_stream(subject)
        raise JetStreamError(
            f"the publish to {subject!r} was answered with status {msg.status} "
            f"{msg.description!r}, not an acknowledgement"
        )
    plain = _PLAIN_ACK.match(msg.data)
    if plain is not None:  # what a stream answers nearly always: no JSON decoder needed
        return PubAck(plain[1].decode(), int(plain[2]))
    reply = decode_reply(msg.data, subject)
    stream = reply.get("stream")
    seq = reply.get("seq")
    if not isinstance(stream, str) or not isinstance(seq, int) or isinstance(seq, bool):
        raise JetStreamError(f"the reply to the publish to {subject!r} is not an "
                             f"acknowledgement: {msg.data[:80]!r}")
    if reply.keys() <= _ACK_KEYS:  # what every server sends: no generic decoding needed
        return PubAck(stream, seq, reply.get("duplicate") is True, reply.get("domain"),
                      reply.get("val"))
    return PubAck.from_api(reply)


def _no_stream(subject: str) -> NoStreamResponseError:
    return NoStreamResponseError(f"no stream stores {subject!r} (no responders)")


def _ack_timeout(subject: str, timeout: float) -> PublishAckTimeoutError:
    return PublishAckTimeoutError(f"no ack for the publish to {subject!r} within {timeout}s")


class _Entry:
    """One ``publish_async`` message awaiting its ack (fields written under the lock)."""

    __slots__ = ("deadline", "future", "headers", "payload", "retries_left", "retry_at",
                 "retry_wait", "subject", "timeout", "token")

    def __init__(self, subject: str, payload: bytes, headers: Headers, timeout: float,
                 retries_left: int, retry_wait: float) -> None:
        self.future: Future[PubAck] = Future()
        # Running at once: a published message cannot be taken back, so cancel() is False.
        self.future.set_running_or_notify_cancel()
        self.subject = subject
        self.payload = payload
        self.headers = headers
        self.timeout = timeout
        self.retries_left = retries_left
        self.retry_wait = retry_wait
        self.token = ""
        self.deadline = _NEVER
        #: Set while waiting to publish again after a 503.
        self.retry_at: float | None = None


class _Session:
    """One reply subscription with its listener and timer thread."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.closed = False  # the client closed: fail everything (under the lock)
        self.sub: Subscription | None = None
        self.remove_listener: Callable[[], None] | None = None
        #: The delivery and timer threads' idents: there, publish_async never stalls.
        self.own_threads: set[int] = set()
        self.timer: threading.Thread | None = None


class JsPublisher:
    """Publishes for one context and owns its ``publish_async`` window.

    Args:
        js: the context (``js.client``, ``js.timeout``).
        max_pending_acks: ``publish_async`` acks awaited at most.
        stall_wait: seconds ``publish_async`` waits for room before it raises.
    """

    def __init__(self, js: JetStream, max_pending_acks: int, stall_wait: float) -> None:
        check_int(max_pending_acks, "max_pending_acks", 1)
        check_timeout(stall_wait, "stall_wait", zero_ok=True)
        self._js = js
        self._client = js.client
        self._max_pending_acks = max_pending_acks
        self._stall_wait = float(stall_wait)
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._done = threading.Condition(self._lock)
        self._wake = threading.Condition(self._lock)
        self._session_lock = threading.Lock()  # one session opened at a time
        self._session: _Session | None = None
        self._pending: dict[str, _Entry] = {}
        #: Registered and not yet settled (>= len(_pending): popped ones are settling).
        self._in_flight = 0
        self._room_waiters = 0
        self._done_waiters = 0
        self._next_token = 0
        self._next_wake = _NEVER
        self._idle_since = time.monotonic()

    # --- publish ---------------------------------------------------------------------

    def publish(
        self, subject: str, payload: bytes = b"", *, headers: Headers = None,
        timeout: float | None = None, msg_id: str | None = None,
        expected_stream: str | None = None, expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None, retry_attempts: int = 2,
        retry_wait: float = 0.25,
    ) -> PubAck:
        """See ``JetStream.publish``; ``timeout`` applies to each attempt."""
        timeout = self._timeout(timeout)
        _check_retries(retry_attempts, retry_wait)
        merged = js_headers(headers, msg_id, expected_stream, expected_last_seq,
                            expected_last_subject_seq, expected_last_msg_id)
        attempt = 0
        while True:
            try:
                reply = self._client.request(subject, payload, timeout=timeout,
                                             headers=merged)
            except NoRespondersError:
                if attempt >= retry_attempts:
                    raise _no_stream(subject) from None
                attempt += 1
                time.sleep(retry_wait)
                continue
            except TimeoutError:
                raise _ack_timeout(subject, timeout) from None
            return decode_ack(reply, subject)

    # --- publish_batch ---------------------------------------------------------------

    def publish_batch(self, subject: str, payloads: Sequence[bytes], *,
                      headers: Headers = None, timeout: float | None = None
                      ) -> list[PubAck | Exception]:
        """See ``JetStream.publish_batch``."""
        timeout = self._timeout(timeout)
        if isinstance(payloads, (bytes, bytearray, memoryview, str)):
            raise InvalidArgumentError(
                f"payloads must be a sequence of payloads, got one {type(payloads).__name__}"
            )
        replies = self._client.request_batch(subject, payloads, timeout=timeout,
                                             headers=headers,
                                             max_in_flight=self._max_pending_acks)
        results: list[PubAck | Exception] = []
        for reply in replies:
            if isinstance(reply, Msg):
                try:
                    results.append(decode_ack(reply, subject))
                except JetStreamError as err:
                    results.append(err)
            elif isinstance(reply, NoRespondersError):
                results.append(_no_stream(subject))
            elif isinstance(reply, TimeoutError):
                results.append(_ack_timeout(subject, timeout))
            elif isinstance(reply, Exception):
                results.append(reply)
            else:
                raise reply  # KeyboardInterrupt and the like are not an item's result
        return results

    # --- publish_async ---------------------------------------------------------------

    def publish_async(
        self, subject: str, payload: bytes = b"", *, headers: Headers = None,
        timeout: float | None = None, msg_id: str | None = None,
        expected_stream: str | None = None, expected_last_seq: int | None = None,
        expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None, retry_attempts: int = 2,
        retry_wait: float = 0.25,
    ) -> Future[PubAck]:
        """See ``JetStream.publish_async``."""
        # The plain call (no keyword given) skips the checks: this runs per message.
        timeout = self._js.timeout if timeout is None else self._timeout(timeout)
        if retry_attempts != 2 or retry_wait != 0.25:
            _check_retries(retry_attempts, retry_wait)
        if (msg_id is None and expected_stream is None and expected_last_seq is None
                and expected_last_subject_seq is None and expected_last_msg_id is None):
            merged = headers
        else:
            merged = js_headers(headers, msg_id, expected_stream, expected_last_seq,
                                expected_last_subject_seq, expected_last_msg_id)
        entry = _Entry(subject, payload, merged, timeout, retry_attempts, retry_wait)
        reply = self._register(entry)
        try:
            self._client.publish(subject, payload, reply, merged)
        except BaseException:
            self._forget(entry)
            raise
        return entry.future

    def pending(self) -> int:
        """See ``JetStream.publish_async_pending``."""
        return self._in_flight

    def completed(self, timeout: float | None) -> None:
        """See ``JetStream.publish_async_completed``."""
        if timeout is not None:
            check_timeout(timeout, zero_ok=True)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._in_flight:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"{self._in_flight} publish acks still awaited "
                                       f"after {timeout}s")
                self._done_waiters += 1
                try:
                    self._done.wait(remaining)
                finally:
                    self._done_waiters -= 1

    def _register(self, entry: _Entry) -> str:
        """Caller: waits for room, then adds ``entry``; returns its reply subject.

        Raises:
            TooManyStalledMsgsError: no room within ``stall_wait``.
            ConnectionClosedError: the client closed.
        """
        while True:
            session = self._session or self._open_session()
            with self._lock:
                if session is not self._session:
                    continue  # retired (idle) or closed meanwhile: open another
                if self._in_flight >= self._max_pending_acks and (
                        threading.get_ident() not in session.own_threads):
                    self._wait_for_room(session)
                if session.closed:
                    raise ConnectionClosedError("the client closed")
                self._next_token += 1
                token = entry.token = f"{self._next_token:x}"
                entry.deadline = time.monotonic() + entry.timeout
                self._pending[token] = entry
                self._in_flight += 1
                if entry.deadline < self._next_wake:
                    self._wake.notify()
                return session.prefix + token

    def _wait_for_room(self, session: _Session) -> None:
        """Under the lock: waits until fewer than the maximum are in flight."""
        deadline = time.monotonic() + self._stall_wait
        while self._in_flight >= self._max_pending_acks and not session.closed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TooManyStalledMsgsError(
                    f"max_pending_acks ({self._max_pending_acks}) publish acks were awaited "
                    f"for longer than stall_wait ({self._stall_wait}s)"
                )
            self._room_waiters += 1
            try:
                self._room.wait(remaining)
            finally:
                self._room_waiters -= 1

    def _forget(self, entry: _Entry) -> None:
        """Caller: the publish of ``entry`` raised, so no ack will come."""
        with self._lock:
            removed = self._pending.pop(entry.token, None) is not None
        if removed:
            self._settled(1)

    def _settled(self, count: int) -> None:
        """Any thread: ``count`` futures have their outcome; frees their room."""
        with self._lock:
            self._in_flight -= count
            if self._room_waiters:
                self._room.notify(count)
            if not self._in_flight:
                self._idle_since = time.monotonic()
                if self._done_waiters:
                    self._done.notify_all()

    # --- the reply subscription's delivery thread --------------------------------------

    def _on_reply(self, msg: Msg, session: _Session) -> None:
        token = msg.subject[len(session.prefix):]
        with self._lock:
            entry = self._pending.pop(token, None)
            if entry is None:
                return  # timed out or failed already
            if entry.retries_left and msg.is_no_responders:
                entry.retries_left -= 1
                entry.retry_at = time.monotonic() + entry.retry_wait
                self._pending[token] = entry
                if entry.retry_at < self._next_wake:
                    self._wake.notify()
                return
        try:
            entry.future.set_result(decode_ack(msg, entry.subject))
        except JetStreamError as err:
            entry.future.set_exception(err)
        finally:
            self._settled(1)

    # --- sessions and the ack timer thread ----------------------------------------------

    def _open_session(self) -> _Session:
        """Caller: the live session, made (subscription, listener, timer) if none."""
        with self._session_lock:
            session = self._session
            if session is not None:
                return session
            session = _Session(self._client.new_inbox() + ".")

            def on_reply(msg: Msg) -> None:
                session.own_threads.add(threading.get_ident())
                self._on_reply(msg, session)

            # No message limit: at most the in-flight acks can be queued.
            session.sub = self._client.subscribe(session.prefix + "*", cb=on_reply,
                                                 pending_msgs_limit=0)
            session.remove_listener = self._client._add_status_listener(
                lambda event: self._on_status(event, session))
            with self._lock:
                self._session = session
                # Idle counts from now: the timer must not retire it before its first use.
                self._idle_since = time.monotonic()
                if self._client.is_closed:  # closed before the listener was there
                    session.closed = True
            session.timer = threading.Thread(target=self._run_timer, args=(session,),
                                             name="nats_sync-js-acks", daemon=True)
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
                self._wake.notify()
                self._room.notify_all()
            timer = session.timer
            if timer is not None and timer is not threading.current_thread():
                timer.join(CLOSE_CALLBACK_GRACE)

    def _run_timer(self, session: _Session) -> None:
        """The ack timer thread of ``session``: see the module docstring."""
        session.own_threads.add(threading.get_ident())
        try:
            self._timer_loop(session)
        finally:
            if session.remove_listener is not None:
                session.remove_listener()
            if session.sub is not None and not session.closed:
                try:
                    session.sub.unsubscribe()
                except Error:
                    pass  # the client closed meanwhile: the subscription ended with it

    def _timer_loop(self, session: _Session) -> None:
        self._lock.acquire()
        try:
            while True:
                now = time.monotonic()
                if session.closed:
                    closed = list(self._pending.values())
                    self._pending.clear()
                    self._session = None
                    self._lock.release()
                    try:
                        for entry in closed:
                            entry.future.set_exception(ConnectionClosedError(
                                f"the client closed before the ack for {entry.subject!r}"))
                    finally:
                        self._settled(len(closed))
                        self._lock.acquire()
                    return
                expired, resend, next_wake = self._scan(now)
                if expired or resend:
                    self._lock.release()
                    try:
                        self._expire(expired)
                        self._resend(resend, session)
                    finally:
                        self._lock.acquire()
                    continue
                if not self._in_flight:
                    if now - self._idle_since >= _IDLE_EXIT:
                        self._session = None  # callers open a new one from now on
                        return
                    next_wake = min(next_wake, self._idle_since + _IDLE_EXIT)
                self._next_wake = next_wake
                self._wake.wait(None if next_wake == _NEVER else next_wake - now)
                self._next_wake = _RUNNING
        finally:
            self._lock.release()

    def _scan(self, now: float) -> tuple[list[_Entry], list[_Entry], float]:
        """Timer, under the lock: takes the expired entries, marks those due to be sent
        again, and returns them with the next time to wake."""
        expired: list[_Entry] = []
        resend: list[_Entry] = []
        next_wake = _NEVER
        for entry in self._pending.values():
            retry_at = entry.retry_at
            if retry_at is not None:
                if retry_at <= now:
                    entry.retry_at = None
                    entry.deadline = now + entry.timeout
                    resend.append(entry)
                elif retry_at < next_wake:
                    next_wake = retry_at
            elif entry.deadline <= now:
                expired.append(entry)
            elif entry.deadline < next_wake:
                next_wake = entry.deadline
        for entry in expired:
            del self._pending[entry.token]
        return expired, resend, next_wake

    def _expire(self, expired: list[_Entry]) -> None:
        try:
            for entry in expired:
                entry.future.set_exception(_ack_timeout(entry.subject, entry.timeout))
        finally:
            self._settled(len(expired))

    def _resend(self, resend: list[_Entry], session: _Session) -> None:
        for entry in resend:
            try:
                self._client.publish(entry.subject, entry.payload,
                                     session.prefix + entry.token, entry.headers)
            except Error as err:
                with self._lock:
                    removed = self._pending.pop(entry.token, None) is not None
                if removed:
                    entry.future.set_exception(err)
                    self._settled(1)

    # --- helpers -----------------------------------------------------------------------

    def _timeout(self, timeout: float | None) -> float:
        if timeout is None:
            return self._js.timeout
        check_timeout(timeout)
        return float(timeout)


def _check_retries(retry_attempts: int, retry_wait: float) -> None:
    check_int(retry_attempts, "retry_attempts", 0)
    check_timeout(retry_wait, "retry_wait", zero_ok=True)
