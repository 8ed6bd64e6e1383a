"""The future of one ``publish_async`` message, and the decoding of acknowledgements
(also ``publish``'s).

How it works: ``publish_async`` returns a ``concurrent.futures.Future[PubAck]`` per
message, which is also the message's waiter in the client's request multiplexer. One
behaviour, two implementations, both built on :class:`AckFutureBase`:

- :class:`LeanAckFuture` keeps ``Future``'s private layout (``_state``, ``_condition``,
  ``_waiters``, ``_done_callbacks``) without running ``Future.__init__``, and makes the
  condition and lists only when someone waits or listens, so that
  ``concurrent.futures.wait`` and ``as_completed`` see it as any future. A
  ``Future.__init__`` brings a ``Condition`` and about ten objects the garbage collector
  tracks: with the futures of a window held in a list, the documented path measured
  2.4x slower (``make bench``'s ``publish_async``, below nats-py's figure).
- :class:`PlainAckFuture` uses ``Future`` through its documented API only: made by
  ``Future.__init__``, settled by ``set_result`` / ``set_exception``.

:data:`AckFuture` is the lean one where :func:`future_layout_is_known` confirms, when
this module is imported, that this Python's ``Future`` has the layout the lean one
copies (every CPython the package declares, free-threaded 3.13t included); else the
plain one, so a CPython that changes ``concurrent.futures`` makes ``publish_async``
slower, never wrong. ``tests/unit/test_js_publisher.py`` runs every future test on both.

Threads: made by the caller of ``publish_async``; settled once, by the reader thread
(``resolve``), the ack timer or a closing thread (``fail``), whichever took it from the
mux; waited on and read by callers' threads. Callers' threads never sleep inside a
condition's lock (see ``nats_sync._core.threads.waiting``); done-callbacks run on the
client's callback thread, never on the reader.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from concurrent import futures
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FuturesTimeoutError
from typing import TYPE_CHECKING, Any, Protocol

from nats_sync._core.threads.waiting import Sleepers, wait_until
from nats_sync._defaults import DEFAULT_JS_PUBLISH_RETRY_ATTEMPTS as _DEFAULT_RETRY_ATTEMPTS
from nats_sync._defaults import DEFAULT_JS_PUBLISH_RETRY_WAIT as _DEFAULT_RETRY_WAIT
from nats_sync.jetstream._streams.wire import Headers, decode_reply
from nats_sync.jetstream.api import PubAck
from nats_sync.jetstream.errors import (
    JetStreamError,
    NoStreamResponseError,
    PublishAckTimeoutError,
)
from nats_sync.msg import Msg

if TYPE_CHECKING:
    from nats_sync._core.components.instrumentation import Instrumentation

#: ``{"stream":"<name>","seq":<n>}`` exactly, as nats-server writes a plain PubAck.
_PLAIN_ACK = re.compile(rb'\{"stream":"([^"\\]+)","seq":(\d+)\}\Z')
#: How every acknowledgement starts (an error reply starts with ``{"error"``).
_ACK_START = b'{"stream":'
_ACK_KEYS = frozenset(("stream", "seq", "duplicate", "domain", "val"))


def decode_ack(msg: Msg, subject: str) -> PubAck:
    """The PubAck a publish reply carries.

    Raises:
        NoStreamResponseError: the reply is the 503 no-responders status.
        APIError: the stream refused the message (the subclass by ``err_code``).
        JetStreamError: the reply is not a publish acknowledgement.
    """
    if msg.status is not None:
        if msg.is_no_responders:
            raise no_stream(subject)
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
        raise JetStreamError(
            f"the reply to the publish to {subject!r} is not an acknowledgement: {msg.data[:80]!r}"
        )
    if reply.keys() <= _ACK_KEYS:  # what every server sends: no generic decoding needed
        return PubAck(
            stream, seq, reply.get("duplicate") is True, reply.get("domain"), reply.get("val")
        )
    return PubAck.from_api(reply)


def no_stream(subject: str) -> NoStreamResponseError:
    return NoStreamResponseError(f"no stream stores {subject!r} (no responders)")


def ack_timeout(subject: str, timeout: float) -> PublishAckTimeoutError:
    return PublishAckTimeoutError(f"no ack for the publish to {subject!r} within {timeout}s")


class AckOwner(Protocol):
    """What a future asks of its ``publish_async`` window (``acks.AsyncPublisher``)."""

    #: The client's instrumentation, or None.
    _tracing: Instrumentation | None
    #: The futures whose acks are awaited.
    _in_flight: set[Any]
    #: Callers waiting for room in the window.
    _room_sleepers: Sleepers

    def _retry_later(self, waiter: AckFutureBase) -> None: ...

    def _settled(self) -> None: ...


class AckFutureBase(Future[PubAck]):
    """The ``concurrent.futures.Future`` of one ``publish_async`` message; also its
    waiter in the client's request multiplexer (``resolve``/``fail`` are called there,
    on the reader thread, and are not for users).

    A plain acknowledgement is kept as its bytes and decoded into a ``PubAck`` only when
    ``result()`` or ``exception()`` asks. It is running from the start: a message
    published cannot be taken back, so ``cancel()`` returns False; and only the client
    settles it (``set_result`` and ``set_exception`` raise ``RuntimeError``).
    """

    def __init__(
        self,
        owner: AckOwner,
        subject: str,
        payload: bytes,
        headers: Headers | bytes,
        timeout: float,
        retries_left: int,
        retry_wait: float,
        run_callback: Callable[..., None],
    ) -> None:  # Future's: see subclasses
        # What most messages share is a class attribute (see below): fewer stores.
        self._run_callback = run_callback
        self._owner = owner
        self.subject = subject
        self._payload = payload
        self._headers = headers
        self._timeout = timeout
        if retries_left != _DEFAULT_RETRY_ATTEMPTS or retry_wait != _DEFAULT_RETRY_WAIT:
            self._retries_left = retries_left
            self._retry_wait = retry_wait

    # Until set on the instance.
    _ack: PubAck | None = None
    _error: BaseException | None = None
    #: The ack's bytes while not decoded yet.
    _ack_data: bytes | None = None
    _retries_left = _DEFAULT_RETRY_ATTEMPTS
    _retry_wait = _DEFAULT_RETRY_WAIT
    _reply = ""

    # --- the user's side -----------------------------------------------------------------

    def done(self) -> bool:
        """Whether the ack (or an error) came."""
        raise NotImplementedError

    def running(self) -> bool:
        """Whether the ack is still awaited (True from the start: it was published)."""
        return not self.done()

    def cancel(self) -> bool:
        """Returns False: a message published cannot be taken back."""
        return False

    def cancelled(self) -> bool:
        """Returns False: it cannot be cancelled."""
        return False

    def result(self, timeout: float | None = None) -> PubAck:
        """The ack, waiting up to ``timeout`` seconds (None: as long as it takes).

        Raises:
            The publish's error (``PublishAckTimeoutError``, an ``APIError``, ...), or
            ``concurrent.futures.TimeoutError`` when it did not complete in time.
        """
        self._wait(timeout)
        if self._error is not None:
            raise self._error
        assert self._ack is not None
        return self._ack

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The publish's error or None, waiting up to ``timeout`` seconds.

        Raises:
            concurrent.futures.TimeoutError: it did not complete in time.
        """
        self._wait(timeout)
        return self._error

    def add_done_callback(self, fn: Callable[[Future[PubAck]], object]) -> None:
        """Runs ``fn(future)`` on the client's callback thread once the future is done."""
        raise NotImplementedError

    def set_result(self, result: PubAck) -> None:
        """Not for users: the client settles the future when the ack comes.

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError("a publish_async future is settled by the client only")

    def set_exception(self, exception: BaseException | None) -> None:
        """Not for users: the client settles the future when the publish fails.

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError("a publish_async future is settled by the client only")

    def __repr__(self) -> str:  # Future's own reads its private state under its lock
        if not self.done():
            state = "awaited"
        elif self._error is None:
            state = "acknowledged"
        else:
            state = f"raised {self._error!r}"
        return f"<{type(self).__name__} for {self.subject!r} {state}>"

    def _wait(self, timeout: float | None) -> None:
        """Until settled (then decoded), or raises ``concurrent.futures.TimeoutError``;
        never sleeps inside a condition's lock, which a Ctrl-C can leave half-released
        (see ``nats_sync._core.threads.waiting``)."""
        if not self.done():
            deadline = None if timeout is None else time.monotonic() + timeout
            lock, sleepers = self._sleep_on()
            if wait_until(lock, sleepers, self._finished, deadline) is None:
                raise FuturesTimeoutError()
        self._decode()

    def _finished(self) -> bool | None:
        """True once settled, None before (``wait_until``'s look)."""
        return True if self.done() else None

    def _sleep_on(self) -> tuple[threading.Lock, Sleepers]:
        """The lock and sleepers a waiter enlists in (made now: settling wakes them)."""
        raise NotImplementedError

    def _decode(self) -> None:
        """Decodes a kept ack. Two threads may both decode: the result is the same, and
        ``_ack``/``_error`` are set before the kept bytes are dropped."""
        data = self._ack_data
        if data is not None:
            try:
                self._ack = decode_ack(Msg(self._reply, data=data), self.subject)
            except JetStreamError as err:
                self._error = err
            self._ack_data = None

    # --- the mux's side (reader thread), the timer, a closing thread -------------------

    def resolve(self, msg: Msg) -> None:
        """Reader thread: the ack (or a 503, or an API error) came."""
        if msg.status is None:
            data = msg.data
            if data.startswith(_ACK_START):  # an ack, not an error: decoded when asked
                self._ack_data = data
                self._settle()
                return
        elif self._retries_left and msg.is_no_responders:
            self._owner._retry_later(self)
            return
        try:
            self._ack = decode_ack(msg, self.subject)
        except JetStreamError as err:
            self._error = err
        self._settle()

    def fail(self, error: BaseException) -> None:
        """Any thread that took this waiter from the mux: completes it with ``error``."""
        self._error = error
        self._settle()

    def _settle(self) -> None:
        """Completes the future (exactly once: the caller took its waiter), wakes who
        waits and frees its room in the window (:meth:`_release`)."""
        raise NotImplementedError

    def _release(self) -> None:
        """Frees the future's room in its window (``AsyncPublisher._settled``, inlined:
        this runs per message)."""
        owner = self._owner
        if owner._tracing is not None:  # a kept ack is an ack: decoded only when asked
            owner._tracing.js_acked(self.subject, self._error)
        in_flight = owner._in_flight
        in_flight.discard(self)
        if owner._room_sleepers or not in_flight:
            owner._settled()


def _future_state(name: str) -> str:
    """``Future``'s state ``name`` as its module spells it ("" where it has none)."""
    value = getattr(getattr(futures, "_base", None), name, "")
    return value if isinstance(value, str) else ""


_RUNNING_STATE = _future_state("RUNNING")
_FINISHED_STATE = _future_state("FINISHED")


#: Taken only while a lean future makes one of its lazy fields.
_LAZY_LOCK = threading.RLock()
#: The lean future's fields made when first asked for, and how. ``_condition`` is on a
#: plain lock of its own, which callers' threads enter directly: a Condition's own
#: ``__enter__`` is Python code, and a Ctrl-C as it returns would leave the lock held.
_LAZY_FIELDS: dict[str, Callable[[Any], Any]] = {
    "_condition_lock": lambda future: threading.Lock(),
    "_condition": lambda future: threading.Condition(future._condition_lock),
    "_sleepers": lambda future: Sleepers(),
    "_waiters": lambda future: [],
    "_done_callbacks": lambda future: [],
}


class LeanAckFuture(AckFutureBase):
    """The future with ``Future``'s private layout, made lazily (see the module's
    docstring); :func:`future_layout_is_known` checks that layout when imported."""

    # Future.__init__ is not run: _state below, the rest made when asked for.
    _state = _RUNNING_STATE

    def __getattr__(self, name: str) -> Any:
        # Only reached while the attribute is missing. Made under one module-level lock
        # (this path is rare: a waiter or a done-callback), so one winner is kept if two
        # threads make it at once; set as an attribute, never through ``__dict__``:
        # materializing an instance's dict here, while the garbage collector ran on
        # another thread, crashed CPython 3.11 (a segfault in the collector).
        make = _LAZY_FIELDS.get(name)
        if make is None:
            raise AttributeError(name)
        with _LAZY_LOCK:
            try:
                return object.__getattribute__(self, name)
            except AttributeError:
                pass
            value = make(self)
            object.__setattr__(self, name, value)
            return value

    def done(self) -> bool:
        """Whether the ack (or an error) came; reads the state without the condition."""
        return self._state == _FINISHED_STATE

    def add_done_callback(self, fn: Callable[[Future[PubAck]], object]) -> None:
        """Runs ``fn(future)`` on the client's callback thread once the future is done."""
        self._condition  # noqa: B018 - made now: _settle runs callbacks only if it is
        with self._condition_lock:
            if self._state != _FINISHED_STATE:
                self._done_callbacks.append(fn)
                return
        self._run_callback(fn, self)

    def _sleep_on(self) -> tuple[threading.Lock, Sleepers]:
        self._condition  # noqa: B018 - made now: _settle wakes sleepers only if it is
        return self._condition_lock, self._sleepers

    def _settle(self) -> None:
        # The state first, then a look for a condition: a thread that makes the
        # condition afterwards sees the state, and one that made it earlier holds it
        # while it checks the state, so a wake-up is never lost.
        self._state = _FINISHED_STATE
        lazy = self.__dict__
        condition = lazy.get("_condition")
        if condition is not None:  # someone waits or listens
            with condition:
                sleepers = lazy.get("_sleepers")
                if sleepers:
                    sleepers.wake_all()
                for waiter in lazy.get("_waiters", ()):  # concurrent.futures.wait's
                    if self._error is None:
                        waiter.add_result(self)
                    else:
                        waiter.add_exception(self)
                condition.notify_all()
            for fn in lazy.get("_done_callbacks", ()):
                self._run_callback(fn, self)
        self._release()


class _Listeners:
    """What a plain future's waiters and done-callbacks enlist in (made for the first)."""

    __slots__ = ("callbacks", "lock", "sleepers")

    def __init__(self) -> None:
        # A plain lock, which callers' threads enter directly (see LeanAckFuture).
        self.lock = threading.Lock()
        self.sleepers = Sleepers()
        self.callbacks: list[Callable[[Future[PubAck]], object]] = []


#: ``Future``'s own, which :class:`AckFutureBase` closes to users.
_future_set_result: Callable[[Future[Any], Any], None] = Future.set_result
_future_set_exception: Callable[[Future[Any], BaseException | None], None] = Future.set_exception


class PlainAckFuture(AckFutureBase):
    """The future on ``Future``'s documented API only (see the module's docstring).

    ``Future``'s own outcome is set by ``set_result``/``set_exception`` on a client
    thread, for ``concurrent.futures.wait`` and ``as_completed``; the methods users call
    read this class's own fields. A kept ack is given to ``Future`` as None: bytes that
    start as an ack but do not decode become the error only when read, so
    ``wait(..., FIRST_EXCEPTION)`` counts them as a result.
    """

    def __init__(
        self,
        owner: AckOwner,
        subject: str,
        payload: bytes,
        headers: Headers | bytes,
        timeout: float,
        retries_left: int,
        retry_wait: float,
        run_callback: Callable[..., None],
    ) -> None:
        Future.__init__(self)
        super().__init__(
            owner, subject, payload, headers, timeout, retries_left, retry_wait, run_callback
        )

    #: Set (after the outcome and Future's own state) when the future completes.
    _done = False
    #: Made by the first waiter or done-callback (see :meth:`_listen`).
    _listeners: _Listeners | None = None

    def done(self) -> bool:
        """Whether the ack (or an error) came."""
        return self._done

    def add_done_callback(self, fn: Callable[[Future[PubAck]], object]) -> None:
        """Runs ``fn(future)`` on the client's callback thread once the future is done."""
        listeners = self._listen()
        with listeners.lock:
            if not self._done:
                listeners.callbacks.append(fn)
                return
        self._run_callback(fn, self)

    def _listen(self) -> _Listeners:
        """This future's listeners, made if none (setdefault: one winner of a race)."""
        listeners = self._listeners
        if listeners is None:
            listeners = self.__dict__.setdefault("_listeners", _Listeners())
        return listeners

    def _sleep_on(self) -> tuple[threading.Lock, Sleepers]:
        listeners = self._listen()
        return listeners.lock, listeners.sleepers

    def _settle(self) -> None:
        # Called on a client thread (reader, timer, closer), never where a Ctrl-C
        # lands, so it may enter Future's condition. Future's state first, then ours,
        # then the listeners: one that enlisted before sees _done, or is woken.
        if self._error is None:
            _future_set_result(self, self._ack)  # None while the ack is kept as bytes
        else:
            _future_set_exception(self, self._error)
        self._done = True
        listeners = self._listeners
        if listeners is not None:  # someone waits or listens
            with listeners.lock:
                listeners.sleepers.wake_all()
                callbacks = listeners.callbacks
            for fn in callbacks:
                self._run_callback(fn, self)
        self._release()


#: The names a fresh ``Future`` holds, which :class:`LeanAckFuture` stands in for.
_FUTURE_FIELDS = frozenset(
    ("_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks")
)


def future_layout_is_known() -> bool:
    """Whether this Python's ``concurrent.futures`` keeps the private layout that
    :class:`LeanAckFuture` copies: a fresh ``Future``'s fields, the state names, and
    ``wait`` telling a running stand-in from a finished one at once."""
    if not (_RUNNING_STATE and _FINISHED_STATE):
        return False
    if frozenset(vars(Future())) != _FUTURE_FIELDS:
        return False
    stand_in: Future[None] = Future.__new__(Future)
    stand_in.__dict__.update(
        _condition=threading.Condition(),
        _state=_RUNNING_STATE,
        _result=None,
        _exception=None,
        _waiters=[],
        _done_callbacks=[],
    )
    try:
        running = futures.wait([stand_in], timeout=0).not_done == {stand_in}
        stand_in.__dict__["_state"] = _FINISHED_STATE
        finished = futures.wait([stand_in], timeout=0).done == {stand_in}
    except (AttributeError, TypeError, ValueError):
        return False
    return running and finished


#: The class ``publish_async`` makes its futures with (see the module's docstring).
AckFuture: type[AckFutureBase] = LeanAckFuture if future_layout_is_known() else PlainAckFuture
