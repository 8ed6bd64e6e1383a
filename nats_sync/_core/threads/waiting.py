"""Waiting that Ctrl-C cannot break: each sleeper on a lock of its own, outside the owner's.

How it works: ``threading.Condition.wait`` releases the caller's lock before its ``try``
and takes it back in its ``finally``; a ``KeyboardInterrupt`` landing in either gap makes
the caller's ``with`` release a lock it no longer holds (a ``RuntimeError`` in place of
the interrupt, or, when another thread took the lock meanwhile, that thread's hold
released). Here a thread never sleeps inside the owner's lock. Under the lock it looks
at the owner's state and, when it must wait, enlists a fresh pre-acquired lock (its
sleeper) in a :class:`Sleepers`; it leaves the lock by the ordinary ``with`` exit and
sleeps on its sleeper, outside. Wakers release every sleeper enlisted, under the owner's
lock. An interrupt anywhere leaves at worst a sleeper enlisted that nobody sleeps on: the
next wake-up releases it for nothing. Since every wake-up wakes all, such a leftover never
swallows a wake-up meant for a live sleeper.

Threads: any. State: a :class:`Sleepers` list, read and changed only under its owner's
lock (its truth value may be read without it, to skip taking the lock when nobody waits:
a sleeper enlists before its last look at the state, so a waker that changes the state
first and looks second either is seen or sees the sleeper).
"""

from __future__ import annotations

import _thread
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

T = TypeVar("T")


class Sleepers(list[_thread.LockType]):
    """The threads waiting on one owner's condition, each on its own lock.

    A list of the sleepers' locks, so that its truth value (read on hot paths, without
    the owner's lock) costs no Python call. Every method must be called with the
    owner's lock held.
    """

    __slots__ = ()

    def enlist(self) -> _thread.LockType:
        """A new sleeper (a held lock) that :meth:`wake_all` will release."""
        sleeper = _thread.allocate_lock()
        sleeper.acquire()
        self.append(sleeper)
        return sleeper

    def leave(self, sleeper: _thread.LockType) -> None:
        """Takes back a sleeper that timed out (nothing if it was woken meanwhile)."""
        if self and self[-1] is sleeper:
            self.pop()
            return
        try:
            self.remove(sleeper)
        except ValueError:
            pass

    def wake_all(self) -> None:
        """Releases every sleeper enlisted."""
        while self:
            self.pop().release()


def sleep(sleeper: _thread.LockType, timeout: float | None) -> bool:
    """Sleeps on ``sleeper`` until woken (True) or ``timeout`` seconds pass (False)."""
    if timeout is None:
        return sleeper.acquire()
    return sleeper.acquire(True, max(timeout, 0.0))


def wait_until(
    lock: AbstractContextManager[Any],
    sleepers: Sleepers,
    ready: Callable[[], T],
    deadline: float | None,
) -> T | None:
    """Waits until ``ready()`` (called with ``lock`` held) returns something other than
    None, and returns it; None once ``deadline`` (``time.monotonic()``) has passed.

    Must be called without ``lock`` held; wakers call ``sleepers.wake_all()`` under it
    after a change that can make ``ready`` true.
    """
    while True:
        with lock:
            # Enlisted before the look: a waker that changes the state without the lock
            # and then looks at ``sleepers`` either is seen here or sees this sleeper.
            sleeper = sleepers.enlist()
            try:
                found = ready()
            except BaseException:
                sleepers.leave(sleeper)
                raise
            remaining = None if deadline is None else deadline - time.monotonic()
            if found is not None or (remaining is not None and remaining <= 0):
                sleepers.leave(sleeper)
                return found
        woken = False
        try:
            woken = sleep(sleeper, remaining)
        finally:
            if not woken:  # timed out or interrupted: nobody will release it now
                with lock:
                    sleepers.leave(sleeper)


class Signal:
    """A one-time event for the thread that waits on it (a flush's PONG).

    :meth:`set` may come from any thread, any number of times; :meth:`wait` is safe to
    interrupt (nothing to undo).
    """

    __slots__ = ("_lock", "_set")

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()
        self._set = False

    def set(self) -> None:
        """Marks the event and wakes the waiter."""
        if not self._set:
            self._set = True
            try:
                self._lock.release()
            except RuntimeError:
                pass  # two set() at once: the other released it

    def is_set(self) -> bool:
        """Whether :meth:`set` was called."""
        return self._set

    def wait(self, timeout: float | None) -> bool:
        """Until :meth:`set` (True) or ``timeout`` seconds pass (False)."""
        if self._set:
            return True
        if sleep(self._lock, timeout):
            try:
                self._lock.release()  # for a later wait(): the event stays set
            except RuntimeError:
                pass  # a second set() released it meanwhile: it is released either way
            return True
        return self._set
