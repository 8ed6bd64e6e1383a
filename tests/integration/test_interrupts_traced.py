"""Ctrl-C at each line a call runs: the client still works after every one (issue 24.1).

For each core call family, a profile hook in the calling thread raises
``KeyboardInterrupt`` at the Nth point of the library's own code where CPython runs
pending signal handlers (every N the call reaches, in turn), as a Ctrl-C landing
there would. After each,
the client must answer a request and a flush, forget the interrupted request (nothing
left in the request mux), give the writer and the reader their turns back, and close
cleanly at the end. The fuzz tests (``test_interrupts.py``) cover the moments between
lines that no line event reaches.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest

import nats_sync

ClientFactory = Callable[..., nats_sync.Client]
LIBRARY = "/nats_sync/"
_WEAKREF_MODULES = ("/_weakrefset.py", "/weakref.py")
#: A call family reaches fewer points than this (the walk stops at the first it outlives).
MAX_LINES = 2000

pytestmark = pytest.mark.timeout(120)


def _library(frame: FrameType | None) -> bool:
    return frame is not None and LIBRARY in frame.f_code.co_filename


class InterruptAt:
    """A ``sys.setprofile`` hook raising KeyboardInterrupt at the ``at``-th point where
    CPython would run a pending signal handler in nats_sync code of this thread: a
    function's start, and right after each call returns (a C call such as
    ``lock.acquire()``, or a Python one; its result is lost, as with a real Ctrl-C).
    Line starts are not such points (a signal is never handled between two plain
    bytecodes), so these are the moments a real Ctrl-C can hit, one by one."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.seen = 0
        self.fired = False
        self.where = ""

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if self.fired:
            return
        if event == "c_return" or event == "call":
            reachable = _library(frame)
        elif event == "return":
            # A weakref callback (a WeakSet forgetting a dead member) runs wherever the
            # collector happens to run; CPython reports what it raises as unraisable and
            # goes on, so no Ctrl-C there can reach the library's caller.
            if frame.f_code.co_filename.endswith(_WEAKREF_MODULES):
                return
            reachable = _library(frame) or _library(frame.f_back)
        else:
            return
        if not reachable:
            return
        self.seen += 1
        if self.seen == self.at:
            self.fired = True
            self.where = (
                f"{event} {getattr(arg, '__name__', '')} at "
                f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}"
            )
            raise KeyboardInterrupt(f"at point {self.at}")


def run_interrupted(call: Callable[[], object], at: int) -> InterruptAt:
    """Runs ``call`` with KeyboardInterrupt at its ``at``-th point; the hook after."""
    hook = InterruptAt(at)
    sys.setprofile(hook)
    try:
        call()
    except KeyboardInterrupt:
        assert hook.fired, "a KeyboardInterrupt nobody sent"
    finally:
        sys.setprofile(None)
    return hook


def assert_usable(nc: nats_sync.Client) -> None:
    """A request and a flush work; nothing of an interrupted call is left behind."""
    # 5 s: an interrupt in the middle of reading the server's bytes reconnects.
    assert nc.request("echo", b"ok", timeout=5).data == b"ok"
    nc.flush(timeout=5)
    handler = nc._handler
    assert handler.debug_snapshot()["requests_in_flight"] == 0
    assert handler.outbox.sending == 0, "a direct send kept its claim"
    conn = handler.connection()
    assert conn is not None
    assert not conn._token._is_owned(), "this thread kept the read token"


@pytest.fixture
def echo(connect: ClientFactory) -> Iterator[None]:
    responder = connect()
    responder.subscribe("echo", cb=lambda msg: msg.respond(msg.data))
    responder.flush(5)
    yield


def walk(nc: nats_sync.Client, call: Callable[[], object]) -> int:
    """Interrupts ``call`` at point 1, 2, ... until it runs to its end; returns how many
    points were interrupted."""
    for at in range(1, MAX_LINES):
        tracer = run_interrupted(call, at)
        try:
            assert_usable(nc)
        except BaseException as err:
            raise AssertionError(
                f"unusable after KeyboardInterrupt at point {at}, "
                f"{getattr(tracer, 'where', '?')}: {err!r}"
            ) from err
        if not tracer.fired:
            assert at > 5, "the call reached almost no point: the hook missed it"
            return at - 1
    pytest.fail(f"the call still ran past {MAX_LINES} points")


def test_request_interrupted_at_every_point(connect: ClientFactory, echo: None) -> None:
    nc = connect()  # no subscription: the requester may read its own reply (lead)
    for _ in range(3):
        nc.request("echo", b"warm", timeout=5)
    lines = walk(nc, lambda: nc.request("echo", b"x", timeout=5))
    assert lines > 20


def test_flush_interrupted_at_every_point(connect: ClientFactory, echo: None) -> None:
    nc = connect()
    nc.request("echo", b"warm", timeout=5)
    assert walk(nc, lambda: nc.flush(timeout=5)) > 5


def test_next_msg_interrupted_at_every_point(connect: ClientFactory, echo: None) -> None:
    nc = connect()
    sub = nc.subscribe("feed")

    def call() -> None:
        nc.publish("feed", b"1")
        sub.next_msg(timeout=5)
        nc.publish("feed", b"2")
        sub.next_msgs(5, timeout=5)

    assert walk(nc, call) > 10
    nc.publish("feed", b"last")
    assert sub.next_msg(timeout=5).data in (b"1", b"2", b"last")


def test_request_batch_interrupted_at_every_point(connect: ClientFactory, echo: None) -> None:
    nc = connect()

    def call() -> None:
        replies = nc.request_batch("echo", [b"a", b"b", b"c"], timeout=5, max_in_flight=2)
        assert [getattr(reply, "data", None) for reply in replies] == [b"a", b"b", b"c"]

    assert walk(nc, call) > 20
