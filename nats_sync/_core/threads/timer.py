"""The timer: one thread that runs short calls at given times.

How it works: any thread :meth:`Timer.schedule`\\ s ``fn`` for a monotonic deadline; the
entries sit in a heap under the timer's own condition, and the timer thread (started
by :meth:`Timer.start`) sleeps until the earliest one, pops every entry that is due and
runs them in deadline order *outside* the condition, so a call may schedule again (the
keepalive does). The calls are the client's own (keepalive PINGs, stale detection,
``request_future`` deadlines), never user code, and must not block. An exception in
one is logged and the thread carries on.

State: ``_entries`` and ``_stopped`` under ``_wakeup``; nothing else is shared.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("nats_sync")


class Timer:
    """Runs scheduled calls on one thread of its own."""

    __slots__ = ("_entries", "_lock", "_order", "_stopped", "_wakeup", "thread")

    def __init__(self) -> None:
        # Only the timer thread waits on it, and wakers always notify_all(): a notify()
        # that Ctrl-C cut between its release and its removal of a waiter leaves that
        # spent waiter first in line, where the next notify() would be lost on it.
        # Entered as ``with self._lock``, never ``with self._wakeup``: a Condition's
        # __enter__ is Python code, and a Ctrl-C as it returns would keep the lock held.
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        # (deadline, tie-breaker, fn): the tie-breaker keeps fn out of comparisons.
        self._entries: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._stopped = False
        self.thread: threading.Thread | None = None

    def start(self, start_thread: Callable[[Callable[[], None], str], threading.Thread]) -> None:
        """Starts the timer thread with ``start_thread(body, role)``."""
        self.thread = start_thread(self._run, "timer")

    def schedule(self, deadline: float, fn: Callable[[], None]) -> None:
        """Runs ``fn()`` on the timer thread at ``deadline`` (``time.monotonic()``)."""
        with self._lock:
            if self._stopped:
                return
            entry = (deadline, next(self._order), fn)
            first = not self._entries or entry < self._entries[0]
            try:
                heapq.heappush(self._entries, entry)
            finally:
                # Woken even when a Ctrl-C (a caller on the main thread) comes between
                # the push and the wake-up: else the new first entry would wait for the
                # timer's next wake-up, and so would every later one behind it.
                if first:
                    self._wakeup.notify_all()

    def stop(self) -> None:
        """Ends the timer thread; what is still scheduled never runs."""
        with self._lock:
            self._stopped = True
            self._entries.clear()
            self._wakeup.notify_all()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _run(self) -> None:
        """The timer thread's body."""
        while True:
            with self._lock:
                while True:
                    if self._stopped:
                        return
                    now = time.monotonic()
                    if self._entries and self._entries[0][0] <= now:
                        break
                    self._wakeup.wait(self._entries[0][0] - now if self._entries else None)
                due = []
                while self._entries and self._entries[0][0] <= now:
                    due.append(heapq.heappop(self._entries)[2])
            for fn in due:
                try:
                    fn()
                except Exception:
                    log.exception("nats_sync: timer call %r failed", fn)
