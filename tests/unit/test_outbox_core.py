"""The outbox on its own: bounds, control frames, PONG waiters, reconnects, the writer's side.

No socket: the writer thread's side is `Outbox.take` (what ``Connection.run_writer``
calls in its loop), run on a helper thread where a test needs it to block.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from nats_sync._core.proto import PING
from nats_sync._core.threads.connection import _unsent_messages
from nats_sync._core.threads.outbox import (
    ControlFrame,
    Frame,
    Outbox,
    Remainder,
    frame_size,
    remainder,
)
from nats_sync.errors import ConnectionClosedError, OutboundBufferLimitError

#: Long enough that a test finishing well inside it proves nobody waited it out.
LONG_WAIT = 30.0
#: Bound on every wait for another thread.
STEP_TIMEOUT = 5.0

SUB = b"SUB a 1\r\n"
PONG = b"PONG\r\n"


def pub(subject: str, payload: bytes) -> bytes:
    """A PUB frame for ``payload``."""
    return b"PUB %s %d\r\n%s\r\n" % (subject.encode(), len(payload), payload)


def large_pub(subject: str, payload: bytes) -> list[bytes]:
    """A large-payload frame as the publisher queues it: never joined."""
    return [b"PUB %s %d\r\n" % (subject.encode(), len(payload)), payload, b"\r\n"]


def put(outbox: Outbox, *frames: Frame) -> None:
    """Queues messages with their real wire and payload sizes."""
    size = sum(frame_size(frame) for frame in frames)
    outbox.put_messages(list(frames), size, size)


def new_outbox(
    limit: int = 1024, full_wait: float = LONG_WAIT, *, connected: bool = True
) -> Outbox:
    outbox = Outbox(limit=limit, full_wait=full_wait)
    outbox.set_connected(connected)
    return outbox


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Polls another thread's visible state (the outbox exposes no event for "a thread
    is now blocked inside me"); bounded."""
    deadline = time.monotonic() + STEP_TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.001)


class InThread:
    """Runs ``fn`` on a thread and keeps its result or exception."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._fn = fn
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.result = self._fn()
        except BaseException as error:  # handed to the test
            self.error = error
        finally:
            self.done.set()

    def outcome(self) -> Any:
        """The result, once the thread has finished (bounded); re-raises its error."""
        assert self.done.wait(STEP_TIMEOUT), "the thread did not finish"
        self.thread.join(STEP_TIMEOUT)
        if self.error is not None:
            raise self.error
        return self.result


@contextmanager
def writer_waiting_in_take(outbox: Outbox) -> Iterator[InThread]:
    """A writer thread blocked in ``take()``; stopped (bounded) at the end."""
    writer = InThread(outbox.take)
    wait_until(lambda: outbox.writer_waiting, "the writer waits in take()")
    try:
        yield writer
    finally:
        outbox.stop_writer(discard=True)
        writer.done.wait(STEP_TIMEOUT)


def publisher_blocked_for_room(outbox: Outbox, frame: bytes) -> InThread:
    """A publisher thread waiting in ``put_messages`` for room."""
    publisher = InThread(lambda: put(outbox, frame))
    wait_until(
        lambda: outbox.room_waiters == 1 or publisher.done.is_set(), "the publisher waits for room"
    )
    assert not publisher.done.is_set(), f"put_messages returned: {publisher.error!r}"
    return publisher


# --- bounds ---------------------------------------------------------------------------


def test_messages_are_queued_in_order_with_their_size_and_counters() -> None:
    outbox = new_outbox()
    first, second = pub("a", b"hello"), large_pub("b", b"x" * 100)
    outbox.put_messages([first, second], frame_size(first) + frame_size(second), 105)
    outbox.put_messages([first], frame_size(first), 5)
    assert outbox.frames == [first, second, first]
    assert outbox.size == 2 * frame_size(first) + frame_size(second)
    assert (outbox.out_msgs, outbox.out_bytes) == (3, 110)


def test_control_frames_take_room_but_are_not_counted_as_messages() -> None:
    outbox = new_outbox()
    outbox.put_control(SUB)
    outbox.put_ping(None)
    outbox.put_control_first([b"UNSUB 1\r\n"])
    assert outbox.size == len(SUB) + len(PING) + len(b"UNSUB 1\r\n")
    assert (outbox.out_msgs, outbox.out_bytes) == (0, 0)
    assert all(type(frame) is ControlFrame for frame in outbox.frames)


def test_a_full_outbox_while_connected_refuses_after_full_wait() -> None:
    message = pub("a", b"0123456789")  # 22 bytes
    outbox = new_outbox(limit=30, full_wait=0.05)
    put(outbox, message)
    started = time.monotonic()
    with pytest.raises(OutboundBufferLimitError):
        put(outbox, message)
    waited = time.monotonic() - started
    assert 0.05 <= waited < STEP_TIMEOUT
    # The refused message left no trace.
    assert outbox.frames == [message]
    assert outbox.size == len(message)
    assert (outbox.out_msgs, outbox.out_bytes) == (1, len(message))
    assert outbox.room_waiters == 0


def test_a_message_larger_than_the_limit_goes_when_nothing_is_queued_while_connected() -> None:
    # Refusing it would make it impossible to ever publish; the writer takes it whole.
    big = pub("a", b"x" * 100)
    outbox = new_outbox(limit=10, full_wait=LONG_WAIT)
    put(outbox, big)
    assert outbox.frames == [big]


def test_a_full_outbox_while_disconnected_refuses_at_once() -> None:
    message = pub("a", b"0123456789")
    outbox = new_outbox(limit=30, full_wait=LONG_WAIT, connected=False)
    put(outbox, message)  # buffered for the next connection
    started = time.monotonic()
    with pytest.raises(OutboundBufferLimitError, match="disconnected"):
        put(outbox, message)
    assert time.monotonic() - started < 1.0
    assert outbox.frames == [message]


def test_while_disconnected_a_message_larger_than_the_limit_is_refused_even_when_empty() -> None:
    outbox = new_outbox(limit=10, connected=False)
    with pytest.raises(OutboundBufferLimitError):
        put(outbox, pub("a", b"x" * 100))
    assert outbox.frames == []
    assert outbox.size == 0


def test_pending_size_zero_refuses_every_message_while_disconnected() -> None:
    outbox = new_outbox(limit=0, connected=False)
    with pytest.raises(OutboundBufferLimitError):
        put(outbox, pub("a", b""))
    outbox.put_control(SUB)  # the connection still needs these
    outbox.put_ping(None)
    assert outbox.frames == [SUB, PING]
    assert outbox.out_msgs == 0


def test_control_frames_are_never_refused_by_a_full_outbox() -> None:
    outbox = new_outbox(limit=30, full_wait=0.01, connected=False)
    put(outbox, pub("a", b"0123456789"))
    with pytest.raises(OutboundBufferLimitError):
        put(outbox, pub("a", b"0123456789"))
    outbox.put_control(SUB)
    outbox.put_ping(None)
    outbox.put_control_first([b"SUB b 2\r\n"])
    assert outbox.size > outbox.limit
    assert outbox.frames == [b"SUB b 2\r\n", pub("a", b"0123456789"), SUB, PING]


# --- PONG waiters ---------------------------------------------------------------------


def waiter(log: list[str], name: str) -> Callable[[BaseException | None], None]:
    return lambda error: log.append(name)


def test_pong_waiters_line_up_in_the_order_of_their_pings() -> None:
    outbox = new_outbox()
    log: list[str] = []
    first, second = waiter(log, "first"), waiter(log, "second")
    outbox.put_ping(first)
    outbox.put_control(SUB)
    outbox.put_ping(None)  # a keepalive: its PONG has nobody to wake
    outbox.put_ping(second)
    assert outbox.frames == [PING, SUB, PING, PING]
    assert outbox.pop_pong_waiter() is first
    assert outbox.pop_pong_waiter() is None
    assert outbox.pop_pong_waiter() is second
    assert outbox.pop_pong_waiter() is None  # an unexpected PONG finds nobody
    assert log == []  # popping hands the waiter over; calling it is the handler's job


def test_take_pong_waiters_hands_over_every_waiter_once() -> None:
    outbox = new_outbox()
    log: list[str] = []
    first, second = waiter(log, "first"), waiter(log, "second")
    outbox.put_ping(first)
    outbox.put_ping(None)
    outbox.put_ping(second)
    assert outbox.take_pong_waiters() == [first, None, second]
    assert outbox.take_pong_waiters() == []
    assert outbox.pop_pong_waiter() is None


# --- across a reconnect ---------------------------------------------------------------


def test_keep_messages_only_drops_control_frames_and_repings_each_waiting_flush() -> None:
    outbox = new_outbox()
    log: list[str] = []
    flush_one, flush_two = waiter(log, "one"), waiter(log, "two")
    first, large, last = pub("a", b"1"), large_pub("b", b"x" * 64), pub("c", b"3")
    outbox.put_control(SUB)
    put(outbox, first)
    outbox.put_ping(None)
    put(outbox, large)
    outbox.put_ping(flush_one)
    outbox.put_control(PONG)
    put(outbox, last)
    outbox.put_ping(flush_two)
    outbox.set_connected(False)

    outbox.keep_messages_only()

    # Messages in order, then one PING per waiting flush: its PONG still means
    # "everything before it was sent".
    assert outbox.frames == [first, large, last, PING, PING]
    assert outbox.frames[1] is large  # the large payload is not copied
    assert [type(frame) for frame in outbox.frames[3:]] == [ControlFrame, ControlFrame]
    assert outbox.size == sum(frame_size(frame) for frame in outbox.frames)
    assert outbox.pop_pong_waiter() is flush_one
    assert outbox.pop_pong_waiter() is flush_two
    assert outbox.pop_pong_waiter() is None


def test_keep_messages_only_after_failed_attempts_keeps_one_ping_per_flush() -> None:
    outbox = new_outbox(connected=False)
    log: list[str] = []
    flush = waiter(log, "flush")
    message = pub("a", b"1")
    put(outbox, message)
    outbox.put_ping(flush)
    for _ in range(3):  # one per lost connection before anything went out
        outbox.keep_messages_only()
    assert outbox.frames == [message, PING]
    assert list(outbox.pong_waiters) == [flush]


def test_keep_messages_only_puts_back_the_whole_message_of_a_remainder() -> None:
    outbox = new_outbox()
    whole = pub("a", b"hello")
    queued = pub("b", b"later")
    outbox.requeue([remainder(whole[4:], whole), ControlFrame(SUB), queued])
    outbox.keep_messages_only()
    assert outbox.frames == [whole, queued]
    assert type(outbox.frames[0]) is bytes
    assert outbox.size == len(whole) + len(queued)


def test_resubscriptions_go_ahead_of_the_buffered_messages() -> None:
    outbox = new_outbox(connected=False)
    message = pub("a", b"1")
    put(outbox, message)
    outbox.keep_messages_only()
    outbox.put_control_first([SUB, b"SUB b 2\r\n"])
    outbox.set_connected(True)
    assert outbox.take() == [SUB, b"SUB b 2\r\n", message]


def test_requeued_frames_go_ahead_of_newer_ones_with_their_size() -> None:
    outbox = new_outbox()
    newer = pub("n", b"new")
    put(outbox, newer)
    unsent: list[Frame] = [large_pub("a", b"x" * 50), pub("b", b"2")]
    outbox.requeue(unsent)
    assert outbox.frames == [*unsent, newer]
    assert outbox.size == sum(frame_size(frame) for frame in outbox.frames)


# --- the writer's side ----------------------------------------------------------------


def test_take_hands_over_everything_and_makes_room() -> None:
    outbox = new_outbox()
    message = pub("a", b"1")
    put(outbox, message)
    outbox.put_ping(None)
    assert outbox.take() == [message, PING]
    assert (outbox.frames, outbox.size) == ([], 0)
    assert outbox.out_msgs == 1  # counters are totals, not what is queued


def test_a_waiting_writer_is_woken_by_a_message() -> None:
    outbox = new_outbox()
    message = pub("a", b"1")
    with writer_waiting_in_take(outbox) as writer:
        put(outbox, message)
        assert writer.outcome() == [message]


def test_stop_writer_lets_the_writer_send_what_is_queued_then_ends_it() -> None:
    outbox = new_outbox()
    message = pub("a", b"1")
    put(outbox, message)
    outbox.stop_writer(discard=False)
    assert outbox.take() == [message]
    assert outbox.take() is None


def test_stop_writer_with_discard_drops_the_queue() -> None:
    outbox = new_outbox()
    put(outbox, pub("a", b"1"))
    outbox.stop_writer(discard=True)
    assert outbox.take() is None
    assert (outbox.frames, outbox.size) == ([], 0)


def test_stop_writer_wakes_a_writer_waiting_for_frames() -> None:
    outbox = new_outbox()
    writer = InThread(outbox.take)
    wait_until(lambda: outbox.writer_waiting, "the writer waits in take()")
    outbox.stop_writer(discard=False)
    assert writer.outcome() is None


def test_a_new_connection_clears_the_stop_of_the_old_writer() -> None:
    outbox = new_outbox()
    outbox.stop_writer(discard=False)  # the lost connection's writer was told to end
    outbox.set_connected(True)
    message = pub("a", b"1")
    with writer_waiting_in_take(outbox) as writer:  # the new writer waits, not ends
        put(outbox, message)
        assert writer.outcome() == [message]


# --- publishers waiting for room ------------------------------------------------------


def test_a_publisher_waiting_for_room_goes_once_the_writer_takes() -> None:
    message = pub("a", b"0123456789")
    outbox = new_outbox(limit=30)
    put(outbox, message)
    publisher = publisher_blocked_for_room(outbox, message)
    assert outbox.take() == [message]
    publisher.outcome()  # no error
    assert outbox.frames == [message]
    assert outbox.out_msgs == 2


@pytest.mark.parametrize("discard", [False, True], ids=["flush", "discard"])
def test_a_publisher_waiting_for_room_is_released_by_stop_writer(discard: bool) -> None:
    message = pub("a", b"0123456789")
    outbox = new_outbox(limit=30)
    put(outbox, message)
    publisher = publisher_blocked_for_room(outbox, message)
    started = time.monotonic()
    outbox.stop_writer(discard=discard)
    with pytest.raises(ConnectionClosedError):
        publisher.outcome()
    assert time.monotonic() - started < STEP_TIMEOUT
    assert outbox.room_waiters == 0


def test_a_publisher_waiting_for_room_is_refused_when_the_connection_drops() -> None:
    message = pub("a", b"0123456789")
    outbox = new_outbox(limit=30)
    put(outbox, message)
    publisher = publisher_blocked_for_room(outbox, message)
    outbox.set_connected(False)
    with pytest.raises(OutboundBufferLimitError, match="disconnected"):
        publisher.outcome()
    assert outbox.frames == [message]


# --- direct sends and their remainder -------------------------------------------------


def test_claim_direct_only_for_an_idle_writer_on_a_live_connection() -> None:
    outbox = new_outbox()
    assert not outbox.claim_direct(1)  # no writer waiting yet
    with writer_waiting_in_take(outbox):
        assert outbox.claim_direct(5)
        assert not outbox.claim_direct(5)  # one direct sender at a time
        outbox.release_direct()
        assert outbox.writer_waiting  # nothing was queued: the writer sleeps on
        assert outbox.claim_direct(5)
        outbox.release_direct()
    disconnected = new_outbox(connected=False)
    with writer_waiting_in_take(disconnected):
        assert not disconnected.claim_direct(5)
    assert (outbox.out_msgs, outbox.out_bytes) == (2, 10)  # counted once claimed


def test_an_unsent_tail_reaches_the_waiting_writer_before_what_was_queued_meanwhile() -> None:
    outbox = new_outbox()
    whole = pub("a", b"hello")
    queued = pub("b", b"x")
    with writer_waiting_in_take(outbox) as writer:
        assert outbox.claim_direct(5)
        put(outbox, queued)  # the writer wakes, finds a direct send going on, waits
        wait_until(lambda: outbox.writer_waiting, "the writer waits for the direct send")
        outbox.release_direct(remainder(whole[6:], whole))
        taken = writer.outcome()
    assert taken == [whole[6:], queued]
    assert type(taken[0]) is Remainder
    assert taken[0].whole is whole


def test_release_direct_with_a_tail_counts_its_bytes() -> None:
    outbox = new_outbox()
    whole = pub("a", b"hello")
    with writer_waiting_in_take(outbox) as writer:
        assert outbox.claim_direct(5)
        outbox.release_direct(remainder(whole[3:], whole))
        assert writer.outcome() == [whole[3:]]
    # take() made the room again; the message itself was counted once, at the claim.
    assert (outbox.size, outbox.out_msgs, outbox.out_bytes) == (0, 1, 5)


# --- messages queued behind a direct send (issue 33) --------------------------------


def claim_on_another_thread(outbox: Outbox, payload_size: int) -> bool:
    """``claim_direct`` as a caller's thread that is not the main one (nothing queues
    behind the main thread's claim); the claim stays held for the test to release."""
    claimed: list[bool] = []
    claimer = threading.Thread(target=lambda: claimed.append(outbox.claim_direct(payload_size)))
    claimer.start()
    claimer.join(10)
    return claimed == [True]


def test_a_message_queues_behind_a_direct_send_and_that_caller_takes_it() -> None:
    outbox = new_outbox()
    first, second, third = pub("a", b"1"), pub("b", b"22"), pub("c", b"333")
    assert not outbox.queue_behind_direct(second, 2)  # nobody writing: the usual path
    with writer_waiting_in_take(outbox) as writer:
        assert claim_on_another_thread(outbox, 1)
        assert outbox.queue_behind_direct(second, 2)
        assert outbox.queue_behind_direct(third, 3)
        assert outbox.writer_waiting  # not woken for them: the direct writer takes them
        assert outbox.release_direct(None, take_more=True) == [second, third]
        assert outbox.sending  # still the caller's turn
        assert outbox.release_direct(None, take_more=True) is None  # nothing more
        assert not outbox.sending and outbox.writer_waiting
        put(outbox, first)
        assert writer.outcome() == [first]
    # Each counted once: 1 + 2 + 3 payload bytes, and put() counts a whole frame.
    assert (outbox.out_msgs, outbox.out_bytes) == (4, 6 + len(first))


def test_control_frames_and_large_payloads_stay_for_the_writer() -> None:
    outbox = new_outbox()
    message = pub("a", b"1")
    with writer_waiting_in_take(outbox) as writer:
        assert claim_on_another_thread(outbox, 1)
        assert outbox.queue_behind_direct(message, 1)
        outbox.put_control(b"SUB x 1\r\n")  # the writer wakes, finds the claim, waits
        wait_until(lambda: outbox.writer_waiting, "the writer waits for the direct send")
        assert outbox.release_direct(None, take_more=True) is None  # a control frame
        taken = writer.outcome()
    assert taken == [message, b"SUB x 1\r\n"] and type(taken[1]) is ControlFrame


def test_what_a_cut_write_of_several_messages_leaves_goes_to_the_writer_first() -> None:
    outbox = new_outbox()
    one, two, three = pub("a", b"1"), pub("b", b"22"), pub("c", b"333")
    later = pub("d", b"4")
    with writer_waiting_in_take(outbox) as writer:
        assert claim_on_another_thread(outbox, 1)
        outbox.queue_behind_direct(two, 2)
        outbox.queue_behind_direct(three, 3)
        assert outbox.release_direct(None, take_more=True) == [two, three]
        put(outbox, later)
        wait_until(lambda: outbox.writer_waiting, "the writer waits for the direct send")
        cut = len(two) + 4  # "two" went out, "three" only in part
        outbox.release_direct(_unsent_messages([two, three], cut))
        taken = writer.outcome()
    assert taken == [three[4:], later]
    assert type(taken[0]) is Remainder and taken[0].whole is three
    assert _unsent_messages([one, two], 0) == [one, two]  # nothing went out: all whole
    assert _unsent_messages([one, two], len(one) + len(two)) == []
