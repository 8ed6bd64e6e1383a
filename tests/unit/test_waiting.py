"""The waiting primitives (``_core.threads.waiting``): Sleepers, sleep, wait_until, Signal.

Each is checked on its own: the normal path, timeouts of zero or below, deadlines in the
past, wake-ups that change nothing, several sleepers at once, and Ctrl-C at every point
of a wait (a profile hook raising ``KeyboardInterrupt`` there, see ``interrupt_points``):
after each, the owner's lock is free, at most one sleeper is left enlisted, the next
wake-up takes it away, and a later wait works.
"""

from __future__ import annotations

import _thread
import threading
import time
from collections.abc import Callable
from functools import partial
from types import FrameType
from typing import Any

import pytest
from interrupt_points import points, run_interrupted

from nats_sync._core.threads.waiting import Signal, Sleepers, sleep, wait_until

pytestmark = pytest.mark.timeout(20)

WAITING = ("nats_sync/_core/threads/waiting.py",)
#: A bound on any wait a test expects to end (never reached when the code is right).
BOUND = 10.0


def in_thread(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Runs ``fn`` on a helper thread; its result lands in the returned list."""
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    thread.start()
    return thread, result


def lock_is_free(lock: _thread.LockType) -> bool:
    if not lock.acquire(False):
        return False
    lock.release()
    return True


class Owner:
    """What the client's components are to wait_until: a lock, a state, its sleepers."""

    def __init__(self, lock: Any = None) -> None:
        self.lock = threading.Lock() if lock is None else lock
        self.sleepers = Sleepers()
        self.value: object = None
        self.looks = 0

    def ready(self) -> object:
        if isinstance(self.lock, _thread.LockType):
            assert self.lock.locked(), "ready() runs under the owner's lock"
        self.looks += 1
        return self.value

    def change(self, value: object) -> None:
        with self.lock:
            self.value = value
            self.sleepers.wake_all()

    def wait(self, deadline: float | None) -> object:
        return wait_until(self.lock, self.sleepers, self.ready, deadline)


def wait_for_sleepers(owner: Owner, count: int) -> None:
    """Until ``count`` threads are enlisted (bounded)."""
    end = time.monotonic() + BOUND
    while True:
        with owner.lock:
            if len(owner.sleepers) >= count:
                return
        assert time.monotonic() < end, "the waiters never enlisted"
        time.sleep(0.001)


# --- Sleepers ------------------------------------------------------------------------


def test_enlist_gives_a_held_lock_and_wake_all_releases_every_one() -> None:
    sleepers = Sleepers()
    assert not sleepers
    first, second = sleepers.enlist(), sleepers.enlist()
    assert sleepers
    assert list(sleepers) == [first, second]
    assert first.locked() and second.locked()
    assert first is not second
    sleepers.wake_all()
    assert not sleepers
    assert not first.locked() and not second.locked()


def test_wake_all_with_nobody_enlisted_does_nothing() -> None:
    sleepers = Sleepers()
    sleepers.wake_all()
    sleepers.wake_all()
    assert sleepers == []


def test_leave_takes_back_the_last_one_a_middle_one_or_nothing() -> None:
    sleepers = Sleepers()
    a, b, c = sleepers.enlist(), sleepers.enlist(), sleepers.enlist()
    sleepers.leave(c)  # the common case: the last one enlisted
    assert list(sleepers) == [a, b]
    sleepers.leave(a)  # one in the middle
    assert list(sleepers) == [b]
    sleepers.wake_all()
    sleepers.leave(b)  # woken meanwhile: nothing to take back, no error
    assert sleepers == []
    assert a.locked() and c.locked()  # leaving never releases: nobody sleeps on them


# --- sleep ---------------------------------------------------------------------------


def test_sleep_returns_true_at_once_on_a_released_sleeper() -> None:
    sleeper = _thread.allocate_lock()
    assert sleep(sleeper, None) is True
    assert sleeper.locked()  # taken: woken means acquired
    sleeper.release()
    assert sleep(sleeper, 0.0) is True


@pytest.mark.parametrize("timeout", [0.0, -1.0, -1e9])
def test_sleep_with_no_time_left_does_not_block(timeout: float) -> None:
    # acquire(True, -1) would block for ever: a timeout below zero must mean "now".
    sleeper = _thread.allocate_lock()
    sleeper.acquire()
    thread, result = in_thread(lambda: sleep(sleeper, timeout))
    thread.join(BOUND)
    assert not thread.is_alive(), f"sleep({timeout}) blocked"
    assert result == [False]


def test_sleep_times_out_on_a_sleeper_nobody_releases() -> None:
    sleeper = _thread.allocate_lock()
    sleeper.acquire()
    assert sleep(sleeper, 0.01) is False
    assert sleeper.locked()


def test_sleep_is_woken_by_another_thread() -> None:
    sleeper = _thread.allocate_lock()
    sleeper.acquire()
    thread, result = in_thread(lambda: sleep(sleeper, BOUND))
    sleeper.release()
    thread.join(BOUND)
    assert result == [True]


# --- wait_until ----------------------------------------------------------------------


def test_ready_at_the_first_look_returns_without_sleeping() -> None:
    owner = Owner()
    owner.value = "here"
    assert owner.wait(None) == "here"
    assert owner.looks == 1
    assert owner.sleepers == []
    assert lock_is_free(owner.lock)


@pytest.mark.parametrize("value", [0, False, "", b"", []])
def test_a_falsy_value_other_than_none_is_ready(value: object) -> None:
    owner = Owner()
    owner.value = value
    assert owner.wait(time.monotonic() + BOUND) is value
    assert owner.sleepers == []


@pytest.mark.parametrize("ago", [0.0, 1.0, 1e6])
def test_a_deadline_already_passed_looks_once_and_gives_none(ago: float) -> None:
    owner = Owner()
    assert owner.wait(time.monotonic() - ago) is None
    assert owner.looks == 1
    assert owner.sleepers == []
    assert lock_is_free(owner.lock)


def test_a_deadline_already_passed_still_returns_what_is_ready() -> None:
    owner = Owner()
    owner.value = 7
    assert owner.wait(time.monotonic() - 1.0) == 7


def test_it_times_out_with_none_and_leaves_no_sleeper() -> None:
    owner = Owner()
    assert owner.wait(time.monotonic() + 0.02) is None
    assert owner.looks >= 2  # a look after the sleep, at the deadline
    assert owner.sleepers == []
    assert lock_is_free(owner.lock)


def test_a_waker_in_another_thread_ends_the_wait() -> None:
    owner = Owner()
    thread, result = in_thread(lambda: owner.wait(None))
    wait_for_sleepers(owner, 1)
    owner.change("done")
    thread.join(BOUND)
    assert result == ["done"]
    assert owner.sleepers == []


def test_a_wake_up_that_changes_nothing_sends_it_back_to_sleep() -> None:
    owner = Owner()
    thread, result = in_thread(lambda: owner.wait(time.monotonic() + BOUND))
    wait_for_sleepers(owner, 1)
    with owner.lock:
        looks = owner.looks
        owner.sleepers.wake_all()  # nothing changed: ready() stays None
    wait_for_sleepers(owner, 1)  # it looked again and enlisted anew
    assert thread.is_alive()
    assert owner.looks > looks
    owner.change("now")
    thread.join(BOUND)
    assert result == ["now"]


def test_one_wake_up_wakes_every_waiter() -> None:
    owner = Owner()
    waiters = [in_thread(lambda: owner.wait(time.monotonic() + BOUND)) for _ in range(4)]
    wait_for_sleepers(owner, 4)
    owner.change("all")
    for thread, result in waiters:
        thread.join(BOUND)
        assert result == ["all"]
    assert owner.sleepers == []


def test_an_exception_in_ready_propagates_and_leaves_no_sleeper() -> None:
    owner = Owner()

    def broken() -> object:
        raise ValueError("bad state")

    with pytest.raises(ValueError, match="bad state"):
        wait_until(owner.lock, owner.sleepers, broken, None)
    assert owner.sleepers == []
    assert lock_is_free(owner.lock)


def test_an_rlock_works_as_the_owner_lock() -> None:
    # Any context manager will do as the owner's lock.
    owner = Owner(threading.RLock())
    thread, result = in_thread(lambda: owner.wait(time.monotonic() + BOUND))
    wait_for_sleepers(owner, 1)
    owner.change(1)
    thread.join(BOUND)
    assert result == [1]
    assert owner.sleepers == []


# --- wait_until under Ctrl-C ---------------------------------------------------------


def wake_as_it_blocks(owner: Owner, value: object) -> Callable[[FrameType, Any], None]:
    """A waker that runs just before the waiting thread blocks on its sleeper (the
    ``acquire`` in ``sleep``): the wait is woken at a known moment, with no other thread."""
    woke: list[bool] = []

    def before(frame: FrameType, called: Any) -> None:
        if frame.f_code.co_name == "sleep" and not woke:
            woke.append(True)
            owner.change(value)

    return before


@pytest.mark.parametrize("bounded", [False, True], ids=["no-deadline", "deadline"])
def test_ctrl_c_at_any_point_of_a_wait_leaves_the_owner_usable(bounded: bool) -> None:
    runs = 0
    for at in points():
        owner = Owner()
        deadline = time.monotonic() + BOUND if bounded else None
        outcome = run_interrupted(
            partial(owner.wait, deadline), at, WAITING, wake_as_it_blocks(owner, "woken")
        )
        runs += 1
        assert lock_is_free(owner.lock), f"lock held after {outcome.hook.where}"
        # At worst one sleeper left enlisted that nobody sleeps on...
        assert len(owner.sleepers) <= 1, outcome.hook.where
        if outcome.interrupted is None:
            assert outcome.result == "woken"
            assert owner.sleepers == []
            break
        # ... which the next wake-up takes away, and the next wait works.
        owner.change("again")
        assert owner.sleepers == []
        assert owner.wait(time.monotonic() + BOUND) == "again"
    assert runs > 5, "the walk reached too few points to mean anything"


def test_ctrl_c_at_any_point_never_swallows_a_wake_up_for_a_live_waiter() -> None:
    for at in points():
        owner = Owner()
        outcome = run_interrupted(
            partial(owner.wait, None), at, WAITING, wake_as_it_blocks(owner, "woken")
        )
        with owner.lock:
            owner.value = None
            left = len(owner.sleepers)  # what the interrupt left enlisted, if anything
        # A waiter in another thread, enlisted besides that leftover...
        thread, result = in_thread(partial(owner.wait, time.monotonic() + BOUND))
        wait_for_sleepers(owner, left + 1)
        # ... is woken by the next change.
        owner.change("live")
        thread.join(BOUND)
        assert result == ["live"], outcome.hook.where
        assert owner.sleepers == []
        if outcome.interrupted is None:
            break


# --- Signal --------------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [0.0, -1.0, 0.01])
def test_an_unset_signal_times_out(timeout: float) -> None:
    signal = Signal()
    assert not signal.is_set()
    assert signal.wait(timeout) is False
    assert not signal.is_set()


def test_a_set_signal_stays_set_for_every_later_wait() -> None:
    signal = Signal()
    signal.set()
    assert signal.is_set()
    assert signal.wait(None) is True
    assert signal.wait(0.0) is True
    assert signal.wait(-1.0) is True


def test_set_twice_is_harmless() -> None:
    signal = Signal()
    signal.set()
    signal.set()
    assert signal.wait(0.0) is True
    assert signal.is_set()


def test_set_from_another_thread_wakes_the_waiter() -> None:
    signal = Signal()
    thread, result = in_thread(lambda: signal.wait(None))
    signal.set()
    thread.join(BOUND)
    assert result == [True]
    assert signal.wait(0.0) is True  # the waiter put the lock back: still set


def test_set_after_a_timed_out_wait_is_seen_by_the_next_one() -> None:
    signal = Signal()
    assert signal.wait(0.0) is False
    signal.set()
    assert signal.wait(BOUND) is True


def test_two_sets_racing_release_the_lock_once() -> None:
    # Both saw ``_set`` False, both release: the second finds the lock released and
    # must not raise (played here in one thread: the first set, then the second's
    # release as if it had looked before the first).
    signal = Signal()
    signal.set()
    signal._set = False  # the second set() looked before the first wrote it
    signal.set()
    assert signal.is_set()
    assert signal.wait(0.0) is True


def test_many_threads_setting_at_once_never_raise() -> None:
    for _ in range(20):
        signal = Signal()
        barrier = threading.Barrier(4)
        errors: list[BaseException] = []

        def setter(
            signal: Signal = signal,
            barrier: threading.Barrier = barrier,
            errors: list[BaseException] = errors,
        ) -> None:
            barrier.wait(BOUND)
            try:
                signal.set()
            except BaseException as err:
                errors.append(err)

        threads = [threading.Thread(target=setter, daemon=True) for _ in range(4)]
        for thread in threads:
            thread.start()
        assert signal.wait(BOUND) is True
        for thread in threads:
            thread.join(BOUND)
        assert errors == []
        assert signal.wait(0.0) is True


def set_as_it_blocks(signal: Signal) -> Callable[[FrameType, Any], None]:
    """set() just before the waiting thread blocks in ``sleep``: the acquire succeeds."""

    def before(frame: FrameType, called: Any) -> None:
        if frame.f_code.co_name == "sleep" and not signal.is_set():
            signal.set()

    return before


def test_ctrl_c_at_any_point_of_a_signal_wait_loses_nothing() -> None:
    runs = 0
    for at in points():
        signal = Signal()
        outcome = run_interrupted(partial(signal.wait, None), at, WAITING, set_as_it_blocks(signal))
        runs += 1
        if not signal.is_set():  # interrupted before it could block: set it now
            assert outcome.interrupted is not None
            signal.set()
        # Set, and still set for every later wait, however the interrupted one ended.
        assert signal.wait(0.0) is True, outcome.hook.where
        assert signal.wait(None) is True, outcome.hook.where
        if outcome.interrupted is None:
            assert outcome.result is True
            break
    assert runs > 3


def test_ctrl_c_in_an_unset_signal_wait_leaves_it_waitable() -> None:
    for at in points():
        signal = Signal()
        outcome = run_interrupted(partial(signal.wait, 0.0), at, WAITING)
        assert not signal.is_set()
        assert signal.wait(0.0) is False, outcome.hook.where
        signal.set()
        assert signal.wait(0.0) is True, outcome.hook.where
        if outcome.interrupted is None:
            assert outcome.result is False
            break
