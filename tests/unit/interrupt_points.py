"""Ctrl-C at each point of one module's code, one run per point (shared by the unit tests
of the waiting primitives, the timer, the thread helpers and the pings).

A ``sys.setprofile`` hook raises ``KeyboardInterrupt`` in the calling thread at the Nth
point where CPython would run a pending signal handler in the given files: a
function's start, right after a call it makes returns (a C call such as
``lock.acquire()``, or a Python one) and as it returns. Walking N = 1, 2, ... until a
run ends without the hook firing reaches every such point of that run, as
``tests/integration/test_interrupts_traced.py`` does for whole client calls. The hook
may also act just before a C call starts (``before_c_call``), which lets a test play a
waker that runs exactly while the caller is about to block, in the same thread.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

#: A walk never needs this many runs (each stops at the first run the hook outlives).
MAX_POINTS = 500


def points() -> range:
    """The ``at`` values of a walk; the walk breaks at the first run the hook outlives
    (a test that reaches the end of this range fails: its walk did not end)."""
    return range(1, MAX_POINTS)


def _in(frame: FrameType | None, files: tuple[str, ...]) -> bool:
    return frame is not None and frame.f_code.co_filename.endswith(files)


@dataclass
class InterruptAt:
    """The hook: ``KeyboardInterrupt`` at the ``at``-th point reached in ``files``."""

    at: int
    files: tuple[str, ...]
    before_c_call: Callable[[FrameType, Any], None] | None = None
    seen: int = 0
    fired: bool = False
    where: str = field(default="")

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            if self.before_c_call is not None and _in(frame, self.files):
                self.before_c_call(frame, arg)
            return
        if self.fired:
            return
        if event in ("call", "c_return"):
            reachable = _in(frame, self.files)
        elif event == "return":
            reachable = _in(frame, self.files) or _in(frame.f_back, self.files)
        else:
            return
        if not reachable:
            return
        self.seen += 1
        if self.seen == self.at:
            self.fired = True
            self.where = (
                f"{event} {getattr(arg, '__name__', '')} at {frame.f_code.co_name}:{frame.f_lineno}"
            )
            raise KeyboardInterrupt(f"at point {self.at}")


@dataclass
class Outcome:
    """One interrupted run: the hook, and what the call returned or raised."""

    hook: InterruptAt
    result: object = None
    interrupted: KeyboardInterrupt | None = None


def run_interrupted(
    call: Callable[[], object],
    at: int,
    files: tuple[str, ...],
    before_c_call: Callable[[FrameType, Any], None] | None = None,
) -> Outcome:
    """Runs ``call`` with ``KeyboardInterrupt`` at its ``at``-th point in ``files``."""
    hook = InterruptAt(at, files, before_c_call)
    outcome = Outcome(hook)
    # No collection meanwhile: a gc callback another library registered (hypothesis
    # has one) would run inside the call, its return counted as a point of ours, and
    # the interrupt raised there would be swallowed by the collector.
    collecting = gc.isenabled()
    gc.disable()
    sys.setprofile(hook)
    try:
        outcome.result = call()
    except KeyboardInterrupt as interrupt:
        if not hook.fired:
            raise
        outcome.interrupted = interrupt
    finally:
        sys.setprofile(None)
        if collecting:
            gc.enable()
    return outcome
