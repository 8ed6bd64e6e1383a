"""The request multiplexer: one wildcard inbox subscription for every request.

How it works: each request gets a token; its reply subject is ``<prefix><token>``, where
the client subscribed once to ``<prefix>*``. The reader thread hands each reply to
:meth:`RequestMux.resolve`, which pops the token's waiter and completes it: a blocking
:class:`ReplyWaiter` (a pre-acquired lock the reader releases, the cheapest wake-up
Python has) or a :class:`ReplyFuture`. A reply whose token is gone (timed out,
cancelled) is counted and dropped; nothing is kept for it. ``dict.pop`` is atomic, so a
waiter is completed exactly once even when a reply and a timeout race. The requester's
two hosts (:class:`RequestHost`, :class:`RequestPublisher`) are typed here too, below
both ``_core.components.requester`` and ``_core.components.request_many``, which use them.
"""

from __future__ import annotations

import _thread
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from nats_sync._core.threads.waiting import sleep
from nats_sync.errors import NoRespondersError
from nats_sync.msg import Msg

if TYPE_CHECKING:
    from nats_sync._core.components.publishing import HeadersArg


def no_responders(subject: str) -> NoRespondersError:
    """The error for a request nobody listened to."""
    return NoRespondersError(f"no responders on {subject!r}")


class ReplyWaiter:
    """A blocking request's slot: the reader fills it and releases the lock."""

    __slots__ = ("_lock", "error", "msg", "subject")

    def __init__(self, subject: str = "") -> None:
        self.subject = subject
        self._lock = threading.Lock()
        self._lock.acquire()
        self.msg: Msg | None = None
        self.error: BaseException | None = None

    def resolve(self, msg: Msg) -> None:
        """Completes the request with its reply."""
        self.msg = msg
        self._lock.release()

    def fail(self, error: BaseException) -> None:
        """Completes the request with an error."""
        self.error = error
        self._lock.release()

    def is_done(self) -> bool:
        """Whether :meth:`resolve` or :meth:`fail` was called."""
        return self.msg is not None or self.error is not None

    def wait(self, timeout: float | None) -> bool:
        """Waits for :meth:`resolve` or :meth:`fail`; False on timeout."""
        if timeout is None:
            return self._lock.acquire()
        return self._lock.acquire(timeout=max(timeout, 0.0))


class BatchWait:
    """The one place ``request_batch``'s thread sleeps, for whichever request it awaits.

    A batch's requests share it instead of a lock each: the reader only signals when the
    request being awaited completes, and the rest complete without any wake-up. The
    thread sleeps on a lock of its own (see ``_core.threads.waiting``: never inside ``_lock``, so a
    Ctrl-C cannot leave ``_lock`` half-released).
    """

    __slots__ = ("_lock", "_sleeper", "waiting")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: The slot the batch's thread sleeps on, if any, and the lock it sleeps on.
        self.waiting: BatchSlot | None = None
        self._sleeper: _thread.LockType | None = None

    def wake(self, slot: BatchSlot) -> None:
        """Reader thread: ``slot`` completed; wakes the batch's thread if it awaits it."""
        # Read without the lock: the slot was completed first, and the waiter sets
        # ``waiting`` before it looks at the slot, so one of the two sees the other.
        if self.waiting is slot:
            with self._lock:
                sleeper = self._sleeper
                if self.waiting is slot and sleeper is not None:
                    self._sleeper = None  # released once: the waiter may be gone
                    sleeper.release()

    def wait(self, slot: BatchSlot, timeout: float | None) -> bool:
        """Waits until ``slot`` completes; False on timeout."""
        sleeper = _thread.allocate_lock()
        sleeper.acquire()
        with self._lock:
            self._sleeper = sleeper
            self.waiting = slot
        try:
            # Looked at after announcing: a completion before it is seen here.
            if slot.msg is not None or slot.error is not None:
                return True
            return sleep(sleeper, timeout) or slot.msg is not None or slot.error is not None
        finally:
            # Interrupted before this: a stale announcement, released for nothing later.
            with self._lock:
                self.waiting = None
                self._sleeper = None


class BatchSlot:
    """One request of a ``request_batch``: completed like a :class:`ReplyWaiter`."""

    __slots__ = ("_batch", "error", "msg", "subject")

    def __init__(self, subject: str, batch: BatchWait) -> None:
        self.subject = subject
        self._batch = batch
        self.msg: Msg | None = None
        self.error: BaseException | None = None

    def resolve(self, msg: Msg) -> None:
        """Completes the request with its reply."""
        self.msg = msg
        self._batch.wake(self)

    def fail(self, error: BaseException) -> None:
        """Completes the request with an error."""
        self.error = error
        self._batch.wake(self)

    def wait(self, timeout: float | None) -> bool:
        """Waits for :meth:`resolve` or :meth:`fail`; False on timeout."""
        if self.msg is not None or self.error is not None:
            return True
        return self._batch.wait(self, timeout)


class ReplyFuture(Future[Msg]):
    """The future of :meth:`nats_sync.Client.request_future`.

    Done-callbacks run on the client's callback thread, never on the reader thread.
    """

    def __init__(self, subject: str, run_callback: Callable[..., None]) -> None:
        super().__init__()
        self.subject = subject
        self._run_callback = run_callback

    def add_done_callback(self, fn: Callable[[Future[Msg]], object]) -> None:
        """Runs ``fn(future)`` on the client's callback thread once the future is done."""
        run = self._run_callback
        super().add_done_callback(lambda future: run(fn, future))

    def resolve(self, msg: Msg) -> None:
        """Completes with the reply (or NoRespondersError for a 503 status)."""
        if msg.is_no_responders:
            self.fail(no_responders(self.subject))
            return
        try:
            self.set_result(msg)
        except InvalidStateError:
            pass  # the user cancelled it: the reply has nobody to go to

    def fail(self, error: BaseException) -> None:
        """Completes with an error."""
        try:
            self.set_exception(error)
        except InvalidStateError:
            pass  # the user cancelled it


class Waiter(Protocol):
    """What the mux completes: a request's slot, future, or another component's waiter
    (see :class:`InboxRoute`); called on the reader thread, so it must not block."""

    #: The subject the request went to (``fail_subject`` matches on it).
    subject: str

    def resolve(self, msg: Msg) -> None:
        """Completes it with its reply."""

    def fail(self, error: BaseException) -> None:
        """Completes it with an error."""


class RequestMux:
    """Tokens -> waiters for the requests in flight on one client.

    Args:
        prefix: ``<inbox_prefix>.<nuid>.``; the wildcard subscription is ``prefix + "*"``.
    """

    # The reader thread resolves every reply through it.
    __slots__ = (
        "_prefix_len",
        "_tokens",
        "_waiters",
        "last_request",
        "late_replies",
        "prefix",
        "subject",
    )

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.subject = prefix + "*"
        self._prefix_len = len(prefix)
        self._waiters: dict[str, Waiter] = {}
        self._tokens = itertools.count(1)
        self.late_replies = 0
        #: ``time.monotonic()`` of the last request registered.
        self.last_request = 0.0

    def register(self, waiter: Waiter) -> str:
        """Adds a waiter; returns the reply subject to publish the request with."""
        self.last_request = time.monotonic()
        token = format(next(self._tokens), "x")
        self._waiters[token] = waiter
        return self.prefix + token

    def in_flight(self) -> int:
        """How many waiters are registered (requests awaiting replies, iterators...)."""
        return len(self._waiters)

    def new_reply(self) -> str:
        """A fresh reply subject, nothing registered under it yet (see :meth:`add`).

        In two steps for the caller's ``try``: ``cancel(reply)`` there removes the
        waiter whether or not an asynchronous exception (Ctrl-C) let ``add`` finish.
        """
        return self.prefix + format(next(self._tokens), "x")

    def add(self, reply_subject: str, waiter: Waiter) -> None:
        """Registers ``waiter`` under a subject from :meth:`new_reply`."""
        self.last_request = time.monotonic()
        self._waiters[reply_subject[self._prefix_len :]] = waiter

    def cancel(self, reply_subject: str) -> Waiter | None:
        """Removes a request (timed out or failed to send).

        Returns:
            Its waiter, or None when the reader already took it to complete it.
        """
        return self._waiters.pop(reply_subject[self._prefix_len :], None)

    def resolve(self, msg: Msg) -> None:
        """Reader thread: completes the request the reply's subject names."""
        waiter = self._waiters.pop(msg.subject[self._prefix_len :], None)
        if waiter is None:
            self.late_replies += 1
            return
        waiter.resolve(msg)

    def fail_all(self, error: BaseException) -> None:
        """Completes every request in flight with ``error``."""
        while self._waiters:
            try:
                _, waiter = self._waiters.popitem()
            except KeyError:
                return
            waiter.fail(error)

    def fail_subject(self, subject: str, error: BaseException) -> int:
        """Fails every request sent to ``subject`` (the server refused to take them)."""
        failed = 0
        for token, waiter in list(self._waiters.items()):
            if waiter.subject == subject and self._waiters.pop(token, None) is waiter:
                waiter.fail(error)
                failed += 1
        return failed

    def __len__(self) -> int:
        return len(self._waiters)

    def __contains__(self, reply_subject: Any) -> bool:
        return str(reply_subject)[self._prefix_len :] in self._waiters


class InboxRoute(NamedTuple):
    """What a component that awaits replies on the client's shared request inbox uses
    (JetStream's ``publish_async``): it registers its own waiters (see :class:`Waiter`;
    completed on the reader thread, so they must never block or run user code) and
    publishes with their reply subjects (the client port's ``publish_inbox``).
    """

    #: The client's request multiplexer (its inbox is subscribed).
    mux: RequestMux
    #: ``run_callback(fn, *args)`` on the client's callback thread (user code).
    run_callback: Callable[..., None]


class RequestHost(Protocol):
    """What the requester needs from the handler."""

    def check_can_start(self) -> None:
        """Raises unless a new request may start (closed, draining, forked)."""

    def open_request_inbox(self, mux: RequestMux) -> RequestMux:
        """Subscribes ``mux.subject`` (once) and routes its messages to the mux."""
        ...

    def wake_reader(self) -> None:
        """Makes a reader that stepped aside for requesters read again."""

    def read_own_reply(self, is_done: Callable[[], bool], deadline: float) -> None:
        """Reads the socket on this thread, if the reader stepped aside, until
        ``is_done()`` or ``deadline``."""


class RequestPublisher(Protocol):
    """What the requester needs from the publisher."""

    max_payload: int
    #: False with ``skip_subject_validation`` (subjects checked for framing only).
    strict_subjects: bool

    def publish_request(
        self, subject: str, payload: bytes, inbox: bytes, headers: HeadersArg, direct: bool
    ) -> None:
        """Publishes with our own ``inbox`` as the reply subject."""

    def queue_messages(self, frames: list[bytes], size: int, payload_size: int) -> None:
        """Queues encoded PUB frames as they are."""
