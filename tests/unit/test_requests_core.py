"""The request multiplexer and its waiters on their own: no server, replies made by hand.

The reader thread's part is `RequestMux.resolve(msg)`; here a test (or a helper thread)
plays it.
"""

from __future__ import annotations

import queue
import random
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from typing import Any

import pytest

from nats_sync._core.components.reply_mux import (
    BatchSlot,
    BatchWait,
    ReplyFuture,
    ReplyWaiter,
    RequestMux,
)
from nats_sync.errors import ConnectionClosedError, NoRespondersError
from nats_sync.msg import Msg

PREFIX = "_INBOX.abcdef."
#: Bound on every wait for another thread.
STEP_TIMEOUT = 5.0


def reply_to(reply_subject: str, data: bytes = b"ok") -> Msg:
    """The reply the server delivers on ``reply_subject``."""
    return Msg(reply_subject, data=data)


def no_responders_status(reply_subject: str) -> Msg:
    """The server's 503 status for a request nobody listened to."""
    return Msg(reply_subject, status=503)


class DeferredCallbacks:
    """Stands in for the client's callback thread: collects calls, runs them on demand."""

    def __init__(self) -> None:
        self.calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []

    def __call__(self, fn: Callable[..., Any], *args: Any) -> None:
        self.calls.append((fn, args))

    def run_all(self) -> None:
        calls, self.calls = self.calls, []
        for fn, args in calls:
            fn(*args)


def new_future(subject: str) -> ReplyFuture:
    return ReplyFuture(subject, DeferredCallbacks())


# --- tokens and routing ---------------------------------------------------------------


def test_reply_subjects_are_unique_and_under_the_wildcard_prefix() -> None:
    mux = RequestMux(PREFIX)
    subjects = [mux.register(ReplyWaiter("svc")) for _ in range(1000)]
    assert len(set(subjects)) == 1000
    assert mux.subject == PREFIX + "*"
    for subject in subjects:
        token = subject.removeprefix(PREFIX)
        assert subject.startswith(PREFIX) and token and "." not in token
        assert subject in mux
    assert len(mux) == 1000


def test_registering_from_many_threads_gives_unique_reply_subjects() -> None:
    mux = RequestMux(PREFIX)
    threads_count, per_thread = 8, 500
    start = threading.Barrier(threads_count)
    subjects: list[list[str]] = [[] for _ in range(threads_count)]

    def register_many(index: int) -> None:
        start.wait(STEP_TIMEOUT)
        subjects[index] = [mux.register(ReplyWaiter("svc")) for _ in range(per_thread)]

    threads = [threading.Thread(target=register_many, args=(i,)) for i in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(STEP_TIMEOUT)
    every = [subject for chunk in subjects for subject in chunk]
    assert len(every) == threads_count * per_thread
    assert len(set(every)) == len(every)
    assert len(mux) == len(every)


def test_a_reply_completes_only_the_request_its_subject_names() -> None:
    mux = RequestMux(PREFIX)
    first, second = ReplyWaiter("svc"), ReplyWaiter("svc")
    first_reply, second_reply = mux.register(first), mux.register(second)
    reply = reply_to(second_reply)
    mux.resolve(reply)
    assert second.wait(0) and second.msg is reply and second.error is None
    assert not first.is_done()
    assert first_reply in mux and second_reply not in mux
    assert mux.late_replies == 0


def test_a_reply_nobody_waits_for_is_counted_and_dropped() -> None:
    mux = RequestMux(PREFIX)
    waiter = ReplyWaiter("svc")
    reply_subject = mux.register(waiter)
    mux.resolve(reply_to(PREFIX + "ffffff"))  # never registered
    mux.resolve(reply_to(reply_subject))
    mux.resolve(reply_to(reply_subject))  # a second reply (two responders): too late
    assert mux.late_replies == 2
    assert waiter.is_done()
    assert len(mux) == 0


def test_a_cancelled_request_is_forgotten_and_its_late_reply_dropped() -> None:
    mux = RequestMux(PREFIX)
    waiter = ReplyWaiter("svc")
    reply_subject = mux.register(waiter)
    assert mux.cancel(reply_subject) is waiter
    assert reply_subject not in mux and len(mux) == 0
    assert mux.cancel(reply_subject) is None  # already gone: nothing to give back
    mux.resolve(reply_to(reply_subject))
    assert mux.late_replies == 1
    assert not waiter.is_done()


def test_a_reply_waiter_times_out_without_a_reply() -> None:
    waiter = ReplyWaiter("svc")
    assert waiter.wait(0.01) is False
    assert waiter.wait(-1.0) is False  # a deadline already passed is not an error
    assert not waiter.is_done()


def test_a_reply_racing_a_timeout_completes_the_request_exactly_once() -> None:
    # The requester cancels on timeout while the reader resolves: whoever pops the token
    # wins, and the other side must see that.
    mux = RequestMux(PREFIX)
    rounds = 300
    start = threading.Barrier(2)
    pairs = [
        (waiter, mux.register(waiter)) for waiter in (ReplyWaiter("svc") for _ in range(rounds))
    ]
    cancelled: list[bool] = []

    def reader() -> None:
        start.wait(STEP_TIMEOUT)
        for _, reply_subject in pairs:
            mux.resolve(reply_to(reply_subject))

    thread = threading.Thread(target=reader)
    thread.start()
    start.wait(STEP_TIMEOUT)
    for _, reply_subject in pairs:
        cancelled.append(mux.cancel(reply_subject) is not None)
    thread.join(STEP_TIMEOUT)
    for (waiter, _), was_cancelled in zip(pairs, cancelled, strict=True):
        assert waiter.is_done() is not was_cancelled
    assert mux.late_replies == sum(cancelled)
    assert len(mux) == 0


# --- no responders --------------------------------------------------------------------


def test_a_no_responders_status_fails_a_future_with_no_responders_error() -> None:
    mux = RequestMux(PREFIX)
    future = new_future("svc.missing")
    mux.resolve(no_responders_status(mux.register(future)))
    with pytest.raises(NoRespondersError, match=r"svc\.missing"):
        future.result(timeout=0)


def test_a_503_with_a_payload_is_an_ordinary_reply() -> None:
    mux = RequestMux(PREFIX)
    future = new_future("svc")
    reply = Msg(mux.register(future), data=b"busy", status=503)
    mux.resolve(reply)
    assert future.result(timeout=0) is reply


def test_a_blocking_waiter_gets_the_no_responders_status_as_its_reply() -> None:
    # The requester's thread turns it into NoRespondersError (the client's request
    # path); the mux hands it over untouched, as the waiter's msg, not as an error.
    mux = RequestMux(PREFIX)
    waiter = ReplyWaiter("svc")
    status = no_responders_status(mux.register(waiter))
    mux.resolve(status)
    assert waiter.wait(0)
    assert waiter.msg is status and waiter.msg.is_no_responders
    assert waiter.error is None


# --- failing requests -----------------------------------------------------------------


def test_fail_subject_fails_only_the_requests_sent_to_that_subject() -> None:
    mux = RequestMux(PREFIX)
    batch = BatchWait()
    waiter, future, slot = ReplyWaiter("svc.a"), new_future("svc.a"), BatchSlot("svc.a", batch)
    # Same prefix, longer and shorter subjects: only an exact match is refused.
    other_waiter, other_future = ReplyWaiter("svc.ab"), new_future("svc")
    refused_subjects = [mux.register(w) for w in (waiter, future, slot)]
    kept_subjects = [mux.register(w) for w in (other_waiter, other_future)]
    error = ConnectionClosedError("permissions violation for publish to svc.a")

    assert mux.fail_subject("svc.a", error) == 3

    assert waiter.wait(0) and waiter.error is error
    assert future.exception(timeout=0) is error
    assert slot.wait(0) and slot.error is error
    assert all(subject not in mux for subject in refused_subjects)
    assert all(subject in mux for subject in kept_subjects)
    assert not other_waiter.is_done() and not other_future.done()
    assert mux.fail_subject("svc.a", error) == 0
    for subject in kept_subjects:
        mux.resolve(reply_to(subject))
    assert other_waiter.wait(0) and other_waiter.error is None
    assert other_future.result(timeout=0).subject == kept_subjects[1]


def test_fail_all_fails_every_request_in_flight() -> None:
    mux = RequestMux(PREFIX)
    batch = BatchWait()
    waiter, future, slot = ReplyWaiter("a"), new_future("b"), BatchSlot("c", batch)
    subjects = [mux.register(w) for w in (waiter, future, slot)]
    closed = ConnectionClosedError("the client is closed")
    mux.fail_all(closed)
    assert len(mux) == 0
    assert waiter.wait(0) and waiter.error is closed
    assert future.exception(timeout=0) is closed
    assert slot.wait(0) and slot.error is closed
    mux.resolve(reply_to(subjects[0]))  # a reply arriving after: dropped, counted
    assert mux.late_replies == 1
    mux.fail_all(closed)  # nothing left: no error


# --- futures --------------------------------------------------------------------------


def test_a_future_cancelled_by_the_user_ignores_its_reply_and_errors() -> None:
    mux = RequestMux(PREFIX)
    future = new_future("svc")
    reply_subject = mux.register(future)
    assert future.cancel()
    mux.resolve(reply_to(reply_subject))  # must not raise on the reader thread
    future.fail(ConnectionClosedError("closed"))
    with pytest.raises(CancelledError):
        future.result(timeout=0)


def test_done_callbacks_run_through_the_callback_runner_not_the_resolving_thread() -> None:
    callbacks = DeferredCallbacks()
    future = ReplyFuture("svc", callbacks)
    seen: list[Future[Msg]] = []
    future.add_done_callback(seen.append)
    reply = reply_to(PREFIX + "1")
    future.resolve(reply)
    assert seen == []  # handed to the callback thread, not run by the reader
    callbacks.run_all()
    assert seen == [future]
    future.add_done_callback(seen.append)  # already done: still through the runner
    assert seen == [future]
    callbacks.run_all()
    assert seen == [future, future]


# --- batches --------------------------------------------------------------------------


def test_batch_slots_completed_before_their_wait_return_at_once() -> None:
    batch = BatchWait()
    slots = [BatchSlot("svc", batch) for _ in range(3)]
    replies = [reply_to(f"{PREFIX}{i}") for i in range(3)]
    for slot, reply in zip(slots, replies, strict=True):
        slot.resolve(reply)  # nobody waits yet: no wake-up needed
    assert batch.waiting is None
    assert [slot.wait(0) for slot in slots] == [True, True, True]
    assert [slot.msg for slot in slots] == replies


def test_a_batch_wait_times_out_and_stops_waiting() -> None:
    batch = BatchWait()
    slot = BatchSlot("svc", batch)
    assert slot.wait(0.01) is False
    assert batch.waiting is None  # a later completion wakes nobody
    slot.fail(ConnectionClosedError("closed"))
    assert slot.wait(0)


def test_a_batch_awaits_its_slots_in_order_while_replies_arrive_in_any_order() -> None:
    mux = RequestMux(PREFIX)
    batch = BatchWait()
    count = 50
    slots = [BatchSlot("svc", batch) for _ in range(count)]
    subjects = [mux.register(slot) for slot in slots]
    arrival = list(range(count))
    random.Random(7).shuffle(arrival)
    payloads = {subject: subject.encode() for subject in subjects}

    def reader() -> None:
        for index in arrival:
            mux.resolve(reply_to(subjects[index], payloads[subjects[index]]))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for slot, subject in zip(slots, subjects, strict=True):
            assert slot.wait(STEP_TIMEOUT), f"no reply for {subject}"
            assert slot.msg is not None and slot.msg.data == payloads[subject]
    finally:
        thread.join(STEP_TIMEOUT)
    assert len(mux) == 0 and mux.late_replies == 0


# --- many requesters ------------------------------------------------------------------


def test_concurrent_requesters_each_get_exactly_their_own_reply() -> None:
    mux = RequestMux(PREFIX)
    requesters = 16
    sent: queue.Queue[str] = queue.Queue()
    received: dict[int, bytes] = {}
    failures: list[str] = []

    def requester(index: int) -> None:
        waiter = ReplyWaiter(f"svc.{index}")
        reply_subject = mux.register(waiter)
        sent.put(reply_subject)  # "publishes" the request
        if not waiter.wait(STEP_TIMEOUT) or waiter.msg is None:
            failures.append(f"requester {index} got no reply")
            return
        received[index] = waiter.msg.data
        if waiter.msg.data != b"for " + reply_subject.encode():
            failures.append(f"requester {index} ({reply_subject}) got {waiter.msg.data!r}")

    def responder() -> None:
        # Answers in a scrambled order, each reply naming its request's subject.
        pending: list[str] = []
        rng = random.Random(3)
        for _ in range(requesters):
            pending.append(sent.get(timeout=STEP_TIMEOUT))
            if len(pending) >= 4 or rng.random() < 0.3:
                rng.shuffle(pending)
                while pending:
                    subject = pending.pop()
                    mux.resolve(reply_to(subject, b"for " + subject.encode()))
        for subject in pending:
            mux.resolve(reply_to(subject, b"for " + subject.encode()))

    threads = [threading.Thread(target=requester, args=(i,)) for i in range(requesters)]
    answering = threading.Thread(target=responder)
    answering.start()
    for thread in threads:
        thread.start()
    for thread in [*threads, answering]:
        thread.join(STEP_TIMEOUT)
    assert not failures
    assert len(received) == requesters
    assert len(set(received.values())) == requesters  # nobody got someone else's
    assert len(mux) == 0 and mux.late_replies == 0
