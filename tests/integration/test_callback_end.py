"""How a callback subscription ends: nothing is handed to the callback after
``unsubscribe()`` returns, ``max_msgs``/``unsubscribe(limit=n)`` hand over exactly n,
``drain()`` still hands over what is queued, and neither ``drain(timeout)`` nor
``close()`` waits on a callback that does not return."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable

import pytest

import nats_sync
from nats_sync.msg import Msg
from nats_sync.testing import NatsServer

ClientFactory = Callable[..., nats_sync.Client]

#: An upper bound generous enough for a loaded 2-core machine, not a speed check.
SLACK = 1.5


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def publish_and_flush(nc: nats_sync.Client, subject: str, count: int) -> None:
    for n in range(count):
        nc.publish(subject, b"%d" % n)
    nc.flush(5)


# --- nothing after unsubscribe() --------------------------------------------------------


@pytest.mark.timeout(30)
def test_unsubscribe_from_the_callback_stops_it_and_counts_the_rest(
    connect: ClientFactory,
) -> None:
    errors: list[BaseException] = []
    nc = connect(error_cb=errors.append)
    calls: list[bytes] = []
    holder: list[nats_sync.Subscription] = []

    def on_msg(msg: Msg) -> None:
        calls.append(msg.data)
        sub = holder[0]
        assert wait_until(lambda: sub.received == 5)  # all five queued behind this one
        sub.unsubscribe()

    holder.append(nc.subscribe("end.self", cb=on_msg))
    nc.flush(5)
    publish_and_flush(connect(), "end.self", 5)
    sub = holder[0]
    assert wait_until(lambda: sub.discarded == 4)
    nc.flush(5)
    time.sleep(0.1)  # a wrong extra call would land here
    assert calls == [b"0"]
    assert sub.discarded == 4 and sub.pending_msgs == 0 and sub.is_closed
    assert errors == []  # no BadSubscriptionError from repeated unsubscribes


@pytest.mark.timeout(30)
def test_unsubscribe_from_another_thread_ends_delivery_after_the_running_call(
    connect: ClientFactory,
) -> None:
    nc = connect()
    entered = threading.Event()
    release = threading.Event()
    calls: list[bytes] = []

    def on_msg(msg: Msg) -> None:
        calls.append(msg.data)
        entered.set()
        release.wait(10)

    sub = nc.subscribe("end.other", cb=on_msg)
    nc.flush(5)
    publish_and_flush(connect(), "end.other", 10)
    assert entered.wait(5)
    assert wait_until(lambda: sub.received == 10)
    sub.unsubscribe()
    release.set()
    # What the delivery thread took with the running message is counted once it returns.
    assert wait_until(lambda: sub.discarded == 9)
    nc.flush(5)
    time.sleep(0.1)
    assert calls == [b"0"] and sub.pending_msgs == 0


@pytest.mark.timeout(30)
def test_unsubscribe_with_a_limit_below_what_is_queued_hands_over_exactly_the_limit(
    connect: ClientFactory,
) -> None:
    nc = connect()
    calls: list[bytes] = []
    holder: list[nats_sync.Subscription] = []

    def on_msg(msg: Msg) -> None:
        calls.append(msg.data)
        if len(calls) == 1:
            sub = holder[0]
            assert wait_until(lambda: sub.received == 20)
            sub.unsubscribe(limit=5)

    holder.append(nc.subscribe("end.limit", cb=on_msg))
    nc.flush(5)
    publish_and_flush(connect(), "end.limit", 20)
    sub = holder[0]
    assert wait_until(lambda: sub.discarded == 15)
    assert calls == [b"%d" % n for n in range(5)]
    assert sub.is_closed


@pytest.mark.timeout(30)
def test_unsubscribe_with_a_limit_above_what_arrived_hands_over_exactly_the_limit(
    connect: ClientFactory,
) -> None:
    nc = connect()
    calls: list[bytes] = []
    sub = nc.subscribe("end.later", cb=lambda msg: calls.append(msg.data))
    nc.flush(5)
    publisher = connect()
    publish_and_flush(publisher, "end.later", 3)
    assert wait_until(lambda: sub.received == 3)
    sub.unsubscribe(limit=5)
    publish_and_flush(publisher, "end.later", 10)
    assert wait_until(lambda: sub.is_closed)
    nc.flush(5)
    assert wait_until(lambda: len(calls) == 5)
    time.sleep(0.1)
    assert calls == [b"0", b"1", b"2", b"0", b"1"]
    assert sub.received == 5 and sub.discarded == 0


@pytest.mark.timeout(30)
def test_max_msgs_hands_over_exactly_max_msgs(connect: ClientFactory) -> None:
    nc = connect()
    calls: list[bytes] = []
    sub = nc.subscribe("end.max", cb=lambda msg: calls.append(msg.data), max_msgs=4)
    nc.flush(5)
    publish_and_flush(connect(), "end.max", 10)
    assert wait_until(lambda: sub.is_closed and len(calls) == 4)
    nc.flush(5)
    time.sleep(0.1)
    assert calls == [b"0", b"1", b"2", b"3"]
    assert sub.received == 4


@pytest.mark.timeout(30)
def test_drain_still_hands_over_everything_queued(connect: ClientFactory) -> None:
    nc = connect()
    release = threading.Event()
    calls: list[bytes] = []

    def on_msg(msg: Msg) -> None:
        release.wait(10)
        calls.append(msg.data)

    sub = nc.subscribe("end.drain", cb=on_msg)
    nc.flush(5)
    publish_and_flush(connect(), "end.drain", 20)
    assert wait_until(lambda: sub.received == 20)
    threading.Timer(0.2, release.set).start()
    sub.drain(timeout=10)
    assert calls == [b"%d" % n for n in range(20)]
    assert sub.discarded == 0


@pytest.mark.timeout(30)
def test_close_discards_what_is_queued_for_a_callback(connect: ClientFactory) -> None:
    nc = connect()
    entered = threading.Event()
    release = threading.Event()
    calls: list[bytes] = []

    def on_msg(msg: Msg) -> None:
        calls.append(msg.data)
        entered.set()
        release.wait(10)

    sub = nc.subscribe("end.close", cb=on_msg)
    nc.flush(5)
    publish_and_flush(connect(), "end.close", 10)
    assert entered.wait(5)
    assert wait_until(lambda: sub.received == 10)
    nc.close()
    release.set()
    assert wait_until(lambda: sub.discarded == 9)
    time.sleep(0.1)
    assert calls == [b"0"]


# --- drain(timeout) and close() do not wait on a stuck callback ------------------------


@pytest.mark.timeout(30)
def test_drain_with_a_stuck_callback_returns_within_its_timeout_and_closes(
    connect: ClientFactory,
) -> None:
    nc = connect()
    release = threading.Event()
    after_close: list[BaseException] = []
    calls: list[bytes] = []

    def stuck(msg: Msg) -> None:
        calls.append(msg.data)
        release.wait(10)
        try:
            msg.respond(b"late")
        except nats_sync.Error as err:
            after_close.append(err)

    nc.subscribe("stuck.drain", cb=stuck)
    nc.flush(5)
    publisher = connect()
    publisher.publish("stuck.drain", b"1", reply="nobody.listens")
    publisher.publish("stuck.drain", b"2", reply="nobody.listens")
    publisher.flush(5)
    assert wait_until(lambda: len(calls) == 1)
    started = time.monotonic()
    with pytest.raises(nats_sync.DrainTimeoutError):
        nc.drain(timeout=0.5)
    elapsed = time.monotonic() - started
    assert elapsed < 0.5 + SLACK, f"drain(timeout=0.5) took {elapsed:.2f}s"
    assert nc.is_closed
    release.set()
    assert wait_until(lambda: len(after_close) == 1)
    assert isinstance(after_close[0], nats_sync.ConnectionClosedError)
    time.sleep(0.1)
    assert calls == [b"1"]  # the second message is not handed over after close


@pytest.mark.timeout(30)
def test_close_with_a_stuck_callback_returns_promptly(connect: ClientFactory) -> None:
    nc = connect()
    release = threading.Event()
    calls: list[bytes] = []
    publish_errors: list[BaseException] = []

    def stuck(msg: Msg) -> None:
        calls.append(msg.data)
        release.wait(10)
        try:
            nc.publish("after.close", b"x")
        except nats_sync.Error as err:
            publish_errors.append(err)

    nc.subscribe("stuck.close", cb=stuck)
    nc.flush(5)
    publish_and_flush(connect(), "stuck.close", 2)
    assert wait_until(lambda: len(calls) == 1)
    started = time.monotonic()
    nc.close()
    elapsed = time.monotonic() - started
    assert elapsed < SLACK, f"close() took {elapsed:.2f}s"
    release.set()
    assert wait_until(lambda: len(publish_errors) == 1)
    assert isinstance(publish_errors[0], nats_sync.ConnectionClosedError)
    time.sleep(0.1)
    assert calls == [b"0"]


@pytest.mark.timeout(30)
def test_close_with_a_stuck_error_callback_returns_promptly(connect: ClientFactory) -> None:
    release = threading.Event()
    entered = threading.Event()

    def stuck_error_cb(error: BaseException) -> None:
        entered.set()
        release.wait(10)

    def raising(msg: Msg) -> None:
        raise ValueError("boom")

    nc = connect(error_cb=stuck_error_cb)
    nc.subscribe("stuck.err", cb=raising)
    nc.flush(5)
    publish_and_flush(connect(), "stuck.err", 1)
    assert entered.wait(5)
    started = time.monotonic()
    nc.close()
    elapsed = time.monotonic() - started
    release.set()
    assert elapsed < SLACK, f"close() took {elapsed:.2f}s"


_STUCK_SCRIPT = textwrap.dedent(
    """
    import sys, threading, time
    import nats_sync

    nc = nats_sync.connect(sys.argv[1])
    entered = threading.Event()

    def stuck(msg):
        entered.set()
        time.sleep(60)  # never returns in this process's lifetime

    nc.subscribe("stuck.exit", cb=stuck)
    nc.flush(5)
    nc.publish("stuck.exit", b"1")
    nc.publish("stuck.exit", b"2")
    assert entered.wait(5)
    started = time.monotonic()
    try:
        nc.drain(timeout=0.5)
    except nats_sync.DrainTimeoutError:
        pass
    print(f"drained {time.monotonic() - started:.2f} closed={nc.is_closed}", flush=True)
    """
)


@pytest.mark.timeout(60)
def test_the_process_exits_normally_with_a_stuck_callback(nats_server: NatsServer) -> None:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", _STUCK_SCRIPT, nats_server.url],
        check=False,
        capture_output=True,
        text=True,
        timeout=30,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    assert "closed=True" in result.stdout
    assert float(result.stdout.split()[1]) < 0.5 + SLACK
    # Far less than the callback's 60 s: the stuck thread did not hold the process.
    assert elapsed < 20, f"the process took {elapsed:.1f}s to exit"
