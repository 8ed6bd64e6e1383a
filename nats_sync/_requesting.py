"""Request-reply for the handler: the shared inbox, blocking, future and batch requests.

How it works: a mixin of ``Handler`` (its state is the handler's). The first request
subscribes ``<inbox_prefix>.<nuid>.*`` once; each request registers a waiter in the
``RequestMux`` under a fresh token and publishes with that reply subject. Blocking
requests wait on their waiter in the caller's thread; ``request_future`` deadlines go
to the handler's timer thread, which calls :meth:`RequestsMixin._expire`; the reader
thread completes waiters as replies arrive. Nothing here starts a thread.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from nats_sync._connection import Connection

from nats_sync import _defaults as d
from nats_sync import _proto as proto
from nats_sync._nuid import Nuid
from nats_sync._options import Options
from nats_sync._outbox import Outbox
from nats_sync._publishing import HeadersArg
from nats_sync._requests import (
    BatchSlot,
    BatchWait,
    ReplyFuture,
    ReplyWaiter,
    RequestMux,
    no_responders,
)
from nats_sync._state import State
from nats_sync.errors import Error, TimeoutError
from nats_sync.msg import Msg

#: Plain batch requests are queued this many at a time (one lock, one writer wake-up).
_BATCH_CHUNK = 64
_LARGE_PAYLOAD = d.LARGE_PAYLOAD_THRESHOLD


class RequestsMixin:
    """Request-reply; mixed into ``Handler``, whose attributes these are."""

    options: Options
    state: State
    outbox: Outbox
    max_payload: int
    _lock: threading.Lock
    _mux: RequestMux | None
    _mux_sid: int
    _conn: Connection | None
    _nuid: Nuid
    _timer: threading.Condition
    _deadlines: list[tuple[float, int, str]]
    _deadline_seq: itertools.count[int]

    if TYPE_CHECKING:

        def _check_can_start(self) -> None: ...
        def _check_can_publish(self) -> None: ...
        def _wake_reader(self) -> None: ...
        def next_sid(self) -> int: ...
        def _put_control(self, frame: bytes) -> None: ...
        def run_callback(self, fn: Callable[..., Any], *args: Any) -> None: ...
        def publish_request(
            self,
            subject: str,
            payload: bytes,
            inbox: bytes,
            headers: HeadersArg,
            direct: bool,
        ) -> None: ...

    def _request_mux(self) -> RequestMux:
        if self.state is not State.CONNECTED:
            self._check_can_start()
        mux = self._mux
        if mux is not None:
            return mux
        with self._lock:
            self._check_can_start()
            if self._mux is None:
                mux = RequestMux(f"{self.options.inbox_prefix}.{self._nuid.next()}.")
                sid = self.next_sid()
                self._put_control(proto.encode_sub(mux.subject, sid))
                self._mux_sid = sid
                self._mux = mux
            return self._mux

    def request(
        self, subject: str, payload: bytes, timeout: float, headers: HeadersArg
    ) -> Msg:
        """Publishes with a reply subject and waits for the first reply."""
        _check_timeout(timeout)
        mux = self._request_mux()
        waiter = ReplyWaiter(subject)
        reply = mux.register(waiter)
        try:
            self.publish_request(subject, payload, reply.encode(), headers, True)
        except BaseException:
            mux.cancel(reply)
            raise
        conn = self._conn
        remaining = timeout
        if conn is not None and conn.can_lead:
            # Read the reply on this thread if the reader stepped aside (one wake-up);
            # whatever is left of the timeout is then waited for as usual.
            deadline = time.monotonic() + timeout
            conn.lead(waiter.is_done, deadline)
            remaining = max(deadline - time.monotonic(), 0.0)
        return self._await_reply(mux, waiter, reply, subject, remaining, timeout)

    def _await_reply(
        self,
        mux: RequestMux,
        waiter: ReplyWaiter | BatchSlot,
        reply: str,
        subject: str,
        timeout: float,
        requested: float,
    ) -> Msg:
        """Waits ``timeout`` (what is left of the ``requested`` timeout) for the reply."""
        if not waiter.wait(timeout):
            if mux.cancel(reply) is not None:
                raise TimeoutError(f"no reply on {subject!r} within {requested}s")
            waiter.wait(None)  # the reader took it a moment ago and is completing it
        if waiter.error is not None:
            raise waiter.error
        msg = waiter.msg
        assert msg is not None
        if msg.is_no_responders:
            raise no_responders(subject)
        return msg

    def request_future(
        self, subject: str, payload: bytes, timeout: float, headers: HeadersArg
    ) -> ReplyFuture:
        """Publishes a request and returns a future of its reply."""
        _check_timeout(timeout)
        mux = self._request_mux()
        future = ReplyFuture(subject, self.run_callback)
        reply = mux.register(future)
        self._wake_reader()  # nobody waits on this thread: the reader must read it
        try:
            self.publish_request(subject, payload, reply.encode(), headers, True)
        except BaseException:
            mux.cancel(reply)
            raise
        with self._timer:
            heapq.heappush(self._deadlines,
                           (time.monotonic() + timeout, next(self._deadline_seq), reply))
            self._timer.notify()
        return future

    def request_batch(
        self,
        subject: str,
        payloads: Sequence[bytes],
        timeout: float,
        headers: HeadersArg,
        max_in_flight: int,
    ) -> list[Msg | BaseException]:
        """Pipelines requests, at most ``max_in_flight`` unanswered at once.

        Plain requests (bytes, no headers) are encoded here against the subject checked
        once and queued up to ``_BATCH_CHUNK`` at a time; the rest go through
        ``publish``. All share one :class:`BatchWait`.
        """
        _check_timeout(timeout)
        if not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ValueError(f"max_in_flight must be an int >= 1, got {max_in_flight!r}")
        mux = self._request_mux()
        batch = BatchWait()
        results: list[Msg | BaseException | None] = []
        in_flight: list[tuple[BatchSlot, str, float] | None] = []
        next_to_wait = 0
        try:
            prefix: bytes | None = proto.pub_prefix(subject)
        except Error:
            prefix = None  # each item gets publish's error
        largest = min(self.max_payload, _LARGE_PAYLOAD - 1)
        chunk: list[bytes] = []
        chunk_items: list[int] = []
        chunk_bytes = 0
        chunk_payload = 0

        def queue_chunk() -> None:
            nonlocal chunk, chunk_items, chunk_bytes, chunk_payload
            if not chunk:
                return
            try:
                if self.state is not State.CONNECTED:
                    self._check_can_publish()
                self.outbox.put_messages(chunk, chunk_bytes, chunk_payload)
            except Error as err:  # closed, draining, buffer full: those items' result
                for index in chunk_items:
                    entry = in_flight[index]
                    assert entry is not None
                    mux.cancel(entry[1])
                    in_flight[index] = None
                    results[index] = err
            chunk, chunk_items, chunk_bytes, chunk_payload = [], [], 0, 0

        def settle(index: int) -> None:
            entry = in_flight[index]
            in_flight[index] = None
            if entry is None:
                return
            slot, reply, deadline = entry
            try:
                results[index] = self._await_reply(
                    mux, slot, reply, subject, deadline - time.monotonic(), timeout
                )
            except Error as err:
                results[index] = err

        for payload in payloads:
            if len(in_flight) - next_to_wait >= max_in_flight:
                queue_chunk()
                settle(next_to_wait)
                next_to_wait += 1
            slot = BatchSlot(subject, batch)
            reply = mux.register(slot)
            if not results:
                self._wake_reader()  # registered first: a parked reader now stays awake
            results.append(None)
            if (prefix is not None and headers is None and type(payload) is bytes
                    and len(payload) <= largest):
                chunk.append(b"%b%b %d\r\n%b\r\n" % (prefix, reply.encode(), len(payload),
                                                       payload))
                chunk_items.append(len(in_flight))
                chunk_bytes += len(chunk[-1])
                chunk_payload += len(payload)
                in_flight.append((slot, reply, time.monotonic() + timeout))
                if len(chunk) >= _BATCH_CHUNK:
                    queue_chunk()
                continue
            queue_chunk()  # keeps the order on the wire
            try:
                self.publish_request(subject, payload, reply.encode(), headers, False)
            except (Error, TypeError, ValueError) as err:
                # One bad item (wrong type, too big, ...) is that item's result.
                mux.cancel(reply)
                results[-1] = err
                in_flight.append(None)
                continue
            in_flight.append((slot, reply, time.monotonic() + timeout))
        queue_chunk()
        for index in range(next_to_wait, len(in_flight)):
            settle(index)
        return cast(list[Msg | BaseException], results)  # every slot was settled above

    def _expire(self, replies: list[str]) -> None:
        mux = self._mux
        if mux is None:
            return
        for reply in replies:
            waiter = mux.cancel(reply)
            if waiter is not None:
                waiter.fail(TimeoutError(f"no reply to request {reply!r} in time"))


def _check_timeout(timeout: float) -> None:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"timeout must be a number > 0, got {timeout!r}")
