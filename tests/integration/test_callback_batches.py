"""Callback subscriptions take their messages in batches: order, errors in a batch,
and the pending limits still account for every message."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.msg import Msg

ClientFactory = Callable[..., nats_sync.Client]


@pytest.mark.timeout(30)
def test_order_holds_across_batches_and_a_raising_callback_skips_one_message(
    connect: ClientFactory,
) -> None:
    errors: list[BaseException] = []
    nc = connect(error_cb=errors.append)
    seen: list[int] = []
    done = threading.Event()

    def on_msg(msg: Msg) -> None:
        number = int(msg.data)
        seen.append(number)
        if number == 4_999:
            done.set()
        if number % 1_000 == 999:
            raise ValueError(f"bad {number}")

    nc.subscribe("cb.batches", cb=on_msg)
    nc.flush(5)
    publisher = connect()
    for n in range(5_000):
        publisher.publish("cb.batches", b"%d" % n)
    publisher.flush(10)
    assert done.wait(10)
    assert seen == list(range(5_000))
    deadline = time.monotonic() + 5
    while len(errors) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [str(e) for e in errors] == [f"bad {n}" for n in (999, 1999, 2999, 3999, 4999)]


@pytest.mark.timeout(30)
def test_a_slow_callback_drops_and_counts_what_does_not_fit(connect: ClientFactory) -> None:
    slow_errors: list[BaseException] = []
    nc = connect(error_cb=slow_errors.append)
    release = threading.Event()
    handled: list[bytes] = []

    def on_msg(msg: Msg) -> None:
        release.wait(10)
        handled.append(msg.data)

    sub = nc.subscribe("cb.slow", cb=on_msg, pending_msgs_limit=100)
    nc.flush(5)
    publisher = connect()
    for n in range(2_000):
        publisher.publish("cb.slow", b"%d" % n)
    publisher.flush(10)
    nc.flush(10)  # everything sent before this PONG has been read and queued or dropped
    release.set()
    deadline = time.monotonic() + 10
    while sub.delivered != len(handled) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sub.received == 2_000
    assert sub.dropped > 0 and sub.delivered + sub.dropped == 2_000
    assert len(handled) == sub.delivered
    assert any(isinstance(e, nats_sync.SlowConsumerError) for e in slow_errors)
