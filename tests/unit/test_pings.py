"""Keepalive PINGs, stale detection and flush (``_core.components.pings``), with no
server: a fake timer that records what is scheduled (the test runs the keepalive by
hand, one interval at a time), a real ``Outbox`` (where the PINGs and their waiters
queue), a fake connection and fake callbacks that record their calls and check that
the pings' own lock is never held around them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial

import pytest
from interrupt_points import points, run_interrupted

from nats_sync._core.components.pings import Pings
from nats_sync._core.proto import PING
from nats_sync._core.threads.outbox import Outbox
from nats_sync._core.transport.options import build_options
from nats_sync._core.transport.pool import parse_server_url
from nats_sync.errors import (
    ConnectionClosedError,
    Error,
    FlushTimeoutError,
    StaleConnectionError,
)

pytestmark = pytest.mark.timeout(20)

PINGS = (
    "nats_sync/_core/components/pings.py",
    "nats_sync/_core/threads/outbox.py",
    "nats_sync/_core/threads/waiting.py",
)
#: A bound on any wait a test expects to end (never reached when the code is right).
BOUND = 10.0
INTERVAL = 30.0
SERVER = parse_server_url("nats://127.0.0.1:4222")


class FakeTimer:
    """Records schedule(deadline, fn); runs nothing by itself."""

    def __init__(self) -> None:
        self.scheduled: list[tuple[float, Callable[[], None]]] = []

    def schedule(self, deadline: float, fn: Callable[[], None]) -> None:
        self.scheduled.append((deadline, fn))


class FakeConnection:
    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        self.shutdowns = 0

    def shutdown(self) -> None:
        self.rig.check_unlocked("conn.shutdown")
        self.rig.events.append("shutdown")
        self.shutdowns += 1


class Rig:
    """One Pings and everything around it."""

    def __init__(self, max_outstanding_pings: int = 2) -> None:
        options = build_options(
            "nats://127.0.0.1:4222",
            ping_interval=INTERVAL,
            max_outstanding_pings=max_outstanding_pings,
        )
        self.timer = FakeTimer()
        self.outbox = Outbox(limit=1 << 20, full_wait=0.1)
        self.conn = FakeConnection(self)
        self.connected = True
        self.events: list[str] = []
        self.lost: list[tuple[FakeConnection, Error]] = []
        self.locked_calls: list[str] = []
        #: What the reader does when woken (nothing unless a test says).
        self.on_wake: Callable[[], None] = lambda: None
        self.wakes = 0
        self.pings = Pings(
            options,
            self.outbox,
            self.timer,  # type: ignore[arg-type]
            self.live,  # type: ignore[arg-type]
            self.on_lost,  # type: ignore[arg-type]
            self.wake_reader,
        )

    def check_unlocked(self, what: str) -> None:
        if self.pings._lock.locked():
            self.locked_calls.append(what)

    def live(self) -> tuple[FakeConnection, object] | None:
        self.check_unlocked("live")
        return (self.conn, SERVER) if self.connected else None

    def on_lost(self, conn: FakeConnection, error: Error) -> None:
        self.check_unlocked("on_lost")
        self.events.append("on_lost")
        self.lost.append((conn, error))
        self.connected = False  # as the handler does: no longer the live connection

    def wake_reader(self) -> None:
        self.wakes += 1
        self.on_wake()

    def keepalive(self) -> None:
        """The timer's turn: runs the keepalive last scheduled."""
        _, fn = self.timer.scheduled[-1]
        fn()

    def pings_queued(self) -> int:
        return sum(1 for frame in self.outbox.frames if frame == PING)


# --- the keepalive -------------------------------------------------------------------


def test_start_schedules_the_first_keepalive_one_interval_away() -> None:
    rig = Rig()
    before = time.monotonic()
    rig.pings.start()
    after = time.monotonic()
    assert len(rig.timer.scheduled) == 1
    deadline, fn = rig.timer.scheduled[0]
    assert before + INTERVAL <= deadline <= after + INTERVAL
    assert fn == rig.pings._keepalive
    assert rig.outbox.frames == []  # nothing sent before the first interval


def test_each_keepalive_schedules_the_next_live_or_not() -> None:
    rig = Rig()
    rig.pings.start()
    for connected in (True, False, True):
        rig.connected = connected
        before = time.monotonic()
        count = len(rig.timer.scheduled)
        rig.keepalive()
        assert len(rig.timer.scheduled) == count + 1
        assert rig.timer.scheduled[-1][0] >= before + INTERVAL


def test_a_keepalive_while_connected_queues_a_ping_with_no_waiter() -> None:
    rig = Rig()
    rig.pings.start()
    rig.keepalive()
    assert rig.outbox.frames == [PING]
    assert list(rig.outbox.pong_waiters) == [None]
    assert rig.lost == []


def test_a_keepalive_while_disconnected_sends_and_counts_nothing() -> None:
    rig = Rig(max_outstanding_pings=1)
    rig.pings.start()
    rig.connected = False
    for _ in range(5):
        rig.keepalive()
    assert rig.outbox.frames == []
    assert rig.lost == []
    rig.connected = True
    rig.keepalive()  # the first PING of the new connection: not stale
    assert rig.pings_queued() == 1
    assert rig.lost == []


@pytest.mark.parametrize("max_outstanding", [1, 2, 5])
def test_past_max_outstanding_pings_the_connection_is_stale(max_outstanding: int) -> None:
    rig = Rig(max_outstanding_pings=max_outstanding)
    rig.pings.start()
    for _ in range(max_outstanding):
        rig.keepalive()
    assert rig.pings_queued() == max_outstanding  # that many PINGs wait for a PONG
    assert rig.lost == []
    rig.keepalive()  # one more interval with none answered: stale
    assert rig.pings_queued() == max_outstanding  # no PING for a stale connection
    assert rig.conn.shutdowns == 1
    assert rig.events == ["shutdown", "on_lost"]  # handed over already shut down
    [(conn, error)] = rig.lost
    assert conn is rig.conn
    assert isinstance(error, StaleConnectionError)
    assert f"{max_outstanding} PINGs to {SERVER} went unanswered" in str(error)


def test_a_stale_connection_is_reported_once_when_it_stops_being_live() -> None:
    rig = Rig(max_outstanding_pings=1)
    rig.pings.start()
    rig.keepalive()
    rig.keepalive()
    assert len(rig.lost) == 1
    for _ in range(3):  # on_lost made it not live: later intervals do nothing
        rig.keepalive()
    assert len(rig.lost) == 1
    assert rig.conn.shutdowns == 1


def test_a_pong_clears_the_count() -> None:
    rig = Rig(max_outstanding_pings=2)
    rig.pings.start()
    rig.keepalive()
    rig.keepalive()
    rig.pings.on_pong()  # the server answered (the oldest): none outstanding now
    rig.keepalive()
    rig.keepalive()
    assert rig.lost == []
    rig.keepalive()
    assert len(rig.lost) == 1


def test_reset_clears_the_count_for_a_new_connection() -> None:
    rig = Rig(max_outstanding_pings=2)
    rig.pings.start()
    rig.keepalive()
    rig.keepalive()
    rig.pings.reset()  # a new connection became live
    rig.keepalive()
    rig.keepalive()
    assert rig.lost == []


def test_after_a_stale_loss_a_reconnect_starts_from_zero() -> None:
    rig = Rig(max_outstanding_pings=1)
    rig.pings.start()
    rig.keepalive()
    rig.keepalive()
    assert len(rig.lost) == 1
    rig.pings.reset()
    rig.connected = True
    rig.keepalive()
    assert len(rig.lost) == 1  # the new connection's first PING: not stale


def test_the_pings_lock_is_never_held_around_calls_out() -> None:
    rig = Rig(max_outstanding_pings=1)
    waiter_calls: list[str] = []
    rig.pings.start()
    rig.outbox.put_ping(lambda error: (rig.check_unlocked("waiter"), waiter_calls.append("w")))
    rig.pings.on_pong()
    rig.keepalive()
    rig.keepalive()  # stale: shutdown and on_lost
    assert waiter_calls == ["w"]
    assert rig.events == ["shutdown", "on_lost"]
    assert rig.locked_calls == []


# --- PONGs ---------------------------------------------------------------------------


def test_a_pong_with_nothing_waiting_is_harmless() -> None:
    rig = Rig()
    rig.pings.on_pong()
    rig.pings.on_pong()
    assert list(rig.outbox.pong_waiters) == []


def test_each_pong_settles_the_oldest_ping_keepalive_or_flush() -> None:
    rig = Rig()
    settled: list[tuple[str, BaseException | None]] = []
    rig.outbox.put_ping(lambda error: settled.append(("first", error)))
    rig.pings.start()
    rig.keepalive()  # a keepalive PING between the two flushes
    rig.outbox.put_ping(lambda error: settled.append(("second", error)))
    rig.pings.on_pong()
    assert settled == [("first", None)]
    rig.pings.on_pong()  # answers the keepalive PING: no waiter to settle
    assert settled == [("first", None)]
    rig.pings.on_pong()
    assert settled == [("first", None), ("second", None)]
    assert list(rig.outbox.pong_waiters) == []


# --- flush ---------------------------------------------------------------------------


def test_flush_queues_a_ping_wakes_the_reader_and_returns_on_its_pong() -> None:
    rig = Rig()
    rig.on_wake = rig.pings.on_pong  # the reader reads the PONG at once
    assert rig.pings.flush(BOUND) is None
    assert rig.wakes == 1
    assert rig.outbox.frames == [PING]  # (the writer would send it)
    assert list(rig.outbox.pong_waiters) == []  # settled


def test_flush_returns_when_the_pong_comes_from_another_thread() -> None:
    rig = Rig()
    errors: list[BaseException] = []

    def flush() -> None:
        try:
            rig.pings.flush(BOUND)
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=flush, daemon=True)
    thread.start()
    end = time.monotonic() + BOUND
    while not rig.outbox.pong_waiters:  # its PING is queued
        assert time.monotonic() < end
        time.sleep(0.001)
    rig.pings.on_pong()
    thread.join(BOUND)
    assert not thread.is_alive()
    assert errors == []


@pytest.mark.parametrize("timeout", [0.0, 0.01])
def test_flush_without_a_pong_times_out(timeout: float) -> None:
    rig = Rig()
    with pytest.raises(FlushTimeoutError, match=f"within {timeout}s"):
        rig.pings.flush(timeout)
    assert rig.pings_queued() == 1
    # The PING went out: its waiter stays in line for the PONG still to come.
    assert len(rig.outbox.pong_waiters) == 1


def test_a_late_pong_of_a_timed_out_flush_does_not_settle_the_next_flush() -> None:
    rig = Rig()
    with pytest.raises(FlushTimeoutError):
        rig.pings.flush(0.0)
    rig.on_wake = rig.pings.on_pong  # one PONG only: the first flush's
    with pytest.raises(FlushTimeoutError):
        rig.pings.flush(0.0)
    answered = [0]

    def both() -> None:
        answered[0] += 2
        rig.pings.on_pong()
        rig.pings.on_pong()

    rig.on_wake = both
    rig.pings.flush(BOUND)  # behind the second flush's PONG, its own
    assert answered == [2]


def test_flush_raises_the_error_the_close_fails_it_with() -> None:
    rig = Rig()
    closed = ConnectionClosedError("the client is closed")
    rig.on_wake = partial(rig.pings.fail_waiters, closed)  # close() comes first
    with pytest.raises(ConnectionClosedError) as raised:
        rig.pings.flush(BOUND)
    assert raised.value is closed


def test_fail_waiters_fails_every_flush_and_skips_keepalive_pings() -> None:
    rig = Rig()
    failed: list[tuple[str, BaseException | None]] = []
    rig.outbox.put_ping(lambda error: failed.append(("a", error)))
    rig.pings.start()
    rig.keepalive()
    rig.outbox.put_ping(lambda error: failed.append(("b", error)))
    error = ConnectionClosedError("closed")
    rig.pings.fail_waiters(error)
    assert failed == [("a", error), ("b", error)]
    assert list(rig.outbox.pong_waiters) == []
    rig.pings.on_pong()  # a PONG after: nobody left to settle
    assert len(failed) == 2


def test_fail_waiters_with_none_waiting_does_nothing() -> None:
    rig = Rig()
    rig.pings.fail_waiters(ConnectionClosedError("closed"))
    assert list(rig.outbox.pong_waiters) == []


# --- Ctrl-C in flush -----------------------------------------------------------------


def flush_or_timeout(rig: Rig) -> str:
    """A flush nothing answers: "timed out" unless interrupted."""
    try:
        rig.pings.flush(0.0)
    except FlushTimeoutError:
        return "timed out"
    return "answered"


def answer_every_ping(rig: Rig) -> None:
    """The reader, woken: a PONG for every PING queued so far."""
    for _ in range(rig.pings_queued()):
        rig.pings.on_pong()


def test_ctrl_c_at_any_point_of_flush_leaves_flush_working() -> None:
    runs = 0
    for at in points():
        rig = Rig()
        outcome = run_interrupted(partial(flush_or_timeout, rig), at, PINGS)
        runs += 1
        assert not rig.outbox.lock.locked(), outcome.hook.where
        assert not rig.pings._lock.locked(), outcome.hook.where
        # Never a waiter without its PING: its flush (or a later one) would wait for a
        # PONG that never comes.
        assert len(rig.outbox.pong_waiters) <= rig.pings_queued(), outcome.hook.where
        # The next flush returns once the reader has answered every PING.
        rig.on_wake = partial(answer_every_ping, rig)
        rig.pings.flush(BOUND)
        assert list(rig.outbox.pong_waiters) == []
        if outcome.interrupted is None:
            assert outcome.result == "timed out"
            break
    assert runs > 5


def answer_pings_before(rig: Rig, count: int) -> None:
    """The reader, woken: PONGs for the ``count`` PINGs that were queued before."""
    for _ in range(count):
        rig.pings.on_pong()


def test_after_ctrl_c_in_flush_the_next_flush_waits_for_its_own_pong() -> None:
    for at in points():
        rig = Rig()
        outcome = run_interrupted(partial(flush_or_timeout, rig), at, PINGS)
        before = rig.pings_queued()
        # The reader answers only the PINGs queued before the next flush's own...
        rig.on_wake = partial(answer_pings_before, rig, before)
        try:
            rig.pings.flush(0.0)
        except FlushTimeoutError:
            pass  # right: its own PONG has not come
        else:
            raise AssertionError(f"settled by an earlier PING's PONG ({outcome.hook.where})")
        # Its own PONG settles it, and nobody waits after.
        rig.pings.on_pong()
        assert list(rig.outbox.pong_waiters) == [], outcome.hook.where
        if outcome.interrupted is None:
            break
