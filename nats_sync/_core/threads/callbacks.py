"""The callback thread: runs user callbacks (error_cb, closed_cb, ...) one at a time;
and the internal status listeners.

How it works: any thread :meth:`CallbackRunner.submit`s a call into an unbounded
``SimpleQueue`` (callbacks are rare and must never be dropped); one thread, started by
the handler, runs them in order. An exception in a user callback is logged and the
thread carries on. ``stop()`` queues a marker, so everything submitted before it still
runs; once the thread has ended, ``submit`` runs the call on the caller's thread (a done
callback added to a finished future after ``close()`` must still run, as in
``concurrent.futures``).

`Listeners` holds internal listeners: of connection events (`StatusListeners`:
JetStream readers use them) and of the errors handed to ``error_cb`` (micro services
use them); it owns a tuple replaced whole under its lock, so telling needs no lock and
runs on whichever thread saw the event.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

log = logging.getLogger("nats_sync")

_STOP = object()

E = TypeVar("E")


class CallbackRunner:
    """Runs submitted calls in order on the thread that calls :meth:`run`."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._finished = False

    def submit(self, fn: Callable[..., Any] | None, *args: Any) -> None:
        """Queues ``fn(*args)``; a None ``fn`` (an unset callback) is ignored.

        After the callback thread has ended, runs the call at once on this thread.
        """
        if fn is None:
            return
        with self._lock:
            if not self._finished:
                self._calls.put((fn, args))
                return
        _call(fn, args)

    def stop(self) -> None:
        """Ends :meth:`run` after everything already submitted has run."""
        self._calls.put(_STOP)

    def run(self) -> None:
        """The callback thread's body."""
        while True:
            item = self._calls.get()
            if item is _STOP:
                break
            _call(*item)
        # Calls submitted after the marker still run here, in order; only once none is
        # left (the last one has returned) do later submits run on their own thread.
        while True:
            with self._lock:
                try:
                    item = self._calls.get_nowait()
                except queue.Empty:
                    self._finished = True
                    return
            if item is not _STOP:
                _call(*item)


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("nats_sync: callback %r raised", fn)


class Listeners(Generic[E]):
    """Internal listeners of one kind of event (a status word, an error)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: tuple[Callable[[E], None], ...] = ()

    def add(self, listener: Callable[[E], None]) -> Callable[[], None]:
        """Registers ``listener``; returns the call that removes it."""
        with self._lock:
            self._listeners = (*self._listeners, listener)

        def remove() -> None:
            with self._lock:
                self._listeners = tuple(known for known in self._listeners if known is not listener)

        return remove

    def tell(self, event: E) -> None:
        """Calls every listener with ``event`` on this thread; one that raises is logged."""
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:
                log.exception("nats_sync: listener %r failed on %s", listener, event)


#: The internal listeners of ``"disconnected"``, ``"reconnected"`` and ``"closed"``.
StatusListeners = Listeners[str]
