"""Request-reply: the shared inbox, blocking, future, batch and many-reply requests.

How it works: the :class:`Requester` runs on the threads that make requests. The first
request makes the :class:`RequestMux` and asks the handler to subscribe its wildcard
inbox ``<inbox_prefix>.<nuid>.*`` (``RequestHost.open_request_inbox``); the handler
routes replies on it to the mux on the reader thread. Each request registers a waiter
in the mux under a fresh token and publishes with that reply subject through the
publisher. Blocking requests wait on their waiter in the caller's thread (or read their
own reply, ``RequestHost.read_own_reply``); ``request_future`` deadlines are scheduled
on the timer thread. Nothing here starts a thread.

State: ``_mux`` is the mux the handler keeps (it subscribes one inbox, once, under its
own lock, and returns that mux to every caller), so two first requests racing here end
with the same mux; the mux is thread-safe by itself (see ``_core.components.reply_mux``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import cast

from nats_sync import _defaults as d
from nats_sync._core import proto
from nats_sync._core.components.publishing import HeadersArg
from nats_sync._core.components.reply_mux import (
    BatchSlot,
    BatchWait,
    InboxRoute,
    ReplyFuture,
    ReplyWaiter,
    RequestHost,
    RequestMux,
    RequestPublisher,
    no_responders,
)
from nats_sync._core.components.request_many import (
    ReplyIterator,
    Sentinel,
    check_request_many,
    start_request_many,
)
from nats_sync._core.nuid import Nuid
from nats_sync._core.threads.timer import Timer
from nats_sync._core.transport.greenlets import threads_are_greenlets
from nats_sync._core.validate import check_int, check_timeout
from nats_sync.errors import Error, TimeoutError
from nats_sync.msg import Msg

_LARGE_PAYLOAD = d.LARGE_PAYLOAD_THRESHOLD


class Requester:
    """Blocking, future and batch requests over one shared inbox subscription.

    Args:
        host: the handler's side (see :class:`RequestHost`).
        publisher: where requests are published.
        timer: runs ``request_future`` deadlines.
        run_callback: runs a future's done-callbacks on the callback thread.
        inbox_prefix: the option of that name.
    """

    def __init__(
        self,
        host: RequestHost,
        publisher: RequestPublisher,
        timer: Timer,
        run_callback: Callable[..., None],
        inbox_prefix: str,
    ) -> None:
        self._host = host
        self._publisher = publisher
        self._timer = timer
        self._run_callback = run_callback
        self._inbox_prefix = inbox_prefix
        self._nuid = Nuid()
        self._mux: RequestMux | None = None
        #: Greenlets: a request is written by its caller only when it is the only one
        #: in flight; else the writer sends all the callers' requests at once.
        self._greenlets = threads_are_greenlets()

    def new_inbox(self) -> str:
        """A unique subject under the inbox prefix."""
        return f"{self._inbox_prefix}.{self._nuid.next()}"

    def _request_mux(self) -> RequestMux:
        mux = self._mux
        if mux is None:
            # open_request_inbox checks the client can start a request (and only the
            # first mux offered wins there).
            mux = self._mux = self._host.open_request_inbox(RequestMux(self.new_inbox() + "."))
        else:
            self._host.check_can_start()
        return mux

    def inbox_route(self) -> InboxRoute:
        """The shared inbox (subscribed if it was not) and the callback runner, for
        waiters registered by other components.

        Raises:
            ConnectionClosedError: the client is closed (or draining, forked).
        """
        return InboxRoute(self._request_mux(), self._run_callback)

    def request(self, subject: str, payload: bytes, timeout: float, headers: HeadersArg) -> Msg:
        """Publishes with a reply subject and waits for the first reply."""
        check_timeout(timeout)
        mux = self._request_mux()
        waiter = ReplyWaiter(subject)
        reply = mux.new_reply()
        try:
            mux.add(reply, waiter)
            direct = not self._greenlets or mux.in_flight() <= 1
            self._publisher.publish_request(subject, payload, reply.encode(), headers, direct)
            # Read the reply on this thread if the reader stepped aside (one wake-up);
            # whatever is left of the timeout is then waited for as usual.
            deadline = time.monotonic() + timeout
            self._host.read_own_reply(waiter.is_done, deadline)
            remaining = max(deadline - time.monotonic(), 0.0)
            return self._await_reply(mux, waiter, reply, subject, remaining, timeout)
        except BaseException:
            # Failed, timed out or interrupted (Ctrl-C) anywhere above: forgotten, so
            # no waiter stays in the mux (which would keep the reader from parking).
            mux.cancel(reply)
            raise

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
        check_timeout(timeout)
        mux = self._request_mux()
        future = ReplyFuture(subject, self._run_callback)
        reply = mux.new_reply()
        try:
            mux.add(reply, future)
            self._host.wake_reader()  # nobody waits on this thread: the reader must read it
            direct = not self._greenlets or mux.in_flight() <= 1
            self._publisher.publish_request(subject, payload, reply.encode(), headers, direct)
            self._timer.schedule(time.monotonic() + timeout, lambda: _expire(mux, reply))
        except BaseException:
            # Also when interrupted before its deadline was scheduled: nothing would
            # ever expire it.
            mux.cancel(reply)
            raise
        return future

    def request_many(
        self,
        subject: str,
        payload: bytes,
        headers: HeadersArg,
        timeout: float,
        max_messages: int | None,
        stall: float | None,
        sentinel: Sentinel | None,
    ) -> ReplyIterator:
        """Publishes one request and returns an iterator of its replies (see
        ``_core.components.request_many``)."""
        check_request_many(timeout, max_messages, stall, sentinel)
        return start_request_many(
            self._request_mux(),
            self._host,
            self._publisher,
            subject,
            payload,
            headers,
            timeout,
            max_messages,
            stall,
            sentinel,
        )

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
        once and queued up to ``REQUEST_BATCH_CHUNK`` (``_defaults``) at a time; the rest go through
        ``publish``. All share one :class:`BatchWait`.
        """
        check_timeout(timeout)
        check_int(max_in_flight, "max_in_flight", 1)
        mux = self._request_mux()
        batch = BatchWait()
        results: list[Msg | BaseException | None] = []
        in_flight: list[tuple[BatchSlot, str, float] | None] = []
        next_to_wait = 0
        chunk_limit = d.REQUEST_BATCH_CHUNK
        try:
            prefix: bytes | None = proto.pub_prefix(subject, self._publisher.strict_subjects)
        except Error:
            prefix = None  # each item gets publish's error
        largest = min(self._publisher.max_payload, _LARGE_PAYLOAD - 1)
        chunk: list[bytes] = []
        chunk_items: list[int] = []
        chunk_bytes = 0
        chunk_payload = 0

        def queue_chunk() -> None:
            nonlocal chunk, chunk_items, chunk_bytes, chunk_payload
            if not chunk:
                return
            try:
                self._publisher.queue_messages(chunk, chunk_bytes, chunk_payload)
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

        # Every reply subject handed out, for an interrupted batch (Ctrl-C) to forget
        # whatever it left in the mux.
        registered: list[str] = []
        try:
            for payload in payloads:
                if len(in_flight) - next_to_wait >= max_in_flight:
                    queue_chunk()
                    settle(next_to_wait)
                    next_to_wait += 1
                slot = BatchSlot(subject, batch)
                reply = mux.new_reply()
                registered.append(reply)  # first: an interrupted add is still cancelled
                mux.add(reply, slot)
                if not results:
                    self._host.wake_reader()  # registered first: a parked reader now stays awake
                results.append(None)
                if (
                    prefix is not None
                    and headers is None
                    and type(payload) is bytes
                    and len(payload) <= largest
                ):
                    chunk.append(
                        proto.pub_line(prefix, reply.encode(), len(payload)) + payload + proto.CRLF
                    )
                    chunk_items.append(len(in_flight))
                    chunk_bytes += len(chunk[-1])
                    chunk_payload += len(payload)
                    in_flight.append((slot, reply, time.monotonic() + timeout))
                    if len(chunk) >= chunk_limit:
                        queue_chunk()
                    continue
                queue_chunk()  # keeps the order on the wire
                try:
                    self._publisher.publish_request(
                        subject, payload, reply.encode(), headers, False
                    )
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
        except BaseException:
            for reply in registered:
                mux.cancel(reply)
            raise
        return cast(list[Msg | BaseException], results)  # every slot was settled above


def _expire(mux: RequestMux, reply: str) -> None:
    """Timer thread: fails a ``request_future`` still waiting at its deadline."""
    waiter = mux.cancel(reply)
    if waiter is not None:
        waiter.fail(TimeoutError(f"no reply to request {reply!r} in time"))
