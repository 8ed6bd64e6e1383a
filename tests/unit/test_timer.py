"""The timer thread (``_core.threads.timer``): scheduled calls, their order, stop.

Each test starts a timer of its own on a real thread (``lifecycle.start_thread``) and
stops it after. Deadlines are set in the past wherever the order is what matters, so
nothing depends on how fast the machine is: a due call only has to run within a
generous bound. Ctrl-C in a caller of ``schedule`` (a ``request_future`` in the main
thread) is walked point by point, as in ``test_waiting``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial

import pytest
from interrupt_points import points, run_interrupted

from nats_sync._core.threads.lifecycle import start_thread
from nats_sync._core.threads.timer import Timer

pytestmark = pytest.mark.timeout(20)

TIMER = ("nats_sync/_core/threads/timer.py",)
#: A bound on any wait a test expects to end (never reached when the code is right).
BOUND = 10.0
#: Far enough never to come during a test.
FAR = 3600.0


class Calls:
    """Records the calls the timer makes, in order, and lets a test wait for them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.names: list[str] = []
        self.threads: list[str] = []
        self._changed = threading.Condition(self._lock)

    def fn(self, name: str) -> Callable[[], None]:
        def call() -> None:
            with self._lock:
                self.names.append(name)
                self.threads.append(threading.current_thread().name)
                self._changed.notify_all()

        call.__qualname__ = f"call_{name}"
        return call

    def wait_for(self, count: int) -> list[str]:
        """The names once ``count`` calls ran (fails after BOUND seconds)."""
        with self._lock:
            assert self._changed.wait_for(lambda: len(self.names) >= count, BOUND), self.names
            return list(self.names)


def stop_and_join(timer: Timer) -> None:
    timer.stop()
    assert timer.thread is not None
    timer.thread.join(BOUND)
    assert not timer.thread.is_alive()


@pytest.fixture
def timer() -> Iterator[Timer]:
    timer = Timer()
    timer.start(start_thread)
    yield timer
    stop_and_join(timer)


def past(seconds: float = 0.0) -> float:
    """A deadline ``seconds`` after one already a minute gone."""
    return time.monotonic() - 60.0 + seconds


# --- start ---------------------------------------------------------------------------


def test_start_runs_the_timer_on_a_thread_of_its_role() -> None:
    started: list[str] = []

    def recording_start(body: Callable[[], None], role: str) -> threading.Thread:
        started.append(role)
        return start_thread(body, role)

    timer = Timer()
    assert timer.thread is None
    timer.start(recording_start)
    try:
        assert started == ["timer"]
        assert timer.thread is not None
        assert timer.thread.name == "nats_sync-timer"
        assert timer.thread.daemon
        calls = Calls()
        timer.schedule(past(), calls.fn("a"))
        assert calls.wait_for(1) == ["a"]
        assert calls.threads == ["nats_sync-timer"]  # run on the timer thread
    finally:
        stop_and_join(timer)


# --- order ---------------------------------------------------------------------------


def test_due_calls_run_in_deadline_order_not_in_schedule_order() -> None:
    timer = Timer()
    calls = Calls()
    for name, at in [("c", 3.0), ("a", 1.0), ("d", 4.0), ("b", 2.0)]:
        timer.schedule(past(at), calls.fn(name))
    assert len(timer) == 4  # scheduled before the thread starts: held until then
    timer.start(start_thread)
    try:
        assert calls.wait_for(4) == ["a", "b", "c", "d"]
        assert len(timer) == 0
    finally:
        stop_and_join(timer)


def test_equal_deadlines_run_in_the_order_they_were_scheduled() -> None:
    timer = Timer()
    calls = Calls()
    deadline = past()
    names = [f"n{i}" for i in range(20)]
    for name in names:
        timer.schedule(deadline, calls.fn(name))
    timer.start(start_thread)
    try:
        assert calls.wait_for(20) == names
    finally:
        stop_and_join(timer)


def test_the_same_function_scheduled_twice_runs_twice(timer: Timer) -> None:
    calls = Calls()
    fn = calls.fn("twice")
    timer.schedule(past(), fn)
    timer.schedule(past(), fn)
    assert calls.wait_for(2) == ["twice", "twice"]


def test_functions_are_never_compared() -> None:
    # Equal deadlines: the tie-breaker decides, never fn (functions do not order).
    timer = Timer()
    deadline = past()
    timer.schedule(deadline, lambda: None)
    timer.schedule(deadline, lambda: None)
    timer.schedule(deadline, print)
    assert len(timer) == 3


# --- when ----------------------------------------------------------------------------


def test_a_deadline_in_the_past_runs_at_once(timer: Timer) -> None:
    calls = Calls()
    timer.schedule(time.monotonic() - 1e6, calls.fn("old"))
    assert calls.wait_for(1) == ["old"]


def test_a_call_never_runs_before_its_deadline(timer: Timer) -> None:
    calls = Calls()
    ran_at: list[float] = []
    deadline = time.monotonic() + 0.05
    timer.schedule(deadline, lambda: (ran_at.append(time.monotonic()), calls.fn("on time")()))
    assert calls.wait_for(1) == ["on time"]
    assert ran_at[0] >= deadline


def test_a_later_call_waits_while_a_due_one_runs(timer: Timer) -> None:
    calls = Calls()
    timer.schedule(time.monotonic() + FAR, calls.fn("later"))
    timer.schedule(past(), calls.fn("now"))
    assert calls.wait_for(1) == ["now"]
    assert len(timer) == 1  # "later" is still waiting
    assert calls.names == ["now"]


def test_an_earlier_call_wakes_a_timer_sleeping_towards_a_later_one(timer: Timer) -> None:
    calls = Calls()
    timer.schedule(time.monotonic() + FAR, calls.fn("far"))
    time.sleep(0.02)  # most likely asleep towards "far" by now (either way must work)
    timer.schedule(past(), calls.fn("soon"))
    assert calls.wait_for(1) == ["soon"]


def test_a_call_wakes_a_timer_with_nothing_scheduled(timer: Timer) -> None:
    time.sleep(0.02)  # most likely asleep with no deadline by now
    calls = Calls()
    timer.schedule(past(), calls.fn("first"))
    assert calls.wait_for(1) == ["first"]


def test_a_call_may_schedule_again(timer: Timer) -> None:
    # As the keepalive does: each run schedules the next.
    calls = Calls()
    left = [3]

    def again() -> None:
        calls.fn(f"run{left[0]}")()
        left[0] -= 1
        if left[0]:
            timer.schedule(past(), again)

    timer.schedule(past(), again)
    assert calls.wait_for(3) == ["run3", "run2", "run1"]
    assert len(timer) == 0


def test_calls_run_outside_the_timer_lock(timer: Timer) -> None:
    # len() takes the lock: a call that asks for it would deadlock if run under it.
    calls = Calls()
    seen: list[int] = []
    timer.schedule(past(), lambda: (seen.append(len(timer)), calls.fn("x")()))
    assert calls.wait_for(1) == ["x"]
    assert seen == [0]


# --- failures ------------------------------------------------------------------------


def test_an_exception_in_a_call_is_logged_and_the_timer_goes_on(
    timer: Timer, caplog: pytest.LogCaptureFixture
) -> None:
    calls = Calls()

    def broken() -> None:
        raise ValueError("boom")

    with caplog.at_level(logging.ERROR, logger="nats_sync"):
        timer.schedule(past(1.0), broken)
        timer.schedule(past(2.0), calls.fn("after"))  # same batch, after the broken one
        assert calls.wait_for(1) == ["after"]
        timer.schedule(past(), calls.fn("next batch"))
        assert calls.wait_for(2) == ["after", "next batch"]
    failed = [r for r in caplog.records if "timer call" in r.getMessage()]
    assert len(failed) == 1
    assert failed[0].levelno == logging.ERROR
    assert failed[0].exc_info is not None and failed[0].exc_info[0] is ValueError
    assert "broken" in failed[0].getMessage()  # the call is named
    assert timer.thread is not None and timer.thread.is_alive()


# --- stop ----------------------------------------------------------------------------


def test_stop_ends_the_thread_and_what_is_scheduled_never_runs() -> None:
    timer = Timer()
    timer.start(start_thread)
    calls = Calls()
    timer.schedule(time.monotonic() + 0.05, calls.fn("soon"))
    timer.schedule(time.monotonic() + FAR, calls.fn("far"))
    timer.stop()
    assert len(timer) == 0
    assert timer.thread is not None
    timer.thread.join(BOUND)
    assert not timer.thread.is_alive()
    time.sleep(0.1)  # past "soon": had it been kept, nothing is left to run it now
    assert calls.names == []


def test_stop_wakes_a_timer_with_nothing_scheduled() -> None:
    timer = Timer()
    timer.start(start_thread)
    time.sleep(0.02)  # most likely asleep with no deadline by now
    timer.stop()
    assert timer.thread is not None
    timer.thread.join(BOUND)
    assert not timer.thread.is_alive()


def test_schedule_after_stop_is_ignored() -> None:
    timer = Timer()
    timer.stop()
    timer.schedule(past(), lambda: None)
    assert len(timer) == 0
    timer.start(start_thread)  # a timer stopped before it started ends at once
    assert timer.thread is not None
    timer.thread.join(BOUND)
    assert not timer.thread.is_alive()


def test_stop_twice_is_harmless(timer: Timer) -> None:
    timer.stop()
    timer.stop()
    assert timer.thread is not None
    timer.thread.join(BOUND)
    assert not timer.thread.is_alive()
    assert len(timer) == 0


def test_a_call_may_stop_the_timer(timer: Timer) -> None:
    calls = Calls()
    timer.schedule(past(1.0), lambda: (calls.fn("stopper")(), timer.stop()))
    timer.schedule(time.monotonic() + FAR, calls.fn("never"))
    assert timer.thread is not None
    timer.thread.join(BOUND)
    assert not timer.thread.is_alive()
    assert calls.names == ["stopper"]


def test_calls_already_due_when_stop_comes_still_run_before_the_thread_ends() -> None:
    # The timer takes every due entry at once and runs them outside its lock: a stop()
    # meanwhile cannot take them back. What it does promise: nothing runs once the
    # thread has ended (close() joins it after stop()).
    timer = Timer()
    calls = Calls()
    entered = threading.Event()
    go_on = threading.Event()

    def first() -> None:
        entered.set()
        assert go_on.wait(BOUND)
        calls.fn("first")()

    timer.schedule(past(1.0), first)
    timer.schedule(past(2.0), calls.fn("second"))
    timer.start(start_thread)
    assert entered.wait(BOUND)
    timer.stop()  # while "first" runs, "second" taken with it
    go_on.set()
    assert timer.thread is not None
    timer.thread.join(BOUND)
    assert not timer.thread.is_alive()
    assert calls.names == ["first", "second"]
    timer.schedule(past(), calls.fn("after"))
    assert len(timer) == 0
    assert calls.names == ["first", "second"]


# --- Ctrl-C in schedule --------------------------------------------------------------


def test_ctrl_c_at_any_point_of_schedule_leaves_the_timer_working() -> None:
    runs = 0
    for at in points():
        timer = Timer()
        timer.start(start_thread)
        try:
            timer.schedule(time.monotonic() + FAR, lambda: None)
            calls = Calls()
            outcome = run_interrupted(partial(timer.schedule, past(), calls.fn("cut")), at, TIMER)
            runs += 1
            assert not timer._lock.locked(), outcome.hook.where
            assert len(timer) in (1, 2), outcome.hook.where  # queued or not, never twice
            if outcome.interrupted is None:
                assert calls.wait_for(1) == ["cut"]
                break
        finally:
            stop_and_join(timer)
    assert runs > 3


class RecordingWakeup:
    """Stands for the timer's condition: records the earliest deadline each time the
    timer thread is woken, which is what a sleeping timer then sleeps towards."""

    def __init__(self, timer: Timer) -> None:
        self.timer = timer
        self.sleeps_towards: float | None = None

    def notify_all(self) -> None:
        entries = self.timer._entries
        self.sleeps_towards = entries[0][0] if entries else None


def test_after_ctrl_c_in_schedule_the_next_schedule_still_wakes_the_timer() -> None:
    # No thread: the timer, had it one, would be asleep towards ``sleeps_towards``;
    # once a schedule() returns normally, nothing queued may be earlier than that.
    for at in points():
        timer = Timer()
        wakeup = RecordingWakeup(timer)
        timer._wakeup = wakeup  # type: ignore[assignment]
        timer.schedule(time.monotonic() + FAR, lambda: None)
        assert wakeup.sleeps_towards is not None
        outcome = run_interrupted(partial(timer.schedule, past(1.0), lambda: None), at, TIMER)
        timer.schedule(past(2.0), lambda: None)  # a request_future after the Ctrl-C
        earliest = timer._entries[0][0]
        assert wakeup.sleeps_towards is not None
        assert wakeup.sleeps_towards <= earliest, f"timer not woken after {outcome.hook.where}"
        if outcome.interrupted is None:
            break
