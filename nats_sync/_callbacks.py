"""The callback thread: runs user callbacks (error_cb, closed_cb, ...) one at a time.

How it works: any thread :meth:`CallbackRunner.submit`s a call into an unbounded
``SimpleQueue`` (callbacks are rare and must never be dropped); one thread, started by
the handler, runs them in order. An exception in a user callback is logged and the
thread carries on. ``stop()`` queues a marker, so everything submitted before it still
runs.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable
from typing import Any

log = logging.getLogger("nats_sync")

_STOP = object()


class CallbackRunner:
    """Runs submitted calls in order on the thread that calls :meth:`run`."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def submit(self, fn: Callable[..., Any] | None, *args: Any) -> None:
        """Queues ``fn(*args)``; a None ``fn`` (an unset callback) is ignored."""
        if fn is not None:
            self._calls.put((fn, args))

    def stop(self) -> None:
        """Ends :meth:`run` after everything already submitted has run."""
        self._calls.put(_STOP)

    def run(self) -> None:
        """The callback thread's body."""
        while True:
            item = self._calls.get()
            if item is _STOP:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                log.exception("nats_sync: callback %r raised", fn)
