"""Request many (ADR-47): one request, any number of replies, on the shared request inbox.

How it works: :func:`start_request_many` registers a :class:`ReplyStream` in the
client's request mux (``_core.components.reply_mux.RequestMux``) under one fresh reply subject and
publishes the request with it, so no subscription is made per call. The mux pops a
waiter on its first reply; a :class:`ReplyStream` registers itself again under the same
subject from ``resolve`` (before the next reply can be read: one thread dispatches at a
time), queues the reply and wakes its consumer. :class:`ReplyIterator` is what the
caller iterates: each ``next()`` waits on the caller's thread until a reply is queued,
the total deadline passes, or (once a reply came) the stall gap passes; it ends at
``max_messages`` replies or at a reply ``sentinel`` accepts (not yielded). A ``503``
status raises ``NoRespondersError``. However it ends (its rules, ``close()``, ``break``,
an exception, garbage collection: ``__del__``), :meth:`ReplyStream.end` takes the entry
out of the mux, so replies that come later are counted as late replies and dropped.

Threads: ``resolve``/``fail`` run on whichever thread dispatches the inbox (the reader,
or a requester reading its own reply) or, for ``fail``, on the thread closing the
client; ``next()`` runs on the caller's thread. Nothing here starts a thread.

State and locks: a stream's queue of replies, its error and its sleepers are read and
changed under the stream's own ``_lock`` (waits use ``threads.waiting.wait_until``, so a
Ctrl-C never leaves the lock half-held). ``ended`` is a flag written once; the race between
``resolve`` registering again and ``end`` removing the entry is closed by order alone:
``end`` sets the flag before it cancels, ``resolve`` registers before it looks at the
flag, so one of the two sees the other and the entry never outlives the stream. Each
call has its own stream and iterator, so any number of threads may request at once; one
iterator is meant for one thread at a time.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING

from nats_sync._core.components.reply_mux import (
    RequestHost,
    RequestMux,
    RequestPublisher,
    no_responders,
)
from nats_sync._core.threads.waiting import Sleepers, wait_until
from nats_sync._core.validate import check_int, check_timeout
from nats_sync.msg import Msg

if TYPE_CHECKING:
    from nats_sync._core.components.publishing import HeadersArg

#: ``sentinel(msg)``: True for the reply that ends the request (it is not yielded).
Sentinel = Callable[[Msg], bool]


class ReplyStream:
    """The mux entry of one request-many: it stays registered until :meth:`end`.

    Args:
        subject: where the request went (for errors and ``fail_subject``).
        mux: the client's request mux.
        reply: the reply subject registered in ``mux``.
    """

    __slots__ = ("_lock", "_mux", "_replies", "_reply", "_sleepers", "ended", "error", "subject")

    def __init__(self, subject: str, mux: RequestMux, reply: str) -> None:
        self.subject = subject
        self._mux = mux
        self._reply = reply
        self._lock = threading.Lock()
        self._sleepers = Sleepers()
        self._replies: deque[Msg] = deque()
        self.error: BaseException | None = None
        self.ended = False

    def resolve(self, msg: Msg) -> None:
        """Dispatching thread: queues one reply; registers again for the next one."""
        if self.ended:
            return
        self._mux.add(self._reply, self)
        if self.is_ended():  # ended meanwhile: its cancel may have come before the add
            self._mux.cancel(self._reply)
            return
        with self._lock:
            self._replies.append(msg)
            self._sleepers.wake_all()

    def fail(self, error: BaseException) -> None:
        """Ends the request with ``error`` (the client closed, a permission refused)."""
        with self._lock:
            self.error = error
            self._sleepers.wake_all()

    def is_ended(self) -> bool:
        """Whether :meth:`end` was called (read again after registering)."""
        return self.ended

    def end(self) -> None:
        """Takes the request out of the mux; replies after this are dropped."""
        self.ended = True
        self._mux.cancel(self._reply)

    def next_reply(self, deadline: float) -> Msg | BaseException | None:
        """Caller's thread: the next reply queued, the error, or None at ``deadline``."""
        return wait_until(self._lock, self._sleepers, self._ready, deadline)

    def _ready(self) -> Msg | BaseException | None:
        if self._replies:
            return self._replies.popleft()
        return self.error


class ReplyIterator(Iterator[Msg]):
    """The replies of :meth:`nats_sync.Client.request_many`, as they come.

    Also a context manager; :meth:`close` (or leaving the ``with``) ends the request.
    """

    def __init__(
        self,
        stream: ReplyStream,
        deadline: float,
        max_messages: int | None,
        stall: float | None,
        sentinel: Sentinel | None,
    ) -> None:
        self._stream = stream
        self._deadline = deadline
        self._max_messages = max_messages
        self._stall = stall
        self._sentinel = sentinel
        self._received = 0
        self._done = False

    def __iter__(self) -> ReplyIterator:
        return self

    def __next__(self) -> Msg:
        if self._done:
            raise StopIteration
        try:
            deadline = self._deadline
            if self._received and self._stall is not None:
                deadline = min(deadline, time.monotonic() + self._stall)
            reply = self._stream.next_reply(deadline)
            if reply is None:  # total timeout, or the stall gap
                raise StopIteration
            if isinstance(reply, BaseException):
                raise reply
            if reply.is_no_responders:
                raise no_responders(self._stream.subject)
            if self._sentinel is not None and self._sentinel(reply):
                raise StopIteration
        except BaseException:
            self.close()  # also when the sentinel raised, or on Ctrl-C
            raise
        self._received += 1
        if self._max_messages is not None and self._received >= self._max_messages:
            self.close()  # freed now, not at the next call
        return reply

    def close(self) -> None:
        """Ends the request (nothing more is yielded). Idempotent."""
        self._done = True
        self._stream.end()

    def __enter__(self) -> ReplyIterator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # Dropped without being finished (a ``break`` out of ``for``): the mux entry goes.
        stream = getattr(self, "_stream", None)
        if stream is not None and not stream.ended:
            stream.end()


def check_request_many(
    timeout: float, max_messages: int | None, stall: float | None, sentinel: Sentinel | None
) -> None:
    """Checks request_many's limits.

    Raises:
        InvalidArgumentError: ``timeout`` or ``stall`` is not a number of seconds > 0,
            or ``max_messages`` is not an int >= 1.
        TypeError: ``sentinel`` is not callable.
    """
    check_timeout(timeout)
    if max_messages is not None:
        check_int(max_messages, "max_messages", 1)
    if stall is not None:
        check_timeout(stall, "stall")
    if sentinel is not None and not callable(sentinel):
        raise TypeError(f"sentinel must be callable (msg -> bool), got {sentinel!r}")


def start_request_many(
    mux: RequestMux,
    host: RequestHost,
    publisher: RequestPublisher,
    subject: str,
    payload: bytes,
    headers: HeadersArg,
    timeout: float,
    max_messages: int | None,
    stall: float | None,
    sentinel: Sentinel | None,
) -> ReplyIterator:
    """Registers the request in ``mux``, publishes it, and returns its replies.

    The arguments are checked (:func:`check_request_many`) and ``mux`` subscribed by
    the caller. Raises as ``publish`` does (nothing is left registered then).
    """
    reply = mux.new_reply()
    stream = ReplyStream(subject, mux, reply)
    try:
        mux.add(reply, stream)
        host.wake_reader()  # the replies come unasked: a parked reader must read them
        publisher.publish_request(subject, payload, reply.encode(), headers, True)
        deadline = time.monotonic() + timeout
    except BaseException:
        stream.end()
        raise
    return ReplyIterator(stream, deadline, max_messages, stall, sentinel)
